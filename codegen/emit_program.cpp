// emit_program: the plan as a training program in the style of llm.c
// (docs/style.md, 7): a header saying what generated it and from what, the model's
// constants and tensor table, then the schedule: one function per class of
// identical rounds, one plain call per step with its shapes in a comment, and
// a table of what differs between the rounds of a class (offsets, events,
// first sample). The fixed code is runtime/program.cpp.

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "codegen/codegen.h"
#include "codegen/data_parallel.h"
#include "codegen/debug_poisoning.h"
#include "codegen/plan_check.h"
#include "codegen/program_header.h"
#include "codegen/names.h"
#include "codegen/program_text.h"
#include "codegen/round_classes.h"
#include "codegen/segments.h"
#include "codegen/sixteen_bit_calls.h"
#include "ops/sixteen_bit_kernels.h"
#include "codegen/step_calls.h"
#include "core/bytes.h"

namespace mplan::codegen {
namespace {

Error codegen_error(const std::string& message) { return Error{{"codegen", 0, 0}, message}; }

std::string stream_expr(StreamKind kind) {
  switch (kind) {
    case StreamKind::compute: return "p.compute().stream";
    case StreamKind::h2d: return "p.h2d()";
    case StreamKind::d2h: return "p.d2h()";
    case StreamKind::copy: return "p.copy()";
    case StreamKind::host: return "";
  }
  return "";
}

// What differs between rounds of one segment class: named fields of its table row.
struct Field {
  std::string name;
  std::string type;  // "int64_t" or "int32_t"
  int64_t value = 0;
};

// The code of one plan step inside a segment. Waits and records are apart:
// rounds that differ only in which events they wait for share one body, with
// the events as table fields that are -1 where a round has none.
struct StepCode {
  std::string label;  // "alloc_X_next": names a guard that starts with this step
  std::string comment;
  std::vector<std::string> waits;    // before the step (event fields)
  std::vector<std::string> lines;    // the step itself
  std::vector<std::string> records;  // after it (event fields)
};

// The code of one segment, with its fields.
struct SegmentCode {
  Segment segment;
  std::vector<StepCode> steps;
  std::vector<Field> fields;        // offsets, host offsets, debug events: the same names in every round of a class
  std::vector<Field> event_fields;  // the plan's events this round waits for or records
  std::string describe;             // "round 3 (64 samples)"
};

class ProgramEmitter {
 public:
  ProgramEmitter(const Model& model, const Tdfg& tdfg, const Plan& plan, const CodegenOptions& options,
                 const EvaluationSchedule* evaluation = nullptr, const std::vector<const Plan*>& rank_plans = {})
      : model_(model), tdfg_(tdfg), plan_(plan), options_(options), evaluation_(evaluation), rank_plans_(rank_plans) {}

  Result<GeneratedProgram> emit() {
    Result<std::string> schedule = emit_steps();
    if (!schedule) return schedule.error();
    std::string evaluation;
    if (evaluation_ != nullptr) {
      ProgramEmitter emitter(model_, *evaluation_->tdfg, *evaluation_->plan, options_);
      Result<std::string> text = emitter.emit_evaluation(resident_offsets());
      if (!text) return text.error();
      evaluation = std::move(*text);
      merge_warnings(emitter.warnings_);
    }
    // Ranks that run plans of their own: one schedule each (docs/multi-gpu.md).
    Result<std::string> ranks = emit_rank_schedules();
    if (!ranks) return ranks.error();
    const bool per_rank = !ranks->empty();
    GeneratedProgram program;
    program.warnings = warnings_;
    const std::string mismatch = cost_model_mismatch(plan_.device, options_.target);
    if (!mismatch.empty()) program.warnings.insert(program.warnings.begin(), mismatch);
    // A 16-bit plan's math is its precision, which the CPU computes exactly (its casts).
    if (options_.target == Target::cpu && !plan_.math_mode.empty() && plan_.math_mode != "fp32" &&
        plan_.math_mode != "as recorded" && plan_.math_mode != precision_name(model_.precision))
      program.warnings.push_back(fmt::format("the plan was priced in {} math; the CPU backend computes in fp32",
                                             plan_.math_mode));
    if (options_.target == Target::cuda && types_.sixteen_bit)
      program.warnings.push_back(fmt::format(
          "precision {}: on CUDA the convolutions and linear layers run 16-bit kernels, but the other ops compute "
          "in float between casts, as the CPU reference does (docs/generated-program.md, \"16-bit programs\"): "
          "the casts are not in the plan's {:.4g} ms, and their float scratch ({}) is device memory beyond the "
          "budget",
          precision_name(model_.precision), plan_.summary.simulated_ms, format_bytes(wide_scratch_bytes_)));
    ProgramHeader header{model_, tdfg_, plan_, options_, program.warnings};
    const SpecRole role = evaluation_ != nullptr ? SpecRole::training_with_evaluation : SpecRole::training;
    std::string text = emit_header(header) +
                       "#include \"runtime/runtime.h\"\n\nnamespace {\n\nusing namespace mplan::rt;\n" +
                       emit_model_constants(header, resident_names_) + "\n// ---- shapes of the kernel calls " +
                       std::string(48, '-') + "\n" + constants_.text() + *schedule + emit_weight_tables(header) +
                       evaluation + (per_rank ? "\nconst ProgramSpec* spec_of_rank(int32_t rank);\n" : "") +
                       (data_parallel() ? emit_data_parallel_tables(model_, tdfg_, plan_, digest(), per_rank) : "") +
                       emit_program_spec(header, poisoning_.debug_event_count, wide_scratch_bytes_, role) + *ranks +
                       "\n}  // namespace\n\n" +
                       "int main(int argc, char** argv) { return mplan::rt::run_program(argc, argv, kSpec); }\n";
    program.files.push_back({"train.cpp", std::move(text)});
    program.files.push_back(
        {"CMakeLists.txt", emit_cmake(model_.name, options_, data_parallel() ? plan_.data_parallel.ranks : 1)});
    return program;
  }

 private:
  // The resident buffers by their constant's name: bytes from the start of device memory.
  std::map<std::string, int64_t> resident_offsets() const {
    std::map<std::string, int64_t> offsets;
    for (const auto& [id, name] : resident_names_) offsets[name] = plan_.buffers.at(id).offset;
    return offsets;
  }

