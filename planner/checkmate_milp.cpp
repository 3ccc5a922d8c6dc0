#include "planner/checkmate_milp.h"

#include <glpk.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "planner/glpk_problem.h"

namespace mplan {
namespace {

// A linear expression over GLPK columns plus a constant.
struct Expr {
  std::map<int, double> terms;
  double constant = 0;
  Expr& add(int column, double coef) {
    if (column > 0) terms[column] += coef;
    return *this;
  }
};

// The MILP's columns and rows (1-based, as GLPK numbers them). R, S and FREE
// are binary; a missing variable is a constant (R[t][t] = 1, R of a node
// that may not run again = 0, S[0][i] = 0).
class Model {
 public:
  Model(const RematGraph& g, double budget) : g_(g), n_(static_cast<int32_t>(g.compute_ms.size())), p_(glp_create_prob()) {
    glp_set_obj_dir(p_.get(), GLP_MIN);
    successors_.resize(n_);
    predecessor_edges_.resize(n_);
    for (size_t e = 0; e < g.edges.size(); ++e) {
      successors_[g.edges[e].first].push_back(g.edges[e].second);
      predecessor_edges_[g.edges[e].second].push_back(static_cast<int32_t>(e));
    }
    for (auto& s : successors_) std::sort(s.begin(), s.end());
    add_columns(budget);
    add_rows();
  }

  glp_prob* problem() { return p_.get(); }
  int binaries() const { return binaries_; }
  // R[t][i] as a column (0: the constant r_constant(t, i)).
  int r(int32_t t, int32_t i) const { return r_[index(t, i)]; }
  int s(int32_t t, int32_t i) const { return t < n_ && i < t ? s_[index(t, i)] : 0; }

 private:
  size_t index(int32_t t, int32_t i) const { return static_cast<size_t>(t) * n_ + i; }
  double r_constant(int32_t t, int32_t i) const { return i == t ? 1.0 : 0.0; }
  // R[t][i] into an expression.
  void add_r(Expr& e, int32_t t, int32_t i, double coef) const {
    if (r(t, i) > 0) e.add(r(t, i), coef);
    else e.constant += coef * r_constant(t, i);
  }

  int binary(const std::string& name, double cost) {
    const int j = glp_add_cols(p_.get(), 1);
    glp_set_col_name(p_.get(), j, name.c_str());
    glp_set_col_kind(p_.get(), j, GLP_BV);
    glp_set_obj_coef(p_.get(), j, cost);
    ++binaries_;
    return j;
  }

  void add_columns(double budget) {
    r_.assign(static_cast<size_t>(n_) * n_, 0);
    s_.assign(static_cast<size_t>(n_) * n_, 0);
    u_.assign(static_cast<size_t>(n_) * n_, 0);
    double fixed_ms = 0;
    for (int32_t t = 0; t < n_; ++t) {
      fixed_ms += g_.compute_ms[t];
      for (int32_t i = 0; i < t; ++i) {
        if (g_.recomputable[i]) r_[index(t, i)] = binary(fmt::format("R[{},{}]", t, i), g_.compute_ms[i]);
        s_[index(t, i)] = binary(fmt::format("S[{},{}]", t, i), 0.0);
      }
      for (int32_t k = 0; k <= t; ++k) {
        const int j = glp_add_cols(p_.get(), 1);
        glp_set_col_name(p_.get(), j, fmt::format("U[{},{}]", t, k).c_str());
        glp_set_col_bnds(p_.get(), j, GLP_DB, 0.0, budget);
        u_[index(t, k)] = j;
      }
    }
    glp_set_obj_coef(p_.get(), 0, fixed_ms);
    // FREE[t][e] for edges (i, k) with k <= t.
    free_.assign(static_cast<size_t>(n_) * g_.edges.size(), 0);
    for (int32_t t = 0; t < n_; ++t)
      for (size_t e = 0; e < g_.edges.size(); ++e)
        if (g_.edges[e].second <= t) free_[t * g_.edges.size() + e] = binary(fmt::format("FREE[{},{}]", t, e), 0.0);
  }

