// emit_program: the plan as straight-line code (STYLE.md §7: a header saying
// what generated it and from what, constexpr offsets, one commented call per
// plan step, no plan interpreter).

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "codegen/codegen.h"
#include "codegen/emit_ops.h"
#include "codegen/emit_support.h"
#include "codegen/names.h"
#include "frontend/bytes.h"

namespace mplan::codegen {
namespace {

Error codegen_error(const std::string& message) { return Error{{"codegen", 0, 0}, message}; }

std::string stream_expr(StreamKind kind) {
  switch (kind) {
    case StreamKind::compute: return "c.compute";
    case StreamKind::h2d: return "c.h2d";
    case StreamKind::d2h: return "c.d2h";
    case StreamKind::copy: return "c.copy";
    case StreamKind::host: return "";
  }
  return "";
}

std::string round_text(int32_t round) { return round == kOnceRound ? "" : fmt::format(" round {}", round); }

std::string join(const std::vector<int64_t>& values) {
  std::string text;
  for (int64_t v : values) text += (text.empty() ? "" : ", ") + std::to_string(v);
  return text;
}

std::string float_literal(double v) {
  std::string text = fmt::format("{:.9g}", v);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text + "f";
}

// The generator's working state: names of regions and what each step means.
class ProgramEmitter {
 public:
  ProgramEmitter(const Model& model, const Tdfg& tdfg, const Plan& plan, const CodegenOptions& options)
      : model_(model), tdfg_(tdfg), plan_(plan), options_(options) {}

  Result<GeneratedProgram> emit() {
    if (Status s = check(); !s) return s.error();
    name_regions();
    find_last_users();
    std::string text = header() + support_types() + constants() + buffer_table() + tensor_table() +
                       support_helpers();
    Result<std::string> step_text = train_step();
    if (!step_text) return step_text.error();
    text += *step_text + support_main();
    GeneratedProgram program;
    program.files.push_back({"train.cpp", std::move(text)});
    program.files.push_back({"CMakeLists.txt", emit_cmake(model_.name, options_)});
    return program;
  }

 private:
  Status check() const {
    if (!plan_.model_digest.empty() && plan_.model_digest != plan_model_digest(model_))
      return codegen_error("the plan was made for another model (digest " + plan_.model_digest + ", model '" +
                           model_.name + "' has " + plan_model_digest(model_) + ")");
    if (plan_.sub_batches.empty()) return codegen_error("the plan has no sub-batches");
    for (const Step& step : plan_.steps) {
      if (step.kind != StepKind::compute) continue;
      if (step.task < 0 || step.task >= static_cast<TaskId>(tdfg_.tasks.size()))
        return codegen_error(fmt::format("step {} names task {}, which the TDFG does not have", step.index, step.task));
      const Task& task = tdfg_.tasks[step.task];
      // A recompute step lists the task's recompute signature (plan.h Step::recompute).
      const size_t reads = step.recompute ? task.recompute_reads.size() : task.reads.size();
      const size_t writes = step.recompute ? task.recompute_writes.size() : task.writes.size();
      if (step.recompute && (task.kind != TaskKind::FP || task.recompute_writes.empty()))
        return codegen_error(fmt::format("step {} recomputes {}, which has no recompute signature", step.index,
                                         task.name));
      if (step.reads.size() != reads || step.writes.size() != writes)
        return codegen_error(fmt::format("step {} ({}) lists {} reads and {} writes; the task has {} and {}",
                                         step.index, task.name, step.reads.size(), step.writes.size(), reads,
                                         writes));
      if (task.kind != TaskKind::update &&
          (step.round < 0 || step.round >= static_cast<int32_t>(plan_.sub_batches.size())))
        return codegen_error(fmt::format("step {} ({}) has round {} of {}", step.index, task.name, step.round,
                                         plan_.sub_batches.size()));
    }
    for (int32_t r = 0; r < static_cast<int32_t>(plan_.sub_batches.size()); ++r)
      for (BlockId b : {tdfg_.input_block, tdfg_.labels_block})
        if (host_slot_of(b, r) == kNoHostSlot)
          return codegen_error(fmt::format("the plan has no host slot for {} of round {}", tdfg_.blocks[b].name, r));
    return Ok{};
  }