  void merge_warnings(const std::vector<std::string>& warnings) {
    for (const std::string& warning : warnings)
      if (std::find(warnings_.begin(), warnings_.end(), warning) == warnings_.end()) warnings_.push_back(warning);
  }

  // The digest every rank checks at start: of every rank's plan.
  std::string digest() const { return plans_digest(plan_, rank_plans_); }

  // The schedules of the ranks whose plans differ from this one (rank 0's),
  // each in `namespace rank_<r>`, and spec_of_rank; "" where every rank runs this plan.
  Result<std::string> emit_rank_schedules() {
    if (!data_parallel()) return std::string();
    const DataParallel& dp = plan_.data_parallel;
    std::map<int32_t, const Plan*> by_rank;
    for (const Plan* other : rank_plans_) by_rank[other->data_parallel.rank] = other;
    for (size_t r = 0; r < dp.plan_of_rank.size(); ++r) {
      const int32_t runs = dp.plan_of_rank[r];
      if (runs != 0 && by_rank.count(runs) == 0)
        return codegen_error(fmt::format("rank {} runs rank {}'s plan (plan-rank-{}.json), which was not given", r,
                                         runs, runs));
    }
    if (by_rank.empty()) return std::string();
    std::string text;
    for (const auto& [rank, other] : by_rank) {
      if (other->data_parallel.plan_of_rank != dp.plan_of_rank || other->arena_bytes != plan_.arena_bytes ||
          other->resident_region_bytes != plan_.resident_region_bytes)
        return codegen_error(fmt::format("the plan of rank {} is not of the same ranks and memory layout as rank 0's",
                                         rank));
      ProgramEmitter emitter(model_, tdfg_, *other, options_, evaluation_, rank_plans_);
      Result<std::string> schedule = emitter.emit_rank(resident_offsets(), digest());
      if (!schedule) return schedule.error();
      merge_warnings(emitter.warnings_);
      text += *schedule;
    }
    std::string specs;
    for (size_t r = 0; r < dp.plan_of_rank.size(); ++r) {
      const int32_t runs = dp.plan_of_rank[r];
      specs += fmt::format("{}{}", r ? ", " : "", runs == 0 ? "&kSpec" : fmt::format("&rank_{}::kSpec", runs));
    }
    return text + fmt::format("\n// The schedule each rank runs (plan_of_rank).\n"
                              "const ProgramSpec* spec_of_rank(int32_t rank) {{\n"
                              "  static constexpr const ProgramSpec* kSpecOfRank[] = {{{}}};\n"
                              "  return kSpecOfRank[rank];\n"
                              "}}\n",
                              specs);
  }

  // Rank r's schedule, in `namespace rank_<r>`: its own rounds, shapes,
  // round classes, run_iteration, bucket tables and kSpec; the resident
  // buffers, tensors and weight tables are rank 0's, which must place every
  // resident buffer where this plan does.
  Result<std::string> emit_rank(const std::map<std::string, int64_t>& rank_0_resident, const std::string& digest) {
    Result<std::string> schedule = emit_steps();
    if (!schedule) return schedule.error();
    if (resident_offsets() != rank_0_resident)
      return codegen_error(fmt::format("the plan of rank {} places the resident buffers otherwise than rank 0's",
                                       plan_.data_parallel.rank));
    ProgramHeader header{model_, tdfg_, plan_, options_, warnings_};
    const SpecRole role = evaluation_ != nullptr ? SpecRole::training_with_evaluation : SpecRole::training;
    const int32_t rank = plan_.data_parallel.rank;
    return fmt::format("\n// ---- the schedule of rank {} {}\n"
                       "// plan-rank-{}.json: the ranks whose plan_of_rank is {} run it (docs/multi-gpu.md).\n"
                       "namespace rank_{} {{\n\n",
                       rank, std::string(56, '-'), rank, rank, rank) +
           emit_round_constants(header) +
           fmt::format("static_assert({} <= kArenaBytes, \"rank {}'s peak exceeds the arena\");\n",
                       plan_.summary.peak_arena_bytes, rank) +
           constants_.text() + *schedule + emit_data_parallel_tables(model_, tdfg_, plan_, digest, true) +
           emit_program_spec(header, poisoning_.debug_event_count, wide_scratch_bytes_, role) +
           fmt::format("\n}}  // namespace rank_{}\n", rank);
  }

  // The evaluation's schedule, in `namespace evaluation` (its own rounds,
  // shapes, round classes, run_iteration and kSpec; the resident buffers,
  // tensors and weight tables are the training program's, which must place
  // every resident buffer where this plan does).
  Result<std::string> emit_evaluation(const std::map<std::string, int64_t>& training_resident) {
    Result<std::string> schedule = emit_steps();
    if (!schedule) return schedule.error();
    if (resident_offsets() != training_resident)
      return codegen_error("the evaluation plan places the resident buffers otherwise than the training plan");
    ProgramHeader header{model_, tdfg_, plan_, options_, warnings_};
    return "\n// ---- the evaluation " + std::string(60, '-') +
           "\n// The forward pass alone, planned in the same budget (docs/generated-program.md, \"Evaluation\"):\n"
           "// batch norm with its running statistics, dropout off, the loss's metrics per round.\n"
           "namespace evaluation {\n\n" +
           emit_round_constants(header) +
           fmt::format("static_assert({} <= kArenaBytes, \"the evaluation's peak exceeds the arena\");\n",
                       plan_.summary.peak_arena_bytes) +
           constants_.text() + *schedule +
           emit_program_spec(header, poisoning_.debug_event_count, wide_scratch_bytes_, SpecRole::evaluation) +
           "\n}  // namespace evaluation\n";
  }

