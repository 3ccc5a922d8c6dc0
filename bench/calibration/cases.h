#pragma once
// The calibration set of bench/calibration_bench as cases the analytic model
// can predict: single convolution tasks (bench/data/calibration/conv_layers.csv),
// whole networks (networks.csv) and the kernel profiler's per-task times
// (kernel_times.csv, bench/calibration/kernel_times.h), each with its GPU,
// cuDNN release, math mode, measured time and split (fit or holdout). The work
// of every case is computed once; predicting it again under other
// architecture tables (the fit) only re-times the kernels.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ops/model.h"
#include "profiler/conv_algorithms.h"
#include "profiler/device.h"
#include "profiler/math_mode.h"
#include "profiler/signature.h"

namespace mplan::calibration {

// A CSV file as rows of named fields (quoted fields may hold commas and "").
using Row = std::map<std::string, std::string>;
std::vector<Row> read_csv(const std::string& path);

// Whether a cuDNN release ("cuDNN R2", "cuDNN 5.1", "cuDNN 7.4.2 (CUDA 10.1)")
// had an algorithm in a direction (cuDNN release notes): R1/R2 the GEMM family,
// R3 FFT, R4 FFT tiling and backward-filter algo_3, 5.0 Winograd, 5.1
// non-fused Winograd, 6 backward-filter FFT tiling.
bool library_has(const std::string& library, ConvDirection direction, const std::string& algorithm);
// 1, 2, 3 for cuDNN R1-R3 (whose kernels the fit gives a speed factor of
// their own, per architecture), 0 for R4 and later.
int old_release(const std::string& library);

// What the sources of the data add that the product's model has no term for,
// fitted on the fit split (fit.h) and never written to a table:
//   "<architecture>.R<n>" (release_key): the time multiplier of an old
//     release's convolutions on that architecture (absent: 1). A release
//     candidate is a release of its own ("maxwell.R3-rc1": convnet-benchmarks
//     timed its single layers with R3-rc1, its networks with R3);
//   "host.<framework>" (host_key): the framework's own host work per task, in
//     µs, on top of the launches and cuDNN calls the model prices (absent: 0).
//     PyTorch 0.3 runs each op from Python, and at batch 16 in FP16 its GPU
//     waits for it; mplan's generated program has no such term.
using SourceTerms = std::map<std::string, double>;
std::string release_key(const std::string& architecture, const std::string& library);
std::string host_key(const std::string& framework);

// One way to run a convolution task: its algorithm and its kernels.
struct ConvOption {
  std::string algorithm;
  ConvFamily family{};
  std::vector<KernelWork> phases;
  int64_t workspace_bytes = 0;
};

// A convolution task: every option the case's cuDNN release had.
struct ConvTask {
  ConvShape shape;
  ConvDirection direction{};
  int64_t batch = 1;
  std::vector<ConvOption> options;
};

// One algorithm of a convolution task (the model must support it).
ConvOption conv_option(ConvDirection direction, const std::string& algorithm, const ConvShape& shape, int64_t batch);
// Every option of a convolution task the release had (library_has) and the
// model supports.
ConvTask conv_task(const ConvShape& shape, ConvDirection direction, int64_t batch, const std::string& library);
// The predicted time of one option (its kernels) in a math mode, timed alone
// from an idle stream (kernel_work.h, StreamState).
double option_ms(const ConvOption& option, const Device& device, MathMode math);

// Another task of a network (pool, relu, batch norm, linear, update...).
struct OtherTask {
  TaskShape shape;
  int64_t batch = 1;
};

// What a case times: one convolution task (one algorithm, or the library's
// fastest), one other task (pool, ReLU, batch norm, linear, update...), or
// a whole network's pass.
enum class CaseKind { conv_task, other_task, network };
const char* case_kind_name(CaseKind kind);  // "conv tasks", "other tasks", "networks"

struct Case {
  std::string device;     // examples/devices name
  std::string gpu;        // as the source names it
  std::string library;    // cuDNN release
  std::string label;      // for the report
  std::string source;
  MathMode math = MathMode::fp32;
  double measured_ms = 0;
  bool holdout = false;
  CaseKind kind = CaseKind::conv_task;
  int release = 0;        // old_release(library)
  // The unit of the split (a layer is held out whole, at every sub-batch):
  // conv_layers.csv's layer, a layer signature, a network's model.
  std::string layer;
  // The measured task: cases that time options of one task share it
  // ("L1 forward", "<task signature>@<sub-batch>").
  std::string task;
  bool kernel_times = false;  // from the kernel profiler's result files (kernel_times.h), not a publication
  // Kernel profiler cases: the algorithm the source measured fastest for the
  // task, among every option it timed (also those the model refuses).
  std::string measured_fastest;
  // A single convolution: `algorithm` is "fastest" (the library's fastest
  // option was timed) or the algorithm measured.
  std::string algorithm = "fastest";
  // The tasks summed (networks: each unique task with its multiplicity).
  std::vector<std::pair<ConvTask, double>> convs;
  std::vector<std::pair<OtherTask, double>> others;
  double extra_copy_bytes = 0;  // weights to the GPU and gradients back each step (TensorFlow parameter server)
  // The framework's cap on one convolution call's cuDNN workspace: its
  // autotuner never runs an algorithm that needs more (0: no cap).
  int64_t workspace_limit_bytes = 0;
  // networks.csv's framework ("" for a single layer or kernel times).
  std::string framework;
  // How the source timed the tasks (kernel_work.h): a training loop or a
  // layer run in a loop keeps the stream busy; the kernel profiler times
  // each task from an idle stream.
  StreamState stream = StreamState::busy;
};

// The workspace cap of a framework as networks.csv names it: TensorFlow's
// default TF_CUDNN_WORKSPACE_LIMIT_IN_MB, 4 GiB (1LL << 32 bytes in its
// conv_ops); 0 (none) for the others, whose limit is the free memory.
int64_t framework_workspace_limit_bytes(const std::string& framework);

// Reads conv_layers.csv and networks.csv of `data_dir` (models resolved from
// `source_dir`); aborts with the file and row on malformed data.
std::vector<Case> load_cases(const std::string& data_dir, const std::string& source_dir);

// The predicted time of a case on `device` (whose architecture table is the
// one to use): each task's device and host work (kernel_work.h) met as the
// case's stream state says, each convolution task at its fastest option
// within the case's workspace cap; the release factor of the case's
// architecture and release multiplies its convolutions' device work, and the
// framework's host term adds to every task's host work. `chosen` receives the algorithm of the
// fastest option of a single-conv case.
double predict_ms(const Case& c, const Device& device, const SourceTerms& terms, std::string* chosen = nullptr);

}  // namespace mplan::calibration
