#pragma once
// Parts of the plan search (planner/plan_search.h) shared by its two files:
// planner/plan_search.cpp (the dispatch and the layer-wise baselines) and
// planner/mplan_search.cpp (mplan's and moDNN's searches). Not a public header.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "planner/deciders/deciders.h"
#include "planner/plan_search.h"
#include "planner/sim/decider.h"
#include "planner/sim/dynamic_options.h"
#include "planner/sim/iteration_sim.h"

namespace mplan::search {

// An infeasible result saying why.
PlanResult infeasible(std::string why);
std::string bytes_text(int64_t bytes);
// The header fields every policy's plan shares, and the notes on rounds.
void fill_header(Plan* plan, const Tdfg& tdfg, const CostModel& cost, int64_t budget, int64_t batch);

// One simulation the search may run.
struct Candidate {
  std::vector<int64_t> rounds;
  int64_t pool_bytes = 0;
  KernelConfigurations fixed;
  bool dynamic = false;
  int64_t large_block_bytes = 0;
  int copy_engines = 0;  // 0: the search's; 1: one engine shared by both directions
  std::function<std::unique_ptr<Decider>()> decider;
  std::string label;
  ModnnRules rules;  // the decider's, where it is moDNN's (mplan's searches)
};

// Whether plan `a` is better than `b`: faster; at the same simulated time (to
// a part in 10^9), fewer rounds (batchnorm statistics over more samples), then
// fewer bytes copied, then fewer tasks recomputed. Copies hidden under compute
// cost no simulated time but still take PCIe bandwidth, host memory and
// power, and a real GPU's timing is not the model's: an early offload of a
// block that is never evicted again is pure waste (VGG-16 at 12 GiB on the
// K40 copied 9.95 GiB out and nothing back at the same time as no copies).
bool better_plan(const PlanResult& a, const PlanResult& b);

// Simulates candidates and keeps the best feasible one (better_plan).
class Search {
 public:
  Search(const Tdfg& tdfg, const CostModel& cost, int64_t arena, int copy_engines, bool screen)
      : tdfg_(tdfg), cost_(cost), arena_(arena), copy_engines_(copy_engines), screen_(screen) {}

  // Simulates `c`, abandoned (when screening) once it cannot beat the best so
  // far or the bound; keeps it if it is the best. Returns the simulation.
  const PlanResult& consider(const Candidate& c);
  // Plans slower than this are abandoned (and never kept) from now on.
  void set_bound_ms(double ms) { bound_ms_ = ms; }

  // The candidate's lower bound: every task at its fastest option (dynamic:
  // micro-batched ones too), nothing waiting (the time no plan of these
  // rounds can beat).
  double lower_bound_ms(const std::vector<int64_t>& rounds, bool dynamic);

  bool have() const { return have_; }
  PlanResult& best() { return best_; }
  const Candidate& best_candidate() const { return best_candidate_; }
  // The last few candidates that were the best when simulated, oldest first
  // (the best last): plans a post-pass may improve more than the best.
  const std::vector<Candidate>& recent_bests() const { return recent_bests_; }
  const std::string& first_failure() const { return first_failure_; }
  int32_t simulations() const { return simulations_; }

 private:
  const Tdfg& tdfg_;
  const CostModel& cost_;
  int64_t arena_;
  int copy_engines_;
  bool screen_;
  double bound_ms_ = 0;  // 0: none
  bool have_ = false;
  PlanResult best_, last_;
  Candidate best_candidate_;
  std::vector<Candidate> recent_bests_;
  static constexpr size_t kRecentBests = 4;
  std::string first_failure_;
  int32_t simulations_ = 0;
  std::map<std::pair<int64_t, bool>, double> round_ms_;  // (sub-batch, dynamic) -> its tasks at their fastest
  DynamicOptionCache dynamic_options_;                   // for every dynamic candidate it simulates
};

// The finished result of `search`'s best plan, header filled.
PlanResult finish(Search& search, const SearchInput& in, int64_t budget, std::string note);

// mplan's and moDNN's searches (planner/mplan_search.cpp).
PlanResult search_scheduler(const SearchInput& in);

}  // namespace mplan::search
