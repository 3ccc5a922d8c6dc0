// mplan's plan search and moDNN's (planner/plan_search.h): the sub-batch
// candidates, workspace pools, placements and ModnnRules levers, simulated on
// the iteration simulator with the moDNN decider, fastest kept; batchnorm's
// rounds as planner/planner.h says.

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "core/bytes.h"
#include "tdfg/bounds.h"
#include "planner/deciders/deciders.h"
#include "planner/plan_limits.h"
#include "planner/search_internal.h"
#include "planner/sub_batch.h"

namespace mplan::search {
namespace {

std::function<std::unique_ptr<Decider>()> modnn_factory(const ModnnRules& rules) {
  return [rules] { return make_modnn_decider(rules); };
}

constexpr const char* kAroundTaskText = "defragmenting around the task";
constexpr const char* kLoadAheadText = "loads ahead into free room";
constexpr const char* kCompactionText = "moves on the device";

// A candidate's label with `part` added to its levers, before the
// refinement's counts (which a refinement replaces, without_refinement).
std::string with_label_part(std::string label, const char* part) {
  const size_t counts = label.find(" blocks dropped, ");
  const size_t at = counts == std::string::npos ? label.size() - 1 : label.rfind(", ", counts);
  label.insert(at, std::string(", ") + part);
  return label;
}

std::string rules_text(const ModnnRules& r, bool stacked) {
  std::vector<std::string> parts;
  if (r.defragment_around_task) parts.push_back(kAroundTaskText);
  if (r.recompute) parts.push_back(r.recompute_convolutions ? "recomputation with convolutions" : "recomputation");
  if (r.recompute && r.early_drop_ratio > 0)
    parts.push_back(fmt::format("early drops at {:g}x a copy", r.early_drop_ratio));
  if (r.early_offload) parts.push_back("early offloads");
  if (!r.prefetch) parts.push_back("on-demand loads");
  if (!r.queued_prefetch) parts.push_back("moDNN's published prefetch rule");
  if (!r.refetch_cost) parts.push_back("no re-fetch cost");
  else if (!r.eq5_refetch) parts.push_back("Eq. 5's T_off as published");
  if (stacked) parts.push_back("large blocks stacked");
  if (r.compaction) parts.push_back(kCompactionText);
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out.empty() ? "offloading only" : out;
}

// Whether other levers or placements could make the plan faster: it evicted
// something, or a task ran slower than its fastest option.
bool could_improve(const PlanResult& r) {
  const PlanSummary& s = r.plan.summary;
  return s.offload_count > 0 || s.defragmentation_count > 0 || r.recomputed_tasks > 0 || s.prefetch_count > 0 ||
         s.move_count > 0 || r.slower_options_ms > 1e-9;
}

// Whether the plan kept everything on the device (no copies but input data, no recomputation).
bool needed_no_levers(const PlanResult& r) {
  const PlanSummary& s = r.plan.summary;
  return s.offload_count == 0 && s.defragmentation_count == 0 && r.recomputed_tasks == 0 && s.prefetch_count == 0 &&
         s.move_count == 0;
}

// The ratios of recomputation to copy time below which outputs are dropped
// early (ModnnRules::early_drop_ratio), each simulated.
constexpr double kEarlyDropRatios[] = {0.1, 0.2, 0.5};

// Profiles load_ahead simulates from, one after another: the recent bests',
// then the new best's own (while faster).
constexpr int kLoadAheadPasses = 2;

class SchedulerSearch {
 public:
  explicit SchedulerSearch(const SearchInput& in)
      : published_(in.options.policy == PolicyKind::modnn),
        in_(in),
        tdfg_(in.tdfg),
        cost_(in.cost),
        batch_(in.batch),
        opt_(in.options),
        resident_region_(in.resident_region_bytes),
        arena_(in.arena_bytes) {}

  PlanResult run();

 private:
  std::optional<Error> check();
  int64_t blocks_arena_of(int64_t pool) const { return arena_ - (pool > 0 ? align_up(pool) : 0); }
  std::vector<int64_t> candidates_for(int64_t blocks_arena);
  const WdProblem& wd_problem_at(const std::vector<int64_t>& rounds);
  std::vector<int64_t> pools();
  // The candidate of sub-batch b with `pool`, or nothing (the reason kept in first_error_).
  std::optional<Candidate> candidate(int64_t b, int64_t pool);
  // Simulates every candidate size of `which` with every pool and its levers.
  enum class Sizes { all, whole_batch, split };
  void search_sizes(Search& search, Sizes which);
  // search_sizes; in the auto workspace mode, where a convolution's fastest
  // workspace does not fit, again with micro-batched convolutions.
  void search_workspaces(Search& search, Sizes which);
  // search_workspaces; where its best plan defragmented (moDNN §IV-B.1),
  // the same again defragmenting around the task
  // (ModnnRules::defragment_around_task), the faster kept.
  void search_defragmenting(Search& search, Sizes which);
  // search_defragmenting; where its best plan still defragmented, that plan
  // refined again stacking only the largest blocks
  // (PlanOptions::coarse_large_block_divisor), the faster kept.
  void search_placements(Search& search, Sizes which);
  // The recent best plans of `search` again with their blocks loaded ahead
  // into the room each left free (ModnnRules::load_ahead), then from the new
  // best's own profile while faster; the best that loads ahead refined once
  // more. Its label names it (loads_ahead_from), not rules_text.
  void load_ahead(Search& search);
  // `c`, whose simulation is `plan`, again with its loads ahead of that
  // plan's profile, with and without the margin (ModnnRules::load_ahead).
  void loads_ahead_from(Search& search, Candidate c, const Plan& plan);
  // The recent best plans again with compaction (ModnnRules::compaction),
  // and the best of those loading ahead of its own profile.
  void compact(Search& search);
  // search_placements, then load_ahead, then compact: the whole search of `which`.
  void search_plans(Search& search, Sizes which) {
    search_placements(search, which);
    load_ahead(search);
    compact(search);
  }
  // One candidate: every lever on first; where that plan could improve, the
  // variants (planner/plan_search.h).
  void search_candidate(Search& search, Candidate c, int64_t large_block_bytes);
  // The best plan's rules with per-block choices, improved one block at a
  // time, from the best plan and from the other starts.
  void refine_blocks(Search& search, Sizes which);
  // Refines `c`, a plan of `search`, within `task_runs` simulated task runs,
  // keeping what is better in `search`.
  void refine_from(Search& search, Candidate c, int64_t task_runs);
  // `c` without its per-block choices, and without the recomputation rules
  // unless `recompute_rules`: a start of the refinement.
  Candidate refinement_start(Candidate c, bool recompute_rules) const;
  // Refines the start `c` in a search of its own (unless it was refined
  // from before) and keeps the result in `search` where it is better.
  void refine_start(Search& search, const Candidate& c);
  Error batchnorm_refusal(const std::string& why) const;

