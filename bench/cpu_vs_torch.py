#!/usr/bin/python3
"""The generated CPU program against PyTorch's CPU training step.

For each CIFAR-size example model (examples/models/cifar_*.yaml) and budget, this bench
  1. profiles the model with the built mplan (`mplan profile --backend cpu`, cached),
  2. compiles it (`mplan compile --profile ... --budget B --build`) at an unlimited budget
     (4 GiB: far above every model's naive footprint) and at 1.1x the minimum budget
     (the minimum is the one `mplan compile` reports for a budget below it),
  3. checks that the PyTorch module (bench/torch_cifar_models.py) has exactly the parameter
     shapes the generated program saves,
  4. runs the generated program and the PyTorch step alternately (--reps times each, one
     process per run, 1 thread each: OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=MKL_NUM_THREADS=1
     and torch.set_num_threads(1)), each run reporting the median of its steps after the
     first, and prints the median ratio ours / PyTorch per model and budget,
  5. runs the program once more with MPLAN_OP_PROFILE=1 (the runtime's per-op-kind clock,
     runtime/cpu/op_profile.h) and PyTorch once under torch.profiler, and prints where the time
     goes per op kind on both sides.

Usage (from the repository root, after building mplan):
  /usr/bin/python3 bench/cpu_vs_torch.py [--mplan build/cli/mplan] [--work out/cpu_vs_torch]
      [--models cifar_resnet,...] [--budgets unlimited,1.1min] [--reps 5] [--steps 8]
      [--json results.json]
A bench, not a test: it prints figures and never fails on them. docs/benchmarks-cpu.md has
the figures and the load they were taken under.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODELS = ["cifar_resnet", "cifar_densenet", "cifar_inception", "cifar_mobilenet", "cifar_vgg"]
UNLIMITED_BYTES = 4 << 30
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def env_one_thread(extra=None):
    env = dict(os.environ)
    env.update(ONE_THREAD)
    env.pop("MPLAN_OP_PROFILE", None)
    if extra:
        env.update(extra)
    return env


def run(cmd, env=None, check=True):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if check and p.returncode != 0:
        sys.exit("cpu_vs_torch: %s failed (%d):\n%s%s" % (" ".join(cmd), p.returncode, p.stdout, p.stderr))
    return p


def load_yaml_batch(model):
    with open(os.path.join(ROOT, "examples", "models", model + ".yaml")) as f:
        return int(re.search(r"^batch:\s*(\d+)", f.read(), re.M).group(1))


# ---- mplan side -------------------------------------------------------------------------

def profile(args, model):
    path = os.path.join(args.work, model, "profile.json")
    if not os.path.exists(path) or args.reprofile:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        run([args.mplan, "profile", "--backend", "cpu", model_path(model), "-o", path], env=env_one_thread())
    return path


def model_path(model):
    return os.path.join(ROOT, "examples", "models", model + ".yaml")


def minimum_budget_bytes(args, model, profile_path):
    """The minimum `mplan compile` states when asked for a budget below it."""
    p = run([args.mplan, "compile", model_path(model), "--profile", profile_path, "--budget", "1B", "-o",
             os.path.join(args.work, model, "below-minimum")], check=False)
    m = re.search(r"below the minimum (\d+) bytes", p.stderr + p.stdout)
    if not m:
        sys.exit("cpu_vs_torch: mplan compile did not state a minimum budget for %s:\n%s" % (model, p.stderr))
    return int(m.group(1))


# A generated program unrolls every round of the schedule into train_step(): at 1.1x the
# minimum budget (sub-batches of 1-5 samples) train.cpp has 15,000-310,000 lines, which
# GCC needs 10+ GiB and 15+ minutes to compile even at -O0 (clang++ -O1: 6 GiB, 20 min).
# Past this many lines the bench compiles train.cpp with clang++ -O0 (4 GiB, about a
# minute and a half for 217,000 lines) against the runtime library of the mplan build:
# the kernels are the same code, built by the mplan build with -O3; train.cpp only
# launches them.
BIG_PROGRAM_LINES = 50000


def compile_program(args, model, profile_path, budget_bytes, tag):
    out = os.path.join(args.work, model, tag)
    train = os.path.join(out, "build", "train")
    log = os.path.join(out, "compile.log")
    if not (args.reuse and os.path.exists(train) and os.path.exists(log)):
        p = run([args.mplan, "compile", model_path(model), "--profile", profile_path, "--budget",
                 "%dB" % budget_bytes, "-o", out])
        with open(log, "w") as f:
            f.write(p.stdout)
        if os.path.exists(train):
            os.remove(train)
    with open(log) as f:
        compile_output = f.read()
    summary = {}
    for line in compile_output.splitlines():
        if line.startswith(("policy:", "batch:", "time:", "copies:")):
            key, _, value = line.partition(":")
            summary[key] = value.strip()
    with open(os.path.join(out, "train.cpp")) as f:
        lines = sum(1 for _ in f)
    summary["train.cpp lines"] = lines
    if os.path.exists(train):
        summary["build"] = "reused"
        return train, summary
    if lines <= BIG_PROGRAM_LINES:
        run([args.mplan, "compile", model_path(model), "--profile", profile_path, "--budget", "%dB" % budget_bytes,
             "-o", out, "--build"])
        summary["build"] = "mplan compile --build"
        return train, summary
    runtime_lib = os.path.join(os.path.dirname(os.path.dirname(args.mplan)), "runtime", "libmplan_runtime.a")
    if not os.path.exists(runtime_lib):
        sys.exit("cpu_vs_torch: %s has %d lines; building it needs the mplan build's %s" % (out, lines, runtime_lib))
    build = os.path.join(out, "build")
    run(["cmake", "-S", out, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_CXX_COMPILER=clang++",
         "-DCMAKE_CXX_FLAGS_RELEASE=-O0 -DNDEBUG", "-DMPLAN_RUNTIME_LIBRARY=" + runtime_lib])
    run(["cmake", "--build", build])
    summary["build"] = "clang++ -O0 train.cpp, runtime library of the mplan build"
    return train, summary


def program_step_ms(train, steps):
    p = run([train, "--steps", str(steps)], env=env_one_thread())
    times = [float(m.group(1)) for m in re.finditer(r"^step \d+: loss [^,]*, ([0-9.]+) ms", p.stdout, re.M)]
    return statistics.median(times[1:] if len(times) > 1 else times)


def program_op_profile(train, steps):
    """Per-op-kind milliseconds per step from the runtime's MPLAN_OP_PROFILE report."""
    p = run([train, "--steps", str(steps)], env=env_one_thread({"MPLAN_OP_PROFILE": "1"}))
    kinds = {}
    for m in re.finditer(r"^op-profile: +(\S+) +([0-9.]+) ms +(\d+) calls", p.stderr, re.M):
        kinds[m.group(1)] = float(m.group(2)) / steps
    step_times = [float(m.group(1)) for m in re.finditer(r"^step \d+: loss [^,]*, ([0-9.]+) ms", p.stdout, re.M)]
    return kinds, sum(step_times) / max(len(step_times), 1)


