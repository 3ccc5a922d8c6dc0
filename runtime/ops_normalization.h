#pragma once
// Layer normalisation in the runtime's op API (ConvNeXt, the
// transformers). Batch normalisation and LRN are in runtime/ops.h.
//
// Part of the backend-neutral API of runtime/ops.h (which includes this
// file) and under its rules: the execution context first, explicit sizes,
// `accumulate` on every gradient an op writes (false writes, true adds),
// parameter gradients always accumulate (the update zeroes them). Each
// kernel's semantics are PyTorch's, named beside it.
//
// CPU: runtime/cpu/layernorm.cpp (normalization_kernels.h). CUDA:
// runtime/cuda/normalization.cu (normalization_kernels.h).

#include <cstdint>

#include "runtime/device.h"

namespace mplan::rt {

// ---- layer normalisation over one axis (F.layer_norm) ------------------------------------
// x (outer, c, inner) normalised over c at every (outer, inner) position: over
// channels of [C, H, W] (ConvNeXt's LayerNorm2d: inner = H*W) or over the
// features of [T, D] (inner = 1). mean and invstd = 1/sqrt(biased var + eps)
// have one value per position, saved for the backward.
void layernorm_forward(const Context& ctx, const float* x, const float* gamma, const float* beta, float* y,
                       float* mean, float* invstd, int64_t outer, int64_t c, int64_t inner, float eps);
void layernorm_backward_data(const Context& ctx, const float* x, const float* gamma, const float* mean,
                             const float* invstd, const float* dy, float* dx, int64_t outer, int64_t c, int64_t inner,
                             bool accumulate);
// dgamma += sum(dy * x_hat), dbeta += sum(dy) over the positions.
void layernorm_backward_params(const Context& ctx, const float* x, const float* mean, const float* invstd,
                               const float* dy, float* dgamma, float* dbeta, int64_t outer, int64_t c, int64_t inner);

}  // namespace mplan::rt
