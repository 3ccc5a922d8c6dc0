// profile.json: writing, reading (with errors that say where and what), the
// coverage check, and the recorded cost model that serves it.

#include "profiler/profile.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "core/input_file.h"
#include "profiler/analytic_model.h"
#include "core/limits.h"
#include "profiler/input_json.h"
#include "profiler/math_mode.h"
#include "profiler/task_invocation.h"

namespace mplan {

using nlohmann::json;

namespace {

constexpr const char* kFormat = "mplan-profile";

std::string join_numbers(const std::vector<int64_t>& values) {
  std::string text;
  for (int64_t v : values) text += (text.empty() ? "" : ", ") + std::to_string(v);
  return text;
}

// Fits a transfer line through the model's times at 1 byte and 1 GiB (exact
// for the analytic model, whose copies are lines).
TransferLine fit_line(const CostModel& model, bool host_to_device) {
  constexpr int64_t kSmall = 1, kLarge = int64_t{1} << 30;
  const double small = host_to_device ? model.host_to_device_ms(kSmall) : model.device_to_host_ms(kSmall);
  const double large = host_to_device ? model.host_to_device_ms(kLarge) : model.device_to_host_ms(kLarge);
  TransferLine line;
  line.bytes_per_s = static_cast<double>(kLarge - kSmall) / ((large - small) / 1000.0);
  line.latency_ms = std::max(0.0, small - kSmall / line.bytes_per_s * 1000.0);
  return line;
}

json option_to_json(const TaskOption& o) {
  return json{{"algorithm", o.algorithm}, {"time_ms", o.time_ms}, {"workspace_bytes", o.workspace_bytes}};
}

// Reading: every structural problem is an Error with the file and the JSON path.
class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  Error error(const std::string& path, const std::string& what) const {
    return Error{{file_, 0, 0}, fmt::format("{}: {}", path, what)};
  }
  Result<const json*> member(const json& object, const std::string& path, const char* key,
                             json::value_t type) const {
    auto it = object.find(key);
    const std::string at = path.empty() ? key : path + "." + key;
    if (it == object.end()) return error(at, "missing (the file is truncated or not a profile)");
    if (type == json::value_t::number_float) {
      if (!it->is_number()) return error(at, "expected a number");
    } else if (type == json::value_t::number_integer) {
      if (!it->is_number_integer()) return error(at, "expected a whole number");
    } else if (it->type() != type) {
      return error(at, fmt::format("expected {}", type == json::value_t::object  ? "an object"
                                                  : type == json::value_t::array ? "an array"
                                                                                 : "a string"));
    }
    return &*it;
  }

