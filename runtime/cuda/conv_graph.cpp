// Convolutions through cuDNN's graph API (runtime/cuda/conv_graph.h): one
// operation graph per direction and shape, its heuristics' engine
// configurations finalized into execution plans once, a variant pack per call.

#include "runtime/cuda/conv_graph.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "runtime/cuda/check.h"
#include "runtime/cuda/kernels.h"
#include "runtime/cuda/stream.h"

namespace mplan::rt::cuda {
namespace {

// The plans a graph keeps: the first kGraphAlgorithms configurations that finalize.
constexpr int64_t kHeuristicConfigs = 64;  // the heuristics' list is read this far
constexpr int64_t kAlignment = 16;         // bytes every tensor pointer must be aligned to
constexpr int64_t kX = 'x', kW = 'w', kY = 'y';  // the tensors' unique ids

// A backend descriptor, destroyed with its owner.
class Descriptor {
 public:
  explicit Descriptor(cudnnBackendDescriptorType_t type) { status_ = cudnnBackendCreateDescriptor(type, &d_); }
  ~Descriptor() {
    if (d_ != nullptr) cudnnBackendDestroyDescriptor(d_);
  }
  Descriptor(Descriptor&& other) noexcept : d_(other.d_), status_(other.status_) { other.d_ = nullptr; }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }
  // The first failure of create, set or finalize sticks: later calls do nothing.
  cudnnStatus_t status() const { return status_; }
  Descriptor& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
                  const void* values) {
    if (status_ == CUDNN_STATUS_SUCCESS) status_ = cudnnBackendSetAttribute(d_, name, type, count, values);
    return *this;
  }
  Descriptor& set(cudnnBackendAttributeName_t name, const Descriptor& value) {
    cudnnBackendDescriptor_t raw = value.get();
    if (status_ == CUDNN_STATUS_SUCCESS) status_ = value.status();
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
  }
  cudnnStatus_t finalize() {
    if (status_ == CUDNN_STATUS_SUCCESS) status_ = cudnnBackendFinalize(d_);
    return status_;
  }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
  cudnnStatus_t status_ = CUDNN_STATUS_SUCCESS;
};

Descriptor tensor(int64_t uid, std::array<int64_t, 4> dims) {
  const std::array<int64_t, 4> strides = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
  const cudnnDataType_t type = CUDNN_DATA_FLOAT;
  Descriptor t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type)
      .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data())
      .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data())
      .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid)
      .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &kAlignment)
      .finalize();
  return t;
}

Descriptor convolution(const ConvShape& s) {
  const int64_t dims = 2;
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const std::array<int64_t, 2> dilation = {s.dilation_h, s.dilation_w}, stride = {s.stride_h, s.stride_w},
                               pad = {s.pad_h, s.pad_w};
  Descriptor c(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  c.set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims)
      .set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute)
      .set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode)
      .set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dilation.data())
      .set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride.data())
      .set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad.data())
      .set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad.data())
      .finalize();
  return c;
}

// A direction's operation descriptor and the names of its attributes: the
// tensors x, w and y play input, filter and output, or their gradients.
struct OperationKind {
  cudnnBackendDescriptorType_t type;
  cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
};

OperationKind operation_kind(ConvDirection d) {
  switch (d) {
    case ConvDirection::forward:
      return {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA};
    case ConvDirection::backward_data:
      return {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA};
    case ConvDirection::backward_filter:
      return {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA};
  }
  return operation_kind(ConvDirection::forward);
}

// The convolution operation of a direction over tensors x, w, y, writing its
// output (beta 0) or adding to it (beta 1).
Descriptor operation(ConvDirection d, bool add, const Descriptor& x, const Descriptor& w, const Descriptor& y,
                     const Descriptor& conv) {
  const OperationKind k = operation_kind(d);
  const float alpha = 1.0f, beta = add ? 1.0f : 0.0f;
  Descriptor op(k.type);
  op.set(k.x, x)
      .set(k.w, w)
      .set(k.y, y)
      .set(k.conv, conv)
      .set(k.alpha, CUDNN_TYPE_FLOAT, 1, &alpha)
      .set(k.beta, CUDNN_TYPE_FLOAT, 1, &beta)
      .finalize();
  return op;
}