  // Checks the plan, makes every compute step's calls and the schedule's text.
  Result<std::string> emit_steps() {
    if (Status s = check_plan(model_, tdfg_, plan_); !s) return s.error();
    types_ = model_types(model_);
    if (data_parallel()) {
      Result<std::map<int32_t, std::vector<int32_t>>> starts = bucket_starts(tdfg_, plan_);
      if (!starts) return starts.error();
      bucket_starts_ = std::move(*starts);
    }
    const ChoiceIndex choices(plan_);
    for (const Step& step : plan_.steps) {
      if (step.records != kNoEvent) recorder_[step.records] = step.index;
      if (step.kind != StepKind::compute) continue;
      Result<StepCalls> calls = step_calls(model_, tdfg_, plan_, choices, step, options_.target);
      if (!calls) return calls.error();
      note_substitutions(step, *calls);
      calls_.emplace(step.index, std::move(*calls));
    }
    poisoning_ = plan_debug_poisoning(plan_);
    resident_names_ = resident_constant_names(tdfg_, plan_);
    std::vector<SegmentCode> segments;
    for (const Segment& segment : split_segments(plan_)) {
      Result<SegmentCode> code = emit_segment(segment);
      if (!code) return code.error();
      segments.push_back(std::move(*code));
    }
    return emit_schedule(segments);
  }

  // A training plan of several ranks (its evaluation plan runs on each rank alone).
  bool data_parallel() const { return is_data_parallel(plan_) && !tdfg_.evaluation; }

  // ---- the target's algorithms ------------------------------------------------------------

  void note_substitutions(const Step& step, const StepCalls& calls) {
    for (size_t i = 0; i < calls.algorithms.size(); ++i) {
      const AlgorithmChoice& a = calls.algorithms[i];
      if (a.reason.empty()) continue;
      const std::string key = tdfg_.tasks[step.task].name + " " + calls.planned[i] + " -> " + a.name;
      if (!substituted_.insert(key).second) continue;
      warnings_.push_back(fmt::format("{}: planned {}, runs {}: {}", tdfg_.tasks[step.task].name, calls.planned[i],
                                      a.name, a.reason));
    }
  }

  // ---- one segment ---------------------------------------------------------------------

  class Fields {
   public:
    Fields(std::vector<Field>& data, std::vector<Field>& events) : data_(data), events_(events) {}
    std::string get(const std::string& kind, int64_t id, const std::string& base, const char* type, int64_t value) {
      auto key = std::make_pair(kind, id);
      auto it = names_.find(key);
      if (it != names_.end()) return "t." + it->second;
      std::string name = base;
      for (int k = 2; used_.count(name); ++k) name = base + "_" + std::to_string(k);
      used_.insert(name);
      names_.emplace(key, name);
      (kind == "event" || kind == "bucket" ? events_ : data_).push_back(Field{name, type, value});
      return "t." + name;
    }

   private:
    std::vector<Field>& data_;
    std::vector<Field>& events_;
    std::map<std::pair<std::string, int64_t>, std::string> names_;
    std::set<std::string> used_ = {"round", "first_sample", "first_step"};
  };

  // "_next" for the following round, "_prev" for the one before; "" for the segment's own.
  static std::string relative(int32_t round, int32_t base) {
    if (round == kOnceRound || base == kOnceRound || round == base) return "";
    const int32_t d = round - base;
    if (d == 1) return "_next";
    if (d == -1) return "_prev";
    return d > 0 ? fmt::format("_plus{}", d) : fmt::format("_minus{}", -d);
  }

  int64_t absolute_offset(const Buffer& b) const { return b.resident ? b.offset : plan_.resident_region_bytes + b.offset; }

  std::string buffer_expr(Fields& fields, BufferId id, int32_t base) {
    const Buffer& b = plan_.buffers.at(id);
    if (b.resident) return "resident::" + resident_names_.at(id);
    const std::string what = b.block != kNoBlock ? tdfg_.blocks[b.block].name : "ws_" + tdfg_.tasks[b.workspace_of].name;
    return fields.get("buffer", id, sanitise_identifier(what) + relative(b.round, base), "int64_t", absolute_offset(b));
  }

  std::string host_expr(Fields& fields, HostSlotId id, int32_t base) {
    const HostSlot& s = plan_.host_slots.at(id);
    return fields.get("host", id, "h_" + sanitise_identifier(tdfg_.blocks[s.block].name) + relative(s.round, base),
                      "int64_t", s.host_offset);
  }

  std::string event_expr(Fields& fields, EventId e, int32_t base) {
    std::string name = "ev";
    if (auto it = recorder_.find(e); it != recorder_.end()) {
      const Step& r = plan_.steps[it->second];
      name = "ev_" + sanitise_identifier(short_description(r)) + relative(r.round, base);
    }
    return fields.get("event", e, name, "int32_t", e);
  }

  // A debug event is named by what it orders: the poisoning of a buffer after
  // its last user on another stream ("dbg_Y_conv1_d2h").
  std::string debug_event_expr(Fields& fields, int32_t e, int32_t base) {
    const auto [buffer, stream] = poisoning_.events.at(e);
    const Buffer& b = plan_.buffers.at(buffer);
    const std::string what = b.block != kNoBlock ? tdfg_.blocks[b.block].name : "ws_" + tdfg_.tasks[b.workspace_of].name;
    return fields.get("debug_event", e,
                      "dbg_" + sanitise_identifier(what) + relative(b.round, base) + "_" + stream_kind_name(stream),
                      "int32_t", e);
  }

  std::string block_label(BufferId id) const {
    const Buffer& b = plan_.buffers.at(id);
    return b.block != kNoBlock ? tdfg_.blocks[b.block].name : "workspace of " + tdfg_.tasks[b.workspace_of].name;
  }

  std::string short_description(const Step& step) const {
    switch (step.kind) {
      case StepKind::compute: return (step.recompute ? "re" : "") + tdfg_.tasks[step.task].name;
      case StepKind::offload: return "offload " + block_label(step.buffer);
      case StepKind::prefetch: return (is_input_load(step) ? "load " : "prefetch ") + block_label(step.buffer);
      case StepKind::alloc: return "alloc " + block_label(step.buffer);
      case StepKind::free: return "free " + block_label(step.buffer);
      case StepKind::move: return "move " + block_label(step.buffer);
    }
    return "";
  }

  bool is_input_load(const Step& step) const {
    const Buffer& b = plan_.buffers.at(step.buffer);
    return b.block == tdfg_.input_block || b.block == tdfg_.labels_block;
  }

