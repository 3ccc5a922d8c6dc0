// Calibration of the analytic cost model against published measurements
// (bench/data/calibration, copied from ../shared/calibration with every row's
// source): convnet-benchmarks' per-network and per-layer cuDNN times on a
// Titan X (Maxwell), and a cudnnFind listing of every algorithm of one small
// layer on a V100. Prints predicted/measured per case and the median error.
// docs/cost-model.md records the result.
//
//   build/bench/calibration_bench [--all-algorithms]
//
// The networks are rebuilt from convnet_benchmarks_model_layers.csv (conv and
// linear followed by ReLU, max-pools, flatten before the classifier, the loss
// last), run as one sub-batch of the benchmark's batch, each task with its
// fastest algorithm (Torch ran with cudnn.benchmark on). The benchmark timed
// no softmax and no dropout, and nn.View is free: the loss and the flatten
// tasks are left out of the sums. Each case picks among the algorithms the
// measured cuDNN release had (R2: the GEMM family only; R3/R4 added FFT; R5
// Winograd); --all-algorithms lets every case use today's full set.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "frontend/parse.h"
#include "profiler/analytic_model.h"
#include "profiler/conv_algorithms.h"
#include "profiler/device.h"
#include "profiler/signature.h"
#include "tdfg/tdfg.h"

namespace {

using namespace mplan;

const std::string kDataDir = std::string(MPLAN_SOURCE_DIR) + "/bench/data/calibration/";

// A CSV file as rows of named fields (quoted fields may hold commas).
using Row = std::map<std::string, std::string>;
std::vector<Row> read_csv(const std::string& name) {
  std::ifstream in(kDataDir + name);
  MPLAN_CHECK(static_cast<bool>(in), "cannot read " + kDataDir + name);
  auto split = [](const std::string& line) {
    std::vector<std::string> fields(1);
    bool quoted = false;
    for (char c : line) {
      if (c == '"') quoted = !quoted;
      else if (c == ',' && !quoted) fields.emplace_back();
      else fields.back() += c;
    }
    return fields;
  };
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> header = split(line);
  std::vector<Row> rows;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const std::vector<std::string> fields = split(line);
    Row row;
    for (size_t i = 0; i < header.size() && i < fields.size(); ++i) row[header[i]] = fields[i];
    rows.push_back(std::move(row));
  }
  return rows;
}

double number(const Row& row, const std::string& key) {
  auto it = row.find(key);
  return it == row.end() || it->second.empty() ? NAN : std::stod(it->second);
}

struct Case {
  std::string name;
  double predicted_ms, measured_ms;
};

bool all_algorithms = false;

// Whether a cuDNN release ("cuDNN R2", "cuDNN R4 (log)") had an algorithm:
// R2 had only the GEMM family (forward implicit/precomputed/explicit GEMM,
// backward algo_0/algo_1); FFT came in R3, FFT tiling and backward-filter
// algo_3 in R4, Winograd in R5 (cuDNN release notes).
bool release_has(const std::string& library, const std::string& algorithm) {
  if (all_algorithms) return true;
  const bool gemm_family = algorithm == "implicit_gemm" || algorithm == "implicit_precomp_gemm" ||
                           algorithm == "gemm" || algorithm == "algo_0" || algorithm == "algo_1";
  if (library.rfind("cuDNN R2", 0) == 0 || library.rfind("cuDNN R1", 0) == 0) return gemm_family;
  if (library.rfind("cuDNN R3", 0) == 0) return gemm_family || algorithm == "fft";
  if (library.rfind("cuDNN R4", 0) == 0)
    return gemm_family || algorithm == "fft" || algorithm == "fft_tiling" || algorithm == "algo_3";
  return true;
}

// The fastest option the release had.
TaskOption fastest(const std::vector<TaskOption>& options, const std::string& library) {
  for (const TaskOption& o : options)
    if (o.algorithm == "default" || release_has(library, o.algorithm)) return o;
  return options.front();
}

// The model YAML of one convnet-benchmarks network.
std::string network_yaml(const std::string& name, const std::vector<Row>& layers) {
  const Row& first = layers.front();
  std::string yaml = fmt::format("name: {}\ninput: [3, {}, {}]\nbatch: {}\nclasses: 1000\nlayers:\n", name,
                                 first.at("H_in"), first.at("W_in"), first.at("batch"));
  bool flattened = false;
  size_t linears = 0, linear_count = 0;
  for (const Row& row : layers) linear_count += row.at("layer_type") == "linear";
  for (const Row& row : layers) {
    const std::string& type = row.at("layer_type");
    if (type == "conv") {
      yaml += fmt::format("  - {{op: conv, out: {}, kernel: {}, stride: {}, pad: {}}}\n  - {{op: relu}}\n",
                          row.at("K_out"), row.at("R"), row.at("stride"), row.at("pad"));
    } else if (type == "maxpool") {
      yaml += fmt::format("  - {{op: pool, mode: max, kernel: {}, stride: {}}}\n", row.at("R"), row.at("stride"));
    } else if (type == "linear") {
      if (!flattened) yaml += "  - {op: flatten}\n";
      flattened = true;
      yaml += fmt::format("  - {{op: linear, out: {}}}\n", row.at("fc_out"));
      if (++linears < linear_count) yaml += "  - {op: relu}\n";
    }
  }
  yaml += "  - {op: softmax_xent}\n";
  return yaml;
}

