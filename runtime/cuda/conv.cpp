// Convolutions of the CUDA backend (runtime/ops.h) on cuDNN's legacy
// convolution API, deprecated in cuDNN 9 but present: the planned
// algorithm is cuDNN's enum value for the direction, its workspace is the
// plan's, micro-batches run one after another sharing it (mu-cuDNN §II-III),
// and filter gradients accumulate (output scale beta = 1; mu-cuDNN §II:
// "BackwardFilter is split by accumulating").
//
// Numerics: FP32 data (the 16-bit kernels of runtime/ops_sixteen_bit.h:
// bfloat16 or float16 data, a float convolution type, tensor-core math, the
// bias broadcast into the output first); in fp32 math CUDNN_FMA_MATH on every convolution
// descriptor, which rules out TF32 tensor cores (cuDNN's default math allows
// them for FP32 on Ampere and later; PyTorch and Paddle set CUDNN_FMA_MATH when
// TF32 is disallowed, e.g. Paddle's phi/kernels/gpudnn/conv_cudnn_v7.h); in
// tf32 math (set_math_mode) CUDNN_DEFAULT_MATH, PyTorch's allow_tf32.
//
// Descriptors are host objects, cached per shape for the life of the process;
// workspace sizes and the algorithm that runs are cached per (direction,
// shape, algorithm, workspace), so a step makes no cuDNN queries after the
// first iteration and cuDNN allocates no device memory (every algorithm gets
// the workspace it asked for, from the plan).

#include "runtime/cuda/conv.h"

#include <array>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <iterator>
#include <string_view>
#include <tuple>
#include <vector>

#include "runtime/check.h"
#include "runtime/cuda/cast_kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/conv_graph.h"
#include "runtime/cuda/stream.h"
#include "runtime/ops.h"

MPLAN_CUDNN_LEGACY_BEGIN