  // lo <= e <= hi (either may be infinite).
  void row(const Expr& e, double lo, double hi) {
    const int i = glp_add_rows(p_.get(), 1);
    const double l = lo - e.constant, h = hi - e.constant;
    const int type = std::isinf(lo) && std::isinf(hi) ? GLP_FR
                     : std::isinf(lo)                ? GLP_UP
                     : std::isinf(hi)                ? GLP_LO
                     : lo == hi                      ? GLP_FX
                                                     : GLP_DB;
    glp_set_row_bnds(p_.get(), i, type, std::isinf(lo) ? 0.0 : l, std::isinf(hi) ? 0.0 : h);
    std::vector<int> columns(1);
    std::vector<double> values(1);
    for (const auto& [c, v] : e.terms) {
      if (v == 0) continue;
      columns.push_back(c);
      values.push_back(v);
    }
    glp_set_mat_row(p_.get(), i, static_cast<int>(columns.size()) - 1, columns.data(), values.data());
  }

  void add_rows() {
    const double inf = INFINITY;
    // A kept output was kept or computed in the stage before (§4.1, Eq. 2).
    for (int32_t t = 0; t + 1 < n_; ++t)
      for (int32_t i = 0; i < t; ++i) {
        Expr e;
        e.add(s(t + 1, i), 1).add(s(t, i), -1);
        add_r(e, t, i, -1);
        row(e, -inf, 0);
      }
    // A computation's inputs are kept or computed in its stage (Eq. 1).
    for (const auto& [u, v] : g_.edges)
      for (int32_t t = v; t < n_; ++t) {
        if (t > v && !g_.recomputable[v]) continue;  // R[t][v] = 0: nothing to ask
        Expr e;
        add_r(e, t, v, 1);
        add_r(e, t, u, -1);
        e.add(s(t, u), -1);
        row(e, -inf, 0);
      }
    // FREE[t][(i, k)] = 1 exactly when k runs in stage t, i is not kept into
    // stage t+1 and no later user of i runs in stage t (§4.4, Eq. 8-9).
    for (int32_t t = 0; t < n_; ++t)
      for (size_t edge = 0; edge < g_.edges.size(); ++edge) {
        const auto [i, k] = g_.edges[edge];
        if (k > t) continue;
        Expr hazards;
        hazards.constant = 1;
        add_r(hazards, t, k, -1);
        double most = 1;
        if (t + 1 < n_) {
          hazards.add(s(t + 1, i), 1);
          most += 1;
        }
        for (int32_t j : successors_[i])
          if (j > k && j <= t) {
            add_r(hazards, t, j, 1);
            most += 1;
          }
        const int f = free_[t * g_.edges.size() + edge];
        Expr lower = hazards;  // 1 - FREE <= hazards
        lower.add(f, 1);
        row(lower, 1, inf);
        Expr upper = hazards;  // most * (1 - FREE) >= hazards
        upper.add(f, most);
        row(upper, -inf, most);
      }
    // Memory: U[t][0] holds what stage t starts with and node 0 if computed;
    // each next node adds its output and frees what its predecessor's users
    // are done with (Eq. 4-7). U is bounded by the budget.
    for (int32_t t = 0; t < n_; ++t) {
      Expr start;
      start.add(u_[index(t, 0)], 1);
      add_r(start, t, 0, -g_.output_bytes[0]);
      for (int32_t i = 0; i < t; ++i) start.add(s(t, i), -g_.output_bytes[i]);
      row(start, 0, 0);
      for (int32_t k = 0; k < t; ++k) {
        Expr next;
        next.add(u_[index(t, k + 1)], 1).add(u_[index(t, k)], -1);
        add_r(next, t, k + 1, -g_.output_bytes[k + 1]);
        for (int32_t edge : predecessor_edges_[k])
          next.add(free_[t * g_.edges.size() + edge], g_.output_bytes[g_.edges[edge].first]);
        row(next, 0, 0);
      }
    }
  }