  const bool published_;
  const SearchInput& in_;
  const Tdfg& tdfg_;
  const CostModel& cost_;
  const int64_t batch_;
  const PlanOptions& opt_;
  const int64_t resident_region_;
  const int64_t arena_;
  int copy_engines_ = 2;
  MinimumBudget min_;
  int64_t least_round_ = 1;
  bool wd_ = false;
  bool dynamic_pass_ = false;  // auto: the candidates offer micro-batched convolutions
  ModnnRules base_;
  std::optional<Error> first_error_;
  std::map<std::vector<int64_t>, WdProblem> wd_problems_;
  // The candidates the refinement started from, as start_key(): none is
  // refined twice.
  std::set<std::string> refined_starts_;
};

Error SchedulerSearch::batchnorm_refusal(const std::string& why) const {
  const int64_t need = resident_region_ + max_task_arena_bytes(tdfg_, cost_, least_round_, /*fastest=*/false);
  return Error{{}, fmt::format(
      "{}: a batchnorm layer of model '{}' would see fewer than two values per channel (every round needs at "
      "least {} samples, as training with batch statistics does; PyTorch refuses the same); the least budget "
      "that runs rounds of {} samples is {}",
      why, tdfg_.model_name, least_round_, least_round_, bytes_text(need))};
}

// The checks of the budget and the batch that need the search's figures
// (plan_iteration checked the options' ranges).
std::optional<Error> SchedulerSearch::check() {
  copy_engines_ = opt_.copy_engines != 0 ? opt_.copy_engines : (published_ ? 1 : cost_.copy_engines());
  MPLAN_CHECK(copy_engines_ == 1 || copy_engines_ == 2, "a cost model with neither one nor two copy engines");
  // moDNN Eq. 2: below the minimum no schedule exists.
  min_ = minimum_budget(tdfg_, cost_);
  if (opt_.budget_bytes < min_.bytes || arena_ < min_.task_bytes) {
    const std::string who = min_.task == kNoTask ? std::string("the resident weights") : "task " + tdfg_.tasks[min_.task].name;
    return Error{{}, "budget " + bytes_text(opt_.budget_bytes) + " is below the minimum " + bytes_text(min_.bytes) +
                         " for model '" + tdfg_.model_name + "': " + who + " needs " + bytes_text(min_.task_bytes) +
                         " at sub-batch 1 besides the " + bytes_text(resident_region_) +
                         " of weights, gradients and optimizer state"};
  }
  // A plan's rounds are bounded before anything is simulated (planner/plan_limits.h).
  if (Status limit = check_plan_size(tdfg_, cost_, arena_, batch_, opt_.sub_batch); !limit) return limit.error();
  // Batch normalisation needs two values per channel in every round.
  least_round_ = least_batchnorm_round(tdfg_);
  if (opt_.sub_batch > 0 && rounds_for(batch_, opt_.sub_batch, least_round_).empty())
    return batchnorm_refusal("sub-batch " + std::to_string(opt_.sub_batch));
  if (batch_ < least_round_) return batchnorm_refusal("the batch of " + std::to_string(batch_));
  // The wd pool comes off the arena the blocks use.
  wd_ = opt_.workspace == WorkspaceUse::wd || opt_.workspace == WorkspaceUse::wd_auto;
  if (opt_.workspace == WorkspaceUse::wd && blocks_arena_of(opt_.workspace_bytes) <= 0) {
    return Error{SourceLocation{}, "--workspace 'wd:" + format_bytes(opt_.workspace_bytes) +
                                       "': the pool does not fit the arena of " + bytes_text(arena_) +
                                       " (the budget less the resident weights)"};
  }
  if (opt_.workspace == WorkspaceUse::wd && blocks_arena_of(opt_.workspace_bytes) < min_.task_bytes) {
    return Error{SourceLocation{},
                 "--workspace 'wd:" + format_bytes(opt_.workspace_bytes) + "': the pool leaves " +
                     bytes_text(std::max<int64_t>(0, blocks_arena_of(opt_.workspace_bytes))) + " of the arena of " +
                     bytes_text(arena_) + ", less than the " + bytes_text(min_.task_bytes) + " that task " +
                     tdfg_.tasks[min_.task].name + " needs at sub-batch 1"};
  }
  return std::nullopt;
}

// Sub-batch candidates for a blocks arena (planner/sub_batch.h), or the fixed
// one; moDNN as published: its Eq. 3 start alone.
std::vector<int64_t> SchedulerSearch::candidates_for(int64_t blocks_arena) {
  const int64_t bmax = largest_feasible_sub_batch(tdfg_, cost_, blocks_arena, batch_);
  if (opt_.sub_batch > 0) {
    if (opt_.sub_batch > bmax) {
      if (!first_error_)
        first_error_ = Error{SourceLocation{"--sub-batch", 0, 0},
                             "sub-batch " + std::to_string(opt_.sub_batch) + " does not fit the arena of " +
                                 bytes_text(blocks_arena) + "; the largest that fits is " + std::to_string(bmax)};
      return {};
    }
    return {opt_.sub_batch};
  }
  if (bmax < 1) return {};
  const int64_t b0 = std::min(eq3_sub_batch(tdfg_, cost_, blocks_arena, batch_), bmax);
  if (published_) return {b0};
  std::vector<int64_t> sizes = sub_batch_candidates(batch_, b0, bmax);
  // The Eq. 3 start first, then the others nearest it (in ratio), so a good
  // plan is known early and screening stops the rest sooner.
  std::stable_sort(sizes.begin(), sizes.end(), [b0](int64_t a, int64_t b) {
    auto distance = [b0](int64_t x) {
      return x >= b0 ? static_cast<double>(x) / static_cast<double>(b0) : static_cast<double>(b0) / static_cast<double>(x);
    };
    return distance(a) < distance(b);
  });
  return sizes;
}

// The WD problem of some rounds (desirable sets do not depend on the pool).
const WdProblem& SchedulerSearch::wd_problem_at(const std::vector<int64_t>& rounds) {
  auto it = wd_problems_.find(rounds);
  if (it == wd_problems_.end()) it = wd_problems_.emplace(rounds, wd_problem(tdfg_, cost_, rounds)).first;
  return it->second;
}

// Pools to try: none; the given one (wd); wd:auto: powers of four from 64 MiB
// and the largest fastest workspace at each candidate, while the rest of the
// arena holds the largest task at sub-batch 1.
std::vector<int64_t> SchedulerSearch::pools() {
  std::vector<int64_t> pools = {0};
  if (opt_.workspace == WorkspaceUse::wd) pools = {opt_.workspace_bytes};
  if (opt_.workspace == WorkspaceUse::wd_auto) {
    for (int64_t p = int64_t{64} << 20; blocks_arena_of(p) >= min_.task_bytes; p *= 4) pools.push_back(p);
    for (int64_t b : candidates_for(arena_)) {
      std::vector<int64_t> rounds = rounds_for(batch_, b, least_round_);
      if (rounds.empty()) continue;
      const int64_t p = largest_fastest_workspace_bytes(wd_problem_at(rounds));
      if (p > 0 && blocks_arena_of(p) >= min_.task_bytes) pools.push_back(p);
    }
    std::sort(pools.begin(), pools.end());
    pools.erase(std::unique(pools.begin(), pools.end()), pools.end());
  }
  return pools;
}

std::optional<Candidate> SchedulerSearch::candidate(int64_t b, int64_t pool) {
  if (Status limit = check_rounds(tdfg_, batch_, b); !limit) {  // bounded rounds (planner/plan_limits.h)
    if (!first_error_) first_error_ = limit.error();
    return std::nullopt;
  }
  Candidate c;
  c.rounds = rounds_for(batch_, b, least_round_);
  if (c.rounds.empty()) return std::nullopt;
  c.pool_bytes = pool;
  c.dynamic = opt_.workspace == WorkspaceUse::dynamic || dynamic_pass_;
  c.label = fmt::format("sub-batch {}", c.rounds.front()) + (pool > 0 ? ", pool " + format_bytes(pool) : "") +
            (dynamic_pass_ ? ", micro-batched convolutions" : "");
  if (opt_.workspace != WorkspaceUse::wr && !wd_) return c;
  // wr: the per-kernel limit; wd: the pool is every kernel's limit (one compute stream).
  const int64_t limit = opt_.workspace == WorkspaceUse::wr ? opt_.workspace_bytes : pool;
  Result<KernelConfigurations> fixed = wr_configurations(tdfg_, cost_, c.rounds, limit);
  if (!fixed.ok()) {
    if (!first_error_) {
      Error e = fixed.error();
      if (wd_) e.message = "--workspace 'wd:" + format_bytes(pool) + "': " + e.message;
      first_error_ = e;
    }
    return std::nullopt;
  }
  c.fixed = std::move(fixed).value();
  // Each task must fit beside its fixed workspace (outside the pool for wr).
  for (const auto& [key, conf] : c.fixed) {
    const int64_t ws = opt_.workspace == WorkspaceUse::wr ? conf.workspace_bytes() : 0;
    if (task_arena_bytes(tdfg_, key.first, key.second, ws) > blocks_arena_of(pool)) {
      if (!first_error_)
        first_error_ = Error{SourceLocation{}, "--workspace '" + workspace_mode_name({opt_.workspace, opt_.workspace_bytes}) +
                                                   "': task " + tdfg_.tasks[key.first].name + " at sub-batch " +
                                                   std::to_string(b) + " does not fit the arena of " +
                                                   bytes_text(arena_) + " beside its workspace; use a smaller limit"};
      return std::nullopt;
    }
  }
  return c;
}

void SchedulerSearch::search_candidate(Search& search, Candidate c, int64_t large_block_bytes) {
  const std::string label = c.label;
  c.decider = modnn_factory(base_);
  c.rules = base_;
  if (!published_) c.label = label + " [" + rules_text(base_, false) + "]";
  const PlanResult& first = search.consider(c);
  // An abandoned first try still gets its variants: one of them may beat the
  // best (so screening picks what simulating everything picks).
  if (published_ || (first.feasible && !could_improve(first))) return;
  // Every combination of the levers that are on (recomputation, early
  // offloads, prefetching): a plan is never worse than loading on demand, or
  // than any lever left out.
  // Recomputing convolutions is priced per victim, greedily; whether it pays
  // over the whole iteration is the simulation's to say, so it is a variant
  // like the others.
  std::vector<ModnnRules> variants;
  auto same_levers = [](const ModnnRules& a, const ModnnRules& b) {
    return a.recompute == b.recompute && a.recompute_convolutions == b.recompute_convolutions &&
           a.early_offload == b.early_offload && a.prefetch == b.prefetch && a.early_drop_ratio == b.early_drop_ratio;
  };
  for (bool recompute : {base_.recompute, false}) {
    for (bool convolutions : {base_.recompute_convolutions, false}) {
      for (bool early : {base_.early_offload, false}) {
        for (bool prefetch : {base_.prefetch, false}) {
          ModnnRules r = base_;
          r.recompute = recompute;
          r.recompute_convolutions = recompute && convolutions;
          r.early_offload = early;
          r.prefetch = prefetch;
          const bool seen = std::any_of(variants.begin(), variants.end(),
                                        [&](const ModnnRules& q) { return same_levers(q, r); });
          if (!same_levers(r, base_) && !seen) variants.push_back(r);
        }
      }
    }
  }
  // Early drops (ModnnRules::early_drop_ratio) on every combination with
  // recomputation, after those without (so that the plans without early
  // drops are found as before): which outputs are cheap enough to drop ahead
  // depends on how short the round is of memory, so a few ratios are tried.
  const size_t without_drops = variants.size();
  for (size_t i = 0; i <= without_drops; ++i) {
    const ModnnRules& with = i == 0 ? base_ : variants[i - 1];
    if (!with.recompute || !opt_.early_drops) continue;
    for (double ratio : kEarlyDropRatios) {
      ModnnRules r = with;
      r.early_drop_ratio = ratio;
      variants.push_back(r);
    }
  }
  // moDNN's rules as published (no lever, each prefetch judged alone by
  // Eq. 4, no copy queue): the levers are heuristics too, and under some cost
  // models (the per-architecture tables: ResNet-34 at 4 GiB on the K40) the published rules alone do better than any combination of them.
  {
    ModnnRules r = base_;
    r.recompute = false;
    r.recompute_convolutions = false;
    r.early_offload = false;
    r.queued_prefetch = false;
    variants.push_back(r);
  }
  // The fastest rules, and the fastest without early drops (both for the
  // stacked placement below).
  ModnnRules best_rules = base_, best_without_drops = base_;
  double best_ms = first.feasible ? first.plan.summary.simulated_ms : -1;
  for (size_t i = 0; i < variants.size(); ++i) {
    const ModnnRules& r = variants[i];
    c.decider = modnn_factory(r);
    c.rules = r;
    c.label = label + " [" + rules_text(r, false) + "]";
    const PlanResult& sim = search.consider(c);
    if (sim.feasible && (best_ms < 0 || sim.plan.summary.simulated_ms < best_ms)) {
      best_ms = sim.plan.summary.simulated_ms;
      best_rules = r;
      if (r.early_drop_ratio == 0) best_without_drops = r;
    }
  }
  // The re-fetch cost is mplan's (the thrash fix) and is a heuristic too:
  // moDNN's rules with Eq. 5's T_off as published (the delay alone; the
  // victims still cost their re-fetch when chosen), and moDNN entirely as
  // published. cifar_small at 3 MiB on the K40: 7.62 -> 7.36 ms with the
  // first; ResNet-34 at 4 GiB: 1994 -> 1985 ms with the second. They do not
  // choose the rules of the stacked placement below (a stacked plan with
  // other rules could then lose what the stacked plan with these found).
  for (int i = 0; i < 2; ++i) {
    ModnnRules r = variants.back();
    if (i == 0) r.eq5_refetch = false;
    else r.refetch_cost = false;
    c.decider = modnn_factory(r);
    c.rules = r;
    c.label = label + " [" + rules_text(r, false) + "]";
    search.consider(c);
  }
  // With two copy engines the rules may move more than they gain (copies in
  // both directions at once crowd the lookahead): moDNN as published, on one
  // engine, too, unless the user fixed --copy-engines. ResNet-34 at 4 GiB on
  // the K40 file: 1994 ms on one engine, 2198 ms on two.
  if (copy_engines_ == 2 && opt_.copy_engines == 0) {
    Candidate one = c;
    one.copy_engines = 1;
    one.decider = modnn_factory(variants.back());
    one.rules = variants.back();
    one.label = label + " [" + rules_text(variants.back(), false) + ", one copy engine]";
    search.consider(one);
  }
  if (large_block_bytes > 0) {
    c.large_block_bytes = large_block_bytes;
    // Every lever, without and with each early-drop ratio (where dropped
    // blocks leave their holes matters as much as which are dropped:
    // ResNet-50, batch 128, H200 profile, one round, at 0.33 of its memory:
    // +17% at best fit, +12% stacked, both at a ratio of 0.2; +33% without
    // early drops), the rules that did best without early drops, and those
    // that did best.
    std::vector<ModnnRules> stacked = {base_};
    if (base_.recompute && opt_.early_drops)
      for (double ratio : kEarlyDropRatios) {
        stacked.push_back(base_);
        stacked.back().early_drop_ratio = ratio;
      }
    for (const ModnnRules* r : {&best_without_drops, &best_rules})
      if (std::none_of(stacked.begin(), stacked.end(), [&](const ModnnRules& q) {
            return same_levers(q, *r) && q.queued_prefetch == r->queued_prefetch;
          }))
        stacked.push_back(*r);
    for (const ModnnRules& r : stacked) {
      c.decider = modnn_factory(r);
      c.rules = r;
      c.label = label + " [" + rules_text(r, true) + "]";
      search.consider(c);
    }
  }
}

void SchedulerSearch::search_sizes(Search& search, Sizes which) {
  std::set<std::pair<int64_t, int64_t>> tried;  // (pool, b)
  auto excluded = [&](int64_t b) {
    return (which == Sizes::whole_batch && b != batch_) || (which == Sizes::split && b == batch_);
  };
  auto try_size = [&](int64_t b, int64_t pool) {
    if (excluded(b) || !tried.insert({pool, b}).second) return;
    std::optional<Candidate> c = candidate(b, pool);
    if (!c) return;
    const int64_t blocks_arena = blocks_arena_of(pool);
    const int64_t large = !published_ && opt_.large_block_divisor > 0 ? blocks_arena / opt_.large_block_divisor : 0;
    search_candidate(search, *c, large);
  };
  std::map<int64_t, int64_t> largest_of_pool;  // pool -> the largest feasible b
  for (int64_t pool : pools()) {
    const std::vector<int64_t> sizes = candidates_for(blocks_arena_of(pool));
    if (!sizes.empty()) largest_of_pool[pool] = *std::max_element(sizes.begin(), sizes.end());
    for (int64_t b : sizes) try_size(b, pool);
  }
  // Local refinement: the simulated time is not smooth in b (an algorithm's
  // tiling, where a block lands), so the neighbours of the best size are
  // tried too, recentring while one is faster (ResNet-152 at 4 GiB on the
  // K40: 33 samples per round is 1% faster than 32, its balanced neighbour).
  if (published_ || !search.have()) return;
  if (opt_.sub_batch > 0) return refine_blocks(search, which);
  constexpr int64_t kRadius = 3;
  for (int step = 0; step < 16; ++step) {
    const int64_t center = search.best().plan.sub_batch;
    const int64_t pool = search.best_candidate().pool_bytes;
    const double before = search.best().plan.summary.simulated_ms;
    for (int64_t d = 1; d <= kRadius; ++d)
      for (int64_t b : {center + d, center - d})
        if (b >= 1 && b <= largest_of_pool[pool]) try_size(b, pool);
    if (!(search.best().plan.summary.simulated_ms < before)) break;
  }
  refine_blocks(search, which);
}

// The auto workspace mode: a convolution whose fast algorithms need more
// workspace than the arena has beside its blocks may run as micro-batches
// that each fit (mu-cuDNN §III-C1). Micro-batched tasks are not recomputed
// (IterationSim::algorithms_recomputable), so the undivided plans come
// first, and the micro-batched ones are searched where some convolution's
// fastest option does not fit the arena beside its blocks at the stage's
// largest round. (Also where the best plan ran a slower option: ResNet-1001
// on the K40 at 4 GiB planned in twice the time, no faster.) VGG-16, batch
// 256, H200 profile, at 0.65 of its memory: the fast algorithms of
// BP2(stage1.1.conv) need 14 GiB of workspace; undivided, the best plan
// takes two rounds (327.3 ms), micro-batched one (318.3 ms). (Micro-batching
// only the backward convolutions, so that the forward ones stay
// recomputable, was tried: no VGG-16 plan from 0.65 to 0.25 got faster, and
// the one at 0.4 got 0.1% slower.)
void SchedulerSearch::search_workspaces(Search& search, Sizes which) {
  search_sizes(search, which);
  if (published_ || opt_.workspace != WorkspaceUse::automatic || !search.have()) return;
  const int64_t largest =
      which == Sizes::whole_batch ? batch_ : std::min(batch_, largest_feasible_sub_batch(tdfg_, cost_, arena_, batch_));
  bool short_of_workspace = false;
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg_.tasks.size()) && !short_of_workspace && largest > 1; ++t) {
    if (!tdfg_.tasks[t].has_algorithms) continue;
    const int64_t fastest = fastest_option(cost_, tdfg_, t, largest).workspace_bytes;
    short_of_workspace = task_arena_bytes(tdfg_, t, largest, fastest) > arena_;
  }
  if (!short_of_workspace) return;
  dynamic_pass_ = true;
  search_sizes(search, which);
  dynamic_pass_ = false;
}

