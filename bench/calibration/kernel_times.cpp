// Calibration cases from the kernel profiler's result files (kernel_times.h).

#include "bench/calibration/kernel_times.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "ops/op_table.h"
#include "frontend/parse.h"
#include "profiler/signature.h"
#include "runtime/ops.h"

namespace mplan::calibration {
namespace {

// The split's counter: an op's name, or "update".
std::string split_group(const TaskShape& shape) {
  return shape.kind == TaskKind::update ? "update" : op_name(shape.op);
}

// Every task of the TDFG by its task signature (the job key before '@').
std::map<std::string, TaskShape> tasks_by_signature(const Tdfg& tdfg) {
  std::map<std::string, TaskShape> tasks;
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t) {
    TaskShape shape = describe_task(tdfg, t);
    tasks.emplace(task_signature(shape), std::move(shape));
  }
  return tasks;
}

// "<task signature>@<sub-batch>" -> its parts; false when malformed.
bool split_key(const std::string& key, std::string& signature, int64_t& sub_batch) {
  const size_t at = key.rfind('@');
  if (at == std::string::npos || at + 1 >= key.size()) return false;
  const std::string number = key.substr(at + 1);
  if (!std::all_of(number.begin(), number.end(), [](char c) { return c >= '0' && c <= '9'; }) || number.size() > 9)
    return false;
  signature = key.substr(0, at);
  sub_batch = std::stoll(number);
  return true;
}

Error file_error(const std::string& file, const std::string& message) { return Error{{file, 0, 0}, message}; }

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

void LayerSplit::add_model(const Tdfg& tdfg) {
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t) {
    const TaskShape shape = describe_task(tdfg, t);
    const std::string layer = layer_signature(shape);
    if (holdout_.count(layer)) continue;
    const int number = per_op_[split_group(shape)]++;
    holdout_[layer] = number % 3 == 1;
    order_.emplace_back(layer, number % 3 == 1);
  }
}

bool LayerSplit::holdout(const std::string& layer_signature) const {
  auto it = holdout_.find(layer_signature);
  MPLAN_CHECK(it != holdout_.end(), "LayerSplit: no model added has layer " + layer_signature);
  return it->second;
}

Result<KernelTimesFile> parse_kernel_times_file(const std::string& results_text, const std::string& file,
                                                std::unique_ptr<Model> model, const std::string& device,
                                                MathMode math, const std::string& source) {
  KernelTimesFile f;
  f.file = file;
  f.device = device;
  f.source = source;
  f.math = math;
  std::string why;
  if (!rt::parse_results(results_text, &f.results, &why)) return file_error(file, why);
  const rt::BackendInfo& backend = f.results.backend;
  if (backend.backend != "cuda")
    return file_error(file, fmt::format("backend '{}': only a GPU's (cuda) kernel times calibrate the analytic "
                                        "model",
                                        backend.backend));
  // "cuDNN 9.19.0 (FP32, TF32 off), cuBLAS 13.1.0 (...)": the cuDNN release and the math it ran.
  const std::string& libraries = backend.libraries;
  if (libraries.rfind("cuDNN ", 0) != 0)
    return file_error(file, fmt::format("backend.libraries '{}' does not start with the cuDNN release", libraries));
  const size_t end = libraries.find_first_of(" ,(", 6);
  f.library = fmt::format("{} (CUDA {})", libraries.substr(0, end), backend.runtime);
  const bool tf32_off = libraries.find("TF32 off") != std::string::npos;
  if ((math == MathMode::fp32) != tf32_off)
    return file_error(file, fmt::format("kernel_times.csv says math {}, but the file's libraries say '{}'",
                                        math_mode_name(math), libraries));
  f.gpu = backend.device;
  f.model = std::move(model);
  f.tdfg = build_tdfg(*f.model);
  return f;
}

