#include "planner/plan_json.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/input_file.h"
#include "core/limits.h"
#include "ops/precision.h"
#include "planner/plan_limits.h"
#include "profiler/input_json.h"

namespace mplan {

namespace {

using Json = nlohmann::ordered_json;

// ---- writing ----------------------------------------------------------------

Json summary_json(const PlanSummary& s) {
  Json j;
  j["simulated_ms"] = s.simulated_ms;
  j["ideal_ms"] = s.ideal_ms;
  j["peak_arena_bytes"] = s.peak_arena_bytes;
  j["peak_live_bytes"] = s.peak_live_bytes;
  j["fragmentation"] = s.fragmentation;
  j["bytes_to_host"] = s.bytes_to_host;
  j["bytes_to_device"] = s.bytes_to_device;
  j["offload_count"] = s.offload_count;
  j["prefetch_count"] = s.prefetch_count;
  j["input_load_count"] = s.input_load_count;
  j["input_bytes"] = s.input_bytes;
  j["defragmentation_count"] = s.defragmentation_count;
  j["move_count"] = s.move_count;
  j["bytes_moved"] = s.bytes_moved;
  j["stall_ms"] = s.stall_ms;
  j["planner_ms"] = s.planner_ms;
  j["notes"] = s.notes;
  return j;
}

Json data_parallel_json(const DataParallel& d) {
  Json j;
  j["ranks"] = d.ranks;
  j["rank"] = d.rank;
  j["global_batch"] = d.global_batch;
  j["machine"] = d.machine;
  j["policy"] = d.policy;
  j["plan_of_rank"] = d.plan_of_rank;
  j["bucket_bytes"] = d.bucket_bytes;
  j["step_ms"] = d.step_ms;
  Json buckets = Json::array();
  for (const GradientBucket& b : d.buckets)
    buckets.push_back({{"blocks", b.blocks},
                       {"bytes", b.bytes},
                       {"ready_after_step", b.ready_after_step},
                       {"start_ms", b.start_ms},
                       {"end_ms", b.end_ms}});
  j["buckets"] = buckets;
  Json ranks = Json::array();
  for (const RankFigures& r : d.rank_figures)
    ranks.push_back({{"finish_ms", r.finish_ms}, {"copy_ms", r.copy_ms}, {"alone_copy_ms", r.alone_copy_ms}});
  j["rank_figures"] = ranks;
  Json links = Json::array();
  for (const LinkUse& l : d.links)
    links.push_back({{"link", l.link},
                     {"kind", l.kind},
                     {"peak_transfers", l.peak_transfers},
                     {"peak_at_ms", l.peak_at_ms},
                     {"busy_ms", l.busy_ms},
                     {"bytes", l.bytes}});
  j["links"] = links;
  return j;
}

Json choice_json(const TaskChoice& c) {
  Json j;
  j["task"] = c.task;
  j["round"] = c.round;
  j["sub_batch"] = c.sub_batch;
  j["algorithm"] = c.algorithm;
  j["time_ms"] = c.time_ms;
  j["workspace_bytes"] = c.workspace_bytes;
  j["workspace"] = c.workspace;
  j["workspace_offset"] = c.workspace_offset;
  j["gain_ms"] = c.gain_ms;
  Json micro = Json::array();
  for (const MicroBatch& m : c.micro_batches) {
    micro.push_back({{"size", m.size},
                     {"algorithm", m.algorithm},
                     {"time_ms", m.time_ms},
                     {"workspace_bytes", m.workspace_bytes}});
  }
  j["micro_batches"] = micro;
  return j;
}

Json buffer_json(const Buffer& b) {
  Json j;
  j["id"] = b.id;
  j["block"] = b.block;
  j["workspace_of"] = b.workspace_of;
  j["round"] = b.round;
  j["bytes"] = b.bytes;
  j["offset"] = b.offset;
  j["resident"] = b.resident;
  return j;
}

Json host_slot_json(const HostSlot& h) {
  return Json{{"id", h.id}, {"block", h.block}, {"round", h.round}, {"bytes", h.bytes}, {"host_offset", h.host_offset}};
}

// Steps are the bulk of a plan: fields that keep their default are left out
// (the reader restores the default), except those the kind requires.
Json step_json(const Step& s) {
  Json j;
  j["index"] = s.index;
  j["kind"] = step_kind_name(s.kind);
  j["stream"] = stream_kind_name(s.stream);
  if (s.kind == StepKind::compute || s.task != kNoTask) j["task"] = s.task;
  j["round"] = s.round;
  if (s.kind != StepKind::compute || s.buffer != kNoBuffer) j["buffer"] = s.buffer;
  const bool copy = s.kind == StepKind::offload || s.kind == StepKind::prefetch;
  if (copy || s.host_slot != kNoHostSlot) j["host_slot"] = s.host_slot;
  if (s.kind == StepKind::compute || !s.reads.empty()) j["reads"] = s.reads;
  if (s.kind == StepKind::compute || !s.writes.empty()) j["writes"] = s.writes;
  if (s.workspace != kNoBuffer) j["workspace"] = s.workspace;
  if (!s.waits.empty()) j["waits"] = s.waits;
  if (s.records != kNoEvent) j["records"] = s.records;
  if (s.recompute) j["recompute"] = true;
  j["start_ms"] = s.start_ms;
  j["end_ms"] = s.end_ms;
  return j;
}

// One element per line inside arrays of records; the rest indented. Each
// record is converted and written in turn: a DOM of a plan's millions of
// steps took gigabytes.
template <typename T, typename ToJson>
void append_records(std::string& out, const std::vector<T>& records, ToJson to_json) {
  if (records.empty()) {
    out += "[]";
    return;
  }
  out += "[\n";
  for (size_t i = 0; i < records.size(); ++i) {
    out += "    ";
    out += to_json(records[i]).dump(-1, ' ', false, Json::error_handler_t::replace);
    out += i + 1 < records.size() ? ",\n" : "\n";
  }
  out += "  ]";
}

}  // namespace

std::string plan_to_json(const Plan& plan) {
  Json header;
  header["format"] = kPlanFormatName;
  header["format_version"] = plan.format_version;
  header["model_name"] = plan.model_name;
  header["model_digest"] = plan.model_digest;
  header["compact_backward"] = plan.compact_backward_layers;
  if (plan.weight_copies_where_used) header["weight_copies"] = "where_used";
  if (plan.evaluation) header["graph"] = "evaluation";
  header["device"] = plan.device;
  header["cost_model"] = Json{{"kind", plan.cost_model_kind},
                              {"math_mode", plan.math_mode},
                              {"expected_error", plan.cost_model_error}};
  header["budget_bytes"] = plan.budget_bytes;
  header["resident_bytes"] = plan.resident_bytes;
  header["resident_region_bytes"] = plan.resident_region_bytes;
  header["arena_bytes"] = plan.arena_bytes;
  header["host_bytes"] = plan.host_bytes;
  header["batch"] = plan.batch;
  header["sub_batch"] = plan.sub_batch;
  header["sub_batches"] = plan.sub_batches;
  header["copy_engines"] = plan.copy_engines;
  if (plan.data_parallel.ranks > 1) header["data_parallel"] = data_parallel_json(plan.data_parallel);
  header["event_count"] = plan.event_count;
  header["summary"] = summary_json(plan.summary);
  header["task_names"] = plan.task_names;
  header["block_names"] = plan.block_names;
  if (!plan.block_types.empty()) header["block_types"] = plan.block_types;

  std::string out = "{\n";
  for (auto it = header.begin(); it != header.end(); ++it) {
    out += "  " + Json(it.key()).dump() + ": ";
    if (it.key() == "summary" || it.key() == "data_parallel") {
      std::string nested = it.value().dump(2, ' ', false, Json::error_handler_t::replace);
      // Indent the nested object by two more spaces.
      std::string indented;
      for (char ch : nested) {
        indented += ch;
        if (ch == '\n') indented += "  ";
      }
      out += indented;
    } else {
      out += it.value().dump(-1, ' ', false, Json::error_handler_t::replace);
    }
    out += ",\n";
  }
  out += "  \"choices\": ";
  append_records(out, plan.choices, choice_json);
  out += ",\n  \"buffers\": ";
  append_records(out, plan.buffers, buffer_json);
  out += ",\n  \"host_slots\": ";
  append_records(out, plan.host_slots, host_slot_json);
  out += ",\n  \"steps\": ";
  append_records(out, plan.steps, step_json);
  out += "\n";
  out += "}\n";
  return out;
}

// ---- reading ------------------------------------------------------------------

namespace {

// The first problem found; thrown inside the reader, returned as an Error.
struct ReadFailure {
  std::string message;
};

class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& path, const std::string& message) const {
    throw ReadFailure{path.empty() ? message : path + ": " + message};
  }