def program_parameter_shapes(train, work):
    save = os.path.join(work, "saved-weights")
    run([train, "--steps", "0", "--save", save], env=env_one_thread())
    shapes = []
    # A checkpoint folder: its newest step is under `latest` (docs/generated-program.md).
    with open(os.path.join(save, "latest", "tensors.txt")) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            name, *dims = line.split()
            name = name[:-len(".npy")]
            if name.endswith((".weight", ".bias")):
                shapes.append(tuple(int(d) for d in dims))
    return sorted(shapes)


# ---- PyTorch side -----------------------------------------------------------------------

def torch_kind(name):
    """The op kind of a top-level profiler event (an aten op or an autograd node)."""
    n = name.lower()
    rules = [("sgd", ["optimizer.step"]), ("other", ["zero_grad", "accumulategrad", "detach", "ones_like"]),
             ("conv", ["conv"]), ("batchnorm", ["batch_norm", "batchnorm"]),
             ("relu", ["relu", "clamp_min", "threshold"]), ("pool", ["pool", "mean"]),
             ("linear", ["linear", "addmm", "tbackward", "aten::t", "transpose"]),
             ("concat", ["aten::cat", "catbackward"]), ("dropout", ["dropout", "mulbackward", "bernoulli"]),
             ("softmax_xent", ["cross_entropy", "softmax", "nll"]), ("add", ["aten::add", "addbackward"]),
             ("other", ["flatten", "reshape", "view"])]
    for kind, keys in rules:
        if any(k in n for k in keys):
            return kind
    return "other"


