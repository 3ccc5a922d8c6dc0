#!/usr/bin/python3
"""Mutation check: every heuristic and every kernel is pinned by a test.

Each mutant below is a small, realistic bug planted with an exact text
replacement: a planner heuristic broken, a kernel that routes a gradient to
the wrong element, a verifier check left out, a wait the generated program
does not emit, a checkpoint switch that is not atomic, a shape rule off by
one. For each, in a copy of the source tree, the script applies the mutant,
rebuilds the tests it names, runs them, and restores the file. A mutant
"survives" when every one of its tests still passes: then no test pins that
behaviour, and the script fails.

    /usr/bin/python3 scripts/mutation.py [--work DIR] [--set SET,...] [--only NAME,...] [--list]

The mutants come in sets (--set picks some; all by default): planner,
runtime, verifier, codegen, checkpoints, frontend, precision. Each names the tests that
must kill it: a test binary (tests/<dir>/<dir>_tests), optionally with a
gtest filter after a colon ("runtime:PoolTies.*:CpuFastPaths.*"), so a
mutant runs only the tests about its code. scripts/mutation.sh is the entry
point (it copies the tree and configures the build first); docs/robustness.md
says how long each set takes. Needs cmake, ninja and a C++ compiler, as the
build does.
"""

import argparse
import os
import subprocess
import sys
import time

# Each mutant: name, file, text to find (exactly once), replacement, tests to run.
PLANNER = [
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
     "early_target_bytes_ = rules_.early_offload ? excess : 0;",
     "early_target_bytes_ = 0;",
     ["planner"]),
    # ---- mplan: early drops (modnn_decider.cpp drop_cheap_blocks, mplan_search.cpp) ----
    ("early drops never taken",
     "planner/deciders/modnn_decider.cpp",
     "drop_early_ = early_drops && excess > 0;",
     "drop_early_ = false;",
     ["planner:EarlyDrop.*:Search.NeverWorseThanEarlyDrops*"]),
    ("early drops in a round that fits",
     "planner/deciders/modnn_decider.cpp",
     "drop_early_ = early_drops && excess > 0;",
     "drop_early_ = early_drops;",
     ["planner:EarlyDrop.*"]),
    ("early drops ignore the ratio",
     "planner/deciders/modnn_decider.cpp",
     "if (sim.recompute_ms(i) <= rules_.early_drop_ratio * sim.cost().device_to_host_ms(sim.instance_bytes(i)))",
     "if (true)",
     ["planner:EarlyDrop.*"]),
    ("early drops of blocks the forward pass reads again",
     "planner/deciders/modnn_decider.cpp",
     "      if (!sim.droppable(i) || next_backward_use(sim, b, k) < 0) continue;",
     "      if (!sim.droppable(i)) continue;",
     ["planner:EarlyDrop.*"]),
    ("early-drop ratios never searched",
     "planner/mplan_search.cpp",
     "constexpr double kEarlyDropRatios[] = {0.1, 0.2, 0.5};",
     "constexpr double kEarlyDropRatios[] = {0.0};",
     ["planner:Search.NeverWorseThanEarlyDrops*"]),
    # ---- mplan: the refinement's per-block choices (modnn_decider.cpp, mplan_search.cpp) ----
    ("refinement never run",
     "planner/mplan_search.cpp",
     "  if (published_ || !opt_.refine_blocks || !search.have() || !could_improve(search.best())) return;",
     "  return;",
     ["planner:Refinement.*"]),
    ("refinement keeps no choice for the next block",
     "planner/mplan_search.cpp",
     "          choices = *c.rules.block_choices;\n          improved = true;",
     "          improved = true;",
     ["planner:Refinement.*"]),
    ("refinement never tries a drop",
     "planner/mplan_search.cpp",
     "        if (alt == choices[x] || (alt == BlockChoice::drop && !recomputable(x))) continue;",
     "        if (alt == choices[x] || alt == BlockChoice::drop) continue;",
     ["planner:Refinement.*"]),
    ("fixed drops ignored",
     "planner/deciders/modnn_decider.cpp",
     "      if (c == BlockChoice::drop && sim.droppable(i)) sim.drop(i);",
     "      if (false) sim.drop(i);",
     ["planner:BlockChoices.*"]),
    ("fixed drops need the rules' leave to drop",
     "planner/deciders/modnn_decider.cpp",
     "    if (choice(b) != BlockChoice::rules) return choice(b) == BlockChoice::drop;",
     "    if (choice(b) == BlockChoice::offload) return false;",
     ["planner:BlockChoices.*"]),
    ("fixed offloads ignored",
     "planner/deciders/modnn_decider.cpp",
     "      else if (c == BlockChoice::offload && !sim.droppable(i)) sim.evict(i);",
     "      else if (false) sim.evict(i);",
     ["planner:BlockChoices.*"]),
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
    # ---- the Checkmate baseline (planner/checkmate_milp.cpp, planner/deciders/checkmate_decider.cpp) ----
    ("checkmate: recomputation costs nothing",
     "planner/checkmate_milp.cpp",
     "        if (g_.recomputable[i]) r_[index(t, i)] = binary(fmt::format(\"R[{},{}]\", t, i), g_.compute_ms[i]);",
     "        if (g_.recomputable[i]) r_[index(t, i)] = binary(fmt::format(\"R[{},{}]\", t, i), 0.0);",
     ["planner:CheckmateMilp.*:CheckmatePolicy.*"]),
    ("checkmate: an output is never freed within a stage",
     "planner/checkmate_milp.cpp",
     "          next.add(free_[t * g_.edges.size() + edge], g_.output_bytes[g_.edges[edge].first]);",
     "          (void)edge;",
     ["planner:CheckmateMilp.*:CheckmatePolicy.*"]),
    ("checkmate: keeping everything taken whatever it needs",
     "planner/checkmate_milp.cpp",
     "  if (everything.peak_bytes <= options.budget_bytes) {",
     "  if (true) {",
     ["planner:CheckmateMilp.*:CheckmatePolicy.*"]),
    ("checkmate: the schedule's drops not played out",
     "planner/deciders/checkmate_decider.cpp",
     "      if (i >= 0 && i < next && !outcome_->kept[next][i]) leaving.push_back(inst);",
     "      (void)i;",
     ["planner:CheckmateMilp.*:CheckmatePolicy.*"]),
    # ---- the last pass over a plan (planner/prefetch_pruning.h) ----
    ("unread prefetches kept",
     "planner/sim/iteration_sim.cpp",
     "  const PrunedPrefetches pruned = remove_unread_prefetches(result.plan, tdfg_);",
     "  const PrunedPrefetches pruned;",
     ["planner"]),
]


