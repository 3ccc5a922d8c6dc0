#include "planner/microbatch/wd_optimizer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <utility>

#include <fmt/format.h>
#include <glpk.h>
#include <unistd.h>

#include "frontend/bytes.h"

namespace mplan::microbatch {
namespace {

// GLPK's rows and columns hold workspaces in MiB, so that the workspace row's
// coefficients are of the same order as the times; the answer is checked
// again in bytes.
constexpr double kBytesPerMiB = 1024.0 * 1024.0;
// GLPK limits names to 255 characters.
constexpr size_t kMaxKernelNameChars = 200;

struct ProblemDeleter {
  void operator()(glp_prob* p) const { glp_delete_prob(p); }
};
using Problem = std::unique_ptr<glp_prob, ProblemDeleter>;

// Turns GLPK's terminal output on or off for one scope, then restores it.
class TerminalOutput {
 public:
  explicit TerminalOutput(bool on) : previous_(glp_term_out(on ? GLP_ON : GLP_OFF)) {}
  ~TerminalOutput() { glp_term_out(previous_); }
  TerminalOutput(const TerminalOutput&) = delete;
  TerminalOutput& operator=(const TerminalOutput&) = delete;

 private:
  int previous_;
};

// One ILP column: configuration `configuration` of kernel `kernel`.
struct Column {
  int kernel = 0;
  int configuration = 0;
};

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

// Builds Eq. 1-4 with readable names; configurations that alone exceed the
// pool get no column (x would be 0 in every feasible solution).
Problem build_problem(const std::vector<WdKernel>& kernels, double pool_mib,
                      int64_t total_workspace_bytes, std::vector<Column>& columns) {
  Problem p(glp_create_prob());
  glp_set_prob_name(p.get(), "mu_cuDNN_WD");
  glp_set_obj_name(p.get(), "time_ms");
  glp_set_obj_dir(p.get(), GLP_MIN);

  const int n_kernels = static_cast<int>(kernels.size());
  glp_add_rows(p.get(), n_kernels + 1);
  const int workspace_row = 1;
  glp_set_row_name(p.get(), workspace_row, "workspace");
  glp_set_row_bnds(p.get(), workspace_row, GLP_UP, 0.0, pool_mib);
  for (int k = 0; k < n_kernels; ++k) {
    const std::string name = "kernel[" + short_name(kernels[k].name) + "]";
    glp_set_row_name(p.get(), 2 + k, name.c_str());
    glp_set_row_bnds(p.get(), 2 + k, GLP_FX, 1.0, 1.0);
  }

  columns.clear();
  for (int k = 0; k < n_kernels; ++k)
    for (int c = 0; c < static_cast<int>(kernels[k].configurations.size()); ++c)
      if (kernels[k].configurations[c].workspace_bytes() <= total_workspace_bytes)
        columns.push_back({k, c});
  if (columns.empty()) return p;
  glp_add_cols(p.get(), static_cast<int>(columns.size()));
  // GLPK's sparse arrays count from 1.
  std::vector<int> ia(1), ja(1);
  std::vector<double> ar(1);
  for (int j = 1; j <= static_cast<int>(columns.size()); ++j) {
    const Column& col = columns[j - 1];
    const Configuration& c = kernels[col.kernel].configurations[col.configuration];
    const std::string name =
        fmt::format("x[{}][{}]", short_name(kernels[col.kernel].name), col.configuration);
    glp_set_col_name(p.get(), j, name.c_str());
    glp_set_col_kind(p.get(), j, GLP_BV);
    glp_set_obj_coef(p.get(), j, c.time_ms());
    ia.push_back(workspace_row), ja.push_back(j), ar.push_back(c.workspace_bytes() / kBytesPerMiB);
    ia.push_back(2 + col.kernel), ja.push_back(j), ar.push_back(1.0);
  }
  glp_load_matrix(p.get(), static_cast<int>(ia.size()) - 1, ia.data(), ja.data(), ar.data());
  return p;
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

Result<WdSolution> optimize_wd(const std::vector<WdKernel>& kernels, const WdOptions& options) {
  if (Status s = check_feasible(kernels, options.total_workspace_bytes); !s) return s.error();
  TerminalOutput terminal(options.verbose);
  WdSolution solution;
  if (kernels.empty()) return solution;

  // GLPK meets the workspace row to a relative tolerance; should the answer
  // overshoot the pool by a few bytes, solve again with the pool reduced by
  // the overshoot.
  double pool_mib = options.total_workspace_bytes / kBytesPerMiB;
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::vector<Column> columns;
    Problem p = build_problem(kernels, pool_mib, options.total_workspace_bytes, columns);
    solution.binary_variables = glp_get_num_cols(p.get());
    solution.rows = glp_get_num_rows(p.get());

    glp_iocp parm;
    glp_init_iocp(&parm);
    parm.presolve = GLP_ON;
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

    solution.chosen.assign(kernels.size(), -1);
    for (int j = 1; j <= static_cast<int>(columns.size()); ++j) {
      if (glp_mip_col_val(p.get(), j) < 0.5) continue;
      const Column& col = columns[j - 1];
      if (solution.chosen[col.kernel] != -1)
        return Error{{}, fmt::format("GLPK chose two configurations of kernel {}",
                                     kernels[col.kernel].name)};
      solution.chosen[col.kernel] = col.configuration;
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
  std::vector<Column> columns;
  Problem p = build_problem(kernels, total_workspace_bytes / kBytesPerMiB, total_workspace_bytes,
                            columns);
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
