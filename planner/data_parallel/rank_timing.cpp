#include "planner/data_parallel/rank_timing.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>

#include "core/error.h"
#include "profiler/link_sharing.h"

namespace mplan {

namespace {

constexpr int kStreams = 5;  // StreamKind values
constexpr double kInfinity = std::numeric_limits<double>::infinity();

// A transfer in flight: a rank's copy step, or one hop of a bucket's ring.
struct Transfer {
  int32_t rank = 0;
  int32_t step = -1;    // the copy step, or -1 for a ring hop
  int32_t bucket = -1;  // the bucket of a ring hop
  double remaining = 0;  // bytes
  std::vector<int32_t> path;
};

struct RankState {
  const Plan* plan = nullptr;
  std::array<std::vector<int32_t>, kStreams> queue;  // step indices per stream, in issue order
  std::array<size_t, kStreams> next{};               // the queue's first step not started
  std::array<bool, kStreams> busy{};
  std::vector<double> event_at;   // when each event was recorded; NaN before
  std::vector<bool> done;
  std::vector<int32_t> host_steps;  // alloc and free: bookkeeping, done once their waits are
  int32_t update_step = -1;
  int32_t steps_left = 0;
};

enum class BucketPhase { waiting, latency, moving, done };

class RanksSimulation {
 public:
  RanksSimulation(const Tdfg& tdfg, const Machine& machine, const std::vector<RankSchedule>& ranks)
      : machine_(machine), schedules_(ranks), links_(machine) {
    MPLAN_CHECK(!ranks.empty() && static_cast<int32_t>(ranks.size()) <= machine.gpu_count(),
                "one rank or more, no more than the machine has GPUs");
    const std::vector<GradientBucket>& buckets = *ranks[0].buckets;
    for (const RankSchedule& r : ranks) {
      MPLAN_CHECK(r.buckets->size() == buckets.size(), "every rank has the same buckets");
      for (size_t k = 0; k < buckets.size(); ++k)
        MPLAN_CHECK((*r.buckets)[k].bytes == buckets[k].bytes, "every rank has the same buckets");
    }
    out_.buckets = buckets;
    phase_.assign(buckets.size(), BucketPhase::waiting);
    latency_end_.assign(buckets.size(), 0);
    hops_left_.assign(buckets.size(), 0);
    const auto rank_count = static_cast<int32_t>(ranks.size());
    for (int32_t r = 0; r < rank_count; ++r) {
      const Plan& plan = *ranks[static_cast<size_t>(r)].plan;
      RankState s;
      s.plan = &plan;
      s.event_at.assign(static_cast<size_t>(plan.event_count), std::nan(""));
      s.done.assign(plan.steps.size(), false);
      s.steps_left = static_cast<int32_t>(plan.steps.size());
      for (const Step& step : plan.steps) {
        if (step.kind == StepKind::alloc || step.kind == StepKind::free) {
          s.host_steps.push_back(step.index);
          continue;
        }
        s.queue[static_cast<size_t>(step.stream)].push_back(step.index);
        if (step.kind == StepKind::compute && step.task != kNoTask &&
            tdfg.tasks.at(static_cast<size_t>(step.task)).kind == TaskKind::update)
          s.update_step = step.index;
      }
      RankTiming t;
      t.start_ms.assign(plan.steps.size(), 0);
      t.end_ms.assign(plan.steps.size(), 0);
      out_.ranks.push_back(std::move(t));
      state_.push_back(std::move(s));
    }
  }

  RanksTiming run() {
    while (true) {
      start_what_can_start();
      if (finished()) break;
      advance();
    }
    for (RankTiming& t : out_.ranks) out_.step_ms = std::max(out_.step_ms, t.finish_ms);
    report_links();
    return std::move(out_);
  }

 private:
  bool waits_met(const RankState& s, const Step& step) const {
    for (EventId e : step.waits)
      if (std::isnan(s.event_at[static_cast<size_t>(e)])) return false;
    return true;
  }

  bool buckets_done() const {
    return std::all_of(phase_.begin(), phase_.end(), [](BucketPhase p) { return p == BucketPhase::done; });
  }

  void complete(int32_t r, int32_t index) {
    RankState& s = state_[static_cast<size_t>(r)];
    const Step& step = s.plan->steps[static_cast<size_t>(index)];
    s.done[static_cast<size_t>(index)] = true;
    --s.steps_left;
    out_.ranks[static_cast<size_t>(r)].end_ms[static_cast<size_t>(index)] = now_;
    out_.ranks[static_cast<size_t>(r)].finish_ms = std::max(out_.ranks[static_cast<size_t>(r)].finish_ms, now_);
    if (step.records != kNoEvent) s.event_at[static_cast<size_t>(step.records)] = now_;
    if (step.kind != StepKind::alloc && step.kind != StepKind::free) s.busy[static_cast<size_t>(step.stream)] = false;
  }