# ---- CPU kernels (runtime/cpu/) ----
RUNTIME = [
    ("max pool 2x2: a tie sends the gradient to every maximum",
     "runtime/cpu/pool.cpp",
     "    const bool second = !first && a[2 * q + 1] == y[q];",
     "    const bool second = a[2 * q + 1] == y[q];",
     ["runtime:PoolTies.*:CpuFastPaths.*:TorchCrossCheck.*"]),
    ("max pool: a tie sends the gradient to the first maximum of every row",
     "runtime/cpu/pool.cpp",
     "            dxp[i * sh.w + j] += dyp[p * Q + q];\n            break;",
     "            dxp[i * sh.w + j] += dyp[p * Q + q];",
     ["runtime:PoolTies.*:CpuFastPaths.*:TorchCrossCheck.*"]),
    ("max pool indices: the place counted from the padded window's corner",
     "runtime/cpu/pool.cpp",
     "        const int64_t i = p * sh.stride_h - sh.pad_h + index[at] / sh.kernel_w;",
     "        const int64_t i = p * sh.stride_h + index[at] / sh.kernel_w;",
     ["runtime:PoolTies.*:CompactMaxPool.*"]),
    ("avg pool 2x2 backward divides by 2",
     "runtime/cpu/pool.cpp",
     "    const float g = dy[q] / 4.0f;",
     "    const float g = dy[q] / 2.0f;",
     ["runtime:CpuFastPaths.*:Gradcheck.*"]),
    ("batchnorm: running variance biased",
     "runtime/cpu/batchnorm.cpp",
     "      const double var_unbiased = count > 1 ? centred / (count - 1) : var_biased;",
     "      const double var_unbiased = var_biased;",
     ["runtime:TorchCrossCheck.*:CpuFastPaths.*:BatchNorm.*"]),
    ("batchnorm: parameter gradients not accumulated over rounds",
     "runtime/cpu/batchnorm.cpp",
     "      dgamma[c0 + j] = static_cast<float>(accumulate ? dgamma[c0 + j] + sums.sum_dy_xhat[j] : sums.sum_dy_xhat[j]);",
     "      dgamma[c0 + j] = static_cast<float>(sums.sum_dy_xhat[j]);",
     ["runtime:CpuFastPaths.*:BatchNorm.*:Gradcheck.*"]),
    ("batchnorm backward: the mean of dy left out",
     "runtime/cpu/batchnorm.cpp",
     "    c_term[j] = static_cast<float>(-k * (sums.sum_dy[j] / count));",
     "    c_term[j] = 0.0f;",
     ["runtime:TorchCrossCheck.*:Gradcheck.*:CpuFastPaths.*"]),
    ("relu backward overwrites instead of accumulating",
     "runtime/cpu/elementwise.cpp",
     "    for (int64_t i = 0; i < count; ++i) dx[i] += y[i] > 0.0f ? dy[i] : 0.0f;",
     "    for (int64_t i = 0; i < count; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;",
     ["runtime:Gradcheck.*:CompactRelu.*"]),
    ("relu mask: the last partial byte of the mask left unwritten",
     "runtime/cpu/elementwise.cpp",
     "    const int64_t end = std::min<int64_t>(8, count - byte * 8);",
     "    if (count - byte * 8 < 8) break;\n    const int64_t end = 8;",
     ["runtime:Gradcheck.*:CompactRelu.*"]),
    ("dropout: every sub-batch draws the first one's mask",
     "runtime/cpu/dropout.cpp",
     "                sample_key(seed, step, static_cast<uint64_t>(first_sample + b)), p, scale);",
     "                sample_key(seed, step, static_cast<uint64_t>(b)), p, scale);",
     ["runtime:CpuFastPaths.*:Dropout.*"]),
    ("dropout backward overwrites instead of accumulating",
     "runtime/cpu/dropout.cpp",
     "    for (int64_t i = 0; i < count; ++i) dx[i] += mask[i] ? dy[i] * scale : 0.0f;",
     "    for (int64_t i = 0; i < count; ++i) dx[i] = mask[i] ? dy[i] * scale : 0.0f;",
     ["runtime:CpuFastPaths.*:Dropout.*:Gradcheck.*"]),
    ("sgd: weight decay outside the momentum buffer",
     "runtime/cpu/sgd.cpp",
     "      const float d = momentum * buf[i] + (g[i] + weight_decay * w[i]);\n      buf[i] = d;\n      w[i] -= lr * d;",
     "      const float d = momentum * buf[i] + g[i];\n      buf[i] = d;\n      w[i] -= lr * (d + weight_decay * w[i]);",
     ["runtime:TorchCrossCheck.*:Sgd.*"]),
    ("sgd: the first step scales the gradient by the momentum",
     "runtime/cpu/sgd.cpp",
     "      const float d = g[i] + weight_decay * w[i];\n      buf[i] = d;",
     "      const float d = momentum * (g[i] + weight_decay * w[i]);\n      buf[i] = d;",
     ["runtime:TorchCrossCheck.*:Sgd.*"]),
    ("sgd: Nesterov's look-ahead left out",
     "runtime/cpu/sgd.cpp",
     "    w[i] -= lr * (d + momentum * b);",
     "    w[i] -= lr * b;",
     ["runtime:TorchCrossCheck.*"]),
    ("softmax cross-entropy: the smoothed target's spread left out of the gradient",
     "runtime/cpu/softmax_xent.cpp",
     "      const float g = (probs[at] - (j == labels[b] ? hit : spread)) * scale;",
     "      const float g = (probs[at] - (j == labels[b] ? hit : 0.0f)) * scale;",
     ["runtime:TorchCrossCheck.*"]),
    ("softmax cross-entropy: the smoothed loss counts the label alone",
     "runtime/cpu/softmax_xent.cpp",
     "    if (e == 0) {\n      loss += log_sum",
     "    if (true) {\n      loss += log_sum",
     ["runtime:TorchCrossCheck.*"]),
    ("micro-batched conv: the filter gradient of later slices overwrites (beta = 0)",
     "runtime/cpu/conv.cpp",
     "                         accumulate || i > 0);",
     "                         accumulate);",
     ["runtime:Conv*:ConvAccuracy.*"]),
    ("conv bias gradient not accumulated over rounds",
     "runtime/cpu/conv.cpp",
     "    dbias[k] = static_cast<float>(accumulate ? dbias[k] + sum : sum);",
     "    dbias[k] = static_cast<float>(sum);",
     ["runtime:Conv*:Gradcheck.*"]),
]

