#pragma once
// The fixed part of every generated training program (docs/generated-program.md):
// flags, the one device allocation and pinned host memory, streams and events,
// weight initialisation, data loading, checkpoints, the step loop and its
// timing. Codegen writes only the model's constants, the buffer tables and the
// schedule (one function that runs one iteration), and calls run_program.
//
// Ordinary runtime code on both backends: it uses only runtime/device.h and
// runtime/ops.h.

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "runtime/collectives.h"
#include "runtime/dataset.h"
#include "runtime/device.h"
#include "runtime/loss_scale.h"
#include "runtime/ops.h"
#include "runtime/timeline.h"

namespace mplan::rt {

// How a tensor of the weights file starts (docs/generated-program.md).
enum class Init : int8_t { zeros, ones, uniform_fan_in };

// One tensor of the weights file format: a slice of the resident region.
struct WeightTensor {
  const char* file;       // <file>.npy in a checkpoint (a sanitised, unique name)
  int64_t offset_bytes;   // from the start of device memory
  int64_t count;          // floats
  int32_t rank;
  int64_t shape[4];
  Init init;
  int64_t fan_in;         // uniform_fan_in: bound 1/sqrt(fan_in)
  bool optional;          // may be absent from --load (then it starts as initialised)
};

// A byte range of device memory (from its start) or of the host buffer.
struct Region {
  int64_t offset;
  int64_t bytes;
};

// The 16-bit copy of a layer's float32 weights that its W block keeps after
// them (docs/generated-program.md, "16-bit programs"): made from the float32
// ones after initialisation and --load; the update remakes it every step.
struct WeightCopy {
  int64_t master_offset;  // the float32 weights, from the start of device memory
  int64_t count;          // elements
  int64_t copy_offset;    // the copy
  int64_t type;           // StorageType (runtime/ops_casts.h)
};

class Program;

// Everything codegen writes about the model and the plan besides the schedule.
struct ProgramSpec {
  const char* model_name;
  const char* model_digest;
  const char* target;             // "cpu" or "cuda": the backend the code was generated for
  const char* math_mode;          // the plan's math mode ("fp32", "tf32"): what its costs assumed
  int64_t batch;                  // B: the loss is averaged over all of it
  int32_t rounds;                 // sub-batches, gradients accumulated (moDNN §III)
  const int64_t* sub_batches;     // [rounds]
  const int64_t* first_sample;    // [rounds]: the global index of each round's first sample
  int64_t input_c, input_h, input_w;
  int64_t classes;
  float default_lr;
  int64_t budget_bytes;
  int64_t resident_region_bytes;  // weights, gradients, optimizer state
  int64_t arena_bytes;
  int64_t plan_peak_arena_bytes;
  double plan_simulated_ms;       // plan.json summary.simulated_ms and stall_ms (train --timeline)
  double plan_stall_ms;
  int64_t host_bytes;             // pinned host memory for offloads and input data
  int32_t event_count;            // the plan's events
  int32_t debug_event_count;      // --debug-poison's own events
  const WeightTensor* tensors;
  int32_t tensor_count;
  const Region* input_slots;      // [rounds]: host slots of each round's images
  const Region* label_slots;      // [rounds]: and labels
  // Runs one iteration of the plan: every step of every round, then the update.
  void (*run_iteration)(Program& program);
  // 16-bit programs (docs/generated-program.md, "16-bit programs"); an fp32
  // or tf32 program has none of these.
  const char* precision;              // "fp32", "tf32", "bf16" or "fp16"
  int64_t wide_scratch_bytes;         // the float scratch of the casts around a kernel: outside the budget
  const WeightCopy* weight_copies;
  int32_t weight_copy_count;
  bool loss_scaling;                  // fp16: dynamic loss scaling (runtime/loss_scale.h)
  const Region* weight_gradients;     // every dW block: what the loss scale is taken off again
  int32_t weight_gradient_count;
  // The evaluation pass (docs/generated-program.md, "Evaluation"): the
  // training step's spec points to the evaluation's, whose schedule runs the
  // forward pass alone on the same resident region and arena; null in a
  // program generated without one.
  const ProgramSpec* evaluation = nullptr;
  bool is_evaluation = false;  // this spec is an evaluation's: its loss block holds kEvaluationMetrics floats
  // A plan of several ranks (runtime/collectives.h; docs/generated-program.md,
  // "Several ranks"); null in a single-rank program. `batch` is then one
  // rank's share of the global batch.
  const DataParallelSpec* data_parallel = nullptr;
};

// The floats of an evaluation round's loss block: the summed loss, top-1 and
// top-5 hits, the samples counted (runtime/ops.h softmax_xent_evaluate).
inline constexpr int kEvaluationMetrics = 4;

// What an evaluation over a data set gives (Program::evaluate).
struct EvaluationResult {
  double loss = 0;   // the mean over the samples
  double top1 = 0;   // fractions in [0, 1]
  double top5 = 0;
  int64_t samples = 0;
  double ms = 0;
};

// The running program as the schedule sees it: device pointers, streams,
// events and the values kernels take from the run (seed, step, lr, ...).
class Program {
 public:
  Program(const ProgramSpec& spec, uint64_t seed, float lr, bool debug_poison, int copy_delay_ms);
  ~Program();
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  // Allocates device and host memory; false with a message when they cannot
  // be had. With `shared`, the device memory is that one (the training
  // step's, which an evaluation program runs on between steps), not its own.
  bool allocate(std::string* error, const DeviceMemory* shared = nullptr);

