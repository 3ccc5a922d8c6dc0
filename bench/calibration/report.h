#pragma once
// The calibration bench's report (bench/calibration_bench.cpp): the
// calibration set loaded once, every case predicted under the architecture
// tables, and the error of the predictions as Markdown tables: convolution
// tasks per GPU, direction and algorithm family (median and p90 of
// |predicted/measured - 1|, bias = median predicted/measured), other tasks
// per GPU and op, whole networks per GPU, whether the fastest forward
// algorithm agrees with the measured fastest, the fastest option per
// convolution task, and the ideal iteration of each profiled model against
// the one its measured kernel times give. The bench prints the sections to
// stdout; markdown_report assembles the held-out ones into
// docs/benchmarks-calibration.md.

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bench/calibration/cases.h"
#include "bench/calibration/fit.h"
#include "bench/calibration/kernel_times.h"
#include "core/error.h"

namespace mplan::calibration {

// The calibration set as the bench reads it: the published cases
// (conv_layers.csv, networks.csv) followed by the kernel-time cases
// (kernel_times.csv), the cases' devices with their committed tables, and
// which architectures are fitted on kernel times of their own (fit.h).
struct CalibrationSet {
  std::vector<Case> cases;
  size_t published = 0;  // cases[0, published) are the published ones
  std::vector<KernelTimesFile> files;
  KernelTimesSummary summary;
  LayerSplit split;
  Devices devices;
  std::set<std::string> own;  // architectures with kernel times of their own
  std::vector<Case> shared_cases;                        // the cases of every other architecture
  std::map<std::string, std::vector<Case>> own_cases;    // an own architecture's cases
};

// Reads every file of `data_dir` (paths resolved from `source_dir`); aborts
// on malformed published data (as load_cases does), returns the error of a
// malformed kernel-times file.
Result<CalibrationSet> load_calibration_set(const std::string& data_dir, const std::string& source_dir);

// A case predicted under some tables.
struct Outcome {
  const Case* c;
  double predicted_ms;
  std::string chosen;  // the predicted fastest algorithm (single convolutions)
  double ratio() const { return predicted_ms / c->measured_ms; }
};

// Every case predicted on its device with the source terms (cases.h).
// The outcomes point into `cases`.
std::vector<Outcome> evaluate(const std::vector<Case>& cases, const Devices& devices, const SourceTerms& terms);

// The error of a group of outcomes: |predicted/measured - 1| at the median,
// the 90th percentile (nearest rank) and the maximum; bias is the median of
// predicted/measured. An empty group has NAN figures.
struct Stats {
  size_t n = 0;
  double median_error = NAN, p90_error = NAN, bias = NAN, max_error = NAN;
};
Stats stats(const std::vector<const Outcome*>& outcomes);

// Figures as the tables print them: "12.3%" and "1.04" ("-" for no value).
std::string pct(double v);
std::string num(double v);

// The sections, each appended to `out` as Markdown.
// What the set holds: case counts, the kernel-time files, the split, what
// the kernel times leave out (the bench's opening lines).
void data_summary(std::string& out, const CalibrationSet& set);
// Convolution tasks, other tasks and networks of one split, with the targets
// met or not; `line_prefix` starts each targets line ("- " makes them a list).
void split_report(std::string& out, const std::vector<Outcome>& outcomes, bool holdout,
                  const std::string& line_prefix = "");
// The fastest forward algorithm, predicted against measured, per GPU and
// split; `list_tasks` also lists every task before the summary.
void algorithm_agreement(std::string& out, const std::vector<Outcome>& outcomes, const Devices& devices,
                         bool list_tasks);
// The model's fastest option per kernel-time convolution task against the
// measured fastest.
void fastest_option_error(std::string& out, const std::vector<Outcome>& outcomes);
// The ideal iteration of every profiled model, predicted against measured.
void network_ideals(std::string& out, const std::vector<KernelTimesFile>& files, const LayerSplit& split,
                    const Devices& devices);
// Every case with its prediction.
void case_list(std::string& out, const std::vector<Outcome>& outcomes);

// Per architecture: the held-out error, the text of the tables'
// held_out_error (what `mplan compile` prints). `own`: architectures fitted
// on kernel times of their own; `scaled`: borrowers with speed factors.
std::map<std::string, std::string> held_out_text(const std::vector<Outcome>& outcomes, const Devices& devices,
                                                 const std::set<std::string>& own = {},
                                                 const std::set<std::string>& scaled = {});
// Per architecture: what its table is fitted on, the text of fitted_on.
std::map<std::string, std::string> fitted_on_text(const std::vector<Case>& cases, const Devices& devices,
                                                  const std::set<std::string>& own);

// docs/benchmarks-calibration.md: what the report is, `date` and the
// `command` that made it, then the held-out figures of the outcomes (the set
// predicted with `terms` under the devices' tables). Nothing but the date
// depends on when or where it runs.
std::string markdown_report(const CalibrationSet& set, const SourceTerms& terms, const std::vector<Outcome>& outcomes,
                            const std::string& date, const std::string& command);

}  // namespace mplan::calibration
