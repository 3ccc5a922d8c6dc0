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
  for (StepKind k : {StepKind::compute, StepKind::offload, StepKind::prefetch, StepKind::alloc,
                     StepKind::free}) {
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

namespace {

// FNV-1a, 64 bits: simple, stable across platforms and runs.
struct Fnv1a {
  uint64_t hash = 1469598103934665603ull;
  void bytes(const void* data, size_t size) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < size; ++i) {
      hash ^= p[i];
      hash *= 1099511628211ull;
    }
  }
  void text(const std::string& s) {
    int64_t n = static_cast<int64_t>(s.size());
    bytes(&n, sizeof n);
    bytes(s.data(), s.size());
  }
  void integer(int64_t v) { bytes(&v, sizeof v); }
  void real(double v) { bytes(&v, sizeof v); }
  void shape(const Shape& s) {
    integer(static_cast<int64_t>(s.dims.size()));
    for (int64_t d : s.dims) integer(d);
  }
};

}  // namespace

std::string plan_model_digest(const Model& model) {
  Fnv1a h;
  h.text(model.name);
  h.shape(model.input);
  h.integer(model.batch);
  h.integer(model.classes);
  h.text(model.dtype);
  h.text(model.optimizer.kind);
  h.real(model.optimizer.lr);
  h.real(model.optimizer.momentum);
  h.real(model.optimizer.weight_decay);
  h.integer(static_cast<int64_t>(model.layers.size()));
  for (const Layer& l : model.layers) {
    h.text(l.name);
    h.integer(static_cast<int64_t>(l.op));
    h.integer(static_cast<int64_t>(l.inputs.size()));
    for (LayerId in : l.inputs) h.integer(in);
    h.shape(l.output);
    h.integer(l.out);
    h.integer(l.groups);
    h.integer(l.bias);
    const Window& w = l.window;
    for (int64_t v : {w.kernel_h, w.kernel_w, w.stride_h, w.stride_w, w.pad_h, w.pad_w}) h.integer(v);
    h.integer(static_cast<int64_t>(l.pool_mode));
    h.integer(l.ceil_mode);
    h.real(l.eps);
    h.real(l.momentum);
    h.integer(l.lrn_size);
    h.real(l.alpha);
    h.real(l.beta);
    h.real(l.k);
    h.real(l.p);
    // The fields of the vision-model ops (issue 14).
    for (int64_t v : {w.dilation_h, w.dilation_w, static_cast<int64_t>(l.tanh_approximation), l.out_h, l.out_w, l.axis,
                      l.begin, l.end, static_cast<int64_t>(l.transpose_b), l.heads})
      h.integer(v);
    h.integer(static_cast<int64_t>(l.shape.size()));
    for (int64_t v : l.shape) h.integer(v);
    h.real(l.clip_min);
    h.real(l.clip_max);
    h.real(l.scale);
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h.hash));
  return text;
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