namespace mplan::rt {
namespace {

using cuda::Launch;

// cuDNN's enum names, lower case, without the prefix (profiler/conv_algorithms.cpp).
constexpr const char* kForwardNames[] = {"implicit_gemm", "implicit_precomp_gemm", "gemm", "direct",
                                         "fft", "fft_tiling", "winograd", "winograd_nonfused"};
constexpr const char* kBackwardDataNames[] = {"algo_0", "algo_1", "fft", "fft_tiling", "winograd",
                                              "winograd_nonfused"};
constexpr const char* kBackwardFilterNames[] = {"algo_0", "algo_1", "fft", "algo_3", "winograd",
                                                "winograd_nonfused", "fft_tiling"};
static_assert(std::size(kForwardNames) == CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
static_assert(std::size(kBackwardDataNames) == CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
static_assert(std::size(kBackwardFilterNames) == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);
static_assert(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM == 0 && CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 == 0 &&
              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 == 0);

// The algorithm every direction can fall back to: implicit_gemm / algo_0, no workspace.
constexpr ConvAlgoId kNoWorkspaceAlgo = 0;

const char* direction_name(ConvDirection d) {
  switch (d) {
    case ConvDirection::forward: return "forward";
    case ConvDirection::backward_data: return "backward-data";
    case ConvDirection::backward_filter: return "backward-filter";
  }
  return "?";
}

int algorithm_count(ConvDirection d) {
  switch (d) {
    case ConvDirection::forward: return CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
    case ConvDirection::backward_data: return CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
    case ConvDirection::backward_filter: return CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  }
  return 0;
}

bool known_algorithm(ConvDirection d, ConvAlgoId algo) { return algo >= 0 && algo < algorithm_count(d); }

// The storage type of the tensors (runtime/ops_casts.h) is part of every key:
// float32 for the float kernels, bfloat16 or float16 for the 16-bit ones
// (runtime/ops_sixteen_bit.h).
constexpr int64_t kFloat32 = static_cast<int64_t>(StorageType::float32);

using ShapeKey = std::array<int64_t, 15>;
ShapeKey key_of(const ConvShape& s, int64_t type = kFloat32) {
  return {s.n,        s.c,        s.h,     s.w,          s.k,         s.r,          s.s,   s.stride_h,
          s.stride_w, s.pad_h,    s.pad_w, s.groups, s.dilation_h, s.dilation_w, type};
}

cudnnDataType_t cudnn_type(int64_t type) {
  switch (static_cast<StorageType>(type)) {
    case StorageType::bfloat16: return CUDNN_DATA_BFLOAT16;
    case StorageType::float16: return CUDNN_DATA_HALF;
    case StorageType::float32: break;
  }
  return CUDNN_DATA_FLOAT;
}

// cuDNN's legacy descriptors take int sizes, and its kernels index 4-d tensors
// of fewer than 2^31 elements (PyTorch splits larger batches for the same reason).
bool fits_cudnn(const ConvShape& s) {
  if (!s.valid()) return false;
  for (int64_t v : key_of(s))
    if (v > INT_MAX) return false;  // the type, last, is small
  return s.x_elements() <= INT_MAX && s.y_elements() <= INT_MAX && s.w_elements() <= INT_MAX;
}

struct ConvDescriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
};

// Float32 tensors compute in the program's math (FMA, or TF32 where enabled);
// 16-bit ones in float on tensor cores (cuDNN's PSEUDO_HALF and
// PSEUDO_BFLOAT16 configurations: 16-bit tensors, a float convolution type),
// as PyTorch's autocast convolutions do.
ConvDescriptors create_descriptors(const ConvShape& s, int64_t type) {
  ConvDescriptors d;
  const cudnnDataType_t data = cudnn_type(type);
  auto i = [](int64_t v) { return static_cast<int>(v); };
  MPLAN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d.x));
  MPLAN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d.y));
  MPLAN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d.bias));
  MPLAN_CUDNN_CHECK(cudnnCreateFilterDescriptor(&d.w));
  MPLAN_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d.conv));
  MPLAN_CUDNN_CHECK(
      cudnnSetTensor4dDescriptor(d.x, CUDNN_TENSOR_NCHW, data, i(s.n), i(s.c), i(s.h), i(s.w)));
  MPLAN_CUDNN_CHECK(
      cudnnSetTensor4dDescriptor(d.y, CUDNN_TENSOR_NCHW, data, i(s.n), i(s.k), i(s.p()), i(s.q())));
  MPLAN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d.bias, CUDNN_TENSOR_NCHW, data, 1, i(s.k), 1, 1));
  // The filter in PyTorch's layout (k, c/groups, r, s).
  MPLAN_CUDNN_CHECK(
      cudnnSetFilter4dDescriptor(d.w, data, CUDNN_TENSOR_NCHW, i(s.k), i(s.c / s.groups), i(s.r), i(s.s)));
  MPLAN_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(d.conv, i(s.pad_h), i(s.pad_w), i(s.stride_h), i(s.stride_w),
                                                    i(s.dilation_h), i(s.dilation_w), CUDNN_CROSS_CORRELATION,
                                                    CUDNN_DATA_FLOAT));
  MPLAN_CUDNN_CHECK(cudnnSetConvolutionGroupCount(d.conv, i(s.groups)));
  MPLAN_CUDNN_CHECK(cudnnSetConvolutionMathType(
      d.conv, type != kFloat32 ? CUDNN_TENSOR_OP_MATH : cuda::tf32_enabled() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
  int n = 0, k = 0, p = 0, q = 0;
  MPLAN_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(d.conv, d.x, d.w, &n, &k, &p, &q));
  MPLAN_RT_CHECK(n == s.n && k == s.k && p == s.p() && q == s.q(),
                 "cuDNN's convolution output size differs from ConvShape's");
  return d;
}

// What the backend has learnt about convolutions: descriptors, workspace
// sizes and the algorithm that runs for a planned one and a workspace.
struct ConvCache {
  std::mutex mutex;
  std::map<ShapeKey, ConvDescriptors> descriptors;
  std::map<std::tuple<int, ShapeKey, ConvAlgoId>, int64_t> workspace_bytes;
  std::map<std::tuple<int, ShapeKey, ConvAlgoId, int64_t>, ConvAlgoId> runs;
  std::atomic<int64_t> fallbacks{0};
};

