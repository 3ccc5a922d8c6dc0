#pragma once
// The largest sizes mplan accepts from its input files: beyond them byte
// counts could overflow int64 later on (docs/model-format.md, "Shapes").

#include <cstdint>

namespace mplan {

// The largest per-sample tensor, in elements.
inline constexpr int64_t kMaxElements = int64_t{1} << 40;
// The largest size field (a channel count, a kernel size, a batch).
inline constexpr int64_t kMaxSizeField = 2147483647;  // 2^31 - 1
// The most ranks (GPUs) a data-parallel plan spans (--gpus, a machine file).
inline constexpr int32_t kMaxRanks = 4096;

}  // namespace mplan