  // The shapes of a compute step's tensors, for its comment: "Y[conv1] (32, 64, 16, 16)".
  std::string tensor_shapes(const Step& step, const StepCalls& calls) const {
    std::string text;
    std::set<BufferId> seen;
    for (BufferId id : calls.slot_buffers) {
      if (!seen.insert(id).second) continue;
      const Buffer& b = plan_.buffers[id];
      std::string shape;
      if (b.block != kNoBlock && tdfg_.blocks[b.block].bytes_per_sample > 0 && tdfg_.blocks[b.block].layer >= 0) {
        const Block& block = tdfg_.blocks[b.block];
        const Layer& layer = model_.layers[block.layer];
        const bool saved = block.kind == BlockKind::saved;
        shape = fmt::format("({}, {})", plan_.sub_batches.at(step.round),
                            fmt::join(saved ? layer.output.dims : layer.output.dims, ", "));
        if (saved) shape += " bytes";
      } else if (b.block == tdfg_.input_block) {
        shape = fmt::format("({}, {})", plan_.sub_batches.at(step.round), fmt::join(model_.input.dims, ", "));
      } else {
        shape = format_bytes(b.bytes);
      }
      text += fmt::format("{}{} {}", text.empty() ? "" : ", ", block_label(id), shape);
    }
    return text;
  }

  std::string description(const Step& step) const {
    const std::string stream = stream_kind_name(step.stream);
    switch (step.kind) {
      case StepKind::compute: {
        const Task& task = tdfg_.tasks[step.task];
        std::string text = (step.recompute ? "recompute " : "") + task.name;
        const StepCalls& calls = calls_.at(step.index);
        for (size_t i = 0; i < calls.algorithms.size(); ++i)
          text += fmt::format("{}{}", i ? " + " : ", by ", calls.algorithms[i].name);
        if (step.workspace != kNoBuffer) text += ", workspace " + format_bytes(plan_.buffers[step.workspace].bytes);
        return text;
      }
      case StepKind::offload:
      case StepKind::prefetch:
        return fmt::format("{} ({}) on {}", short_description(step), format_bytes(plan_.buffers[step.buffer].bytes),
                           stream);
      case StepKind::alloc:
        return fmt::format("alloc {} ({})", block_label(step.buffer), format_bytes(plan_.buffers[step.buffer].bytes));
      case StepKind::free: return "free " + block_label(step.buffer);
      case StepKind::move:
        return fmt::format("{} ({}) on the device", short_description(step),
                           format_bytes(plan_.buffers[step.buffer].bytes));
    }
    return "";
  }

  std::string pointer(Fields& fields, const rt::Arg& arg, rt::ParamType type, const StepCalls& calls, int32_t base) {
    const std::string offset = buffer_expr(fields, calls.slot_buffers.at(arg.slot), base);
    std::string getter;
    switch (type) {
      case rt::ParamType::const_i32:
      case rt::ParamType::i32: getter = "p.i32"; break;
      case rt::ParamType::const_u8:
      case rt::ParamType::u8: getter = "p.u8"; break;
      case rt::ParamType::bytes: getter = "p.bytes"; break;
      default: getter = "p.f32"; break;
    }
    std::string text = getter + "(" + offset + ")";
    if (arg.offset_elements != 0) text += " + " + std::to_string(arg.offset_elements);
    return text;
  }

  // The global index of the round's first sample: several ranks' dropout
  // masks hash the sample's index in the global batch.
  std::string first_sample_expr() const {
    return data_parallel() ? "p.sample_offset() + t.first_sample" : "t.first_sample";
  }

  // A byte pointer `extra_bytes` into a cast operand's region of its block.
  std::string operand_bytes(Fields& fields, const StepCalls& calls, const CastOperand& operand, int64_t extra_bytes,
                            int32_t base) {
    const int64_t bytes = operand.byte_offset + extra_bytes;
    return fmt::format("p.u8({}){}", buffer_expr(fields, calls.slot_buffers.at(operand.slot), base),
                       bytes != 0 ? " + " + std::to_string(bytes) : "");
  }

  // A 16-bit program's cast of one operand region into or out of the float scratch.
  std::string cast_line(Fields& fields, const StepCalls& calls, const CastOperand& operand, bool into_scratch,
                        int32_t base) {
    const std::string block = operand_bytes(fields, calls, operand, 0, base);
    const std::string scratch = fmt::format("p.wide({})", operand.scratch_offset);
    const auto code = [](DataType t) { return static_cast<int64_t>(storage_type(t)); };
    if (into_scratch && operand.zeroed)
      return fmt::format("zero_floats(p.compute(), {}, {});  // the results, added to {} after rounding", scratch,
                         operand.count, data_type_name(operand.stored));
    if (into_scratch)
      return fmt::format("cast_to_float(p.compute(), {}, {}, {}, {}, {});  // {} -> float{}", block, scratch,
                         operand.count, code(operand.stored), code(operand.load_rounding),
                         data_type_name(operand.stored),
                         operand.load_rounding != DataType::float32 && operand.load_rounding != operand.stored
                             ? fmt::format(", rounded to {}", data_type_name(operand.load_rounding))
                             : "");
    std::string what = "float";
    if (operand.result_type != DataType::float32 && operand.result_type != operand.stored)
      what += fmt::format(" rounded to {}", data_type_name(operand.result_type));
    return fmt::format("cast_from_float(p.compute(), {}, {}, {}, {}, {}, {});  // {} {} {}", scratch, block,
                       operand.count, code(operand.stored), code(operand.result_type),
                       operand.adds ? "true" : "false", what, operand.adds ? "added to" : "->",
                       data_type_name(operand.stored));
  }