ConvCache& cache() {
  static ConvCache* instance = new ConvCache;  // descriptors live until exit, never destroyed after CUDA's teardown
  return *instance;
}

// Callers hold the cache's mutex.
const ConvDescriptors& descriptors_locked(const ConvShape& s, int64_t type) {
  ConvCache& c = cache();
  auto it = c.descriptors.find(key_of(s, type));
  if (it == c.descriptors.end()) it = c.descriptors.emplace(key_of(s, type), create_descriptors(s, type)).first;
  return it->second;
}

int64_t query_workspace(cudnnHandle_t handle, ConvDirection d, const ConvDescriptors& D, ConvAlgoId algo) {
  size_t bytes = 0;
  cudnnStatus_t status = CUDNN_STATUS_NOT_SUPPORTED;
  switch (d) {
    case ConvDirection::forward:
      status = cudnnGetConvolutionForwardWorkspaceSize(handle, D.x, D.w, D.conv, D.y,
                                                       static_cast<cudnnConvolutionFwdAlgo_t>(algo), &bytes);
      break;
    case ConvDirection::backward_data:
      status = cudnnGetConvolutionBackwardDataWorkspaceSize(handle, D.w, D.y, D.conv, D.x,
                                                            static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), &bytes);
      break;
    case ConvDirection::backward_filter:
      status = cudnnGetConvolutionBackwardFilterWorkspaceSize(
          handle, D.x, D.y, D.conv, D.w, static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), &bytes);
      break;
  }
  // Any refusal (NOT_SUPPORTED and its kinds, BAD_PARAM for this shape) means: not this algorithm.
  return status == CUDNN_STATUS_SUCCESS ? static_cast<int64_t>(bytes) : -1;
}

int64_t workspace_locked(cudnnHandle_t handle, ConvDirection d, const ConvShape& s, ConvAlgoId algo, int64_t type) {
  if (!known_algorithm(d, algo)) return -1;
  ConvCache& c = cache();
  const auto key = std::make_tuple(static_cast<int>(d), key_of(s, type), algo);
  auto it = c.workspace_bytes.find(key);
  if (it == c.workspace_bytes.end())
    it = c.workspace_bytes.emplace(key, query_workspace(handle, d, descriptors_locked(s, type), algo)).first;
  return it->second;
}

// cuDNN's heuristic ranking of the direction's algorithms (fastest expected first).
std::vector<ConvAlgoId> heuristic_order(cudnnHandle_t handle, ConvDirection d, const ConvDescriptors& D) {
  std::vector<ConvAlgoId> order;
  int returned = 0;
  switch (d) {
    case ConvDirection::forward: {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      if (cudnnGetConvolutionForwardAlgorithm_v7(handle, D.x, D.w, D.conv, D.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                 &returned, perf) == CUDNN_STATUS_SUCCESS)
        for (int i = 0; i < returned; ++i)
          if (perf[i].status == CUDNN_STATUS_SUCCESS) order.push_back(perf[i].algo);
      break;
    }
    case ConvDirection::backward_data: {
      cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      if (cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, D.w, D.y, D.conv, D.x,
                                                      CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned,
                                                      perf) == CUDNN_STATUS_SUCCESS)
        for (int i = 0; i < returned; ++i)
          if (perf[i].status == CUDNN_STATUS_SUCCESS) order.push_back(perf[i].algo);
      break;
    }
    case ConvDirection::backward_filter: {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      if (cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, D.x, D.y, D.conv, D.w,
                                                        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &returned,
                                                        perf) == CUDNN_STATUS_SUCCESS)
        for (int i = 0; i < returned; ++i)
          if (perf[i].status == CUDNN_STATUS_SUCCESS) order.push_back(perf[i].algo);
      break;
    }
  }
  return order;
}

