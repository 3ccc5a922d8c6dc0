#include "planner/plan_search.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>

#include "core/bytes.h"
#include "planner/deciders/deciders.h"
#include "planner/plan_limits.h"
#include "planner/search_internal.h"
#include "planner/sub_batch.h"

namespace mplan {
namespace search {

PlanResult infeasible(std::string why) {
  PlanResult out;
  out.note = std::move(why);
  return out;
}

std::string bytes_text(int64_t bytes) { return std::to_string(bytes) + " bytes (" + format_bytes(bytes) + ")"; }

namespace {

// Ideal: unlimited memory, the fastest option of every task, the whole batch
// as one sub-batch, no copies (moDNN §V).
double ideal_ms(const Tdfg& tdfg, const CostModel& cost, int64_t batch) {
  double ms = 0;
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t)
    ms += fastest_option(cost, tdfg, t, t == tdfg.update_task ? 1 : batch).time_ms;
  return ms;
}

}  // namespace

bool better_plan(const PlanResult& a, const PlanResult& b) {
  const PlanSummary& x = a.plan.summary;
  const PlanSummary& y = b.plan.summary;
  if (std::abs(x.simulated_ms - y.simulated_ms) > 1e-9 * std::max(x.simulated_ms, y.simulated_ms))
    return x.simulated_ms < y.simulated_ms;
  if (a.plan.sub_batches.size() != b.plan.sub_batches.size())
    return a.plan.sub_batches.size() < b.plan.sub_batches.size();
  const int64_t moved_a = x.bytes_to_host + x.bytes_to_device;
  const int64_t moved_b = y.bytes_to_host + y.bytes_to_device;
  if (moved_a != moved_b) return moved_a < moved_b;
  return a.recomputed_tasks < b.recomputed_tasks;
}

double Search::lower_bound_ms(const std::vector<int64_t>& rounds, bool dynamic) {
  double ms = 0;
  for (int64_t b : rounds) {
    auto it = round_ms_.find({b, dynamic});
    if (it == round_ms_.end()) {
      double round = 0;
      for (TaskId t = 0; t < static_cast<TaskId>(tdfg_.tasks.size()); ++t) {
        if (t == tdfg_.update_task) continue;
        round += dynamic ? dynamic_options_.at(tdfg_, cost_, t, b).options.front().time_ms
                         : fastest_option(cost_, tdfg_, t, b).time_ms;
      }
      it = round_ms_.emplace(std::make_pair(b, dynamic), round).first;
    }
    ms += it->second;
  }
  return ms;
}

const PlanResult& Search::consider(const Candidate& c) {
  double bound = bound_ms_;
  if (have_ && (bound == 0 || best_.plan.summary.simulated_ms < bound)) bound = best_.plan.summary.simulated_ms;
  if (screen_ && bound > 0 && lower_bound_ms(c.rounds, c.dynamic) > bound) {
    // No plan of these rounds can beat the bound: not simulated.
    last_ = infeasible("slower than the best plan so far even at its fastest");
    last_.abandoned = true;
    return last_;
  }
  SimOptions o;
  o.sub_batches = c.rounds;
  o.arena_bytes = arena_;
  o.copy_engines = c.copy_engines > 0 ? c.copy_engines : copy_engines_;
  o.large_block_bytes = c.large_block_bytes;
  o.workspace_pool_bytes = c.pool_bytes;
  o.fixed_configurations = c.fixed;
  o.micro_batch_dynamic = c.dynamic;
  o.dynamic_options = &dynamic_options_;
  // A plan as fast as the best (to better_plan's tolerance) may still win on its copies.
  o.abandon_after_ms = screen_ ? bound * (1 + 1e-9) : 0;
  std::unique_ptr<Decider> decider = c.decider();
  last_ = simulate_iteration(tdfg_, cost_, o, *decider);
  ++simulations_;
  if (std::getenv("MPLAN_DEBUG_SEARCH") != nullptr)
    fmt::print(stderr, "search: {} ({} rounds, large blocks from {}): {} {:.3f} ms, {} offloads, {} recomputed, "
               "{:.3f} ms slower options\n",
               c.label, c.rounds.size(), c.large_block_bytes,
               last_.feasible ? "feasible" : (last_.abandoned ? "abandoned" : "infeasible"),
               last_.feasible ? last_.plan.summary.simulated_ms : 0.0, last_.plan.summary.offload_count,
               last_.recomputed_tasks, last_.slower_options_ms);
  if (!last_.feasible) {
    if (!last_.abandoned && first_failure_.empty()) first_failure_ = c.label + ": " + last_.note;
    return last_;
  }
  const double t = last_.plan.summary.simulated_ms;
  if (bound_ms_ > 0 && t >= bound_ms_) return last_;
  if (!have_ || better_plan(last_, best_)) {
    best_ = last_;
    best_candidate_ = c;
    have_ = true;
    recent_bests_.push_back(c);
    if (recent_bests_.size() > kRecentBests) recent_bests_.erase(recent_bests_.begin());
  }
  return last_;
}

// How long copies of the two directions run at once: each stream is FIFO, so
// its copies' intervals are disjoint and in order; a two-finger sweep.
double both_directions_ms(const std::vector<Step>& steps) {
  std::vector<std::pair<double, double>> h2d, d2h;
  for (const Step& s : steps) {
    if (s.stream == StreamKind::h2d) h2d.emplace_back(s.start_ms, s.end_ms);
    if (s.stream == StreamKind::d2h) d2h.emplace_back(s.start_ms, s.end_ms);
  }
  double total = 0;
  for (size_t i = 0, j = 0; i < h2d.size() && j < d2h.size();) {
    total += std::max(0.0, std::min(h2d[i].second, d2h[j].second) - std::max(h2d[i].first, d2h[j].first));
    if (h2d[i].second < d2h[j].second) ++i;
    else ++j;
  }
  return total;
}

void fill_header(Plan* plan, const Tdfg& tdfg, const CostModel& cost, int64_t budget, int64_t batch) {
  plan->model_name = tdfg.model_name;
  plan->model_digest = tdfg.model_digest;
  plan->device = cost.describe();
  plan->budget_bytes = budget;
  plan->resident_bytes = tdfg.resident_bytes();
  plan->batch = batch;
  plan->summary.ideal_ms = ideal_ms(tdfg, cost, batch);
  if (plan->sub_batches.size() > 1) {
    plan->summary.notes.push_back("the batch of " + std::to_string(batch) + " runs as " +
                                  std::to_string(plan->sub_batches.size()) +
                                  " sub-batches; gradients accumulate and the update runs once");
    if (has_batch_statistics(tdfg)) plan->summary.notes.push_back("batchnorm statistics are per sub-batch");
  } else if (has_batch_statistics(tdfg)) {
    plan->summary.notes.push_back("batchnorm statistics are over the whole batch (one round)");
  }
  if (plan->copy_engines == 2 && cost.duplex_slowdown() > 1.0)
    if (const double both_ms = both_directions_ms(plan->steps); both_ms > 0)
      plan->summary.notes.push_back(
          fmt::format("copies of the two directions overlap for {:.3f} ms, priced {:.2f}x slower while they do (the "
                      "cost model's duplex slowdown)",
                      both_ms, cost.duplex_slowdown()));
}

PlanResult finish(Search& search, const SearchInput& in, int64_t budget, std::string note) {
  PlanResult out = std::move(search.best());
  out.simulations = search.simulations();
  fill_header(&out.plan, in.tdfg, in.cost, budget, in.batch);
  out.note = std::move(note);
  return out;
}

namespace {

// GLPK's time for each Checkmate MILP (planner/checkmate_milp.h): on the
// 2-core development machine it proves cifar_small's optimum in well under it.
constexpr double kCheckmateTimeLimitS = 10;

// Chen et al. 2016 §4 take k = sqrt(n) for n layers; the search tries every
// k up to 16 and then powers of two and sqrt(n), up to n (k = n keeps only
// the last layer's output: the most memory saved, the most recomputed).
std::vector<int> checkpoint_segments(const Tdfg& tdfg) {
  int layers = 0;
  for (const Task& t : tdfg.tasks)
    if (t.kind == TaskKind::FP) layers = std::max(layers, static_cast<int>(t.layer) + 1);
  std::vector<int> out;
  for (int k = 1; k <= std::min(layers, 16); ++k) out.push_back(k);
  for (int k = 32; k <= layers; k *= 2) out.push_back(k);
  const int root = static_cast<int>(std::lround(std::sqrt(static_cast<double>(layers))));
  if (root > 16) out.push_back(root);
  if (layers > 16) out.push_back(layers);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

struct LayerWise {
  std::vector<int64_t> rounds;
  int copy_engines = 1;
  std::function<std::unique_ptr<Decider>()> decider;
  std::string label;
};

// vDNN's dynamic policy (§III-C) at `rounds`: the first pass that fits;
// `pass` says which. Infeasible when pass 1 does not fit.
PlanResult search_vdnn_dyn(const SearchInput& in, const std::vector<int64_t>& rounds, std::string* pass) {
  using O = VdnnOffload;
  using A = VdnnAlgorithms;
  struct Pass {
    O offload;
    A algorithms;
    const char* name;
  };
  // §III-C: pass 1 (all, memory-optimal) must fit, else nothing will; then
  // the first of the passes below that fits is adopted.
  const Pass passes[] = {
      {O::all, A::memory_optimal, "pass 1 (all, memory-optimal)"},
      {O::none, A::performance_optimal, "pass 2 (no offload, fastest)"},
      {O::conv, A::performance_optimal, "pass 2 (conv, fastest)"},
      {O::all, A::performance_optimal, "pass 2 (all, fastest)"},
      {O::conv, A::greedy, "pass 3 (conv, greedy downgrade)"},
      {O::all, A::greedy, "pass 3 (all, greedy downgrade)"},
  };
  std::optional<PlanResult> first;
  for (const Pass& p : passes) {
    Search search(in.tdfg, in.cost, in.arena_bytes, 1, false);
    Candidate c;
    c.rounds = rounds;
    const VdnnSwapLayers swap{in.options.vdnn_swap_stride, in.options.vdnn_swap_offset};
    c.decider = [p, swap] { return make_vdnn_decider(p.offload, p.algorithms, swap); };
    c.label = p.name;
    const PlanResult& r = search.consider(c);
    if (!first) {
      if (!r.feasible) return infeasible(r.note);
      first = r;
      continue;
    }
    if (r.feasible) {
      *pass = p.name;
      return r;
    }
  }
  *pass = passes[0].name;
  return *first;
}

}  // namespace
}  // namespace search

std::vector<int64_t> rounds_for(int64_t batch, int64_t sub_batch, int64_t least_round) {
  std::vector<int64_t> rounds = split_batch(batch, sub_batch);
  if (rounds.back() >= least_round) return rounds;
  const int64_t count = static_cast<int64_t>(rounds.size());
  if (batch / count < least_round) return {};
  rounds.assign(count, batch / count);
  for (int64_t i = 0; i < batch % count; ++i) rounds[i] += 1;
  return rounds;
}

PlanResult search_plan(const SearchInput& in) {
  using namespace search;
  const PolicyKind policy = in.options.policy;
  const Tdfg& tdfg = in.tdfg;
  const CostModel& cost = in.cost;
  const int64_t batch = in.batch, budget = in.options.budget_bytes, arena = in.arena_bytes;
  if (policy == PolicyKind::mplan || policy == PolicyKind::modnn) return search_scheduler(in);
  if (policy == PolicyKind::ideal) {
    Search search(tdfg, cost, int64_t{1} << 52, 2, false);  // 4 PiB: unlimited
    Candidate c;
    c.rounds = {batch};
    c.decider = [] { return make_ideal_decider(); };
    const PlanResult& r = search.consider(c);
    MPLAN_CHECK(r.feasible, "the ideal plan has unlimited memory: " + r.note);
    PlanResult out = finish(search, in, 0, "");
    // Its own budget: exactly what it needs.
    out.plan.arena_bytes = align_up(out.plan.summary.peak_arena_bytes);
    out.plan.budget_bytes = out.plan.resident_region_bytes + out.plan.arena_bytes;
    return out;
  }
  if (arena <= 0)
    return infeasible("the budget " + format_bytes(budget) + " does not hold the resident weights (" +
                      format_bytes(in.resident_region_bytes) + ")");
  // A plan's rounds are bounded before anything is simulated (planner/plan_limits.h).
  if (Status limit = check_plan_size(tdfg, cost, arena, batch, in.options.sub_batch); !limit)
    return infeasible(limit.error().message);
  auto single = [&](int copy_engines, std::function<std::unique_ptr<Decider>()> decider) {
    Search search(tdfg, cost, arena, copy_engines, false);
    Candidate c;
    c.rounds = {batch};
    c.decider = std::move(decider);
    const PlanResult& r = search.consider(c);
    if (!r.feasible) return infeasible(r.note);
    return finish(search, in, budget, "");
  };
  auto vdnn = [&](VdnnOffload o, VdnnAlgorithms a) {
    const VdnnSwapLayers swap{in.options.vdnn_swap_stride, in.options.vdnn_swap_offset};
    return single(1, [o, a, swap] { return make_vdnn_decider(o, a, swap); });
  };
  switch (policy) {
    case PolicyKind::vdnn_all_m: return vdnn(VdnnOffload::all, VdnnAlgorithms::memory_optimal);
    case PolicyKind::vdnn_all_p: return vdnn(VdnnOffload::all, VdnnAlgorithms::performance_optimal);
    case PolicyKind::vdnn_conv_m: return vdnn(VdnnOffload::conv, VdnnAlgorithms::memory_optimal);
    case PolicyKind::vdnn_conv_p: return vdnn(VdnnOffload::conv, VdnnAlgorithms::performance_optimal);
    case PolicyKind::superneurons: return single(cost.copy_engines(), [] { return make_superneurons_decider(); });
    case PolicyKind::dtr: return single(cost.copy_engines(), [] { return make_dtr_decider(); });
    case PolicyKind::checkpoint: {
      Search search(tdfg, cost, arena, cost.copy_engines(), false);
      for (int k : checkpoint_segments(tdfg)) {
        Candidate c;
        c.rounds = {batch};
        c.decider = [k] { return make_checkpoint_decider(k); };
        c.label = "checkpoint every " + std::to_string(k) + " layers";
        search.consider(c);
      }
      if (!search.have()) return infeasible("no segment length fits: " + search.first_failure());
      return finish(search, in, budget, search.best_candidate().label);
    }
    case PolicyKind::checkmate: {
      // The MILP counts only the tasks' outputs, not the workspaces that
      // buy faster algorithms (nor alignment): it is solved for a few shares
      // of the arena, and the fastest simulated plan is kept.
      Search search(tdfg, cost, arena, cost.copy_engines(), false);
      std::map<std::string, std::shared_ptr<RematSchedule>> outcomes;  // by candidate label
      for (double fraction : {1.0, 0.85, 0.7, 0.55}) {
        auto outcome = std::make_shared<RematSchedule>();
        Candidate c;
        c.rounds = {batch};
        c.decider = [fraction, outcome] { return make_checkmate_decider(fraction, kCheckmateTimeLimitS, outcome); };
        c.label = fmt::format("Checkmate MILP at {:.0f}% of the arena", 100 * fraction);
        outcomes[c.label] = outcome;
        search.consider(c);
        // A smaller budget is no easier for the MILP.
        if (!outcome->solved) {
          if (search.have()) break;
          return infeasible(fmt::format("Checkmate's MILP for {:.0f}% of the arena: {}", 100 * fraction, outcome->why));
        }
      }
      if (!search.have())
        return infeasible("the MILP's schedules do not fit the simulated arena: " + search.first_failure());
      const std::string label = search.best_candidate().label;
      return finish(search, in, budget,
                    label + (outcomes.at(label)->optimal ? " (optimal)"
                                                         : " (best found in the time limit, not proven optimal)"));
    }
    case PolicyKind::vdnn_dyn: {
      std::string pass;
      PlanResult r = search_vdnn_dyn(in, {batch}, &pass);
      if (!r.feasible) return r;
      fill_header(&r.plan, tdfg, cost, budget, batch);
      r.note = pass;
      return r;
    }
    case PolicyKind::vdnn_plus: {
      // vDNN+ (moDNN §V-B): vDNN's dynamic policy at moDNN's sub-batch
      // candidates (Eq. 3 start); the fastest feasible one. If none is
      // feasible, halves the smallest candidate down to 1.
      const int64_t bmax = largest_feasible_sub_batch(tdfg, cost, arena, batch);
      if (bmax < 1) return infeasible("no sub-batch fits the arena of " + format_bytes(arena));
      const int64_t b0 = std::min(eq3_sub_batch(tdfg, cost, arena, batch), bmax);
      std::vector<int64_t> candidates = sub_batch_candidates(batch, b0, bmax);
      std::optional<PlanResult> best;
      std::string last_failure;
      auto try_b = [&](int64_t b) {
        std::string pass;
        PlanResult r = search_vdnn_dyn(in, split_batch(batch, b), &pass);
        if (!r.feasible) {
          last_failure = "sub-batch " + std::to_string(b) + ": " + r.note;
          return;
        }
        if (!best || r.plan.summary.simulated_ms < best->plan.summary.simulated_ms) {
          best = std::move(r);
          best->note = "sub-batch " + std::to_string(b) + ", " + pass;
        }
      };
      for (int64_t b : candidates) try_b(b);
      for (int64_t b = candidates.front() / 2; !best && b >= 1 && check_rounds(tdfg, batch, b).ok(); b /= 2) try_b(b);
      if (!best) return infeasible(last_failure);
      fill_header(&best->plan, tdfg, cost, budget, batch);
      return *best;
    }
    default: break;
  }
  MPLAN_CHECK(false, "unknown policy");
  return {};
}

}  // namespace mplan