// Whether an engine configuration suits the math mode: never an engine that
// down-converts its inputs; in fp32 no TF32 tensor-core engine (PyTorch's
// filter when allow_tf32 is off). Nor one that compiles its kernel at run time
// (NVRTC at finalize, seconds each: the profiler and every program would pay
// it for every shape).
bool suits(const Descriptor& config) {
  Descriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t raw = engine.get();
  int64_t count = 0;
  if (engine.status() != CUDNN_STATUS_SUCCESS ||
      cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count,
                               &raw) != CUDNN_STATUS_SUCCESS)
    return false;
  std::array<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT> notes{};
  int64_t noted = 0;
  if (cudnnBackendGetAttribute(raw, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                               static_cast<int64_t>(notes.size()), &noted, notes.data()) != CUDNN_STATUS_SUCCESS)
    return false;
  for (int64_t i = 0; i < noted && i < static_cast<int64_t>(notes.size()); ++i) {
    if (notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS) return false;
    if (notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE && !tf32_enabled()) return false;
  }
  std::array<cudnnBackendBehaviorNote_t, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT> behaviour{};
  int64_t behaved = 0;
  if (cudnnBackendGetAttribute(raw, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                               static_cast<int64_t>(behaviour.size()), &behaved, behaviour.data()) !=
      CUDNN_STATUS_SUCCESS)
    return false;
  for (int64_t i = 0; i < behaved && i < static_cast<int64_t>(behaviour.size()); ++i)
    if (behaviour[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) return false;
  return true;
}

struct Plan {
  Descriptor plan;
  Descriptor config;  // kept with its plan, as cudnn-frontend's ExecutionPlan does
  int64_t workspace_bytes;
};

// What one (direction, shape, math) has: its plans, best first (may be none).
struct Graph {
  std::vector<Plan> plans;
};

// The handle graphs and plans are built with: one of their own, made once and
// never destroyed (a stream's handle dies with its stream, the plans live on;
// the handle a plan runs with is the caller's, which gives it its stream).
cudnnHandle_t build_handle() {
  static cudnnHandle_t handle = [] {
    cudnnHandle_t h = nullptr;
    return cudnnCreate(&h) == CUDNN_STATUS_SUCCESS ? h : nullptr;
  }();
  return handle;
}

// cuDNN before 9.8 requires the operation graph's handle and older releases
// the plan's; both attributes are deprecated since, and only their warning is
// silenced here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
Graph build(ConvDirection d, bool add, const ConvShape& s) {
  Graph g;
  cudnnHandle_t handle = build_handle();
  if (handle == nullptr) return g;
  const Descriptor x = tensor(kX, {s.n, s.c, s.h, s.w});
  const Descriptor w = tensor(kW, {s.k, s.c / s.groups, s.r, s.s});
  const Descriptor y = tensor(kY, {s.n, s.k, s.p(), s.q()});
  const Descriptor conv = convolution(s);
  const Descriptor op = operation(d, add, x, w, y, conv);
  cudnnBackendDescriptor_t raw_op = op.get();
  Descriptor graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  if (op.status() != CUDNN_STATUS_SUCCESS) return g;
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw_op)
      .set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  if (graph.finalize() != CUDNN_STATUS_SUCCESS) return g;
  Descriptor heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  heuristics.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph).set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1,
                                                                  &mode);
  if (heuristics.finalize() != CUDNN_STATUS_SUCCESS) return g;
  int64_t proposed = 0;
  if (cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                               &proposed, nullptr) != CUDNN_STATUS_SUCCESS)
    return g;
  proposed = std::min(proposed, kHeuristicConfigs);
  std::vector<Descriptor> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < proposed; ++i) {
    configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    if (configs.back().status() != CUDNN_STATUS_SUCCESS) return g;
    raw.push_back(configs.back().get());
  }
  int64_t returned = 0;
  if (proposed == 0 || cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                CUDNN_TYPE_BACKEND_DESCRIPTOR, proposed, &returned,
                                                raw.data()) != CUDNN_STATUS_SUCCESS)
    return g;
  for (int64_t i = 0; i < returned && static_cast<int>(g.plans.size()) < kGraphAlgorithms; ++i) {
    if (!suits(configs[static_cast<size_t>(i)])) continue;
    Descriptor plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle)
        .set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, configs[static_cast<size_t>(i)]);
    if (plan.finalize() != CUDNN_STATUS_SUCCESS) continue;
    int64_t bytes = 0, count = 0;
    if (cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &count,
                                 &bytes) != CUDNN_STATUS_SUCCESS ||
        bytes < 0)
      continue;
    g.plans.push_back(Plan{std::move(plan), std::move(configs[static_cast<size_t>(i)]), bytes});
  }
  return g;
}
#pragma GCC diagnostic pop

using Key = std::tuple<int, bool, bool, std::array<int64_t, 14>>;  // direction, adds, tf32, shape

struct Cache {
  std::mutex mutex;
  std::map<Key, Graph> graphs;
};

Cache& cache() {
  static Cache* instance = new Cache;  // plans live until exit, never destroyed after cuDNN's teardown
  return *instance;
}

// The graph of (direction, beta, shape, math), built on first use. Callers hold the mutex.
const Graph& graph_locked(ConvDirection d, bool add, const ConvShape& s) {
  const Key key{static_cast<int>(d), add, tf32_enabled(),
                {s.n, s.c, s.h, s.w, s.k, s.r, s.s, s.stride_h, s.stride_w, s.pad_h, s.pad_w, s.groups, s.dilation_h,
                 s.dilation_w}};
  Cache& c = cache();
  auto it = c.graphs.find(key);
  if (it == c.graphs.end()) it = c.graphs.emplace(key, build(d, add, s)).first;
  return it->second;
}

