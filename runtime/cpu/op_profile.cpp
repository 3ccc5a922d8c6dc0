// The per-op-kind clock (runtime/cpu/op_profile.h).

#include "runtime/cpu/op_profile.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace mplan::rt {
namespace {

constexpr int kKinds = static_cast<int>(OpKind::count);

const char* setting() {
  const char* value = std::getenv("MPLAN_OP_PROFILE");
  return value != nullptr ? value : "";
}

bool read_enabled() { return *setting() != '\0' && std::strcmp(setting(), "0") != 0; }

const bool kThreadCpuTime = std::strcmp(setting(), "cpu") == 0;

struct Totals {
  std::atomic<int64_t> ns[kKinds] = {};
  std::atomic<int64_t> calls[kKinds] = {};
  // Printed when the program exits (static destruction), if enabled.
  ~Totals() {
    if (detail::kOpProfileEnabled) std::fputs(op_profile_report().c_str(), stderr);
  }
};

Totals& totals() {
  static Totals instance;
  return instance;
}

}  // namespace

namespace detail {
const bool kOpProfileEnabled = read_enabled();
thread_local int op_profile_depth = 0;

int64_t op_profile_now_ns() {
  if (kThreadCpuTime) {
    timespec now{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
  }
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void op_profile_add(OpKind kind, int64_t started_ns) {
  const int64_t ns = op_profile_now_ns() - started_ns;
  Totals& t = totals();
  t.ns[static_cast<int>(kind)].fetch_add(ns, std::memory_order_relaxed);
  t.calls[static_cast<int>(kind)].fetch_add(1, std::memory_order_relaxed);
}
}  // namespace detail

// Constructs the totals at start-up when enabled, so that they are destroyed
// (and printed) after everything that may still run ops.
[[maybe_unused]] const bool kTotalsConstructed = detail::kOpProfileEnabled && (totals(), true);

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::conv_forward: return "conv_forward";
    case OpKind::conv_backward_data: return "conv_backward_data";
    case OpKind::conv_backward_filter: return "conv_backward_filter";
    case OpKind::conv_backward_bias: return "conv_backward_bias";
    case OpKind::linear: return "linear";
    case OpKind::relu: return "relu";
    case OpKind::pool: return "pool";
    case OpKind::batchnorm: return "batchnorm";
    case OpKind::lrn: return "lrn";
    case OpKind::dropout: return "dropout";
    case OpKind::add: return "add";
    case OpKind::concat: return "concat";
    case OpKind::flatten: return "flatten";
    case OpKind::softmax_xent: return "softmax_xent";
    case OpKind::sgd: return "sgd";
    case OpKind::fill_copy: return "fill_copy";
    case OpKind::count: break;
  }
  return "?";
}

bool op_profile_enabled() { return detail::kOpProfileEnabled; }

std::string op_profile_report() {
  std::string out;
  Totals& t = totals();
  for (int k = 0; k < kKinds; ++k) {
    const int64_t calls = t.calls[k].load(std::memory_order_relaxed);
    if (calls == 0) continue;
    char line[128];
    std::snprintf(line, sizeof line, "op-profile: %-22s %12.3f ms %9lld calls\n", op_kind_name(static_cast<OpKind>(k)),
                  static_cast<double>(t.ns[k].load(std::memory_order_relaxed)) * 1e-6, static_cast<long long>(calls));
    out += line;
  }
  return out;
}

}  // namespace mplan::rt
