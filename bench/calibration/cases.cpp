// The calibration set as cases (cases.h).

#include "bench/calibration/cases.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <sstream>

#include "frontend/parse.h"
#include "profiler/analytic_model.h"
#include "profiler/kernel_work.h"
#include "tdfg/tdfg.h"

namespace mplan::calibration {
namespace {

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '"') {
      if (quoted && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else {
        quoted = !quoted;
      }
    } else if (c == ',' && !quoted) {
      fields.emplace_back();
    } else if (c != '\r') {
      fields.back() += c;
    }
  }
  return fields;
}

const std::string& field(const Row& row, const std::string& key, const std::string& file) {
  auto it = row.find(key);
  MPLAN_CHECK(it != row.end(), fmt::format("{}: a row has no '{}'", file, key));
  return it->second;
}

int64_t integer(const Row& row, const std::string& key, const std::string& file) {
  return std::stoll(field(row, key, file));
}

bool has_flag(const std::string& flags, const std::string& flag) {
  std::stringstream in(flags);
  std::string item;
  while (std::getline(in, item, ','))
    if (item == flag) return true;
  return false;
}

MathMode math_of(const std::string& flags) {
  for (const char* mode : {"tf32", "fp16", "bf16"})
    if (has_flag(flags, std::string("math=") + mode)) return *parse_math_mode(mode);
  return MathMode::fp32;
}

// The model YAML of one convnet-benchmarks network from its layer table:
// conv and linear followed by ReLU, max-pools, flatten before the classifier,
// the loss last (the benchmark times no loss; the case leaves it out).
std::string convnet_benchmarks_yaml(const std::string& name, const std::vector<Row>& layers) {
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

Model load_network(const std::string& spec, const std::string& data_dir, const std::string& source_dir) {
  if (spec.rfind("cb:", 0) == 0) {
    const std::string name = spec.substr(3);
    std::vector<Row> layers;
    for (const Row& row : read_csv(data_dir + "/convnet_benchmarks_model_layers.csv"))
      if (row.at("model") == name) layers.push_back(row);
    MPLAN_CHECK(!layers.empty(), "calibration: no layer table for " + spec);
    Result<Model> model = parse_model(convnet_benchmarks_yaml(name, layers), name + ".yaml");
    MPLAN_CHECK(model.ok(), model.ok() ? "" : model.error().to_string());
    return std::move(model).value();
  }
  Result<Model> model = load_model(source_dir + "/" + spec);
  MPLAN_CHECK(model.ok(), model.ok() ? "" : model.error().to_string());
  return std::move(model).value();
}

bool pass_includes(const std::string& pass, TaskKind kind) {
  if (pass == "forward") return kind == TaskKind::FP;
  if (pass == "backward_data") return kind == TaskKind::BP1;
  if (pass == "backward_filter") return kind == TaskKind::BP2;
  if (pass == "backward") return kind == TaskKind::BP1 || kind == TaskKind::BP2;
  if (pass == "forward_backward") return kind != TaskKind::update;
  if (pass == "train_step") return true;
  MPLAN_CHECK(false, "calibration: unknown pass " + pass);
  return false;
}

void network_case(Case& c, const Row& row, const std::string& data_dir, const std::string& source_dir,
                  const std::string& file) {
  const Model model = load_network(field(row, "model", file), data_dir, source_dir);
  const Tdfg tdfg = build_tdfg(model);
  const int64_t batch = integer(row, "batch", file);
  const std::string pass = field(row, "pass", file);
  const std::string flags = field(row, "counts", file);
  std::map<std::string, size_t> conv_index, other_index;
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t) {
    const Task& task = tdfg.tasks[t];
    if (!pass_includes(pass, task.kind)) continue;
    if (task.op == Op::flatten && task.kind != TaskKind::update) continue;  // a view in every framework timed
    if (task.op == Op::softmax_xent && task.kind != TaskKind::update && has_flag(flags, "no_loss")) continue;
    if (task.op == Op::dropout && task.kind != TaskKind::update && has_flag(flags, "eval")) continue;
    const TaskShape shape = describe_task(tdfg, t);
    const std::string key = task_signature(shape);
    if (shape.kind != TaskKind::update && shape.op == Op::conv) {
      auto [it, fresh] = conv_index.emplace(key, c.convs.size());
      if (fresh) c.convs.push_back({conv_task(conv_shape(shape), conv_direction(shape.kind), batch, c.library), 0.0});
      c.convs[it->second].second += 1;
    } else {
      auto [it, fresh] = other_index.emplace(key, c.others.size());
      if (fresh) c.others.push_back({OtherTask{shape, batch}, 0.0});
      c.others[it->second].second += 1;
    }
  }
  // Torch7's first convolution computed the gradient of its input before
  // convnet-benchmarks commit 5b96dbc; the TDFG has no such task.
  if (has_flag(flags, "first_conv_grad_input")) {
    const TaskId first = tdfg.fp_of.at(0);
    MPLAN_CHECK(tdfg.tasks[first].op == Op::conv, "calibration: first_conv_grad_input on a net without a first conv");
    const TaskShape shape = describe_task(tdfg, first);
    c.convs.push_back({conv_task(conv_shape(shape), ConvDirection::backward_data, batch, c.library), 1.0});
  }
  if (has_flag(flags, "weights_on_host")) c.extra_copy_bytes = static_cast<double>(model.parameter_count()) * 4;
  c.label = fmt::format("{} b={} {}{}", model.name, batch, pass,
                        c.math == MathMode::fp32 ? "" : std::string(" ") + math_mode_name(c.math));
}

}  // namespace