def torch_worker(args):
    import torch
    import torch.nn.functional as F

    sys.path.insert(0, HERE)
    import torch_cifar_models

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    torch.manual_seed(1)
    batch = load_yaml_batch(args.torch_worker)
    net = torch_cifar_models.MODELS[args.torch_worker]()
    net.train()
    with open(model_path(args.torch_worker)) as f:
        text = f.read()
    lr = float(re.search(r"lr:\s*([0-9.e-]+)", text).group(1))
    wd = float(re.search(r"weight_decay:\s*([0-9.e-]+)", text).group(1))
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9, weight_decay=wd)
    x = torch.randn(batch, 3, 32, 32)
    y = torch.randint(0, 10, (batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()

    if args.shapes:
        print(json.dumps(sorted(list(p.shape) for p in net.parameters())))
        return
    if args.torch_profile:
        step()
        step()
        from torch.profiler import profile as tprofile, ProfilerActivity
        with tprofile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(args.steps):
                step()
        kinds = {}
        for e in prof.events():
            top = e
            while top.cpu_parent is not None:
                top = top.cpu_parent
            kind = torch_kind(top.name)
            kinds[kind] = kinds.get(kind, 0.0) + e.self_cpu_time_total / 1000.0 / args.steps
        print(json.dumps(kinds))
        return
    times = []
    for _ in range(args.steps):
        started = time.perf_counter()
        step()
        times.append((time.perf_counter() - started) * 1000.0)
    print("median step ms: %.3f" % statistics.median(times[1:]))


def torch_step_ms(args, model, steps):
    p = run([sys.executable, os.path.abspath(__file__), "--torch-worker", model, "--steps", str(steps)],
            env=env_one_thread())
    return float(re.search(r"median step ms: ([0-9.]+)", p.stdout).group(1))


def torch_op_profile(model, steps):
    p = run([sys.executable, os.path.abspath(__file__), "--torch-worker", model, "--steps", str(steps),
             "--torch-profile"], env=env_one_thread())
    return json.loads(p.stdout.strip().splitlines()[-1])


def torch_parameter_shapes(model):
    p = run([sys.executable, os.path.abspath(__file__), "--torch-worker", model, "--shapes"], env=env_one_thread())
    return sorted(tuple(s) for s in json.loads(p.stdout))


# ---- the bench --------------------------------------------------------------------------

def bench(args):
    results = []
    load_before = os.getloadavg()
    for model in args.models:
        prof = profile(args, model)
        minimum = minimum_budget_bytes(args, model, prof)
        for budget_name in args.budgets:
            budget = UNLIMITED_BYTES if budget_name == "unlimited" else int(float(budget_name[:-3]) * minimum)
            tag = budget_name.replace(".", "_")
            train, summary = compile_program(args, model, prof, budget, tag)
            if budget_name == args.budgets[0]:
                ours, theirs = program_parameter_shapes(train, os.path.join(args.work, model)), \
                    torch_parameter_shapes(model)
                if ours != theirs:
                    sys.exit("cpu_vs_torch: %s: the PyTorch module's parameter shapes differ from the program's:\n"
                             "%s\n%s" % (model, ours, theirs))
            ours_ms, torch_ms = [], []
            for _ in range(args.reps):
                ours_ms.append(program_step_ms(train, args.steps))
                torch_ms.append(torch_step_ms(args, model, args.steps))
            row = {
                "model": model, "budget": budget_name, "budget_bytes": budget, "minimum_bytes": minimum,
                "plan": summary, "ours_ms": ours_ms, "torch_ms": torch_ms,
                "ratio": statistics.median(ours_ms) / statistics.median(torch_ms),
            }
            if not args.no_breakdown:
                row["ours_ops_ms"], row["ours_profiled_step_ms"] = program_op_profile(train, args.steps)
                if budget_name == args.budgets[0]:
                    row["torch_ops_ms"] = torch_op_profile(model, args.steps)
            results.append(row)
            print("%-16s %-10s %9.1f ms ours %9.1f ms torch  ratio %.2f  (%s; %s)" %
                  (model, budget_name, statistics.median(ours_ms), statistics.median(torch_ms), row["ratio"],
                   summary.get("batch", ""), summary.get("copies", "")), flush=True)
    load_after = os.getloadavg()
    print_tables(results, load_before, load_after)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"load_before": load_before, "load_after": load_after, "results": results}, f, indent=1)


