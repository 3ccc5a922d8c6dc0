#include "profiler/runtime_conv_shape.h"

namespace mplan {

rt::ConvShape runtime_conv_shape(const Shape& input, int64_t out_channels, const Window& window, int64_t groups,
                                 int64_t samples) {
  rt::ConvShape s;
  s.n = samples;
  s.c = input.dims.at(0);
  s.h = input.dims.size() > 1 ? input.dims[1] : 1;
  s.w = input.dims.size() > 2 ? input.dims[2] : 1;
  s.k = out_channels;
  s.r = window.kernel_h;
  s.s = window.kernel_w;
  s.stride_h = window.stride_h;
  s.stride_w = window.stride_w;
  s.pad_h = window.pad_h;
  s.pad_w = window.pad_w;
  s.groups = groups;
  return s;
}

}  // namespace mplan