ConvOption conv_option(ConvDirection direction, const std::string& algorithm, const ConvShape& shape, int64_t batch) {
  ConvOption option;
  option.algorithm = algorithm;
  MPLAN_CHECK(conv_family_of(direction, algorithm, option.family), "calibration: no family for " + algorithm);
  option.phases = conv_work(direction, algorithm, shape, batch);
  option.workspace_bytes = conv_workspace_bytes(direction, algorithm, shape, batch);
  return option;
}

ConvTask conv_task(const ConvShape& shape, ConvDirection direction, int64_t batch, const std::string& library) {
  ConvTask task;
  task.shape = shape;
  task.direction = direction;
  task.batch = batch;
  for (const std::string& algorithm : conv_algorithm_names(direction)) {
    if (!conv_supported(direction, algorithm, shape) || !library_has(library, direction, algorithm)) continue;
    task.options.push_back(conv_option(direction, algorithm, shape, batch));
  }
  MPLAN_CHECK(!task.options.empty(), "calibration: no algorithm of " + library + " supports a task");
  return task;
}

double option_ms(const ConvOption& option, const Device& device, MathMode math) {
  return stream_time_ms(phases_cost(device, option.phases, math), StreamState::idle);
}

std::vector<Row> read_csv(const std::string& path) {
  std::ifstream in(path);
  MPLAN_CHECK(static_cast<bool>(in), "cannot read " + path);
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> header = split_csv_line(line);
  std::vector<Row> rows;
  while (std::getline(in, line)) {
    if (line.empty() || line == "\r") continue;
    const std::vector<std::string> fields = split_csv_line(line);
    MPLAN_CHECK(fields.size() == header.size(),
                fmt::format("{}: row {} has {} fields, the header {}", path, rows.size() + 2, fields.size(),
                            header.size()));
    Row row;
    for (size_t i = 0; i < header.size(); ++i) row[header[i]] = fields[i];
    rows.push_back(std::move(row));
  }
  return rows;
}

int old_release(const std::string& library) {
  for (int r = 1; r <= 3; ++r) {
    const std::string name = fmt::format("cuDNN R{}", r);
    // "cuDNN R3" and "cuDNN R3-rc1", not a "cuDNN R30".
    if (library.rfind(name, 0) == 0 && (library.size() == name.size() || !std::isdigit(library[name.size()]))) return r;
  }
  return 0;
}

bool library_has(const std::string& library, ConvDirection d, const std::string& algorithm) {
  // The release as a number: R1-R4 -> 1-4, "cuDNN 5.1" -> 5.1, "cuDNN 7.4.2" -> 7.4.
  double version = 99;
  if (library.rfind("cuDNN R", 0) == 0) {
    version = std::stod(library.substr(7, 1));
  } else if (library.rfind("cuDNN ", 0) == 0) {
    std::stringstream in(library.substr(6));
    int major = 0, minor = 0;
    char dot = 0;
    in >> major >> dot >> minor;
    version = major + minor / 10.0;
  }
  const bool gemm_family = algorithm == "implicit_gemm" || algorithm == "implicit_precomp_gemm" ||
                           algorithm == "gemm" || algorithm == "algo_0" || algorithm == "algo_1";
  if (gemm_family) return true;
  if (algorithm == "fft") return version >= 3;
  if (algorithm == "algo_3") return version >= 4;
  if (algorithm == "fft_tiling") return d == ConvDirection::backward_filter ? version >= 6 : version >= 4;
  if (algorithm == "winograd") return version >= 5;
  if (algorithm == "winograd_nonfused") return version >= 5.1 - 1e-9;
  return version >= 99;
}