  // Pointers into the device allocation (offsets in bytes from its start).
  float* f32(int64_t offset) const { return reinterpret_cast<float*>(device_.base + offset); }
  int32_t* i32(int64_t offset) const { return reinterpret_cast<int32_t*>(device_.base + offset); }
  uint8_t* u8(int64_t offset) const { return reinterpret_cast<uint8_t*>(device_.base + offset); }
  void* bytes(int64_t offset) const { return device_.base + offset; }
  // The float scratch of a 16-bit program's casts (ProgramSpec::wide_scratch_bytes).
  float* wide(int64_t offset) const { return reinterpret_cast<float*>(wide_.base + offset); }
  // The same scratch as bytes: the 16-bit operands of a 16-bit kernel (runtime/ops_sixteen_bit.h).
  uint8_t* wide_u8(int64_t offset) const { return reinterpret_cast<uint8_t*>(wide_.base + offset); }
  // Host memory for the range [offset, offset + bytes) of the plan's host
  // area: inside one input or label slot, the running step's input set
  // (input_sets_); any other range (an offloaded block's slot, even one that
  // reuses an input slot's bytes after its load), the plan's pinned host area.
  void* host(int64_t offset, int64_t bytes) const { return host_of_step(offset, bytes, step_); }

  // The streams of the plan: compute, one per copy direction, or one shared
  // copy stream (copy() is h2d then) for a plan with one copy engine.
  const Context& compute() const { return compute_; }
  Stream* h2d() const { return h2d_; }
  Stream* d2h() const { return d2h_; }
  Stream* copy() const { return h2d_; }
  Event* event(int32_t id) const { return events_.at(static_cast<size_t>(id)); }

  // ---- steps ----------------------------------------------------------------------------
  // alloc: bookkeeping (the plan placed the buffer); tracks the peak arena use.
  void alloc(int64_t offset, int64_t bytes);
  // prefetch (host slot -> device) and offload (device -> host slot) on a copy stream.
  void prefetch(int64_t device_offset, int64_t host_offset, int64_t bytes, Stream* stream);
  void offload(int64_t device_offset, int64_t host_offset, int64_t bytes, Stream* stream);
  // move: copies a block between two disjoint ranges of the device allocation
  // (the plan's compaction), on the stream it is enqueued on (compute).
  void move(int64_t to_offset, int64_t from_offset, int64_t bytes, Stream* stream);
  // After the round's loss step: copies the round's summed loss to the host.
  void read_loss(int32_t round, int64_t loss_offset);
  // The plan's events. A round whose class has an event it does not use has
  // -1 in its table: then these do nothing.
  void wait(Stream* stream, int32_t event_id) {
    if (event_id < 0) return;
    if (!timeline_.active() || stream != compute_stream_) return stream_wait_event(stream, event(event_id));
    const size_t span = timeline_.open(Timeline::Kind::wait, stream, 0, event_id);
    stream_wait_event(stream, event(event_id));
    timeline_.close(span, stream);
  }
  void record(Stream* stream, int32_t event_id) {
    if (event_id >= 0) event_record(event(event_id), stream);
  }
  // A host step (alloc, free) that waits: the host blocks until the event.
  void host_wait(int32_t event_id) {
    if (event_id >= 0) event_synchronize(event(event_id));
  }

