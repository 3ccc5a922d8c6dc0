#include "codegen/target.h"

#include <fmt/format.h>

#include <algorithm>

#include "profiler/conv_algorithms.h"
#include "runtime/ops.h"

namespace mplan::codegen {
namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

// The family of an algorithm name of any cost model: what it computes with.
enum class Family { direct, gemm, winograd, fft, unknown };

Family family_of(const std::string& name) {
  const std::string n = lower(name);
  if (n.find("winograd") != std::string::npos) return Family::winograd;
  if (n.find("fft") != std::string::npos) return Family::fft;
  if (n == "direct" || n == "implicit_gemm" || n == "algo_0") return Family::direct;
  if (n.find("gemm") != std::string::npos || n == "algo_1" || n == "algo_3") return Family::gemm;
  // cuDNN's graph-API engine configurations (runtime/cuda/conv_graph.h): GEMM kernels, mostly.
  if (rt::graph_algorithm_id(n) >= 0) return Family::gemm;
  return Family::unknown;
}

// ---- the CPU runtime's algorithms -------------------------------------------------------

const char* cpu_direction_name(rt::ConvDirection d) {
  switch (d) {
    case rt::ConvDirection::forward: return "forward";
    case rt::ConvDirection::backward_data: return "backward-data";
    case rt::ConvDirection::backward_filter: return "backward-filter";
  }
  return "?";
}

AlgorithmChoice cpu_algorithm(const std::string& planned, rt::ConvDirection direction, const rt::ConvShape& shape,
                              int64_t workspace_bytes) {
  const rt::Context inline_context;
  auto find = [&](const std::string& name) -> int {
    for (rt::ConvAlgoId a = 0; a < rt::conv_algorithm_count(direction); ++a)
      if (name == rt::conv_algorithm_name(direction, a)) return a;
    return -1;
  };
  auto fits = [&](int id) {
    if (id < 0) return false;
    const int64_t need = rt::conv_workspace_bytes(inline_context, direction, shape, id);
    return need >= 0 && need <= workspace_bytes;
  };
  auto choose = [&](int id, std::string reason) {
    return AlgorithmChoice{id, rt::conv_algorithm_name(direction, id), std::move(reason)};
  };
  // A CPU name (a plan made with a CPU profile) runs when it supports the
  // shape within the planned workspace; a cuDNN name (a plan made for a GPU)
  // runs as the CPU algorithm of the same family. Otherwise the closest that fits.
  const int own = find(planned);
  if (fits(own)) return choose(own, "");
  std::vector<std::string> order;
  switch (family_of(planned)) {
    case Family::winograd: order = {"winograd", "gemm", "direct"}; break;
    case Family::gemm:
    case Family::fft: order = {"gemm", "direct"}; break;
    case Family::direct:
    case Family::unknown: order = {"direct"}; break;
  }
  const std::string why_not =
      own >= 0 ? fmt::format("'{}' does not run this {} convolution within the planned {} bytes of workspace", planned,
                             cpu_direction_name(direction), workspace_bytes)
               : fmt::format("the CPU runtime has no '{}'", planned);
  for (const std::string& name : order) {
    const int id = find(name);
    if (!fits(id)) continue;
    const bool same_family = own < 0 && family_of(name) == family_of(planned) && family_of(planned) != Family::unknown;
    return choose(id, same_family ? fmt::format("{}; its {} is the same method", why_not, name)
                                  : fmt::format("{}; '{}' is the closest that fits", why_not, name));
  }
  return choose(find("direct"), why_not);
}

// ---- cuDNN's algorithms -----------------------------------------------------------------

mplan::ConvDirection profiler_direction(rt::ConvDirection d) {
  switch (d) {
    case rt::ConvDirection::forward: return mplan::ConvDirection::forward;
    case rt::ConvDirection::backward_data: return mplan::ConvDirection::backward_data;
    case rt::ConvDirection::backward_filter: return mplan::ConvDirection::backward_filter;
  }
  return mplan::ConvDirection::forward;
}

// The analytic model's description of a convolution (for cuDNN's support rules).
mplan::ConvShape analytic_shape(const rt::ConvShape& s) {
  mplan::ConvShape c;
  c.C = s.c;
  c.H = s.h;
  c.W = s.w;
  c.K = s.k;
  c.R = s.r;
  c.S = s.s;
  c.stride_h = s.stride_h;
  c.stride_w = s.stride_w;
  c.pad_h = s.pad_h;
  c.pad_w = s.pad_w;
  c.groups = s.groups;
  c.dilation_h = s.dilation_h;
  c.dilation_w = s.dilation_w;
  c.P = s.p();
  c.Q = s.q();
  return c;
}

AlgorithmChoice cuda_algorithm(const std::string& planned, rt::ConvDirection direction, const rt::ConvShape& shape) {
  // A graph-API engine configuration of a measured profile: the runtime
  // builds it for the same shape (runtime/cuda/conv_graph.h).
  if (const rt::ConvAlgoId graph = rt::graph_algorithm_id(planned); graph >= 0)
    return AlgorithmChoice{graph, planned, ""};
  const mplan::ConvDirection d = profiler_direction(direction);
  const int id = cudnn_algorithm_id(d, planned);
  std::string why_not = fmt::format("cuDNN has no '{}'", planned);
  if (id >= 0) {
    const std::optional<std::string> unsupported = conv_unsupported_reason(d, planned, analytic_shape(shape));
    if (!unsupported) return AlgorithmChoice{id, planned, ""};
    why_not = *unsupported;
  }
  // Another cost model's name (a CPU profile's): cuDNN's algorithm of the same
  // method where it supports the shape, else the one that needs no workspace.
  const bool forward = direction == rt::ConvDirection::forward;
  const std::string plain = forward ? "implicit_gemm" : "algo_0";
  std::vector<std::string> order;
  switch (family_of(planned)) {
    case Family::winograd: order = {"winograd_nonfused", "winograd"}; break;
    case Family::gemm: order = {forward ? "gemm" : "algo_1"}; break;
    case Family::fft: order = {"fft", "fft_tiling"}; break;
    case Family::direct:
    case Family::unknown: break;
  }
  order.push_back(plain);
  for (const std::string& name : order) {
    if (!conv_supported(d, name, analytic_shape(shape))) continue;
    const bool same = family_of(name) == family_of(planned) && family_of(planned) != Family::unknown;
    return AlgorithmChoice{cudnn_algorithm_id(d, name), name,
                           fmt::format("{}; '{}' is {}", why_not, name, same ? "the same method" : "the closest")};
  }
  return AlgorithmChoice{cudnn_algorithm_id(d, plain), plain, why_not};
}

}  // namespace