  HostSlotId host_slot_of(BlockId block, int32_t round) const {
    for (const HostSlot& slot : plan_.host_slots)
      if (slot.block == block && slot.round == round) return slot.id;
    return kNoHostSlot;
  }

  std::string block_label(const Buffer& buffer) const {
    if (buffer.block != kNoBlock) return tdfg_.blocks[buffer.block].name + round_text(buffer.round);
    return "workspace of " + tdfg_.tasks[buffer.workspace_of].name + round_text(buffer.round);
  }

  void name_regions() {
    for (const Buffer& buffer : plan_.buffers) {
      std::string what = buffer.block != kNoBlock ? tdfg_.blocks[buffer.block].name
                                                  : "ws_" + tdfg_.tasks[buffer.workspace_of].name;
      std::string name = fmt::format("b{}_{}", buffer.id, sanitise_identifier(what));
      if (buffer.round != kOnceRound) name += fmt::format("_r{}", buffer.round);
      buffer_names_.push_back(name);
    }
    for (const HostSlot& slot : plan_.host_slots) {
      std::string name = fmt::format("h{}_{}", slot.id, sanitise_identifier(tdfg_.blocks[slot.block].name));
      if (slot.round != kOnceRound) name += fmt::format("_r{}", slot.round);
      slot_names_.push_back(name);
    }
  }

  // The buffers a step touches (for poisoning: its users).
  std::vector<BufferId> buffers_used(const Step& step) const {
    std::vector<BufferId> used;
    if (step.kind == StepKind::compute) {
      used = step.reads;
      used.insert(used.end(), step.writes.begin(), step.writes.end());
      if (step.workspace != kNoBuffer) used.push_back(step.workspace);
    } else if (step.kind == StepKind::offload || step.kind == StepKind::prefetch) {
      used.push_back(step.buffer);
    }
    used.erase(std::remove(used.begin(), used.end(), kNoBuffer), used.end());
    return used;
  }

  // Debug poisoning (docs/generated-program.md): each freed buffer is poisoned
  // on the stream of its last user, before that user's event is recorded, so a
  // later buffer in the same range (ordered after the users by the plan) is
  // never clobbered; users on other streams are waited for with debug events.
  void find_last_users() {
    std::map<BufferId, std::map<StreamKind, int32_t>> last_on_stream;
    for (const Step& step : plan_.steps) {
      for (BufferId b : buffers_used(step)) last_on_stream[b][step.stream] = step.index;
      if (step.kind != StepKind::free) continue;
      auto it = last_on_stream.find(step.buffer);
      if (it == last_on_stream.end()) continue;
      int32_t last = -1;
      for (auto [stream, index] : it->second) last = std::max(last, index);
      Poison poison{step.buffer, {}};
      for (auto [stream, index] : it->second) {
        if (index == last) continue;
        int32_t event = debug_event_count_++;
        debug_records_[index].push_back(event);
        poison.waits.push_back(event);
      }
      poisons_[last].push_back(poison);
      last_on_stream.erase(it);
    }
  }

  std::string header() const {
    const std::string model_file = options_.model_file.empty() ? model_.source_file : options_.model_file;
    std::vector<int64_t> rounds = plan_.sub_batches;
    std::string text = fmt::format(
        "// train.cpp: generated by mplan {} -- do not edit; regenerate with `mplan compile`.\n"
        "// model:  {}, from {} (digest {})\n"
        "// device: {}\n"
        "// budget: {} ({} bytes): resident {} + arena {}; plan peak arena {}\n"
        "// batch:  {} as {} sub-batch(es) [{}]; copy engines: {}\n"
        "// plan:   {} steps, {} events; simulated {:.3f} ms (ideal {:.3f} ms); {} offload(s) ({}), "
        "{} prefetch(es) ({})\n",
        comment_text(options_.mplan_version), comment_text(model_.name), comment_text(model_file.empty() ? "(built in code)" : model_file),
        comment_text(plan_.model_digest.empty() ? plan_model_digest(model_) : plan_.model_digest),
        comment_text(plan_.device), format_bytes(plan_.budget_bytes), plan_.budget_bytes,
        format_bytes(plan_.resident_region_bytes), format_bytes(plan_.arena_bytes),
        format_bytes(plan_.summary.peak_arena_bytes), plan_.batch, rounds.size(), join(rounds), plan_.copy_engines,
        plan_.steps.size(), plan_.event_count, plan_.summary.simulated_ms, plan_.summary.ideal_ms,
        plan_.summary.offload_count, format_bytes(plan_.summary.bytes_to_host), plan_.summary.prefetch_count,
        format_bytes(plan_.summary.bytes_to_device));
    for (const std::string& note : plan_.summary.notes) text += "// note:   " + comment_text(note) + "\n";
    text +=
        "//\n"
        "// Build: cmake -S . -B build && cmake --build build; run: build/train --steps 10\n"
        "// (flags, output and the weights format: docs/generated-program.md, or train --help).\n\n";
    return text;
  }