  // ---- several ranks (runtime/collectives.h) ----------------------------------------------
  // Joins the ranks: this process is rank collectives->rank() of ranks(); its
  // samples are [rank x B, (rank + 1) x B) of each global batch. Before
  // allocate() for a training program (which binds the gradient buckets).
  void set_collectives(Collectives* collectives);
  Collectives* collectives() const { return collectives_; }
  int32_t rank() const { return rank_; }
  int32_t ranks() const { return ranks_; }
  // The global batch: ranks x B.
  int64_t global_batch() const { return spec_.batch * ranks_; }
  // The global index (within the step) of this rank's first sample: what a
  // round's first_sample is offset by for the dropout masks.
  int64_t sample_offset() const { return spec_.batch * rank_; }
  // The schedule's calls: bucket k's sum over the ranks starts after the
  // compute step just enqueued (-1: none in this round); the update waits for
  // every bucket.
  void start_bucket(int32_t bucket) {
    if (bucket >= 0 && collectives_ != nullptr) collectives_->start_bucket(bucket);
  }
  void wait_buckets() {
    if (collectives_ != nullptr) collectives_->wait_buckets();
  }

  // ---- --debug-poison -------------------------------------------------------------------
  bool debug() const { return debug_poison_; }
  // Refills a dead buffer's range with the poison NaN, in stream order.
  void poison(Stream* stream, int64_t offset, int64_t bytes);
  Event* debug_event(int32_t id) const { return debug_events_.at(static_cast<size_t>(id)); }
  // A step's float outputs must be finite: a NaN there means it read poison.
  struct Output {
    int64_t offset;
    int64_t bytes;
    const char* name;
    int64_t type = 0;  // StorageType of its elements (runtime/ops_casts.h)
  };
  void check_finite(int32_t round, const char* step, std::initializer_list<Output> outputs);

  // ---- values kernels take from the run -------------------------------------------------
  uint64_t seed() const { return seed_; }
  uint64_t step() const { return step_; }
  float lr() const { return lr_; }
  // The learning rate of the next steps (a schedule sets it per step: runtime/lr_schedule.h).
  void set_lr(float lr) { lr_ = lr; }
  bool first_update() const { return first_update_; }
  // What the loss's gradient is multiplied by: fp16's loss scale, else 1.
  float loss_scale() const { return spec_.loss_scaling ? loss_scale_.scale : 1.0f; }

  // ---- 16-bit programs (runtime/program_sixteen_bit.cpp) --------------------------------
  // Makes every 16-bit weight copy from its float32 weights (after
  // initialisation and --load).
  void make_weight_copies();
  // Before the update (runtime/program_update.cpp), what the optimizer step of
  // a PyTorch loop does first. fp16: waits for the backward pass, multiplies
  // every weight gradient by 1/scale and checks them, then moves the loss
  // scale on (runtime/loss_scale.h); false: a gradient was not finite, the
  // update is skipped and the gradients are zeroed for the next step. Then,
  // with a clip norm (--clip-grad-norm), torch.nn.utils.clip_grad_norm_: the
  // gradients are scaled by max_norm / (their global 2-norm + 1e-6) where that
  // is below 1. True, without either, at no cost.
  bool prepare_update();
  void set_clip_norm(double max_norm) { clip_norm_ = max_norm; }
  // The global 2-norm of the last update's gradients (before clipping); only
  // with a clip norm.
  std::optional<double> last_gradient_norm() const { return last_gradient_norm_; }
  const LossScale& loss_scale_state() const { return loss_scale_; }
  void set_loss_scale_state(const LossScale& state) { loss_scale_ = state; }
  void set_loss_scale_rules(const LossScaleRules& rules) { loss_scale_rules_ = rules; }
  // Whether the last run_step skipped its update, and the scale it ran at.
  bool last_update_skipped() const { return last_update_skipped_; }
  float last_loss_scale() const { return last_loss_scale_; }

