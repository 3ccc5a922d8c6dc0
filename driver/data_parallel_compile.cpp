#include "driver/data_parallel_compile.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/bytes.h"
#include "core/limits.h"
#include "planner/data_parallel/ranks_trace.h"

namespace mplan::driver {

namespace {

Error usage(std::string message) { return Error{{}, std::move(message), ErrorKind::usage}; }

// The copy link of one GPU of the cost model's device, from its copy times.
Device copy_device(const CostModel& cost, const std::string& name) {
  constexpr int64_t kProbe = int64_t{1} << 30;
  Device d;
  d.name = name;
  d.description = cost.describe();
  d.memory_bytes = cost.device_memory_bytes();
  d.copy_engines = cost.copy_engines();
  d.copy_latency_ms = cost.host_to_device_ms(0);
  d.host_to_device_bytes_per_s = kProbe / ((cost.host_to_device_ms(kProbe) - cost.host_to_device_ms(0)) * 1e-3);
  d.device_to_host_bytes_per_s = kProbe / ((cost.device_to_host_ms(kProbe) - cost.device_to_host_ms(0)) * 1e-3);
  return d;
}

std::string rank_list(const std::vector<int32_t>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i == 6 && ranks.size() > 8) return out + fmt::format(", ... ({} ranks)", ranks.size());
    out += (i ? ", " : "") + std::to_string(ranks[i]);
  }
  return out;
}

}  // namespace

std::string rank_plan_file(int32_t rank) {
  return rank == 0 ? "plan.json" : fmt::format("plan-rank-{}.json", rank);
}

Result<DataParallelSettings> check_data_parallel_flags(const DataParallelFlags& f, PolicyKind policy) {
  DataParallelSettings s;
  if (f.gpus != -1 && (f.gpus < 1 || f.gpus > kMaxRanks))
    return usage(fmt::format("--gpus {}: expected a number of GPUs from 1 to {}", f.gpus, kMaxRanks));
  s.gpus = std::max(0, f.gpus);
  s.machine = f.machine;
  if (!f.stagger.empty()) {
    Stagger stagger = Stagger::none;
    if (!parse_stagger(f.stagger, &stagger))
      return usage(fmt::format("--stagger '{}': expected none, paper or search", f.stagger));
    if (stagger == Stagger::paper && !is_vdnn_policy(policy))
      return usage("--stagger paper is multi-GPU vDNN's rule for which layers each GPU swaps: it needs a vDNN "
                   "policy (--policy vdnn-all-m, vdnn-all-p, vdnn-conv-m, vdnn-conv-p, vdnn-dyn or vdnn+)");
    if (stagger == Stagger::search && policy != PolicyKind::mplan)
      return usage("--stagger search is mplan's own search (--policy mplan); a paper's policy plans every rank "
                   "as its paper does (--stagger none, or paper for vDNN)");
    s.stagger = stagger;
  }
  if (!f.bucket_size.empty()) {
    Result<int64_t> bytes = parse_bytes(f.bucket_size);
    if (!bytes) return usage(fmt::format("--bucket-size '{}': {}", f.bucket_size, bytes.error().message));
    if (*bytes <= 0) return usage(fmt::format("--bucket-size '{}': a bucket holds more than 0 bytes", f.bucket_size));
    s.bucket_bytes = *bytes;
  }
  if ((s.stagger || !f.bucket_size.empty()) && !s.given())
    return usage(fmt::format("{} applies to plans of several GPUs: give --gpus N (and --machine FILE)",
                             s.stagger ? "--stagger" : "--bucket-size"));
  return s;
}