 private:
  std::string file_;
};

#define MPLAN_TRY_ASSIGN(var, expr) \
  auto var##_result = (expr);       \
  if (!var##_result) return var##_result.error(); \
  const json& var = **var##_result

Result<TransferLine> read_line(const Reader& r, const json& parent, const std::string& path, const char* key) {
  MPLAN_TRY_ASSIGN(node, r.member(parent, path, key, json::value_t::object));
  const std::string at = path + "." + key;
  MPLAN_TRY_ASSIGN(latency, r.member(node, at, "latency_ms", json::value_t::number_float));
  MPLAN_TRY_ASSIGN(bandwidth, r.member(node, at, "bytes_per_s", json::value_t::number_float));
  TransferLine line{latency.get<double>(), bandwidth.get<double>()};
  // Bounded, so that every copy time is a finite number of milliseconds.
  if (!(line.bytes_per_s >= 1 && line.bytes_per_s <= 1e15) || !(line.latency_ms >= 0 && line.latency_ms <= 1e6))
    return r.error(at, "expected latency_ms in 0..1e6 and bytes_per_s in 1..1e15");
  return line;
}

}  // namespace

Result<std::vector<int64_t>> parse_sub_batches(const std::string& text, int64_t batch) {
  std::vector<int64_t> result;
  if (text == "pow2") {
    for (int64_t b = 1; b < batch; b *= 2) result.push_back(b);
    result.push_back(batch);
  } else if (text == "all") {
    if (batch > kMaxProfileSubBatches)
      return Error{{}, fmt::format("--sub-batches all: the batch {} would make {} sizes; a profile has at most {} "
                                   "(use pow2 or a list)",
                                   batch, batch, kMaxProfileSubBatches),
                   ErrorKind::usage};
    for (int64_t b = 1; b <= batch; ++b) result.push_back(b);
  } else {
    std::stringstream list(text);
    std::string item;
    while (std::getline(list, item, ',')) {
      int64_t value = 0;
      auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
      if (ec != std::errc() || end != item.data() + item.size() || item.empty())
        return Error{{}, fmt::format("--sub-batches: '{}' is not a whole number (expected pow2, all, or a "
                                     "comma-separated list such as 1,8,32)", item), ErrorKind::usage};
      // Sizes above the model's batch are allowed: a profile may serve
      // `compile --batch` of a larger batch.
      if (value < 1 || value > kMaxSizeField)
        return Error{{}, fmt::format("--sub-batches: {} is outside 1..{}", value, kMaxSizeField), ErrorKind::usage};
      if (static_cast<int64_t>(result.size()) >= kMaxProfileSubBatches)
        return Error{{}, fmt::format("--sub-batches: more than {} sizes", kMaxProfileSubBatches), ErrorKind::usage};
      result.push_back(value);
    }
    if (result.empty())
      return Error{{}, "--sub-batches: expected pow2, all, or a comma-separated list such as 1,8,32", ErrorKind::usage};
  }
  std::sort(result.begin(), result.end());
  result.erase(std::unique(result.begin(), result.end()), result.end());
  return result;
}

Profile make_profile(const Tdfg& tdfg, const CostModel& model, const std::vector<int64_t>& sub_batches,
                     const std::string& device_name) {
  MPLAN_CHECK(tdfg.model != nullptr, "make_profile: the TDFG has no model");
  Profile profile;
  profile.cost_model = model.describe();
  // A recorded model of an older file says "as recorded": no math to pass on.
  const std::string math = model.info().math_mode;
  if (parse_math_mode(math)) profile.math_mode = math;
  profile.device_name = device_name;
  profile.device_memory_bytes = model.device_memory_bytes();
  profile.copy_engines = model.copy_engines();
  profile.host_to_device = fit_line(model, true);
  profile.device_to_host = fit_line(model, false);
  profile.duplex_slowdown = model.duplex_slowdown();
  profile.model_name = tdfg.model->name;
  profile.batch = tdfg.model->batch;
  profile.sub_batches = sub_batches;
  std::sort(profile.sub_batches.begin(), profile.sub_batches.end());

  std::map<std::string, size_t> entry_of;  // layer signature -> index in entries
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t) {
    const TaskShape shape = describe_task(tdfg, t);
    const std::string signature = layer_signature(shape);
    auto [it, inserted] = entry_of.emplace(signature, profile.entries.size());
    if (inserted) profile.entries.push_back(ProfileEntry{signature, {}, {}});
    ProfileEntry& entry = profile.entries[it->second];
    const Task& task = tdfg.tasks[t];
    const std::string layer_name =
        task.kind == TaskKind::update ? "update" : tdfg.model->layers.at(task.layer).name;
    if (std::find(entry.layers.begin(), entry.layers.end(), layer_name) == entry.layers.end())
      entry.layers.push_back(layer_name);
    auto& series = entry.tasks[task_kind_name(task.kind)];
    if (!series.empty()) continue;  // an identical layer was profiled already
    for (int64_t b : profile.sub_batches) series[b] = model.options(tdfg, t, b);
    if (!recomputes_from_saved(tdfg, t)) continue;
    // Its recomputation, where the model has a time of its own at every size.
    std::map<int64_t, std::vector<TaskOption>> again;
    for (int64_t b : profile.sub_batches)
      if (const std::optional<double> ms = model.recompute_from_saved_ms(tdfg, t, b))
        again[b] = {TaskOption{"default", *ms, 0}};
    if (again.size() == profile.sub_batches.size()) entry.tasks[kRecomputeKind] = std::move(again);
  }
  return profile;
}

void add_missing_entries(Profile& into, const Profile& from) {
  std::set<std::string> have;
  for (const ProfileEntry& e : into.entries) have.insert(e.signature);
  for (const ProfileEntry& e : from.entries)
    if (have.insert(e.signature).second) into.entries.push_back(e);
}