  // A call as its 16-bit kernel (ops/sixteen_bit_kernels.h): float32 inputs
  // rounded into 16-bit scratch, the kernel on the 16-bit operands, and each
  // result that does not go straight into its block widened and stored.
  void sixteen_bit_call_lines(Fields& fields, const StepCalls& calls, const rt::KernelCall& call,
                              const CallCasts& cast, const SixteenBitForm& form, int32_t base,
                              const std::vector<std::string>& names, std::vector<std::string>& lines) {
    const DataType low = low_precision_type(model_.precision);
    const auto code = [](DataType t) { return static_cast<int64_t>(storage_type(t)); };
    const auto block = [&](const CastOperand& o, int64_t extra) {
      return operand_bytes(fields, calls, o, extra, base);
    };
    for (size_t k = 0; k < cast.operands.size(); ++k) {
      const CastOperand& o = cast.operands[k];
      if (o.written || form.operands[k].direct) continue;
      lines.push_back(fmt::format("cast_from_float(p.compute(), p.f32({}){}, p.wide_u8({}), {}, {}, {}, false);  "
                                  "// float32 -> {} (autocast's cast)",
                                  buffer_expr(fields, calls.slot_buffers.at(o.slot), base),
                                  o.byte_offset != 0 ? " + " + std::to_string(o.byte_offset / 4) : "",
                                  form.operands[k].half_offset, o.count, code(low), code(low), data_type_name(low)));
    }
    const std::vector<rt::ParamType>& params = rt::kernel_params(call.kernel);
    std::string args;
    for (size_t i : form.args) {
      const rt::Arg& arg = call.args[i];
      std::string text;
      if (arg.kind == rt::ArgKind::tensor && cast.operand_of[i] >= 0) {
        const CastOperand& o = cast.operands[cast.operand_of[i]];
        const SixteenBitOperand& f = form.operands[cast.operand_of[i]];
        const int64_t element = cast.scratch_element[i] - o.scratch_offset / 4;  // into the operand's region
        text = f.direct ? block(o, element * 2) : fmt::format("p.wide_u8({})", f.half_offset + element * 2);
      } else if (arg.kind == rt::ArgKind::tensor) {
        text = pointer(fields, arg, params[i], calls, base);
      } else {
        text = scalar_argument(arg, params[i], constants_, names, first_sample_expr());
      }
      args += ", " + text;
    }
    lines.push_back(fmt::format("{}(p.compute(){}, {});  // {}", rt::kernel_name(form.kernel), args, code(low),
                                data_type_name(low)));
    for (size_t k = 0; k < cast.operands.size(); ++k) {
      const CastOperand& o = cast.operands[k];
      const SixteenBitOperand& f = form.operands[k];
      if (!o.written || f.direct) continue;
      lines.push_back(fmt::format("cast_to_float(p.compute(), p.wide_u8({}), p.wide({}), {}, {}, 0);  // {} -> float",
                                  f.half_offset, f.float_offset, o.count, code(low), data_type_name(low)));
      lines.push_back(fmt::format("cast_from_float(p.compute(), p.wide({}), {}, {}, {}, {}, {});  // {} {}",
                                  f.float_offset, block(o, 0), o.count, code(o.stored), code(o.result_type),
                                  o.adds ? "true" : "false", o.adds ? "added to" : "->", data_type_name(o.stored)));
    }
    wide_scratch_bytes_ = std::max(wide_scratch_bytes_, form.scratch_bytes);
  }

  void compute_lines(Fields& fields, const Step& step, int32_t base, int32_t relative_index,
                     std::vector<std::string>& lines) {
    const StepCalls& calls = calls_.at(step.index);
    std::vector<std::string> names;
    for (const AlgorithmChoice& a : calls.algorithms) names.push_back(a.name);
    const Task& task = tdfg_.tasks[step.task];
    // fp16: the loss's gradient is multiplied by the loss scale (its first
    // real argument, 1/B; the second is the label smoothing), before anything
    // is rounded to 16 bits.
    const bool scaled_loss = task.kind == TaskKind::BP1 && model_.precision == Precision::fp16 &&
                             op_spec(task.op).is_loss;
    const std::vector<CallCasts> casts = call_casts(model_, tdfg_, plan_, types_, step, calls);
    std::vector<std::pair<BufferId, DataType>> outputs;
    auto add_output = [&](BufferId buffer, DataType type) {
      for (const auto& [b, t] : outputs)
        if (b == buffer) return;
      outputs.emplace_back(buffer, type);
    };
    std::vector<std::string> call_lines;
    // The 16-bit kernels (ops/sixteen_bit_kernels.h): on CUDA, and on the CPU where asked.
    const bool sixteen_bit_kernels = types_.sixteen_bit && is_16_bit_task(model_, types_, task) &&
                                     (options_.target == Target::cuda || options_.sixteen_bit_kernels_on_cpu);
    for (size_t c = 0; c < calls.invocation.calls.size(); ++c) {
      const rt::KernelCall& call = calls.invocation.calls[c];
      const CallCasts& cast = casts[c];
      const std::vector<rt::ParamType>& params = rt::kernel_params(call.kernel);
      if (sixteen_bit_kernels) {
        if (std::optional<SixteenBitForm> form = sixteen_bit_form(call, cast, low_precision_type(model_.precision))) {
          sixteen_bit_call_lines(fields, calls, call, cast, *form, base, names, call_lines);
          for (const CastOperand& operand : cast.operands)
            if (operand.written) add_output(calls.slot_buffers.at(operand.slot), operand.stored);
          continue;
        }
      }
      for (const CastOperand& operand : cast.operands)
        call_lines.push_back(cast_line(fields, calls, operand, true, base));
      std::string args;
      int reals = 0;
      for (size_t i = 0; i < call.args.size(); ++i) {
        const rt::Arg& arg = call.args[i];
        std::string text;
        if (arg.kind == rt::ArgKind::tensor) {
          const BufferId buffer = calls.slot_buffers[arg.slot];
          if (cast.operand_of[i] >= 0) {
            text = fmt::format("p.wide({})", cast.scratch_element[i] * 4);
            if (params[i] == rt::ParamType::f32) add_output(buffer, cast.operands[cast.operand_of[i]].stored);
          } else {
            text = pointer(fields, arg, params[i], calls, base);
            if (params[i] == rt::ParamType::f32 && calls.invocation.tensors[arg.slot].role != TensorRole::workspace)
              add_output(buffer, DataType::float32);
          }
        } else {
          text = scalar_argument(arg, params[i], constants_, names, first_sample_expr());
          // The loss's backward takes its scale first, then the label smoothing.
          if (scaled_loss && params[i] == rt::ParamType::real && reals++ == 0) text += " * p.loss_scale()";
        }
        args += ", " + text;
      }
      MPLAN_CHECK(!scaled_loss || reals == 2,
                  fmt::format("codegen: the loss's backward kernel {} takes {} reals, not its scale and its label "
                              "smoothing",
                              rt::kernel_name(call.kernel), reals));
      call_lines.push_back(fmt::format("{}(p.compute(){});", rt::kernel_name(call.kernel), args));
      for (const CastOperand& operand : cast.operands)
        if (operand.written) call_lines.push_back(cast_line(fields, calls, operand, false, base));
      wide_scratch_bytes_ = std::max(wide_scratch_bytes_, cast.scratch_bytes);
    }
    if (task.kind == TaskKind::update) {
      // fp16: the gradients lose the loss scale first, and a step with a
      // gradient that is not finite makes no update (runtime/loss_scale.h);
      // then --clip-grad-norm clips them (runtime/program_update.cpp).
      if (data_parallel()) lines.push_back("p.wait_buckets();  // every gradient bucket summed over the ranks");
      lines.push_back("if (p.prepare_update()) {");
      for (const std::string& line : call_lines) lines.push_back("  " + line);
      lines.push_back("}");
    } else {
      lines.insert(lines.end(), call_lines.begin(), call_lines.end());
    }
    if (task.kind == TaskKind::FP && !step.recompute && op_spec(task.op).is_loss) {
      for (size_t i = 0; i < task.writes.size(); ++i)
        if (task.writes[i] == tdfg_.loss_block)
          lines.push_back(fmt::format("p.read_loss(t.round, {});", buffer_expr(fields, step.writes[i], base)));
    }
    // Debug mode: a NaN must not be laundered (relu turns NaN into 0), so every
    // float output is checked right where it is written.
    if (!outputs.empty()) {
      std::string list;
      for (const auto& [b, type] : outputs) {
        // A W block with a 16-bit copy: its float32 part (the copy is made from it).
        const Buffer& buffer = plan_.buffers[b];
        int64_t bytes = buffer.bytes;
        if (buffer.block != kNoBlock && tdfg_.blocks[buffer.block].kind == BlockKind::weight)
          bytes = model_.parameter_count(tdfg_.blocks[buffer.block].layer) * element_bytes(DataType::float32);
        list += fmt::format("{}{{{}, {}, {}{}}}", list.empty() ? "" : ", ", buffer_expr(fields, b, base), bytes,
                            cpp_string_literal(block_label(b)),
                            type == DataType::float32 ? "" : fmt::format(", {}", static_cast<int64_t>(storage_type(type))));
      }
      lines.push_back(fmt::format("if (p.debug()) p.check_finite(t.round, {}, {{{}}});",
                                  cpp_string_literal(short_description(step)), list));
    }
  }

