#!/usr/bin/python3
"""Mutation check of the planner's heuristics (docs/planner.md, "Tests").

Each mutant below breaks one heuristic of the planner or the TDFG with an
exact text replacement. For each, in a copy of the source tree, the script
applies the mutant, rebuilds the planner and TDFG tests, runs them, and
restores the file. A mutant "survives" when every test still passes: then no
test pins that heuristic, and the script fails.

    /usr/bin/python3 scripts/mutation.py [--work DIR] [--only NAME,...] [--list]

scripts/mutation.sh is the entry point (it copies the tree and configures the
build first). Needs cmake, ninja and a C++ compiler, as the build does.
"""

import argparse
import os
import subprocess
import sys
import time

# name, file, text to find (exactly once), replacement, test binaries to run.
MUTANTS = [
    # ---- moDNN Algorithm 1 (planner/deciders/modnn_decider.cpp, offload_scheme.cpp) ----
    ("prefetch-ahead disabled",
     "planner/deciders/modnn_decider.cpp",
     "void ModnnDecider::before_issue(IterationSim& sim, int32_t r, int32_t k, double task_ms) {\n"
     "  if (!rules_.prefetch) return;",
     "void ModnnDecider::before_issue(IterationSim& sim, int32_t r, int32_t k, double task_ms) {\n"
     "  return;",
     ["planner"]),
    ("Eq. 4 inverted",
     "planner/deciders/modnn_decider.cpp",
     "const bool now = start_ms + (rules_.queued_prefetch ? queued_ms : trans_ms) > est_ms;",
     "const bool now = start_ms + (rules_.queued_prefetch ? queued_ms : trans_ms) <= est_ms;",
     ["planner"]),
    ("T_off removed from Eq. 5",
     "planner/deciders/modnn_decider.cpp",
     "const double gain = opts[lean].time_ms - o.time_ms - off_ms - pre_ms;",
     "const double gain = opts[lean].time_ms - o.time_ms - pre_ms;",
     ["planner"]),
    ("T_pre removed from Eq. 5",
     "planner/deciders/modnn_decider.cpp",
     "const double gain = opts[lean].time_ms - o.time_ms - off_ms - pre_ms;",
     "const double gain = opts[lean].time_ms - o.time_ms - off_ms;",
     ["planner"]),
    ("criterion (b) removed",
     "planner/deciders/offload_scheme.cpp",
     "if (sim.locked(inst) || !s.created || !s.used_since_arrival || next <= request.horizon) {",
     "if (sim.locked(inst) || !s.created || next <= request.horizon) {",
     ["planner"]),
    ("criterion (a) removed (the running task's blocks may leave)",
     "planner/deciders/offload_scheme.cpp",
     "if (sim.locked(inst) || !s.created || !s.used_since_arrival || next <= request.horizon) {",
     "if (!s.created || !s.used_since_arrival) {",
     ["planner"]),
    ("line-16 prediction removed",
     "planner/deciders/modnn_decider.cpp",
     "    if (s_need + t_need > sim.memory().capacity_bytes()) break;  // line 16",
     "",
     ["planner"]),
    ("defragmentation removed",
     "planner/deciders/modnn_decider.cpp",
     "  bool defragment_on_failure() const override { return true; }",
     "  bool defragment_on_failure() const override { return false; }",
     ["planner"]),
    # ---- the papers' baselines (planner/deciders/) ----
    ("SuperNeurons never memory-centric",
     "planner/deciders/superneurons_decider.cpp",
     "keep_[b] = keep_recomputed(sim, b);",
     "keep_[b] = true;",
     ["planner"]),
    ("vDNN findPrefetchLayer not stopping at a conv",
     "planner/deciders/vdnn_decider.cpp",
     "      if (tdfg.tasks[tdfg.fp_of[id]].paper_class == PaperClass::conv) return;",
     "",
     ["planner"]),
    # ---- mplan's levers ----
    ("re-fetch cost removed (prefetch thrash)",
     "planner/deciders/offload_scheme.cpp",
     "const double refetch_ms = costs_.refetch_cost && soon ? sim.cost().host_to_device_ms(bytes) : 0.0;",
     "const double refetch_ms = 0.0;",
     ["planner"]),
    ("Eq. 5 always counts the re-fetch in T_off",
     "planner/deciders/modnn_decider.cpp",
     "off_ms = s.delay_ms + s.future_ms - (rules_.eq5_refetch ? 0.0 : s.refetch_ms);",
     "off_ms = s.delay_ms + s.future_ms;",
     ["planner"]),
    ("search without the Eq. 5-as-published variant",
     "planner/mplan_search.cpp",
     "    if (i == 0) r.eq5_refetch = false;",
     "    if (i == 0) continue;",
     ["planner"]),
    ("queued prefetch: stops at the first task that need not start",
     "planner/deciders/modnn_decider.cpp",
     "      else if (!rules_.queued_prefetch) break;  // lines 26-27",
     "      else break;  // lines 26-27",
     ["planner"]),
    ("queued prefetch: ignores the copies queued before",
     "planner/deciders/modnn_decider.cpp",
     "const bool now = start_ms + (rules_.queued_prefetch ? queued_ms : trans_ms) > est_ms;",
     "const bool now = start_ms + trans_ms > est_ms;",
     ["planner"]),
    ("early offloads never sized",
     "planner/deciders/modnn_decider.cpp",
     "early_target_bytes_ = rules_.early_offload ? excess_bytes(sim, r) : 0;",
     "early_target_bytes_ = 0;",
     ["planner"]),
    ("recomputation never chosen",
     "planner/deciders/offload_scheme.cpp",
     "if (costs_.drop_droppable && sim.droppable(inst)) {",
     "if (false) {",
     ["planner"]),
    ("recomputation's cost ignored",
     "planner/deciders/offload_scheme.cpp",
     "if (recompute_ms <= g.copy_ms + refetch_ms) {",
     "if (true) {",
     ["planner"]),
    ("search without the variants",
     "planner/mplan_search.cpp",
     "  if (published_ || (first.feasible && !could_improve(first))) return;",
     "  return;",
     ["planner"]),
    # ---- the search (planner/sub_batch.cpp, planner/mplan_search.cpp, planner/plan_search.cpp) ----
    ("Eq. 3 by bisection on the blocks alone (no scan)",
     "planner/sub_batch.cpp",
     "  for (int64_t b = lo; b >= 1; --b)\n"
     "    if (max_task_arena_bytes(tdfg, cost, b, fastest) <= arena_bytes) return b;\n"
     "  return 0;",
     "  return lo;",
     ["planner"]),
    ("ties between equally fast plans ignore the bytes copied",
     "planner/plan_search.cpp",
     "  if (moved_a != moved_b) return moved_a < moved_b;",
     "  (void)moved_a;",
     ["planner"]),
    ("batchnorm: rounds chosen by time alone",
     "planner/mplan_search.cpp",
     "  const bool batchnorm_rounds = has_batch_statistics(tdfg_) && opt_.sub_batch == 0 && !published_ &&",
     "  const bool batchnorm_rounds = false && opt_.sub_batch == 0 && !published_ &&",
     ["planner"]),
    ("batchnorm: one value per channel allowed",
     "tdfg/bounds.cpp",
     "    least = std::max<int64_t>(least, (2 + per_sample - 1) / per_sample);",
     "    least = std::max<int64_t>(least, 1);",
     ["planner"]),
    ("wd: the kernels' limit is a share of the pool",
     "planner/mplan_search.cpp",
     "const int64_t limit = opt_.workspace == WorkspaceUse::wr ? opt_.workspace_bytes : pool;",
     "const int64_t limit = opt_.workspace == WorkspaceUse::wr ? opt_.workspace_bytes : pool / 4;",
     ["planner"]),
    ("lower-bound pruning too eager",
     "planner/plan_search.cpp",
     "  if (screen_ && bound > 0 && lower_bound_ms(c.rounds) > bound) {",
     "  if (screen_ && bound > 0 && lower_bound_ms(c.rounds) > 0.8 * bound) {",
     ["planner"]),
    # ---- copies both ways at once (planner/streams.cpp) ----
    ("duplex slowdown ignored",
     "planner/streams.cpp",
     "    if (duplex_slowdown_ > 1.0) step.end_ms = copy_end_ms(other, start_ms, duration_ms);",
     "",
     ["planner"]),
    ("duplex: a copy something already follows is slowed too",
     "planner/streams.cpp",
     "*it == last_on_slot_[other_slot] && other.records == kNoEvent;",
     "*it == last_on_slot_[other_slot];",
     ["planner"]),
    # ---- in-place activations (tdfg/tdfg.cpp) ----
    ("in-place ReLU over an output a backward task reads",
     "tdfg/tdfg.cpp",
     "        if (output_read_backward) continue;",
     "",
     ["tdfg", "planner"]),
    ("in-place over an input with other consumers",
     "tdfg/tdfg.cpp",
     "      if (consumers[p] != 1 || is_loss(p)) continue;",
     "      if (is_loss(p)) continue;",
     ["tdfg", "planner"]),
    # ---- recomputed convolutions (Checkmate §4, MONeT §3) ----
    ("convolutions never recomputed",
     "planner/deciders/modnn_decider.cpp",
     "    if (!rules_.recompute_convolutions)\n",
     "    if (true)\n",
     ["planner"]),
    ("recomputed convolutions unpriced (dropped even where the copy hides)",
     "planner/deciders/offload_scheme.cpp",
     "        drop_[k] = g.recompute_ms <= std::max(0.0, copy_end - ready_ms) + g.refetch_ms;",
     "        drop_[k] = true;",
     ["planner"]),
    ("a recomputed convolution reruns the leanest option",
     "planner/sim/iteration_sim.cpp",
     "    const int32_t chosen = choice_at(w, r);\n    if (chosen < 0) {",
     "    const int32_t chosen = -1;\n    if (chosen < 0) {",
     ["planner"]),
    ("convolutions recomputed in the workspace pool",
     "planner/sim/iteration_sim.cpp",
     "  return opt_.workspace_pool_bytes == 0 && opt_.fixed_configurations.empty() && !opt_.micro_batch_dynamic;",
     "  return true;",
     ["planner"]),
    # ---- the recomputation baselines (planner/deciders/checkpoint_decider.cpp, dtr_decider.cpp) ----
    ("checkpoints dropped too",
     "planner/deciders/checkpoint_decider.cpp",
     "return !checkpoint_[static_cast<size_t>(b)];",
     "return true;",
     ["planner"]),
    ("DTR evicts the dearest tensor first",
     "planner/deciders/dtr_decider.cpp",
     "        if (h < least) {\n          least = h;",
     "        if (-h < least) {\n          least = -h;",
     ["planner"]),
    # ---- the iteration lower bound (planner/lower_bound.h) ----
    ("lower bound: options that do not fit counted",
     "planner/lower_bound.cpp",
     "      if (task_arena_bytes(tdfg, t, samples, o.workspace_bytes) <= arena_bytes) best = std::min(best, o.time_ms);",
     "      best = std::min(best, o.time_ms);",
     ["planner"]),
    # ---- memory-saving operator variants (tdfg/compact_backward.h, driver/planned_model.h) ----
    ("compact backward taken where it frees nothing",
     "tdfg/compact_backward.cpp",
     "      if (frees_a_tensor(tdfg, l)) kept.push_back(l);",
     "      kept.push_back(l);",
     ["tdfg", "planner"]),
    ("a compact ReLU judged without the other backward readers",
     "tdfg/compact_backward.cpp",
     "    if (r != except && tdfg.tasks[r].kind != TaskKind::FP) return true;",
     "    if (r == except && tdfg.tasks[r].kind != TaskKind::FP) return true;",
     ["tdfg", "planner"]),
    ("variants always kept, whatever they cost",
     "driver/planned_model.cpp",
     "  if (better(compact, plain, options)) {",
     "  if (compact.planned.feasible) {",
     ["planner"]),
    ("variants never kept",
     "driver/planned_model.cpp",
     "  if (better(compact, plain, options)) {",
     "  if (false) {",
     ["planner"]),
    ("lower bound: making room costs nothing",
     "planner/lower_bound.cpp",
     "    if (compute[s] < kInfinity) memory[s] = round_with_memory_ms(tdfg, cost, arena_bytes, s, round);",
     "    memory[s] = compute[s];",
     ["planner"]),
    ("lower bound: the resident blocks counted in the arena",
     "planner/lower_bound.cpp",
     "  for (int64_t& bytes : live) bytes -= resident;",
     "",
     ["planner"]),
    # ---- the last pass over a plan (planner/prefetch_pruning.h) ----
    ("unread prefetches kept",
     "planner/sim/iteration_sim.cpp",
     "  const PrunedPrefetches pruned = remove_unread_prefetches(result.plan, tdfg_);",
     "  const PrunedPrefetches pruned;",
     ["planner"]),
]


