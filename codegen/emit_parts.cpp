#include "codegen/emit_parts.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "codegen/names.h"
#include "codegen/program_text.h"
#include "core/bytes.h"
#include "ops/op_table.h"

namespace mplan::codegen {
namespace {

Error codegen_error(const std::string& message) { return Error{{"codegen", 0, 0}, message}; }

std::string join(const std::vector<int64_t>& values) {
  std::string text;
  for (int64_t v : values) text += (text.empty() ? "" : ", ") + std::to_string(v);
  return text;
}

HostSlotId host_slot_of(const Plan& plan, BlockId block, int32_t round) {
  for (const HostSlot& slot : plan.host_slots)
    if (slot.block == block && slot.round == round) return slot.id;
  return kNoHostSlot;
}

int64_t absolute_offset(const Plan& plan, const Buffer& b) {
  return b.resident ? b.offset : plan.resident_region_bytes + b.offset;
}

const Buffer* resident_buffer(const Plan& plan, BlockId block) {
  for (const Buffer& b : plan.buffers)
    if (b.resident && b.block == block) return &b;
  return nullptr;
}

const char* init_name(TensorInit init) {
  switch (init) {
    case TensorInit::zeros: return "Init::zeros";
    case TensorInit::ones: return "Init::ones";
    case TensorInit::uniform_fan_in: return "Init::uniform_fan_in";
  }
  return "Init::zeros";
}

}  // namespace

Status check_plan(const Model& model, const Tdfg& tdfg, const Plan& plan) {
  if (!plan.model_digest.empty() && plan.model_digest != model_digest(model))
    return codegen_error("the plan was made for another model (digest " + plan.model_digest + ", model '" +
                         model.name + "' has " + model_digest(model) + ")");
  if (plan.sub_batches.empty()) return codegen_error("the plan has no sub-batches");
  for (const Step& step : plan.steps) {
    if (step.kind != StepKind::compute) continue;
    if (step.task < 0 || step.task >= static_cast<TaskId>(tdfg.tasks.size()))
      return codegen_error(fmt::format("step {} names task {}, which the TDFG does not have", step.index, step.task));
    const Task& task = tdfg.tasks[step.task];
    // A recompute step lists the task's recompute signature (plan.h Step::recompute).
    const size_t reads = step.recompute ? task.recompute_reads.size() : task.reads.size();
    const size_t writes = step.recompute ? task.recompute_writes.size() : task.writes.size();
    if (step.recompute && (task.kind != TaskKind::FP || task.recompute_writes.empty()))
      return codegen_error(fmt::format("step {} recomputes {}, which has no recompute signature", step.index,
                                       task.name));
    if (step.reads.size() != reads || step.writes.size() != writes)
      return codegen_error(fmt::format("step {} ({}) lists {} reads and {} writes; the task has {} and {}", step.index,
                                       task.name, step.reads.size(), step.writes.size(), reads, writes));
    if (task.kind != TaskKind::update &&
        (step.round < 0 || step.round >= static_cast<int32_t>(plan.sub_batches.size())))
      return codegen_error(fmt::format("step {} ({}) has round {} of {}", step.index, task.name, step.round,
                                       plan.sub_batches.size()));
  }
  for (int32_t r = 0; r < static_cast<int32_t>(plan.sub_batches.size()); ++r)
    for (BlockId b : {tdfg.input_block, tdfg.labels_block})
      if (host_slot_of(plan, b, r) == kNoHostSlot)
        return codegen_error(fmt::format("the plan has no host slot for {} of round {}", tdfg.blocks[b].name, r));
  return Ok{};
}

DebugPoisoning plan_debug_poisoning(const Plan& plan) {
  DebugPoisoning result;
  auto buffers_used = [](const Step& step) {
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
  };
  std::map<BufferId, std::map<StreamKind, int32_t>> last_on_stream;
  for (const Step& step : plan.steps) {
    for (BufferId b : buffers_used(step)) last_on_stream[b][step.stream] = step.index;
    if (step.kind != StepKind::free) continue;
    auto it = last_on_stream.find(step.buffer);
    if (it == last_on_stream.end()) continue;
    int32_t last = -1;
    for (auto [stream, index] : it->second) last = std::max(last, index);
    PoisonAfter poison{step.buffer, {}};
    for (auto [stream, index] : it->second) {
      if (index == last) continue;
      const int32_t event = result.debug_event_count++;
      result.events.push_back({step.buffer, stream});
      result.records[index].push_back(event);
      poison.waits.push_back(event);
    }
    result.poisons[last].push_back(poison);
    last_on_stream.erase(it);
  }
  return result;
}

std::map<BufferId, std::string> resident_constant_names(const Tdfg& tdfg, const Plan& plan) {
  std::map<BufferId, std::string> names;
  std::set<std::string> used;
  for (const Buffer& b : plan.buffers) {
    if (!b.resident) continue;
    const std::string base = sanitise_identifier(b.block != kNoBlock ? tdfg.blocks[b.block].name : "resident");
    std::string name = base;
    for (int k = 2; used.count(name); ++k) name = base + "_" + std::to_string(k);
    used.insert(name);
    names[b.id] = name;
  }
  return names;
}

std::string emit_header(const ProgramHeader& h) {
  const Plan& plan = h.plan;
  const std::string model_file = h.options.model_file.empty() ? h.model.source_file : h.options.model_file;
  std::string text = fmt::format(
      "// train.cpp: generated by mplan {} -- do not edit; regenerate with `mplan compile`.\n"
      "// model:  {}, from {} (digest {})\n"
      "// target: {} (runtime/{}); cost model: {}; math {}\n"
      "// budget: {} ({} bytes): resident {} + arena {}; plan peak arena {}\n"
      "// batch:  {} as {} sub-batch(es) [{}]; copy engines: {}\n"
      "// plan:   {} steps, {} events; simulated {:.3f} ms (ideal {:.3f} ms); {} offload(s) ({}), {} prefetch(es) ({})\n",
      comment_text(h.options.mplan_version), comment_text(h.model.name),
      comment_text(model_file.empty() ? "(built in code)" : model_file),
      comment_text(plan.model_digest.empty() ? model_digest(h.model) : plan.model_digest),
      target_name(h.options.target), target_name(h.options.target), comment_text(plan.device),
      comment_text(plan.math_mode.empty() ? "fp32" : plan.math_mode),
      format_bytes(plan.budget_bytes), plan.budget_bytes, format_bytes(plan.resident_region_bytes),
      format_bytes(plan.arena_bytes), format_bytes(plan.summary.peak_arena_bytes), plan.batch,
      plan.sub_batches.size(), join(plan.sub_batches), plan.copy_engines, plan.steps.size(), plan.event_count,
      plan.summary.simulated_ms, plan.summary.ideal_ms, plan.summary.offload_count,
      format_bytes(plan.summary.bytes_to_host), plan.summary.prefetch_count, format_bytes(plan.summary.bytes_to_device));
  for (const std::string& note : plan.summary.notes) text += "// note:   " + comment_text(note, 200) + "\n";
  for (const std::string& warning : h.warnings) text += "// WARNING: " + comment_text(warning, 300) + "\n";
  text +=
      "//\n"
      "// Build: cmake -S . -B build && cmake --build build; run: build/train --steps 10\n"
      "// (flags, output and the weights format: docs/generated-program.md, or train --help).\n\n";
  return text;
}

std::string emit_model_constants(const ProgramHeader& h, const std::map<BufferId, std::string>& resident_names) {
  const Plan& plan = h.plan;
  const Model& model = h.model;
  const Tdfg& tdfg = h.tdfg;
  std::vector<int64_t> first;
  int64_t at = 0;
  for (int64_t n : plan.sub_batches) {
    first.push_back(at);
    at += n;
  }
  std::string text = "\n// ---- the model and the plan's figures " + std::string(42, '-') + "\n";
  text += fmt::format("constexpr int64_t kSubBatches[] = {{{}}};  // per round; B = {}\n", join(plan.sub_batches), at);
  text += fmt::format("constexpr int64_t kFirstSample[] = {{{}}};\n", join(first));
  text += fmt::format("constexpr int64_t kResidentRegionBytes = {};  // {}: weights, gradients, optimizer state\n",
                      plan.resident_region_bytes, format_bytes(plan.resident_region_bytes));
  text += fmt::format("constexpr int64_t kArenaBytes = {};  // {}\n", plan.arena_bytes, format_bytes(plan.arena_bytes));
  text += fmt::format("static_assert(kResidentRegionBytes + kArenaBytes <= {}, \"the plan's memory exceeds its budget\");\n",
                      plan.budget_bytes);
  text += fmt::format("static_assert({} <= kArenaBytes, \"the plan's peak exceeds its arena\");\n",
                      plan.summary.peak_arena_bytes);
  std::string inputs, labels;
  for (int32_t r = 0; r < static_cast<int32_t>(plan.sub_batches.size()); ++r) {
    const HostSlot& x = plan.host_slots[host_slot_of(plan, tdfg.input_block, r)];
    const HostSlot& y = plan.host_slots[host_slot_of(plan, tdfg.labels_block, r)];
    inputs += fmt::format("{}{{{}, {}}}", r ? ", " : "", x.host_offset, x.bytes);
    labels += fmt::format("{}{{{}, {}}}", r ? ", " : "", y.host_offset, y.bytes);
  }
  text += "// Host slots of each round's images and labels (filled before each iteration).\n";
  text += "constexpr Region kInputSlots[] = {" + inputs + "};\n";
  text += "constexpr Region kLabelSlots[] = {" + labels + "};\n";

  text += "\n// ---- resident buffers: bytes from the start of device memory " + std::string(19, '-') + "\n";
  text += "namespace resident {\n";
  for (const auto& [id, name] : resident_names) {
    const Buffer& b = plan.buffers[id];
    text += fmt::format("constexpr int64_t {} = {};  // {}\n", name, absolute_offset(plan, b), format_bytes(b.bytes));
  }
  text += "}  // namespace resident\n";

  // The weights file format (docs/generated-program.md): per layer the op
  // table's parameter tensors (<layer>.weight, <layer>.bias), with momentum
  // <tensor>.momentum, then its non-learnable state (<layer>.running_mean ...).
  std::string rows;
  std::set<std::string> used_files;
  auto unique_file = [&](const std::string& base) {
    std::string file = sanitise_file_name(base);
    for (int k = 2; used_files.count(file); ++k) file = sanitise_file_name(base) + "-" + std::to_string(k);
    used_files.insert(file);
    return file;
  };
  auto row = [&](const std::string& file, int64_t offset, const LayerTensor& t, const char* init, bool optional,
                 const std::string& layer) {
    std::vector<int64_t> shape = t.shape;
    shape.resize(4, 0);
    rows += fmt::format("    {{{}, {}, {}, {}, {{{}}}, {}, {}, {}}},  // {}\n", cpp_string_literal(file), offset,
                        t.elements(), t.shape.size(), join(shape), init, t.fan_in, optional ? "true" : "false",
                        comment_text(layer));
  };
  for (LayerId l = 0; l < static_cast<LayerId>(model.layers.size()); ++l) {
    const Layer& layer = model.layers[l];
    if (tdfg.weight_of[l] == kNoBlock) continue;
    const OpSpec& spec = op_spec(layer.op);
    const std::vector<Shape> inputs = model.input_shapes(l);
    const Buffer* w = resident_buffer(plan, tdfg.weight_of[l]);
    const Buffer* state = tdfg.state_of[l] != kNoBlock ? resident_buffer(plan, tdfg.state_of[l]) : nullptr;
    MPLAN_CHECK(w != nullptr, "codegen: no resident buffer for W[" + layer.name + "]");
    const std::vector<LayerTensor> params = spec.parameters ? spec.parameters(layer, inputs) : std::vector<LayerTensor>{};
    int64_t element = 0;
    for (const LayerTensor& t : params) {
      row(unique_file(layer.name + "." + t.name), absolute_offset(plan, *w) + element * 4, t, init_name(t.init), false,
          layer.name);
      element += t.elements();
    }
    MPLAN_CHECK(element == model.parameter_count(l), "codegen: parameter layout of " + layer.name);
    int64_t state_at = 0;
    if (model.optimizer.momentum > 0 && state != nullptr) {
      for (const LayerTensor& t : params) {
        row(unique_file(layer.name + "." + t.name + ".momentum"), absolute_offset(plan, *state) + state_at * 4, t,
            "Init::zeros", true, layer.name);
        state_at += t.elements();
      }
    }
    if (spec.buffers != nullptr && state != nullptr)
      for (const LayerTensor& t : spec.buffers(layer, inputs)) {
        row(unique_file(layer.name + "." + t.name), absolute_offset(plan, *state) + state_at * 4, t, init_name(t.init),
            true, layer.name);
        state_at += t.elements();
      }
  }
  text += "\n// ---- tensors: the weights file format, one .npy per tensor " + std::string(21, '-') + "\n";
  text += "// file, offset, count, rank, shape, init, fan_in, optional (layer)\n";
  text += "constexpr WeightTensor kTensors[] = {\n";
  text += rows.empty() ? "    {\"none\", 0, 0, 0, {0, 0, 0, 0}, Init::zeros, 0, true},\n" : rows;
  text += "};\n";
  text += fmt::format("constexpr int32_t kTensorCount = {};\n", rows.empty() ? 0 : std::count(rows.begin(), rows.end(), '\n'));
  return text;
}

std::string emit_program_spec(const ProgramHeader& h, int32_t debug_event_count) {
  const Plan& plan = h.plan;
  return fmt::format(
      "\nconstexpr ProgramSpec kSpec = {{\n"
      "    .model_name = {},\n"
      "    .model_digest = {},\n"
      "    .target = \"{}\",\n"
      "    .math_mode = {},\n"
      "    .batch = {},\n"
      "    .rounds = {},\n"
      "    .sub_batches = kSubBatches,\n"
      "    .first_sample = kFirstSample,\n"
      "    .input_c = {}, .input_h = {}, .input_w = {},\n"
      "    .classes = {},\n"
      "    .default_lr = {},\n"
      "    .budget_bytes = {},\n"
      "    .resident_region_bytes = kResidentRegionBytes,\n"
      "    .arena_bytes = kArenaBytes,\n"
      "    .plan_peak_arena_bytes = {},\n"
      "    .plan_simulated_ms = {},\n"
      "    .plan_stall_ms = {},\n"
      "    .host_bytes = {},\n"
      "    .event_count = {},\n"
      "    .debug_event_count = {},\n"
      "    .tensors = kTensors,\n"
      "    .tensor_count = kTensorCount,\n"
      "    .input_slots = kInputSlots,\n"
      "    .label_slots = kLabelSlots,\n"
      "    .run_iteration = run_iteration,\n"
      "}};\n",
      cpp_string_literal(h.model.name),
      cpp_string_literal(plan.model_digest.empty() ? model_digest(h.model) : plan.model_digest),
      target_name(h.options.target), cpp_string_literal(plan.math_mode.empty() ? "fp32" : plan.math_mode), plan.batch, plan.sub_batches.size(), h.model.input.dims.at(0),
      h.model.input.dims.size() > 1 ? h.model.input.dims[1] : 1, h.model.input.dims.size() > 2 ? h.model.input.dims[2] : 1,
      h.model.classes, float_literal(h.model.optimizer.lr), plan.budget_bytes, plan.summary.peak_arena_bytes,
      fmt::format("{:.4f}", plan.summary.simulated_ms), fmt::format("{:.4f}", plan.summary.stall_ms), plan.host_bytes, std::max(plan.event_count, 0), debug_event_count);
}

}  // namespace mplan::codegen