// moDNN §IV-B.1 evicts every block when a task fails on fragmentation; a
// task that then fails no more brings its own inputs back over PCIe.
// Evicting every block but the task's inputs first is faster in some plans
// and slower in others, and a search with it finds other plans, so it is a
// search of its own, made only where the best plan defragmented, and never
// worse than the one without: ResNet-34 (batch 256, H200 profile) at 0.33 of
// its memory, one round, 214.2 ms without and 157.1 ms with (its stem's
// batch norm backward needs 2.30 GiB of a 2.32 GiB arena in one piece);
// googlenet at 2 GiB on the K40, 677.4 ms without, 722.5 ms with alone.
void SchedulerSearch::search_defragmenting(Search& search, Sizes which) {
  search_workspaces(search, which);
  if (published_ || !opt_.defragment_around_task || !search.have() ||
      search.best().plan.summary.defragmentation_count == 0)
    return;
  Search around(tdfg_, cost_, arena_, copy_engines_, opt_.screen_sub_batches);
  around.set_bound_ms(search.best().plan.summary.simulated_ms);
  base_.defragment_around_task = true;
  search_workspaces(around, which);
  base_.defragment_around_task = false;
  if (around.have()) search.consider(around.best_candidate());
}

// Everything a candidate's simulation depends on, as text: its rounds,
// workspaces, placement and every rule. (Two starts that simulate to the
// same plan may still refine to different ones: cifar_mobilenet at 0.65 of
// its memory, one round, without the recomputation rules by best fit and
// stacked.)
std::string start_key(const Candidate& c) {
  const ModnnRules& r = c.rules;
  std::string choices;
  if (r.block_choices)
    for (BlockChoice x : *r.block_choices) choices += static_cast<char>('0' + static_cast<int>(x));
  return fmt::format("{}|{}|{}|{}|{}|{}|{}{}{}{}{}{}{}{}{}|{:a}|{:a}|{}", fmt::join(c.rounds, ","), c.pool_bytes,
                     c.dynamic, c.large_block_bytes, c.copy_engines, c.fixed.size(), r.select_algorithms, r.prefetch,
                     r.refetch_cost, r.eq5_refetch, r.recompute, r.recompute_convolutions, r.early_offload,
                     r.queued_prefetch, r.lookahead_tasks, r.early_offload_margin, r.early_drop_ratio,
                     choices + (r.defragment_around_task ? "|around" : "") +
                         (r.load_ahead ? (r.load_ahead_margin ? "|ahead+" : "|ahead") : ""));
}