  std::string constants() const {
    const int rounds = static_cast<int>(plan_.sub_batches.size());
    std::vector<int64_t> first;
    int64_t at = 0;
    for (int64_t n : plan_.sub_batches) {
      first.push_back(at);
      at += n;
    }
    const auto& dims = model_.input.dims;
    const int64_t C = dims.at(0), H = dims.size() > 1 ? dims[1] : 1, W = dims.size() > 2 ? dims[2] : 1;
    std::string text = "\n// ---- the model and the plan's figures ----------------------------------------\n";
    text += fmt::format("constexpr const char* kModelName = {};\n", cpp_string_literal(model_.name));
    text += fmt::format("constexpr int64_t kBatch = {};  // B: the loss is averaged over all of it\n", at);
    text += fmt::format("constexpr int kRounds = {};  // sub-batches, gradients accumulated (moDNN §III)\n", rounds);
    text += fmt::format("constexpr int64_t kSubBatches[kRounds] = {{{}}};\n", join(plan_.sub_batches));
    text += fmt::format("constexpr int64_t kFirstSample[kRounds] = {{{}}};\n", join(first));
    text += fmt::format("constexpr int64_t kInputC = {}, kInputH = {}, kInputW = {}, kInputElements = {};\n", C, H, W,
                        model_.input.elements());
    text += fmt::format("constexpr int64_t kClasses = {};\n", model_.classes);
    text += fmt::format("constexpr float kDefaultLr = {}, kMomentum = {}, kWeightDecay = {};  // SGD\n",
                        float_literal(model_.optimizer.lr), float_literal(model_.optimizer.momentum),
                        float_literal(model_.optimizer.weight_decay));
    text += fmt::format("constexpr size_t kBudgetBytes = {};  // {}\n", plan_.budget_bytes, format_bytes(plan_.budget_bytes));
    text += fmt::format("constexpr size_t kResidentRegionBytes = {};  // weights, gradients, optimizer state\n",
                        plan_.resident_region_bytes);
    text += fmt::format("constexpr size_t kArenaBytes = {};  // {}\n", plan_.arena_bytes, format_bytes(plan_.arena_bytes));
    text += "constexpr size_t kDeviceBytes = kResidentRegionBytes + kArenaBytes;\n";
    text += "static_assert(kDeviceBytes <= kBudgetBytes, \"the plan's memory exceeds its budget\");\n";
    text += fmt::format("constexpr size_t kPlanPeakArenaBytes = {};  // {}\n", plan_.summary.peak_arena_bytes,
                        format_bytes(plan_.summary.peak_arena_bytes));
    text += "static_assert(kPlanPeakArenaBytes <= kArenaBytes, \"the plan's peak exceeds its arena\");\n";
    text += fmt::format("constexpr size_t kHostBytes = {};  // pinned host memory for offloads and input data\n",
                        plan_.host_bytes);
    text += fmt::format("constexpr int kEventCount = {};\n", std::max(plan_.event_count, 1));
    text += fmt::format("constexpr int kDebugEventCount = {};  // debug poisoning only\n",
                        std::max(debug_event_count_, 1));
    return text;
  }

  std::string region_def(const std::string& name, int64_t offset, int64_t bytes, const std::string& comment) const {
    return fmt::format("constexpr Region {}{{{}, {}}};  // {}\n", name, offset, bytes, comment_text(comment, 160));
  }

  int64_t absolute_offset(const Buffer& b) const {
    return b.resident ? b.offset : plan_.resident_region_bytes + b.offset;
  }

