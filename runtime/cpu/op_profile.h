#pragma once
// Where a training step's time goes, per op kind: when the environment variable
// MPLAN_OP_PROFILE is set (to anything but "0") at program start, every runtime op
// adds its wall time to its kind's total, and the totals are printed to stderr when
// the program exits, one line per kind:
//
//   op-profile: conv_forward        123.456 ms    4321 calls
//
// (bench/cpu_vs_torch.py reads these lines). MPLAN_OP_PROFILE=cpu counts the
// calling thread's CPU time instead of wall time: less disturbed by other
// processes on a loaded machine, blind to time the op spends descheduled.
// Ops run on the compute stream, one at
// a time, so the totals add up to the compute stream's busy time. An op called
// from inside another op (the micro-batched convolution's slices, add_forward's
// copies) counts once, for the outer op. When the variable is not set, an op pays
// one predictable branch.

#include <cstdint>
#include <string>

namespace mplan::rt {

enum class OpKind : int {
  conv_forward,
  conv_backward_data,
  conv_backward_filter,
  conv_backward_bias,
  linear,
  relu,
  pool,
  batchnorm,
  lrn,
  dropout,
  add,        // add_forward/add_backward (the op table runs add's FP as add_two, its BP1 as copy_or_add)
  concat,
  flatten,
  softmax_xent,
  sgd,
  fill_copy,  // fill_f32 and copy_or_add: the program's own fills and copies, add and flatten
  count
};

const char* op_kind_name(OpKind kind);

// Whether MPLAN_OP_PROFILE was set when the program started.
bool op_profile_enabled();

// The totals so far, one "op-profile: ..." line per kind that ran (what is printed
// at exit).
std::string op_profile_report();

namespace detail {
extern const bool kOpProfileEnabled;
extern thread_local int op_profile_depth;
// Nanoseconds on the profile's clock (wall or thread CPU time).
int64_t op_profile_now_ns();
void op_profile_add(OpKind kind, int64_t started_ns);
}  // namespace detail

// Times the enclosing op: OpTimer timer(OpKind::relu); at the top of an op.
class OpTimer {
 public:
  explicit OpTimer(OpKind kind) : kind_(kind) {
    if (!detail::kOpProfileEnabled) return;
    active_ = detail::op_profile_depth++ == 0;
    if (active_) started_ns_ = detail::op_profile_now_ns();
  }
  ~OpTimer() {
    if (!detail::kOpProfileEnabled) return;
    --detail::op_profile_depth;
    if (active_) detail::op_profile_add(kind_, started_ns_);
  }
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;

 private:
  OpKind kind_;
  bool active_ = false;
  int64_t started_ns_ = 0;
};

}  // namespace mplan::rt
