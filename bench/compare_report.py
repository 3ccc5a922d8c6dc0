#!/usr/bin/python3
"""Regenerates docs/benchmarks-compare.md from scratch: `mplan compare` on the
papers' networks, every scheduling policy side by side (planner/policy.h), and
the planner's targets (ResNet-1001's overheads, the moDNN suite, minimum
budgets against Eq. 2, planner wall time, vDNN and SuperNeurons feasibility).

    /usr/bin/python3 bench/compare_report.py --mplan build/cli/mplan [--out docs/benchmarks-compare.md] [--jobs N]

--jobs runs that many `mplan compare` processes at once for the tables (the
figures do not depend on it); the planner wall-time rows always run one at a
time, after the rest.

Everything is simulated with the analytic cost model of the device files
examples/devices/k40.yaml and examples/devices/h100.yaml; nothing is random
(no seeds to pin), so two runs give the same table except the planner's wall
times. The script only reads `mplan compare --json`; it decides nothing itself.
"""

import argparse
import concurrent.futures
import datetime
import json
import os
import platform
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GIB = 1 << 30

# (file, batch): the papers' batches.
K40_MODELS = [
    ("vgg16", 256), ("vgg19", 256), ("resnet34", 256), ("resnet50", 128),
    ("resnet101", 64), ("googlenet", 128), ("densenet121", 64),
]
K40_BUDGETS_GIB = [12, 8, 4]
H100_BUDGET_GIB = 80
# Planner wall time against graph size (SuperNeurons trained ResNet-2500 at batch 1 on a 12 GB K40).
SCALING = [("resnet50", 128), ("resnet101", 64), ("resnet152", 64), ("resnet1001", 64), ("resnet2500", 1)]
BASELINES = ["vdnn-all-m", "vdnn-all-p", "vdnn-conv-m", "vdnn-conv-p", "vdnn-dyn", "vdnn+", "superneurons", "checkpoint",
             "dtr", "checkmate", "modnn"]
ALL_EXAMPLES = ["alexnet", "cifar_small", "densenet121", "every_op", "every_op_nobn", "googlenet", "resnet1001",
                "resnet101", "resnet152", "resnet18", "resnet2500", "resnet34", "resnet50", "vgg16", "vgg19"]


def compare(mplan, model, device, budget_bytes, batch, extra=()):
    # batch 0: the model file's own batch (`mplan compare` refuses --batch 0).
    cmd = [mplan, "compare", os.path.join(ROOT, "examples", "models", model + ".yaml"), "--device", device,
           "--budget", str(budget_bytes), *(["--batch", str(batch)] if batch > 0 else []), "--json", *extra]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def gib(n):
    return "-" if n is None or n < 0 else f"{n / GIB:.2f}"


def fmt_ms(ms):
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:.1f}"