std::string profile_to_json(const Profile& p) {
  json root;
  root["format"] = kFormat;
  root["version"] = Profile::kVersion;
  root["cost_model"] = p.cost_model;
  if (!p.math_mode.empty()) root["math"] = p.math_mode;
  root["device"] = {{"name", p.device_name}, {"memory_bytes", p.device_memory_bytes},
                    {"copy_engines", p.copy_engines}};
  root["transfers"] = {
      {"host_to_device", {{"latency_ms", p.host_to_device.latency_ms}, {"bytes_per_s", p.host_to_device.bytes_per_s}}},
      {"device_to_host", {{"latency_ms", p.device_to_host.latency_ms}, {"bytes_per_s", p.device_to_host.bytes_per_s}}}};
  if (p.duplex_slowdown > 1.0) root["transfers"]["duplex_slowdown"] = p.duplex_slowdown;
  root["model"] = {{"name", p.model_name}, {"batch", p.batch}};
  root["sub_batches"] = p.sub_batches;
  json entries = json::array();
  for (const ProfileEntry& e : p.entries) {
    json tasks = json::object();
    for (const auto& [kind, series] : e.tasks) {
      json by_b = json::object();
      for (const auto& [b, options] : series) {
        json list = json::array();
        for (const TaskOption& o : options) list.push_back(option_to_json(o));
        by_b[std::to_string(b)] = std::move(list);
      }
      tasks[kind] = std::move(by_b);
    }
    entries.push_back(json{{"signature", e.signature}, {"layers", e.layers}, {"tasks", std::move(tasks)}});
  }
  root["layers"] = std::move(entries);
  return root.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

Result<Profile> parse_profile(const std::string& text, const std::string& file) {
  Result<json> parsed = parse_input_json<json>(text, file);
  if (!parsed) return parsed.error();
  const json& root = *parsed;
  Reader r(file);
  if (!root.is_object()) return r.error("(top level)", "expected a JSON object (an mplan profile)");
  MPLAN_TRY_ASSIGN(format, r.member(root, "", "format", json::value_t::string));
  if (format.get<std::string>() != kFormat)
    return r.error("format", fmt::format("expected \"{}\", got \"{}\"", kFormat, format.get<std::string>()));
  MPLAN_TRY_ASSIGN(version, r.member(root, "", "version", json::value_t::number_integer));
  if (version.get<int64_t>() != Profile::kVersion)
    return r.error("version", fmt::format("this mplan reads version {}, the file is version {}", Profile::kVersion,
                                          version.dump()));
  Profile p;
  MPLAN_TRY_ASSIGN(cost_model, r.member(root, "", "cost_model", json::value_t::string));
  p.cost_model = cost_model.get<std::string>();
  if (root.contains("math")) {  // optional: files from before the field have none
    MPLAN_TRY_ASSIGN(math, r.member(root, "", "math", json::value_t::string));
    if (!parse_math_mode(math.get<std::string>()))
      return r.error("math", fmt::format("expected fp32, tf32, fp16 or bf16, got \"{}\"", math.get<std::string>()));
    p.math_mode = math.get<std::string>();
  }
  MPLAN_TRY_ASSIGN(device, r.member(root, "", "device", json::value_t::object));
  MPLAN_TRY_ASSIGN(device_name, r.member(device, "device", "name", json::value_t::string));
  MPLAN_TRY_ASSIGN(memory, r.member(device, "device", "memory_bytes", json::value_t::number_integer));
  MPLAN_TRY_ASSIGN(engines, r.member(device, "device", "copy_engines", json::value_t::number_integer));
  p.device_name = device_name.get<std::string>();
  p.device_memory_bytes = memory.get<int64_t>();
  p.copy_engines = engines.get<int64_t>() == 1 ? 1 : engines.get<int64_t>() == 2 ? 2 : 0;
  if (p.device_memory_bytes <= 0 || p.device_memory_bytes > kMaxProfileBytes)
    return r.error("device.memory_bytes", fmt::format("expected a size in 1..{}", kMaxProfileBytes));
  if (p.copy_engines < 1 || p.copy_engines > 2) return r.error("device.copy_engines", "expected 1 or 2");
  MPLAN_TRY_ASSIGN(transfers, r.member(root, "", "transfers", json::value_t::object));
  auto h2d = read_line(r, transfers, "transfers", "host_to_device");
  if (!h2d) return h2d.error();
  auto d2h = read_line(r, transfers, "transfers", "device_to_host");
  if (!d2h) return d2h.error();
  p.host_to_device = *h2d;
  p.device_to_host = *d2h;
  if (transfers.contains("duplex_slowdown")) {  // optional: 1 where absent
    MPLAN_TRY_ASSIGN(slowdown, r.member(transfers, "transfers", "duplex_slowdown", json::value_t::number_float));
    p.duplex_slowdown = slowdown.get<double>();
    if (!(p.duplex_slowdown >= 1.0 && p.duplex_slowdown <= kMaxDuplexSlowdown))
      return r.error("transfers.duplex_slowdown",
                     fmt::format("expected a number in 1..{} (how much slower a copy runs while the other "
                                 "direction copies)", kMaxDuplexSlowdown));
  }
  MPLAN_TRY_ASSIGN(model, r.member(root, "", "model", json::value_t::object));
  MPLAN_TRY_ASSIGN(model_name, r.member(model, "model", "name", json::value_t::string));
  MPLAN_TRY_ASSIGN(batch, r.member(model, "model", "batch", json::value_t::number_integer));
  p.model_name = model_name.get<std::string>();
  if (!batch.is_number_integer() || batch.get<int64_t>() < 1 || batch.get<int64_t>() > kMaxSizeField)
    return r.error("model.batch", fmt::format("expected a whole number in 1..{}", kMaxSizeField));
  p.batch = batch.get<int64_t>();
  MPLAN_TRY_ASSIGN(sub_batches, r.member(root, "", "sub_batches", json::value_t::array));
  if (static_cast<int64_t>(sub_batches.size()) > kMaxProfileSubBatches)
    return r.error("sub_batches", fmt::format("more than {} sizes", kMaxProfileSubBatches));
  for (const json& b : sub_batches) {
    if (!b.is_number_integer() || b.get<int64_t>() < 1 || b.get<int64_t>() > kMaxSizeField)
      return r.error("sub_batches", fmt::format("expected an array of whole numbers in 1..{}", kMaxSizeField));
    p.sub_batches.push_back(b.get<int64_t>());
  }
  if (p.sub_batches.empty() || std::adjacent_find(p.sub_batches.begin(), p.sub_batches.end(),
                                                  std::greater_equal<int64_t>()) != p.sub_batches.end())
    return r.error("sub_batches", "expected a non-empty, strictly ascending array");

  MPLAN_TRY_ASSIGN(layers, r.member(root, "", "layers", json::value_t::array));
  std::set<std::string> seen;
  for (size_t i = 0; i < layers.size(); ++i) {
    const json& node = layers[i];
    const std::string at = fmt::format("layers[{}]", i);
    if (!node.is_object()) return r.error(at, "expected an object");
    ProfileEntry entry;
    MPLAN_TRY_ASSIGN(signature, r.member(node, at, "signature", json::value_t::string));
    entry.signature = signature.get<std::string>();
    if (!seen.insert(entry.signature).second) return r.error(at, "signature appears twice: " + entry.signature);
    if (node.contains("layers") && node["layers"].is_array())
      for (const json& name : node["layers"])
        if (name.is_string()) entry.layers.push_back(name.get<std::string>());
    MPLAN_TRY_ASSIGN(tasks, r.member(node, at, "tasks", json::value_t::object));
    for (const auto& [kind, by_b] : tasks.items()) {
      const std::string kind_at = at + ".tasks." + kind;
      if (kind != "FP" && kind != "BP1" && kind != "BP2" && kind != "update" && kind != kRecomputeKind)
        return r.error(kind_at, "expected a task kind: FP, BP1, BP2, update or recompute");
      if (!by_b.is_object()) return r.error(kind_at, "expected an object of sub-batches");
      auto& series = entry.tasks[kind];
      for (const auto& [b_text, options] : by_b.items()) {
        const std::string b_at = kind_at + "." + b_text;
        int64_t b = 0;
        auto [end, ec] = std::from_chars(b_text.data(), b_text.data() + b_text.size(), b);
        if (ec != std::errc() || end != b_text.data() + b_text.size() || b < 1 || b > kMaxSizeField)
          return r.error(b_at, fmt::format("expected a sub-batch (a whole number in 1..{}) as the key", kMaxSizeField));
        if (!options.is_array() || options.empty()) return r.error(b_at, "expected a non-empty array of options");
        if (series.size() >= static_cast<size_t>(kMaxProfileSubBatches) && !series.count(b))
          return r.error(kind_at, fmt::format("more than {} sub-batches", kMaxProfileSubBatches));
        std::vector<TaskOption>& list = series[b];
        for (size_t k = 0; k < options.size(); ++k) {
          const json& o = options[k];
          const std::string o_at = fmt::format("{}[{}]", b_at, k);
          if (!o.is_object()) return r.error(o_at, "expected an option object");
          MPLAN_TRY_ASSIGN(algorithm, r.member(o, o_at, "algorithm", json::value_t::string));
          MPLAN_TRY_ASSIGN(time, r.member(o, o_at, "time_ms", json::value_t::number_float));
          MPLAN_TRY_ASSIGN(workspace, r.member(o, o_at, "workspace_bytes", json::value_t::number_integer));
          TaskOption option{algorithm.get<std::string>(), time.get<double>(), workspace.get<int64_t>()};
          // Bounded: a time of 1e308 ms would make every simulated
          // figure infinite, a workspace near 2^63 overflow every sum.
          if (!(option.time_ms >= 0 && option.time_ms <= kMaxProfileTimeMs) || option.workspace_bytes < 0 ||
              option.workspace_bytes > kMaxProfileBytes || !workspace.is_number_integer() ||
              (workspace.is_number_unsigned() && workspace.get<uint64_t>() > static_cast<uint64_t>(kMaxProfileBytes)))
            return r.error(o_at, fmt::format("expected time_ms in 0..{:g} and workspace_bytes in 0..{}",
                                             kMaxProfileTimeMs, kMaxProfileBytes));
          list.push_back(std::move(option));
        }
        std::stable_sort(list.begin(), list.end(), [](const TaskOption& a, const TaskOption& b2) {
          return a.time_ms != b2.time_ms ? a.time_ms < b2.time_ms : a.workspace_bytes < b2.workspace_bytes;
        });
      }
    }
    p.entries.push_back(std::move(entry));
  }
  return p;
}

Result<Profile> load_profile(const std::string& path) {
  Result<std::string> text = read_input_file(path, "the profile", kMaxProfileFileBytes);
  if (!text) return text.error();
  return parse_profile(*text, path);
}

namespace {

// A task as its profile entry is found: a compact task (a memory-saving
// variant, docs/planner.md) that the profile does not list is served from its
// plain form's entry (RecordedCostModel::options scales its times).
TaskShape plain_form(TaskShape shape) {
  shape.layer.compact_backward = false;
  return shape;
}

// A 16-bit task that a profile measured in fp32 does not list is served from
// its float32 form's entry, unscaled: the plan is priced in the profile's
// precision, as the cost source warns (driver/cost_source.cpp).
TaskShape float32_form(TaskShape shape) {
  shape.layer.compact_backward = false;
  shape.dtype = DataType::float32;
  shape.copied_parameters = 0;
  shape.input_dtypes.clear();
  shape.input_gradient_dtypes.clear();
  shape.gradient_dtype = DataType::float32;
  return shape;
}

// A 16-bit task that casts its weights where it uses them (a plan that makes
// its copies where used, docs/planner.md) is served from the task that reads
// a resident copy: a profile times the model's own graph, and
// RecordedCostModel::options prices the cast.
TaskShape resident_copy_form(TaskShape shape) {
  shape.copied_parameters = 0;
  return shape;
}

// A 16-bit task that a profile measured in the other 16-bit type lists is
// served from that entry (two bytes an element either way), as the cost
// source warns.
TaskShape other_16_bit_form(TaskShape shape) {
  const auto swap = [](DataType& t) {
    if (t == DataType::bfloat16) t = DataType::float16;
    else if (t == DataType::float16) t = DataType::bfloat16;
  };
  swap(shape.dtype);
  for (DataType& t : shape.input_dtypes) swap(t);
  for (DataType& t : shape.input_gradient_dtypes) swap(t);
  swap(shape.gradient_dtype);
  return shape;
}

// The form of a task whose entry the profile has: itself, its plain form,
// either with a resident weight copy, each in the other 16-bit type, then
// its float32 form.
template <typename Has>
TaskShape listed_form(const TaskShape& shape, Has has) {
  for (const TaskShape& form : {shape, other_16_bit_form(shape)}) {
    if (has(form)) return form;
    if (TaskShape plain = plain_form(form); has(plain)) return plain;
    if (form.copied_parameters > 0) {
      if (TaskShape resident = resident_copy_form(form); has(resident)) return resident;
      if (TaskShape resident = plain_form(resident_copy_form(form)); has(resident)) return resident;
    }
  }
  return float32_form(shape);
}

// The bytes a task's kernels move at sub-batch b, by the op table's work.
double traffic_bytes(const TaskShape& shape, int64_t b) {
  const OpSpec& spec = op_spec(shape.op);
  if (spec.work == nullptr) return 0;
  const Layer layer = task_layer(shape);
  double bytes = 0;
  const OpTask task{layer, shape.inputs, shape.output, shape.kind, static_cast<double>(element_bytes(shape.dtype))};
  for (const WorkEstimate& w : spec.work(task, b)) bytes += w.bytes;
  return bytes;
}

}  // namespace

Status check_profile_covers(const Profile& profile, const Tdfg& tdfg, const std::vector<int64_t>& required,
                            const std::string& file) {
  std::map<std::string, const ProfileEntry*> by_signature;
  for (const ProfileEntry& e : profile.entries) by_signature[e.signature] = &e;
  std::vector<int64_t> wanted = profile.sub_batches;
  wanted.insert(wanted.end(), required.begin(), required.end());
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t) {
    const Task& task = tdfg.tasks[t];
    const TaskShape shape = listed_form(describe_task(tdfg, t), [&](const TaskShape& s) {
      return by_signature.count(layer_signature(s)) > 0;
    });
    const std::string signature = layer_signature(shape);
    const std::string who = task.kind == TaskKind::update
                                ? std::string("the update")
                                : fmt::format("layer '{}'", tdfg.model->layers.at(task.layer).name);
    auto it = by_signature.find(signature);
    if (it == by_signature.end())
      return Error{{file, 0, 0}, fmt::format("does not cover the model: {} ({}) is not in the profile; it was "
                                             "made for another model (\"{}\") or is truncated",
                                             who, signature, profile.model_name)};
    auto kind = it->second->tasks.find(task_kind_name(task.kind));
    if (kind == it->second->tasks.end())
      return Error{{file, 0, 0}, fmt::format("does not cover the model: {} has no {} task in the profile ({})", who,
                                             task_kind_name(task.kind), signature)};
    for (int64_t b : wanted)
      if (!kind->second.count(b))
        return Error{{file, 0, 0},
                     fmt::format("does not cover the model: {} {} has no entry for sub-batch {} (the profile lists "
                                 "sub-batches {})",
                                 who, task_kind_name(task.kind), b, join_numbers(profile.sub_batches))};
  }
  return Ok{};
}

