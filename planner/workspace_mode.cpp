#include "planner/workspace_mode.h"

#include <algorithm>

#include "core/bytes.h"
#include "planner/microbatch/batch_size_policy.h"
#include "planner/microbatch/benchmark_table.h"
#include "planner/microbatch/desirable_set.h"
#include "planner/microbatch/wr_optimizer.h"

namespace mplan {
namespace {

using microbatch::BatchSizePolicy;
constexpr BatchSizePolicy kPolicy = BatchSizePolicy::power_of_two;  // mu-cuDNN §III-D

Error flag_error(const std::string& text, const std::string& message) {
  return Error{SourceLocation{}, "--workspace '" + text + "': " + message};
}

microbatch::BenchmarkTable table_at(const Tdfg& tdfg, const CostModel& cost, TaskId t, int64_t b) {
  return microbatch::table_from_cost_model(cost, tdfg, t, microbatch::micro_batch_sizes(kPolicy, b));
}

}  // namespace

Result<WorkspaceMode> parse_workspace_mode(const std::string& text) {
  if (text == "auto") return WorkspaceMode{WorkspaceUse::automatic, 0};
  if (text == "undivided") return WorkspaceMode{WorkspaceUse::undivided, 0};
  if (text == "dynamic") return WorkspaceMode{WorkspaceUse::dynamic, 0};
  if (text == "wd:auto") return WorkspaceMode{WorkspaceUse::wd_auto, 0};
  const bool wr = text.rfind("wr:", 0) == 0;
  const bool wd = text.rfind("wd:", 0) == 0;
  if (!wr && !wd) {
    return flag_error(text, "expected auto, undivided, dynamic, wr:LIMIT (e.g. wr:64MiB), wd:TOTAL (e.g. wd:1GiB) "
                            "or wd:auto");
  }
  Result<int64_t> bytes = parse_bytes(text.substr(3));
  if (!bytes.ok()) return flag_error(text, "expected a size like 512MiB");
  if (wr) return WorkspaceMode{WorkspaceUse::wr, *bytes};
  return WorkspaceMode{WorkspaceUse::wd, *bytes};
}

std::string workspace_mode_name(const WorkspaceMode& mode) {
  switch (mode.use) {
    case WorkspaceUse::automatic: return "auto";
    case WorkspaceUse::undivided: return "undivided";
    case WorkspaceUse::dynamic: return "dynamic";
    case WorkspaceUse::wr: return "wr:" + format_bytes(mode.bytes);
    case WorkspaceUse::wd: return "wd:" + format_bytes(mode.bytes);
    case WorkspaceUse::wd_auto: return "wd:auto";
  }
  return "?";
}

std::vector<int64_t> distinct_sub_batches(const std::vector<int64_t>& sub_batches) {
  std::vector<int64_t> sizes = sub_batches;
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

Result<KernelConfigurations> wr_configurations(const Tdfg& tdfg, const CostModel& cost,
                                               const std::vector<int64_t>& sub_batches,
                                               int64_t limit_bytes) {
  KernelConfigurations out;
  for (TaskId t : microbatch::convolution_kernels(tdfg)) {
    for (int64_t b : distinct_sub_batches(sub_batches)) {
      microbatch::BenchmarkTable table = table_at(tdfg, cost, t, b);
      Result<microbatch::Configuration> c = microbatch::optimize_wr(table, b, limit_bytes, kPolicy);
      if (!c.ok()) {
        return Error{SourceLocation{},
                     "--workspace 'wr:" + format_bytes(limit_bytes) + "': kernel " + table.kernel +
                         " at sub-batch " + std::to_string(b) + ": " + c.error().message};
      }
      out.emplace(std::make_pair(t, b), std::move(c).value());
    }
  }
  return out;
}

WdProblem wd_problem(const Tdfg& tdfg, const CostModel& cost, const std::vector<int64_t>& sub_batches) {
  WdProblem problem;
  const std::vector<int64_t> sizes = distinct_sub_batches(sub_batches);
  for (TaskId t : microbatch::convolution_kernels(tdfg)) {
    // The largest size is the common round; smaller (last) rounds get "@b".
    for (auto it = sizes.rbegin(); it != sizes.rend(); ++it) {
      int64_t b = *it;
      microbatch::BenchmarkTable table = table_at(tdfg, cost, t, b);
      std::string name = table.kernel + (b == sizes.back() ? "" : "@" + std::to_string(b));
      problem.kernels.push_back({name, microbatch::desirable_configurations(table, b, kPolicy)});
      problem.keys.emplace_back(t, b);
    }
  }
  return problem;
}

Result<KernelConfigurations> wd_configurations(const WdProblem& problem, int64_t pool_bytes) {
  KernelConfigurations out;
  if (problem.kernels.empty()) return out;
  microbatch::WdOptions options;
  options.total_workspace_bytes = pool_bytes;
  Result<microbatch::WdSolution> solution = microbatch::optimize_wd(problem.kernels, options);
  if (!solution.ok()) {
    return Error{SourceLocation{},
                 "--workspace 'wd:" + format_bytes(pool_bytes) + "': " + solution.error().message};
  }
  for (size_t k = 0; k < problem.kernels.size(); ++k) {
    out.emplace(problem.keys[k], problem.kernels[k].configurations[solution->chosen[k]]);
  }
  return out;
}

int64_t fastest_total_workspace_bytes(const WdProblem& problem) {
  int64_t total = 0;
  for (const microbatch::WdKernel& k : problem.kernels) {
    if (!k.configurations.empty()) total += k.configurations.back().workspace_bytes();
  }
  return total;
}

int64_t largest_fastest_workspace_bytes(const WdProblem& problem) {
  int64_t largest = 0;
  for (const microbatch::WdKernel& k : problem.kernels)
    if (!k.configurations.empty()) largest = std::max(largest, k.configurations.back().workspace_bytes());
  return largest;
}

}  // namespace mplan