  std::string buffer_table() const {
    std::string text =
        "\n// ---- buffers: every block instance the plan places, at a fixed offset -------------\n"
        "// Bytes from the start of the device allocation: the resident region\n"
        "// [0, kResidentRegionBytes) holds weights, gradients and optimizer state; the\n"
        "// arena follows. Comment: the block, its round, and its place in its region.\n";
    for (const Buffer& b : plan_.buffers) {
      std::string where = b.resident ? fmt::format("resident +{}", b.offset) : fmt::format("arena +{}", b.offset);
      text += region_def(buffer_names_[b.id], absolute_offset(b), b.bytes,
                         fmt::format("{}, {}, {}", block_label(b), format_bytes(b.bytes), where));
    }
    text += "\n// ---- host slots: pinned host memory for offloaded blocks and each round's input ----\n";
    for (const HostSlot& s : plan_.host_slots)
      text += region_def(slot_names_[s.id], s.host_offset, s.bytes,
                         fmt::format("{}{}, {}", tdfg_.blocks[s.block].name, round_text(s.round), format_bytes(s.bytes)));
    std::string inputs, labels;
    for (int32_t r = 0; r < static_cast<int32_t>(plan_.sub_batches.size()); ++r) {
      inputs += (r ? ", " : "") + slot_names_[host_slot_of(tdfg_.input_block, r)];
      labels += (r ? ", " : "") + slot_names_[host_slot_of(tdfg_.labels_block, r)];
    }
    text += "constexpr Region kInputSlots[kRounds] = {" + inputs + "};\n";
    text += "constexpr Region kLabelSlots[kRounds] = {" + labels + "};\n";
    return text;
  }

  const Buffer* resident_buffer(BlockId block) const {
    for (const Buffer& b : plan_.buffers)
      if (b.resident && b.block == block) return &b;
    return nullptr;
  }