# ---- the verifier (planner/verify/): one check left out per class of violation ----
VERIFIER = [
    ("verify header: sub-batches need not sum to the batch",
     "planner/verify/static_checks.cpp",
     "  if (!sum_overflows && sum != plan_.batch)",
     "  if (false)",
     ["planner:Verify*"]),
    ("verify budget: regions beyond the budget pass",
     "planner/verify/static_checks.cpp",
     "  else if (*regions > plan_.budget_bytes)",
     "  else if (false)",
     ["planner:Verify*"]),
    ("verify overlap: live arena buffers may share bytes",
     "planner/verify/replay.cpp",
     "    if (it->second > begin)\n      add(s, ViolationKind::overlap,",
     "    if (false)\n      add(s, ViolationKind::overlap,",
     ["planner:Verify*"]),
    ("verify bad_step: a step on the wrong stream passes",
     "planner/verify/static_checks.cpp",
     "    if (declared != expected) {",
     "    if (false) {",
     ["planner:Verify*"]),
    ("verify coverage: a task of a round may have no choice",
     "planner/verify/static_checks.cpp",
     "      if (choice_count_[task_round_index(t, r)] == 0)",
     "      if (false)",
     ["planner:Verify*"]),
    ("verify absent: a use of an unallocated buffer passes",
     "planner/verify/replay.cpp",
     "  if (st.life == Life::unallocated) {\n    add(s, ViolationKind::absent",
     "  if (false) {\n    add(s, ViolationKind::absent",
     ["planner:Verify*"]),
    ("verify use_after_free: a use of a freed buffer passes",
     "planner/verify/replay.cpp",
     "  if (st.life == Life::freed) {\n    add(s, ViolationKind::use_after_free,",
     "  if (false) {\n    add(s, ViolationKind::use_after_free,",
     ["planner:Verify*"]),
    ("verify unproduced: a read need not follow its producer",
     "planner/verify/replay.cpp",
     "  if (st.ready_step >= 0 && !happens_before(st.ready_step, clock)) {",
     "  if (st.ready_step >= 0 && (is_copy || st.ready_by_prefetch) && !happens_before(st.ready_step, clock)) {",
     ["planner:Verify*"]),
    ("verify unprefetched: a read need not follow its prefetch",
     "planner/verify/replay.cpp",
     "  if (st.ready_step >= 0 && !happens_before(st.ready_step, clock)) {",
     "  if (st.ready_step >= 0 && !st.ready_by_prefetch && !happens_before(st.ready_step, clock)) {",
     ["planner:Verify*"]),
    ("verify stale: a read of an older copy passes",
     "planner/verify/replay.cpp",
     "  if (st.version < inst_version) {",
     "  if (false) {",
     ["planner:Verify*"]),
    ("verify overwrite: a write may race a read on another stream",
     "planner/verify/replay.cpp",
     "    if (st.reads_since_write[j] > clock[j])\n      add(s, ViolationKind::overwrite,",
     "    if (false)\n      add(s, ViolationKind::overwrite,",
     ["planner:Verify*"]),
    ("verify overwrite: an offload may overwrite host bytes a prefetch still reads",
     "planner/verify/replay.cpp",
     "    if (o.last_reader >= 0 && !happens_before(o.last_reader, clock))",
     "    if (false)",
     ["planner:Verify*"]),
    ("verify copy_unready: a prefetch from a host slot no offload filled passes",
     "planner/verify/replay.cpp",
     "  if (slot.version < 0) {\n    add(s, ViolationKind::copy_unready,",
     "  if (false) {\n    add(s, ViolationKind::copy_unready,",
     ["planner:Verify*"]),
    ("verify copy_unready: a host copy overwritten before its prefetch passes",
     "planner/verify/replay.cpp",
     "  if (slot.clobbered_by < 0) return;",
     "  return;",
     ["planner:Verify*"]),
    ("verify update_early: the update need not follow every BP2",
     "planner/verify/replay.cpp",
     "      } else if (!happens_before(bp2, clock)) {",
     "      } else if (false) {",
     ["planner:Verify*"]),
    ("verify event: an event never recorded passes",
     "planner/verify/static_checks.cpp",
     "    if (events_[e].record_count == 0)",
     "    if (false)",
     ["planner:Verify*"]),
    ("verify timing: a step may start before the previous one on its stream ends",
     "planner/verify/replay.cpp",
     "    if (stream_last[k] >= 0 && step.start_ms + time_tolerance(step.start_ms) < stream_end_ms[k])",
     "    if (false)",
     ["planner:Verify*"]),
    ("verify chain: a read of a block whose in-place writers did not all run passes",
     "planner/verify/replay.cpp",
     "  if (actual == expected) return;",
     "  return;",
     ["planner:Verify*"]),
]