// The blocks a refinement may decide: made by forward tasks, read again in
// the backward pass, largest first (the most room per simulation), at least
// 1/kRefinedBlockDivisor of the arena, at most kRefinedBlocks of them.
constexpr int kRefinedBlocks = 128;
constexpr int64_t kRefinedBlockDivisor = 256;
constexpr int kRefinementPasses = 2;
// The refinement's simulations are bounded by the task runs they simulate
// (tasks x rounds each), so that it costs about as much on any graph: about
// 400 simulations of ResNet-50 at one round, 30 of ResNet-1001.
constexpr int64_t kRefinementTaskRuns = int64_t{1} << 18;
// Each other start (refine_blocks) gets half of that: with up to four starts
// the refinement cost five times as much as from the best plan alone
// (ResNet-1001 on the K40 at 4 GiB: 71.6 s against 9.3 s). The wins they are
// for came within half (ViT-B/16 at a third of its memory, one round: 388.7
// ms either way).
constexpr int64_t kStartTaskRuns = kRefinementTaskRuns / 2;

// "6 blocks dropped, 2 offloaded after their last forward use": what a
// refinement's choices fix, for a candidate's label.
std::string refinement_counts(const std::vector<BlockChoice>& choices) {
  const auto count = [&](BlockChoice q) { return std::count(choices.begin(), choices.end(), q); };
  return fmt::format("{} blocks dropped, {} offloaded after their last forward use", count(BlockChoice::drop),
                     count(BlockChoice::offload));
}

