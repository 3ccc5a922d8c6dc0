#!/usr/bin/env python3
"""Sets a measured step (train --timeline FILE) beside the plan that made it.

    python3 bench/gpu/compare_timeline.py out/plan.json timeline.csv [--top 10]

The program writes its last step's copies (h2d, d2h) and compute-stream waits
in the plan's order (runtime/timeline.h); plan.json's steps, taken in index
order, give each row its step: a copy's simulated start and end, and for a
wait the simulated start of the compute step that waits. The rows must match
the plan's (same count and bytes per direction), or the script says where
they part. It prints, per direction, the measured and simulated copy time and
bandwidth, the copies slowest against the simulation, the compute stream's
measured waits against the simulated stall before the same steps, and the
drift (measured minus simulated time at which the compute stream passes each
wait), which shows where in the step the measurement falls behind; and how
long copies of the two directions ran at once, simulated and measured, with
the measured bandwidth of the copies that ran beside the other direction
against those that ran alone (whether copies both ways slow each other).
Standard library only: it runs on a GPU node as it is.
"""

import argparse
import csv
import json
import sys


def plan_rows(plan):
    """The plan's copies by direction and its compute waits, in step order."""
    names = plan.get("task_names", [])
    copies = {"h2d": [], "d2h": []}
    waits = []
    previous_compute_end = 0.0
    for step in plan["steps"]:
        kind = step["kind"]
        if kind in ("prefetch", "offload"):
            buffer = plan["buffers"][step["buffer"]]
            copies["h2d" if kind == "prefetch" else "d2h"].append(
                {"bytes": buffer["bytes"], "start": step["start_ms"], "end": step["end_ms"],
                 "what": f"{kind} of buffer {step['buffer']} (round {step['round']})"})
        if step.get("stream") == "compute":
            task = step.get("task", -1)
            name = names[task] if 0 <= task < len(names) else f"task {task}"
            # A step's stall (its start past the compute stream's previous
            # end) is counted once, at its first wait.
            for n, event in enumerate(step.get("waits", [])):
                waits.append({"event": event, "start": step["start_ms"],
                              "stall": max(0.0, step["start_ms"] - previous_compute_end) if n == 0 else 0.0,
                              "what": f"{name} (round {step['round']})"})
            previous_compute_end = step["end_ms"]
    return copies, waits


def measured_rows(path):
    rows = {"h2d": [], "d2h": [], "wait": []}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            rows[row["kind"]].append({"bytes": int(row["bytes"]), "event": int(row["event"]),
                                      "start": float(row["start_ms"]), "end": float(row["end_ms"])})
    return rows


def gbps(bytes_, ms):
    return bytes_ / (ms * 1e6) if ms > 0 else float("nan")


def overlap_ms(row, others):
    """How long `row` ran beside any of `others` (intervals of one FIFO stream: disjoint)."""
    return sum(max(0.0, min(row["end"], o["end"]) - max(row["start"], o["start"])) for o in others)