# ---- the generated program (codegen/) ----
CODEGEN = [
    ("update: biases and norms decayed although the optimizer leaves them out",
     "ops/update.cpp",
     "    const bool excluded = (o.no_decay_norms && norm) || (o.no_decay_biases && t.name == \"bias\");",
     "    const bool excluded = o.no_decay_norms && norm;",
     ["e2e:Torch.OptimizerOptions*"]),
    ("update: Nesterov never passed to the kernel",
     "ops/update.cpp",
     "                rt::Arg::of_flag(model.optimizer.nesterov)});",
     "                rt::Arg::of_flag(false)});",
     ["e2e:Torch.OptimizerOptions*"]),
    ("loss: the label smoothing left out of the backward",
     "ops/softmax_xent.cpp",
     "              flag(accumulates(ctx, 0)), real(task.layer.label_smoothing)});",
     "              flag(accumulates(ctx, 0)), real(0.0)});",
     ["e2e:Torch.OptimizerOptions*"]),
    ("codegen: the waits of offload steps not emitted",
     "codegen/emit_program.cpp",
     "    for (EventId e : step.waits) {\n      if (step.stream == StreamKind::host)",
     "    for (EventId e : step.waits) {\n      if (step.kind == StepKind::offload) continue;\n"
     "      if (step.stream == StreamKind::host)",
     ["codegen", "e2e:Poison.*"]),
    ("codegen: the records of events not emitted for copies",
     "codegen/emit_program.cpp",
     "      code.records.push_back(fmt::format(\"p.record({}, {});\", stream, event_expr(fields, step.records, base)));",
     "      if (step.kind == StepKind::compute)\n"
     "        code.records.push_back(fmt::format(\"p.record({}, {});\", stream, event_expr(fields, step.records, base)));",
     ["codegen", "e2e:Poison.*"]),
    ("codegen: a freed buffer is not poisoned in debug mode",
     "codegen/emit_program.cpp",
     "    if (auto it = poisoning_.poisons.find(step.index); it != poisoning_.poisons.end())",
     "    if (auto it = poisoning_.poisons.find(-1); it != poisoning_.poisons.end())",
     ["codegen", "e2e:Poison.*"]),
    ("codegen: the round table's first sample off by one round",
     "codegen/emit_program.cpp",
     "    for (int32_t r = 0; r < round && r < static_cast<int32_t>(plan_.sub_batches.size()); ++r) at += "
     "plan_.sub_batches[r];",
     "    for (int32_t r = 0; r + 1 < round && r < static_cast<int32_t>(plan_.sub_batches.size()); ++r) at += "
     "plan_.sub_batches[r];",
     ["codegen", "e2e:Budgets.*:Torch.CifarSmallSubBatches*"]),
]

