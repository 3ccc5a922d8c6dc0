#pragma once
// The CPU kernels of runtime/ops_attention.h (which says what each computes),
// in attention.cpp: plain synchronous functions with the API's arguments less
// the context; runtime/cpu/ops_attention.cpp runs them on the CPU streams.
// Sums over many terms accumulate in double, as the other CPU kernels do.

#include <cstdint>

namespace mplan::rt::cpu {

// ---- matmul, softmax, attention (attention.cpp) ----------------------------------------------

void matmul_forward(const float* a, const float* b, float* y, int64_t batch, int64_t m, int64_t k, int64_t n,
                    bool transpose_b);
void matmul_backward_a(const float* b, const float* dy, float* da, int64_t batch, int64_t m, int64_t k, int64_t n,
                       bool transpose_b, bool accumulate);
void matmul_backward_b(const float* a, const float* dy, float* db, int64_t batch, int64_t m, int64_t k, int64_t n,
                       bool transpose_b, bool accumulate);
void softmax_forward(const float* x, float* y, int64_t rows, int64_t cols);
void softmax_backward(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols, bool accumulate);
void attention_forward(const float* q, const float* k, const float* v, float* probs, float* y, int64_t n,
                       int64_t heads, int64_t tq, int64_t tk, int64_t head_dim, int64_t q_stride, int64_t kv_stride,
                       float scale);
void attention_backward(const float* q, const float* k, const float* v, const float* probs, const float* dy,
                        float* dq, float* dk, float* dv, float* scratch, int64_t n, int64_t heads, int64_t tq,
                        int64_t tk, int64_t head_dim, int64_t q_stride, int64_t kv_stride, float scale,
                        bool accumulate_q, bool accumulate_k, bool accumulate_v);

}  // namespace mplan::rt::cpu