def both_ways(sim, got):
    """Copies both ways at once (the duplex question, docs/planner.md): how long the two
    directions overlapped, simulated and measured, and the measured bandwidth of the copies
    that ran beside the other direction against those that ran alone."""
    if not sim["h2d"] or not sim["d2h"]:
        return
    sim_ms = sum(overlap_ms(r, sim["d2h"]) for r in sim["h2d"])
    got_ms = sum(overlap_ms(r, got["d2h"]) for r in got["h2d"])
    print(f"both directions at once: measured {got_ms:.2f} ms, simulated {sim_ms:.2f} ms")
    for direction, other in (("h2d", "d2h"), ("d2h", "h2d")):
        parts = {"beside the other direction": [0, 0.0], "alone": [0, 0.0]}
        for g in got[direction]:
            part = parts["beside the other direction" if overlap_ms(g, got[other]) > 0 else "alone"]
            part[0] += g["bytes"]
            part[1] += g["end"] - g["start"]
        print(f"  {direction}: " + ", ".join(f"{name} {b / 2**20:.1f} MiB at {gbps(b, ms):.1f} GB/s"
                                           for name, (b, ms) in parts.items() if b > 0))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("plan")
    parser.add_argument("timeline")
    parser.add_argument("--top", type=int, default=10, help="rows listed per table (default 10, at least 1)")
    args = parser.parse_args()
    if args.top < 1:
        parser.error("--top: expected at least 1")
    with open(args.plan) as f:
        plan = json.load(f)
    copies, waits = plan_rows(plan)
    measured = measured_rows(args.timeline)

    for direction in ("h2d", "d2h"):
        sim, got = copies[direction], measured[direction]
        if len(sim) != len(got) or any(s["bytes"] != g["bytes"] for s, g in zip(sim, got)):
            where = next((i for i, (s, g) in enumerate(zip(sim, got)) if s["bytes"] != g["bytes"]), min(len(sim), len(got)))
            sys.exit(f"{direction}: the timeline's copies are not the plan's ({len(got)} rows against {len(sim)} "
                     f"steps; they part at copy {where}): another plan's program?")
        if not sim:
            print(f"{direction}: no copies")
            continue
        sim_ms = sum(s["end"] - s["start"] for s in sim)
        got_ms = sum(g["end"] - g["start"] for g in got)
        total = sum(s["bytes"] for s in sim)
        print(f"{direction}: {len(sim)} copies, {total / 2**20:.1f} MiB: measured {got_ms:.2f} ms "
              f"({gbps(total, got_ms):.1f} GB/s), simulated {sim_ms:.2f} ms ({gbps(total, sim_ms):.1f} GB/s)")
        slowest = sorted(range(len(sim)), key=lambda i: (got[i]["end"] - got[i]["start"]) - (sim[i]["end"] - sim[i]["start"]),
                         reverse=True)[:args.top]
        for i in slowest:
            s, g = sim[i], got[i]
            print(f"  copy {i}: {s['what']}, {s['bytes'] / 2**20:.1f} MiB: measured {g['end'] - g['start']:.3f} ms "
                  f"({gbps(s['bytes'], g['end'] - g['start']):.1f} GB/s) from {g['start']:.2f}, simulated "
                  f"{s['end'] - s['start']:.3f} ms from {s['start']:.2f}")

    both_ways(copies, measured)

    got = measured["wait"]
    if len(got) != len(waits) or any(w["event"] != g["event"] for w, g in zip(waits, got)):
        sys.exit(f"wait: the timeline's waits are not the plan's ({len(got)} rows against {len(waits)}): "
                 "another plan's program?")
    got_ms = sum(g["end"] - g["start"] for g in got)
    sim_ms = sum(w["stall"] for w in waits)
    print(f"compute waits: {len(waits)}: measured {got_ms:.2f} ms, simulated stall {sim_ms:.2f} ms "
          f"(plan summary: {plan['summary'].get('stall_ms', float('nan')):.2f} ms)")
    longest = sorted(range(len(waits)), key=lambda i: got[i]["end"] - got[i]["start"], reverse=True)[:args.top]
    for i in longest:
        w, g = waits[i], got[i]
        print(f"  wait {i} on event {w['event']} before {w['what']}: measured {g['end'] - g['start']:.3f} ms at "
              f"{g['start']:.2f}, simulated stall {w['stall']:.3f} ms at {w['start']:.2f}")
    print("drift (measured - simulated time at which the compute stream passes a wait):")
    step = max(1, len(waits) // args.top)
    for i in range(0, len(waits), step):
        print(f"  wait {i} ({waits[i]['what']}): {got[i]['end'] - waits[i]['start']:+.2f} ms")
    if waits:
        print(f"  last wait ({waits[-1]['what']}): {got[-1]['end'] - waits[-1]['start']:+.2f} ms")


if __name__ == "__main__":
    main()