std::vector<std::string> untimed_kernel_tasks(const Profile& profile, const Tdfg& tdfg) {
  std::map<std::string, const ProfileEntry*> by_signature;
  for (const ProfileEntry& e : profile.entries) by_signature[e.signature] = &e;
  std::map<std::string, int> counts;  // "<op> <kind>" -> tasks
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t) {
    const TaskShape shape = describe_task(tdfg, t);
    if (shape.kind == TaskKind::update) continue;
    auto entry = by_signature.find(layer_signature(shape));
    if (entry == by_signature.end()) continue;
    auto kind = entry->second->tasks.find(task_kind_name(shape.kind));
    if (kind == entry->second->tasks.end()) continue;
    bool timed = false;
    for (const auto& [b, options] : kind->second)
      for (const TaskOption& o : options) timed = timed || o.time_ms > 0;
    if (timed) continue;
    const int64_t b = kind->second.empty() ? 1 : kind->second.begin()->first;
    if (invoke_task_shape(shape, b, 0, 0).invocation.calls.empty()) continue;
    ++counts[fmt::format("{} {}", op_name(shape.op), task_kind_name(shape.kind))];
  }
  std::vector<std::string> result;
  for (const auto& [what, n] : counts) result.push_back(fmt::format("{} x{}", what, n));
  return result;
}