def table(result):
    rows = ["| policy | feasible | sub-batch | time (ms) | overhead | to host (GiB) | to device (GiB) | peak (GiB) "
            "| recomputed | planner (ms) | verified |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for p in result["policies"]:
        planned = "simulated_ms" in p
        if not planned:
            rows.append(f"| {p['policy']} | no | - | - | - | - | - | - | - | {p['planner_ms']:.0f} | - |")
            continue
        v = p.get("violations", -1)
        verified = "yes" if v == 0 else ("-" if v < 0 else f"{v} violations")
        rows.append(f"| {p['policy']} | {'yes' if p['feasible'] else 'no'} | {p['sub_batch']} | "
                    f"{fmt_ms(p['simulated_ms'])} | {100 * p['overhead']:.1f}% | {gib(p['bytes_to_host'])} | "
                    f"{gib(p['bytes_to_device'])} | {gib(p['peak_bytes'])} | {p['recomputed_tasks']} | "
                    f"{p['planner_ms']:.0f} | {verified} |")
    notes = [f"- {p['policy']}: {p['note']}" for p in result["policies"] if p.get("note")]
    return "\n".join(rows) + "\n\n" + "\n".join(notes) + "\n"


def by_policy(result):
    return {p["policy"]: p for p in result["policies"]}


def shortfalls(label, result):
    """Rows where mplan is slower than a feasible baseline, or infeasible where one is feasible."""
    pol = by_policy(result)
    m = pol["mplan"]
    out = []
    for name in BASELINES:
        b = pol.get(name)
        if not b or not b["feasible"]:
            continue
        if not m["feasible"]:
            out.append(f"{label}: mplan infeasible, {name} feasible")
        elif m["simulated_ms"] > b["simulated_ms"] * (1 + 1e-9):
            out.append(f"{label}: mplan {fmt_ms(m['simulated_ms'])} ms > {name} {fmt_ms(b['simulated_ms'])} ms")
    return out


def h100_row(mplan, model, batch):
    """(batch, compare result) on the H100 at the smallest power-of-two multiple of the paper's batch whose
    ideal needs more than 80 GiB."""
    b = batch
    while True:
        probe = compare(mplan, model, "h100", H100_BUDGET_GIB * GIB, b, ["--policies", "ideal", "--no-verify"])
        if probe["ideal_budget_bytes"] > H100_BUDGET_GIB * GIB:
            break
        b *= 2
    return b, compare(mplan, model, "h100", H100_BUDGET_GIB * GIB, b, ["--min-budget"])


def least_budget_row(mplan, model):
    """mplan at `mplan bounds`' Eq. 2 minimum: (feasible, bytes, note on the sub-batch)."""
    bounds = json.loads(subprocess.run(
        [mplan, "bounds", os.path.join(ROOT, "examples", "models", model + ".yaml"), "--json"],
        check=True, capture_output=True, text=True).stdout)
    # Eq. 2 at the least sub-batch that trains correctly: a batchnorm on a
    # vector needs rounds of 2 (one value per channel has no variance;
    # PyTorch refuses it too), and `mplan bounds` prints that least budget.
    eq2 = bounds["modnn_min_bytes"]
    note = None
    if bounds.get("least_round", 1) > 1:
        eq2 = bounds["least_round_min_bytes"]
        note = f"{model}: Eq. 2 at sub-batch {bounds['least_round']}"
    r = compare(mplan, model, "k40", eq2, 0, ["--policies", "mplan", "--no-verify"])
    return by_policy(r)["mplan"]["feasible"], eq2, note


def targets(args, paper, min_budgets, pool):
    """The planner's targets (docs/planner.md), each measured here."""
    md = ["## Targets", "",
          "Each line is measured by this script on the K40 file (simulated).", "",
          "| target | wanted | measured | holds |", "|---|---|---|---|"]
    rows = []
    # ResNet-1001 at batch 64.
    r1001 = {budget: pool.submit(compare, args.mplan, "resnet1001", "k40", budget * GIB, 64,
                                 ["--policies", "ideal,mplan", "--no-verify"]) for budget in (4, 2, 1)}
    least = {model: pool.submit(least_budget_row, args.mplan, model) for model in ([] if args.quick else ALL_EXAMPLES)}
    for budget, wanted in ((4, 15.0), (2, 35.0), (1, 70.0)):
        r = r1001[budget].result()
        m = by_policy(r)["mplan"]
        ov = 100 * m["overhead"] if m["feasible"] else float("inf")
        rows.append((f"ResNet-1001 (batch 64) at {budget} GiB: mplan's overhead over the ideal",
                     f"<= {wanted:.0f}%", f"{ov:.1f}% ({fmt_ms(m['simulated_ms'])} ms, planner "
                     f"{m['planner_ms']:,.0f} ms)", ov <= wanted))
        print(f"targets resnet1001 {budget} GiB done", file=sys.stderr)
    # The moDNN suite at 12 GiB.
    suite = [("vgg16", 256), ("vgg19", 256), ("resnet34", 256), ("resnet50", 128)]
    ovs = []
    for model, batch in suite:
        r = paper.get((model, 12))
        if r is None:
            r = compare(args.mplan, model, "k40", 12 * GIB, batch, ["--policies", "ideal,mplan", "--no-verify"])
        ovs.append(100 * by_policy(r)["mplan"]["overhead"])
    avg = sum(ovs) / len(ovs)
    rows.append(("moDNN suite at 12 GiB (VGG-16/19 bs256, ResNet-34 bs256, ResNet-50 bs128): average overhead",
                 "<= 2%", f"{avg:.2f}% (" + ", ".join(f"{m} {o:.1f}%" for (m, _), o in zip(suite, ovs)) + ")",
                 avg <= 2.0))
    # Minimum feasible budget at or below Eq. 2 for every example model.
    worst = []
    legal_rounds = []
    for model, future in least.items():
        feasible, eq2, note = future.result()
        if note:
            legal_rounds.append(note)
        if not feasible:
            worst.append(f"{model} infeasible at {eq2} B")
        print(f"targets minimum {model} done", file=sys.stderr)
    rows.append(("mplan plans at `mplan bounds`' Eq. 2 minimum, every example model", "feasible",
                 ("all " + str(len(ALL_EXAMPLES)) + " feasible" if not worst else "; ".join(worst)) +
                 ("" if not legal_rounds else " (" + "; ".join(legal_rounds) + ")"), not worst))
    # Planner wall time: one process at a time (the pool is idle here).
    for model, batch, budget, wanted in (("resnet1001", 64, 4, 5000), ("resnet2500", 1, 12, 15000)):
        r = compare(args.mplan, model, "k40", budget * GIB, batch, ["--policies", "mplan", "--no-verify"])
        ms = by_policy(r)["mplan"]["planner_ms"]
        rows.append((f"planner wall time, {model} (batch {batch}) at {budget} GiB, this machine",
                     f"< {wanted / 1000:.0f} s", f"{ms / 1000:.2f} s", ms < wanted))
    # vDNN-all-m trains VGG-16 at 256 in 12 GiB.
    v16 = paper.get(("vgg16", 12))
    if v16:
        p = by_policy(v16)["vdnn-all-m"]
        rows.append(("vdnn-all-m plans VGG-16 (batch 256) in 12 GiB", "feasible",
                     f"feasible, {fmt_ms(p['simulated_ms'])} ms, peak {gib(p['peak_bytes'])} GiB" if p["feasible"]
                     else "infeasible: " + p["note"], p["feasible"]))
    # SuperNeurons feasible wherever vdnn-all-m is.
    bad = []
    for key, r in paper.items():
        pol = by_policy(r)
        if pol["vdnn-all-m"]["feasible"] and not pol["superneurons"]["feasible"]:
            bad.append(f"{key[0]} {key[1]} GiB")
    for (model, batch, device), mins in min_budgets.items():
        a, b = mins.get("vdnn-all-m"), mins.get("superneurons")
        if a is not None and a >= 0 and (b is None or b < 0 or b > a):
            bad.append(f"{model} {device} minimum budget {gib(b)} > {gib(a)} GiB")
    rows.append(("superneurons feasible wherever vdnn-all-m is (every row above; its minimum budget at or below)",
                 "always", "yes" if not bad else "; ".join(bad), not bad))
    for what, wanted, got, ok in rows:
        md.append(f"| {what} | {wanted} | {got} | {'yes' if ok else '**no**'} |")
    md.append("")
    return md


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mplan", required=True, help="the mplan executable")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks-compare.md"))
    ap.add_argument("--quick", action="store_true", help="two models, one budget (a smoke run)")
    ap.add_argument("--jobs", type=int, default=1, help="`mplan compare` processes at once for the tables (default 1)")
    args = ap.parse_args()
    if args.jobs < 1:
        ap.error("--jobs must be at least 1")
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs)
    models = K40_MODELS[:2] if args.quick else K40_MODELS
    budgets = K40_BUDGETS_GIB[:1] if args.quick else K40_BUDGETS_GIB

    md = ["# Scheduling policies compared", "",
          "Generated by `bench/compare_report.py` (do not edit by hand) with `mplan compare`, on "
          f"{datetime.date.today().isoformat()} ({platform.machine()}, {platform.system()}).",
          "Every figure is simulated with the analytic cost model of `examples/devices/k40.yaml` "
          "(12 GiB, the papers' GPU) or `examples/devices/h100.yaml` (80 GiB); nothing is random, so there "
          "are no seeds: a rerun gives the same figures except the planner's wall times.",
          "Policies: see `planner/policy.h` and `docs/planner.md`. Every policy plans the same TDFG, with "
          "in-place ReLU and flatten. *mplan* is mplan's own plan search, never a baseline's plan; on models "
          "with batchnorm its row splits the batch by time alone, as the baselines do (its note gives "
          "`mplan compile`'s default, one round where that costs at most 10% more). *overhead* is "
          "simulated time over the ideal's (unlimited memory, fastest algorithms, full batch: the sum of the "
          "task times, moDNN §V); *peak* is the resident region plus the arena's peak; *verified*: the plan "
          "verifier (`planner/verify.h`) accepts the plan.", ""]
    short = []
    min_budgets = {}
    paper = {}
    md += ["## K40 at 12, 8 and 4 GiB", ""]
    k40 = {(model, budget): pool.submit(compare, args.mplan, model, "k40", budget * GIB, batch,
                                        ["--min-budget"] if i == 0 else [])
           for model, batch in models for i, budget in enumerate(budgets)}
    h100 = {model: pool.submit(h100_row, args.mplan, model, batch) for model, batch in
            ([] if args.quick else K40_MODELS)}
    for model, batch in models:
        for i, budget in enumerate(budgets):
            r = k40[(model, budget)].result()
            if i == 0:
                min_budgets[(model, batch, "k40")] = {p["policy"]: p.get("min_budget_bytes") for p in r["policies"]}
            paper[(model, budget)] = r
            md += [f"### {model} (batch {batch}), K40, {budget} GiB", "",
                   f"ideal: {fmt_ms(r['ideal_ms'])} ms, needs {gib(r['ideal_budget_bytes'])} GiB", "", table(r)]
            short += shortfalls(f"{model} (batch {batch}) K40 {budget} GiB", r)
        print(f"k40 {model} done", file=sys.stderr)

    md += ["## H100 at batches that do not fit 80 GB", ""]
    for model, future in h100.items():
        b, r = future.result()
        min_budgets[(model, b, "h100")] = {p["policy"]: p.get("min_budget_bytes") for p in r["policies"]}
        md += [f"### {model} (batch {b}), H100, {H100_BUDGET_GIB} GiB", "",
               f"ideal: {fmt_ms(r['ideal_ms'])} ms, needs {gib(r['ideal_budget_bytes'])} GiB", "", table(r)]
        short += shortfalls(f"{model} (batch {b}) H100 80 GiB", r)
        print(f"h100 {model} done", file=sys.stderr)

    md += ["## Minimum feasible budget of each policy (GiB)", "",
           "`planner/policy.h` minimum_feasible_budget: moDNN's Eq. 2 minimum when the policy plans there; "
           "else the first feasible point of a grid of 32 budgets from Eq. 2's minimum to twice the ideal's "
           "need, refined by bisection below it to 0.1% of the ideal's need. The layer-wise policies' "
           "feasibility is not monotone in the budget (first-fit placement), so a lower feasible budget "
           "may exist for them between grid points; `-`: not feasible even at twice the ideal's need.", ""]
    names = ["ideal"] + BASELINES + ["mplan"]
    md.append("| model | device | batch | " + " | ".join(names) + " |")
    md.append("|---|---|---:|" + "---:|" * len(names))
    for (model, batch, device), mins in min_budgets.items():
        md.append(f"| {model} | {device} | {batch} | " + " | ".join(gib(mins.get(n)) for n in names) + " |")
        m = mins.get("mplan")
        for n in BASELINES:
            if mins.get(n) is not None and mins[n] >= 0 and (m is None or m < 0 or m > mins[n]):
                short.append(f"{model} (batch {batch}) {device}: mplan's minimum budget {gib(m)} GiB > {n}'s {gib(mins[n])} GiB")
    md.append("")

    md += ["## Planner wall time against graph size", "",
           "K40, 12 GiB, every policy (planner time of each, ms; `-` where infeasible the time is that of "
           "finding out). Measured on the shared 2-core build machine: indicative only.", ""]
    md.append("| model | batch | tasks | " + " | ".join(names) + " |")
    md.append("|---|---:|---:|" + "---:|" * len(names))
    for model, batch in ([] if args.quick else SCALING):
        r = compare(args.mplan, model, "k40", 12 * GIB, batch, ["--no-verify"])
        pol = by_policy(r)
        md.append(f"| {model} | {batch} | {r.get('tasks', '?')} | " +
                  " | ".join(f"{pol[n]['planner_ms']:,.0f}" for n in names) + " |")
        print(f"scaling {model} done", file=sys.stderr)
    md.append("")

    md += targets(args, paper, min_budgets, pool)
    pool.shutdown()

    md += ["## Where mplan is not at or below a baseline", ""]
    md += [f"- {s}" for s in short] if short else ["None: on every row above mplan's simulated time is at or "
                                                    "below every feasible baseline's, and its minimum budget "
                                                    "at or below theirs."]
    md.append("")

    if not args.quick:
        md += ["## Against the papers' own claims", ""]
        v16 = paper.get(("vgg16", 12))
        if v16:
            bounds = json.loads(subprocess.run(
                [args.mplan, "bounds", os.path.join(ROOT, "examples", "models", "vgg16.yaml"), "--json"],
                check=True, capture_output=True, text=True).stdout)
            md.append(f"- vDNN (§I, Fig. 1): VGG-16 at batch 256 needs about 28 GB without vDNN. Here: "
                      f"{gib(bounds['naive_bytes'])} GiB with every block allocated at once (vDNN's network-wide "
                      f"baseline, ReLUs in place), {gib(v16['ideal_budget_bytes'])} GiB with liveness and the "
                      f"fastest algorithms' workspaces (our ideal). vDNN-all with memory-optimal algorithms "
                      f"trains it in 12 GB; so does our vdnn-all-m row.")
        rows = []
        for model in ("vgg16", "vgg19", "resnet34"):
            r = paper.get((model, 12))
            if not r:
                continue
            pol = by_policy(r)
            rows.append((model, pol["modnn"], pol["vdnn-dyn"], pol["vdnn+"], pol["mplan"]))
        def ov(p):
            return f"{100 * p['overhead']:.0f}%" if p["feasible"] else "infeasible"
        md.append("- moDNN (§V-B): at 12 GB on a K40 the average overhead is 8% for moDNN and 40% for vDNN "
                  "(over VGG-16, VGG-19, VGG-101, ResNet-34 and an FCN). Here, at 12 GiB: " +
                  "; ".join(f"{m}: moDNN {ov(a)}, vDNN-dyn {ov(b)}, vDNN+ {ov(c)}, mplan {ov(d)}"
                            for m, a, b, c, d in rows) + ".")
        md.append("")
        md += ["Why ours differ:", "",
               "- *vDNN's overheads.* vDNN's static policies synchronise the compute stream with the copies at "
               "every layer boundary, and memory-optimal algorithms are much slower than the fastest ones in "
               "the analytic cost model of the K40, so vdnn-all-m's overhead here is well above the paper's "
               "measured 58% on a Titan X. The analytic cost model also has no cudaMalloc/cudaFree or "
               "host-synchronisation costs, which the papers' measured runtimes pay.",
               "- *moDNN's 8%.* Our modnn row is Algorithm 1 with one copy stream at the Eq. 3 sub-batch. "
               "mplan (its own search: sub-batch candidates, two copy engines, recomputation, early offloads, "
               "the queued Eq. 4) is at or below it everywhere.",
               "- *SuperNeurons* recomputes batch normalisation exactly from its saved statistics here, and its "
               "LRU cache may offload any unlocked tensor (Alg. 2), checkpoints first. Where holes alone stop "
               "an allocation it falls back to moDNN's defragmentation (its own heap has none): the comparison "
               "is of levers, not of allocators.",
               "- *Minimum budgets*: moDNN and mplan reach Eq. 2's minimum (sub-batch 1) by construction.",
               ""]

    with open(args.out + ".tmp", "w") as f:
        f.write("\n".join(md))
    os.replace(args.out + ".tmp", args.out)
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
