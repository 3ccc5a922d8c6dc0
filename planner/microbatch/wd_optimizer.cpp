#include "planner/microbatch/wd_optimizer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <glpk.h>
#include <unistd.h>

#include "core/bytes.h"
#include "planner/glpk_problem.h"

namespace mplan::microbatch {
namespace {

// GLPK's rows and columns hold workspaces in MiB, so that the workspace row's
// coefficients are of the same order as the times; the answer is checked
// again in bytes.
constexpr double kBytesPerMiB = 1024.0 * 1024.0;
// GLPK limits names to 255 characters.
constexpr size_t kMaxKernelNameChars = 200;

using Problem = GlpkProblem;
using TerminalOutput = GlpkTerminalOutput;

// Why kernels with the same configurations may share variables (exact).
//
// Let K be a class of m kernels whose configurations that fit W have the
// same (time T_c, workspace W_c) list. In the 0-1 ILP (Eq. 1-4) the kernels
// of K appear only through the columns x_kc, whose coefficients T_c (objective),
// W_c (workspace row) and 1 (row of kernel k) do not depend on k ∈ K: the
// kernels of K are interchangeable. Map a 0-1 solution x to
// n_c = Σ_{k∈K} x_kc. Then n_c ∈ {0..m}, Σ_c n_c = Σ_k Σ_c x_kc = m, and
// Σ_c T_c·n_c, Σ_c W_c·n_c equal K's share of the objective and of the
// workspace row. Conversely any integer n >= 0 with Σ_c n_c = m comes from the
// 0-1 solution giving the first n_0 kernels of K configuration 0, the next n_1
// configuration 1, ... (class_assignment below), with the same objective and
// workspace. So the merged problem's feasible points are exactly the images
// of the 0-1 problem's, at the same cost: both have the same optimum, and
// mapping back keeps it. The 0-1 ILP has up to m! equivalent copies of every
// solution (permute K), which branch and bound cannot tell apart; the merged
// one has one.
struct KernelClass {
  std::vector<int> members;  // kernel indices, ascending
  // configuration[i][c]: member i's index of the class's configuration c
  // (only configurations that fit W, in the kernel's order).
  std::vector<std::vector<int>> configuration;
};

// One ILP column: configuration `configuration` of class `kernel_class`.
struct Column {
  int kernel_class = 0;
  int configuration = 0;
};

std::vector<KernelClass> group_kernels(const std::vector<WdKernel>& kernels,
                                       int64_t total_workspace_bytes, bool merge) {
  std::vector<KernelClass> classes;
  // Exact comparison: kernels with the same table get bit-identical desirable
  // sets (the same sums in the same order).
  std::map<std::vector<std::pair<double, int64_t>>, size_t> class_of;
  for (int k = 0; k < static_cast<int>(kernels.size()); ++k) {
    std::vector<std::pair<double, int64_t>> key;
    std::vector<int> fitting;
    for (int c = 0; c < static_cast<int>(kernels[k].configurations.size()); ++c) {
      const Configuration& conf = kernels[k].configurations[c];
      if (conf.workspace_bytes() > total_workspace_bytes) continue;
      key.emplace_back(conf.time_ms(), conf.workspace_bytes());
      fitting.push_back(c);
    }
    size_t index = classes.size();
    if (merge) index = class_of.try_emplace(std::move(key), classes.size()).first->second;
    if (index == classes.size()) classes.emplace_back();
    classes[index].members.push_back(k);
    classes[index].configuration.push_back(std::move(fitting));
  }
  return classes;
}

std::string short_name(const std::string& kernel) {
  return kernel.size() <= kMaxKernelNameChars ? kernel : kernel.substr(0, kMaxKernelNameChars);
}

// Σ_k of kernel k's leanest configuration: the least pool that is feasible.
int64_t least_total_workspace_bytes(const std::vector<WdKernel>& kernels) {
  int64_t total = 0;
  for (const WdKernel& k : kernels) {
    int64_t least = INT64_MAX;
    for (const Configuration& c : k.configurations) least = std::min(least, c.workspace_bytes());
    total += least;
  }
  return total;
}

// Checks what GLPK cannot be asked to prove: every kernel has a configuration
// and the pool holds the leanest configuration of every kernel.
Status check_feasible(const std::vector<WdKernel>& kernels, int64_t total_workspace_bytes) {
  if (total_workspace_bytes < 0)
    return Error{{}, fmt::format("the workspace pool must not be negative (got {} bytes)",
                                 total_workspace_bytes)};
  for (const WdKernel& k : kernels)
    if (k.configurations.empty())
      return Error{{}, fmt::format("kernel {} has no configuration to choose from", k.name)};
  const int64_t least = least_total_workspace_bytes(kernels);
  if (least > total_workspace_bytes)
    return Error{{}, fmt::format("a workspace pool of {} is too small for {} kernels: their leanest "
                                 "configurations need {} in total",
                                 format_bytes_exact(total_workspace_bytes), kernels.size(),
                                 format_bytes_exact(least))};
  return Ok{};
}

// Builds Eq. 1-4 with readable names, one set of columns per class;
// configurations that alone exceed the pool get no column (x would be 0 in
// every feasible solution).
Problem build_problem(const std::vector<WdKernel>& kernels, const std::vector<KernelClass>& classes,
                      double pool_mib, std::vector<Column>& columns) {
  Problem p(glp_create_prob());
  glp_set_prob_name(p.get(), "mu_cuDNN_WD");
  glp_set_obj_name(p.get(), "time_ms");
  glp_set_obj_dir(p.get(), GLP_MIN);

  const int n_classes = static_cast<int>(classes.size());
  glp_add_rows(p.get(), n_classes + 1);
  const int workspace_row = 1;
  glp_set_row_name(p.get(), workspace_row, "workspace");
  glp_set_row_bnds(p.get(), workspace_row, GLP_UP, 0.0, pool_mib);
  for (int k = 0; k < n_classes; ++k) {
    const KernelClass& kc = classes[k];
    const std::string& first = short_name(kernels[kc.members.front()].name);
    const std::string name = kc.members.size() == 1 ? "kernel[" + first + "]" : "class[" + first + "]";
    const double count = static_cast<double>(kc.members.size());
    glp_set_row_name(p.get(), 2 + k, name.c_str());
    glp_set_row_bnds(p.get(), 2 + k, GLP_FX, count, count);
  }

  columns.clear();
  for (int k = 0; k < n_classes; ++k)
    for (int c = 0; c < static_cast<int>(classes[k].configuration.front().size()); ++c)
      columns.push_back({k, c});
  if (columns.empty()) return p;
  glp_add_cols(p.get(), static_cast<int>(columns.size()));
  // GLPK's sparse arrays count from 1.
  std::vector<int> ia(1), ja(1);
  std::vector<double> ar(1);
  for (int j = 1; j <= static_cast<int>(columns.size()); ++j) {
    const Column& col = columns[j - 1];
    const KernelClass& kc = classes[col.kernel_class];
    const WdKernel& first = kernels[kc.members.front()];
    const int index = kc.configuration.front()[col.configuration];
    const Configuration& c = first.configurations[index];
    const int count = static_cast<int>(kc.members.size());
    const std::string name =
        fmt::format("{}[{}][{}]", count == 1 ? "x" : "n", short_name(first.name), index);
    glp_set_col_name(p.get(), j, name.c_str());
    if (count == 1) {
      glp_set_col_kind(p.get(), j, GLP_BV);
    } else {
      glp_set_col_kind(p.get(), j, GLP_IV);
      glp_set_col_bnds(p.get(), j, GLP_DB, 0.0, count);
    }
    glp_set_obj_coef(p.get(), j, c.time_ms());
    ia.push_back(workspace_row), ja.push_back(j), ar.push_back(c.workspace_bytes() / kBytesPerMiB);
    ia.push_back(2 + col.kernel_class), ja.push_back(j), ar.push_back(1.0);
  }
  glp_load_matrix(p.get(), static_cast<int>(ia.size()) - 1, ia.data(), ja.data(), ar.data());
  return p;
}

int count_unmerged_columns(const std::vector<KernelClass>& classes) {
  int n = 0;
  for (const KernelClass& kc : classes)
    n += static_cast<int>(kc.members.size() * kc.configuration.front().size());
  return n;
}

std::string intopt_failure(int code) {
  switch (code) {
    case GLP_EBOUND: return "a variable has incorrect bounds";
    case GLP_EROOT: return "no optimal basis for the root LP relaxation";
    case GLP_ENOPFS: return "the problem has no primal feasible solution";
    case GLP_ENODFS: return "the LP relaxation has no dual feasible solution";
    case GLP_EFAIL: return "the solver failed";
    case GLP_EMIPGAP: return "the MIP gap tolerance was reached";
    case GLP_ETMLIM: return "the time limit was reached";
    case GLP_ESTOP: return "the search was stopped";
    default: return fmt::format("glp_intopt returned {}", code);
  }
}

}  // namespace

std::vector<std::vector<int>> wd_kernel_classes(const std::vector<WdKernel>& kernels,
                                                int64_t total_workspace_bytes) {
  std::vector<std::vector<int>> out;
  for (KernelClass& kc : group_kernels(kernels, total_workspace_bytes, /*merge=*/true))
    out.push_back(std::move(kc.members));
  return out;
}

Result<WdSolution> optimize_wd(const std::vector<WdKernel>& kernels, const WdOptions& options) {
  if (Status s = check_feasible(kernels, options.total_workspace_bytes); !s) return s.error();
  TerminalOutput terminal(options.verbose);
  WdSolution solution;
  if (kernels.empty()) return solution;
  const std::vector<KernelClass> classes =
      group_kernels(kernels, options.total_workspace_bytes, options.merge_identical_kernels);

  // GLPK meets the workspace row to a relative tolerance; should the answer
  // overshoot the pool by a few bytes, solve again with the pool reduced by
  // the overshoot.
  double pool_mib = options.total_workspace_bytes / kBytesPerMiB;
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::vector<Column> columns;
    Problem p = build_problem(kernels, classes, pool_mib, columns);
    solution.rows = glp_get_num_rows(p.get());
    solution.kernel_classes = static_cast<int>(classes.size());
    solution.binary_variables = 0;
    solution.integer_variables = 0;
    for (const Column& col : columns)
      (classes[col.kernel_class].members.size() == 1 ? solution.binary_variables
                                                      : solution.integer_variables)++;
    solution.unmerged_binary_variables = count_unmerged_columns(classes);

    glp_iocp parm;
    glp_init_iocp(&parm);
    parm.presolve = GLP_ON;
    // Branching: measured on the dumped ResNet-50 and AlexNet problems
    // (bench/microbatch_bench --dump-lp), GLPK's default (Driebeck-Tomlin)
    // is the most even on the merged ILP (0.1-0.15 s where pseudo-costs took
    // 0.3-0.7 s); on the unmerged 0-1 ILP pseudo-costs need about half the
    // default's time.
    if (!options.merge_identical_kernels) parm.br_tech = GLP_BR_PCH;
    parm.msg_lev = options.verbose ? GLP_MSG_ALL : GLP_MSG_OFF;
    const auto start = std::chrono::steady_clock::now();
    const int code = glp_intopt(p.get(), &parm);
    solution.solve_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (code != 0 && code != GLP_ENOPFS)
      return Error{{}, fmt::format("GLPK could not solve the WD problem ({} kernels, pool {}): {}",
                                   kernels.size(), format_bytes_exact(options.total_workspace_bytes),
                                   intopt_failure(code))};
    const int status = glp_mip_status(p.get());
    if (code == GLP_ENOPFS || status == GLP_NOFEAS)
      return Error{{}, fmt::format("GLPK found no feasible WD solution for a pool of {}; the "
                                   "leanest configurations need {} in total",
                                   format_bytes_exact(options.total_workspace_bytes),
                                   format_bytes_exact(least_total_workspace_bytes(kernels)))};
    if (status != GLP_OPT)
      return Error{{}, fmt::format("GLPK ended without an optimal WD solution (status {})", status)};

    // Back to one configuration per kernel: within a class, members in
    // ascending index take the chosen configurations in ascending index.
    solution.chosen.assign(kernels.size(), -1);
    std::vector<int> next_member(classes.size(), 0);
    for (int j = 1; j <= static_cast<int>(columns.size()); ++j) {
      const Column& col = columns[j - 1];
      const KernelClass& kc = classes[col.kernel_class];
      const double value = glp_mip_col_val(p.get(), j);
      const long long count = std::llround(value);
      int& next = next_member[col.kernel_class];
      if (count < 0 || next + count > static_cast<long long>(kc.members.size()))
        return Error{{}, fmt::format("GLPK gave {} kernels of {}'s class (of {}) configuration {}",
                                     value, kernels[kc.members.front()].name, kc.members.size(),
                                     kc.configuration.front()[col.configuration])};
      for (long long i = 0; i < count; ++i, ++next)
        solution.chosen[kc.members[next]] = kc.configuration[next][col.configuration];
    }
    solution.total_time_ms = 0;
    solution.total_workspace_bytes = 0;
    for (size_t k = 0; k < kernels.size(); ++k) {
      if (solution.chosen[k] == -1)
        return Error{{}, fmt::format("GLPK chose no configuration of kernel {}", kernels[k].name)};
      const Configuration& c = kernels[k].configurations[solution.chosen[k]];
      solution.total_time_ms += c.time_ms();
      solution.total_workspace_bytes += c.workspace_bytes();
    }
    const int64_t overshoot_bytes = solution.total_workspace_bytes - options.total_workspace_bytes;
    if (overshoot_bytes <= 0) return solution;
    pool_mib -= (overshoot_bytes + 1) / kBytesPerMiB;
  }
  return Error{{}, fmt::format("GLPK's WD solution kept exceeding the pool of {} by a rounding "
                               "margin", format_bytes_exact(options.total_workspace_bytes))};
}

Status dump_wd_lp(const std::vector<WdKernel>& kernels, int64_t total_workspace_bytes,
                  const std::string& path) {
  return dump_wd_lp(kernels, WdOptions{total_workspace_bytes}, path);
}

Status dump_wd_lp(const std::vector<WdKernel>& kernels, const WdOptions& options,
                  const std::string& path) {
  std::vector<Column> columns;
  const std::vector<KernelClass> classes =
      group_kernels(kernels, options.total_workspace_bytes, options.merge_identical_kernels);
  Problem p = build_problem(kernels, classes, options.total_workspace_bytes / kBytesPerMiB, columns);
  TerminalOutput terminal(false);
  const std::string temporary = fmt::format("{}.tmp.{}", path, ::getpid());
  if (glp_write_lp(p.get(), nullptr, temporary.c_str()) != 0) {
    std::remove(temporary.c_str());
    return Error{{path, 0, 0}, "cannot write the WD problem in CPLEX LP format"};
  }
  std::error_code ec;
  std::filesystem::rename(temporary, path, ec);
  if (ec) {
    std::remove(temporary.c_str());
    return Error{{path, 0, 0}, "cannot write the WD problem: " + ec.message()};
  }
  return Ok{};
}

}  // namespace mplan::microbatch
