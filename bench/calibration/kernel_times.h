#pragma once
// Calibration cases from the kernel profiler's result files (format
// "mplan-kernel-times", docs/profile-format.md): per-task times measured on a
// GPU by profiler/kernel_profiler, listed in bench/data/calibration/kernel_times.csv
// with the model that made the jobs, the device file and the math mode.
//
// Each job key is "<task signature>@<sub-batch>"; its shape is read with the
// project's own code: the model's TDFG is built and every task's signature
// (profiler/signature.h) is matched to the key, so a key that is no task of
// the model is refused. Every option of a convolution job is a case of its
// own (the algorithm timed), not only the fastest; another task's one option
// ("default") is a case. Options the analytic model cannot price (an
// algorithm it refuses for the shape), failed jobs and tasks that run no
// kernel are left out and counted.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/calibration/cases.h"
#include "core/error.h"
#include "ops/model.h"
#include "runtime/jobs.h"
#include "tdfg/tdfg.h"

namespace mplan::calibration {

// The split of the profiled layers, fixed by a rule and never by the fit: over
// the models in kernel_times.csv's order, the distinct layer signatures of
// each op (conv, relu, pool, linear, ..., the update) are numbered in the
// order the models' tasks first use them, counting on across files; the
// second of every three (number 1, 4, 7, ...) is held out. A layer is held
// out whole (every task kind, every sub-batch, every algorithm), so the same
// shape at another sub-batch is never in both parts; a signature seen in an
// earlier file keeps its first number.
class LayerSplit {
 public:
  void add_model(const Tdfg& tdfg);
  bool known(const std::string& layer_signature) const { return holdout_.count(layer_signature) > 0; }
  bool holdout(const std::string& layer_signature) const;  // aborts for a layer no model added
  // Layer signatures in the order they were numbered, with their split.
  const std::vector<std::pair<std::string, bool>>& layers() const { return order_; }

 private:
  std::map<std::string, bool> holdout_;
  std::map<std::string, int> per_op_;
  std::vector<std::pair<std::string, bool>> order_;
};

// One row of kernel_times.csv with its model and result file.
struct KernelTimesFile {
  std::string file;        // the result file, relative to the repository
  std::string device;      // examples/devices name
  std::string source;      // who measured what, where (the manifest's text)
  MathMode math = MathMode::fp32;
  std::unique_ptr<Model> model;  // owned here: the TDFG points to it
  Tdfg tdfg;
  rt::ResultFile results;
  std::string gpu;         // the result file's backend.device
  std::string library;     // "cuDNN 9.19.0 (CUDA 13.0)", from the result file's backend
  // kernel_times.csv's split column: "holdout" holds the whole file out (a GPU
  // the fit never sees, so its every case tests the table fitted on another:
  // the H200's against Hopper's fitted on the H100); "layers" (the default)
  // splits it by LayerSplit's rule.
  bool holdout_whole = false;
  // kernel_times.csv's update_job column: "merged" marks a file whose
  // profiler ran the update as one sgd_step over every parameter, not one
  // per weighted layer as the program does; its update
  // time leaves out the launches and is not a case. "per_layer" (the default).
  bool update_merged = false;
};

// Reads a result file's text against its model (what load_kernel_times_files
// does per row; exposed for tests). `file` names it in errors.
Result<KernelTimesFile> parse_kernel_times_file(const std::string& results_text, const std::string& file,
                                                std::unique_ptr<Model> model, const std::string& device,
                                                MathMode math, const std::string& source);

// Every row of <data_dir>/kernel_times.csv, paths resolved from `source_dir`.
Result<std::vector<KernelTimesFile>> load_kernel_times_files(const std::string& data_dir,
                                                             const std::string& source_dir);

// What the cases leave out, for the report.
struct KernelTimesSummary {
  std::map<std::string, int> skipped;  // reason -> options or jobs left out
};

// The cases of one file under the split (the file's model must have been
// added to it). Errors name the file and the job key.
Result<std::vector<Case>> kernel_time_cases(const KernelTimesFile& file, const LayerSplit& split,
                                            KernelTimesSummary* summary = nullptr);

// Every file's cases, the split built over the files in order (returned in
// `split` when given); aborts with the file and key on malformed data (as
// load_cases does).
std::vector<Case> load_kernel_time_cases(const std::vector<KernelTimesFile>& files,
                                         KernelTimesSummary* summary = nullptr, LayerSplit* split = nullptr);

// moDNN's ideal iteration (every task of the model at `batch` with its
// fastest measured option, summed) from the result file, or an error naming
// the first task without a result at that sub-batch.
Result<double> measured_ideal_ms(const KernelTimesFile& file, int64_t batch);

}  // namespace mplan::calibration