// A candidate's label from its rules: its sizes, then its rules and its
// refinement's counts in brackets.
std::string label_from_rules(const Candidate& c) {
  return c.label.substr(0, c.label.find(" [")) + " [" + rules_text(c.rules, c.large_block_bytes > 0) +
         (c.rules.block_choices ? ", " + refinement_counts(*c.rules.block_choices) : "") + "]";
}

// The refinement is a local search, so it finds what lies near its start.
// Besides the best plan it starts from the same rounds without the
// recomputation rules (the refinement then chooses each drop itself), in
// either placement, and, where the best plan splits a batch that may run
// whole, from one round with either rules: a plan of one round that the rules
// leave slower than a split one may refine to a faster one. ViT-B/16 (batch 64, H200 profile) at a
// third of its memory: the best plan of the rules, refined, takes two rounds
// (402.3 ms, +9.7% over the unlimited plan); one round without the
// recomputation rules, refined, takes 388.7 ms (+6.0%). Each start is refined
// in a search of its own, so that screening against the best plan does not
// stop it before it gets there: DenseNet-121 at 0.4 of its memory, one round,
// without the recomputation rules, starts 2.4 times slower than the best plan
// and refines to below it. A start already refined from (the auto workspace
// mode's second search repeats the first's starts) is not refined again.
void SchedulerSearch::refine_blocks(Search& search, Sizes which) {
  if (published_ || !opt_.refine_blocks || !search.have() || !could_improve(search.best())) return;
  const Candidate best = search.best_candidate();
  if (refined_starts_.insert(start_key(best)).second) refine_from(search, best, kRefinementTaskRuns);
  if (!opt_.refine_other_starts) return;
  std::vector<Candidate> starts;
  if (best.rules.recompute) starts.push_back(refinement_start(best, false));
  // Without the recomputation rules in the other placement too (best fit or
  // large blocks stacked): where the blocks the refinement drops leave their
  // holes matters as much as which it drops (search_candidate).
  if (opt_.large_block_divisor > 0) {
    Candidate other = best;
    const int64_t stacked = blocks_arena_of(best.pool_bytes) / opt_.large_block_divisor;
    other.large_block_bytes = best.large_block_bytes > 0 ? 0 : stacked;
    starts.push_back(refinement_start(other, false));
  }
  if (which == Sizes::all && best.rounds.size() > 1 && opt_.sub_batch == 0 &&
      largest_feasible_sub_batch(tdfg_, cost_, blocks_arena_of(best.pool_bytes), batch_) >= batch_) {
    if (std::optional<Candidate> whole = candidate(batch_, best.pool_bytes)) {
      whole->rules = best.rules;
      whole->large_block_bytes = best.large_block_bytes;
      starts.push_back(refinement_start(*whole, best.rules.recompute));
      if (best.rules.recompute) starts.push_back(refinement_start(*whole, false));
    }
  }
  for (const Candidate& c : starts) refine_start(search, c);
}

