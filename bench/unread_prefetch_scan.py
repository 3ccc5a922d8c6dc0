#!/usr/bin/python3
"""Prefetches freed unread, over every example model and policy at budgets
from 1.01x its least feasible budget upward: `mplan compare --json` at each
budget, the verifier's `prefetches_freed_unread` summed per policy. The
planner removes such prefetches in a last pass (planner/prefetch_pruning.h);
this scan is the check that none is left anywhere.

    /usr/bin/python3 bench/unread_prefetch_scan.py --mplan build/cli/mplan [--factors 1.01,1.1,2] [--models a,b]

Prints one line per (model, factor) and a total; exits 1 if any plan has
one. The least budget is `mplan bounds`' (Eq. 2 at the least legal sub-batch).
"""

import argparse
import glob
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mplan", required=True)
    ap.add_argument("--factors", default="1.01,1.03,1.1,1.25,1.5,2,3,5")
    ap.add_argument("--models", default="")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per compare")
    args = ap.parse_args()
    stems = sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(ROOT, "examples/models/*.yaml")))
    if args.models:
        stems = [s for s in stems if s in args.models.split(",")]
    total, plans, skipped = 0, 0, []
    for stem in stems:
        model = os.path.join(ROOT, "examples/models", stem + ".yaml")
        bounds = json.loads(subprocess.run([args.mplan, "bounds", model, "--json"], capture_output=True,
                                           text=True, check=True).stdout)
        least = bounds.get("least_round_min_bytes") or bounds["modnn_min_bytes"]
        for factor in args.factors.split(","):
            budget = int(least * float(factor))
            try:
                out = subprocess.run([args.mplan, "compare", model, "--budget", str(budget), "--device", "k40",
                                      "--allow-oversubscribe", "--json"], capture_output=True, text=True,
                                     timeout=args.timeout)
            except subprocess.TimeoutExpired:
                skipped.append(f"{stem} x{factor}: over {args.timeout} s")
                print(f"{stem} x{factor}: timed out", flush=True)
                continue
            if out.returncode != 0:
                skipped.append(f"{stem} x{factor}: {out.stderr.strip()}")
                continue
            rows = json.loads(out.stdout)["policies"]
            unread = {r["policy"]: r.get("prefetches_freed_unread", 0) for r in rows if r["feasible"]}
            plans += len(unread)
            n = sum(unread.values())
            total += n
            worst = ", ".join(f"{p} {c}" for p, c in unread.items() if c > 0)
            print(f"{stem} x{factor} ({budget} B): {len(unread)} plans, {n} prefetches freed unread"
                  + (f" ({worst})" if worst else ""), flush=True)
    print(f"total: {plans} plans, {total} prefetches freed unread")
    for s in skipped:
        print(f"not scanned: {s}")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