# ---- checkpoints (runtime/checkpoint.cpp) ----
CHECKPOINTS = [
    ("checkpoint: latest removed, then a new symlink made (not atomic)",
     "runtime/checkpoint.cpp",
     "  fs::remove(link_tmp, ec);\n"
     "  if (::symlink(name.c_str(), link_tmp.c_str()) != 0)\n"
     "    return fail(error, link_tmp.string() + \": cannot create the symlink: \" + errno_text());\n"
     "  if (::rename(link_tmp.c_str(), (dir / kLatest).c_str()) != 0)\n"
     "    return fail(error, (dir / kLatest).string() + \": cannot replace: \" + errno_text());",
     "  fs::remove(dir / kLatest, ec);\n"
     "  if (::symlink(name.c_str(), (dir / kLatest).c_str()) != 0)\n"
     "    return fail(error, link_tmp.string() + \": cannot create the symlink: \" + errno_text());",
     ["runtime:Checkpoint.*", "e2e:CheckpointKill.*"]),
    ("checkpoint: a folder without the marker is written into",
     "runtime/checkpoint.cpp",
     "  if (fs::exists(fs::symlink_status(dir, ec)) && !is_checkpoint_folder(dir))",
     "  if (false)",
     ["runtime:Checkpoint.*", "e2e:CheckpointKill.*"]),
    ("checkpoint: recovery takes the oldest complete step",
     "runtime/checkpoint.cpp",
     "  *folder = steps.back();",
     "  *folder = steps.front();",
     ["runtime:Checkpoint.*", "e2e:CheckpointKill.*"]),
    ("checkpoint: the older steps removed before the switch",
     "runtime/checkpoint.cpp",
     "  // The switch: a new symlink renamed over `latest` (rename is atomic).",
     "  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec))\n"
     "    if (entry.path().filename().string() != name && entry.path().filename().string().rfind(\"step-\", 0) == 0)\n"
     "      fs::remove_all(entry.path(), ec);",
     ["runtime:Checkpoint.*", "e2e:CheckpointKill.*"]),
]

# ---- shape inference (ops/, frontend/) ----
FRONTEND = [
    ("shapes: ceil mode keeps a last window that starts in the padding",
     "ops/op_helpers.cpp",
     "  if (ceil_mode && (out - 1) * stride >= in + pad) --out;",
     "",
     ["frontend"]),
    ("shapes: a dilated kernel's extent is its size",
     "ops/conv.cpp",
     "  extent.kernel_h = (w.kernel_h - 1) * w.dilation_h + 1;",
     "  extent.kernel_h = w.kernel_h;",
     ["frontend"]),
    ("shapes: concat keeps the first input's channels",
     "ops/concat.cpp",
     "    out.dims[0] += in.shapes[k].dims[0];",
     "",
     ["frontend"]),
    ("shapes: concat of inputs of different sizes accepted",
     "ops/concat.cpp",
     "    for (size_t d = 1; same_rest && d < first.dims.size(); ++d) same_rest = in.shapes[k].dims[d] == first.dims[d];",
     "",
     ["frontend"]),
    ("shapes: a kernel larger than its padded input accepted",
     "ops/op_helpers.cpp",
     "  if (w.kernel_h > padded_h || w.kernel_w > padded_w)",
     "  if (false)",
     ["frontend"]),
]

