// The calibration bench's held-out report (bench/calibration/report.h, the
// text of docs/benchmarks-calibration.md): on the committed data it has every
// section and table, a row for every held-out network, kernel-time file,
// held-out layer, architecture and device file, and its figures are the ones
// the bench's functions give, recomputed here without the report's code.

#include "bench/calibration/report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "profiler/device.h"

namespace mplan::calibration {
namespace {

const std::string kSource = MPLAN_SOURCE_DIR;
const std::string kData = kSource + "/bench/data/calibration";
const char* const kDate = "2000-01-01";
const char* const kCommand = "build/bench/calibration_bench --markdown docs/benchmarks-calibration.md";

// The committed set evaluated as the bench evaluates it, and its report. Built
// once, in place: the outcomes point into the set's cases.
struct Committed {
  CalibrationSet set;
  SourceTerms terms;
  std::vector<Outcome> outcomes;
  std::string markdown;
};

const Committed& committed() {
  static const std::unique_ptr<Committed> c = [] {
    auto made = std::make_unique<Committed>();
    Result<CalibrationSet> set = load_calibration_set(kData, kSource);
    EXPECT_TRUE(set.ok()) << (set.ok() ? "" : set.error().to_string());
    if (!set.ok()) return made;
    made->set = std::move(set).value();
    made->terms = fit_source_terms(made->set.shared_cases, made->set.devices);
    made->outcomes = evaluate(made->set.cases, made->set.devices, made->terms);
    made->markdown = markdown_report(made->set, made->terms, made->outcomes, kDate, kCommand);
    return made;
  }();
  return *c;
}

std::string format(const char* pattern, auto... args) {
  char text[512];
  std::snprintf(text, sizeof text, pattern, args...);
  return text;
}

// The text of a section: from its heading to the next "## " heading.
std::string section(const std::string& markdown, const std::string& heading) {
  const size_t start = markdown.find("\n## " + heading + "\n");
  if (start == std::string::npos) return "";
  const size_t end = markdown.find("\n## ", start + 1);
  return markdown.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

// Lines of `text` that start with `prefix`.
int count_lines(const std::string& text, const std::string& prefix) {
  int n = 0;
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find('\n', at), text.size());
    n += text.compare(at, prefix.size(), prefix) == 0;
    at = end + 1;
  }
  return n;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The 90th percentile by nearest rank: the ceil(0.9 n)-th smallest.
double p90(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(0.9 * static_cast<double>(v.size())));
  return v[std::max<size_t>(rank, 1) - 1];
}

TEST(CalibrationReport, HasItsHeaderEverySectionAndEveryTablesHeader) {
  const std::string& md = committed().markdown;
  ASSERT_FALSE(md.empty());
  EXPECT_EQ(md.rfind("# Calibration: held-out error of the analytic cost model\n", 0), 0u);
  EXPECT_NE(md.find(std::string("\nDate: ") + kDate + "\n"), std::string::npos);
  EXPECT_NE(md.find(std::string("`") + kCommand + "`"), std::string::npos);
  for (const char* heading :
       {"The calibration set", "Source terms", "Held-out error per architecture", "Devices",
        "Convolution tasks, held-out split, by GPU, direction and algorithm family",
        "Other tasks, held-out split, by GPU and task", "Whole networks, held-out split",
        "Fastest forward algorithm, predicted against measured",
        "Fastest option per convolution task (kernel times), predicted against measured",
        "Ideal iteration of the profiled models (kernel times), predicted against measured",
        "Kernel-time layers held out"})
    EXPECT_FALSE(section(md, heading).empty()) << heading;
  // The held-out report: no section of the fit split.
  EXPECT_EQ(md.find("fit split,"), std::string::npos);
  for (const char* header : {
           "| result file | model | GPU | library | math | split |\n|---|---|---|---|---|---|\n",
           "| term | value |\n|---|---|\n",
           "| device | GPU | architecture | fit cases | held-out cases |\n|---|---|---|---|---|\n",
           "| GPU | direction | family | cases | median error | p90 error | bias |\n|---|---|---|---|---|---|---|\n",
           "| GPU | direction | cases | median error | p90 error | bias |\n|---|---|---|---|---|---|\n",
           "| GPU | conv cases | median error | p90 error | bias |\n|---|---|---|---|---|\n",
           "| GPU | task | cases | median error | p90 error | bias |\n|---|---|---|---|---|---|\n",
           "| GPU | library | network and pass | predicted ms | measured ms | ratio |\n|---|---|---|---|---|---|\n",
           "| GPU | network cases | median error | max error | bias |\n|---|---|---|---|---|\n",
           "| GPU | split | direction | tasks | median error | p90 error | bias |\n|---|---|---|---|---|---|---|\n",
       })
    EXPECT_NE(md.find(header), std::string::npos) << header;
  EXPECT_NE(md.find("\n- targets (held-out, published): "), std::string::npos);
  EXPECT_NE(md.find("\n- targets (held-out, kernel times): "), std::string::npos);
}

TEST(CalibrationReport, ListsEveryHeldOutNetworkFileLayerArchitectureAndDevice) {
  const Committed& c = committed();
  const std::string networks = section(c.markdown, "Whole networks, held-out split");
  int held_out = 0;
  for (const Case& k : c.set.cases) {
    if (k.kind != CaseKind::network) continue;
    const std::string row = "| " + k.device + " | " + k.library + " | " + k.label + " | ";
    EXPECT_EQ(networks.find(row) != std::string::npos, k.holdout) << row;
    held_out += k.holdout;
  }
  EXPECT_GT(held_out, 30);
  // One row per held-out network in the first table, then one per GPU and the total.
  const std::string first_table = networks.substr(0, networks.find("| GPU | network cases |"));
  EXPECT_EQ(count_lines(first_table, "| ") - 1, held_out);  // less the header

  const std::string set = section(c.markdown, "The calibration set");
  ASSERT_FALSE(c.set.files.empty());
  for (const KernelTimesFile& f : c.set.files)
    EXPECT_NE(set.find("| " + f.file + " | " + f.model->name + " | " + f.gpu + " | "), std::string::npos) << f.file;

  const std::string layers = section(c.markdown, "Kernel-time layers held out");
  int held_layers = 0;
  for (const auto& [layer, holdout] : c.set.split.layers()) {
    EXPECT_EQ(layers.find("- `" + layer + "`\n") != std::string::npos, holdout) << layer;
    held_layers += holdout;
  }
  EXPECT_EQ(count_lines(layers, "- `"), held_layers);

  const std::string architectures = section(c.markdown, "Held-out error per architecture");
  for (const char* arch : {"kepler", "maxwell", "pascal", "volta", "ampere", "hopper", "turing", "ada"})
    EXPECT_EQ(count_lines(architectures, std::string("- ") + arch + ": "), 1) << arch;

  const std::string devices = section(c.markdown, "Devices");
  for (const std::string& name : available_devices())
    EXPECT_EQ(count_lines(devices, "| " + name + " | "), 1) << name;
}

// The figures, recomputed from the cases with predict_ms and this file's own
// median and percentile: a writer that prints another case's figures, rounds
// otherwise or groups otherwise fails here.
TEST(CalibrationReport, FiguresAreWhatTheBenchsFunctionsCompute) {
  const Committed& c = committed();
  const std::string& md = c.markdown;
  const std::string networks = section(md, "Whole networks, held-out split");
  std::vector<double> network_errors, network_ratios;
  std::map<std::string, std::vector<double>> conv_errors, conv_ratios;  // held-out conv tasks per GPU
  for (const Case& k : c.set.cases) {
    if (!k.holdout || k.kind == CaseKind::other_task) continue;
    const double predicted = predict_ms(k, c.set.devices.at(k.device), c.terms);
    const double ratio = predicted / k.measured_ms;
    if (k.kind == CaseKind::conv_task) {
      conv_errors[k.device].push_back(std::abs(ratio - 1));
      conv_ratios[k.device].push_back(ratio);
      continue;
    }
    network_errors.push_back(std::abs(ratio - 1));
    network_ratios.push_back(ratio);
    const std::string row = format("| %s | %s | %s | %.1f | %.1f | %.2f |\n", k.device.c_str(), k.library.c_str(),
                                   k.label.c_str(), predicted, k.measured_ms, ratio);
    EXPECT_NE(networks.find(row), std::string::npos) << row;
  }
  ASSERT_FALSE(network_errors.empty());
  const std::string all_networks =
      format("| **all** | %zu | **%.1f%%** | **%.1f%%** | %.2f |\n", network_errors.size(),
             100 * median(network_errors), 100 * *std::max_element(network_errors.begin(), network_errors.end()),
             median(network_ratios));
  EXPECT_NE(networks.find(all_networks), std::string::npos) << all_networks;

  const std::string conv = section(md, "Convolution tasks, held-out split, by GPU, direction and algorithm family");
  ASSERT_GE(conv_errors.size(), 3u);
  for (const auto& [gpu, errors] : conv_errors) {
    const std::string row = format("| %s | %zu | %.1f%% | %.1f%% | %.2f |\n", gpu.c_str(), errors.size(),
                                   100 * median(errors), 100 * p90(errors), median(conv_ratios.at(gpu)));
    EXPECT_NE(conv.find(row), std::string::npos) << row;
  }

  // The source terms, as fitted (the old releases' factors and the hosts' terms).
  const std::string terms = section(md, "Source terms");
  ASSERT_FALSE(c.terms.empty());
  for (const auto& [key, value] : c.terms) {
    const std::string row = key.rfind("host.", 0) == 0
                                ? format("| host work per task, %s | %.1f µs |\n", key.substr(5).c_str(), value)
                                : format("| speed factor %s | %.2f |\n", key.c_str(), value);
    EXPECT_NE(terms.find(row), std::string::npos) << row;
  }
}

// Everything but the date line follows from the committed files.
TEST(CalibrationReport, TheSameDataMakeTheSameReportButForTheDate) {
  const Committed& c = committed();
  std::string again = markdown_report(c.set, c.terms, c.outcomes, "2111-11-11", kCommand);
  const size_t at = again.find("Date: 2111-11-11\n");
  ASSERT_NE(at, std::string::npos);
  again.replace(at, std::string("Date: 2111-11-11").size(), std::string("Date: ") + kDate);
  EXPECT_EQ(again, c.markdown);
}

}  // namespace
}  // namespace mplan::calibration