Result<std::vector<KernelTimesFile>> load_kernel_times_files(const std::string& data_dir,
                                                             const std::string& source_dir) {
  const std::string manifest = data_dir + "/kernel_times.csv";
  std::vector<KernelTimesFile> files;
  for (const Row& row : read_csv(manifest)) {
    for (const char* key : {"file", "model", "device", "math", "source"})
      if (!row.count(key)) return file_error(manifest, fmt::format("a row has no '{}'", key));
    const std::string path = source_dir + "/" + row.at("file");
    const std::string text = read_text(path);
    if (text.empty()) return file_error(manifest, "cannot read " + path);
    Result<Model> model = load_model(source_dir + "/" + row.at("model"));
    if (!model) return model.error();
    const std::optional<MathMode> math = parse_math_mode(row.at("math"));
    if (!math) return file_error(manifest, fmt::format("math '{}' is not a math mode", row.at("math")));
    Result<KernelTimesFile> f = parse_kernel_times_file(text, row.at("file"),
                                                        std::make_unique<Model>(std::move(model).value()),
                                                        row.at("device"), *math, row.at("source"));
    if (!f) return f.error();
    const std::string split = row.count("split") ? row.at("split") : "";
    if (split != "" && split != "layers" && split != "holdout")
      return file_error(manifest, fmt::format("split '{}' of {}: expected layers or holdout", split, row.at("file")));
    f->holdout_whole = split == "holdout";
    const std::string update_job = row.count("update_job") ? row.at("update_job") : "";
    if (update_job != "" && update_job != "per_layer" && update_job != "merged")
      return file_error(manifest, fmt::format("update_job '{}' of {}: expected per_layer or merged", update_job,
                                              row.at("file")));
    f->update_merged = update_job == "merged";
    files.push_back(std::move(f).value());
  }
  return files;
}