  const Json& field(const Json& object, const std::string& path, const char* key) const {
    auto it = object.find(key);
    if (it == object.end()) fail(path, fmt::format("missing field \"{}\"", key));
    return *it;
  }
  static std::string sub(const std::string& path, const char* key) {
    return path.empty() ? std::string(key) : path + "." + key;
  }

  const Json& object(const Json& j, const std::string& path) const {
    if (!j.is_object()) fail(path, fmt::format("expected an object, found {}", j.type_name()));
    return j;
  }
  const Json& array(const Json& j, const std::string& path) const {
    if (!j.is_array()) fail(path, fmt::format("expected an array, found {}", j.type_name()));
    return j;
  }
  int64_t integer(const Json& j, const std::string& path, int64_t lo = std::numeric_limits<int64_t>::min(),
                  int64_t hi = std::numeric_limits<int64_t>::max()) const {
    int64_t v = 0;
    if (j.is_number_unsigned()) {
      uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) fail(path, "integer too large");
      v = static_cast<int64_t>(u);
    } else if (j.is_number_integer()) {
      v = j.get<int64_t>();
    } else {
      fail(path, fmt::format("expected an integer, found {}", describe(j)));
    }
    if (v < lo || v > hi) fail(path, fmt::format("{} is out of range {}..{}", v, lo, hi));
    return v;
  }
  int32_t int32(const Json& j, const std::string& path, int64_t lo = std::numeric_limits<int32_t>::min(),
                int64_t hi = std::numeric_limits<int32_t>::max()) const {
    return static_cast<int32_t>(integer(j, path, std::max<int64_t>(lo, std::numeric_limits<int32_t>::min()),
                                        std::min<int64_t>(hi, std::numeric_limits<int32_t>::max())));
  }
  double number(const Json& j, const std::string& path) const {
    if (!j.is_number()) fail(path, fmt::format("expected a number, found {}", describe(j)));
    return j.get<double>();
  }
  std::string text(const Json& j, const std::string& path) const {
    if (!j.is_string()) fail(path, fmt::format("expected a string, found {}", describe(j)));
    return j.get<std::string>();
  }
  bool boolean(const Json& j, const std::string& path) const {
    if (!j.is_boolean()) fail(path, fmt::format("expected true or false, found {}", describe(j)));
    return j.get<bool>();
  }
  static std::string describe(const Json& j) {
    std::string shown = j.dump(-1, ' ', false, Json::error_handler_t::replace);
    if (shown.size() > 40) shown = shown.substr(0, 37) + "...";
    return fmt::format("{} {}", j.type_name(), shown);
  }

  // Shorthands reading a required field of an object.
  int64_t int_field(const Json& o, const std::string& path, const char* key,
                    int64_t lo = std::numeric_limits<int64_t>::min(),
                    int64_t hi = std::numeric_limits<int64_t>::max()) const {
    return integer(field(o, path, key), sub(path, key), lo, hi);
  }
  int32_t int32_field(const Json& o, const std::string& path, const char* key,
                      int64_t lo = std::numeric_limits<int32_t>::min(),
                      int64_t hi = std::numeric_limits<int32_t>::max()) const {
    return int32(field(o, path, key), sub(path, key), lo, hi);
  }
  double number_field(const Json& o, const std::string& path, const char* key) const {
    return number(field(o, path, key), sub(path, key));
  }
  std::string text_field(const Json& o, const std::string& path, const char* key) const {
    return text(field(o, path, key), sub(path, key));
  }
  std::vector<std::string> texts(const Json& j, const std::string& path) const {
    std::vector<std::string> out;
    for (size_t i = 0; i < array(j, path).size(); ++i) out.push_back(text(j[i], fmt::format("{}[{}]", path, i)));
    return out;
  }
  template <typename Int>
  std::vector<Int> ints(const Json& j, const std::string& path, int64_t lo, int64_t hi) const {
    std::vector<Int> out;
    for (size_t i = 0; i < array(j, path).size(); ++i)
      out.push_back(static_cast<Int>(integer(j[i], fmt::format("{}[{}]", path, i), lo, hi)));
    return out;
  }

  Plan read(const Json& root) const {
    Plan plan = read_header(root);
    // Ids of tasks and blocks: checked against the names when the file has them
    // (the verifier checks them against the TDFG in any case).
    const Limits limits{static_cast<int32_t>(plan.sub_batches.size()),
                        plan.task_names.empty() ? std::numeric_limits<int32_t>::max() - 1
                                                : static_cast<int64_t>(plan.task_names.size()) - 1,
                        plan.block_names.empty() ? std::numeric_limits<int32_t>::max() - 1
                                                 : static_cast<int64_t>(plan.block_names.size()) - 1};
    read_buffers(root, limits, plan);
    read_host_slots(root, limits, plan);
    read_choices(root, limits, plan);
    read_steps(root, limits, plan);
    if (root.contains("data_parallel"))
      read_data_parallel(object(root["data_parallel"], "data_parallel"), limits, plan);
    return plan;
  }

  // What the ids of a plan's tables may be.
  struct Limits {
    int32_t rounds = 0;
    int64_t max_task = 0, max_block = 0;
  };

  Plan read_header(const Json& root) const {
    object(root, "");
    Plan plan;
    const std::string format = text_field(root, "", "format");
    if (format != kPlanFormatName)
      fail("format", fmt::format("\"{}\" is not a plan file (expected \"{}\")", format, kPlanFormatName));
    plan.format_version = int32_field(root, "", "format_version");
    if (plan.format_version != kPlanFormatVersion)
      fail("format_version", fmt::format("version {} is not supported; this mplan reads version {} (re-run "
                                         "`mplan compile` to make a new plan)",
                                         plan.format_version, kPlanFormatVersion));
    plan.model_name = text_field(root, "", "model_name");
    plan.model_digest = text_field(root, "", "model_digest");
    if (root.contains("compact_backward")) {  // optional: plans without variants may omit it
      const Json& names = field(root, "", "compact_backward");
      if (!names.is_array()) fail("compact_backward", "must be a list of layer names");
      for (size_t i = 0; i < names.size(); ++i) {
        if (!names[i].is_string()) fail(fmt::format("compact_backward[{}]", i), "must be a layer name (a string)");
        plan.compact_backward_layers.push_back(names[i].get<std::string>());
      }
    }
    if (root.contains("weight_copies")) {  // optional: absent means resident copies (or none)
      const std::string copies = text_field(root, "", "weight_copies");
      if (copies != "resident" && copies != "where_used")
        fail("weight_copies", fmt::format("'{}' is not resident or where_used", copies));
      plan.weight_copies_where_used = copies == "where_used";
    }
    if (root.contains("graph")) {  // optional: absent means the training step's
      const std::string graph = text_field(root, "", "graph");
      if (graph != "training" && graph != "evaluation")
        fail("graph", fmt::format("'{}' is not training or evaluation", graph));
      plan.evaluation = graph == "evaluation";
    }
    plan.device = text_field(root, "", "device");
    if (root.contains("cost_model")) {  // optional: plans written before it say nothing
      const Json& cost = field(root, "", "cost_model");
      object(cost, "cost_model");
      plan.cost_model_kind = text_field(cost, "cost_model", "kind");
      plan.math_mode = text_field(cost, "cost_model", "math_mode");
      plan.cost_model_error = text_field(cost, "cost_model", "expected_error");
    }
    plan.budget_bytes = int_field(root, "", "budget_bytes", 0);
    plan.resident_bytes = int_field(root, "", "resident_bytes", 0);
    plan.resident_region_bytes = int_field(root, "", "resident_region_bytes", 0);
    plan.arena_bytes = int_field(root, "", "arena_bytes", 0);
    plan.host_bytes = int_field(root, "", "host_bytes", 0);
    plan.batch = int_field(root, "", "batch", 0);
    plan.sub_batch = int_field(root, "", "sub_batch", 0);
    if (array(field(root, "", "sub_batches"), "sub_batches").size() > static_cast<size_t>(kMaxRounds))
      fail("sub_batches", fmt::format("more than {} rounds (the most a plan has)", kMaxRounds));
    plan.sub_batches = ints<int64_t>(field(root, "", "sub_batches"), "sub_batches", 1, kMaxSizeField);
    plan.copy_engines = int32_field(root, "", "copy_engines", 1, 2);
    plan.event_count = int32_field(root, "", "event_count", 0);
    read_summary(object(field(root, "", "summary"), "summary"), plan.summary);
    if (root.contains("task_names")) plan.task_names = texts(root["task_names"], "task_names");
    if (root.contains("block_names")) plan.block_names = texts(root["block_names"], "block_names");
    if (root.contains("block_types")) {
      plan.block_types = texts(root["block_types"], "block_types");
      for (size_t b = 0; b < plan.block_types.size(); ++b)
        if (!parse_data_type(plan.block_types[b]))
          fail("block_types", fmt::format("block_types[{}] is '{}', not a type (float32, bfloat16, float16, int32)", b,
                                          plan.block_types[b]));
    }

    return plan;
  }

  void read_buffers(const Json& root, const Limits& limits, Plan& plan) const {
    const int32_t rounds = limits.rounds;
    const int64_t max_task = limits.max_task, max_block = limits.max_block;
    const Json& buffers = array(field(root, "", "buffers"), "buffers");
    for (size_t i = 0; i < buffers.size(); ++i) {
      const std::string path = fmt::format("buffers[{}]", i);
      const Json& o = object(buffers[i], path);
      Buffer b;
      b.id = int32_field(o, path, "id");
      if (b.id != static_cast<BufferId>(i)) fail(sub(path, "id"), fmt::format("is {}, expected its index {}", b.id, i));
      b.block = int32_field(o, path, "block", -1, max_block);
      b.workspace_of = int32_field(o, path, "workspace_of", -1, max_task);
      b.round = int32_field(o, path, "round", kOnceRound, rounds - 1);
      b.bytes = int_field(o, path, "bytes", 0);
      b.offset = int_field(o, path, "offset", 0);
      b.resident = boolean(field(o, path, "resident"), sub(path, "resident"));
      plan.buffers.push_back(b);
    }
  }

  void read_host_slots(const Json& root, const Limits& limits, Plan& plan) const {
    const int32_t rounds = limits.rounds;
    const int64_t max_block = limits.max_block;
    const Json& slots = array(field(root, "", "host_slots"), "host_slots");
    for (size_t i = 0; i < slots.size(); ++i) {
      const std::string path = fmt::format("host_slots[{}]", i);
      const Json& o = object(slots[i], path);
      HostSlot h;
      h.id = int32_field(o, path, "id");
      if (h.id != static_cast<HostSlotId>(i)) fail(sub(path, "id"), fmt::format("is {}, expected its index {}", h.id, i));
      h.block = int32_field(o, path, "block", 0, max_block);
      h.round = int32_field(o, path, "round", kOnceRound, rounds - 1);
      h.bytes = int_field(o, path, "bytes", 0);
      h.host_offset = int_field(o, path, "host_offset", 0);
      plan.host_slots.push_back(h);
    }
  }

  void read_choices(const Json& root, const Limits& limits, Plan& plan) const {
    const int32_t rounds = limits.rounds;
    const int64_t max_task = limits.max_task;
    const int64_t max_buffer = static_cast<int64_t>(plan.buffers.size()) - 1;
    const Json& choices = array(field(root, "", "choices"), "choices");
    for (size_t i = 0; i < choices.size(); ++i) {
      const std::string path = fmt::format("choices[{}]", i);
      const Json& o = object(choices[i], path);
      TaskChoice c;
      c.task = int32_field(o, path, "task", 0, max_task);
      c.round = int32_field(o, path, "round", kOnceRound, rounds - 1);
      c.sub_batch = int_field(o, path, "sub_batch", 0);
      c.algorithm = text_field(o, path, "algorithm");
      c.time_ms = number_field(o, path, "time_ms");
      c.workspace_bytes = int_field(o, path, "workspace_bytes", 0);
      c.workspace = int32_field(o, path, "workspace", -1, max_buffer);
      c.workspace_offset = int_field(o, path, "workspace_offset", -1);
      c.gain_ms = number_field(o, path, "gain_ms");
      const std::string micro_path = sub(path, "micro_batches");
      const Json& micro = array(field(o, path, "micro_batches"), micro_path);
      for (size_t m = 0; m < micro.size(); ++m) {
        const std::string mp = fmt::format("{}[{}]", micro_path, m);
        const Json& mo = object(micro[m], mp);
        MicroBatch mb;
        mb.size = int_field(mo, mp, "size", 1);
        mb.algorithm = text_field(mo, mp, "algorithm");
        mb.time_ms = number_field(mo, mp, "time_ms");
        mb.workspace_bytes = int_field(mo, mp, "workspace_bytes", 0);
        c.micro_batches.push_back(mb);
      }
      plan.choices.push_back(std::move(c));
    }

  }

  void read_steps(const Json& root, const Limits& limits, Plan& plan) const {
    const int32_t rounds = limits.rounds;
    const int64_t max_task = limits.max_task;
    const int64_t max_buffer = static_cast<int64_t>(plan.buffers.size()) - 1;
    const int64_t max_slot = static_cast<int64_t>(plan.host_slots.size()) - 1;
    const Json& steps = array(field(root, "", "steps"), "steps");
    plan.steps.reserve(steps.size());
    // Every event is recorded by exactly one step: more events than steps is
    // not a plan (and would make the verifier allocate for nothing).
    if (static_cast<size_t>(plan.event_count) > steps.size())
      fail("event_count", fmt::format("{} events, but the plan has {} steps and each event is recorded by one",
                                      plan.event_count, steps.size()));
    const int64_t max_event = static_cast<int64_t>(plan.event_count) - 1;
    for (size_t i = 0; i < steps.size(); ++i) {
      const std::string path = fmt::format("steps[{}]", i);
      const Json& o = object(steps[i], path);
      Step s;
      s.index = int32_field(o, path, "index");
      if (s.index != static_cast<int32_t>(i))
        fail(sub(path, "index"), fmt::format("is {}, expected its position {}", s.index, i));
      const std::string kind = text_field(o, path, "kind");
      if (!parse_step_kind(kind, &s.kind))
        fail(sub(path, "kind"), fmt::format("\"{}\" is not one of compute, offload, prefetch, alloc, free", kind));
      const std::string stream = text_field(o, path, "stream");
      if (!parse_stream_kind(stream, &s.stream))
        fail(sub(path, "stream"), fmt::format("\"{}\" is not one of compute, h2d, d2h, copy, host", stream));
      const bool compute = s.kind == StepKind::compute;
      const bool copy = s.kind == StepKind::offload || s.kind == StepKind::prefetch;
      // Required by the kind, else optional with the default.
      if (compute || o.contains("task")) s.task = int32_field(o, path, "task", -1, max_task);
      s.round = int32_field(o, path, "round", kOnceRound, rounds - 1);
      if (!compute || o.contains("buffer")) s.buffer = int32_field(o, path, "buffer", -1, max_buffer);
      if (copy || o.contains("host_slot")) s.host_slot = int32_field(o, path, "host_slot", -1, max_slot);
      if (compute || o.contains("reads"))
        s.reads = ints<BufferId>(field(o, path, "reads"), sub(path, "reads"), -1, max_buffer);
      if (compute || o.contains("writes"))
        s.writes = ints<BufferId>(field(o, path, "writes"), sub(path, "writes"), -1, max_buffer);
      if (o.contains("workspace")) s.workspace = int32_field(o, path, "workspace", -1, max_buffer);
      if (o.contains("waits")) s.waits = ints<EventId>(o["waits"], sub(path, "waits"), 0, max_event);
      if (o.contains("records")) s.records = int32_field(o, path, "records", -1, max_event);
      if (o.contains("recompute")) {
        if (!o.at("recompute").is_boolean()) fail(sub(path, "recompute"), "expected true or false");
        s.recompute = o.at("recompute").get<bool>();
      }
      s.start_ms = number_field(o, path, "start_ms");
      s.end_ms = number_field(o, path, "end_ms");
      plan.steps.push_back(std::move(s));
    }
  }

  // Optional: absent means a single-GPU plan. Bucket blocks are checked
  // against the TDFG (resident dW blocks, each once) by the verifier.
  void read_data_parallel(const Json& o, const Limits& limits, Plan& plan) const {
    const std::string p = "data_parallel";
    DataParallel& d = plan.data_parallel;
    d.ranks = int32_field(o, p, "ranks", 2, kMaxRanks);
    d.rank = int32_field(o, p, "rank", 0, d.ranks - 1);
    d.global_batch = int_field(o, p, "global_batch", 1, kMaxSizeField);
    if (d.global_batch != plan.batch * d.ranks)
      fail(sub(p, "global_batch"), fmt::format("is {}, but {} ranks of batch {} make {}", d.global_batch, d.ranks,
                                               plan.batch, plan.batch * d.ranks));
    d.machine = text_field(o, p, "machine");
    d.policy = text_field(o, p, "policy");
    d.plan_of_rank = ints<int32_t>(field(o, p, "plan_of_rank"), sub(p, "plan_of_rank"), 0, d.ranks - 1);
    if (static_cast<int32_t>(d.plan_of_rank.size()) != d.ranks)
      fail(sub(p, "plan_of_rank"), fmt::format("has {} entries for {} ranks", d.plan_of_rank.size(), d.ranks));
    for (int32_t r = 0; r < d.ranks; ++r)
      if (d.plan_of_rank[r] > r || d.plan_of_rank[d.plan_of_rank[r]] != d.plan_of_rank[r])
        fail(fmt::format("{}.plan_of_rank[{}]", p, r),
             fmt::format("is {}: a rank runs its own plan or the plan of a lower rank that runs its own",
                         d.plan_of_rank[r]));
    d.bucket_bytes = int_field(o, p, "bucket_bytes", 1);
    d.step_ms = number_field(o, p, "step_ms");
    const Json& buckets = array(field(o, p, "buckets"), sub(p, "buckets"));
    const int32_t max_step = static_cast<int32_t>(plan.steps.size()) - 1;
    for (size_t i = 0; i < buckets.size(); ++i) {
      const std::string path = fmt::format("{}.buckets[{}]", p, i);
      const Json& bo = object(buckets[i], path);
      GradientBucket b;
      b.blocks = ints<BlockId>(field(bo, path, "blocks"), sub(path, "blocks"), 0, limits.max_block);
      if (b.blocks.empty()) fail(sub(path, "blocks"), "is empty");
      b.bytes = int_field(bo, path, "bytes", 1);
      b.ready_after_step = int32_field(bo, path, "ready_after_step", 0, max_step);
      b.start_ms = number_field(bo, path, "start_ms");
      b.end_ms = number_field(bo, path, "end_ms");
      d.buckets.push_back(std::move(b));
    }
    if (o.contains("rank_figures")) {  // optional: figures for `mplan inspect`
      const Json& ranks = array(o["rank_figures"], sub(p, "rank_figures"));
      if (ranks.size() != static_cast<size_t>(d.ranks))
        fail(sub(p, "rank_figures"), fmt::format("has {} entries for {} ranks", ranks.size(), d.ranks));
      for (size_t i = 0; i < ranks.size(); ++i) {
        const std::string path = fmt::format("{}.rank_figures[{}]", p, i);
        const Json& ro = object(ranks[i], path);
        d.rank_figures.push_back({number_field(ro, path, "finish_ms"), number_field(ro, path, "copy_ms"),
                                  number_field(ro, path, "alone_copy_ms")});
      }
    }
    if (o.contains("links")) {
      const Json& links = array(o["links"], sub(p, "links"));
      if (links.size() > kReportedLinks) fail(sub(p, "links"), fmt::format("more than {} links", kReportedLinks));
      for (size_t i = 0; i < links.size(); ++i) {
        const std::string path = fmt::format("{}.links[{}]", p, i);
        const Json& lo = object(links[i], path);
        d.links.push_back({text_field(lo, path, "link"), text_field(lo, path, "kind"),
                           int32_field(lo, path, "peak_transfers", 0), number_field(lo, path, "peak_at_ms"),
                           number_field(lo, path, "busy_ms"), number_field(lo, path, "bytes")});
      }
    }
  }

  void read_summary(const Json& o, PlanSummary& s) const {
    const std::string p = "summary";
    s.simulated_ms = number_field(o, p, "simulated_ms");
    s.ideal_ms = number_field(o, p, "ideal_ms");
    s.peak_arena_bytes = int_field(o, p, "peak_arena_bytes", 0);
    s.peak_live_bytes = int_field(o, p, "peak_live_bytes", 0);
    s.fragmentation = number_field(o, p, "fragmentation");
    s.bytes_to_host = int_field(o, p, "bytes_to_host", 0);
    s.bytes_to_device = int_field(o, p, "bytes_to_device", 0);
    s.offload_count = int32_field(o, p, "offload_count", 0);
    s.prefetch_count = int32_field(o, p, "prefetch_count", 0);
    s.input_load_count = int32_field(o, p, "input_load_count", 0);
    s.input_bytes = int_field(o, p, "input_bytes", 0);
    s.defragmentation_count = int32_field(o, p, "defragmentation_count", 0);
    s.move_count = int32_field(o, p, "move_count", 0);
    s.bytes_moved = int_field(o, p, "bytes_moved", 0);
    s.stall_ms = number_field(o, p, "stall_ms");
    s.planner_ms = number_field(o, p, "planner_ms");
    s.notes = texts(field(o, p, "notes"), "summary.notes");
  }

 private:
  std::string file_;
};

}  // namespace