  // The weights file format (docs/generated-program.md): per layer
  // <layer>.weight, <layer>.bias, batch norm's <layer>.running_mean and
  // .running_var, and with momentum <tensor>.momentum; names sanitised and
  // made unique.
  std::string tensor_table() {
    struct Row {
      std::string file;
      int64_t offset, count;
      std::vector<int64_t> shape;
      const char* init;
      int64_t fan_in;
      bool optional;
      std::string layer;
    };
    std::vector<Row> rows;
    std::set<std::string> used_files;
    auto unique_file = [&](const std::string& base) {
      std::string file = sanitise_file_name(base);
      for (int k = 2; used_files.count(file); ++k) file = sanitise_file_name(base) + "-" + std::to_string(k);
      used_files.insert(file);
      return file;
    };
    for (LayerId l = 0; l < static_cast<LayerId>(model_.layers.size()); ++l) {
      const Layer& layer = model_.layers[l];
      if (tdfg_.weight_of[l] == kNoBlock) continue;
      const Buffer* w = resident_buffer(tdfg_.weight_of[l]);
      const Buffer* state = tdfg_.state_of[l] != kNoBlock ? resident_buffer(tdfg_.state_of[l]) : nullptr;
      MPLAN_CHECK(w != nullptr, "codegen: no resident buffer for W[" + layer.name + "]");
      std::vector<Row> params;
      if (layer.op == Op::conv) {
        const Shape& in = model_.input_shape(l, 0);
        const int64_t cg = in.dims.at(0) / layer.groups, fan = cg * layer.window.kernel_h * layer.window.kernel_w;
        params.push_back({"weight", 0, layer.out * fan, {layer.out, cg, layer.window.kernel_h, layer.window.kernel_w},
                          "Init::uniform_fan_in", fan, false, layer.name});
        if (layer.bias) params.push_back({"bias", layer.out * fan, layer.out, {layer.out}, "Init::uniform_fan_in", fan, false, layer.name});
      } else if (layer.op == Op::linear) {
        const int64_t in = model_.input_shape(l, 0).elements();
        params.push_back({"weight", 0, layer.out * in, {layer.out, in}, "Init::uniform_fan_in", in, false, layer.name});
        if (layer.bias) params.push_back({"bias", layer.out * in, layer.out, {layer.out}, "Init::uniform_fan_in", in, false, layer.name});
      } else if (layer.op == Op::batchnorm) {
        const int64_t c = model_.input_shape(l, 0).dims.at(0);
        params.push_back({"weight", 0, c, {c}, "Init::ones", 0, false, layer.name});
        params.push_back({"bias", c, c, {c}, "Init::zeros", 0, false, layer.name});
      }
      int64_t param_elements = 0;
      for (const Row& p : params) param_elements += p.count;
      MPLAN_CHECK(param_elements == model_.parameter_count(l), "codegen: parameter layout of " + layer.name);
      for (Row p : params) {
        p.file = unique_file(layer.name + "." + p.file);
        p.offset = absolute_offset(*w) + p.offset * 4;
        rows.push_back(p);
      }
      int64_t state_at = 0;
      if (model_.optimizer.momentum > 0 && state != nullptr) {
        for (Row p : params) {
          p.file = unique_file(layer.name + "." + p.file + ".momentum");
          p.offset = absolute_offset(*state) + p.offset * 4;
          p.init = "Init::zeros";
          p.optional = true;
          rows.push_back(p);
        }
        state_at = param_elements;
      }
      if (layer.op == Op::batchnorm && state != nullptr) {
        const int64_t c = model_.input_shape(l, 0).dims.at(0);
        rows.push_back({unique_file(layer.name + ".running_mean"), absolute_offset(*state) + state_at * 4, c, {c},
                        "Init::zeros", 0, true, layer.name});
        rows.push_back({unique_file(layer.name + ".running_var"), absolute_offset(*state) + (state_at + c) * 4, c, {c},
                        "Init::ones", 0, true, layer.name});
      }
    }
    std::string text =
        "\n// ---- tensors: the weights file format, one .npy per tensor ----------------------\n"
        "// file, offset, count, rank, shape, init, fan_in, optional (layer)\n"
        "constexpr Tensor kTensors[] = {\n";
    for (const Row& r : rows) {
      std::vector<int64_t> shape = r.shape;
      shape.resize(4, 0);
      text += fmt::format("    {{{}, {}, {}, {}, {{{}}}, {}, {}, {}}},  // {}\n", cpp_string_literal(r.file), r.offset,
                          r.count, r.shape.size(), join(shape), r.init, r.fan_in, r.optional ? "true" : "false",
                          comment_text(r.layer));
    }
    if (rows.empty()) text += "    {\"none\", 0, 0, 0, {0, 0, 0, 0}, Init::zeros, 0, true},\n";
    text += "};\n";
    return text;
  }

  std::string event_comment(EventId e) const {
    auto it = recorder_.find(e);
    if (it == recorder_.end()) return "";
    return fmt::format("  // step {}: {}", it->second, comment_text(short_description(plan_.steps[it->second]), 80));
  }

  std::string short_description(const Step& step) const {
    switch (step.kind) {
      case StepKind::compute: return tdfg_.tasks[step.task].name + round_text(step.round);
      case StepKind::offload: return "offload " + block_label(plan_.buffers[step.buffer]);
      case StepKind::prefetch: return "prefetch " + block_label(plan_.buffers[step.buffer]);
      case StepKind::alloc: return "alloc " + block_label(plan_.buffers[step.buffer]);
      case StepKind::free: return "free " + block_label(plan_.buffers[step.buffer]);
    }
    return "";
  }

  bool is_input_load(const Step& step) const {
    const Buffer& b = plan_.buffers[step.buffer];
    return b.block == tdfg_.input_block || b.block == tdfg_.labels_block;
  }