def print_tables(results, load_before, load_after):
    print("\nload average (1, 5, 15 min): before %s, after %s" %
          (", ".join("%.2f" % v for v in load_before), ", ".join("%.2f" % v for v in load_after)))
    print("\n| model | budget | plan | ours (ms/step) | PyTorch (ms/step) | ours / PyTorch |")
    print("|---|---|---|---|---|---|")
    for r in results:
        budget = "unlimited (4 GiB)" if r["budget"] == "unlimited" else "%s = %.2f MiB" % (
            r["budget"], r["budget_bytes"] / 2**20)
        print("| %s | %s | %s | %.1f | %.1f | %.2f |" % (r["model"], budget, r["plan"].get("batch", ""),
                                                     statistics.median(r["ours_ms"]),
                                                     statistics.median(r["torch_ms"]), r["ratio"]))
    if not any("ours_ops_ms" in r for r in results):
        return
    print("\nPer op kind, ms per step (ours: MPLAN_OP_PROFILE=1, the compute stream's ops, every step of one run; "
          "PyTorch: torch.profiler, self CPU time grouped by top-level op or autograd node):")
    for r in results:
        if "ours_ops_ms" not in r:
            continue
        ours = coarse_kinds(r["ours_ops_ms"])
        theirs = r.get("torch_ops_ms", {})
        print("\n%s at %s (ours: %.1f ms per profiled step, ops %.1f ms of it):" %
              (r["model"], r["budget"], r["ours_profiled_step_ms"], sum(ours.values())))
        print("| op kind | ours (ms) | PyTorch (ms) |")
        print("|---|---|---|")
        for kind in sorted(set(ours) | set(theirs), key=lambda k: -max(ours.get(k, 0.0), theirs.get(k, 0.0))):
            print("| %s | %s | %s |" % (kind, "%.1f" % ours[kind] if kind in ours else "",
                                        "%.1f" % theirs[kind] if kind in theirs else ""))
        conv = {k: v for k, v in r["ours_ops_ms"].items() if k.startswith("conv_")}
        print("\nours, conv split: " + ", ".join("%s %.1f" % (k[len("conv_"):], v) for k, v in sorted(conv.items())))


def coarse_kinds(ours):
    """The runtime's op kinds (runtime/cpu/op_profile.h) grouped as the PyTorch side is."""
    grouped = {}
    for kind, ms in ours.items():
        key = "conv" if kind.startswith("conv_") else "other" if kind in ("fill_copy", "flatten") else kind
        grouped[key] = grouped.get(key, 0.0) + ms
    return grouped


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mplan", default=os.path.join(ROOT, "build", "cli", "mplan"))
    parser.add_argument("--work", default=os.path.join(ROOT, "out", "cpu_vs_torch"))
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--budgets", default="unlimited,1.1min",
                        help="unlimited and/or F'min' (F times the minimum budget), comma-separated")
    parser.add_argument("--reps", type=int, default=5, help="alternations of ours and PyTorch")
    parser.add_argument("--steps", type=int, default=8, help="steps per run (the first is left out)")
    parser.add_argument("--reprofile", action="store_true", help="measure the profile again")
    parser.add_argument("--reuse", action="store_true",
                        help="reuse programs already built under --work (same profile and budget)")
    parser.add_argument("--no-breakdown", action="store_true", help="skip the per-op-kind runs")
    parser.add_argument("--json", help="also write the figures here")
    parser.add_argument("--torch-worker", help=argparse.SUPPRESS)
    parser.add_argument("--torch-profile", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--shapes", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.torch_worker:
        return torch_worker(args)
    args.models = [m for m in args.models.split(",") if m]
    args.budgets = [b for b in args.budgets.split(",") if b]
    for b in args.budgets:
        if b != "unlimited" and not re.fullmatch(r"[0-9.]+min", b):
            sys.exit("cpu_vs_torch: --budgets: expected unlimited or F'min', not '%s'" % b)
    for m in args.models:
        if m not in MODELS:
            sys.exit("cpu_vs_torch: --models: unknown model '%s'; expected some of %s" % (m, ", ".join(MODELS)))
    if not os.path.exists(args.mplan):
        sys.exit("cpu_vs_torch: no mplan at %s (build it, or pass --mplan)" % args.mplan)
    bench(args)


if __name__ == "__main__":
    main()