void say_fallback(ConvDirection d, const ConvShape& s, ConvAlgoId planned, ConvAlgoId run, int64_t workspace_bytes,
                  const char* why) {
  std::fprintf(stderr,
               "mplan runtime: %s convolution (n=%lld c=%lld %lldx%lld k=%lld %lldx%lld): algorithm %s %s within "
               "%lld bytes of workspace; running %s instead\n",
               direction_name(d), static_cast<long long>(s.n), static_cast<long long>(s.c),
               static_cast<long long>(s.h), static_cast<long long>(s.w), static_cast<long long>(s.k),
               static_cast<long long>(s.r), static_cast<long long>(s.s),
               conv_algorithm_name(d, planned), why,
               static_cast<long long>(workspace_bytes), conv_algorithm_name(d, run));
}

// The algorithm that runs: the planned one when cuDNN supports it here and
// its workspace fits; else the first of cuDNN's heuristic ranking whose
// workspace fits, else implicit_gemm / algo_0 (no workspace). Said once per
// shape, algorithm and workspace.
ConvAlgoId runnable(cudnnHandle_t handle, ConvDirection d, const ConvShape& s, ConvAlgoId planned,
                    int64_t workspace_bytes, int64_t type) {
  ConvCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  const auto key = std::make_tuple(static_cast<int>(d), key_of(s, type), planned, workspace_bytes);
  if (auto it = c.runs.find(key); it != c.runs.end()) return it->second;
  const int64_t need = workspace_locked(handle, d, s, planned, type);
  ConvAlgoId run = planned;
  if (need < 0 || need > workspace_bytes) {
    run = kNoWorkspaceAlgo;
    for (ConvAlgoId algo : heuristic_order(handle, d, descriptors_locked(s, type))) {
      const int64_t bytes = workspace_locked(handle, d, s, algo, type);
      if (bytes >= 0 && bytes <= workspace_bytes) {
        run = algo;
        break;
      }
    }
    const int64_t fallback_need = workspace_locked(handle, d, s, run, type);
    MPLAN_RT_CHECK(fallback_need >= 0 && fallback_need <= workspace_bytes,
                   "no cuDNN convolution algorithm runs this shape within the planned workspace");
    say_fallback(d, s, planned, run, workspace_bytes,
                 graph_algorithm_rank(planned) >= 0
                     ? "could not run through the graph API here (no such configuration for this shape, too little "
                       "workspace, a pointer off 16-byte alignment, or cuDNN refused it)"
                     : need < 0 ? "is not supported by cuDNN for this shape"
                                : "does not fit");
  }
  c.runs.emplace(key, run);
  return run;
}

// cuDNN refused `algo` at run time although it gave a workspace size: from
// now on this shape runs `kNoWorkspaceAlgo` for that plan.
void refused_at_run_time(ConvDirection d, const ConvShape& s, ConvAlgoId algo, int64_t workspace_bytes,
                         int64_t type) {
  ConvCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.runs[std::make_tuple(static_cast<int>(d), key_of(s, type), algo, workspace_bytes)] = kNoWorkspaceAlgo;
  say_fallback(d, s, algo, kNoWorkspaceAlgo, workspace_bytes, "was refused by cuDNN at run time");
}

const ConvDescriptors& descriptors(const ConvShape& s, int64_t type) {
  std::lock_guard<std::mutex> lock(cache().mutex);
  return descriptors_locked(s, type);
}

// CUDNN_STATUS_NOT_SUPPORTED and its kinds (3000-3999 in cuDNN 9).
bool not_supported(cudnnStatus_t status) {
  return status >= CUDNN_STATUS_NOT_SUPPORTED && status < CUDNN_STATUS_INTERNAL_ERROR;
}

// MPLAN_CUDNN_CHECK for a status already in hand.
#define MPLAN_CUDNN_CHECK_STATUS(status, call)                                                    \
  do {                                                                                            \
    if ((status) != CUDNN_STATUS_SUCCESS)                                                         \
      ::mplan::rt::cuda::library_failed("cuDNN", call, __FILE__, __LINE__, cudnnGetErrorString(status)); \
  } while (0)

ConvShape checked(const ConvShape& s, const char* what) {
  MPLAN_RT_CHECK(s.valid(), what);
  MPLAN_RT_CHECK(fits_cudnn(s), "convolution tensors over 2^31 elements: cuDNN's legacy API cannot run them");
  return s;
}

