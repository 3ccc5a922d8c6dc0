#pragma once
// The scalar and size arguments of the cuBLAS calls of the CUDA backend's
// GEMM ops (ops_attention.cpp, ops_embeddings.cpp). cuBLAS takes alpha and
// beta by pointer and its sizes as int.

#include <climits>
#include <cstdint>

#include "runtime/check.h"

namespace mplan::rt::cuda {

inline const float kOne = 1.0f, kZero = 0.0f;
// beta: 1 adds the product to the output (accumulate), 0 writes it.
inline const float* beta_of(bool accumulate) { return accumulate ? &kOne : &kZero; }

// A size as cuBLAS's int; aborts, saying `what`, where it does not fit.
inline int to_int(int64_t value, const char* what) {
  MPLAN_RT_CHECK(value >= 0 && value <= INT_MAX, what);
  return static_cast<int>(value);
}

}  // namespace mplan::rt::cuda