const char* target_name(Target target) { return target == Target::cuda ? "cuda" : "cpu"; }

bool parse_target(const std::string& name, Target* target) {
  if (name == "cpu") {
    *target = Target::cpu;
  } else if (name == "cuda") {
    *target = Target::cuda;
  } else {
    return false;
  }
  return true;
}

std::string cost_model_mismatch(const std::string& cost_model, Target target) {
  const std::string d = lower(cost_model);
  const bool cpu_model = d.find("(cpu") != std::string::npos || d.find("cpu,") != std::string::npos ||
                         d.rfind("measured (cpu", 0) == 0 || d.find("backend cpu") != std::string::npos;
  if (target == Target::cpu && !cpu_model)
    return fmt::format("the plan was made with the cost model '{}', not with one measured on the CPU backend: its "
                       "times and conv algorithms are another device's, and the program's step time will not match "
                       "the plan's (profile with `mplan profile --backend cpu` and compile with --profile)",
                       cost_model);
  if (target == Target::cuda && cpu_model)
    return fmt::format("the plan was made with the cost model '{}', measured on the CPU backend, for a CUDA program: "
                       "its times and conv algorithms are the CPU's (profile the GPU with `mplan profile --backend "
                       "cuda --jobs` and compile with --profile)",
                       cost_model);
  return "";
}

AlgorithmChoice target_algorithm(Target target, const std::string& planned, rt::ConvDirection direction,
                                 const rt::ConvShape& shape, int64_t workspace_bytes) {
  if (target == Target::cuda) return cuda_algorithm(planned, direction, shape);
  return cpu_algorithm(planned, direction, shape, workspace_bytes);
}

}  // namespace mplan::codegen
