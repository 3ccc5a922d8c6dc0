// The generated program's part of a plan of several ranks (codegen/data_parallel.h).

#include "codegen/data_parallel.h"

#include <fmt/format.h>

#include "codegen/names.h"
#include "core/bytes.h"
#include "ops/op_table.h"
#include "planner/plan_json.h"

namespace mplan::codegen {
namespace {

Error codegen_error(const std::string& message) { return Error{{"codegen", 0, 0}, message}; }

const Buffer* resident_buffer(const Plan& plan, BlockId block) {
  for (const Buffer& b : plan.buffers)
    if (b.resident && b.block == block) return &b;
  return nullptr;
}

uint64_t fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

Result<std::map<int32_t, std::vector<int32_t>>> bucket_starts(const Tdfg& tdfg, const Plan& plan) {
  const DataParallel& dp = plan.data_parallel;
  std::map<int32_t, std::vector<int32_t>> starts;
  const int32_t last_round = static_cast<int32_t>(plan.sub_batches.size()) - 1;
  for (size_t k = 0; k < dp.buckets.size(); ++k) {
    const GradientBucket& bucket = dp.buckets[k];
    if (bucket.ready_after_step < 0 || bucket.ready_after_step >= static_cast<int32_t>(plan.steps.size()))
      return codegen_error(fmt::format("data_parallel.buckets[{}]: ready_after_step {} is not a step of the plan", k,
                                       bucket.ready_after_step));
    const Step& step = plan.steps[bucket.ready_after_step];
    if (step.kind != StepKind::compute || step.round != last_round)
      return codegen_error(fmt::format("data_parallel.buckets[{}]: ready_after_step {} is not a compute step of the "
                                       "last round ({})",
                                       k, bucket.ready_after_step, last_round));
    for (BlockId b : bucket.blocks) {
      if (b < 0 || b >= static_cast<BlockId>(tdfg.blocks.size()) ||
          tdfg.blocks[b].kind != BlockKind::weight_grad || resident_buffer(plan, b) == nullptr)
        return codegen_error(fmt::format("data_parallel.buckets[{}]: block {} is not a resident weight gradient", k,
                                         b));
    }
    starts[bucket.ready_after_step].push_back(static_cast<int32_t>(k));
  }
  return starts;
}

// A plan as every rank must run it: without the planner's wall time, which
// differs from one compile of the same model to the next.
std::string schedule_text(Plan plan) {
  plan.summary.planner_ms = 0;
  return plan_to_json(plan);
}

std::string plans_digest(const Plan& plan, const std::vector<const Plan*>& rank_plans) {
  std::string text = schedule_text(plan);
  for (const Plan* other : rank_plans) text += schedule_text(*other);
  return fmt::format("{:016x}", fnv1a(text));
}

std::string emit_data_parallel_tables(const Model& model, const Tdfg& tdfg, const Plan& plan,
                                      const std::string& digest, bool per_rank_specs) {
  const DataParallel& dp = plan.data_parallel;
  std::string regions, buckets;
  int32_t region_count = 0;
  for (size_t k = 0; k < dp.buckets.size(); ++k) {
    const GradientBucket& bucket = dp.buckets[k];
    const int32_t first = region_count;
    int64_t bytes = 0;
    std::string names;
    for (BlockId b : bucket.blocks) {
      const Buffer* dw = resident_buffer(plan, b);
      // A dW block holds its layer's float32 gradients.
      const int64_t count = model.parameter_count(tdfg.blocks[b].layer) * 4;
      regions += fmt::format("    {{{}, {}}},  // {}\n", dw->offset, count, comment_text(tdfg.blocks[b].name, 80));
      bytes += count;
      ++region_count;
      names += (names.empty() ? "" : ", ") + tdfg.blocks[b].name;
    }
    buckets += fmt::format("    {{kBucketRegions + {}, {}, {}}},  // bucket {}: {}, after plan step {}\n", first,
                           region_count - first, bytes, k, format_bytes(bytes), bucket.ready_after_step);
  }
  // Batch norm's running statistics: after the optimizer's state in its state block.
  std::string statistics;
  int32_t statistic_count = 0;
  const int state_kinds = model.optimizer.adamw() ? 2 : model.optimizer.momentum > 0 ? 1 : 0;
  for (LayerId l = 0; l < static_cast<LayerId>(model.layers.size()); ++l) {
    const Layer& layer = model.layers[l];
    const OpSpec& spec = op_spec(layer.op);
    if (spec.buffers == nullptr || tdfg.state_of[l] == kNoBlock) continue;
    const Buffer* state = resident_buffer(plan, tdfg.state_of[l]);
    if (state == nullptr) continue;
    const std::vector<Shape> inputs = model.input_shapes(l);
    int64_t elements = 0;
    for (const LayerTensor& t : spec.buffers(layer, inputs)) elements += t.elements();
    if (elements == 0) continue;
    const int64_t at = state->offset + state_kinds * model.parameter_count(l) * 4;
    statistics += fmt::format("    {{{}, {}}},  // {}\n", at, elements * 4, comment_text(layer.name, 80));
    ++statistic_count;
  }
  std::string text = "\n// ---- several ranks " + std::string(61, '-') + "\n";
  text += fmt::format("// {} ranks of batch {} (global batch {}), rank {}'s plan ({}). The gradient\n"
                      "// buckets: their dW ranges (offset, bytes), summed over the ranks together.\n",
                      dp.ranks, plan.batch, dp.global_batch, dp.rank,
                      comment_text(dp.policy.empty() ? "-" : dp.policy, 60));
  text += regions.empty() ? "constexpr const Region* kBucketRegions = nullptr;\n"
                          : "constexpr Region kBucketRegions[] = {\n" + regions + "};\n";
  text += buckets.empty() ? "constexpr const GradientBucketSpec* kBuckets = nullptr;\n"
                          : "constexpr GradientBucketSpec kBuckets[] = {\n" + buckets + "};\n";
  text += "// Batch norm's running statistics (rank 0's are broadcast before a save and an evaluation).\n";
  text += statistics.empty() ? "constexpr const Region* kRunningStatistics = nullptr;\n"
                             : "constexpr Region kRunningStatistics[] = {\n" + statistics + "};\n";
  text += fmt::format(
      "constexpr DataParallelSpec kDataParallel = {{\n"
      "    .ranks = {},\n"
      "    .global_batch = {},\n"
      "    .buckets = kBuckets,\n"
      "    .bucket_count = {},\n"
      "    .running_statistics = kRunningStatistics,\n"
      "    .running_statistic_count = {},\n"
      "    .plan_digest = \"{}\",  // FNV-1a of every rank's plan\n"
      "    .make_collectives = make_collectives,\n"
      "{}"
      "}};\n",
      dp.ranks, dp.global_batch, dp.buckets.size(), statistic_count, digest,
      per_rank_specs ? "    .spec_of_rank = spec_of_rank,\n" : "");
  return text;
}

}  // namespace mplan::codegen