  std::string description(const Step& step) const {
    const std::string stream = stream_kind_name(step.stream);
    switch (step.kind) {
      case StepKind::compute: {
        const Task& task = tdfg_.tasks[step.task];
        const TaskChoice* choice = find_choice(plan_, step.task, step.round);
        std::string text = (step.recompute ? "recompute " : "") + task.name + round_text(step.round);
        if (task.kind != TaskKind::update) text += fmt::format(" ({} samples)", plan_.sub_batches[step.round]);
        if (task.has_algorithms && choice) {
          if (choice->micro_batches.size() > 1) {
            text += ", micro-batches";
            for (const MicroBatch& m : choice->micro_batches) text += fmt::format(" {}:{}", m.size, m.algorithm);
          } else {
            text += ", planned " + choice->algorithm;
          }
          if (choice->workspace_bytes > 0) text += ", workspace " + format_bytes(choice->workspace_bytes);
        }
        return text;
      }
      case StepKind::offload:
        return fmt::format("offload {} ({}) on {}", block_label(plan_.buffers[step.buffer]),
                           format_bytes(plan_.buffers[step.buffer].bytes), stream);
      case StepKind::prefetch:
        return fmt::format("{} {} ({}) on {}", is_input_load(step) ? "load" : "prefetch",
                           block_label(plan_.buffers[step.buffer]), format_bytes(plan_.buffers[step.buffer].bytes),
                           stream);
      case StepKind::alloc:
        return fmt::format("alloc {} at arena +{} ({})", block_label(plan_.buffers[step.buffer]),
                           plan_.buffers[step.buffer].offset, format_bytes(plan_.buffers[step.buffer].bytes));
      case StepKind::free:
        return fmt::format("free {}", block_label(plan_.buffers[step.buffer]));
    }
    return "";
  }

  Result<std::vector<std::string>> step_lines(const Step& step) {
    std::vector<std::string> lines;
    const std::string stream = stream_expr(step.stream);
    for (EventId e : step.waits) {
      if (step.stream == StreamKind::host)
        lines.push_back(fmt::format("event_synchronize(c.ev[{}]);{}", e, event_comment(e)));
      else
        lines.push_back(fmt::format("stream_wait_event({}, c.ev[{}]);{}", stream, e, event_comment(e)));
    }
    switch (step.kind) {
      case StepKind::compute: {
        const Task& task = tdfg_.tasks[step.task];
        ComputeCall call;
        call.model = &model_;
        call.tdfg = &tdfg_;
        call.task = &task;
        call.choice = find_choice(plan_, step.task, step.round);
        call.round = step.round;
        if (step.round != kOnceRound) {
          call.samples = plan_.sub_batches[step.round];
          for (int32_t r = 0; r < step.round; ++r) call.first_sample += plan_.sub_batches[r];
        }
        // A recompute step lists the buffers of the task's recompute signature (plan.h).
        call.recompute = step.recompute;
        const std::vector<BlockId>& reads = step.recompute ? task.recompute_reads : task.reads;
        const std::vector<BlockId>& writes = step.recompute ? task.recompute_writes : task.writes;
        for (size_t i = 0; i < reads.size(); ++i) call.region_of[reads[i]] = buffer_names_.at(step.reads[i]);
        for (size_t i = 0; i < writes.size(); ++i) call.region_of[writes[i]] = buffer_names_.at(step.writes[i]);
        if (step.workspace != kNoBuffer) {
          call.workspace_region = buffer_names_[step.workspace];
          call.workspace_bytes = plan_.buffers[step.workspace].bytes;
        }
        Result<std::vector<std::string>> body = emit_compute_call(call);
        if (!body) return body.error();
        // Debug mode: NaN must not be laundered (relu turns NaN into 0), so every
        // float output is checked right where it is written.
        std::string checked;
        for (size_t i = 0; i < writes.size(); ++i) {
          const Block& block = tdfg_.blocks[writes[i]];
          if (block.kind == BlockKind::saved && block.bytes_per_sample > 0 && task.op == Op::dropout) continue;  // mask bytes
          if (block.kind == BlockKind::labels) continue;
          const std::string& name = buffer_names_.at(step.writes[i]);
          checked += fmt::format("{}{{{}, \"{}\"}}", checked.empty() ? "" : ", ", name, name);
        }
        if (!checked.empty())
          body->push_back(fmt::format("if (c.debug_poison) check_finite({}, {{{}}}, c);", step.index, checked));
        if (body->size() == 1) {
          lines.push_back(fmt::format("launch(c.compute, [=, &c] {{ {} }});", body->front()));
        } else {
          lines.push_back("launch(c.compute, [=, &c] {");
          for (const std::string& line : *body) lines.push_back("  " + line);
          lines.push_back("});");
        }
        break;
      }
      case StepKind::offload:
        lines.push_back(fmt::format("copy_to_host(c, {}, {}, {});", buffer_names_[step.buffer],
                                    slot_names_.at(step.host_slot), stream));
        break;
      case StepKind::prefetch:
        lines.push_back(fmt::format("copy_to_device(c, {}, {}, {});", buffer_names_[step.buffer],
                                    slot_names_.at(step.host_slot), stream));
        break;
      case StepKind::alloc:
        lines.push_back(fmt::format("note_alloc(c, {});", buffer_names_[step.buffer]));
        break;
      case StepKind::free:
        lines.push_back(fmt::format("// (bookkeeping only; in debug mode {} is poisoned after its last user)",
                                    buffer_names_[step.buffer]));
        break;
    }
    if (auto it = debug_records_.find(step.index); it != debug_records_.end())
      for (int32_t e : it->second)
        lines.push_back(fmt::format("if (c.debug_poison) event_record(c.debug_ev[{}], {});", e, stream));
    if (auto it = poisons_.find(step.index); it != poisons_.end())
      for (const Poison& p : it->second) {
        for (int32_t e : p.waits)
          lines.push_back(fmt::format("if (c.debug_poison) stream_wait_event({}, c.debug_ev[{}]);", stream, e));
        lines.push_back(fmt::format("poison(c, {}, {});  // last use of {}", stream, buffer_names_[p.buffer],
                                    comment_text(block_label(plan_.buffers[p.buffer]), 80)));
      }
    if (step.records != kNoEvent) {
      if (step.stream == StreamKind::host)
        return codegen_error(fmt::format("step {} records an event on the host stream", step.index));
      lines.push_back(fmt::format("event_record(c.ev[{}], {});", step.records, stream));
    }
    return lines;
  }