  // Starts every step and all-reduce whose turn has come, until none can.
  void start_what_can_start() {
    bool changed = true;
    while (changed) {
      changed = false;
      for (size_t r = 0; r < state_.size(); ++r) {
        RankState& s = state_[r];
        for (auto it = s.host_steps.begin(); it != s.host_steps.end();) {
          const Step& step = s.plan->steps[static_cast<size_t>(*it)];
          if (!waits_met(s, step)) {
            ++it;
            continue;
          }
          out_.ranks[r].start_ms[static_cast<size_t>(*it)] = now_;
          complete(static_cast<int32_t>(r), *it);
          it = s.host_steps.erase(it);
          changed = true;
        }
        for (size_t stream = 0; stream < kStreams; ++stream) {
          if (s.busy[stream] || s.next[stream] >= s.queue[stream].size()) continue;
          const int32_t index = s.queue[stream][s.next[stream]];
          const Step& step = s.plan->steps[static_cast<size_t>(index)];
          if (!waits_met(s, step)) continue;
          if (index == s.update_step && !buckets_done()) continue;
          ++s.next[stream];
          s.busy[stream] = true;
          start_step(static_cast<int32_t>(r), step);
          changed = true;
        }
      }
      changed = start_all_reduce() || changed;
    }
  }

  void start_step(int32_t r, const Step& step) {
    RankTiming& t = out_.ranks[static_cast<size_t>(r)];
    t.start_ms[static_cast<size_t>(step.index)] = now_;
    const double planned_ms = step.end_ms - step.start_ms;
    if (step.kind == StepKind::compute || step.kind == StepKind::move) {  // a move copies within the device
      compute_end_.emplace(now_ + planned_ms, std::make_pair(r, step.index));
      return;
    }
    // offload or prefetch: the buffer's bytes over the host links.
    const Plan& plan = *state_[static_cast<size_t>(r)].plan;
    const auto bytes = static_cast<double>(plan.buffers.at(static_cast<size_t>(step.buffer)).bytes);
    t.alone_copy_ms += planned_ms;
    if (planned_ms <= 0 || bytes <= 0) {
      complete(r, step.index);
      return;
    }
    const auto per_node = static_cast<int32_t>(machine_.gpus.size());
    Transfer transfer;
    transfer.rank = r;
    transfer.step = step.index;
    transfer.remaining = bytes;
    transfer.path = links_.host_copy({r / per_node, r % per_node, step.kind == StepKind::prefetch});
    // Never faster than it ran alone in the plan.
    transfer.path.push_back(links_.private_link(bytes / (planned_ms * 1e-3)));
    transfers_.push_back(std::move(transfer));
  }

  // The next bucket's all-reduce, once every rank has its gradients and the
  // previous one is done.
  bool start_all_reduce() {
    const auto ranks = static_cast<int32_t>(state_.size());
    for (size_t k = 0; k < phase_.size(); ++k) {
      if (phase_[k] == BucketPhase::done) continue;
      if (phase_[k] != BucketPhase::waiting) return false;
      for (size_t r = 0; r < state_.size(); ++r) {
        const GradientBucket& bucket = (*schedules_[r].buckets)[k];
        if (!state_[r].done[static_cast<size_t>(bucket.ready_after_step)]) return false;
      }
      out_.buckets[k].start_ms = now_;
      if (ranks == 1) {
        phase_[k] = BucketPhase::done;
        out_.buckets[k].end_ms = now_;
        return true;
      }
      double latency_ms = 0;
      for (int32_t r = 0; r < ranks; ++r) {
        double hop_latency = 0;
        links_.ring_hop(r, (r + 1) % ranks, &hop_latency);
        latency_ms = std::max(latency_ms, hop_latency);
      }
      phase_[k] = BucketPhase::latency;
      latency_end_[k] = now_ + 2.0 * (ranks - 1) * latency_ms;
      return true;
    }
    return false;
  }

  void start_hops(size_t k) {
    const auto ranks = static_cast<int32_t>(state_.size());
    const double share = 2.0 * (ranks - 1) / ranks;
    phase_[k] = BucketPhase::moving;
    hops_left_[k] = ranks;
    for (int32_t r = 0; r < ranks; ++r) {
      Transfer hop;
      hop.rank = r;
      hop.bucket = static_cast<int32_t>(k);
      hop.remaining = share * static_cast<double>(out_.buckets[k].bytes);
      double latency = 0;
      hop.path = links_.ring_hop(r, (r + 1) % ranks, &latency);
      transfers_.push_back(std::move(hop));
    }
  }

  bool finished() const {
    for (const RankState& s : state_)
      if (s.steps_left > 0) return false;
    return buckets_done();
  }

