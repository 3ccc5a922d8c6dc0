// Calibration of the analytic cost model against measurements: published ones
// (bench/data/calibration: every row with its source; README.md there lists
// them) and the kernel profiler's per-task times on GPUs the project ran on
// (kernel_times.csv there: bench/data/gpu's result files), split once and for
// all into a fit part and a held-out part (the CSVs' `split` column; for the
// kernel times a rule over whole layers, bench/calibration/kernel_times.h).
// Reports the error of the committed architecture tables
// (examples/devices/architectures/*.yaml) on both parts: convolution tasks
// per GPU, direction and algorithm family (median and p90 of
// |predicted/measured - 1|, bias = median predicted/measured), other tasks
// per GPU and op, whole networks per GPU, whether the fastest forward
// algorithm agrees with the measured fastest, and the ideal iteration of each
// profiled model against the one its measured kernel times give
// (bench/calibration/report.h). docs/cost-model.md describes the model and
// the calibration; docs/benchmarks-calibration.md is the held-out report.
//
//   build/bench/calibration_bench               # evaluate the committed tables
//   build/bench/calibration_bench --fit         # refit on the fit split, evaluate the fit
//   build/bench/calibration_bench --fit --write # ... and rewrite the tables
//   build/bench/calibration_bench --cases       # also print every case
//   build/bench/calibration_bench --markdown docs/benchmarks-calibration.md
//                                               # also write the held-out report
//
// The fit is bench/calibration/fit.h: a robust (soft L1) regression in log
// space over a few parameters per architecture; an architecture with kernel times of its own
// (hopper) is fitted on them alone. Old cuDNN releases (R1-R3) get a speed
// factor of their own, refitted on the fit split in every run (it is no part
// of the product's tables). Baidu DeepBench and Justin Johnson's
// cnn-benchmarks are deliberately not in the set: they are the independent check.

#include <fmt/format.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bench/calibration/cases.h"
#include "bench/calibration/fit.h"
#include "bench/calibration/kernel_times.h"
#include "bench/calibration/report.h"

namespace {

using namespace mplan;
using namespace mplan::calibration;

const std::string kSourceDir = MPLAN_SOURCE_DIR;
const std::string kDataDir = kSourceDir + "/bench/data/calibration";

// Today's date (UTC), the report's date line.
std::string today() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[16];
  std::strftime(text, sizeof text, "%Y-%m-%d", &utc);
  return text;
}

// The command that writes `path`, as run from the repository root: the path
// relative to it when it lies inside, so that the report reads the same
// wherever it was written from.
std::string markdown_command(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::path file = fs::weakly_canonical(fs::absolute(path), error);
  const fs::path root = fs::weakly_canonical(fs::path(kSourceDir), error);
  std::string shown = path;
  const fs::path relative = file.lexically_relative(root);
  if (!error && !relative.empty() && *relative.begin() != "..") shown = relative.generic_string();
  return "build/bench/calibration_bench --markdown " + shown;
}

}  // namespace

int main(int argc, char** argv) {
  bool do_fit = false, write = false, list_cases = false;
  std::string markdown;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--fit") do_fit = true;
    else if (arg == "--write") write = true;
    else if (arg == "--cases") list_cases = true;
    else if (arg == "--markdown") {
      if (i + 1 == argc) {
        fmt::print(stderr, "calibration_bench: --markdown needs a file\n");
        return 2;
      }
      markdown = argv[++i];
    } else {
      fmt::print(stderr, "calibration_bench: unknown argument '{}' (expected --fit, --write, --cases, --markdown FILE)\n",
                 arg);
      return 2;
    }
  }
  if (write && !do_fit) {
    fmt::print(stderr, "calibration_bench: --write needs --fit\n");
    return 2;
  }
  if (!markdown.empty() && do_fit) {
    fmt::print(stderr, "calibration_bench: --markdown reports the committed tables: run --fit --write first, then "
                       "--markdown alone\n");
    return 2;
  }
  Result<CalibrationSet> loaded = load_calibration_set(kDataDir, kSourceDir);
  if (!loaded) {
    fmt::print(stderr, "calibration_bench: {}\n", loaded.error().to_string());
    return 1;
  }
  const CalibrationSet& set = *loaded;
  const std::vector<Case>& cases = set.cases;
  const std::set<std::string>& own = set.own;
  Devices devices = set.devices;

  std::string text = "# Calibration of the analytic cost model\n\n";
  data_summary(text, set);
  fmt::print("{}", text);

  SourceTerms terms;
  if (do_fit) {
    Params p = fit(set.shared_cases, devices);
    for (const std::string& arch : own) fit_own_table(set.own_cases.at(arch), devices, p, arch);
    calibration::apply(p, devices);
    terms = p.source;
    if (write) {
      // The files hold 4 significant digits: their held_out_error is the
      // error of the tables as written and read back, not of the unrounded fit.
      const auto fitted_on = fitted_on_text(cases, devices, own);
      write_arch_files(p, devices, fitted_on, {});
      devices = load_case_devices(cases);
      const std::vector<Outcome> outcomes = evaluate(cases, devices, terms);
      std::set<std::string> scaled;
      for (const auto& [arch, factors] : p.speed) scaled.insert(arch);
      write_arch_files(p, devices, fitted_on, held_out_text(outcomes, devices, own, scaled));
    }
  } else {
    terms = fit_source_terms(set.shared_cases, devices);
  }
  fmt::print("\nOld cuDNN releases' kernel speed factors (time multipliers, fitted on the fit split):");
  for (const auto& [key, factor] : terms)
    if (key.rfind("host.", 0) != 0) fmt::print(" {} {:.2f};", key, factor);
  fmt::print("\nFrameworks' host work per task beyond the model's launches and calls (µs, fitted on the fit split):");
  for (const auto& [key, us] : terms)
    if (key.rfind("host.", 0) == 0) fmt::print(" {}: {:.1f};", key.substr(5), us);
  fmt::print("\n");
  const std::vector<Outcome> outcomes = evaluate(cases, devices, terms);
  text.clear();
  split_report(text, outcomes, true);
  split_report(text, outcomes, false);
  algorithm_agreement(text, outcomes, devices, list_cases);
  fastest_option_error(text, outcomes);
  network_ideals(text, set.files, set.split, devices);
  text += "\n## Held-out error per architecture (the tables' held_out_error)\n\n";
  for (const auto& [arch, line] : held_out_text(outcomes, devices, own)) text += fmt::format("- {}: {}\n", arch, line);
  text += "\n## Kernel-time layers held out\n\n";
  for (const auto& [layer, holdout] : set.split.layers())
    if (holdout) text += fmt::format("- {}\n", layer);
  if (list_cases) case_list(text, outcomes);
  fmt::print("{}", text);

  if (!markdown.empty()) {
    const std::string report = markdown_report(set, terms, outcomes, today(), markdown_command(markdown));
    std::ofstream out(markdown, std::ios::binary);
    if (!out || !(out << report) || !out.flush()) {
      fmt::print(stderr, "calibration_bench: cannot write {}\n", markdown);
      return 1;
    }
    fmt::print("\nwrote {}\n", markdown);
  }
  return 0;
}