  Status step_code(Fields& fields, const Step& step, int32_t base, int32_t relative_index, StepCode& code) {
    std::vector<std::string>& lines = code.lines;
    const std::string stream = stream_expr(step.stream);
    for (EventId e : step.waits) {
      if (step.stream == StreamKind::host)
        code.waits.push_back(fmt::format("p.host_wait({});", event_expr(fields, e, base)));
      else
        code.waits.push_back(fmt::format("p.wait({}, {});", stream, event_expr(fields, e, base)));
    }
    switch (step.kind) {
      case StepKind::compute: compute_lines(fields, step, base, relative_index, lines); break;
      case StepKind::offload:
      case StepKind::prefetch:
        lines.push_back(fmt::format("p.{}({}, {}, {}, {});", step.kind == StepKind::offload ? "offload" : "prefetch",
                                    buffer_expr(fields, step.buffer, base), host_expr(fields, step.host_slot, base),
                                    plan_.buffers[step.buffer].bytes, stream));
        break;
      case StepKind::alloc:
        lines.push_back(fmt::format("p.alloc({}, {});", buffer_expr(fields, step.buffer, base),
                                    plan_.buffers[step.buffer].bytes));
        break;
      case StepKind::free: break;  // bookkeeping: the comment says it
      case StepKind::move:
        lines.push_back(fmt::format("p.move({}, {}, {}, {});", buffer_expr(fields, step.writes.at(0), base),
                                    buffer_expr(fields, step.reads.at(0), base), plan_.buffers[step.buffer].bytes,
                                    stream));
        break;
    }
    if (auto it = poisoning_.records.find(step.index); it != poisoning_.records.end())
      for (int32_t e : it->second)
        lines.push_back(fmt::format("if (p.debug()) event_record(p.debug_event({}), {});",
                                    debug_event_expr(fields, e, base), stream));
    if (auto it = poisoning_.poisons.find(step.index); it != poisoning_.poisons.end())
      for (const PoisonAfter& poison : it->second) {
        for (int32_t e : poison.waits)
          lines.push_back(fmt::format("if (p.debug()) stream_wait_event({}, p.debug_event({}));", stream,
                                      debug_event_expr(fields, e, base)));
        lines.push_back(fmt::format("p.poison({}, {}, {});  // last use of {}", stream,
                                    buffer_expr(fields, poison.buffer, base), plan_.buffers[poison.buffer].bytes,
                                    comment_text(block_label(poison.buffer), 80)));
      }
    if (step.records != kNoEvent) {
      if (step.stream == StreamKind::host)
        return codegen_error(fmt::format("step {} records an event on the host stream", step.index));
      code.records.push_back(fmt::format("p.record({}, {});", stream, event_expr(fields, step.records, base)));
    }
    // Several ranks: the buckets this step finishes start their sums (-1 in the rounds without).
    if (auto it = bucket_starts_.find(step.index); it != bucket_starts_.end())
      for (int32_t k : it->second)
        code.records.push_back(fmt::format("p.start_bucket({});  // gradient bucket {} is final",
                                           fields.get("bucket", k, fmt::format("bucket_{}", k), "int32_t", k), k));
    return Ok{};
  }