// A candidate's label without the refinement's counts ("..., 6 blocks dropped,
// 2 offloaded after their last forward use]"), for a refined plan refined again.
std::string without_refinement(const std::string& label) {
  const size_t at = label.find(" blocks dropped, ");
  if (at == std::string::npos) return label;
  return label.substr(0, label.rfind(", ", at)) + "]";
}

Candidate SchedulerSearch::refinement_start(Candidate c, bool recompute_rules) const {
  if (!recompute_rules) {
    c.rules.recompute = false;
    c.rules.recompute_convolutions = false;
    c.rules.early_drop_ratio = 0;
  }
  c.rules.block_choices = nullptr;
  c.decider = modnn_factory(c.rules);
  c.label = label_from_rules(c);
  return c;
}

void SchedulerSearch::refine_start(Search& search, const Candidate& c) {
  if (!refined_starts_.insert(start_key(c)).second) return;
  Search side(tdfg_, cost_, arena_, copy_engines_, opt_.screen_sub_batches);
  side.consider(c);
  if (!side.have()) return;
  // A start that needs no lever is kept as it is.
  if (could_improve(side.best())) refine_from(side, side.best_candidate(), kStartTaskRuns);
  search.consider(side.best_candidate());
}

// The stacked placement puts every block of a sixteenth of the arena at its
// top, and a block that large may be short-lived. ResNet-18 (batch 256,
// H200 profile) at 0.33 of its memory, one round, with its memory-saving
// variants: the input batch (147 MiB of a 1.60 GiB arena) stacks at the
// top, the stem's 784 MiB convolution output below it, and once the batch is
// evicted the room below is 78 MiB short of the batch norm's 784 MiB output;
// the best plan defragmented twice (168.6 ms, +134% over the unlimited
// plan). Stacked from a quarter of the arena, the batch lies at the bottom
// and the output at the top, with the room in one piece below it. Stacking
// that coarse is slower elsewhere (googlenet at 0.2 of its memory: 87.1 ms
// from a sixteenth, 103.5 ms from a quarter), so it is a start of the
// refinement only where the best plan still defragmented, with and without
// the recomputation rules, each refined in a search of its own.
void SchedulerSearch::search_placements(Search& search, Sizes which) {
  search_defragmenting(search, which);
  const int coarse = opt_.coarse_large_block_divisor;
  if (published_ || !opt_.refine_blocks || !opt_.refine_other_starts || coarse <= 0 || !search.have() ||
      search.best().plan.summary.defragmentation_count == 0)
    return;
  Candidate best = search.best_candidate();
  best.large_block_bytes = blocks_arena_of(best.pool_bytes) / coarse;
  refine_start(search, refinement_start(best, false));
  if (best.rules.recompute) refine_start(search, refinement_start(best, true));
}

