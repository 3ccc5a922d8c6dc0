#include "planner/plan.h"

#include <cstdio>

namespace mplan {

const char* step_kind_name(StepKind kind) {
  switch (kind) {
    case StepKind::compute: return "compute";
    case StepKind::offload: return "offload";
    case StepKind::prefetch: return "prefetch";
    case StepKind::alloc: return "alloc";
    case StepKind::free: return "free";
    case StepKind::move: return "move";
  }
  return "?";
}

const char* stream_kind_name(StreamKind kind) {
  switch (kind) {
    case StreamKind::compute: return "compute";
    case StreamKind::h2d: return "h2d";
    case StreamKind::d2h: return "d2h";
    case StreamKind::copy: return "copy";
    case StreamKind::host: return "host";
  }
  return "?";
}

bool parse_step_kind(const std::string& name, StepKind* kind) {
  for (StepKind k : {StepKind::compute, StepKind::offload, StepKind::prefetch, StepKind::alloc, StepKind::free,
                     StepKind::move}) {
    if (name == step_kind_name(k)) {
      *kind = k;
      return true;
    }
  }
  return false;
}

bool parse_stream_kind(const std::string& name, StreamKind* kind) {
  for (StreamKind k : {StreamKind::compute, StreamKind::h2d, StreamKind::d2h, StreamKind::copy,
                       StreamKind::host}) {
    if (name == stream_kind_name(k)) {
      *kind = k;
      return true;
    }
  }
  return false;
}

HostSlotId host_slot_of(const Plan& plan, BlockId block, int32_t round) {
  for (const HostSlot& slot : plan.host_slots)
    if (slot.block == block && slot.round == round) return slot.id;
  return kNoHostSlot;
}

namespace {
uint64_t choice_key(TaskId task, int32_t round) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(task)) << 32) | static_cast<uint32_t>(round);
}
}  // namespace

ChoiceIndex::ChoiceIndex(const Plan& plan) {
  by_key_.reserve(plan.choices.size());
  // The first choice of a (task, round) wins, as a scan from the front would find it.
  for (const TaskChoice& c : plan.choices) by_key_.emplace(choice_key(c.task, c.round), &c);
}

const TaskChoice* ChoiceIndex::find(TaskId task, int32_t round) const {
  auto it = by_key_.find(choice_key(task, round));
  return it == by_key_.end() ? nullptr : it->second;
}

}  // namespace mplan