  Result<SegmentCode> emit_segment(const Segment& segment) {
    SegmentCode code;
    code.segment = segment;
    Fields fields(code.fields, code.event_fields);
    const int32_t base = segment.round;
    for (int32_t i = segment.first_step; i < segment.end_step; ++i) {
      const Step& step = plan_.steps[i];
      const int32_t relative_index = i - segment.first_step;
      StepCode step_text;
      step_text.label = sanitise_identifier(short_description(step)) + relative(step.round, base);
      step_text.comment = fmt::format("  // {}\n", comment_text(description(step), 150));
      if (step.kind == StepKind::compute && calls_.count(step.index))
        step_text.comment += "  //     " + comment_text(tensor_shapes(step, calls_.at(step.index)), 150) + "\n";
      if (Status s = step_code(fields, step, base, relative_index, step_text); !s) return s.error();
      code.steps.push_back(std::move(step_text));
    }
    code.describe = base == kOnceRound ? "the update"
                                       : fmt::format("round {} ({} samples)", base, plan_.sub_batches.at(base));
    return code;
  }

  // ---- classes of identical segments, their tables, and the iteration ----------------------

  // Lines of `from` that `into` lacks, appended in their order.
  static void merge_lines(std::vector<std::string>& into, const std::vector<std::string>& from) {
    for (const std::string& line : from)
      if (std::find(into.begin(), into.end(), line) == into.end()) into.push_back(line);
  }

  // A step's code as rounds of one class must share it: all but its waits and records.
  static uint64_t signature(const StepCode& step) {
    std::string text = step.comment;
    for (const std::string& line : step.lines) text += line + "\n";
    return std::hash<std::string>{}(text);
  }

  std::string emit_schedule(const std::vector<SegmentCode>& segments) {
    std::vector<std::vector<uint64_t>> signatures;
    size_t longest = 0;
    for (const SegmentCode& seg : segments) {
      signatures.emplace_back();
      for (const StepCode& step : seg.steps) signatures.back().push_back(signature(step));
      longest = std::max(longest, seg.steps.size());
    }
    // Rounds that differ in up to 1/8 of their steps (round 0's own input load,
    // the last round's missing next-round prefetch, an offload more or less)
    // share one body; past that, a guard per step would hide more than it saves.
    const int max_differences = static_cast<int>(std::max<size_t>(8, longest / 8));
    const std::vector<RoundClass> classes = group_rounds(signatures, max_differences);
    std::vector<int> class_of(segments.size()), row_of(segments.size());
    for (size_t c = 0; c < classes.size(); ++c)
      for (size_t m = 0; m < classes[c].members.size(); ++m) {
        class_of[classes[c].members[m]] = static_cast<int>(c);
        row_of[classes[c].members[m]] = static_cast<int>(m);
      }
    std::string text =
        "\n// ---- the schedule " + std::string(62, '-') +
        "\n// The plan's steps in issue order, one function per class of rounds that run the same steps but\n"
        "// for where their buffers lie, which events they use, and a few steps only some of them have\n"
        "// (round 0's input load, the last round's missing prefetch of a next round): the table of the\n"
        "// class says which, per round (an event of -1 is one a round does not use). Each stream runs\n"
        "// its work in order; events order work across streams (runtime/device.h).\n";
    for (size_t c = 0; c < classes.size(); ++c) text += emit_class(c, classes[c], segments);
    // The iteration: the segments in order, a loop over each run of rows of one class.
    text += "\n// One iteration: every round, then the update.\nvoid run_iteration(Program& p) {\n";
    for (size_t s = 0; s < segments.size();) {
      size_t end = s + 1;
      while (end < segments.size() && class_of[end] == class_of[s] && row_of[end] == row_of[end - 1] + 1) ++end;
      const int c = class_of[s];
      if (end - s == 1)
        text += fmt::format("  {}(p, {}[{}]);  // {}\n", class_function(c), class_table(c), row_of[s],
                            segments[s].describe);
      else
        text += fmt::format("  for (int i = {}; i < {}; ++i) {}(p, {}[i]);  // rounds {}-{}\n", row_of[s],
                            row_of[end - 1] + 1, class_function(c), class_table(c), segments[s].segment.round,
                            segments[end - 1].segment.round);
      s = end;
    }
    text += "}\n";
    return text;
  }

