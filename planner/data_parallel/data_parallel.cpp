#include "planner/data_parallel/data_parallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <tuple>

#include "core/error.h"
#include "profiler/forwarding_cost_model.h"
#include "profiler/link_sharing.h"

namespace mplan {

const char* stagger_name(Stagger stagger) {
  switch (stagger) {
    case Stagger::none: return "none";
    case Stagger::paper: return "paper";
    case Stagger::search: return "search";
  }
  return "?";
}

bool parse_stagger(const std::string& name, Stagger* stagger) {
  for (Stagger s : {Stagger::none, Stagger::paper, Stagger::search})
    if (name == stagger_name(s)) {
      *stagger = s;
      return true;
    }
  return false;
}

std::vector<std::pair<double, double>> shared_copy_slowdown(const Machine& machine, int32_t ranks) {
  const auto per_node = static_cast<int32_t>(machine.gpus.size());
  std::vector<std::pair<double, double>> out(static_cast<size_t>(ranks), {1.0, 1.0});
  for (const bool to_device : {true, false}) {
    std::vector<HostCopy> all;
    for (int32_t r = 0; r < ranks; ++r) all.push_back({r / per_node, r % per_node, to_device});
    const std::vector<double> together = shared_copy_rates(machine, all);
    for (int32_t r = 0; r < ranks; ++r) {
      const double alone = shared_copy_rates(machine, {all[static_cast<size_t>(r)]})[0];
      const double slowdown = together[static_cast<size_t>(r)] > 0 ? alone / together[static_cast<size_t>(r)] : 1.0;
      (to_device ? out[static_cast<size_t>(r)].first : out[static_cast<size_t>(r)].second) = std::max(1.0, slowdown);
    }
  }
  return out;
}

namespace {

// One GPU's costs with its host copies slowed by the share of the link it
// keeps while the other GPUs copy too: the copy's fixed latency stays, its
// transfer time is multiplied.
class SharedLinkCostModel final : public ForwardingCostModel {
 public:
  SharedLinkCostModel(const CostModel& base, double to_device, double to_host)
      : ForwardingCostModel(base), to_device_(to_device), to_host_(to_host) {}
  double host_to_device_ms(int64_t bytes) const override {
    const double fixed = source_.host_to_device_ms(0);
    return fixed + (source_.host_to_device_ms(bytes) - fixed) * to_device_;
  }
  double device_to_host_ms(int64_t bytes) const override {
    const double fixed = source_.device_to_host_ms(0);
    return fixed + (source_.device_to_host_ms(bytes) - fixed) * to_host_;
  }

 private:
  double to_device_, to_host_;
};

// The ranks of each PCIe switch (a GPU with a link of its own is a group of
// one), and each rank's place in its group (multi-GPU vDNN §III-A Step 1).
std::vector<int32_t> place_in_switch_group(const Machine& machine, int32_t ranks) {
  const auto per_node = static_cast<int32_t>(machine.gpus.size());
  std::map<std::pair<int32_t, int32_t>, int32_t> size;
  std::vector<int32_t> place;
  for (int32_t r = 0; r < ranks; ++r) {
    const int32_t gpu = r % per_node;
    const int32_t sw = machine.gpus[static_cast<size_t>(gpu)].pcie_switch;
    place.push_back(size[{r / per_node, sw >= 0 ? sw : -1 - gpu}]++);
  }
  return place;
}

// The layers a vDNN policy could swap: its FP tasks (conv ones for vdnn-conv).
int32_t swappable_layers(const Tdfg& tdfg, PolicyKind policy) {
  const bool conv_only = policy == PolicyKind::vdnn_conv_m || policy == PolicyKind::vdnn_conv_p;
  int32_t count = 0;
  for (const Task& t : tdfg.tasks)
    if (t.kind == TaskKind::FP && (!conv_only || t.paper_class == PaperClass::conv)) ++count;
  return count;
}

class Candidates {
 public:
  Candidates(const Tdfg& tdfg, const Machine& machine, const DataParallelOptions& dp)
      : tdfg_(tdfg), machine_(machine), dp_(dp) {}