// The plan of an algorithm id, or null.
const Plan* plan_locked(ConvDirection d, bool add, const ConvShape& s, ConvAlgoId algo) {
  const int r = graph_algorithm_rank(algo);
  if (r < 0 || !s.valid()) return nullptr;
  const Graph& g = graph_locked(d, add, s);
  return r < static_cast<int>(g.plans.size()) ? &g.plans[static_cast<size_t>(r)] : nullptr;
}

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kAlignment == 0; }

// The graph that adds to its output (beta 1): the data gradient's, where its
// call says so. Forward writes; the filter gradient is written (beta 0) into
// scratch after the engine's workspace and added to dw (scratch_bytes).
bool adds(ConvDirection d, bool accumulate) { return d == ConvDirection::backward_data && accumulate; }

// The scratch starts this far into the workspace, rounded up past the
// engine's part: relative to the workspace pointer, which graph_run checks is
// kAlignment-aligned, so the scratch (a tensor declared kAlignment-aligned)
// is too; 256 as cudaMalloc's own alignment, for the engine's part's sake.
constexpr int64_t kScratchAlignment = 256;

int64_t round_up(int64_t bytes, int64_t to) { return (bytes + to - 1) / to * to; }

// The filter gradient's scratch (dw's bytes); none in the other directions.
int64_t scratch_bytes(ConvDirection d, const ConvShape& s) {
  return d == ConvDirection::backward_filter ? s.w_elements() * int64_t{sizeof(float)} : 0;
}
int64_t scratch_offset(const Plan& plan) { return round_up(plan.workspace_bytes, kScratchAlignment); }

// The workspace a plan of this direction needs: the engine's, and the
// filter gradient's scratch after it.
int64_t needed_bytes(const Plan& plan, ConvDirection d, const ConvShape& s) {
  const int64_t scratch = scratch_bytes(d, s);
  return scratch > 0 ? scratch_offset(plan) + scratch : plan.workspace_bytes;
}

}  // namespace

int64_t graph_workspace_bytes(ConvDirection direction, const ConvShape& shape, ConvAlgoId algo) {
  std::lock_guard<std::mutex> lock(cache().mutex);
  const Plan* plan = plan_locked(direction, adds(direction, false), shape, algo);
  int64_t bytes = plan == nullptr ? -1 : needed_bytes(*plan, direction, shape);
  // The data gradient's two graphs (writing, adding) may rank their
  // configurations differently: the larger workspace serves both.
  if (direction == ConvDirection::backward_data)
    if (const Plan* adding = plan_locked(direction, true, shape, algo)) bytes = std::max(bytes, adding->workspace_bytes);
  return bytes;
}

cudnnStatus_t graph_run(cudnnHandle_t handle, ConvDirection direction, const ConvShape& shape, ConvAlgoId algo,
                        bool accumulate, const void* a, const void* b, void* out, void* workspace,
                        int64_t workspace_bytes) {
  const Plan* plan = nullptr;
  {
    std::lock_guard<std::mutex> lock(cache().mutex);
    plan = plan_locked(direction, adds(direction, accumulate), shape, algo);
  }
  if (plan == nullptr) return CUDNN_STATUS_NOT_SUPPORTED;
  const int64_t scratch = scratch_bytes(direction, shape);
  const int64_t needed = needed_bytes(*plan, direction, shape);
  if (needed > workspace_bytes) return CUDNN_STATUS_NOT_SUPPORTED;
  if (!aligned(a) || !aligned(b) || !aligned(out) || (needed > 0 && !aligned(workspace)))
    return CUDNN_STATUS_NOT_SUPPORTED;
  // The filter gradient of this batch goes to the scratch, then adds to dw.
  void* dw_scratch = scratch > 0 ? static_cast<char*>(workspace) + scratch_offset(*plan) : nullptr;
  // The tensors by unique id: x, w, y of the operation.
  const void* x = direction == ConvDirection::backward_data ? out : a;
  const void* w = direction == ConvDirection::backward_filter ? dw_scratch : b;
  const void* y = direction == ConvDirection::forward ? out : direction == ConvDirection::backward_data ? a : b;
  std::array<int64_t, 3> uids = {kX, kW, kY};
  std::array<void*, 3> pointers = {const_cast<void*>(x), const_cast<void*>(w), const_cast<void*>(y)};
  Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids.data())
      .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, pointers.data())
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  if (pack.finalize() != CUDNN_STATUS_SUCCESS) return pack.status();
  const cudnnStatus_t status = cudnnBackendExecute(handle, plan->plan.get(), pack.get());
  if (status != CUDNN_STATUS_SUCCESS || dw_scratch == nullptr) return status;
  cudaStream_t stream = nullptr;
  MPLAN_CUDNN_CHECK(cudnnGetStream(handle, &stream));
  cuda::add(static_cast<const float*>(dw_scratch), static_cast<float*>(out), scratch / int64_t{sizeof(float)}, stream);
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace mplan::rt::cuda
