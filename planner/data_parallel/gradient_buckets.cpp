#include "planner/data_parallel/gradient_buckets.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace mplan {

std::vector<GradientBucket> gradient_buckets(const Tdfg& tdfg, const Plan& plan, int64_t bucket_bytes) {
  MPLAN_CHECK(bucket_bytes > 0 && !plan.sub_batches.empty(), "a bucket size and a plan of at least one round");
  const auto last_round = static_cast<int32_t>(plan.sub_batches.size()) - 1;
  // The resident dW buffers, by buffer id.
  std::vector<BlockId> gradient_of_buffer(plan.buffers.size(), kNoBlock);
  for (const Buffer& b : plan.buffers)
    if (b.resident && b.block != kNoBlock &&
        tdfg.blocks.at(static_cast<size_t>(b.block)).kind == BlockKind::weight_grad)
      gradient_of_buffer[static_cast<size_t>(b.id)] = b.block;
  std::vector<int32_t> last_writer(tdfg.blocks.size(), -1);
  std::vector<int64_t> bytes(tdfg.blocks.size(), 0);
  for (const Step& s : plan.steps) {
    if (s.kind != StepKind::compute || s.round != last_round || s.recompute) continue;
    for (BufferId w : s.writes) {
      if (w < 0) continue;
      const BlockId block = gradient_of_buffer[static_cast<size_t>(w)];
      if (block == kNoBlock) continue;
      last_writer[static_cast<size_t>(block)] = s.index;
      bytes[static_cast<size_t>(block)] = plan.buffers[static_cast<size_t>(w)].bytes;
    }
  }
  std::vector<std::pair<int32_t, BlockId>> order;  // (last writer, block)
  for (size_t b = 0; b < last_writer.size(); ++b)
    if (last_writer[b] >= 0) order.emplace_back(last_writer[b], static_cast<BlockId>(b));
  std::sort(order.begin(), order.end());
  std::vector<GradientBucket> buckets;
  GradientBucket open;
  for (const auto& [step, block] : order) {
    open.blocks.push_back(block);
    open.bytes += bytes[static_cast<size_t>(block)];
    open.ready_after_step = std::max(open.ready_after_step, step);
    if (open.bytes >= bucket_bytes) {
      buckets.push_back(std::move(open));
      open = GradientBucket{};
    }
  }
  if (!open.blocks.empty()) buckets.push_back(std::move(open));
  return buckets;
}

}  // namespace mplan