Status check_profile_reaches_batch(const Profile& profile, int64_t batch, const std::string& file) {
  const int64_t largest = profile.sub_batches.empty() ? 0 : profile.sub_batches.back();
  if (largest >= batch) return Ok{};
  std::vector<int64_t> missing;
  for (int64_t b = 1; b < batch && missing.size() < 40; b *= 2)
    if (b > largest) missing.push_back(b);
  missing.push_back(batch);
  std::vector<int64_t> wanted = profile.sub_batches;
  wanted.insert(wanted.end(), missing.begin(), missing.end());
  return Error{{file, 0, 0},
               fmt::format("covers sub-batches up to {} only, but the batch is {}: it lacks sub-batches {}. Make a "
                           "profile that reaches the batch: mplan profile MODEL ... --sub-batches {}",
                           largest, batch, join_numbers(missing), [&] {
                             std::string list;
                             for (int64_t b : wanted) list += (list.empty() ? "" : ",") + std::to_string(b);
                             return list;
                           }())};
}

RecordedCostModel::RecordedCostModel(Profile profile, std::string file)
    : profile_(std::move(profile)), file_(std::move(file)) {
  for (const ProfileEntry& e : profile_.entries)
    for (const auto& [kind, series] : e.tasks) {
      const std::string key = kind == "update" ? e.signature : e.signature + " " + kind;
      by_task_signature_[key] = &series;
      if (kind == "update" && key.find(" copies=") != std::string::npos) update_with_copies_ = &series;
    }
}

