// The gradient buckets of a data-parallel plan (planner/plan.h DataParallel):
// what the program all-reduces must be every weight gradient, once, after its
// last write of the step -- a bucket read early would sum partial gradients.

#include <fmt/format.h>

#include <vector>

#include "planner/verify/verifier.h"

namespace mplan::verifier {

void Verifier::check_gradient_buckets() {
  const DataParallel& d = plan_.data_parallel;
  if (d.ranks <= 1) return;
  const auto add_plan = [&](std::string message) { add(-1, ViolationKind::gradient_buckets, std::move(message)); };
  if (d.global_batch != plan_.batch * d.ranks)
    add_plan(fmt::format("global batch {} is not {} ranks x batch {}", d.global_batch, d.ranks, plan_.batch));
  if (static_cast<int32_t>(d.plan_of_rank.size()) != d.ranks || d.rank < 0 || d.rank >= d.ranks ||
      d.plan_of_rank[static_cast<size_t>(d.rank)] != d.rank)
    add_plan(fmt::format("rank {} is not a rank that runs its own plan in plan_of_rank", d.rank));
  const auto last_round = static_cast<int32_t>(plan_.sub_batches.size()) - 1;
  // The last write of each resident dW block in the last round, and its bytes.
  std::vector<int32_t> last_write(tdfg_.blocks.size(), -1);
  std::vector<int64_t> bytes(tdfg_.blocks.size(), 0);
  for (const Step& s : plan_.steps) {
    if (s.kind != StepKind::compute || s.round != last_round) continue;
    for (BufferId w : s.writes) {
      if (w < 0 || w >= static_cast<BufferId>(plan_.buffers.size())) continue;
      const Buffer& b = plan_.buffers[static_cast<size_t>(w)];
      if (!b.resident || b.block < 0 || b.block >= static_cast<BlockId>(tdfg_.blocks.size())) continue;
      if (tdfg_.blocks[static_cast<size_t>(b.block)].kind != BlockKind::weight_grad) continue;
      last_write[static_cast<size_t>(b.block)] = s.index;
      bytes[static_cast<size_t>(b.block)] = b.bytes;
    }
  }
  std::vector<int32_t> bucket_of(tdfg_.blocks.size(), -1);
  for (size_t k = 0; k < d.buckets.size(); ++k) {
    const GradientBucket& bucket = d.buckets[k];
    const int32_t ready = bucket.ready_after_step;
    const bool ready_ok = ready >= 0 && ready < static_cast<int32_t>(plan_.steps.size()) &&
                          plan_.steps[static_cast<size_t>(ready)].kind == StepKind::compute &&
                          plan_.steps[static_cast<size_t>(ready)].round == last_round;
    if (!ready_ok)
      add_plan(fmt::format("bucket {}: ready_after_step {} is not a compute step of the last round", k, ready));
    int64_t sum = 0;
    for (BlockId b : bucket.blocks) {
      if (b < 0 || b >= static_cast<BlockId>(tdfg_.blocks.size()) || last_write[static_cast<size_t>(b)] < 0) {
        add_plan(fmt::format("bucket {}: block {} is not a weight gradient the last round writes", k, b));
        continue;
      }
      if (bucket_of[static_cast<size_t>(b)] >= 0)
        add_plan(fmt::format("bucket {}: {} is in bucket {} too", k, block_name(b),
                             bucket_of[static_cast<size_t>(b)]));
      bucket_of[static_cast<size_t>(b)] = static_cast<int32_t>(k);
      sum += bytes[static_cast<size_t>(b)];
      if (ready_ok && last_write[static_cast<size_t>(b)] > ready)
        add_plan(fmt::format("bucket {}: ready after step {}, but step {} writes {} later", k, ready,
                             last_write[static_cast<size_t>(b)], block_name(b)));
    }
    if (sum != bucket.bytes)
      add_plan(fmt::format("bucket {}: {} bytes, but its blocks hold {}", k, bucket.bytes, sum));
  }
  for (size_t b = 0; b < last_write.size(); ++b)
    if (last_write[b] >= 0 && bucket_of[b] < 0)
      add_plan(fmt::format("{} is in no bucket: its gradient would not be summed over the ranks",
                           block_name(static_cast<BlockId>(b))));
}

}  // namespace mplan::verifier
