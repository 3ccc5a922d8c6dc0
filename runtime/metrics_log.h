#pragma once
// The run's metrics as JSON lines (`train --log FILE`; docs/generated-program.md,
// "The metrics log"): one object per step, appended, so that a resumed run
// continues the file of the run it resumes. tools/plot_log.py draws them.

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace mplan::rt {

struct StepMetrics {
  int64_t step = 0;   // 1-based, counted over the whole run (resumes included)
  int64_t epoch = 0;  // 1-based; 0: the run has no epochs
  double loss = 0;
  double lr = 0;
  double ms = 0;
  double samples_per_s = 0;
  std::optional<double> loss_scale;  // fp16 programs
  bool update_skipped = false;       // fp16: a gradient was not finite
  std::optional<double> gradient_norm;  // --clip-grad-norm: the global norm before clipping
};

// An evaluation on the --val data after `step` updates.
struct ValidationMetrics {
  int64_t step = 0;
  int64_t epoch = 0;  // 0: the run has no epochs
  double loss = 0;
  double top1 = 0;  // fractions in [0, 1]
  double top5 = 0;
  int64_t samples = 0;
};

// One line of JSON (no newline): {"step": 3, "epoch": 1, "loss": 2.30258512, ...};
// a value that is not finite is null.
std::string step_metrics_json(const StepMetrics& m);
// {"step": 100, "epoch": 4, "val_loss": 0.1234, "val_top1": 0.972, "val_top5": 0.999, "val_samples": 360}
std::string validation_metrics_json(const ValidationMetrics& m);

class MetricsLog {
 public:
  MetricsLog() = default;
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  ~MetricsLog();

  // Opens path for appending (created if missing). False, with *error, when
  // it is a folder or cannot be written.
  bool open(const std::string& path, std::string* error);
  bool is_open() const { return file_ != nullptr; }
  // Appends the line and flushes it, so that a killed run leaves whole
  // lines. A write that fails is remembered (error()); training goes on.
  void write(const StepMetrics& m);
  void write(const ValidationMetrics& m);
  const std::string& error() const { return error_; }

 private:
  void append(const std::string& line, int64_t step);
  std::FILE* file_ = nullptr;
  std::string path_;
  std::string error_;
};

}  // namespace mplan::rt
