#pragma once
// A conv layer's shape as the CPU runtime's conv kernels take it
// (runtime/conv.h): one builder for the profiler, which times the kernels
// (cpu_measured.cpp), and for codegen, which emits calls to them.

#include <cstdint>

#include "frontend/model.h"
#include "runtime/conv.h"

namespace mplan {

// `input` is the per-sample [C, H, W] input (missing trailing dims are 1);
// `samples` is the images of one call (the sub- or micro-batch).
rt::ConvShape runtime_conv_shape(const Shape& input, int64_t out_channels, const Window& window, int64_t groups,
                                 int64_t samples);

}  // namespace mplan