Result<RankMachine> load_rank_machine(const DataParallelSettings& settings) {
  RankMachine out;
  if (settings.machine.empty()) {
    out.ranks = std::max(1, settings.gpus);
    return out;
  }
  Result<Machine> machine = load_machine(settings.machine);
  if (!machine) return machine.error();
  out.machine = std::move(machine).value();
  out.standalone = false;
  const Machine& m = out.machine;
  out.ranks = settings.gpus > 0 ? settings.gpus : m.gpu_count();
  if (out.ranks > m.gpu_count())
    return usage(fmt::format("--gpus {}: the machine {} ({}) has {} GPUs", out.ranks, m.name, m.source_file,
                             m.gpu_count()));
  for (const MachineGpu& g : m.gpus)
    if (g.device.name != m.gpus[0].device.name)
      return Error{{}, fmt::format("{}: GPUs {} and {} differ; data-parallel ranks run one plan each on GPUs that "
                                   "are alike",
                                   m.source_file, m.gpus[0].device_name, g.device_name)};
  const auto per_node = static_cast<int32_t>(m.gpus.size());
  const int32_t nodes = (out.ranks + per_node - 1) / per_node;
  out.line = fmt::format("ranks: {} on {} ({}), {}", out.ranks, m.name, m.description,
                         nodes == 1 ? fmt::format("GPUs 0-{} of node 0", out.ranks - 1)
                                    : fmt::format("{} nodes of up to {} GPUs", nodes, per_node));
  return out;
}

void complete_standalone(RankMachine& machine, const CostModel& cost, const std::string& device_name) {
  if (!machine.standalone) return;
  machine.machine = standalone_machine(copy_device(cost, device_name), machine.ranks);
  machine.line = fmt::format("ranks: {} GPUs of {}, each with a PCIe link of its own (no --machine: the ranks share "
                             "no link but the all-reduce's)",
                             machine.ranks, device_name);
}

Result<int64_t> rank_batch(int64_t global_batch, int32_t ranks, bool batch_given) {
  if (global_batch % ranks == 0) return global_batch / ranks;
  const int64_t below = global_batch / ranks * ranks, above = below + ranks;
  return usage(fmt::format("{}the batch {} does not divide over {} ranks: every rank trains an equal share of it "
                           "(so that the step is full-batch training's); give --batch {}{} (a multiple of {})",
                           batch_given ? "--batch: " : "", global_batch, ranks,
                           below > 0 ? fmt::format("{} or ", below) : "", above, ranks));
}