struct PassTimes {
  double forward = 0, bwd_data = 0, bwd_filter = 0;
};

PassTimes predict_network(const Model& model, const AnalyticCostModel& cost, const std::string& library) {
  const Tdfg tdfg = build_tdfg(model);
  PassTimes times;
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t) {
    const Task& task = tdfg.tasks[t];
    if (task.kind == TaskKind::update || task.op == Op::softmax_xent || task.op == Op::flatten) continue;
    const double ms = fastest(cost.options(tdfg, t, model.batch), library).time_ms;
    if (task.kind == TaskKind::FP) times.forward += ms;
    if (task.kind == TaskKind::BP1) times.bwd_data += ms;
    if (task.kind == TaskKind::BP2) times.bwd_filter += ms;
  }
  return times;
}

void network_cases(const Device& titanx, std::vector<Case>& cases) {
  const std::vector<Row> layer_rows = read_csv("convnet_benchmarks_model_layers.csv");
  std::map<std::string, std::vector<Row>> by_model;
  for (const Row& row : layer_rows) by_model[row.at("model")].push_back(row);
  const AnalyticCostModel cost(titanx);
  for (const Row& row : read_csv("convnet_benchmarks_imagenet.csv")) {
    if (row.at("gpu") != "GeForce GTX TITAN X (Maxwell)" || row.at("precision") != "fp32" ||
        row.at("library") != "cuDNN R4 (log)")
      continue;
    const std::string& name = row.at("model");
    if (!by_model.count(name)) {
      fmt::print("  (skipped {}: no layer table in convnet_benchmarks_model_layers.csv)\n", name);
      continue;
    }
    Result<Model> model = parse_model(network_yaml(name, by_model[name]), name + ".yaml");
    MPLAN_CHECK(model.ok(), model.ok() ? "" : model.error().to_string());
    const PassTimes p = predict_network(*model, cost, row.at("library"));
    const std::string label = fmt::format("{} b={}", name, model->batch);
    cases.push_back({label + " forward", p.forward, number(row, "forward_ms")});
    cases.push_back({label + " backward-data", p.bwd_data, number(row, "bwd_data_ms")});
    cases.push_back({label + " backward-filter", p.bwd_filter, number(row, "bwd_filter_ms")});
    cases.push_back({label + " total", p.forward + p.bwd_data + p.bwd_filter, number(row, "total_ms")});
  }
}

double conv_time(const Device& device, ConvDirection direction, const ConvShape& shape, int64_t b,
                 const std::string& library) {
  std::vector<TaskOption> options;
  for (const std::string& algorithm : conv_algorithm_names(direction)) {
    if (!conv_supported(direction, algorithm, shape)) continue;
    double ms = 0;
    for (const KernelWork& w : conv_work(direction, algorithm, shape, b)) ms += kernel_time_ms(device, w);
    options.push_back({algorithm, ms, 0});
  }
  std::sort(options.begin(), options.end(), [](auto& a, auto& b2) { return a.time_ms < b2.time_ms; });
  return fastest(options, library).time_ms;
}

void layer_cases(const Device& titanx, std::vector<Case>& cases) {
  for (const Row& row : read_csv("convnet_benchmarks_layerwise.csv")) {
    if (row.at("gpu") != "GeForce GTX TITAN X (Maxwell)") continue;
    const ConvShape shape =
        make_conv_shape(std::stoll(row.at("C")), std::stoll(row.at("H")), std::stoll(row.at("W")),
                        std::stoll(row.at("K")), std::stoll(row.at("R")), std::stoll(row.at("S")),
                        std::stoll(row.at("stride")), std::stoll(row.at("pad")), 1, true);
    const int64_t b = std::stoll(row.at("N"));
    const std::string& phase = row.at("phase");
    double predicted = 0;
    const std::string& library = row.at("library");
    if (phase == "forward") predicted = conv_time(titanx, ConvDirection::forward, shape, b, library);
    else if (phase.rfind("backward", 0) == 0)
      predicted = conv_time(titanx, ConvDirection::backward_data, shape, b, library) +
                  conv_time(titanx, ConvDirection::backward_filter, shape, b, library);
    else continue;
    cases.push_back({fmt::format("layer {} ({}) {} [{}]", row.at("layer"), row.at("library"), phase,
                                 "TitanX"), predicted, number(row, "time_ms")});
  }
}

