#pragma once
// What several entries of the op table share: field and shape checks with the
// format's messages, the work of streaming kernels, and building kernel
// arguments (frontend-internal; each op's entry is in ops/<op>.cpp, the
// element-wise activations' from ops/activation.h).

#include <fmt/format.h>

#include <string>
#include <utility>
#include <vector>

#include "ops/op_table.h"
#include "core/limits.h"
#include "core/yaml_reader.h"

namespace mplan::ops {

inline ShapeOrMessage failure(std::string message) { return {{}, std::move(message)}; }

// "'conv1'" or "#2": how messages name input k.
inline std::string describe_input(const ShapeInputs& in, size_t k) {
  return k < in.names.size() ? fmt::format("'{}'", in.names[k]) : fmt::format("#{}", k + 1);
}

// "out must be at least 1, got 0"; "" if the value is in range.
std::string check_range(const char* field, int64_t value, int64_t low);
// The range checks of a conv or pool window; "" if fine.
std::string check_window(const Window& w);
// "conv needs a [C, H, W] input but its input 'x' is [10]"; "" if the rank fits.
std::string need_rank(const Layer& layer, const ShapeInputs& in, size_t rank, const char* form);
// Whether a tensor of these dimensions stays within kMaxElements.
bool fits_elements(std::initializer_list<int64_t> dims);

// One spatial dimension of a conv or pool output (PyTorch, cuDNN): floor, or
// ceil with the last window starting inside the input or the left padding.
int64_t window_output(int64_t in, int64_t kernel, int64_t stride, int64_t pad, bool ceil_mode);
// The [channels, P, Q] output of a window over a [C, H, W] input, or why the
// kernel does not fit the padded input.
ShapeOrMessage spatial_output(const Window& w, const Shape& in, int64_t channels, bool ceil_mode);

// [C, H, W] -> (C, H*W); [N] -> (N, 1).
std::pair<int64_t, int64_t> channels_and_hw(const Shape& s);
// Elements of a per-sample shape times b, as a double (work estimates).
inline double elements(const Shape& s, int64_t b) { return static_cast<double>(s.elements()) * b; }

inline constexpr double kFloatBytes = 4;
// A streaming kernel: bytes read and written, little arithmetic.
inline WorkEstimate streaming(double bytes, int kernels = 1, double flops = 0) {
  return WorkEstimate{flops, bytes, bytes / kFloatBytes, WorkClass::streaming, kernels};
}

// The first-writer rule of a task's input gradient k: the TDFG's first
// consumer writes dX, later ones add (InvocationContext).
inline bool accumulates(const InvocationContext& ctx, size_t k) {
  return k < ctx.accumulates_input_gradient.size() && ctx.accumulates_input_gradient[k];
}
inline bool writes_gradient(const InvocationContext& ctx, size_t k) {
  return k < ctx.writes_input_gradient.size() && ctx.writes_input_gradient[k];
}

// Calls `emit(k, accumulate)` once per input whose gradient this BP1 task
// writes; an input listed twice gets both contributions (the second adds).
template <typename Emit>
void for_each_input_gradient(const OpTask& task, const InvocationContext& ctx, Emit emit) {
  const auto& inputs = task.layer.inputs;
  std::vector<LayerId> done;
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!writes_gradient(ctx, k)) continue;
    const bool seen = std::find(done.begin(), done.end(), inputs[k]) != done.end();
    emit(static_cast<int>(k), seen || accumulates(ctx, k));
    done.push_back(inputs[k]);
  }
}

// Argument shortcuts.
inline rt::Arg integer(int64_t v) { return rt::Arg::of(v); }
inline rt::Arg real(double v) { return rt::Arg::of_real(v); }
inline rt::Arg flag(bool v) { return rt::Arg::of_flag(v); }
inline rt::Arg null_pointer() { return rt::Arg::null(); }

}  // namespace mplan::ops