Result<Plan> plan_from_json(const std::string& text, const std::string& file) {
  Result<Json> parsed = parse_input_json<Json>(text, file);
  if (!parsed) {
    Error e = parsed.error();
    if (e.message.rfind("not valid JSON: ", 0) == 0) e.message = "not a valid JSON plan file: " + e.message.substr(16);
    return e;
  }
  const Json& root = *parsed;
  try {
    return Reader(file).read(root);
  } catch (const ReadFailure& failure) {
    return Error{SourceLocation{file, 0, 0}, failure.message};
  } catch (const Json::exception& e) {  // should not happen: every access is checked first
    return Error{SourceLocation{file, 0, 0}, std::string("malformed plan: ") + e.what()};
  }
}

Result<Plan> load_plan(const std::string& path) {
  Result<std::string> text = read_input_file(path, "the plan file", kMaxPlanFileBytes);
  if (!text) return text.error();
  return plan_from_json(*text, path);
}

std::string plan_json_path(const std::string& plan_json_or_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(plan_json_or_dir, ec)) return (fs::path(plan_json_or_dir) / "plan.json").string();
  return plan_json_or_dir;
}

// ---- equality -------------------------------------------------------------------

namespace {

// Exact, bit-level for doubles (NaN equals NaN only with the same bits).
bool same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

bool same(const MicroBatch& a, const MicroBatch& b) {
  return a.size == b.size && a.algorithm == b.algorithm && same(a.time_ms, b.time_ms) &&
         a.workspace_bytes == b.workspace_bytes;
}
bool same(const TaskChoice& a, const TaskChoice& b) {
  if (a.micro_batches.size() != b.micro_batches.size()) return false;
  for (size_t i = 0; i < a.micro_batches.size(); ++i)
    if (!same(a.micro_batches[i], b.micro_batches[i])) return false;
  return a.task == b.task && a.round == b.round && a.sub_batch == b.sub_batch && a.algorithm == b.algorithm &&
         same(a.time_ms, b.time_ms) && a.workspace_bytes == b.workspace_bytes && a.workspace == b.workspace &&
         a.workspace_offset == b.workspace_offset && same(a.gain_ms, b.gain_ms);
}
bool same(const Buffer& a, const Buffer& b) {
  return a.id == b.id && a.block == b.block && a.workspace_of == b.workspace_of && a.round == b.round &&
         a.bytes == b.bytes && a.offset == b.offset && a.resident == b.resident;
}
bool same(const HostSlot& a, const HostSlot& b) {
  return a.id == b.id && a.block == b.block && a.round == b.round && a.bytes == b.bytes &&
         a.host_offset == b.host_offset;
}
bool same(const Step& a, const Step& b) {
  return a.index == b.index && a.kind == b.kind && a.stream == b.stream && a.task == b.task &&
         a.round == b.round && a.buffer == b.buffer && a.host_slot == b.host_slot && a.reads == b.reads &&
         a.writes == b.writes && a.workspace == b.workspace && a.waits == b.waits && a.records == b.records &&
         a.recompute == b.recompute && same(a.start_ms, b.start_ms) && same(a.end_ms, b.end_ms);
}
bool same(const GradientBucket& a, const GradientBucket& b) {
  return a.blocks == b.blocks && a.bytes == b.bytes && a.ready_after_step == b.ready_after_step &&
         same(a.start_ms, b.start_ms) && same(a.end_ms, b.end_ms);
}

bool same(const DataParallel& a, const DataParallel& b);

bool same(const RankFigures& a, const RankFigures& b) {
  return same(a.finish_ms, b.finish_ms) && same(a.copy_ms, b.copy_ms) && same(a.alone_copy_ms, b.alone_copy_ms);
}

bool same(const LinkUse& a, const LinkUse& b) {
  return a.link == b.link && a.kind == b.kind && a.peak_transfers == b.peak_transfers &&
         same(a.peak_at_ms, b.peak_at_ms) && same(a.busy_ms, b.busy_ms) && same(a.bytes, b.bytes);
}

bool same(const PlanSummary& a, const PlanSummary& b) {
  return same(a.simulated_ms, b.simulated_ms) && same(a.ideal_ms, b.ideal_ms) &&
         a.peak_arena_bytes == b.peak_arena_bytes && a.peak_live_bytes == b.peak_live_bytes &&
         same(a.fragmentation, b.fragmentation) && a.bytes_to_host == b.bytes_to_host &&
         a.bytes_to_device == b.bytes_to_device && a.offload_count == b.offload_count &&
         a.prefetch_count == b.prefetch_count && a.input_load_count == b.input_load_count &&
         a.input_bytes == b.input_bytes && a.defragmentation_count == b.defragmentation_count &&
         a.move_count == b.move_count && a.bytes_moved == b.bytes_moved &&
         same(a.stall_ms, b.stall_ms) && same(a.planner_ms, b.planner_ms) && a.notes == b.notes;
}
template <typename T>
bool same_all(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!same(a[i], b[i])) return false;
  return true;
}

