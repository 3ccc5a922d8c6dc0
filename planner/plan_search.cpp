#include "planner/plan_search.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "frontend/bytes.h"
#include "planner/deciders/deciders.h"
#include "planner/sub_batch.h"

namespace mplan {
namespace {

Error budget_error(const std::string& message) { return Error{SourceLocation{"--budget", 0, 0}, message}; }

std::string bytes_text(int64_t bytes) { return std::to_string(bytes) + " bytes (" + format_bytes(bytes) + ")"; }

// Ideal: unlimited memory, the fastest option of every task, the whole batch
// as one sub-batch, no copies (moDNN §V).
double ideal_ms(const Tdfg& tdfg, const CostModel& cost, int64_t batch) {
  double ms = 0;
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t)
    ms += fastest_option(cost, tdfg, t, t == tdfg.update_task ? 1 : batch).time_ms;
  return ms;
}

bool has_batchnorm(const Tdfg& tdfg) {
  for (const Layer& l : tdfg.model->layers)
    if (l.op == Op::batchnorm) return true;
  return false;
}

// One simulation the search may run.
struct Candidate {
  std::vector<int64_t> rounds;
  int64_t pool_bytes = 0;
  KernelConfigurations fixed;
  bool dynamic = false;
  int64_t large_block_bytes = 0;
  std::function<std::unique_ptr<Decider>()> decider;
  std::string label;
};

class Search {
 public:
  Search(const Tdfg& tdfg, const CostModel& cost, int64_t arena, int copy_engines, bool screen)
      : tdfg_(tdfg), cost_(cost), arena_(arena), copy_engines_(copy_engines), screen_(screen) {}

  // Simulates `c` (abandoned once it cannot beat the best so far, when
  // screening); keeps it if it is the best. Returns the simulation.
  const SimResult& consider(const Candidate& c) {
    SimOptions o;
    o.sub_batches = c.rounds;
    o.arena_bytes = arena_;
    o.copy_engines = copy_engines_;
    o.large_block_bytes = c.large_block_bytes;
    o.workspace_pool_bytes = c.pool_bytes;
    o.fixed_configurations = c.fixed;
    o.micro_batch_dynamic = c.dynamic;
    o.abandon_after_ms = screen_ && have_ ? best_.plan.summary.simulated_ms : 0;
    std::unique_ptr<Decider> decider = c.decider();
    last_ = simulate_iteration(tdfg_, cost_, o, *decider);
    ++simulations_;
    if (!last_.feasible) {
      if (!last_.abandoned && first_failure_.empty()) first_failure_ = c.label + ": " + last_.failure;
      return last_;
    }
    if (!have_ || better(last_, best_)) {
      best_ = last_;
      best_candidate_ = c;
      have_ = true;
    }
    return last_;
  }

  bool have() const { return have_; }
  const SimResult& best() const { return best_; }
  SimResult& best() { return best_; }
  const Candidate& best_candidate() const { return best_candidate_; }
  const std::string& first_failure() const { return first_failure_; }
  int32_t simulations() const { return simulations_; }

 private:
  // Fastest wins; among equal times, fewer rounds (the larger sub-batch).
  static bool better(const SimResult& a, const SimResult& b) {
    const double ta = a.plan.summary.simulated_ms, tb = b.plan.summary.simulated_ms;
    return ta < tb || (ta == tb && a.plan.sub_batches.size() < b.plan.sub_batches.size());
  }