void SchedulerSearch::refine_from(Search& search, Candidate c, int64_t task_runs) {
  const int64_t b = c.rounds.front();
  std::vector<std::pair<int64_t, BlockId>> blocks;
  for (BlockId x = 0; x < static_cast<BlockId>(tdfg_.blocks.size()); ++x) {
    const Block& block = tdfg_.blocks[x];
    if (block.resident || block.writers.empty()) continue;
    const bool forward = std::all_of(block.writers.begin(), block.writers.end(),
                                     [&](TaskId w) { return tdfg_.tasks[w].kind == TaskKind::FP; });
    const bool backward = std::any_of(block.readers.begin(), block.readers.end(),
                                      [&](TaskId t) { return tdfg_.tasks[t].kind != TaskKind::FP; });
    const int64_t bytes = block.bytes(b);
    if (forward && backward && bytes * kRefinedBlockDivisor >= arena_) blocks.emplace_back(bytes, x);
  }
  std::stable_sort(blocks.begin(), blocks.end(), [](const auto& p, const auto& q) { return p.first > q.first; });
  if (blocks.size() > static_cast<size_t>(kRefinedBlocks)) blocks.resize(kRefinedBlocks);
  auto recomputable = [&](BlockId x) {
    // As IterationSim::recomputable: a convolution only in the undivided workspace mode.
    const bool convolutions = opt_.recompute_convolutions && c.pool_bytes == 0 && c.fixed.empty() && !c.dynamic;
    const std::vector<TaskId>& writers = tdfg_.blocks[x].writers;
    return opt_.recompute && std::all_of(writers.begin(), writers.end(), [&](TaskId w) {
             const Task& t = tdfg_.tasks[w];
             return !t.recompute_writes.empty() && (!t.has_algorithms || convolutions);
           });
  };
  std::vector<BlockChoice> choices = c.rules.block_choices
                                         ? *c.rules.block_choices
                                         : std::vector<BlockChoice>(tdfg_.blocks.size(), BlockChoice::rules);
  const std::string label = without_refinement(c.label);
  const int64_t runs = static_cast<int64_t>(tdfg_.tasks.size() * c.rounds.size());
  int64_t left = std::max<int64_t>(task_runs / std::max<int64_t>(runs, 1), 16);
  for (int pass = 0; pass < kRefinementPasses && left > 0; ++pass) {
    bool improved = false;
    for (const auto& [bytes, x] : blocks) {
      for (BlockChoice alt : {BlockChoice::drop, BlockChoice::offload, BlockChoice::rules}) {
        if (alt == choices[x] || (alt == BlockChoice::drop && !recomputable(x))) continue;
        if (left-- <= 0) break;
        std::vector<BlockChoice> trial = choices;
        trial[x] = alt;
        const std::string what = refinement_counts(trial);
        c.rules.block_choices = std::make_shared<const std::vector<BlockChoice>>(std::move(trial));
        c.decider = modnn_factory(c.rules);
        c.label = label.substr(0, label.size() - 1) + ", " + what + "]";
        search.consider(c);
        if (search.best_candidate().rules.block_choices == c.rules.block_choices) {  // kept: better_plan
          choices = *c.rules.block_choices;
          improved = true;
          break;
        }
      }
    }
    if (!improved) break;
  }
}

// On-demand loads start a copy when the task that needs it runs, and Eq. 4
// just in time; both wait where the arena had room for the block long
// before. A plan's own arena profile says where: each of the last plans
// that were the search's best when found (Search::recent_bests; the rules'
// best, the refined ones, the one defragmenting around the task) is
// simulated again with each load as early as that profile leaves room for
// it up to its use, with and without a margin, then again from the new
// best plan's profile, while that is faster. Not only the best: a plan a
// little slower may wait for more that can move. ResNet-50 (batch 128, H200
// profile) at a quarter of its memory, one round: layer1's backward pass
// waited 13 ms for its 392 MiB outputs with half the arena free; 175.2 ms
// before, 160.7 ms after (2026-11-30).
void SchedulerSearch::load_ahead(Search& search) {
  if (published_ || !opt_.load_ahead || !search.have()) return;
  std::vector<Candidate> starts = search.recent_bests();  // the best last
  // The best plan is at hand; the others are simulated again for their profiles.
  loads_ahead_from(search, starts.back(), search.best().plan);
  // A best plan that prefetches by Eq. 4 may leave no load to move ahead, and
  // its rules loading on demand, each load moved ahead, may do better:
  // ResNet-50 (batch 128, K40) at 2 GiB in rounds of 64, 2528.9 ms
  // prefetching, 2514.8 ms from loads on demand moved ahead and refined.
  if (starts.back().rules.prefetch) {
    Candidate c = starts.back();
    c.rules.prefetch = false;
    c.decider = modnn_factory(c.rules);
    c.label = label_from_rules(c);
    starts.insert(starts.begin(), std::move(c));
  }
  for (size_t s = 0; s + 1 < starts.size(); ++s) {
    Search again(tdfg_, cost_, arena_, copy_engines_, /*screen=*/false);
    const PlanResult& start = again.consider(starts[s]);
    if (start.feasible) loads_ahead_from(search, starts[s], start.plan);
  }
  // Again from the new best plan's own profile, while that is faster.
  for (int pass = 1; pass < kLoadAheadPasses; ++pass) {
    const Candidate best = search.best_candidate();
    if (!best.rules.load_ahead) return;
    const double before = search.best().plan.summary.simulated_ms;
    loads_ahead_from(search, best, search.best().plan);
    if (!(search.best().plan.summary.simulated_ms < before)) break;
  }
  // The refinement chose its blocks where copies came back on demand; with
  // them loaded ahead, a block copied rather than recomputed may now come
  // back in time. Refined again from the plan that loads ahead (its trials
  // keep its profile), in a search of its own, within a start's budget.
  const Candidate best = search.best_candidate();
  if (!opt_.refine_blocks || !best.rules.load_ahead || !could_improve(search.best()) ||
      !refined_starts_.insert(start_key(best)).second)
    return;
  Search side(tdfg_, cost_, arena_, copy_engines_, opt_.screen_sub_batches);
  side.consider(best);
  if (!side.have()) return;
  refine_from(side, side.best_candidate(), kStartTaskRuns);
  search.consider(side.best_candidate());
}