// The cudnnFind listing: time (launch-bound) and workspace of every algorithm.
void algorithm_listing(const Device& v100, std::vector<Case>& time_cases, std::vector<Case>& workspace_cases) {
  for (const Row& row : read_csv("cudnn_per_algo_mnistcudnn.csv")) {
    if (row.at("precision") != "fp32" || row.at("direction") != "forward") continue;
    const ConvShape shape =
        make_conv_shape(std::stoll(row.at("C")), std::stoll(row.at("H")), std::stoll(row.at("W")),
                        std::stoll(row.at("K")), std::stoll(row.at("R")), std::stoll(row.at("S")),
                        std::stoll(row.at("stride")), std::stoll(row.at("pad")), 1, false);
    std::string algorithm = row.at("algo_name");
    std::transform(algorithm.begin(), algorithm.end(), algorithm.begin(), ::tolower);
    const int64_t b = std::stoll(row.at("N"));
    const std::string label = fmt::format("mnistCUDNN conv1 {} [{}]", algorithm, row.at("software"));
    if (!conv_supported(ConvDirection::forward, algorithm, shape)) {
      fmt::print("  {}: the model refuses it: {}\n", label,
                 *conv_unsupported_reason(ConvDirection::forward, algorithm, shape));
      continue;
    }
    double ms = 0;
    for (const KernelWork& w : conv_work(ConvDirection::forward, algorithm, shape, b)) ms += kernel_time_ms(v100, w);
    time_cases.push_back({label, ms, number(row, "time_ms")});
    workspace_cases.push_back({label, static_cast<double>(conv_workspace_bytes(ConvDirection::forward, algorithm,
                                                                               shape, b)),
                               number(row, "workspace_bytes")});
  }
}

double median(std::vector<double> values) {
  if (values.empty()) return NAN;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// Prints the cases and returns the median of |predicted/measured - 1|.
double report(const std::string& title, const std::vector<Case>& cases, const char* unit) {
  fmt::print("\n{}\n", title);
  fmt::print("  {:<58} {:>12} {:>12} {:>8}\n", "case", fmt::format("predicted{}", unit),
             fmt::format("measured{}", unit), "ratio");
  std::vector<double> errors;
  for (const Case& c : cases) {
    const double ratio = c.predicted_ms / c.measured_ms;
    if (c.measured_ms > 0) errors.push_back(std::abs(ratio - 1));
    fmt::print("  {:<58} {:>12.4g} {:>12.4g} {:>8.2f}\n", c.name, c.predicted_ms, c.measured_ms, ratio);
  }
  const double m = median(errors);
  fmt::print("  median |predicted/measured - 1| over {} cases: {:.1f}%\n", errors.size(), 100 * m);
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--all-algorithms") all_algorithms = true;
  auto titanx = load_device("titanx");
  auto v100 = load_device("v100");
  MPLAN_CHECK(titanx.ok() && v100.ok(), "calibration_bench: cannot load examples/devices/titanx.yaml or v100.yaml");
  fmt::print("Calibration of the analytic cost model ({})\n",
             all_algorithms ? "every case may use all of today's cuDNN algorithms"
                            : "each case limited to the algorithms of the measured cuDNN release");

  std::vector<Case> networks, layers, listing_time, listing_workspace;
  network_cases(*titanx, networks);
  layer_cases(*titanx, layers);
  algorithm_listing(*v100, listing_time, listing_workspace);

  const double network_error =
      report("Networks, Titan X (Maxwell), cuDNN R4 fp32 (convnet-benchmarks output.log), ms", networks, " ms");
  const double layer_error = report("Single layers, Titan X (Maxwell), cuDNN R2 (convnet-benchmarks README), ms",
                                    layers, " ms");
  std::vector<Case> all = networks;
  all.insert(all.end(), layers.begin(), layers.end());
  const double time_error = report("All Titan X time cases", all, " ms");
  report("cudnnFind listing, V100, mnistCUDNN conv1 (launch-bound: fixed costs), ms", listing_time, " ms");
  const double workspace_error = report("cudnnFind listing, V100, workspace bytes", listing_workspace, " B");

  fmt::print("\nsummary: median error networks {:.1f}%, layers {:.1f}%, all Titan X time cases {:.1f}%, "
             "workspace {:.1f}%\n",
             100 * network_error, 100 * layer_error, 100 * time_error, 100 * workspace_error);
  return 0;
}