// ---- one convolution of one (micro-)batch ------------------------------------------------

const float kOne = 1.0f, kZero = 0.0f;

// A planned graph-API configuration (conv_graph.h) runs through the graph
// API: true when it ran. Where cuDNN cannot run it here (no such
// configuration for this shape, too little workspace, a misaligned pointer, a
// refusal), false: the caller's legacy path then runs the fastest legacy
// algorithm that fits and says so once, as for any planned algorithm that
// cannot run.
// MPLAN_CONV_GRAPH=0 in the environment turns the graph API off: the kernel
// profiler times the legacy algorithms alone (when device time is short) and a planned graph configuration runs as a legacy algorithm,
// said as any fallback is.
bool graph_enabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("MPLAN_CONV_GRAPH");
    return value == nullptr || std::string_view(value) != "0";
  }();
  return enabled;
}

// The graph configurations are float32 (conv_graph.h): a 16-bit call of one
// runs the legacy path's fallback.
bool ran_graph(Launch& L, ConvDirection d, const ConvShape& s, ConvAlgoId planned, bool accumulate, const void* a,
               const void* b, void* out, void* workspace, int64_t workspace_bytes, int64_t type) {
  if (graph_algorithm_rank(planned) < 0 || !graph_enabled() || type != kFloat32) return false;
  const cudnnStatus_t status =
      cuda::graph_run(L.cudnn(), d, s, planned, accumulate, a, b, out, workspace, workspace_bytes);
  if (status == CUDNN_STATUS_SUCCESS) return true;
  // Not offered or refused before running: the legacy path stands in. Any
  // other failure may have run kernels already (an adding call would then add
  // twice): an error, as on the legacy path.
  const bool refused = not_supported(status) || (status >= CUDNN_STATUS_BAD_PARAM && status < CUDNN_STATUS_NOT_SUPPORTED);
  if (!refused) MPLAN_CUDNN_CHECK_STATUS(status, "cudnnBackendExecute");
  return false;
}

// The pointers hold `type` (float32, or 16-bit for runtime/ops_sixteen_bit.h).
void forward_one(Launch& L, const ConvShape& s, ConvAlgoId planned, const void* x, const void* w, const void* bias,
                 void* y, void* workspace, int64_t workspace_bytes, int64_t type = kFloat32) {
  const cudnnHandle_t h = L.cudnn();
  const ConvDescriptors& D = descriptors(checked(s, "invalid forward convolution shape"), type);
  if (ran_graph(L, ConvDirection::forward, s, planned, false, x, w, y, workspace, workspace_bytes, type)) {
    if (bias != nullptr) MPLAN_CUDNN_CHECK(cudnnAddTensor(h, &kOne, D.bias, bias, &kOne, D.y, y));
    return;
  }
  ConvAlgoId algo = runnable(h, ConvDirection::forward, s, planned, workspace_bytes, type);
  // A 16-bit bias goes into y first and the convolution adds to it in float:
  // one rounding, as the CPU reference and the 16-bit linear layer have it.
  const bool bias_first = bias != nullptr && type != kFloat32;
  if (bias_first)
    cuda::broadcast_channels_16(static_cast<const uint8_t*>(bias), static_cast<uint8_t*>(y), s.n, s.k,
                                s.p() * s.q(), L.stream());
  auto run = [&](ConvAlgoId a) {
    return cudnnConvolutionForward(h, &kOne, D.x, x, D.w, w, D.conv, static_cast<cudnnConvolutionFwdAlgo_t>(a),
                                   workspace, static_cast<size_t>(workspace_bytes), bias_first ? &kOne : &kZero,
                                   D.y, y);
  };
  cudnnStatus_t status = run(algo);
  if (not_supported(status) && algo != kNoWorkspaceAlgo) {
    refused_at_run_time(ConvDirection::forward, s, algo, workspace_bytes, type);
    status = run(algo = kNoWorkspaceAlgo);
  }
  MPLAN_CUDNN_CHECK_STATUS(status, "cudnnConvolutionForward");
  if (algo != planned) ++cache().fallbacks;
  if (bias != nullptr && !bias_first) MPLAN_CUDNN_CHECK(cudnnAddTensor(h, &kOne, D.bias, bias, &kOne, D.y, y));
}