  // Runs one iteration (fills the input slots, runs the schedule, waits for
  // every stream); returns the mean loss over the batch. With prepare_next,
  // the samples of step + 1 are made on the host, straight into the other
  // input set, while the device runs this step: run_step(step + 1) then
  // starts its kernels at once.
  double run_step(uint64_t step, Dataset& data, bool prepare_next = false);
  // An evaluation program (ProgramSpec::is_evaluation): runs every batch of
  // `data` (its order must be SampleOrder::evaluation) and sums the rounds'
  // metrics.
  EvaluationResult evaluate(Dataset& data);
  // Measures the next run_step's copies and compute-stream waits
  // (runtime/timeline.h); timeline_spans() has them after it.
  void measure_next_step() { measure_next_ = true; }
  std::vector<Timeline::Span> timeline_spans() const { return timeline_.spans(); }
  double timeline_compute_ms() const { return timeline_.compute_ms(); }
  // The host time of the last run_step's input before its first kernel
  // (making its samples; none when the previous step made them).
  double last_data_ms() const { return last_data_ms_; }
  // How long the host took to enqueue the last step's work (the step's
  // schedule, not its input): near the step's whole time, the device may be
  // waiting for the host (a launch-bound step) or the host for the device's
  // full launch queue; far below it, the device is the bound.
  double last_enqueue_ms() const { return last_enqueue_ms_; }

  const ProgramSpec& spec() const { return spec_; }
  const DeviceMemory& device() const { return device_; }
  int64_t peak_arena_bytes() const { return peak_arena_end_bytes_; }
  void set_first_update(bool first) { first_update_ = first; }

 private:
  int loss_floats() const { return spec_.is_evaluation ? kEvaluationMetrics : 1; }
  void copy_delay(Stream* stream);
  // `count` elements of device memory at `offset`, stored as `type` (StorageType), as floats.
  std::vector<float> read_floats(int64_t offset, int64_t count, int64_t type) const;
  void* host_of_step(int64_t offset, int64_t bytes, uint64_t step) const;
  // Writes step's samples into its input set's slots.
  void make_input(uint64_t step, Dataset& data) const;
  // The input and label slots of the plan, each with its place in an input set.
  struct InputSlot {
    int64_t host_offset, bytes, set_offset;
  };

  const ProgramSpec& spec_;
  Collectives* collectives_ = nullptr;
  int32_t rank_ = 0, ranks_ = 1;
  uint64_t seed_;
  uint64_t step_ = 0;
  double last_data_ms_ = 0;
  double last_enqueue_ms_ = 0;
  // Two pinned copies of every input and label slot: step s reads set s % 2,
  // so step s + 1's samples can be made while step s runs. staged_step_ is
  // the step whose samples were made ahead (run_step's prepare_next).
  std::vector<InputSlot> input_slots_;  // by host_offset
  HostMemory input_sets_;
  int64_t input_set_bytes_ = 0;
  std::optional<uint64_t> staged_step_;
  float lr_;
  bool first_update_ = true;
  bool debug_poison_;
  int copy_delay_ms_;
  DeviceMemory device_;
  bool owns_device_ = true;
  DeviceMemory wide_;  // the casts' float scratch
  HostMemory host_;
  Stream* compute_stream_ = nullptr;
  Stream* h2d_ = nullptr;
  Stream* d2h_ = nullptr;
  Context compute_;
  std::vector<Event*> events_;
  std::vector<Event*> debug_events_;
  // Pinned: a float per round (kEvaluationMetrics in an evaluation), written
  // by read_loss on the compute stream.
  HostMemory round_loss_;
  Timeline timeline_;
  bool measure_next_ = false;
  int64_t peak_arena_end_bytes_ = 0;
  LossScale loss_scale_;
  LossScaleRules loss_scale_rules_;
  bool last_update_skipped_ = false;
  float last_loss_scale_ = 1.0f;
  double clip_norm_ = 0;  // 0: no clipping
  std::optional<double> last_gradient_norm_;
};


// The generated program's main: parses the flags, runs the steps, saves.
// Exit codes: 0 done; 1 an I/O failure (a checkpoint could not be written);
// 2 bad flags or bad input files; 3 a numerical failure (non-finite loss,
// poisoned values under --debug-poison).
int run_program(int argc, char** argv, const ProgramSpec& spec);

}  // namespace mplan::rt