# 16-bit precision (ops/precision.h): each block's type, the casts fused into
# their producer, the weights' 16-bit copy, and how the cost models count
# bytes and find a task's entry.
PRECISION = [
    ("precision: a 16-bit op's output kept in fp32",
     "ops/op_table.cpp",
     "      case Autocast::low_precision: computed[l] = low; break;",
     "      case Autocast::low_precision: computed[l] = DataType::float32; break;",
     ["tdfg:BlockTypes.*"]),
    ("precision: an add of fp32 and 16 bits keeps its first input's type",
     "ops/precision.cpp",
     "  if (a == b) return a;\n  return DataType::float32;",
     "  return a;",
     ["tdfg:BlockTypes.*"]),
    ("precision: an element-wise op with an fp32 parameter follows its inputs",
     "ops/op_table.cpp",
     "      case Autocast::follow_inputs_and_weight: computed[l] = DataType::float32; break;",
     "      case Autocast::follow_inputs_and_weight: computed[l] = widest; break;",
     ["tdfg:BlockTypes.*"]),
    ("precision: a cast fused into a producer whose backward reads its output",
     "ops/op_table.cpp",
     "only_low_consumers[l] && !reads_output &&",
     "only_low_consumers[l] &&",
     ["tdfg:BlockTypes.*"]),
    ("precision: a cast fused where a consumer is not a 16-bit op",
     "ops/op_table.cpp",
     "      if (op_spec(layer.op).autocast != Autocast::low_precision) only_low_consumers[static_cast<size_t>(in)] = false;",
     "",
     ["tdfg:BlockTypes.*"]),
    ("precision: a fused cast's gradient stored in 16 bits",
     "tdfg/tdfg.cpp",
     "layer(l).output.elements() * element_bytes(types.gradient[l]), 0, false);",
     "layer(l).output.elements() * element_bytes(types.output[l]), 0, false);",
     ["tdfg:BlockTypes.*"]),
    ("precision: no 16-bit copy of the weights",
     "ops/op_table.cpp",
     "    return DataType::float32;\n  return types.output[at];",
     "    return DataType::float32;\n  return DataType::float32;",
     ["tdfg:BlockTypes.*", "profiler:PrecisionCost.*", "codegen:SixteenBitCalls.*"]),
    ("precision: attention keeps its probabilities in fp32",
     "tdfg/tdfg.cpp",
     "        if (spec.autocast == Autocast::low_precision && types.output[l] != DataType::float32) {",
     "        if (false) {",
     ["tdfg:BlockTypes.*"]),
    ("precision: math folded without its precision",
     "ops/model.cpp",
     "  model.precision = precision;\n  model.math = mode;",
     "  model.math = mode;",
     ["frontend:Precision.*"]),
    ("precision: a 16-bit task's signature without its type",
     "profiler/signature.cpp",
     "  if (s.dtype != DataType::float32) text += std::string(\" dtype=\") + data_type_name(s.dtype);",
     "",
     ["profiler:PrecisionCost.*"]),
    ("precision: the update does not remake the 16-bit copies",
     "profiler/analytic_model.cpp",
     "per_parameter * kFloatBytes * s.parameters + 2.0 * s.copied_parameters,",
     "per_parameter * kFloatBytes * s.parameters,",
     ["profiler:PrecisionCost.*"]),
    ("precision: every kernel's bytes scale with the math mode",
     "profiler/kernel_work.cpp",
     "work.bytes_in_math_operands ? work.bytes * math_operand_bytes(math) / 4.0 : work.bytes;",
     "work.bytes * math_operand_bytes(math) / 4.0;",
     ["profiler:AnalyticModel.TensorCores*"]),
    ("precision: a 16-bit model compiled for CUDA",
     "driver/compile.cpp",
     "  if (is_16_bit(model.precision) && !s.plan_only && s.target != codegen::Target::cpu)",
     "  if (false)",
     ["cli:PrecisionFlag.*"]),
    ("precision: a 16-bit op reads its float32 inputs unrounded",
     "codegen/sixteen_bit_calls.cpp",
     "      operand.load_rounding = low_task && !r.written ? low : DataType::float32;",
     "      operand.load_rounding = DataType::float32;",
     ["codegen:SixteenBitCalls.*"]),
    ("precision: a 16-bit op reads the float32 master weights",
     "codegen/sixteen_bit_calls.cpp",
     "      const DataType copy_type = ref.role == TensorRole::weight && low_task",
     "      const DataType copy_type = ref.role == TensorRole::weight && false",
     ["codegen:SixteenBitCalls.*"]),
    ("precision: a 16-bit op's results added before they are rounded",
     "codegen/sixteen_bit_calls.cpp",
     "      operand.result_type = low_task ? low : r.stored;",
     "      operand.result_type = r.stored;",
     ["codegen:SixteenBitCalls.*"]),
    ("precision: an added result read from the block, not zeroed scratch",
     "codegen/sixteen_bit_calls.cpp",
     "      operand.zeroed = operand.adds;",
     "      operand.zeroed = false;",
     ["codegen:SixteenBitCalls.*"]),
    ("precision: the loss's gradient not scaled",
     "codegen/emit_program.cpp",
     "            text += \" * p.loss_scale()\";",
     "",
     ["codegen:SixteenBitCalls.*", "e2e:SixteenBitNumerics.EveryOpFp16*"]),
    ("precision: the update runs whatever the gradients",
     "codegen/emit_program.cpp",
     "    if (task.kind == TaskKind::update && model_.precision == Precision::fp16) {",
     "    if (false) {",
     ["codegen:SixteenBitCalls.*"]),
    ("precision: the weight copies not made at start-up",
     "runtime/program.cpp",
     "  p.make_weight_copies();",
     "",
     ["e2e:SixteenBitPrograms.*"]),
    ("precision: a skipped update leaves its gradients",
     "runtime/program_sixteen_bit.cpp",
     "      if (g.bytes > 0) fill_u32_async(bytes(g.offset), 0u, static_cast<size_t>(g.bytes), compute_stream_);",
     "      (void)g;",
     ["e2e:LossScaling.*"]),
    ("precision: the checkpoint forgets the loss scale",
     "runtime/program.cpp",
     "  if (spec.loss_scaling) meta.loss_scale = p.loss_scale_state();",
     "",
     ["e2e:LossScaling.*"]),
    ("precision: the weight copies are never made where used",
     "driver/planned_model.cpp",
     "  if (!has_weight_copies(model) || model.weight_copies_where_used) return resident;",
     "  return resident;",
     ["cli:PrecisionFlag.*"]),
    ("precision: a cast where used costs no time",
     "profiler/analytic_model.cpp",
     "    o.time_ms += cast_ms;\n",
     "",
     ["profiler:PrecisionCost.*", "cli:PrecisionFlag.*"]),
    ("precision: a copy made where used needs no workspace",
     "profiler/analytic_model.cpp",
     "    o.workspace_bytes += 2 * s.copied_parameters;\n",
     "",
     ["profiler:PrecisionCost.*", "cli:PrecisionFlag.*"]),
    ("precision: plan.json forgets where the copies are made",
     "planner/plan_json.cpp",
     "  if (plan.weight_copies_where_used) header[\"weight_copies\"] = \"where_used\";\n",
     "",
     ["cli:PrecisionFlag.*"]),
    ("precision: a store adds the unrounded result",
     "runtime/cpu/ops_casts.cpp",
     "      float v = rounded_through(src[i], computed);",
     "      float v = src[i];",
     ["runtime:Casts.*"]),
    ("precision: a 16-bit model profiled with float32 kernels",
     "cli/cmd_profile.cpp",
     "  if (is_16_bit(model.precision))\n    fail(",
     "  if (false)\n    fail(",
     ["cli:PrecisionFlag.*"]),
    ("precision: bfloat16 truncates",
     "runtime/sixteen_bit.h",
     "  return static_cast<uint16_t>((u + 0x7fffu + lsb) >> 16);",
     "  return static_cast<uint16_t>(u >> 16);",
     ["runtime:SixteenBit.*"]),
    ("precision: bfloat16 rounds ties away from zero",
     "runtime/sixteen_bit.h",
     "(u + 0x7fffu + lsb) >> 16",
     "(u + 0x8000u) >> 16",
     ["runtime:SixteenBit.*"]),
    ("precision: float16 rounds ties away from zero",
     "runtime/sixteen_bit.h",
     "((rebiased + 0xfffu + lsb) >> 13)",
     "((rebiased + 0x1000u) >> 13)",
     ["runtime:SixteenBit.*"]),
    ("precision: float16 subnormals round ties up",
     "runtime/sixteen_bit.h",
     "(rest > half || (rest == half && (kept & 1u)))",
     "(rest >= half)",
     ["runtime:SixteenBit.*"]),
    ("precision: float16 flushes subnormals to zero",
     "runtime/sixteen_bit.h",
     "  if (exponent < -25) return sign;",
     "  if (exponent < -14) return sign;",
     ["runtime:SixteenBit.*"]),
    ("precision: --plan-only writes the program too",
     "driver/compile.cpp",
     "  if (s.plan_only) return out;",
     "",
     ["cli:PrecisionFlag.*"]),
    ("precision: the verifier ignores the plan's block types",
     "planner/verify/static_checks.cpp",
     "    if (plan_.block_types[b] != data_type_name(tdfg_.blocks[b].dtype)) {",
     "    if (false) {",
     ["cli:PrecisionFlag.*"]),
    ("precision: plan.json's reader takes any block type",
     "planner/plan_json.cpp",
     "        if (!parse_data_type(plan.block_types[b]))",
     "        if (false)",
     ["cli:PrecisionFlag.*"]),
    ("precision: an overflow keeps the growth count",
     "runtime/loss_scale.h",
     "    state.scale *= rules.backoff_factor;\n    state.growth_tracker = 0;",
     "    state.scale *= rules.backoff_factor;",
     ["runtime:LossScale.*"]),
    ("precision: the scale grows without checking its range",
     "runtime/loss_scale.h",
     "    if (std::isfinite(grown)) state.scale = grown;",
     "    state.scale = grown;",
     ["runtime:LossScale.*"]),
    ("precision: the growth count kept after growing",
     "runtime/loss_scale.h",
     "    if (std::isfinite(grown)) state.scale = grown;\n    state.growth_tracker = 0;",
     "    if (std::isfinite(grown)) state.scale = grown;\n    state.growth_tracker = clean;",
     ["runtime:LossScale.*"]),
    ("precision: unscaling stops at the first non-finite gradient",
     "runtime/loss_scale.h",
     "    non_finite |= !std::isfinite(gradients[i]);",
     "    non_finite |= !std::isfinite(gradients[i]);\n    if (non_finite) break;",
     ["runtime:LossScale.*"]),
    ("precision: a float32 profile prices a 16-bit model without a warning",
     "driver/cost_source.cpp",
     "  if (is_16_bit(model.precision) && model.math != profile.math_mode)",
     "  if (false)",
     ["cli:PrecisionFlag.*"]),
]

