// The CPU backend of runtime/ops_attention.h: each op captures its arguments by
// value and runs its kernel (runtime/cpu/attention_kernels.h) when the stream
// reaches it, as runtime/cpu/ops.cpp does for the other ops.

#include "runtime/cpu/attention_kernels.h"
#include "runtime/cpu/stream.h"
#include "runtime/ops.h"

namespace mplan::rt {

using cpu::launch;

void matmul_forward(const Context& ctx, const float* a, const float* b, float* y, int64_t batch, int64_t m, int64_t k,
                    int64_t n, bool transpose_b) {
  launch(ctx, [=] { cpu::matmul_forward(a, b, y, batch, m, k, n, transpose_b); });
}

void matmul_backward_a(const Context& ctx, const float* b, const float* dy, float* da, int64_t batch, int64_t m,
                       int64_t k, int64_t n, bool transpose_b, bool accumulate) {
  launch(ctx, [=] { cpu::matmul_backward_a(b, dy, da, batch, m, k, n, transpose_b, accumulate); });
}

void matmul_backward_b(const Context& ctx, const float* a, const float* dy, float* db, int64_t batch, int64_t m,
                       int64_t k, int64_t n, bool transpose_b, bool accumulate) {
  launch(ctx, [=] { cpu::matmul_backward_b(a, dy, db, batch, m, k, n, transpose_b, accumulate); });
}

void softmax_forward(const Context& ctx, const float* x, float* y, int64_t rows, int64_t cols) {
  launch(ctx, [=] { cpu::softmax_forward(x, y, rows, cols); });
}

void softmax_backward(const Context& ctx, const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                      bool accumulate) {
  launch(ctx, [=] { cpu::softmax_backward(y, dy, dx, rows, cols, accumulate); });
}

void attention_forward(const Context& ctx, const float* q, const float* k, const float* v, float* probs, float* y,
                       int64_t n, int64_t heads, int64_t tq, int64_t tk, int64_t head_dim, int64_t q_stride,
                       int64_t kv_stride, float scale) {
  launch(ctx,
         [=] { cpu::attention_forward(q, k, v, probs, y, n, heads, tq, tk, head_dim, q_stride, kv_stride, scale); });
}

void attention_backward(const Context& ctx, const float* q, const float* k, const float* v, const float* probs,
                        const float* dy, float* dq, float* dk, float* dv, float* scratch, int64_t n, int64_t heads,
                        int64_t tq, int64_t tk, int64_t head_dim, int64_t q_stride, int64_t kv_stride, float scale,
                        bool accumulate_q, bool accumulate_k, bool accumulate_v) {
  launch(ctx, [=] {
    cpu::attention_backward(q, k, v, probs, dy, dq, dk, dv, scratch, n, heads, tq, tk, head_dim, q_stride, kv_stride,
                            scale, accumulate_q, accumulate_k, accumulate_v);
  });
}

}  // namespace mplan::rt
