#pragma once
// Index arithmetic shared by the CPU convolution algorithms: for filter offset
// `tap` along one axis, the output positions o in [lo, hi) whose input position
// o*stride - pad + tap lies inside [0, size).

#include <algorithm>
#include <cstdint>

namespace mplan::rt::cpu {

struct OutputRange {
  int64_t lo = 0, hi = 0;  // [lo, hi)
};

inline OutputRange valid_outputs(int64_t tap, int64_t size, int64_t stride, int64_t pad,
                                 int64_t outputs) {
  // o*stride >= pad - tap  and  o*stride <= size - 1 + pad - tap
  int64_t low_num = pad - tap;
  int64_t lo = low_num <= 0 ? 0 : (low_num + stride - 1) / stride;
  int64_t high_num = size - 1 + pad - tap;
  int64_t hi = high_num < 0 ? 0 : high_num / stride + 1;
  OutputRange range{std::max<int64_t>(lo, 0), std::min<int64_t>(hi, outputs)};
  if (range.hi < range.lo) range.hi = range.lo;
  return range;
}

}  // namespace mplan::rt::cpu