  // Moves time to the next moment something ends.
  void advance() {
    // The rates over the links in use only (every copy has a link of its own).
    std::map<int32_t, int32_t> local;
    std::vector<double> capacity;
    std::vector<std::vector<int32_t>> paths;
    for (const Transfer& t : transfers_) {
      std::vector<int32_t> path;
      for (int32_t l : t.path) {
        auto [it, added] = local.emplace(l, static_cast<int32_t>(capacity.size()));
        if (added) capacity.push_back(links_.capacity()[static_cast<size_t>(l)]);
        path.push_back(it->second);
      }
      paths.push_back(std::move(path));
    }
    const std::vector<double> rate = max_min_rates(capacity, paths);
    double next = kInfinity;
    if (!compute_end_.empty()) next = compute_end_.begin()->first;
    for (size_t k = 0; k < phase_.size(); ++k)
      if (phase_[k] == BucketPhase::latency) next = std::min(next, latency_end_[k]);
    for (size_t i = 0; i < transfers_.size(); ++i)
      if (rate[i] > 0) next = std::min(next, now_ + transfers_[i].remaining / rate[i] * 1e3);
    MPLAN_CHECK(std::isfinite(next), "the ranks' plans wait for each other");
    const double dt = std::max(0.0, next - now_);
    note_link_use(rate, dt);
    for (size_t i = 0; i < transfers_.size(); ++i) transfers_[i].remaining -= rate[i] * dt * 1e-3;
    now_ = next;
    // What ends now: compute steps, latencies, transfers (within rounding).
    while (!compute_end_.empty() && compute_end_.begin()->first <= now_) {
      const auto [r, index] = compute_end_.begin()->second;
      compute_end_.erase(compute_end_.begin());
      complete(r, index);
    }
    for (size_t k = 0; k < phase_.size(); ++k)
      if (phase_[k] == BucketPhase::latency && latency_end_[k] <= now_) start_hops(k);
    std::vector<Transfer> still;
    for (size_t i = 0; i < transfers_.size(); ++i) {
      Transfer& t = transfers_[i];
      const bool ends = t.remaining <= 0 || (i < rate.size() && rate[i] > 0 && t.remaining / rate[i] * 1e3 <= 1e-9);
      if (!ends) {
        still.push_back(std::move(t));
        continue;
      }
      if (t.step >= 0) {
        RankTiming& timing = out_.ranks[static_cast<size_t>(t.rank)];
        timing.copy_ms += now_ - timing.start_ms[static_cast<size_t>(t.step)];
        complete(t.rank, t.step);
      } else if (--hops_left_[static_cast<size_t>(t.bucket)] == 0) {
        phase_[static_cast<size_t>(t.bucket)] = BucketPhase::done;
        out_.buckets[static_cast<size_t>(t.bucket)].end_ms = now_;
      }
    }
    transfers_ = std::move(still);
  }

  void note_link_use(const std::vector<double>& rate, double dt) {
    std::map<int32_t, int32_t> count;
    for (size_t i = 0; i < transfers_.size(); ++i)
      for (int32_t l : transfers_[i].path) {
        ++count[l];
        LinkTotals& totals = totals_[l];
        totals.bytes += rate[i] * dt * 1e-3;
      }
    for (const auto& [l, n] : count) {
      LinkTotals& totals = totals_[l];
      if (dt > 0) totals.busy_ms += dt;
      if (n > totals.peak) {
        totals.peak = n;
        totals.peak_at = now_;
      }
    }
  }

  void report_links() {
    for (const auto& [l, totals] : totals_) {
      if (std::string(links_.kind(l)) == "own speed") continue;
      out_.links.push_back({links_.describe(l), links_.kind(l), totals.peak, totals.peak_at, totals.busy_ms,
                            totals.bytes});
    }
    std::stable_sort(out_.links.begin(), out_.links.end(), [](const LinkUse& a, const LinkUse& b) {
      return a.peak_transfers != b.peak_transfers ? a.peak_transfers > b.peak_transfers : a.busy_ms > b.busy_ms;
    });
  }

  struct LinkTotals {
    int32_t peak = 0;
    double peak_at = 0, busy_ms = 0, bytes = 0;
  };

  const Machine& machine_;
  const std::vector<RankSchedule>& schedules_;
  LinkPaths links_;
  std::vector<RankState> state_;
  std::vector<Transfer> transfers_;
  std::multimap<double, std::pair<int32_t, int32_t>> compute_end_;  // end -> (rank, step)
  std::vector<BucketPhase> phase_;
  std::vector<double> latency_end_;
  std::vector<int32_t> hops_left_;
  std::map<int32_t, LinkTotals> totals_;
  double now_ = 0;
  RanksTiming out_;
};

}  // namespace

RanksTiming time_ranks(const Tdfg& tdfg, const Machine& machine, const std::vector<RankSchedule>& ranks) {
  return RanksSimulation(tdfg, machine, ranks).run();
}

}  // namespace mplan