  Result<std::string> train_step() {
    for (const Step& step : plan_.steps)
      if (step.records != kNoEvent) recorder_[step.records] = step.index;
    std::string text =
        "\n// ---- one training iteration: the plan's steps in issue order --------------------\n"
        "// Each stream runs its work in order; events order work across streams. Input\n"
        "// batches come from the host slots fill_inputs() wrote before the call.\n"
        "void train_step(Context& c, int64_t step) {\n"
        "  (void)step;\n"
        "  const bool first_update = c.first_update;\n"
        "  (void)first_update;\n";
    int32_t round = -2;
    for (const Step& step : plan_.steps) {
      if (step.kind == StepKind::compute && step.round != round) {
        round = step.round;
        text += round == kOnceRound ? "\n  // ==== the update (once per iteration) ====\n"
                                    : fmt::format("\n  // ==== round {}: samples {}..{} ====\n", round,
                                                  first_sample(round), first_sample(round) + plan_.sub_batches[round] - 1);
      }
      text += fmt::format("  // step {}: {}\n", step.index, comment_text(description(step), 160));
      Result<std::vector<std::string>> lines = step_lines(step);
      if (!lines) return lines.error();
      for (const std::string& line : *lines) text += "  " + line + "\n";
    }
    text +=
        "\n  c.compute.synchronize();\n"
        "  c.h2d.synchronize();\n"
        "  c.d2h.synchronize();\n"
        "}\n";
    return text;
  }

  int64_t first_sample(int32_t round) const {
    int64_t at = 0;
    for (int32_t r = 0; r < round; ++r) at += plan_.sub_batches[r];
    return at;
  }

  struct Poison {
    BufferId buffer;
    std::vector<int32_t> waits;  // debug events of the other streams' last users
  };

  const Model& model_;
  const Tdfg& tdfg_;
  const Plan& plan_;
  const CodegenOptions& options_;
  std::vector<std::string> buffer_names_, slot_names_;
  std::map<int32_t, std::vector<Poison>> poisons_;        // step index -> buffers last used there
  std::map<int32_t, std::vector<int32_t>> debug_records_; // step index -> debug events recorded there
  int32_t debug_event_count_ = 0;
  std::map<EventId, int32_t> recorder_;                   // event -> the step that records it
};

}  // namespace

const GeneratedFile* GeneratedProgram::find(const std::string& path) const {
  for (const GeneratedFile& file : files)
    if (file.path == path) return &file;
  return nullptr;
}

Result<GeneratedProgram> emit_program(const Model& model, const Tdfg& tdfg, const Plan& plan,
                                      const CodegenOptions& options) {
  return ProgramEmitter(model, tdfg, plan, options).emit();
}

}  // namespace mplan::codegen