Result<std::unique_ptr<RecordedCostModel>> RecordedCostModel::create(Profile profile, const Tdfg& tdfg,
                                                                     const std::vector<int64_t>& required,
                                                                     const std::string& file) {
  Status covered = check_profile_covers(profile, tdfg, required, file);
  if (!covered) return covered.error();
  return std::unique_ptr<RecordedCostModel>(new RecordedCostModel(std::move(profile), file));
}

const RecordedCostModel::Series& RecordedCostModel::series(const Tdfg& tdfg, TaskId t, const TaskShape& shape) const {
  auto listed = [&](const TaskShape& s) { return by_task_signature_.count(task_signature(s)) > 0; };
  auto it = by_task_signature_.find(task_signature(listed_form(shape, listed)));
  // A 16-bit model's update where the plan makes its weight copies where
  // they are used remakes none: served from the model's update, which
  // remakes them (the profile has one update; a little over the time).
  if (it == by_task_signature_.end() && shape.kind == TaskKind::update && shape.copied_parameters == 0 &&
      update_with_copies_ != nullptr)
    return *update_with_copies_;
  MPLAN_CHECK(it != by_task_signature_.end(),
              "recorded cost model asked about a task its profile does not cover: " + tdfg.tasks.at(t).name + " ('" +
                  task_signature(shape) + "')");
  return *it->second;
}

