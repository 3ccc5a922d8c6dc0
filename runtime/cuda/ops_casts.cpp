// The CUDA backend of runtime/ops_casts.h: the backend's own kernels
// (cast_kernels.h), enqueued on the context's stream.

#include "runtime/check.h"
#include "runtime/cuda/cast_kernels.h"
#include "runtime/cuda/stream.h"
#include "runtime/ops.h"

namespace mplan::rt {

using cuda::Launch;

void cast_to_float(const Context& ctx, const uint8_t* src, float* dst, int64_t count, int64_t stored,
                   int64_t rounded) {
  MPLAN_RT_CHECK(stored >= 0 && stored < kStorageTypeCount && rounded >= 0 && rounded < kStorageTypeCount,
                 "cast_to_float: no such storage type");
  Launch L(ctx);
  cuda::cast_to_float(src, dst, count, stored, rounded, L.stream());
}

void cast_from_float(const Context& ctx, const float* src, uint8_t* dst, int64_t count, int64_t stored, int64_t result,
                     bool accumulate) {
  MPLAN_RT_CHECK(stored >= 0 && stored < kStorageTypeCount && result >= 0 && result < kStorageTypeCount,
                 "cast_from_float: no such storage type");
  Launch L(ctx);
  cuda::cast_from_float(src, dst, count, stored, result, accumulate, L.stream());
}

void zero_floats(const Context& ctx, float* dst, int64_t count) {
  Launch L(ctx);
  cuda::zero_floats(dst, count, L.stream());
}

}  // namespace mplan::rt