void backward_data_one(Launch& L, const ConvShape& s, ConvAlgoId planned, const void* w, const void* dy, void* dx,
                       void* workspace, int64_t workspace_bytes, bool accumulate, int64_t type = kFloat32) {
  const cudnnHandle_t h = L.cudnn();
  const ConvDescriptors& D = descriptors(checked(s, "invalid backward-data convolution shape"), type);
  if (ran_graph(L, ConvDirection::backward_data, s, planned, accumulate, dy, w, dx, workspace, workspace_bytes, type))
    return;
  ConvAlgoId algo = runnable(h, ConvDirection::backward_data, s, planned, workspace_bytes, type);
  const float* beta = accumulate ? &kOne : &kZero;
  auto run = [&](ConvAlgoId a) {
    return cudnnConvolutionBackwardData(h, &kOne, D.w, w, D.y, dy, D.conv,
                                        static_cast<cudnnConvolutionBwdDataAlgo_t>(a), workspace,
                                        static_cast<size_t>(workspace_bytes), beta, D.x, dx);
  };
  cudnnStatus_t status = run(algo);
  if (not_supported(status) && algo != kNoWorkspaceAlgo) {
    refused_at_run_time(ConvDirection::backward_data, s, algo, workspace_bytes, type);
    status = run(algo = kNoWorkspaceAlgo);
  }
  MPLAN_CUDNN_CHECK_STATUS(status, "cudnnConvolutionBackwardData");
  if (algo != planned) ++cache().fallbacks;
}

// dw += the filter gradient of this batch: beta = 1 always (ops.h); a 16-bit
// dw is written (beta = 0, runtime/ops_sixteen_bit.h).
void backward_filter_one(Launch& L, const ConvShape& s, ConvAlgoId planned, const void* x, const void* dy, void* dw,
                         void* workspace, int64_t workspace_bytes, int64_t type = kFloat32) {
  const cudnnHandle_t h = L.cudnn();
  const ConvDescriptors& D = descriptors(checked(s, "invalid backward-filter convolution shape"), type);
  if (ran_graph(L, ConvDirection::backward_filter, s, planned, true, x, dy, dw, workspace, workspace_bytes, type))
    return;
  ConvAlgoId algo = runnable(h, ConvDirection::backward_filter, s, planned, workspace_bytes, type);
  const float* beta = type == kFloat32 ? &kOne : &kZero;
  auto run = [&](ConvAlgoId a) {
    return cudnnConvolutionBackwardFilter(h, &kOne, D.x, x, D.y, dy, D.conv,
                                          static_cast<cudnnConvolutionBwdFilterAlgo_t>(a), workspace,
                                          static_cast<size_t>(workspace_bytes), beta, D.w, dw);
  };
  cudnnStatus_t status = run(algo);
  if (not_supported(status) && algo != kNoWorkspaceAlgo) {
    refused_at_run_time(ConvDirection::backward_filter, s, algo, workspace_bytes, type);
    status = run(algo = kNoWorkspaceAlgo);
  }
  MPLAN_CUDNN_CHECK_STATUS(status, "cudnnConvolutionBackwardFilter");
  if (algo != planned) ++cache().fallbacks;
}

// ---- micro-batches (mu-cuDNN §II: loop tiling of the batch loop) --------------------------

ConvShape slice_of(const ConvShape& shape, int64_t n) {
  ConvShape slice = shape;
  slice.n = n;
  return slice;
}

void check_micro(const ConvShape& shape, MicroBatches micro) {
  MPLAN_RT_CHECK(micro.items != nullptr && micro.count >= 1, "micro-batched convolution without micro-batches");
  int64_t total = 0;
  for (int32_t i = 0; i < micro.count; ++i) {
    MPLAN_RT_CHECK(micro.items[i].n >= 1, "micro-batch of no images");
    total += micro.items[i].n;
  }
  MPLAN_RT_CHECK(total == shape.n, "micro-batches do not add up to the batch");
}

}  // namespace