SETS = {
    "planner": PLANNER,
    "runtime": RUNTIME,
    "verifier": VERIFIER,
    "codegen": CODEGEN,
    "checkpoints": CHECKPOINTS,
    "frontend": FRONTEND,
    "precision": PRECISION,
}


def run(cmd, cwd, log, timeout=1800):
    with open(log, "a") as out:
        out.write("$ " + " ".join(cmd) + "\n")
        out.flush()
        return subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, timeout=timeout).returncode


def split_test(test):
    """'runtime:PoolTies.*' -> ('runtime', 'PoolTies.*'); 'planner' -> ('planner', '')."""
    binary, _, gtest_filter = test.partition(":")
    return binary, gtest_filter


def build_and_test(work, tests, log):
    binaries = sorted({split_test(t)[0] for t in tests})
    if run(["cmake", "--build", os.path.join(work, "build"), "-j", str(os.cpu_count() or 2), "--target",
            *[b + "_tests" for b in binaries]], work, log) != 0:
        return "build failed"
    for test in tests:
        binary, gtest_filter = split_test(test)
        exe = os.path.join(work, "build", "tests", binary, binary + "_tests")
        cmd = [exe, "--gtest_brief=1"] + ([f"--gtest_filter={gtest_filter}"] if gtest_filter else [])
        if run(cmd, work, log, timeout=900) != 0:
            return "killed"
    return "survived"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", help="a copy of the source tree (src/) with a configured build/ in it")
    ap.add_argument("--set", default="", help="comma-separated sets: " + ", ".join(SETS))
    ap.add_argument("--only", default="", help="comma-separated mutant names")
    ap.add_argument("--list", action="store_true", help="print each set's mutants and the tests that must kill them")
    args = ap.parse_args()
    sets = list(filter(None, args.set.split(",")))
    unknown = [name for name in sets if name not in SETS]
    if unknown:
        print(f"unknown set {', '.join(unknown)}: the sets are {', '.join(SETS)}")
        return 2
    only = set(filter(None, args.only.split(",")))
    chosen = [(set_name, m) for set_name, mutants in SETS.items() if not sets or set_name in sets
              for m in mutants if not only or m[0] in only]
    missing = only - {m[0] for _, m in chosen}
    if missing:
        print(f"no such mutant in the chosen sets: {', '.join(sorted(missing))}")
        return 2
    if args.list:
        for set_name, (name, path, _, _, tests) in chosen:
            print(f"{set_name}: {name} ({path}; {' '.join(tests)})")
        return 0
    if not args.work:
        ap.error("--work is required (scripts/mutation.sh makes one)")
    src = os.path.join(args.work, "src")
    log = os.path.join(args.work, "mutation.log")
    started = time.time()
    # Every test a chosen mutant runs must pass without it.
    baseline_tests = sorted({t for _, m in chosen for t in m[4]})
    print(f"baseline (no mutant): {' '.join(baseline_tests)}: ", end="", flush=True)
    base = build_and_test(src, baseline_tests, log)
    if base != "survived":
        print(f"the unmutated tests do not pass ({base}); see {log}")
        return 2
    print("tests pass")
    survivors, results = [], []
    for set_name, (name, path, find, replace, tests) in chosen:
        file = os.path.join(src, path)
        text = open(file).read()
        if text.count(find) != 1:
            print(f"{name}: its text is found {text.count(find)} times in {path}, not once: fix the mutant")
            return 2
        t0 = time.time()
        open(file, "w").write(text.replace(find, replace))
        try:
            outcome = build_and_test(src, tests, log)
        finally:
            open(file, "w").write(text)
        results.append((set_name, name, outcome, time.time() - t0))
        print(f"{set_name}: {name}: {outcome} ({time.time() - t0:.0f} s)", flush=True)
        if outcome == "build failed":
            print(f"{name}: the mutant does not compile: fix the mutant (log: {log})")
            return 2
        if outcome == "survived":
            survivors.append(name)
    # Leave the copy built as it was.
    build_and_test(src, baseline_tests, log)
    total = time.time() - started
    print(f"{len(results)} mutants, {len(results) - len(survivors)} killed, {len(survivors)} survived; "
          f"{total / 60:.1f} minutes")
    for set_name in SETS:
        times = [r[3] for r in results if r[0] == set_name]
        if times:
            print(f"  {set_name}: {len(times)} mutants, {sum(times) / 60:.1f} minutes")
    for name in survivors:
        print(f"SURVIVED: {name}")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