void SchedulerSearch::loads_ahead_from(Search& search, Candidate c, const Plan& plan) {
  // Everything read from `plan` first: it may be the search's best, which consider() replaces.
  if (plan.summary.stall_ms <= 0 || plan.summary.prefetch_count == 0) return;
  if (!c.rules.load_ahead) c.label = with_label_part(std::move(c.label), kLoadAheadText);
  c.rules.load_ahead = std::make_shared<const std::vector<int64_t>>(
      arena_in_use_by_position(plan, blocks_arena_of(c.pool_bytes)));
  for (bool margin : {true, false}) {
    c.rules.load_ahead_margin = margin;
    c.decider = modnn_factory(c.rules);
    search.consider(c);
  }
}

// Compaction moves blocks on the device where an allocation finds no free
// range (planner/deciders/compaction.h). It is a local choice that changes
// where every later block lies, so it is tried last, where the best plan had
// an allocation that found the bytes free but not in one range: the recent
// best plans again with it, the best of them refined and loaded ahead
// (compaction making room for loads that found no free range), kept where
// faster. ResNet-50 (batch 128, H200 profile) at a fifth of its
// memory, one round: layer1's 392 MiB block inputs came back only after
// their block's batch norm had freed a range, with the bytes free before.
void SchedulerSearch::compact(Search& search) {
  if (published_ || !opt_.compaction || !search.have() || search.best().fragmented_allocations == 0) return;
  const std::vector<Candidate> starts = search.recent_bests();
  Search side(tdfg_, cost_, arena_, copy_engines_, opt_.screen_sub_batches);
  for (Candidate c : starts) {
    if (c.rules.compaction) continue;
    c.rules.compaction = true;
    c.decider = modnn_factory(c.rules);
    c.label = with_label_part(std::move(c.label), kCompactionText);
    side.consider(c);
  }
  if (!side.have()) return;
  if (opt_.refine_blocks && could_improve(side.best())) refine_from(side, side.best_candidate(), kStartTaskRuns);
  load_ahead(side);
  search.consider(side.best_candidate());
}

PlanResult SchedulerSearch::run() {
  if (std::optional<Error> e = check()) return infeasible(e->message);
  base_.select_algorithms = opt_.select_algorithms;
  base_.prefetch = opt_.prefetch;
  base_.lookahead_tasks = opt_.prefetch_lookahead_tasks;
  base_.refetch_cost = true;
  base_.recompute = !published_ && opt_.recompute;
  base_.recompute_convolutions = base_.recompute && opt_.recompute_convolutions;
  base_.early_offload = !published_ && opt_.early_offload;
  base_.queued_prefetch = !published_;

  Search search(tdfg_, cost_, arena_, copy_engines_, opt_.screen_sub_batches);
  std::string batchnorm_note;
  const bool batchnorm_rounds = has_batch_statistics(tdfg_) && opt_.sub_batch == 0 && !published_ &&
                                opt_.batchnorm_rounds != PlanOptions::BatchnormRounds::any;
  if (batchnorm_rounds) {
    // Batch normalisation: one round (full-batch statistics) first.
    search_plans(search, Sizes::whole_batch);
    if (!search.have()) {
      batchnorm_note = "batchnorm: no plan of one round fits, so the statistics are per sub-batch";
      search_plans(search, Sizes::split);
    } else if (opt_.batchnorm_rounds == PlanOptions::BatchnormRounds::prefer_one &&
               !needed_no_levers(search.best())) {
      // Split only where that is more than the tolerance faster.
      const double one_ms = search.best().plan.summary.simulated_ms;
      Search split(tdfg_, cost_, arena_, copy_engines_, opt_.screen_sub_batches);
      split.set_bound_ms(one_ms / (1 + opt_.batchnorm_tolerance));
      search_plans(split, Sizes::split);
      if (split.have()) {
        batchnorm_note = fmt::format(
            "batchnorm: one round would take {:.1f} ms ({:+.0f}%), more than {:.0f}% slower, so the statistics are "
            "per sub-batch (--batchnorm one keeps one round)",
            one_ms, 100.0 * (one_ms / split.best().plan.summary.simulated_ms - 1), 100.0 * opt_.batchnorm_tolerance);
        const int32_t simulated = search.simulations();
        PlanResult out = finish(split, in_, opt_.budget_bytes, split.best_candidate().label);
        out.simulations += simulated;
        out.plan.summary.notes.push_back(batchnorm_note);
        return out;
      }
    }
  } else {
    search_plans(search, Sizes::all);
  }
  if (!search.have()) {
    if (first_error_) return infeasible(first_error_->message);
    if (least_round_ > 1)
      return infeasible(
          batchnorm_refusal("no plan with rounds of " + std::to_string(least_round_) + " samples or more fits").message);
    return infeasible("no plan fits: " + search.first_failure());
  }
  const Candidate won = search.best_candidate();
  // The note names the sub-batch and, for mplan, the levers of the plan kept.
  const std::string note =
      published_ ? fmt::format("sub-batch {}", search.best().plan.sub_batch) : search.best_candidate().label;
  PlanResult out = finish(search, in_, opt_.budget_bytes, note);
  if (!batchnorm_note.empty()) out.plan.summary.notes.push_back(batchnorm_note);
  if (wd_) {
    out.plan.summary.notes.push_back("conv workspaces lie in a pool of " + format_bytes(won.pool_bytes) +
                                     " at the top of the arena; each kernel takes its fastest configuration "
                                     "within the pool (WR under the pool: one compute stream)");
    out.workspace_report.pool_bytes = won.pool_bytes;
    out.workspace_report.wd_problem = wd_problem_at(out.plan.sub_batches);
  }
  return out;
}

}  // namespace

PlanResult search_scheduler(const SearchInput& in) { return SchedulerSearch(in).run(); }

}  // namespace mplan::search