  // Prices ranks running `plans` (plan_index per rank); keeps it if fastest.
  void consider(const std::string& label, std::vector<PlanResult> given, std::vector<int32_t> given_index) {
    // The plans in the order of the first rank that runs each, unused ones dropped.
    std::vector<PlanResult> plans;
    std::vector<int32_t> plan_index;
    std::map<int32_t, int32_t> renumbered;
    for (int32_t i : given_index) {
      auto [it, added] = renumbered.emplace(i, static_cast<int32_t>(plans.size()));
      if (added) plans.push_back(given[static_cast<size_t>(i)]);
      plan_index.push_back(it->second);
    }
    std::vector<std::vector<GradientBucket>> buckets;
    for (const PlanResult& p : plans) buckets.push_back(gradient_buckets(tdfg_, p.plan, dp_.bucket_bytes));
    std::vector<RankSchedule> schedules;
    for (int32_t i : plan_index)
      schedules.push_back({&plans[static_cast<size_t>(i)].plan, &buckets[static_cast<size_t>(i)]});
    RanksTiming timing = time_ranks(tdfg_, machine_, schedules);
    best_.candidates.emplace_back(label, timing.step_ms);
    // Ties go to the earlier candidate (fewer distinct plans first).
    if (best_.feasible && timing.step_ms >= best_.timing.step_ms) return;
    best_.feasible = true;
    best_.plans = std::move(plans);
    best_.plan_index = std::move(plan_index);
    best_.buckets = std::move(buckets);
    best_.timing = std::move(timing);
    best_.policy = label;
  }

  RankPlans take() { return std::move(best_); }

 private:
  const Tdfg& tdfg_;
  const Machine& machine_;
  const DataParallelOptions& dp_;
  RankPlans best_;
};

}  // namespace

RankPlans plan_data_parallel(const Tdfg& tdfg, const CostModel& cost, const Machine& machine,
                             const PlanOptions& options, const DataParallelOptions& dp, PlanResult alone) {
  const int32_t ranks = dp.ranks;
  MPLAN_CHECK(ranks >= 1 && ranks <= machine.gpu_count() && alone.feasible,
              "a feasible plan for ranks the machine has");
  Candidates candidates(tdfg, machine, dp);
  const std::vector<int32_t> place = place_in_switch_group(machine, ranks);
  std::string note;

  if (dp.stagger == Stagger::paper) {
    MPLAN_CHECK(is_vdnn_policy(options.policy), "the paper's staggering is for the vDNN policies");
    // Step 2: the largest interval x at which every GPU's share fits.
    const int32_t layers = std::max(1, swappable_layers(tdfg, options.policy));
    for (int32_t x = layers; x >= 1; --x) {
      std::map<int32_t, int32_t> index_of_offset;
      std::vector<PlanResult> plans;
      std::vector<int32_t> plan_index;
      bool fits = true;
      for (int32_t r = 0; r < ranks && fits; ++r) {
        const int32_t offset = place[static_cast<size_t>(r)] % x;
        auto [it, added] = index_of_offset.emplace(offset, static_cast<int32_t>(plans.size()));
        if (added) {
          PlanOptions o = options;
          o.vdnn_swap_stride = x;
          o.vdnn_swap_offset = offset;
          plans.push_back(x == 1 ? alone : plan_iteration(tdfg, cost, o));
          fits = plans.back().feasible;
        }
        plan_index.push_back(it->second);
      }
      if (!fits) continue;
      candidates.consider(fmt::format("paper, x = {}", x), std::move(plans), std::move(plan_index));
      break;
    }
    return candidates.take();
  }

  candidates.consider("alone", {alone}, std::vector<int32_t>(static_cast<size_t>(ranks), 0));
  if (dp.stagger == Stagger::none || ranks == 1) return candidates.take();

  // mplan's search: plans for the link share the ranks keep while all copy.
  const std::vector<std::pair<double, double>> slowdown = shared_copy_slowdown(machine, ranks);
  const bool shared = std::any_of(slowdown.begin(), slowdown.end(),
                                  [](const auto& s) { return s.first > 1.0 + 1e-9 || s.second > 1.0 + 1e-9; });
  if (!shared) return candidates.take();
  for (const double part : {1.0, 0.5}) {
    std::map<std::pair<double, double>, int32_t> index_of;
    std::vector<PlanResult> plans;
    std::vector<int32_t> plan_index;
    bool fits = true;
    for (int32_t r = 0; r < ranks && fits; ++r) {
      const auto [h2d, d2h] = slowdown[static_cast<size_t>(r)];
      const std::pair<double, double> key{1.0 + (h2d - 1.0) * part, 1.0 + (d2h - 1.0) * part};
      auto [it, added] = index_of.emplace(key, static_cast<int32_t>(plans.size()));
      if (added) {
        const SharedLinkCostModel priced(cost, key.first, key.second);
        plans.push_back(plan_iteration(tdfg, priced, options));
        fits = plans.back().feasible;
      }
      plan_index.push_back(it->second);
    }
    if (!fits) continue;
    candidates.consider(part == 1.0 ? "shared link" : "half the shared link", std::move(plans),
                        std::move(plan_index));
  }
  return candidates.take();
}

}  // namespace mplan