std::vector<Case> load_cases(const std::string& data_dir, const std::string& source_dir) {
  std::vector<Case> cases;
  const std::string conv_file = data_dir + "/conv_layers.csv";
  for (const Row& row : read_csv(conv_file)) {
    Case c;
    c.device = field(row, "device", conv_file);
    c.gpu = field(row, "gpu", conv_file);
    c.library = field(row, "library", conv_file);
    c.source = field(row, "source", conv_file);
    c.release = old_release(c.library);
    c.measured_ms = std::stod(field(row, "time_ms", conv_file));
    c.holdout = field(row, "split", conv_file) == "holdout";
    c.algorithm = field(row, "algorithm", conv_file);
    const std::string dir = field(row, "direction", conv_file);
    const ConvDirection direction = dir == "forward"         ? ConvDirection::forward
                                    : dir == "backward_data" ? ConvDirection::backward_data
                                                             : ConvDirection::backward_filter;
    MPLAN_CHECK(dir == conv_direction_name(direction), conv_file + ": unknown direction " + dir);
    const ConvShape shape =
        make_conv_shape(integer(row, "C", conv_file), integer(row, "H", conv_file), integer(row, "W", conv_file),
                        integer(row, "K", conv_file), integer(row, "R", conv_file), integer(row, "S", conv_file),
                        integer(row, "stride", conv_file), integer(row, "pad", conv_file), 1,
                        integer(row, "bias", conv_file) != 0);
    const int64_t batch = integer(row, "N", conv_file);
    ConvTask task = conv_task(shape, direction, batch, c.library);
    if (c.algorithm != "fastest") {
      MPLAN_CHECK(conv_supported(direction, c.algorithm, shape),
                  conv_file + ": the model refuses a measured algorithm " + c.algorithm);
      const std::string measured = c.algorithm;
      task.options.erase(std::remove_if(task.options.begin(), task.options.end(),
                                        [&](const ConvOption& o) { return o.algorithm != measured; }),
                         task.options.end());
      MPLAN_CHECK(!task.options.empty(), conv_file + ": " + c.library + " lacks " + measured);
    }
    c.convs.push_back({std::move(task), 1.0});
    c.layer = field(row, "layer", conv_file);
    c.task = c.layer + " " + dir;
    c.label = fmt::format("{} {} {}", c.layer, dir, c.algorithm);
    cases.push_back(std::move(c));
  }
  const std::string net_file = data_dir + "/networks.csv";
  for (const Row& row : read_csv(net_file)) {
    Case c;
    c.kind = CaseKind::network;
    c.device = field(row, "device", net_file);
    c.gpu = field(row, "gpu", net_file);
    c.library = field(row, "library", net_file);
    c.source = field(row, "source", net_file);
    c.release = old_release(c.library);
    c.measured_ms = std::stod(field(row, "time_ms", net_file));
    c.holdout = field(row, "split", net_file) == "holdout";
    c.math = math_of(field(row, "counts", net_file));
    c.framework = field(row, "framework", net_file);
    c.workspace_limit_bytes = framework_workspace_limit_bytes(c.framework);
    network_case(c, row, data_dir, source_dir, net_file);
    c.layer = field(row, "model", net_file);
    c.task = c.label;
    cases.push_back(std::move(c));
  }
  return cases;
}

int64_t framework_workspace_limit_bytes(const std::string& framework) {
  return framework.rfind("TensorFlow", 0) == 0 ? int64_t{1} << 32 : 0;
}

const char* case_kind_name(CaseKind kind) {
  switch (kind) {
    case CaseKind::conv_task: return "conv tasks";
    case CaseKind::other_task: return "other tasks";
    case CaseKind::network: return "networks";
  }
  return "?";
}

std::string release_key(const std::string& architecture, const std::string& library) {
  // "cuDNN R3-rc1 (...)" -> "R3-rc1": the library's second word.
  const std::string rest = library.substr(std::min(library.size(), std::string("cuDNN ").size()));
  return architecture + "." + rest.substr(0, rest.find(' '));
}

std::string host_key(const std::string& framework) { return "host." + framework; }

double predict_ms(const Case& c, const Device& device, const SourceTerms& terms, std::string* chosen) {
  double factor = 1;
  if (c.release > 0) {
    auto it = terms.find(release_key(device.architecture, c.library));
    if (it != terms.end()) factor = it->second;
  }
  double framework_host_ms = 0;
  if (!c.framework.empty()) {
    auto it = terms.find(host_key(c.framework));
    if (it != terms.end()) framework_host_ms = it->second / 1000.0;
  }
  auto task_ms = [&](KernelCost cost, double device_factor) {
    cost.device_ms *= device_factor;
    cost.host_ms += framework_host_ms;
    return stream_time_ms(cost, c.stream);
  };
  double total = 0;
  for (const auto& [task, count] : c.convs) {
    double best = 1e300;
    for (const ConvOption& o : task.options) {
      if (c.workspace_limit_bytes > 0 && o.workspace_bytes > c.workspace_limit_bytes) continue;
      const double ms = task_ms(phases_cost(device, o.phases, c.math), factor);
      if (ms < best) {
        best = ms;
        if (chosen) *chosen = o.algorithm;
      }
    }
    MPLAN_CHECK(best < 1e300, "calibration: no option of a task of " + c.label + " fits its workspace cap");
    total += count * best;
  }
  // A benchmark run in 16-bit math stored its tensors in 16 bits too.
  const bool half = c.math == MathMode::fp16 || c.math == MathMode::bf16;
  for (const auto& [task, count] : c.others) {
    TaskShape shape = task.shape;
    if (half) shape.dtype = c.math == MathMode::fp16 ? DataType::float16 : DataType::bfloat16;
    total += count * task_ms(phases_cost(device, task_work(shape, task.batch), c.math), 1.0);
  }
  if (c.extra_copy_bytes > 0)
    total += analytic_copy_ms(device, static_cast<int64_t>(c.extra_copy_bytes), true) +
             analytic_copy_ms(device, static_cast<int64_t>(c.extra_copy_bytes), false);
  return total;
}

}  // namespace mplan::calibration