namespace cuda {
int64_t conv_fallback_count() { return cache().fallbacks.load(); }
}  // namespace cuda

// ---- runtime/ops.h ------------------------------------------------------------------------

int conv_algorithm_count(ConvDirection direction) { return algorithm_count(direction); }

std::vector<ConvAlgoId> conv_algorithm_ids(ConvDirection direction) {
  std::vector<ConvAlgoId> ids;
  for (ConvAlgoId a = 0; a < algorithm_count(direction); ++a) ids.push_back(a);
  if (graph_enabled())
    for (int r = 0; r < kGraphAlgorithms; ++r) ids.push_back(kGraphAlgorithmBase + r);
  return ids;
}

const char* conv_algorithm_name(ConvDirection direction, ConvAlgoId algo) {
  static const char* const kGraphNames[] = {"graph_0", "graph_1", "graph_2", "graph_3",
                                            "graph_4", "graph_5", "graph_6", "graph_7"};
  static_assert(std::size(kGraphNames) == kGraphAlgorithms);
  if (const int r = graph_algorithm_rank(algo); r >= 0) return kGraphNames[r];
  if (!known_algorithm(direction, algo)) return "unknown";
  switch (direction) {
    case ConvDirection::forward: return kForwardNames[algo];
    case ConvDirection::backward_data: return kBackwardDataNames[algo];
    case ConvDirection::backward_filter: return kBackwardFilterNames[algo];
  }
  return "unknown";
}

int64_t conv_workspace_bytes(const Context& ctx, ConvDirection direction, const ConvShape& shape, ConvAlgoId algo) {
  if (!fits_cudnn(shape)) return -1;
  if (graph_algorithm_rank(algo) >= 0) return graph_enabled() ? cuda::graph_workspace_bytes(direction, shape, algo) : -1;
  if (!known_algorithm(direction, algo)) return -1;
  Launch L(ctx);
  const cudnnHandle_t h = L.cudnn();
  std::lock_guard<std::mutex> lock(cache().mutex);
  return workspace_locked(h, direction, shape, algo, kFloat32);
}

void conv_forward(const Context& ctx, const ConvShape& shape, ConvAlgoId algo, const float* x, const float* w,
                  const float* bias, float* y, void* workspace, int64_t workspace_bytes) {
  Launch L(ctx);
  forward_one(L, shape, algo, x, w, bias, y, workspace, workspace_bytes);
}

void conv_backward_data(const Context& ctx, const ConvShape& shape, ConvAlgoId algo, const float* w, const float* dy,
                        float* dx, void* workspace, int64_t workspace_bytes, bool accumulate) {
  Launch L(ctx);
  backward_data_one(L, shape, algo, w, dy, dx, workspace, workspace_bytes, accumulate);
}

void conv_backward_filter(const Context& ctx, const ConvShape& shape, ConvAlgoId algo, const float* x,
                          const float* dy, float* dw, void* workspace, int64_t workspace_bytes) {
  Launch L(ctx);
  backward_filter_one(L, shape, algo, x, dy, dw, workspace, workspace_bytes);
}

void conv_backward_bias(const Context& ctx, const ConvShape& shape, const float* dy, float* dbias) {
  Launch L(ctx);
  const cudnnHandle_t h = L.cudnn();
  const ConvDescriptors& D = descriptors(checked(shape, "invalid convolution shape"), kFloat32);
  MPLAN_CUDNN_CHECK(cudnnConvolutionBackwardBias(h, &kOne, D.y, dy, &kOne, D.bias, dbias));
}

// ---- runtime/ops_sixteen_bit.h ----------------------------------------------------------------

namespace {
int64_t checked_16(int64_t type) {
  MPLAN_RT_CHECK(type == static_cast<int64_t>(StorageType::bfloat16) ||
                     type == static_cast<int64_t>(StorageType::float16),
                 "a 16-bit convolution's type that is neither bfloat16 nor float16");
  return type;
}
}  // namespace