  // One class: its row type, its table and its function.
  std::string emit_class(size_t c, const RoundClass& cls, const std::vector<SegmentCode>& segments) {
    const std::string type = class_type(c), function = class_function(c);
    const size_t members = cls.members.size();
    // The body's steps: each from a member that has it, with every member's
    // waits and records; steps some members lack are guarded by a flag per
    // run of steps that the same members have.
    struct BodyStep {
      StepCode code;
      std::vector<bool> present;  // per member
    };
    std::vector<BodyStep> body;
    for (const std::vector<int>& row : cls.steps) {
      BodyStep step;
      for (size_t m = 0; m < members; ++m) {
        step.present.push_back(row[m] >= 0);
        if (row[m] < 0) continue;
        const StepCode& code = segments[cls.members[m]].steps[row[m]];
        if (step.code.comment.empty()) step.code = code;
        merge_lines(step.code.waits, code.waits);
        merge_lines(step.code.records, code.records);
      }
      body.push_back(std::move(step));
    }
    // Fields: the union over the members (a member lacking one has 0, or -1
    // for an event); flags for the guarded runs.
    // (Sets beside the lists: a class of 64 rounds of ResNet-1001 has tens of
    // thousands of fields, and a scan per field was quadratic.)
    std::vector<Field> fields;
    std::vector<std::string> event_names;
    std::unordered_set<std::string> known_fields, known_events;
    for (int s : cls.members) {
      for (const Field& f : segments[s].fields)
        if (known_fields.insert(f.name).second) fields.push_back(Field{f.name, f.type, 0});
      for (const Field& f : segments[s].event_fields)
        if (known_events.insert(f.name).second) event_names.push_back(f.name);
    }
    struct Guard {
      std::string name;
      std::vector<bool> present;
    };
    std::vector<Guard> guards;
    std::vector<int> guard_of(body.size(), -1);
    std::set<std::string> names;
    for (const Field& f : fields) names.insert(f.name);
    for (size_t i = 0; i < body.size(); ++i) {
      if (std::all_of(body[i].present.begin(), body[i].present.end(), [](bool b) { return b; })) continue;
      if (i > 0 && guard_of[i - 1] >= 0 && guards[guard_of[i - 1]].present == body[i].present) {
        guard_of[i] = guard_of[i - 1];
        continue;
      }
      std::string base = "has_" + body[i].code.label, name = base;
      for (int k = 2; names.count(name); ++k) name = base + "_" + std::to_string(k);
      names.insert(name);
      guard_of[i] = static_cast<int>(guards.size());
      guards.push_back(Guard{name, body[i].present});
    }

    std::string which;
    for (int s : cls.members) which += (which.empty() ? "" : ", ") + segments[s].describe;
    std::string text = fmt::format("\n// {}: {}.\nstruct {} {{\n  int32_t round;         // the sub-batch (-1: the update)\n"
                                   "  int64_t first_sample;  // the global index of its first sample\n"
                                   "  int32_t first_step;    // its first step in plan.json\n",
                                   type, comment_text(which, 200), type);
    for (const Guard& g : guards) text += fmt::format("  bool {};\n", g.name);
    for (const Field& f : fields) text += fmt::format("  {} {};\n", f.type, f.name);
    for (const std::string& name : event_names) text += fmt::format("  int32_t {};\n", name);
    text += "};\n";
    text += fmt::format("constexpr {} {}[] = {{\n", type, class_table(c));
    for (size_t m = 0; m < members; ++m) {
      const SegmentCode& seg = segments[cls.members[m]];
      std::vector<std::string> values = {fmt::format(".round = {}", seg.segment.round),
                                         fmt::format(".first_sample = {}", first_sample(seg.segment.round)),
                                         fmt::format(".first_step = {}", seg.segment.first_step)};
      for (const Guard& g : guards) values.push_back(fmt::format(".{} = {}", g.name, g.present[m] ? "true" : "false"));
      // The member's own values by name (the last of a name wins, as before).
      std::unordered_map<std::string, int64_t> own_fields, own_events;
      for (const Field& own : seg.fields) own_fields[own.name] = own.value;
      for (const Field& own : seg.event_fields) own_events[own.name] = own.value;
      for (const Field& f : fields) {
        auto it = own_fields.find(f.name);
        values.push_back(fmt::format(".{} = {}", f.name, it == own_fields.end() ? int64_t{0} : it->second));
      }
      for (const std::string& name : event_names) {
        auto it = own_events.find(name);
        values.push_back(fmt::format(".{} = {}", name, it == own_events.end() ? int64_t{-1} : it->second));
      }
      text += fmt::format("    // {}: plan steps {}-{}\n    {{", seg.describe, seg.segment.first_step,
                          seg.segment.end_step - 1);
      size_t width = 5;
      for (size_t i = 0; i < values.size(); ++i) {
        if (i > 0) {
          const bool wrap = width + 2 + values[i].size() > 116;
          text += wrap ? ",\n     " : ", ";
          width = wrap ? 5 : width + 2;
        }
        text += values[i];
        width += values[i].size();
      }
      text += "},\n";
    }
    text += "};\n";
    text += fmt::format("void {}(Program& p, const {}& t) {{\n", function, type);
    for (size_t i = 0; i < body.size(); ++i) {
      const bool opens = guard_of[i] >= 0 && (i == 0 || guard_of[i - 1] != guard_of[i]);
      const bool closes = guard_of[i] >= 0 && (i + 1 == body.size() || guard_of[i + 1] != guard_of[i]);
      const std::string indent = guard_of[i] >= 0 ? "  " : "";
      if (opens) text += fmt::format("  if (t.{}) {{\n", guards[guard_of[i]].name);
      const StepCode& step = body[i].code;
      std::string comment = step.comment;
      if (!indent.empty()) {
        std::string shifted;
        for (size_t at = 0; at < comment.size();) {
          const size_t eol = comment.find('\n', at);
          shifted += indent + comment.substr(at, eol - at + 1);
          at = eol + 1;
        }
        comment = shifted;
      }
      text += comment;
      for (const std::string& line : step.waits) text += indent + "  " + line + "\n";
      for (const std::string& line : step.lines) text += indent + "  " + line + "\n";
      for (const std::string& line : step.records) text += indent + "  " + line + "\n";
      if (closes) text += "  }\n";
    }
    text += "}\n";
    return text;
  }

  static std::string class_letters(size_t c) {
    std::string name;
    do {
      name.insert(name.begin(), static_cast<char>('a' + c % 26));
      c /= 26;
    } while (c-- > 0);
    return name;
  }
  static std::string class_type(size_t c) {
    std::string letters = class_letters(c);
    letters[0] = static_cast<char>(std::toupper(letters[0]));
    return "Rounds" + letters;
  }
  static std::string class_function(size_t c) { return "rounds_" + class_letters(c); }
  static std::string class_table(size_t c) { return "k" + class_type(c); }

  int64_t first_sample(int32_t round) const {
    int64_t at = 0;
    for (int32_t r = 0; r < round && r < static_cast<int32_t>(plan_.sub_batches.size()); ++r) at += plan_.sub_batches[r];
    return at;
  }

  const Model& model_;
  const Tdfg& tdfg_;
  const Plan& plan_;
  const CodegenOptions& options_;
  const EvaluationSchedule* evaluation_;
  std::vector<const Plan*> rank_plans_;
  std::map<int32_t, StepCalls> calls_;          // step index -> its kernels
  ModelTypes types_;                            // the blocks' types (16-bit programs)
  int64_t wide_scratch_bytes_ = 0;              // the largest float scratch of a call's casts
  std::map<EventId, int32_t> recorder_;         // event -> the step that records it
  std::map<int32_t, std::vector<int32_t>> bucket_starts_;  // step -> the gradient buckets it finishes
  std::map<BufferId, std::string> resident_names_;
  DebugPoisoning poisoning_;
  SharedConstants constants_;
  std::vector<std::string> warnings_;
  std::set<std::string> substituted_;
};

}  // namespace

const GeneratedFile* GeneratedProgram::find(const std::string& path) const {
  for (const GeneratedFile& file : files)
    if (file.path == path) return &file;
  return nullptr;
}

Result<GeneratedProgram> emit_program(const Model& model, const Tdfg& tdfg, const Plan& plan,
                                      const CodegenOptions& options, const EvaluationSchedule* evaluation,
                                      const std::vector<const Plan*>& rank_plans) {
  return ProgramEmitter(model, tdfg, plan, options, evaluation, rank_plans).emit();
}

}  // namespace mplan::codegen