// A series' options at sub-batch b: interpolated between recorded sizes,
// scaled past the largest (docs/profile-format.md).
std::vector<TaskOption> RecordedCostModel::options_at(const Series& s, int64_t sub_batch) {
  auto exact = s.find(sub_batch);
  auto upper = s.lower_bound(sub_batch);
  std::vector<TaskOption> result;
  if (exact != s.end()) {
    result = exact->second;
  } else if (upper == s.begin()) {
    result = upper->second;  // below the smallest recorded: its time and workspace
  } else if (upper == s.end()) {
    // Past the largest: in proportion to b (the per-sample time stays flat).
    const auto& [b_max, options] = *s.rbegin();
    const double scale = static_cast<double>(sub_batch) / static_cast<double>(b_max);
    for (const TaskOption& o : options)
      result.push_back({o.algorithm, o.time_ms * scale,
                        static_cast<int64_t>(std::ceil(static_cast<double>(o.workspace_bytes) * scale))});
  } else {
    // Between two recorded sub-batches: time linear, for algorithms both
    // list; workspace the upper size's. cuDNN's workspaces are not linear in
    // b: VGG-16 at sub-batch 86, interpolated between 64 and 128, planned
    // winograd_nonfused with less than cuDNN asked for, and 28 convolutions ran
    // another algorithm at 1.8x the planned time (H200, docs/gpu-validation.md).
    // The larger batch's workspace is the bound a planned one must respect.
    auto lower = std::prev(upper);
    const double f = static_cast<double>(sub_batch - lower->first) / static_cast<double>(upper->first - lower->first);
    for (const TaskOption& lo : lower->second)
      for (const TaskOption& hi : upper->second)
        if (lo.algorithm == hi.algorithm)
          result.push_back({lo.algorithm, lo.time_ms + f * (hi.time_ms - lo.time_ms),
                            std::max(lo.workspace_bytes, hi.workspace_bytes)});
    if (result.empty()) result = upper->second;
  }
  return result;
}