int64_t conv_workspace_bytes_16(const Context& ctx, ConvDirection direction, const ConvShape& shape, ConvAlgoId algo,
                                int64_t type) {
  if (!fits_cudnn(shape) || !known_algorithm(direction, algo)) return -1;  // graph ids too: float32 only
  Launch L(ctx);
  const cudnnHandle_t h = L.cudnn();
  std::lock_guard<std::mutex> lock(cache().mutex);
  return workspace_locked(h, direction, shape, algo, checked_16(type));
}

void conv_forward_16(const Context& ctx, const ConvShape& shape, ConvAlgoId algo, const uint8_t* x,
                     const uint8_t* w, const uint8_t* bias, uint8_t* y, void* workspace, int64_t workspace_bytes,
                     int64_t type) {
  Launch L(ctx);
  forward_one(L, shape, algo, x, w, bias, y, workspace, workspace_bytes, checked_16(type));
}

void conv_backward_data_16(const Context& ctx, const ConvShape& shape, ConvAlgoId algo, const uint8_t* w,
                           const uint8_t* dy, uint8_t* dx, void* workspace, int64_t workspace_bytes, int64_t type) {
  Launch L(ctx);
  backward_data_one(L, shape, algo, w, dy, dx, workspace, workspace_bytes, false, checked_16(type));
}

void conv_backward_filter_16(const Context& ctx, const ConvShape& shape, ConvAlgoId algo, const uint8_t* x,
                             const uint8_t* dy, uint8_t* dw, void* workspace, int64_t workspace_bytes, int64_t type) {
  Launch L(ctx);
  backward_filter_one(L, shape, algo, x, dy, dw, workspace, workspace_bytes, checked_16(type));
}

void conv_forward_micro(const Context& ctx, const ConvShape& shape, MicroBatches micro, const float* x,
                        const float* w, const float* bias, float* y, void* workspace, int64_t workspace_bytes) {
  check_micro(shape, micro);
  Launch L(ctx);
  const int64_t x_image = shape.c * shape.h * shape.w, y_image = shape.k * shape.p() * shape.q();
  int64_t first = 0;
  for (int32_t i = 0; i < micro.count; ++i) {
    const ConvMicroBatch& m = micro.items[i];
    forward_one(L, slice_of(shape, m.n), m.algo, x + first * x_image, w, bias, y + first * y_image, workspace,
                workspace_bytes);
    first += m.n;
  }
}

void conv_backward_data_micro(const Context& ctx, const ConvShape& shape, MicroBatches micro, const float* w,
                              const float* dy, float* dx, void* workspace, int64_t workspace_bytes, bool accumulate) {
  check_micro(shape, micro);
  Launch L(ctx);
  const int64_t x_image = shape.c * shape.h * shape.w, y_image = shape.k * shape.p() * shape.q();
  int64_t first = 0;
  for (int32_t i = 0; i < micro.count; ++i) {
    const ConvMicroBatch& m = micro.items[i];
    backward_data_one(L, slice_of(shape, m.n), m.algo, w, dy + first * y_image, dx + first * x_image, workspace,
                      workspace_bytes, accumulate);
    first += m.n;
  }
}

void conv_backward_filter_micro(const Context& ctx, const ConvShape& shape, MicroBatches micro, const float* x,
                                const float* dy, float* dw, void* workspace, int64_t workspace_bytes) {
  check_micro(shape, micro);
  Launch L(ctx);
  const int64_t x_image = shape.c * shape.h * shape.w, y_image = shape.k * shape.p() * shape.q();
  int64_t first = 0;
  for (int32_t i = 0; i < micro.count; ++i) {
    const ConvMicroBatch& m = micro.items[i];
    // Every slice adds to dw (beta = 1), so the slices sum to the whole batch's gradient.
    backward_filter_one(L, slice_of(shape, m.n), m.algo, x + first * x_image, dy + first * y_image, dw, workspace,
                        workspace_bytes);
    first += m.n;
  }
}

}  // namespace mplan::rt

MPLAN_CUDNN_LEGACY_END
