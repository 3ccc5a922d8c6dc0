#pragma once
// Attention in the runtime's op API: batched matrix multiply, the row
// softmax and scaled dot-product attention, multi-head (the transformers).
//
// Part of the backend-neutral API of runtime/ops.h (which includes this
// file) and under its rules: the execution context first, explicit sizes,
// `accumulate` on every gradient an op writes (false writes, true adds),
// parameter gradients always accumulate (the update zeroes them). Each
// kernel's semantics are PyTorch's, named beside it.
//
// CPU: runtime/cpu/attention.cpp (attention_kernels.h). CUDA: cuBLAS
// (runtime/cuda/ops_attention.cpp) and the row softmax of
// runtime/cuda/normalization.cu (normalization_kernels.h).

#include <cstdint>

#include "runtime/device.h"

namespace mplan::rt {

// ---- matrix multiply and softmax -----------------------------------------------------------
// y (batch, m, n) = a (batch, m, k) @ b, b (batch, k, n), or b^T of b (batch,
// n, k) when transpose_b (torch.matmul of batched operands).
void matmul_forward(const Context& ctx, const float* a, const float* b, float* y, int64_t batch, int64_t m,
                    int64_t k, int64_t n, bool transpose_b);
// da = dy @ b^T (or dy @ b when transpose_b).
void matmul_backward_a(const Context& ctx, const float* b, const float* dy, float* da, int64_t batch, int64_t m,
                       int64_t k, int64_t n, bool transpose_b, bool accumulate);
// db = a^T @ dy (or dy^T @ a when transpose_b).
void matmul_backward_b(const Context& ctx, const float* a, const float* dy, float* db, int64_t batch, int64_t m,
                       int64_t k, int64_t n, bool transpose_b, bool accumulate);
// y (rows, cols) = softmax over each row (the last axis).
void softmax_forward(const Context& ctx, const float* x, float* y, int64_t rows, int64_t cols);
// dx = y * (dy - sum(dy * y)) per row.
void softmax_backward(const Context& ctx, const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                      bool accumulate);

// ---- scaled dot-product attention, multi-head -----------------------------------------
// For each of n samples and each head h: P = softmax(Q_h K_h^T * scale)
// (tq x tk), Y_h = P V_h; Q_h is columns h*head_dim .. of q, whose rows (one
// per query token) are q_stride floats apart, k and v likewise with kv_stride
// (a packed in-projection [q | k | v] has q = qkv, k = qkv + D, v = qkv + 2D,
// strides 3D). y (n, tq, heads*head_dim); probs (n, heads, tq, tk) is saved
// for the backward: the attention matrix, the memory this op is about.
void attention_forward(const Context& ctx, const float* q, const float* k, const float* v, float* probs, float* y,
                       int64_t n, int64_t heads, int64_t tq, int64_t tk, int64_t head_dim, int64_t q_stride,
                       int64_t kv_stride, float scale);
// dq, dk, dv (null: not wanted) in the layouts of q, k and v, each written or
// added by its own flag, in the order dq, dk, dv per head (so aliasing ones,
// a packed gradient, combine correctly). scratch: n*heads*tq*tk floats.
void attention_backward(const Context& ctx, const float* q, const float* k, const float* v, const float* probs,
                        const float* dy, float* dq, float* dk, float* dv, float* scratch, int64_t n, int64_t heads,
                        int64_t tq, int64_t tk, int64_t head_dim, int64_t q_stride, int64_t kv_stride, float scale,
                        bool accumulate_q, bool accumulate_k, bool accumulate_v);

}  // namespace mplan::rt