def run(cmd, cwd, log, timeout=1800):
    with open(log, "a") as out:
        out.write("$ " + " ".join(cmd) + "\n")
        out.flush()
        return subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, timeout=timeout).returncode


def build_and_test(work, binaries, log):
    targets = [b + "_tests" for b in binaries]
    if run(["cmake", "--build", os.path.join(work, "build"), "-j", str(os.cpu_count() or 2), "--target", *targets],
           work, log) != 0:
        return "build failed"
    for b in binaries:
        exe = os.path.join(work, "build", "tests", b, b + "_tests")
        if run([exe, "--gtest_brief=1"], work, log, timeout=900) != 0:
            return "killed"
    return "survived"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True, help="a copy of the source tree with a configured build/ in it")
    ap.add_argument("--only", default="", help="comma-separated mutant names")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    if args.list:
        for m in MUTANTS:
            print(m[0])
        return 0
    src = os.path.join(args.work, "src")
    log = os.path.join(args.work, "mutation.log")
    only = set(filter(None, args.only.split(",")))
    started = time.time()
    print("baseline (no mutant): ", end="", flush=True)
    base = build_and_test(src, ["planner", "tdfg"], log)
    if base != "survived":
        print(f"the unmutated tests do not pass ({base}); see {log}")
        return 2
    print("tests pass")
    survivors, results = [], []
    for name, path, find, replace, binaries in MUTANTS:
        if only and name not in only:
            continue
        file = os.path.join(src, path)
        text = open(file).read()
        if text.count(find) != 1:
            print(f"{name}: its text is found {text.count(find)} times in {path}, not once: fix the mutant")
            return 2
        t0 = time.time()
        open(file, "w").write(text.replace(find, replace))
        try:
            outcome = build_and_test(src, binaries, log)
        finally:
            open(file, "w").write(text)
        results.append((name, outcome, time.time() - t0))
        print(f"{name}: {outcome} ({time.time() - t0:.0f} s)", flush=True)
        if outcome == "build failed":
            print(f"{name}: the mutant does not compile: fix the mutant (log: {log})")
            return 2
        if outcome == "survived":
            survivors.append(name)
    # Leave the copy built as it was.
    build_and_test(src, ["planner", "tdfg"], log)
    total = time.time() - started
    print(f"{len(results)} mutants, {len(results) - len(survivors)} killed, {len(survivors)} survived; "
          f"{total / 60:.1f} minutes")
    for name in survivors:
        print(f"SURVIVED: {name}")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
