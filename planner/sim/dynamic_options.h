#pragma once
// A conv task's options in mu-cuDNN's "dynamic" workspace mode (mu-cuDNN
// §III-C1): its undivided options and the desirable micro-batched
// configurations of powerOfTwo sizes, fastest first. The Pareto fronts are
// costly (a dynamic program per task and round size), so a plan search
// computes each once for all the iterations it simulates.

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "planner/plan.h"
#include "profiler/cost_model.h"
#include "tdfg/tdfg.h"

namespace mplan {

struct TaskOptionSet {
  std::vector<TaskOption> options;             // fastest first; ties: less workspace, undivided first
  std::vector<std::vector<MicroBatch>> micro;  // per option: its micro-batches; empty when undivided
};

// Task t's options at sub-batch b: the cost model's undivided ones and, for
// a task with algorithms at b > 1, the desirable configurations of two or
// more micro-batches.
TaskOptionSet dynamic_option_set(const Tdfg& tdfg, const CostModel& cost, TaskId t, int64_t b);

// dynamic_option_set per (task, sub-batch), computed on first use. One per
// graph and cost model: the keys do not name them.
class DynamicOptionCache {
 public:
  const TaskOptionSet& at(const Tdfg& tdfg, const CostModel& cost, TaskId t, int64_t b);

 private:
  std::map<std::pair<TaskId, int64_t>, TaskOptionSet> sets_;
};

}  // namespace mplan