std::vector<TaskOption> RecordedCostModel::options(const Tdfg& tdfg, TaskId t, int64_t sub_batch) const {
  const TaskShape& shape = keys_.shape(keys_.key(tdfg, t));
  std::vector<TaskOption> result = options_at(series(tdfg, t, shape), sub_batch);
  // A compact task the profile lacks: the plain form's times, scaled by the
  // ratio of the two forms' memory traffic (these are streaming kernels).
  if (shape.layer.compact_backward && !by_task_signature_.count(task_signature(shape))) {
    const double plain = traffic_bytes(plain_form(shape), sub_batch);
    const double scale = plain > 0 ? traffic_bytes(shape, sub_batch) / plain : 1.0;
    for (TaskOption& o : result) o.time_ms *= scale;
  }
  // The op's own scratch is given whatever the file says: a profile whose
  // job ran no kernel for attention's BP1 recorded it with no workspace, and
  // the program's kernel needs one.
  const int64_t scratch = task_scratch_bytes(shape, sub_batch);
  for (TaskOption& o : result) o.workspace_bytes = std::max(o.workspace_bytes, scratch);
  // A task that casts its weights where it uses them: a profile has no such
  // kernel, so the cast is priced at the rate the measured update streams
  // its parameters (the same kind of kernel: every parameter read and written).
  if (shape.kind != TaskKind::update && shape.copied_parameters > 0 && tdfg.update_task != kNoTask) {
    const TaskShape& update = keys_.shape(keys_.key(tdfg, tdfg.update_task));
    const std::vector<TaskOption> update_options = options(tdfg, tdfg.update_task, 1);
    const double update_bytes = (update.state_elements > 0 ? 24.0 : 16.0) * static_cast<double>(update.parameters) +
                                2.0 * static_cast<double>(update.copied_parameters);
    const double cast_ms = update_options.empty() || update_bytes <= 0
                               ? 0.0
                               : update_options.front().time_ms / update_bytes * 6.0 *
                                     static_cast<double>(shape.copied_parameters);
    result = with_weight_cast(std::move(result), shape, cast_ms);
  }
  std::stable_sort(result.begin(), result.end(), [](const TaskOption& a, const TaskOption& b) {
    return a.time_ms != b.time_ms ? a.time_ms < b.time_ms : a.workspace_bytes < b.workspace_bytes;
  });
  return result;
}

std::optional<double> RecordedCostModel::recompute_from_saved_ms(const Tdfg& tdfg, TaskId t, int64_t sub_batch) const {
  const TaskShape& shape = keys_.shape(keys_.key(tdfg, t));
  auto listed = [&](const TaskShape& s) { return by_task_signature_.count(task_signature(s)) > 0; };
  auto it = by_task_signature_.find(layer_signature(listed_form(shape, listed)) + " " + kRecomputeKind);
  if (it == by_task_signature_.end()) return std::nullopt;
  const std::vector<TaskOption> options = options_at(*it->second, sub_batch);
  if (options.empty()) return std::nullopt;
  return options.front().time_ms;
}

std::string RecordedCostModel::describe() const {
  return fmt::format("recorded ({}, {}; made by {})", profile_.device_name, file_, profile_.cost_model);
}

CostModelInfo RecordedCostModel::info() const {
  CostModelInfo info;
  const bool analytic = profile_.cost_model.rfind("analytic", 0) == 0;
  info.kind = analytic ? "analytic" : "measured";
  info.math_mode = profile_.math_mode.empty() ? "as recorded" : profile_.math_mode;
  if (analytic)
    info.expected_error = "a profile of the analytic model (" + profile_.cost_model +
                          "): see its device's architecture table";
  return info;
}

}  // namespace mplan