  const RematGraph& g_;
  int32_t n_;
  GlpkProblem p_;
  int binaries_ = 0;
  std::vector<std::vector<int32_t>> successors_, predecessor_edges_;
  std::vector<int> r_, s_, u_, free_;
};

// Every output kept from its stage to its last user's and nothing run twice:
// the optimum whenever it fits, since every node runs at least once. Its
// peak is the MILP's U[t][t] at the stage that holds the most.
RematSchedule keep_everything(const RematGraph& g) {
  const int32_t n = static_cast<int32_t>(g.compute_ms.size());
  std::vector<int32_t> last_user(n, -1);
  for (const auto& [u, v] : g.edges) last_user[u] = std::max(last_user[u], v);
  RematSchedule out;
  out.kept.assign(n, std::vector<uint8_t>(n, 0));
  out.computed.assign(n, std::vector<uint8_t>(n, 0));
  double peak = 0;
  for (int32_t t = 0; t < n; ++t) {
    out.computed[t][t] = 1;
    out.total_ms += g.compute_ms[t];
    double held = g.output_bytes[t];
    for (int32_t i = 0; i < t; ++i)
      if (last_user[i] >= t) {
        out.kept[t][i] = 1;
        held += g.output_bytes[i];
      }
    peak = std::max(peak, held);
  }
  out.peak_bytes = peak;
  return out;
}

}  // namespace

RematSchedule solve_checkmate(const RematGraph& graph, const RematOptions& options) {
  RematSchedule out;
  const int32_t n = static_cast<int32_t>(graph.compute_ms.size());
  if (n == 0) {
    out.solved = out.optimal = true;
    return out;
  }
  if (n > options.max_nodes) {
    out.why = fmt::format("{} tasks: beyond the {} the MILP is attempted for (its binaries grow as n^2)", n,
                          options.max_nodes);
    return out;
  }
  RematSchedule everything = keep_everything(graph);
  if (everything.peak_bytes <= options.budget_bytes) {
    everything.solved = everything.optimal = true;
    return everything;
  }
  // Bytes in units of the budget: coefficients of the order of 1.
  const double unit = options.budget_bytes > 0 ? options.budget_bytes : 1.0;
  RematGraph scaled = graph;
  for (double& b : scaled.output_bytes) b /= unit;
  const GlpkTerminalOutput quiet(false);
  Model model(scaled, options.budget_bytes / unit);
  out.binaries = model.binaries();
  out.rows = glp_get_num_rows(model.problem());
  glp_iocp parm;
  glp_init_iocp(&parm);
  parm.presolve = GLP_ON;
  parm.fp_heur = GLP_ON;  // the feasibility pump finds a first schedule sooner
  parm.msg_lev = GLP_MSG_OFF;
  parm.tm_lim = static_cast<int>(std::min(options.time_limit_s, 3600.0) * 1000);
  const auto start = std::chrono::steady_clock::now();
  const int code = glp_intopt(model.problem(), &parm);
  out.solve_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const int status = glp_mip_status(model.problem());
  if (code == GLP_ENOPFS || status == GLP_NOFEAS) {
    out.why = "no schedule of recomputations fits the budget";
    return out;
  }
  if (status != GLP_OPT && status != GLP_FEAS) {
    out.why = code == GLP_ETMLIM ? fmt::format("GLPK found no schedule within {} s", options.time_limit_s)
                                 : fmt::format("GLPK stopped (code {}, status {})", code, status);
    return out;
  }
  out.solved = true;
  out.optimal = status == GLP_OPT;
  out.total_ms = glp_mip_obj_val(model.problem());
  out.kept.assign(n, std::vector<uint8_t>(n, 0));
  out.computed.assign(n, std::vector<uint8_t>(n, 0));
  for (int32_t t = 0; t < n; ++t) {
    out.computed[t][t] = 1;
    for (int32_t i = 0; i < t; ++i) {
      if (model.r(t, i) > 0) out.computed[t][i] = glp_mip_col_val(model.problem(), model.r(t, i)) > 0.5;
      out.kept[t][i] = glp_mip_col_val(model.problem(), model.s(t, i)) > 0.5;
    }
  }
  return out;
}

}  // namespace mplan
