// The CPU backend of runtime/ops_sixteen_bit.h, the reference: each 16-bit
// kernel is the casts around the float kernel that a 16-bit program's
// bracketed call makes (runtime/ops_casts.h, ops/sixteen_bit_casts.h),
// enqueued on the same stream: the operands widened exactly into float
// scratch, the float kernel, each result rounded to the type. So a program
// that calls these computes bit for bit what the bracketed one does.

#include <memory>
#include <vector>

#include "runtime/check.h"
#include "runtime/cpu/stream.h"
#include "runtime/ops.h"

namespace mplan::rt {
namespace {

// Float scratch for one call's operands, kept alive until the stream has run
// the call (released by a last enqueued task).
class Widened {
 public:
  Widened(const Context& ctx, int64_t type) : ctx_(ctx), type_(type) {
    MPLAN_RT_CHECK(type == static_cast<int64_t>(StorageType::bfloat16) ||
                       type == static_cast<int64_t>(StorageType::float16),
                   "a 16-bit kernel's type that is neither bfloat16 nor float16");
  }
  Widened(const Widened&) = delete;
  Widened& operator=(const Widened&) = delete;
  ~Widened() {
    cpu::launch(ctx_, [keep = std::move(buffers_)] {});
  }

  // The `count` 16-bit values at src, widened (nullptr for a null src).
  const float* in(const uint8_t* src, int64_t count) {
    if (src == nullptr) return nullptr;
    float* scratch = make(count);
    cast_to_float(ctx_, src, scratch, count, type_, type_);
    return scratch;
  }
  // Scratch of `count` zeros for a result: `out` rounds it into dst.
  float* zeros(int64_t count) {
    float* scratch = make(count);
    zero_floats(ctx_, scratch, count);
    return scratch;
  }
  void out(const float* scratch, uint8_t* dst, int64_t count) {
    cast_from_float(ctx_, scratch, dst, count, type_, type_, false);
  }

 private:
  float* make(int64_t count) {
    MPLAN_RT_CHECK(count >= 0, "a 16-bit operand of a negative size");
    buffers_.push_back(std::make_shared<std::vector<float>>(static_cast<size_t>(count)));
    return buffers_.back()->data();
  }
  const Context& ctx_;
  const int64_t type_;
  std::vector<std::shared_ptr<std::vector<float>>> buffers_;
};

}  // namespace

// The float convolution's workspace: the 16-bit kernel runs it between casts.
int64_t conv_workspace_bytes_16(const Context& ctx, ConvDirection direction, const ConvShape& shape, ConvAlgoId algo,
                                int64_t type) {
  MPLAN_RT_CHECK(type == static_cast<int64_t>(StorageType::bfloat16) ||
                     type == static_cast<int64_t>(StorageType::float16),
                 "a 16-bit convolution's type that is neither bfloat16 nor float16");
  return conv_workspace_bytes(ctx, direction, shape, algo);
}

void conv_forward_16(const Context& ctx, const ConvShape& shape, ConvAlgoId algo, const uint8_t* x,
                     const uint8_t* w, const uint8_t* bias, uint8_t* y, void* workspace, int64_t workspace_bytes,
                     int64_t type) {
  MPLAN_RT_CHECK(shape.valid(), "invalid forward convolution shape");
  Widened s(ctx, type);
  float* out = s.zeros(shape.y_elements());
  conv_forward(ctx, shape, algo, s.in(x, shape.x_elements()), s.in(w, shape.w_elements()), s.in(bias, shape.k), out,
               workspace, workspace_bytes);
  s.out(out, y, shape.y_elements());
}

void conv_backward_data_16(const Context& ctx, const ConvShape& shape, ConvAlgoId algo, const uint8_t* w,
                           const uint8_t* dy, uint8_t* dx, void* workspace, int64_t workspace_bytes, int64_t type) {
  MPLAN_RT_CHECK(shape.valid(), "invalid backward-data convolution shape");
  Widened s(ctx, type);
  float* out = s.zeros(shape.x_elements());
  conv_backward_data(ctx, shape, algo, s.in(w, shape.w_elements()), s.in(dy, shape.y_elements()), out, workspace,
                     workspace_bytes, false);
  s.out(out, dx, shape.x_elements());
}

void conv_backward_filter_16(const Context& ctx, const ConvShape& shape, ConvAlgoId algo, const uint8_t* x,
                             const uint8_t* dy, uint8_t* dw, void* workspace, int64_t workspace_bytes, int64_t type) {
  MPLAN_RT_CHECK(shape.valid(), "invalid backward-filter convolution shape");
  Widened s(ctx, type);
  float* out = s.zeros(shape.w_elements());  // the float kernel adds to it
  conv_backward_filter(ctx, shape, algo, s.in(x, shape.x_elements()), s.in(dy, shape.y_elements()), out, workspace,
                       workspace_bytes);
  s.out(out, dw, shape.w_elements());
}

void linear_forward_16(const Context& ctx, const uint8_t* x, const uint8_t* w, const uint8_t* bias, uint8_t* y,
                       int64_t n, int64_t in, int64_t out, int64_t type) {
  Widened s(ctx, type);
  float* result = s.zeros(n * out);
  linear_forward(ctx, s.in(x, n * in), s.in(w, out * in), s.in(bias, out), result, n, in, out);
  s.out(result, y, n * out);
}

void linear_backward_data_16(const Context& ctx, const uint8_t* w, const uint8_t* dy, uint8_t* dx, int64_t n,
                             int64_t in, int64_t out, int64_t type) {
  Widened s(ctx, type);
  float* result = s.zeros(n * in);
  linear_backward_data(ctx, s.in(w, out * in), s.in(dy, n * out), result, n, in, out, false);
  s.out(result, dx, n * in);
}

void linear_backward_weights_16(const Context& ctx, const uint8_t* x, const uint8_t* dy, uint8_t* dw, int64_t n,
                                int64_t in, int64_t out, int64_t type) {
  Widened s(ctx, type);
  float* result = s.zeros(out * in);  // the float kernel adds to it
  linear_backward_weights(ctx, s.in(x, n * in), s.in(dy, n * out), result, n, in, out);
  s.out(result, dw, out * in);
}

}  // namespace mplan::rt