bool same(const DataParallel& a, const DataParallel& b) {
  return a.ranks == b.ranks && a.rank == b.rank && a.global_batch == b.global_batch && a.machine == b.machine &&
         a.policy == b.policy && a.plan_of_rank == b.plan_of_rank && a.bucket_bytes == b.bucket_bytes &&
         same(a.step_ms, b.step_ms) && same_all(a.buckets, b.buckets) && same_all(a.rank_figures, b.rank_figures) &&
         same_all(a.links, b.links);
}

}  // namespace

bool plans_equal(const Plan& a, const Plan& b) {
  return a.format_version == b.format_version && a.model_name == b.model_name &&
         a.model_digest == b.model_digest && a.compact_backward_layers == b.compact_backward_layers &&
         a.weight_copies_where_used == b.weight_copies_where_used && a.evaluation == b.evaluation &&
         a.device == b.device && a.cost_model_kind == b.cost_model_kind && a.math_mode == b.math_mode &&
         a.cost_model_error == b.cost_model_error && a.budget_bytes == b.budget_bytes &&
         a.resident_bytes == b.resident_bytes && a.resident_region_bytes == b.resident_region_bytes &&
         a.arena_bytes == b.arena_bytes && a.host_bytes == b.host_bytes && a.batch == b.batch &&
         a.sub_batch == b.sub_batch && a.sub_batches == b.sub_batches && a.copy_engines == b.copy_engines &&
         same(a.data_parallel, b.data_parallel) && a.event_count == b.event_count && same(a.summary, b.summary) &&
         a.task_names == b.task_names && a.block_names == b.block_names && a.block_types == b.block_types &&
         same_all(a.choices, b.choices) && same_all(a.buffers, b.buffers) && same_all(a.host_slots, b.host_slots) &&
         same_all(a.steps, b.steps);
}

}  // namespace mplan