RankPlanFiles plan_ranks(const Tdfg& tdfg, const CostModel& cost, const RankMachine& machine,
                         const PlanOptions& options, const DataParallelSettings& settings, PlanResult alone,
                         const std::function<void(Plan&)>& finish) {
  DataParallelOptions dp;
  dp.ranks = machine.ranks;
  dp.bucket_bytes = settings.bucket_bytes;
  dp.stagger = settings.stagger ? *settings.stagger
                                : options.policy == PolicyKind::mplan ? Stagger::search : Stagger::none;
  const double alone_ms = alone.plan.summary.simulated_ms;
  RankPlans ranked = plan_data_parallel(tdfg, cost, machine.machine, options, dp, std::move(alone));
  RankPlanFiles out;
  out.timing = ranked.timing;
  for (size_t i = 0; i < ranked.plans.size(); ++i) {
    const auto first = static_cast<int32_t>(
        std::find(ranked.plan_index.begin(), ranked.plan_index.end(), static_cast<int32_t>(i)) -
        ranked.plan_index.begin());
    out.first_rank.push_back(first);
  }
  std::vector<int32_t> plan_of_rank;
  for (int32_t i : ranked.plan_index) plan_of_rank.push_back(out.first_rank[static_cast<size_t>(i)]);
  for (size_t i = 0; i < ranked.plans.size(); ++i) {
    Plan& plan = ranked.plans[i].plan;
    finish(plan);
    DataParallel& d = plan.data_parallel;
    d.ranks = machine.ranks;
    d.rank = out.first_rank[i];
    d.global_batch = plan.batch * machine.ranks;
    d.machine = machine.machine.name;
    d.policy = ranked.policy;
    d.plan_of_rank = plan_of_rank;
    d.bucket_bytes = dp.bucket_bytes;
    d.step_ms = ranked.timing.step_ms;
    d.buckets = ranked.buckets[i];
    for (const RankTiming& t : ranked.timing.ranks) d.rank_figures.push_back({t.finish_ms, t.copy_ms, t.alone_copy_ms});
    d.links.assign(ranked.timing.links.begin(),
                   ranked.timing.links.begin() + static_cast<std::ptrdiff_t>(
                                                     std::min(kReportedLinks, ranked.timing.links.size())));
    for (size_t k = 0; k < d.buckets.size(); ++k) {
      d.buckets[k].start_ms = ranked.timing.buckets[k].start_ms;
      d.buckets[k].end_ms = ranked.timing.buckets[k].end_ms;
    }
  }
  // What compile prints.
  const Plan& first = ranked.plans[0].plan;
  int64_t gradient_bytes = 0;
  for (const GradientBucket& b : first.data_parallel.buckets) gradient_bytes += b.bytes;
  // How long the update waits for the last all-reduce, on the rank that waits longest.
  double wait_ms = 0;
  for (size_t r = 0; r < ranked.plan_index.size(); ++r) {
    const Plan& plan = ranked.plans[static_cast<size_t>(ranked.plan_index[r])].plan;
    const RankTiming& t = ranked.timing.ranks[r];
    double before = 0;
    for (const Step& s : plan.steps) {
      if (s.kind != StepKind::compute) continue;
      if (tdfg.tasks.at(static_cast<size_t>(s.task)).kind == TaskKind::update) {
        wait_ms = std::max(wait_ms, t.start_ms[static_cast<size_t>(s.index)] - before);
        break;
      }
      before = t.end_ms[static_cast<size_t>(s.index)];
    }
  }
  out.text += machine.line + "\n";
  out.text += fmt::format("batch: {} in all = {} ranks x {} (each rank's share of every step, in rank order)\n",
                          first.data_parallel.global_batch, machine.ranks, first.batch);
  const double step = ranked.timing.step_ms;
  out.text += fmt::format("step: {:.3f} ms simulated for all ranks together; a rank alone {:.3f} ms ({:+.1f}%)\n",
                          step, alone_ms, alone_ms > 0 ? 100.0 * (step / alone_ms - 1.0) : 0.0);
  out.text += fmt::format("all-reduce: {} bucket{} cut at {} ({} of gradients), ring over {}; the update waits "
                          "{:.3f} ms for it\n",
                          first.data_parallel.buckets.size(), first.data_parallel.buckets.size() == 1 ? "" : "s",
                          format_bytes(dp.bucket_bytes), format_bytes(gradient_bytes), machine.ranks, wait_ms);
  std::string tried;
  for (const auto& [label, ms] : ranked.candidates)
    tried += fmt::format("{}{} {:.3f} ms", tried.empty() ? "" : ", ", label, ms);
  out.text += fmt::format("ranks' plans: {} (--stagger {}; tried: {})\n", ranked.policy, stagger_name(dp.stagger),
                          tried);
  for (size_t i = 0; i < ranked.plans.size(); ++i) {
    std::vector<int32_t> ranks;
    for (size_t r = 0; r < plan_of_rank.size(); ++r)
      if (plan_of_rank[r] == out.first_rank[i]) ranks.push_back(static_cast<int32_t>(r));
    const PlanSummary& s = ranked.plans[i].plan.summary;
    out.text += fmt::format("  rank{} {}: {} ({:.3f} ms alone, {} offloads, sub-batch {})\n",
                            ranks.size() == 1 ? "" : "s", rank_list(ranks), rank_plan_file(out.first_rank[i]),
                            s.simulated_ms, s.offload_count, ranked.plans[i].plan.sub_batch);
  }
  std::vector<const Plan*> per_rank;
  for (int32_t i : ranked.plan_index) per_rank.push_back(&ranked.plans[static_cast<size_t>(i)].plan);
  out.trace_json = ranks_to_trace_json(per_rank, ranked.timing);
  out.plans = std::move(ranked.plans);
  return out;
}

}  // namespace mplan::driver