  const Tdfg& tdfg_;
  const CostModel& cost_;
  int64_t arena_;
  int copy_engines_;
  bool screen_;
  bool have_ = false;
  SimResult best_, last_;
  Candidate best_candidate_;
  std::string first_failure_;
  int32_t simulations_ = 0;
};

bool evicted_anything(const SimResult& r) {
  const PlanSummary& s = r.plan.summary;
  return s.offload_count > 0 || s.defragmentation_count > 0 || r.recomputed_tasks > 0 || s.prefetch_count > 0;
}

// The header fields every policy's plan shares.
void fill_header(Plan* plan, const Tdfg& tdfg, const CostModel& cost, int64_t budget, int64_t batch) {
  plan->model_name = tdfg.model->name;
  plan->model_digest = plan_model_digest(*tdfg.model);
  plan->device = cost.describe();
  plan->budget_bytes = budget;
  plan->resident_bytes = tdfg.resident_bytes();
  plan->batch = batch;
  plan->summary.ideal_ms = ideal_ms(tdfg, cost, batch);
  if (plan->sub_batches.size() > 1) {
    plan->summary.notes.push_back("the batch of " + std::to_string(batch) + " runs as " +
                                  std::to_string(plan->sub_batches.size()) +
                                  " sub-batches; gradients accumulate and the update runs once");
    if (has_batchnorm(tdfg)) plan->summary.notes.push_back("batchnorm statistics are per sub-batch");
  } else if (has_batchnorm(tdfg)) {
    plan->summary.notes.push_back("batchnorm statistics are over the whole batch (one round)");
  }
}

SearchResult finish(Search& search, const Tdfg& tdfg, const CostModel& cost, int64_t budget, int64_t batch,
                    std::string note) {
  SearchResult out;
  SimResult& best = search.best();
  out.plan = std::move(best.plan);
  out.recomputed_tasks = best.recomputed_tasks;
  out.recompute_steps = std::move(best.recompute_steps);
  out.offloaded_blocks = std::move(best.offloaded_blocks);
  out.simulations = search.simulations();
  fill_header(&out.plan, tdfg, cost, budget, batch);
  out.note = std::move(note);
  return out;
}

std::function<std::unique_ptr<Decider>()> modnn_factory(const ModnnRules& rules) {
  return [rules] { return make_modnn_decider(rules); };
}

std::string rules_text(const ModnnRules& r, bool stacked) {
  std::vector<std::string> parts;
  if (r.recompute) parts.push_back("recomputation");
  if (r.early_offload) parts.push_back("early offloads");
  if (!r.prefetch) parts.push_back("on-demand loads");
  if (stacked) parts.push_back("large blocks stacked");
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

// ---- mplan and modnn ------------------------------------------------------------

Result<SearchResult> search_scheduler(PolicyKind policy, const Tdfg& tdfg, const CostModel& cost, int64_t batch,
                                      const PlanOptions& options) {
  const bool published = policy == PolicyKind::modnn;
  if (options.budget_bytes <= 0) return budget_error("the memory budget must be positive");
  if (batch < 1) return budget_error("the batch must be at least 1");
  if (options.sub_batch < 0 || options.sub_batch > batch) {
    return Error{SourceLocation{"--sub-batch", 0, 0},
                 "sub-batch " + std::to_string(options.sub_batch) + " is not between 1 and the batch " +
                     std::to_string(batch)};
  }
  int copy_engines = options.copy_engines != 0 ? options.copy_engines : (published ? 1 : cost.copy_engines());
  if (copy_engines != 1 && copy_engines != 2) {
    return Error{SourceLocation{"--copy-engines", 0, 0},
                 "copy engines must be 1 or 2, not " + std::to_string(copy_engines)};
  }
  // moDNN Eq. 2: below the minimum no schedule exists.
  const MinimumBudget min = minimum_budget(tdfg, cost);
  const int64_t resident_region = resident_region_bytes(tdfg);
  const int64_t arena = align_down(options.budget_bytes - resident_region);
  if (options.budget_bytes < min.bytes || arena < min.task_bytes) {
    const std::string who = min.task == kNoTask ? std::string("the resident weights") : "task " + tdfg.tasks[min.task].name;
    return budget_error("budget " + bytes_text(options.budget_bytes) + " is below the minimum " + bytes_text(min.bytes) +
                        " for model '" + tdfg.model->name + "': " + who + " needs " + bytes_text(min.task_bytes) +
                        " at sub-batch 1 besides the " + bytes_text(resident_region) +
                        " of weights, gradients and optimizer state");
  }
  // Batch normalisation needs two values per channel in every round.
  const int64_t least_round = least_batchnorm_round(tdfg);
  const bool batchnorm = has_batchnorm(tdfg);
  auto batchnorm_refusal = [&](const std::string& why) -> Error {
    const int64_t need = resident_region + max_task_arena_bytes(tdfg, cost, least_round, /*fastest=*/false);
    return budget_error(fmt::format(
        "{}: a batchnorm layer of model '{}' would see fewer than two values per channel (every round needs at "
        "least {} samples, as training with batch statistics does; PyTorch refuses the same); the least budget "
        "that runs rounds of {} samples is {}",
        why, tdfg.model->name, least_round, least_round, bytes_text(need)));
  };
  if (options.sub_batch > 0 && rounds_for(batch, options.sub_batch, least_round).empty())
    return batchnorm_refusal("sub-batch " + std::to_string(options.sub_batch));
  if (batch < least_round) return batchnorm_refusal("the batch of " + std::to_string(batch));

  // The wd pool comes off the arena the blocks use.
  auto blocks_arena_of = [&](int64_t pool) { return arena - (pool > 0 ? align_up(pool) : 0); };
  const bool wd = options.workspace == WorkspaceUse::wd || options.workspace == WorkspaceUse::wd_auto;
  if (options.workspace == WorkspaceUse::wd && blocks_arena_of(options.workspace_bytes) <= 0) {
    return Error{SourceLocation{}, "--workspace 'wd:" + format_bytes(options.workspace_bytes) +
                                       "': the pool does not fit the arena of " + bytes_text(arena) +
                                       " (the budget less the resident weights)"};
  }
  if (options.workspace == WorkspaceUse::wd && blocks_arena_of(options.workspace_bytes) < min.task_bytes) {
    return Error{SourceLocation{},
                 "--workspace 'wd:" + format_bytes(options.workspace_bytes) + "': the pool leaves " +
                     bytes_text(std::max<int64_t>(0, blocks_arena_of(options.workspace_bytes))) + " of the arena of " +
                     bytes_text(arena) + ", less than the " + bytes_text(min.task_bytes) + " that task " +
                     tdfg.tasks[min.task].name + " needs at sub-batch 1"};
  }

  // Sub-batch candidates for a blocks arena (planner/sub_batch.h), or the fixed one.
  std::optional<Error> first_error;
  auto candidates_for = [&](int64_t blocks_arena) -> std::vector<int64_t> {
    const int64_t bmax = largest_feasible_sub_batch(tdfg, cost, blocks_arena, batch);
    if (options.sub_batch > 0) {
      if (options.sub_batch > bmax) {
        if (!first_error)
          first_error = Error{SourceLocation{"--sub-batch", 0, 0},
                              "sub-batch " + std::to_string(options.sub_batch) + " does not fit the arena of " +
                                  bytes_text(blocks_arena) + "; the largest that fits is " + std::to_string(bmax)};
        return {};
      }
      return {options.sub_batch};
    }
    if (bmax < 1) return {};
    const int64_t b0 = std::min(eq3_sub_batch(tdfg, cost, blocks_arena, batch), bmax);
    if (published) return {b0};
    return sub_batch_candidates(batch, b0, bmax);
  };

  // The WD problem per round sizes (desirable sets do not depend on the pool).
  std::map<std::vector<int64_t>, WdProblem> wd_problems;
  auto wd_problem_at = [&](const std::vector<int64_t>& rounds) -> const WdProblem& {
    auto it = wd_problems.find(rounds);
    if (it == wd_problems.end()) it = wd_problems.emplace(rounds, wd_problem(tdfg, cost, rounds)).first;
    return it->second;
  };
  std::vector<int64_t> pools = {0};
  if (options.workspace == WorkspaceUse::wd) pools = {options.workspace_bytes};
  if (options.workspace == WorkspaceUse::wd_auto) {
    // Powers of four from 64 MiB and the largest fastest workspace at each
    // candidate, while the rest of the arena holds the largest task at sub-batch 1.
    for (int64_t p = int64_t{64} << 20; blocks_arena_of(p) >= min.task_bytes; p *= 4) pools.push_back(p);
    for (int64_t b : candidates_for(arena)) {
      std::vector<int64_t> rounds = rounds_for(batch, b, least_round);
      if (rounds.empty()) continue;
      const int64_t p = largest_fastest_workspace_bytes(wd_problem_at(rounds));
      if (p > 0 && blocks_arena_of(p) >= min.task_bytes) pools.push_back(p);
    }
    std::sort(pools.begin(), pools.end());
    pools.erase(std::unique(pools.begin(), pools.end()), pools.end());
  }

  ModnnRules base;
  base.select_algorithms = options.select_algorithms;
  base.prefetch = options.prefetch;
  base.lookahead_tasks = options.prefetch_lookahead_tasks;
  base.refetch_cost = true;
  base.recompute = !published && options.recompute;
  base.early_offload = !published && options.early_offload;

  Search search(tdfg, cost, arena, copy_engines, options.screen_sub_batches);
  int64_t best_pool = 0;
  // The levers of one candidate: everything on first; where that plan had to
  // evict anything, the variants (planner/plan_search.h).
  auto search_candidate = [&](Candidate c, int64_t large_block_bytes) {
    c.decider = modnn_factory(base);
    c.label = fmt::format("sub-batch {}", c.rounds.front());
    const SimResult& first = search.consider(c);
    // An abandoned first try still gets its variants: one of them may beat the
    // best (so screening picks what simulating everything picks).
    const bool variants = !published && (!first.feasible || evicted_anything(first));
    if (!variants) return;
    std::vector<ModnnRules> rules;
    auto add = [&](ModnnRules r) {
      for (const ModnnRules& q : rules)
        if (q.recompute == r.recompute && q.early_offload == r.early_offload && q.prefetch == r.prefetch) return;
      rules.push_back(r);
    };
    ModnnRules r = base;
    r.recompute = false;
    add(r);
    r = base;
    r.early_offload = false;
    add(r);
    r.recompute = false;
    add(r);
    for (const ModnnRules& q : std::vector<ModnnRules>(rules)) {
      if (q.recompute == base.recompute && q.early_offload == base.early_offload) continue;
      c.decider = modnn_factory(q);
      search.consider(c);
    }
    // On-demand loading and stacked placement, on the rules that won for this candidate.
    ModnnRules winner = base;
    if (base.prefetch) {
      ModnnRules q = winner;
      q.prefetch = false;
      c.decider = modnn_factory(q);
      search.consider(c);
    }
    if (large_block_bytes > 0) {
      c.large_block_bytes = large_block_bytes;
      c.decider = modnn_factory(base);
      search.consider(c);
    }
  };

  std::string batchnorm_note;
  for (int64_t pool : pools) {
    const int64_t blocks_arena = blocks_arena_of(pool);
    std::vector<int64_t> sizes = candidates_for(blocks_arena);
    if (sizes.empty()) continue;
    // Batch normalisation: the whole batch as one round whenever it fits, unless asked otherwise.
    if (batchnorm && !options.split_batchnorm && options.sub_batch == 0 && !published &&
        std::find(sizes.begin(), sizes.end(), batch) != sizes.end()) {
      sizes = {batch};
    }
    const int64_t b0 = std::min(eq3_sub_batch(tdfg, cost, blocks_arena, batch), sizes.back());
    // The Eq. 3 start first, then the others nearest it (in ratio), so a good
    // plan is known early and screening stops the rest sooner.
    std::stable_sort(sizes.begin(), sizes.end(), [b0](int64_t a, int64_t b) {
      auto distance = [b0](int64_t x) {
        return x >= b0 ? static_cast<double>(x) / static_cast<double>(b0) : static_cast<double>(b0) / static_cast<double>(x);
      };
      return distance(a) < distance(b);
    });
    for (int64_t b : sizes) {
      Candidate c;
      c.rounds = rounds_for(batch, b, least_round);
      if (c.rounds.empty()) continue;
      c.pool_bytes = pool;
      c.dynamic = options.workspace == WorkspaceUse::dynamic;
      if (options.workspace == WorkspaceUse::wr || wd) {
        // wr: the per-kernel limit; wd: the pool is every kernel's limit (one compute stream).
        const int64_t limit = options.workspace == WorkspaceUse::wr ? options.workspace_bytes : pool;
        Result<KernelConfigurations> fixed = wr_configurations(tdfg, cost, c.rounds, limit);
        if (!fixed.ok()) {
          if (!first_error) {
            Error e = fixed.error();
            if (wd) e.message = "--workspace 'wd:" + format_bytes(pool) + "': " + e.message;
            first_error = e;
          }
          continue;
        }
        c.fixed = std::move(fixed).value();
        // Each task must fit beside its fixed workspace (outside the pool for wr).
        std::string too_big;
        for (const auto& [key, conf] : c.fixed) {
          const int64_t ws = options.workspace == WorkspaceUse::wr ? conf.workspace_bytes() : 0;
          if (task_arena_bytes(tdfg, key.first, key.second, ws) > blocks_arena) {
            too_big = tdfg.tasks[key.first].name;
            break;
          }
        }
        if (!too_big.empty()) {
          if (!first_error)
            first_error = Error{SourceLocation{}, "--workspace '" + workspace_mode_name({options.workspace, options.workspace_bytes}) +
                                                      "': task " + too_big + " at sub-batch " + std::to_string(b) +
                                                      " does not fit the arena of " + bytes_text(arena) +
                                                      " beside its workspace; use a smaller limit"};
          continue;
        }
      }
      const bool had = search.have();
      const double before = had ? search.best().plan.summary.simulated_ms : 0;
      const int64_t large = options.large_block_divisor > 0 ? blocks_arena / options.large_block_divisor : 0;
      search_candidate(c, published ? 0 : large);
      if (search.have() && (!had || search.best().plan.summary.simulated_ms < before)) best_pool = pool;
    }
    if (batchnorm && !options.split_batchnorm && options.sub_batch == 0 && !published && sizes.size() == 1 &&
        sizes.front() == batch && !search.have()) {
      // One round did not fit after all: split (memory forces it).
      for (int64_t b : candidates_for(blocks_arena)) {
        if (b == batch) continue;
        Candidate c;
        c.rounds = rounds_for(batch, b, least_round);
        if (c.rounds.empty()) continue;
        c.pool_bytes = pool;
        c.dynamic = options.workspace == WorkspaceUse::dynamic;
        const int64_t large = options.large_block_divisor > 0 ? blocks_arena / options.large_block_divisor : 0;
        search_candidate(c, large);
        best_pool = pool;
      }
    }
  }
  if (!search.have()) {
    if (first_error) return *first_error;
    if (least_round > 1) return batchnorm_refusal("no plan with rounds of " + std::to_string(least_round) + " samples or more fits");
    return budget_error("no plan fits: " + search.first_failure());
  }
  const Candidate& won = search.best_candidate();
  std::string note = fmt::format("sub-batch {}", search.best().plan.sub_batch);
  (void)won;
  if (batchnorm && search.best().plan.sub_batches.size() > 1 && !options.split_batchnorm && options.sub_batch == 0 &&
      !published)
    batchnorm_note = "batchnorm: the batch does not fit as one round, so its statistics are per sub-batch";
  SearchResult out = finish(search, tdfg, cost, options.budget_bytes, batch, note);
  if (!batchnorm_note.empty()) out.plan.summary.notes.push_back(batchnorm_note);
  if (wd) {
    out.plan.summary.notes.push_back("conv workspaces lie in a pool of " + format_bytes(best_pool) +
                                     " at the top of the arena; each kernel takes its fastest configuration "
                                     "within the pool (WR under the pool: one compute stream)");
    out.workspace_report.pool_bytes = best_pool;
    out.workspace_report.wd_problem = wd_problem_at(out.plan.sub_batches);
  }
  return out;
}

// ---- the layer-wise baselines -----------------------------------------------------

struct LayerWise {
  std::vector<int64_t> rounds;
  int copy_engines = 1;
  std::function<std::unique_ptr<Decider>()> decider;
  std::string label;
};

Result<SearchResult> search_vdnn_dyn(const Tdfg& tdfg, const CostModel& cost, const std::vector<int64_t>& rounds,
                                     int64_t arena, std::string* pass) {
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
  std::optional<SimResult> first;
  for (const Pass& p : passes) {
    Search search(tdfg, cost, arena, 1, false);
    Candidate c;
    c.rounds = rounds;
    c.decider = [p] { return make_vdnn_decider(p.offload, p.algorithms); };
    c.label = p.name;
    const SimResult& r = search.consider(c);
    if (!first) {
      if (!r.feasible) return Error{SourceLocation{}, r.failure};
      first = r;
      continue;
    }
    if (r.feasible) {
      *pass = p.name;
      SearchResult out;
      out.plan = r.plan;
      out.recomputed_tasks = r.recomputed_tasks;
      out.recompute_steps = r.recompute_steps;
      out.offloaded_blocks = r.offloaded_blocks;
      return out;
    }
  }
  *pass = passes[0].name;
  SearchResult out;
  out.plan = first->plan;
  out.offloaded_blocks = first->offloaded_blocks;
  return out;
}

}  // namespace

int64_t least_batchnorm_round(const Tdfg& tdfg) {
  int64_t least = 1;
  for (const Layer& l : tdfg.model->layers) {
    if (l.op != Op::batchnorm) continue;
    int64_t per_sample = 1;  // values per channel per sample: H * W
    for (size_t i = 1; i < l.output.dims.size(); ++i) per_sample *= l.output.dims[i];
    least = std::max<int64_t>(least, (2 + per_sample - 1) / per_sample);
  }
  return least;
}

std::vector<int64_t> rounds_for(int64_t batch, int64_t sub_batch, int64_t least_round) {
  std::vector<int64_t> rounds = split_batch(batch, sub_batch);
  if (rounds.back() >= least_round) return rounds;
  const int64_t count = static_cast<int64_t>(rounds.size());
  if (batch / count < least_round) return {};
  rounds.assign(count, batch / count);
  for (int64_t i = 0; i < batch % count; ++i) rounds[i] += 1;
  return rounds;
}

Result<SearchResult> search_plan(PolicyKind policy, const Tdfg& tdfg, const CostModel& cost, int64_t batch,
                                 const PlanOptions& options) {
  MPLAN_CHECK(tdfg.model != nullptr, "the TDFG has no model");
  if (policy == PolicyKind::mplan || policy == PolicyKind::modnn)
    return search_scheduler(policy, tdfg, cost, batch, options);
  if (options.budget_bytes <= 0) return budget_error("the memory budget must be positive");
  const int64_t resident_region = resident_region_bytes(tdfg);
  if (policy == PolicyKind::ideal) {
    Search search(tdfg, cost, int64_t{1} << 52, 2, false);  // 4 PiB: unlimited
    Candidate c;
    c.rounds = {batch};
    c.decider = [] { return make_ideal_decider(); };
    const SimResult& r = search.consider(c);
    MPLAN_CHECK(r.feasible, "the ideal plan has unlimited memory: " + r.failure);
    SearchResult out = finish(search, tdfg, cost, 0, batch, "");
    // Its own budget: exactly what it needs.
    out.plan.arena_bytes = align_up(out.plan.summary.peak_arena_bytes);
    out.plan.budget_bytes = out.plan.resident_region_bytes + out.plan.arena_bytes;
    return out;
  }
  const int64_t arena = align_down(options.budget_bytes - resident_region);
  if (arena <= 0)
    return budget_error("the budget " + format_bytes(options.budget_bytes) + " does not hold the resident weights (" +
                        format_bytes(resident_region) + ")");
  auto single = [&](int copy_engines, std::function<std::unique_ptr<Decider>()> decider) -> Result<SearchResult> {
    Search search(tdfg, cost, arena, copy_engines, false);
    Candidate c;
    c.rounds = {batch};
    c.decider = std::move(decider);
    const SimResult& r = search.consider(c);
    if (!r.feasible) return Error{SourceLocation{}, r.failure};
    return finish(search, tdfg, cost, options.budget_bytes, batch, "");
  };
  auto vdnn = [&](VdnnOffload o, VdnnAlgorithms a) {
    return single(1, [o, a] { return make_vdnn_decider(o, a); });
  };
  switch (policy) {
    case PolicyKind::vdnn_all_m: return vdnn(VdnnOffload::all, VdnnAlgorithms::memory_optimal);
    case PolicyKind::vdnn_all_p: return vdnn(VdnnOffload::all, VdnnAlgorithms::performance_optimal);
    case PolicyKind::vdnn_conv_m: return vdnn(VdnnOffload::conv, VdnnAlgorithms::memory_optimal);
    case PolicyKind::vdnn_conv_p: return vdnn(VdnnOffload::conv, VdnnAlgorithms::performance_optimal);
    case PolicyKind::superneurons: return single(cost.copy_engines(), [] { return make_superneurons_decider(); });
    case PolicyKind::vdnn_dyn: {
      std::string pass;
      Result<SearchResult> r = search_vdnn_dyn(tdfg, cost, {batch}, arena, &pass);
      if (!r.ok()) return r;
      fill_header(&r->plan, tdfg, cost, options.budget_bytes, batch);
      r->note = pass;
      return r;
    }
    case PolicyKind::vdnn_plus: {
      // vDNN+ (moDNN §V-B): vDNN's dynamic policy at moDNN's sub-batch
      // candidates (Eq. 3 start); the fastest feasible one. If none is
      // feasible, halves the smallest candidate down to 1.
      const int64_t bmax = largest_feasible_sub_batch(tdfg, cost, arena, batch);
      if (bmax < 1) return Error{SourceLocation{}, "no sub-batch fits the arena of " + format_bytes(arena)};
      const int64_t b0 = std::min(eq3_sub_batch(tdfg, cost, arena, batch), bmax);
      std::vector<int64_t> candidates = sub_batch_candidates(batch, b0, bmax);
      std::optional<SearchResult> best;
      std::string last_failure;
      auto try_b = [&](int64_t b) {
        std::string pass;
        Result<SearchResult> r = search_vdnn_dyn(tdfg, cost, split_batch(batch, b), arena, &pass);
        if (!r.ok()) {
          last_failure = "sub-batch " + std::to_string(b) + ": " + r.error().message;
          return;
        }
        if (!best || r->plan.summary.simulated_ms < best->plan.summary.simulated_ms) {
          best = std::move(r).value();
          best->note = "sub-batch " + std::to_string(b) + ", " + pass;
        }
      };
      for (int64_t b : candidates) try_b(b);
      for (int64_t b = candidates.front() / 2; !best && b >= 1; b /= 2) try_b(b);
      if (!best) return Error{SourceLocation{}, last_failure};
      fill_header(&best->plan, tdfg, cost, options.budget_bytes, batch);
      return *best;
    }
    default: break;
  }
  MPLAN_CHECK(false, "unknown policy");
  return Error{};
}

}  // namespace mplan