Result<std::vector<Case>> kernel_time_cases(const KernelTimesFile& file, const LayerSplit& split,
                                            KernelTimesSummary* summary) {
  KernelTimesSummary ignored;
  KernelTimesSummary& s = summary ? *summary : ignored;
  const std::map<std::string, TaskShape> tasks = tasks_by_signature(file.tdfg);
  std::vector<Case> cases;
  for (const rt::JobResult& job : file.results.results) {
    std::string signature;
    int64_t sub_batch = 0;
    if (!split_key(job.key, signature, sub_batch))
      return file_error(file.file, fmt::format("result '{}': a key is \"<task signature>@<sub-batch>\"", job.key));
    auto it = tasks.find(signature);
    if (it == tasks.end())
      return file_error(file.file, fmt::format("result '{}' is no task of model {} (a file of another model, or the "
                                               "model changed since it was measured)",
                                               job.key, file.model->name));
    const TaskShape& shape = it->second;
    const bool update = shape.kind == TaskKind::update;
    if (!update && sub_batch < 1)
      return file_error(file.file, fmt::format("result '{}': sub-batch must be at least 1", job.key));
    const std::string what = update ? "update" : fmt::format("{} {}", op_name(shape.op), task_kind_name(shape.kind));
    if (!job.error.empty()) {
      ++s.skipped["failed on the GPU: " + what];
      continue;
    }
    if (update && file.update_merged) {
      ++s.skipped["update timed as one merged sgd_step (kernel_times.csv update_job)"];
      continue;
    }
    // The fastest of the legacy API's algorithms, which the model prices:
    // the graph API's engine configurations (runtime/cuda/conv_graph.h) are
    // left out of the calibration, and counted.
    auto legacy = [](const rt::JobOption& o) { return rt::graph_algorithm_id(o.algorithm) < 0; };
    auto fastest = job.options.end();
    for (auto it = job.options.begin(); it != job.options.end(); ++it)
      if (legacy(*it) && (fastest == job.options.end() || it->time_ms < fastest->time_ms)) fastest = it;
    if (fastest == job.options.end() || fastest->time_ms <= 0) {
      ++s.skipped["runs no kernel (0 ms): " + what];
      continue;
    }
    Case base;
    base.device = file.device;
    base.gpu = file.gpu;
    base.library = file.library;
    base.source = file.source + "; " + file.file;
    base.math = file.math;
    base.kernel_times = true;
    base.stream = StreamState::idle;  // each job timed alone, its events around it
    base.layer = layer_signature(shape);
    base.holdout = file.holdout_whole || split.holdout(base.layer);
    base.task = fmt::format("{}@{}", signature, sub_batch);
    const int64_t b = std::max<int64_t>(sub_batch, 1);  // the update's key says 0: it runs once per iteration
    if (update || !op_spec(shape.op).has_algorithms) {
      if (job.options.size() != 1)
        return file_error(file.file, fmt::format("result '{}': a task without algorithms has one option, not {}",
                                                 job.key, job.options.size()));
      Case c = base;
      c.kind = CaseKind::other_task;
      c.algorithm = job.options[0].algorithm;
      c.measured_ms = job.options[0].time_ms;
      c.others.push_back({OtherTask{shape, b}, 1.0});
      c.label = base.task;
      cases.push_back(std::move(c));
      continue;
    }
    const ConvDirection direction = conv_direction(shape.kind);
    const ConvShape conv = conv_shape(shape);
    for (const rt::JobOption& option : job.options) {
      const std::string where = fmt::format("{} {}", conv_direction_name(direction), option.algorithm);
      if (rt::graph_algorithm_id(option.algorithm) >= 0) {
        ++s.skipped[fmt::format("{} graph-API engine configurations: the model prices the legacy algorithms",
                                conv_direction_name(direction))];
        continue;
      }
      if (cudnn_algorithm_id(direction, option.algorithm) < 0) {
        ++s.skipped[where + ": an algorithm the model does not know"];
        continue;
      }
      if (const auto why = conv_unsupported_reason(direction, option.algorithm, conv)) {
        // Group the reasons without their shapes ("needs stride 1, got 2x2" -> "needs stride 1").
        ++s.skipped[fmt::format("{}: the model refuses it ({})", where, why->substr(0, why->find(", got")))];
        continue;
      }
      if (option.time_ms <= 0) {
        ++s.skipped[where + ": no time"];
        continue;
      }
      Case c = base;
      c.kind = CaseKind::conv_task;
      c.algorithm = option.algorithm;
      c.measured_ms = option.time_ms;
      c.measured_fastest = fastest->algorithm;
      ConvTask task;
      task.shape = conv;
      task.direction = direction;
      task.batch = b;
      task.options.push_back(conv_option(direction, option.algorithm, conv, b));
      c.convs.push_back({std::move(task), 1.0});
      c.label = base.task + " " + option.algorithm;
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

std::vector<Case> load_kernel_time_cases(const std::vector<KernelTimesFile>& files, KernelTimesSummary* summary,
                                         LayerSplit* split_out) {
  LayerSplit split;
  // Only the files split by layer number layers: a file held out whole leaves
  // the other files' split as it was.
  for (const KernelTimesFile& f : files)
    if (!f.holdout_whole) split.add_model(f.tdfg);
  std::vector<Case> cases;
  for (const KernelTimesFile& f : files) {
    Result<std::vector<Case>> more = kernel_time_cases(f, split, summary);
    MPLAN_CHECK(more.ok(), more.ok() ? "" : more.error().to_string());
    for (Case& c : *more) cases.push_back(std::move(c));
  }
  if (split_out) *split_out = split;
  return cases;
}

Result<double> measured_ideal_ms(const KernelTimesFile& file, int64_t batch) {
  std::map<std::string, const rt::JobResult*> by_key;
  for (const rt::JobResult& job : file.results.results) by_key[job.key] = &job;
  double total = 0;
  for (TaskId t = 0; t < static_cast<TaskId>(file.tdfg.tasks.size()); ++t) {
    const TaskShape shape = describe_task(file.tdfg, t);
    const std::string key =
        fmt::format("{}@{}", task_signature(shape), shape.kind == TaskKind::update ? int64_t{0} : batch);
    auto it = by_key.find(key);
    if (it == by_key.end() || !it->second->error.empty() || it->second->options.empty())
      return file_error(file.file, fmt::format("no measured time for {}", key));
    double best = it->second->options.front().time_ms;
    for (const rt::JobOption& o : it->second->options) best = std::min(best, o.time_ms);
    total += best;
  }
  return total;
}

}  // namespace mplan::calibration
