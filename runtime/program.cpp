// The generated program's fixed code (runtime/program.h): the same on every
// backend, through runtime/device.h only.

#include "runtime/program.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

#include <unistd.h>

#include "runtime/check.h"
#include "runtime/checkpoint.h"
#include "runtime/lr_schedule.h"
#include "runtime/metrics_log.h"
#include "runtime/npy.h"
#include "runtime/poison.h"
#include "runtime/program_ranks.h"

namespace mplan::rt {
namespace {

// SplitMix64's finaliser: the counter-based generator of weights and synthetic data.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// uniform01(seed, stream, a, b) below, in stages: the hash of (seed, stream),
// then of a, then of b. The synthetic data hashes one b per pixel, so it keeps
// the first stages per sample.
uint64_t hash_stream(uint64_t seed, uint64_t stream) {
  return mix64(mix64(seed + 0x9e3779b97f4a7c15ull) ^ (stream * 0xd1b54a32d192ed03ull));
}
uint64_t hash_a(uint64_t stream_hash, uint64_t a) { return mix64(stream_hash ^ (a * 0xabc98388fb8fac03ull)); }
double uniform01_b(uint64_t a_hash, uint64_t b) {
  return static_cast<double>(mix64(a_hash ^ (b * 0x8cb92ba72f3d8dd7ull)) >> 11) * (1.0 / 9007199254740992.0);
}

// A uniform number in [0, 1) from (seed, stream, a, b).
double uniform01(uint64_t seed, uint64_t stream, uint64_t a, uint64_t b) {
  return uniform01_b(hash_a(hash_stream(seed, stream), a), b);
}

// One synthetic sample (docs/generated-program.md, "Synthetic data"): each
// class has its own coarse mean image (a 4x4 grid of cells per channel, each
// uniform in [-1, 1)), each sample adds noise uniform in [-0.5, 0.5), so the
// loss falls within a few steps. The same values as hashing every pixel's
// cell and noise afresh, at one hash per pixel.
void synthetic_sample(const ProgramSpec& spec, uint64_t seed, uint64_t sample, float* x, int32_t* y) {
  *y = static_cast<int32_t>(uniform01(seed, 3, sample, 0) * static_cast<double>(spec.classes));
  const uint64_t class_hash = hash_a(hash_stream(seed, 4), static_cast<uint64_t>(*y));
  const uint64_t noise_hash = hash_a(hash_stream(seed, 2), sample);
  std::vector<double> cell_mean(static_cast<size_t>(spec.input_c) * 16);
  for (size_t cell = 0; cell < cell_mean.size(); ++cell) cell_mean[cell] = 2.0 * uniform01_b(class_hash, cell) - 1.0;
  int64_t e = 0;
  for (int64_t ch = 0; ch < spec.input_c; ++ch)
    for (int64_t h = 0; h < spec.input_h; ++h)
      for (int64_t w = 0; w < spec.input_w; ++w, ++e) {
        const size_t cell = static_cast<size_t>(ch * 16 + h * 4 / spec.input_h * 4 + w * 4 / spec.input_w);
        x[e] = static_cast<float>(cell_mean[cell] + uniform01_b(noise_hash, static_cast<uint64_t>(e)) - 0.5);
      }
}

// Runs fill(i) for i in [0, count) on up to hardware_concurrency threads, one
// per `grain` of `work` at most (a thread costs more than a small input): the
// host's part of a step (making or copying its samples) is on the step's
// critical path, and on a GPU it would otherwise rival the kernels' time.
template <typename Fill>
void parallel_for(int64_t count, int64_t work, int64_t grain, const Fill& fill) {
  const int64_t threads = std::min<int64_t>({count, std::max<int64_t>(1, work / grain),
                                             static_cast<int64_t>(std::max(1u, std::thread::hardware_concurrency()))});
  if (threads <= 1) {
    for (int64_t i = 0; i < count; ++i) fill(i);
    return;
  }
  std::vector<std::thread> workers;
  for (int64_t t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      for (int64_t i = t; i < count; i += threads) fill(i);
    });
  for (std::thread& worker : workers) worker.join();
}

std::string mib(int64_t bytes) {
  char text[64];
  std::snprintf(text, sizeof text, "%.2f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

int64_t input_elements(const ProgramSpec& spec) { return spec.input_c * spec.input_h * spec.input_w; }

std::string precision_of(const ProgramSpec& spec) { return spec.precision != nullptr ? spec.precision : "fp32"; }
bool is_16_bit_program(const ProgramSpec& spec) {
  const std::string p = precision_of(spec);
  return p == "bf16" || p == "fp16";
}

}  // namespace

// ---- the program's state ----------------------------------------------------------------------

Program::Program(const ProgramSpec& spec, uint64_t seed, float lr, bool debug_poison, int copy_delay_ms)
    : spec_(spec), seed_(seed), lr_(lr), debug_poison_(debug_poison), copy_delay_ms_(copy_delay_ms) {
  compute_stream_ = stream_create("compute");
  h2d_ = stream_create("h2d");
  d2h_ = stream_create("d2h");
  compute_.stream = compute_stream_;
  for (int32_t i = 0; i < spec.event_count; ++i) events_.push_back(event_create());
  for (int32_t i = 0; i < spec.debug_event_count; ++i) debug_events_.push_back(event_create());
}

Program::~Program() {
  stream_synchronize(compute_stream_);
  stream_synchronize(h2d_);
  stream_synchronize(d2h_);
  for (Event* e : events_) event_destroy(e);
  for (Event* e : debug_events_) event_destroy(e);
  stream_destroy(compute_stream_);
  stream_destroy(h2d_);
  stream_destroy(d2h_);
  if (device_.base != nullptr && owns_device_) device_free(device_);
  if (wide_.base != nullptr) device_free(wide_);
  if (host_.base != nullptr) host_free(host_);
  if (round_loss_.base != nullptr) host_free(round_loss_);
  if (input_sets_.base != nullptr) host_free(input_sets_);
}

bool Program::allocate(std::string* error, const DeviceMemory* shared) {
  // One device allocation for the whole run (llm.c's single cudaMalloc).
  if (shared != nullptr) {
    MPLAN_RT_CHECK(shared->size_bytes >= static_cast<size_t>(spec_.resident_region_bytes + spec_.arena_bytes),
                   "the shared device memory is smaller than the schedule's");
    device_ = *shared;
    owns_device_ = false;
  } else {
    device_ = device_alloc(static_cast<size_t>(spec_.resident_region_bytes + spec_.arena_bytes), error);
  }
  if (device_.base == nullptr) return false;
  if (collectives_ != nullptr && spec_.data_parallel != nullptr)
    collectives_->bind(*spec_.data_parallel, device_.base, compute_stream_);
  if (spec_.wide_scratch_bytes > 0) {
    wide_ = device_alloc(static_cast<size_t>(spec_.wide_scratch_bytes), error);
    if (wide_.base == nullptr) return false;
  }
  host_ = host_alloc(static_cast<size_t>(std::max<int64_t>(spec_.host_bytes, 1)), error);
  if (host_.base == nullptr) return false;
  // Pinned, so that reading a round's loss does not make the host wait for the GPU.
  round_loss_ = host_alloc(static_cast<size_t>(spec_.rounds * loss_floats()) * sizeof(float), error);
  if (round_loss_.base == nullptr) return false;
  // The input sets: every round's image and label slot, 256-byte aligned, twice.
  input_slots_.clear();
  input_set_bytes_ = 0;
  for (int32_t r = 0; r < spec_.rounds; ++r)
    for (const Region& slot : {spec_.input_slots[r], spec_.label_slots[r]}) {
      input_slots_.push_back({slot.offset, slot.bytes, input_set_bytes_});
      input_set_bytes_ += (slot.bytes + 255) / 256 * 256;
    }
  std::sort(input_slots_.begin(), input_slots_.end(),
            [](const InputSlot& a, const InputSlot& b) { return a.host_offset < b.host_offset; });
  input_sets_ = host_alloc(static_cast<size_t>(std::max<int64_t>(2 * input_set_bytes_, 1)), error);
  if (input_sets_.base == nullptr) return false;
  // A fresh arena is poisoned in debug mode, so a read before any write is
  // caught too. (Otherwise it is left as allocated: the plan writes every
  // buffer before reading it, which the verifier proves.)
  if (debug_poison_) {
    fill_u32_async(device_.base + spec_.resident_region_bytes, kPoisonBits, static_cast<size_t>(spec_.arena_bytes),
                   compute_stream_);
    stream_synchronize(compute_stream_);
  }
  return true;
}

void* Program::host_of_step(int64_t offset, int64_t bytes, uint64_t step) const {
  auto after = std::upper_bound(input_slots_.begin(), input_slots_.end(), offset,
                                [](int64_t at, const InputSlot& slot) { return at < slot.host_offset; });
  if (after != input_slots_.begin()) {
    const InputSlot& slot = *(after - 1);
    if (offset + bytes <= slot.host_offset + slot.bytes)
      return input_sets_.base + static_cast<int64_t>(step % 2) * input_set_bytes_ + slot.set_offset +
             (offset - slot.host_offset);
  }
  return host_.base + offset;
}

void Program::alloc(int64_t offset, int64_t bytes) {
  const int64_t end = offset + (bytes + 255) / 256 * 256 - spec_.resident_region_bytes;
  peak_arena_end_bytes_ = std::max(peak_arena_end_bytes_, end);
}

void Program::copy_delay(Stream* stream) {
  if (copy_delay_ms_ > 0) stream_sleep_async(stream, copy_delay_ms_);
}

void Program::prefetch(int64_t device_offset, int64_t host_offset, int64_t bytes, Stream* stream) {
  copy_delay(stream);
  const size_t span = timeline_.active() ? timeline_.open(Timeline::Kind::h2d, stream, bytes, -1) : 0;
  copy_to_device_async(this->bytes(device_offset), host(host_offset, bytes), static_cast<size_t>(bytes), stream);
  if (timeline_.active()) timeline_.close(span, stream);
}

void Program::offload(int64_t device_offset, int64_t host_offset, int64_t bytes, Stream* stream) {
  copy_delay(stream);
  const size_t span = timeline_.active() ? timeline_.open(Timeline::Kind::d2h, stream, bytes, -1) : 0;
  copy_to_host_async(host(host_offset, bytes), this->bytes(device_offset), static_cast<size_t>(bytes), stream);
  if (timeline_.active()) timeline_.close(span, stream);
}

void Program::move(int64_t to_offset, int64_t from_offset, int64_t bytes, Stream* stream) {
  MPLAN_RT_CHECK(to_offset + bytes <= from_offset || from_offset + bytes <= to_offset,
                 "move: the two ranges overlap");
  copy_on_device_async(this->bytes(to_offset), this->bytes(from_offset), static_cast<size_t>(bytes), stream);
}

void Program::read_loss(int32_t round, int64_t loss_offset) {
  MPLAN_RT_CHECK(round >= 0 && round < spec_.rounds, "read_loss: round out of range");
  const size_t floats = static_cast<size_t>(loss_floats());
  store_to_host_async(round_loss_.base + round * floats * sizeof(float), bytes(loss_offset), floats * sizeof(float),
                      compute_stream_);
}

void Program::poison(Stream* stream, int64_t offset, int64_t bytes) {
  if (debug_poison_) fill_u32_async(this->bytes(offset), kPoisonBits, static_cast<size_t>(bytes), stream);
}

void Program::check_finite(int32_t round, const char* step, std::initializer_list<Output> outputs) {
  if (!debug_poison_) return;
  stream_synchronize(compute_stream_);
  for (const Output& out : outputs) {
    const std::vector<float> values = read_floats(out.offset, out.bytes / storage_bytes(out.type), out.type);
    const size_t at = first_non_finite(values.data(), values.size());
    if (at == values.size()) continue;
    std::fprintf(stderr,
                 "train: error: %s of round %d wrote a value that is not finite into %s (element %zu%s): it read a "
                 "freed, dropped or not yet written buffer, or raced with a copy\n",
                 step, round, out.name, at, is_poison(values[at]) ? ", the poison pattern" : "");
    std::fflush(stderr);
    std::_Exit(3);
  }
}

// The step's samples (runtime/dataset.h, SampleOrder), sample k of the step
// (rounds in order) into its round's slots of set step % 2.
void Program::make_input(uint64_t step, Dataset& data) const {
  const int64_t elements = input_elements(spec_);
  const int64_t sample_count = spec_.batch;
  std::vector<float*> images(static_cast<size_t>(spec_.rounds));
  std::vector<int32_t*> labels(static_cast<size_t>(spec_.rounds));
  for (int32_t r = 0; r < spec_.rounds; ++r) {
    const Region image = spec_.input_slots[r], label = spec_.label_slots[r];
    images[r] = static_cast<float*>(host_of_step(image.offset, image.bytes, step));
    labels[r] = static_cast<int32_t*>(host_of_step(label.offset, label.bytes, step));
  }
  // This rank's samples of the global batch: [rank x B, (rank + 1) x B).
  const int64_t global_batch = spec_.batch * ranks_;
  const int64_t offset = spec_.batch * rank_;
  if (data.count > 0) data.order.prepare(step);
  std::mutex failure_mutex;
  std::string failure;
  parallel_for(sample_count, sample_count * elements, /*grain: pixels per thread=*/int64_t{1} << 20, [&](int64_t k) {
    int32_t r = 0;  // the round of sample k: first_sample is increasing
    while (r + 1 < spec_.rounds && spec_.first_sample[r + 1] <= k) ++r;
    float* x = images[r] + (k - spec_.first_sample[r]) * elements;
    int32_t* y = labels[r] + (k - spec_.first_sample[r]);
    const uint64_t sample = step * static_cast<uint64_t>(global_batch) + static_cast<uint64_t>(offset + k);
    if (data.count > 0) {
      const int64_t at = data.order.index(step, offset + k);
      if (at < 0) {  // an evaluation's padding: zeros, not counted
        std::fill(x, x + elements, 0.0f);
        *y = -1;
        return;
      }
      int64_t used = at;
      std::string error;
      if (!data.read(at, sample, x, &used, &error)) {
        const std::lock_guard<std::mutex> lock(failure_mutex);
        if (failure.empty()) failure = error;
        return;
      }
      *y = data.labels[static_cast<size_t>(used)];
    } else {
      synthetic_sample(spec_, seed_, sample, x, y);
    }
  });
  // A sample that cannot be read stops the run (the checkpoints written so far are whole).
  if (!failure.empty()) {
    // On several ranks: this rank's message, and every rank ends (once the
    // gradient stream has left MPI: one thread calls it at a time).
    if (collectives_ != nullptr) {
      if (spec_.data_parallel != nullptr) collectives_->finish_step();
      collectives_->abort(std::string("error: ") + (spec_.is_evaluation ? "--val" : "--data") + ": " + failure, 2);
    }
    std::fprintf(stderr, "train: error: %s: %s\n", spec_.is_evaluation ? "--val" : "--data", failure.c_str());
    std::fflush(stderr);
    std::exit(2);
  }
}

double Program::run_step(uint64_t step, Dataset& data, bool prepare_next) {
  step_ = step;
  // The step's samples, made now unless the previous step made them while the
  // device ran it (into this step's input set, which that step did not read).
  const auto data_started = std::chrono::steady_clock::now();
  if (staged_step_ != step) make_input(step, data);
  staged_step_.reset();
  last_data_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - data_started).count();
  if (measure_next_) timeline_.begin(compute_stream_);
  measure_next_ = false;
  last_update_skipped_ = false;
  last_loss_scale_ = loss_scale();
  const auto enqueue_started = std::chrono::steady_clock::now();
  spec_.run_iteration(*this);
  last_enqueue_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - enqueue_started).count();
  if (timeline_.active()) timeline_.end(compute_stream_);
  // The next step's samples on the host threads while the device runs this
  // one: making them took 11 ms of ResNet-50's 151 ms step on the H200 when it
  // came before the step's first kernel (docs/gpu-validation.md).
  if (prepare_next) {
    make_input(step + 1, data);
    staged_step_ = step + 1;
  }
  // Bounded: a rank that died or hangs ends the run here, not in a wait forever.
  if (collectives_ != nullptr && spec_.data_parallel != nullptr) collectives_->finish_step();
  stream_synchronize(compute_stream_);
  stream_synchronize(h2d_);
  stream_synchronize(d2h_);
  // SGD's momentum starts at the first update that ran (a step fp16's loss
  // scaling skipped made none).
  if (!last_update_skipped_) first_update_ = false;
  double loss = 0;
  for (int32_t r = 0; r < spec_.rounds; ++r)
    loss += reinterpret_cast<const float*>(round_loss_.base)[r * loss_floats()];
  if (collectives_ != nullptr && !spec_.is_evaluation) sum_over_ranks(*collectives_, &loss, 1, "the step's loss");
  return loss / static_cast<double>(global_batch());
}

void Program::set_collectives(Collectives* collectives) {
  collectives_ = collectives;
  rank_ = collectives != nullptr ? collectives->rank() : 0;
  ranks_ = collectives != nullptr ? collectives->ranks() : 1;
}

EvaluationResult Program::evaluate(Dataset& data) {
  MPLAN_RT_CHECK(spec_.is_evaluation && data.order.evaluation, "evaluate: not an evaluation program and order");
  const auto started = std::chrono::steady_clock::now();
  const int64_t batches = data.order.steps_per_epoch();
  double sums[kEvaluationMetrics] = {0, 0, 0, 0};
  for (int64_t i = 0; i < batches; ++i) {
    run_step(static_cast<uint64_t>(i), data, /*prepare_next=*/i + 1 < batches);
    const auto* metrics = reinterpret_cast<const float*>(round_loss_.base);
    for (int32_t r = 0; r < spec_.rounds; ++r)
      for (int k = 0; k < kEvaluationMetrics; ++k) sums[k] += metrics[r * kEvaluationMetrics + k];
  }
  if (collectives_ != nullptr) sum_over_ranks(*collectives_, sums, kEvaluationMetrics, "the evaluation's metrics");
  EvaluationResult result;
  result.samples = static_cast<int64_t>(sums[3]);
  const double n = std::max(sums[3], 1.0);
  result.loss = sums[0] / n;
  result.top1 = sums[1] / n;
  result.top5 = sums[2] / n;
  result.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  return result;
}

namespace {

// ---- initialisation, data and checkpoints ---------------------------------------------------

// Zeroes the resident region (gradients, optimizer state), then fills every
// tensor: conv and linear weights and biases uniform in +-1/sqrt(fan_in)
// (the bound of PyTorch's default init), batch-norm gamma 1 and beta 0,
// running mean 0 and variance 1.
void init_weights(Program& p) {
  const ProgramSpec& spec = p.spec();
  std::vector<float> resident(static_cast<size_t>(spec.resident_region_bytes / 4), 0.0f);
  for (int32_t t = 0; t < spec.tensor_count; ++t) {
    const WeightTensor& tensor = spec.tensors[t];
    float* values = resident.data() + tensor.offset_bytes / 4;
    const double bound = tensor.fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(tensor.fan_in)) : 0.0;
    for (int64_t i = 0; i < tensor.count; ++i) {
      switch (tensor.init) {
        case Init::zeros: values[i] = 0.0f; break;
        case Init::ones: values[i] = 1.0f; break;
        case Init::uniform_fan_in:
          values[i] = static_cast<float>((2.0 * uniform01(p.seed(), 1, static_cast<uint64_t>(t), static_cast<uint64_t>(i)) -
                                          1.0) * bound);
          break;
      }
    }
  }
  if (!resident.empty()) copy_to_device(p.bytes(0), resident.data(), resident.size() * sizeof(float));
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + (shape.size() == 1 ? ",)" : ")");
}


std::vector<int64_t> tensor_shape(const WeightTensor& t) { return std::vector<int64_t>(t.shape, t.shape + t.rank); }

bool save_weights(Program& p, const std::string& dir, int64_t step, std::string* error) {
  const ProgramSpec& spec = p.spec();
  std::vector<float> resident(static_cast<size_t>(spec.resident_region_bytes / 4));
  if (!resident.empty()) copy_to_host(resident.data(), p.bytes(0), resident.size() * sizeof(float));
  std::vector<CheckpointTensor> tensors;
  for (int32_t t = 0; t < spec.tensor_count; ++t)
    tensors.push_back({spec.tensors[t].file, tensor_shape(spec.tensors[t]),
                       resident.data() + spec.tensors[t].offset_bytes / 4});
  CheckpointMeta meta{step, p.seed(), spec.model_name, spec.model_digest, std::nullopt};
  if (spec.loss_scaling) meta.loss_scale = p.loss_scale_state();
  return checkpoint_save(dir, meta, tensors, error);
}

// Loads the weights and the step; refuses another model's checkpoint, a
// tensor of another shape, and (unless `reseed`) a checkpoint of another seed.
bool load_weights(Program& p, const std::string& dir, bool reseed, int64_t* step, std::string* error) {
  const ProgramSpec& spec = p.spec();
  std::vector<std::string> files;
  for (int32_t t = 0; t < spec.tensor_count; ++t) files.push_back(spec.tensors[t].file);
  LoadedCheckpoint loaded;
  if (!checkpoint_load(dir, files, &loaded, error)) return false;
  if (loaded.recovered)
    std::fprintf(stderr, "train: note: %s: 'latest' was missing or stale (an interrupted save); loading %s\n",
                 dir.c_str(), loaded.folder.c_str());
  if (loaded.has_meta) {
    if (!loaded.meta.model_digest.empty() && loaded.meta.model_digest != spec.model_digest) {
      *error = loaded.folder + ": a checkpoint of model '" + loaded.meta.model_name + "' (digest " +
               loaded.meta.model_digest + "), this program trains '" + spec.model_name + "' (digest " +
               spec.model_digest + ")";
      return false;
    }
    if (loaded.meta.seed != p.seed() && !reseed) {
      *error = loaded.folder + ": written by a run with --seed " + std::to_string(loaded.meta.seed) +
               ", this run has --seed " + std::to_string(p.seed()) +
               ": resuming would change the dropout masks and the synthetic data; pass the same --seed, or "
               "--reseed to resume with the new one on purpose";
      return false;
    }
  }
  std::vector<float> resident(static_cast<size_t>(spec.resident_region_bytes / 4));
  if (!resident.empty()) copy_to_host(resident.data(), p.bytes(0), resident.size() * sizeof(float));
  for (int32_t t = 0; t < spec.tensor_count; ++t) {
    const WeightTensor& tensor = spec.tensors[t];
    auto it = loaded.tensors.find(tensor.file);
    if (it == loaded.tensors.end()) {
      if (tensor.optional) continue;
      *error = loaded.folder + "/" + tensor.file + ".npy: missing";
      return false;
    }
    const NpyArray& array = it->second;
    if (array.type != NpyType::f32 || array.shape != tensor_shape(tensor)) {
      *error = loaded.folder + "/" + tensor.file + ".npy: expected float32 of shape " +
               shape_text(tensor_shape(tensor)) + ", got " + npy_type_name(array.type) +
               " of shape " + shape_text(array.shape);
      return false;
    }
    std::memcpy(resident.data() + tensor.offset_bytes / 4, array.f32(), static_cast<size_t>(tensor.count) * 4);
  }
  if (!resident.empty()) copy_to_device(p.bytes(0), resident.data(), resident.size() * sizeof(float));
  *step = loaded.has_meta ? loaded.meta.step : 0;
  p.set_first_update(*step == 0);
  if (spec.loss_scaling && loaded.has_meta && loaded.meta.loss_scale) p.set_loss_scale_state(*loaded.meta.loss_scale);
  return true;
}

// ---- flags ----------------------------------------------------------------------------------

struct Flags {
  int64_t steps = 10;
  bool steps_given = false;
  int64_t epochs = 0;  // --epochs E: train until epoch E ends (0: --steps)
  bool shuffle = false;
  std::vector<float> mean, std;  // --mean, --std: per channel
  std::optional<Augment> augment;  // --augment
  double clip_norm = 0;            // --clip-grad-norm
  std::string augment_text;
  uint64_t seed = 1;
  float lr = 0;
  bool lr_given = false;
  std::optional<LrSchedule> lr_schedule;  // --lr-schedule (runtime/lr_schedule.h)
  std::string data, save, load;
  int64_t resize = 0;        // --resize S: image files' shorter side before the centre crop
  bool skip_corrupt = false;  // --skip-corrupt: image files that do not decode are replaced and counted
  std::string val;         // --val DIR: evaluated after the last step (and every --eval-every N)
  int64_t eval_every = 0;
  bool eval_only = false;  // --eval: evaluate the weights (--load) and stop
  int64_t checkpoint_every = 0;
  bool debug_poison = false;
  bool reseed = false;
  int copy_delay_ms = 0;
  std::string timeline;  // --timeline FILE: measure the last step's copies and waits
  std::string log;       // --log FILE: the metrics as JSON lines (runtime/metrics_log.h)
  // fp16's loss scaling (runtime/loss_scale.h): --loss-scale, --loss-scale-growth-interval.
  std::optional<float> loss_scale;
  int32_t growth_interval = LossScaleRules{}.growth_interval;
  bool growth_interval_given = false;
  // Several ranks: the limit of every wait for the other ranks.
  std::optional<double> collective_timeout_s;
};

// The flags that shape the training, which every rank must share (not the
// files a rank writes or reads its data from, which may differ between nodes).
std::string run_digest_text(int argc, char** argv) {
  std::string text;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    text += flag + " ";
    if ((flag == "--data" || flag == "--val" || flag == "--log" || flag == "--timeline") && i + 1 < argc) ++i;
  }
  return text;
}

[[noreturn]] void flag_error(const std::string& message) {
  std::fprintf(stderr, "train: error: %s (see --help)\n", message.c_str());
  std::exit(2);
}

// --skip-corrupt: how many image files were replaced, and the first.
void report_skipped(const Dataset& data, const char* flag) {
  const std::lock_guard<std::mutex> lock(data.skipped->mutex);
  if (data.skipped->samples.empty()) return;
  std::printf("%s: skipped %zu image file(s) that did not decode, each replaced by the next readable sample in file "
              "order; the first: %s\n",
              flag, data.skipped->samples.size(), data.skipped->first.c_str());
}

// What a data set holds, for the run's header line.
std::string source_text(const Dataset& data) {
  if (data.files)
    return std::string(data.shards ? "image shards" : "image files") + " in " +
           std::to_string(data.classes.size()) + " classes, decoded to " + std::to_string(data.channels) +
           " channel(s), " + (data.augment.random_resized_crop ? "random-resized crops" : "resized and centre-cropped");
  return std::string(npy_type_name(data.images->type())) + (data.channels_last ? " NHWC" : "");
}

// How the data's epochs run, for the run's header line.
std::string fmt_epochs(const SampleOrder& order, bool shuffle) {
  const int64_t left_out = order.count % order.batch;
  return std::string(shuffle ? ", shuffled" : ", in file order") + " per epoch of " +
         std::to_string(order.steps_per_epoch()) + " steps" +
         (left_out > 0 ? ", the last " + std::to_string(left_out) + " samples of each epoch's order left out" : "");
}

// "2h 03m", "4m 05s", "12s": the time a run has left.
std::string duration_text(double ms) {
  const auto s = static_cast<int64_t>(ms / 1000.0 + 0.5);
  char text[64];
  if (s >= 3600) std::snprintf(text, sizeof text, "%" PRId64 "h %02" PRId64 "m", s / 3600, s / 60 % 60);
  else if (s >= 60) std::snprintf(text, sizeof text, "%" PRId64 "m %02" PRId64 "s", s / 60, s % 60);
  else std::snprintf(text, sizeof text, "%" PRId64 "s", s);
  return text;
}

// A comma-separated list of finite numbers (--mean, --std).
std::vector<float> parse_floats(const std::string& flag, const char* text, bool positive) {
  std::vector<float> values;
  const std::string all = text;
  size_t at = 0;
  while (true) {
    const size_t comma = all.find(',', at);
    const std::string item = all.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    char* end = nullptr;
    errno = 0;
    const float v = std::strtof(item.c_str(), &end);
    if (item.empty() || errno != 0 || *end != '\0' || !std::isfinite(v) || (positive && !(v > 0)))
      flag_error(flag + ": expected " + (positive ? "numbers > 0" : "finite numbers") +
                 " separated by commas, one per channel, got '" + all + "'");
    values.push_back(v);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return values;
}

int64_t parse_int(const std::string& flag, const char* text, int64_t min, int64_t max) {
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < min || value > max)
    flag_error(flag + ": expected an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "], got '" +
               text + "'");
  return value;
}

// --timeline FILE can be written: it is not a folder or another kind of
// file, and its folder takes a new file (probed with a name of its own, so
// that nothing of the user's is touched).
bool timeline_target_ok(const std::string& path, std::string* error) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (fs::exists(status) && !fs::is_regular_file(status)) {
    *error = path + ": is " + (fs::is_directory(status) ? "a folder" : "not a regular file") +
             "; give the name of the file to write";
    return false;
  }
  if (!path.empty() && path.back() == '/') {
    *error = path + ": names a folder; give the name of the file to write";
    return false;
  }
  std::string probe = timeline_temporary_name(path);
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) {
    *error = path + ": cannot be written (" + std::strerror(errno) + ")";
    return false;
  }
  ::close(fd);
  fs::remove(probe, ec);
  return true;
}

Flags parse_flags(int argc, char** argv, const ProgramSpec& spec) {
  Flags flags;
  flags.lr = spec.default_lr;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) flag_error(flag + ": expected a value");
      return argv[++i];
    };
    if (flag == "--help" || flag == "-h") {
      std::printf(
          "usage: train [--steps N] [--seed S] [--lr LR] [--data DIR] [--save DIR] [--load DIR] [--reseed]\n"
          "             [--checkpoint-every N] [--timeline FILE] [--debug-poison] [--debug-copy-delay-ms MS]\n"
          "             [--lr-schedule KIND[,key=value...]] [--epochs E] [--shuffle] [--mean M,...] [--std S,...]\n"
          "             [--augment crop=PADDING,flip] [--log FILE] [--clip-grad-norm MAX]\n"
          "             [--val DIR [--eval-every N] [--eval]] [--resize S] [--skip-corrupt]\n"
          "             [--loss-scale S] [--loss-scale-growth-interval N]  (fp16 programs)\n"
          "             [--collective-timeout SECONDS]  (programs of several ranks, under mpirun)\n"
          "Trains %s by the plan compiled into it (target %s); see docs/generated-program.md.\n",
          spec.model_name, spec.target);
      std::exit(0);
    } else if (flag == "--steps") {
      flags.steps = parse_int(flag, value(), 0, std::numeric_limits<int32_t>::max());
      flags.steps_given = true;
    } else if (flag == "--epochs") {
      flags.epochs = parse_int(flag, value(), 1, std::numeric_limits<int32_t>::max());
    } else if (flag == "--shuffle") {
      flags.shuffle = true;
    } else if (flag == "--augment") {
      std::string error;
      flags.augment_text = value();
      flags.augment = parse_augment(flags.augment_text, &error);
      if (!flags.augment) flag_error("--augment " + error);
    } else if (flag == "--mean") {
      flags.mean = parse_floats(flag, value(), false);
    } else if (flag == "--std") {
      flags.std = parse_floats(flag, value(), true);
    } else if (flag == "--seed") {
      flags.seed = static_cast<uint64_t>(parse_int(flag, value(), 0, std::numeric_limits<int64_t>::max()));
    } else if (flag == "--lr") {
      const char* text = value();
      char* end = nullptr;
      errno = 0;
      flags.lr = std::strtof(text, &end);
      if (errno != 0 || end == text || *end != '\0' || !std::isfinite(flags.lr) || !(flags.lr >= 0))
        flag_error("--lr: expected a finite number >= 0, got '" + std::string(text) + "'");
    } else if (flag == "--lr-schedule") {
      std::string error;
      flags.lr_schedule = parse_lr_schedule(value(), &error);
      if (!flags.lr_schedule) flag_error("--lr-schedule " + error);
    } else if (flag == "--clip-grad-norm") {
      const char* text = value();
      char* end = nullptr;
      errno = 0;
      flags.clip_norm = std::strtod(text, &end);
      if (errno != 0 || end == text || *end != '\0' || !std::isfinite(flags.clip_norm) || !(flags.clip_norm > 0))
        flag_error("--clip-grad-norm: expected a finite number > 0, got '" + std::string(text) + "'");
    } else if (flag == "--data") {
      flags.data = value();
    } else if (flag == "--resize") {
      flags.resize = parse_int(flag, value(), 1, 1 << 16);
    } else if (flag == "--skip-corrupt") {
      flags.skip_corrupt = true;
    } else if (flag == "--val") {
      flags.val = value();
      if (flags.val.empty()) flag_error("--val: expected a folder");
    } else if (flag == "--eval-every") {
      flags.eval_every = parse_int(flag, value(), 1, std::numeric_limits<int32_t>::max());
    } else if (flag == "--eval") {
      flags.eval_only = true;
    } else if (flag == "--save") {
      flags.save = normalize_checkpoint_path(value());
    } else if (flag == "--load") {
      flags.load = normalize_checkpoint_path(value());
    } else if (flag == "--reseed") {
      flags.reseed = true;
    } else if (flag == "--checkpoint-every") {
      flags.checkpoint_every = parse_int(flag, value(), 0, std::numeric_limits<int32_t>::max());
    } else if (flag == "--log") {
      flags.log = value();
      if (flags.log.empty()) flag_error("--log: expected a file name");
    } else if (flag == "--timeline") {
      flags.timeline = value();
      if (flags.timeline.empty()) flag_error("--timeline: expected a file name");
    } else if (flag == "--loss-scale") {
      const char* text = value();
      char* end = nullptr;
      errno = 0;
      const float scale = std::strtof(text, &end);
      if (errno != 0 || end == text || *end != '\0' || !std::isfinite(scale) || !(scale > 0))
        flag_error("--loss-scale: expected a finite number > 0, got '" + std::string(text) + "'");
      flags.loss_scale = scale;
    } else if (flag == "--loss-scale-growth-interval") {
      flags.growth_interval = static_cast<int32_t>(parse_int(flag, value(), 1, std::numeric_limits<int32_t>::max()));
      flags.growth_interval_given = true;
    } else if (flag == "--collective-timeout") {
      const char* text = value();
      char* end = nullptr;
      errno = 0;
      const double seconds = std::strtod(text, &end);
      if (errno != 0 || end == text || *end != '\0' || !std::isfinite(seconds) || !(seconds > 0) || seconds > 86400)
        flag_error("--collective-timeout: expected a number of seconds in (0, 86400], got '" + std::string(text) + "'");
      flags.collective_timeout_s = seconds;
    } else if (flag == "--debug-poison") {
      flags.debug_poison = true;
    } else if (flag == "--debug-copy-delay-ms") {
      flags.copy_delay_ms = static_cast<int>(parse_int(flag, value(), 0, 60000));
    } else {
      flag_error("unknown flag '" + flag + "'");
    }
  }
  if (flags.checkpoint_every > 0 && flags.save.empty()) flag_error("--checkpoint-every: needs --save DIR");
  if (flags.eval_every > 0 && flags.val.empty()) flag_error("--eval-every: needs --val DIR");
  if (flags.eval_only && flags.val.empty()) flag_error("--eval: needs --val DIR (the data to evaluate on)");
  if (flags.eval_only && (flags.steps_given || flags.epochs > 0 || !flags.save.empty()))
    flag_error(std::string("--eval: evaluates and stops; ") +
               (flags.save.empty() ? "--steps and --epochs train" : "--save has nothing new to save"));
  if (!flags.val.empty() && spec.evaluation == nullptr)
    flag_error("--val: this program was generated without an evaluation schedule; regenerate it with `mplan "
               "compile`");
  if (flags.epochs > 0 && flags.steps_given) flag_error("--epochs: give --epochs or --steps, not both");
  for (const char* flag : {"--epochs", "--shuffle", "--mean", "--std", "--augment"}) {
    const bool given = std::strcmp(flag, "--epochs") == 0    ? flags.epochs > 0
                       : std::strcmp(flag, "--shuffle") == 0 ? flags.shuffle
                       : std::strcmp(flag, "--mean") == 0   ? !flags.mean.empty()
                       : std::strcmp(flag, "--std") == 0    ? !flags.std.empty()
                                                             : flags.augment.has_value();
    // --mean and --std normalise the --val data too.
    const bool normalises = std::strcmp(flag, "--mean") == 0 || std::strcmp(flag, "--std") == 0;
    if (given && flags.data.empty() && !(normalises && !flags.val.empty()))
      flag_error(std::string(flag) + ": needs --data DIR (synthetic data has no epochs)");
  }
  if (flags.mean.empty() != flags.std.empty())
    flag_error(flags.mean.empty() ? "--std: needs --mean" : "--mean: needs --std");
  if (flags.reseed && flags.load.empty()) flag_error("--reseed: needs --load DIR");
  if (!flags.timeline.empty() && flags.steps == 0) flag_error("--timeline: needs at least one step");
  if (flags.collective_timeout_s && spec.data_parallel == nullptr)
    flag_error("--collective-timeout: only a program of several ranks waits for other ranks; this one has one");
  if ((flags.loss_scale || flags.growth_interval_given) && !spec.loss_scaling)
    flag_error(std::string(flags.loss_scale ? "--loss-scale" : "--loss-scale-growth-interval") +
               ": only an fp16 program scales its loss; this one is " + precision_of(spec));
  return flags;
}

// "text %s" with its arguments, as a string.
std::string text_of(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string text_of(const char* format, ...) {
  char text[2048];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  return text;
}

// A checkpoint: on several ranks rank 0 writes it, with every rank's running
// statistics made rank 0's first, and the other ranks wait for it.
// Every rank must hold the same weights (the sums are the same bits on every
// rank): the ranks compare a hash of their checkpoint's tensors first.
bool save_checkpoint(Program& p, const std::string& dir, int64_t step, std::string* error) {
  Collectives* collectives = p.collectives();
  if (collectives == nullptr) return save_weights(p, dir, step, error);
  broadcast_running_statistics(p);
  const ProgramSpec& spec = p.spec();
  std::vector<float> resident(static_cast<size_t>(spec.resident_region_bytes / 4));
  if (!resident.empty()) copy_to_host(resident.data(), p.bytes(0), resident.size() * sizeof(float));
  std::string bytes;
  for (int32_t t = 0; t < spec.tensor_count; ++t)
    bytes.append(reinterpret_cast<const char*>(resident.data() + spec.tensors[t].offset_bytes / 4),
                 static_cast<size_t>(spec.tensors[t].count) * sizeof(float));
  const uint64_t mine = fnv1a(bytes);
  std::vector<uint64_t> all(static_cast<size_t>(collectives->ranks()));
  collectives->exchange(&mine, sizeof mine, all.data(), "the ranks' comparison of their weights");
  for (int32_t q = 1; q < collectives->ranks(); ++q)
    if (all[static_cast<size_t>(q)] != all[0]) {
      *error = text_of("rank %d's weights differ from rank 0's before the save of step %" PRId64
                       " (the ranks' gradient sums disagree); nothing was saved",
                       q, step);
      return false;
    }
  const bool ok = collectives->rank() != 0 || save_weights(p, dir, step, error);
  return rank_0_saved(*collectives, ok, error);
}

// The run on one rank of `collectives` (null: the only one).
int run_training(int argc, char** argv, const ProgramSpec& spec, Collectives* collectives) {
  Flags flags = parse_flags(argc, argv, spec);
  // Several ranks: rank 0 alone prints the run's lines and writes the log,
  // the timeline and the checkpoints; every rank prints its errors.
  const bool leader = collectives == nullptr || collectives->rank() == 0;
  RankStartup startup;
  if (collectives != nullptr) {
    if (flags.collective_timeout_s) collectives->set_timeout_s(*flags.collective_timeout_s);
    startup.run_digest = fnv1a(run_digest_text(argc, argv));
    if (!leader) {
      flags.log.clear();
      flags.timeline.clear();
      if (std::freopen("/dev/null", "w", stdout) == nullptr) std::fclose(stdout);
    }
  }
  // A failure before the ranks agree to start: on several ranks, every rank
  // says which rank failed and why, and all exit with its code.
  auto fail = [&](const std::string& message, int code) {
    if (collectives == nullptr) {
      std::fprintf(stderr, "train: error: %s\n", message.c_str());
      return code;
    }
    startup.status = code;
    startup.message = message;
    return agree_to_start(*collectives, spec, startup);
  };
  std::string target_error;
  if (leader && !flags.save.empty() && !checkpoint_target_ok(flags.save, &target_error))
    return fail("--save: " + target_error, 2);
  if (!flags.timeline.empty() && !timeline_target_ok(flags.timeline, &target_error))
    return fail("--timeline: " + target_error, 2);
  MetricsLog log;
  if (!flags.log.empty() && !log.open(flags.log, &target_error)) return fail("--log: " + target_error, 2);
  // The arithmetic the plan was priced in (runtime/device.h), before any op.
  std::string math_error;
  if (std::strcmp(spec.math_mode, "as recorded") == 0)
    std::fprintf(stderr, "train: note: the plan's profile does not say which math its times are in (a profile.json "
                         "from before its \"math\" field); computing in %s\n",
                 math_mode().c_str());
  else if (!set_math_mode(spec.math_mode, &math_error))
    std::fprintf(stderr, "train: note: the plan was priced in %s math, but %s; the times will differ from the plan's\n",
                 spec.math_mode, math_error.c_str());
  Program p(spec, flags.seed, flags.lr, flags.debug_poison, flags.copy_delay_ms);
  p.set_collectives(collectives);
  std::string error;
  if (!p.allocate(&error)) return fail(error, 1);
  init_weights(p);
  if (spec.loss_scaling) {
    LossScaleRules rules;
    if (flags.loss_scale) rules.initial_scale = *flags.loss_scale;
    rules.growth_interval = flags.growth_interval;
    p.set_loss_scale_rules(rules);
    p.set_loss_scale_state(LossScale{rules.initial_scale, 0});
  }
  int64_t step = 0;
  // An evaluation alone draws nothing from the seed: any checkpoint's weights will do.
  if (!flags.load.empty() && !load_weights(p, flags.load, flags.reseed || flags.eval_only, &step, &error))
    return fail("--load: " + error, 2);
  // --loss-scale starts the scale afresh, even over a checkpoint's.
  if (spec.loss_scaling && flags.loss_scale) p.set_loss_scale_state(LossScale{*flags.loss_scale, 0});
  p.make_weight_copies();
  p.set_clip_norm(flags.clip_norm);
  Dataset data;
  if (!flags.data.empty() && !load_dataset(flags.data, spec.input_c, spec.input_h, spec.input_w, spec.classes,
                                           flags.mean, flags.std, &data, &error))
    return fail("--data: " + error, 2);
  data.resize = flags.resize;
  data.skip_corrupt = flags.skip_corrupt;
  // The evaluation: its own schedule on the same device memory (ProgramSpec::evaluation).
  Dataset val;
  std::optional<Program> evaluator;
  if (!flags.val.empty()) {
    const ProgramSpec& eval_spec = *spec.evaluation;
    if (!load_dataset(flags.val, spec.input_c, spec.input_h, spec.input_w, static_cast<int32_t>(spec.classes),
                      flags.mean, flags.std, &val, &error))
      return fail("--val: " + error, 2);
    val.order.count = val.count;
    val.order.batch = eval_spec.batch * p.ranks();  // the global evaluation batch
    val.order.evaluation = true;
    val.resize = flags.resize;
    val.skip_corrupt = flags.skip_corrupt;
    evaluator.emplace(eval_spec, flags.seed, flags.lr, flags.debug_poison, flags.copy_delay_ms);
    evaluator->set_collectives(collectives);
    if (!evaluator->allocate(&error, &p.device())) return fail("the evaluation: " + error, 1);
  }
  // Evaluates after `done` updates: prints the val: line and logs it; false
  // when the loss is not finite.
  auto evaluate = [&](int64_t done, int64_t epoch) {
    broadcast_running_statistics(p);  // several ranks: every rank evaluates with rank 0's
    const EvaluationResult r = evaluator->evaluate(val);
    std::printf("val: loss %.4f top1 %.2f%% top5 %.2f%% (%" PRId64 " samples after step %" PRId64 ", %.1f ms)\n",
                r.loss, 100.0 * r.top1, 100.0 * r.top5, r.samples, done, r.ms);
    std::fflush(stdout);
    if (log.is_open()) log.write(ValidationMetrics{done, epoch, r.loss, r.top1, r.top5, r.samples});
    if (std::isfinite(r.loss)) return true;
    std::fprintf(stderr, "train: error: the validation loss is not finite after step %" PRId64 "\n", done);
    return false;
  };
  // Image-file options need image files; both folders must name the same classes.
  const bool any_files = data.files || val.files;
  for (const auto& [given, flag] : {std::pair{flags.resize > 0, "--resize"}, {flags.skip_corrupt, "--skip-corrupt"},
                                    {flags.augment && flags.augment->random_resized_crop, "--augment rrc"}}) {
    const bool needs_training_files = std::strcmp(flag, "--augment rrc") == 0;
    if (given && (needs_training_files ? !data.files : !any_files))
      return fail(text_of("%s: applies to image files (a folder of JPEG or PNG files, or shards); %s", flag,
                          needs_training_files ? "--data is not one" : "neither --data nor --val is"),
                  2);
  }
  if (data.files && val.files && data.classes != val.classes) {
    size_t k = 0;
    while (k < data.classes.size() && k < val.classes.size() && data.classes[k] == val.classes[k]) ++k;
    return fail(text_of("--val: %s's classes differ from --data's: class %zu is '%s' there, '%s' in %s",
                        flags.val.c_str(), k, k < val.classes.size() ? val.classes[k].c_str() : "(none)",
                        k < data.classes.size() ? data.classes[k].c_str() : "(none)", flags.data.c_str()),
                2);
  }
  // Several ranks: every rank has started, runs the same plan with the same
  // flags and reads the same data, or every rank ends here.
  if (collectives != nullptr) {
    startup.data_samples = data.count;
    startup.val_samples = val.count;
    if (const int code = agree_to_start(*collectives, spec, startup); code != 0) return code;
  }
  if (flags.eval_only) {
    std::printf("%s: evaluating %s (%" PRId64 " samples, batch %" PRId64 " in %d sub-batch(es)) with the weights "
                "of %s\n",
                spec.model_name, flags.val.c_str(), val.count, spec.evaluation->batch, spec.evaluation->rounds,
                flags.load.empty() ? "the initialisation (no --load)" : flags.load.c_str());
    if (!evaluate(step, 0)) return 3;
    report_skipped(val, "--val");
    if (log.error().empty()) return 0;
    std::fprintf(stderr, "train: error: --log: %s\n", log.error().c_str());
    return 1;
  }
  int64_t steps = flags.steps;
  std::string data_text = "synthetic data";
  if (data.count > 0) {
    data.order.count = data.count;
    data.order.batch = p.global_batch();
    data.order.epochs = flags.epochs > 0 || flags.shuffle;
    data.order.shuffle = flags.shuffle;
    data.order.seed = flags.seed;
    data.seed = flags.seed;
    if (flags.augment) data.augment = *flags.augment;
    data_text = "data " + flags.data + " (" + std::to_string(data.count) + " samples, " + source_text(data) +
                (data.augment.any() ? ", augmented " + flags.augment_text : std::string()) +
                (data.mean.empty() ? "" : ", normalised") + ")";
    if (data.order.epochs) {
      const int64_t per_epoch = data.order.steps_per_epoch();
      if (per_epoch < 1) {
        std::fprintf(stderr,
                     "train: error: %s: the data set %s has %" PRId64 " samples, fewer than the batch of %" PRId64
                     "; an epoch would have no step\n",
                     flags.shuffle ? "--shuffle" : "--epochs", flags.data.c_str(), data.count, p.global_batch());
        return 2;
      }
      // --epochs E: the run ends where epoch E does, a resumed run included.
      if (flags.epochs > 0) steps = std::max<int64_t>(0, flags.epochs * per_epoch - step);
      data_text += fmt_epochs(data.order, flags.shuffle);
    }
  }
  // A schedule that ends (cosine, onecycle) must span the run's updates, as
  // PyTorch's OneCycleLR refuses a step past its total_steps.
  if (flags.lr_schedule && flags.lr_schedule->steps > 0 && step + steps > flags.lr_schedule->steps) {
    std::fprintf(stderr,
                 "train: error: --lr-schedule: steps=%" PRId64 " ends before the run's last update (%" PRId64
                 "%s); give steps= of at least %" PRId64 "\n",
                 flags.lr_schedule->steps, step + steps,
                 step > 0 ? (" = " + std::to_string(step) + " loaded + " + std::to_string(steps)).c_str() : "",
                 step + steps);
    return 2;
  }
  const BackendInfo backend = backend_info();
  const std::string batch_text =
      collectives == nullptr
          ? text_of("batch %" PRId64 " in %d sub-batch(es)", spec.batch, spec.rounds)
          : text_of("batch %" PRId64 " on %d ranks (%" PRId64 " each, in %d sub-batch(es))", p.global_batch(),
                    p.ranks(), spec.batch, spec.rounds);
  std::printf("%s: %s, budget %s, %s; %s backend (%s), math %s%s%s\n", spec.model_name, batch_text.c_str(),
              mib(spec.budget_bytes).c_str(), data_text.c_str(),
              backend.backend.c_str(), backend.device.c_str(), math_mode().c_str(),
              is_16_bit_program(spec) ? ", precision " : "", is_16_bit_program(spec) ? spec.precision : "");
  if (flags.lr_schedule)
    std::printf("lr schedule: %s from lr %g (update %" PRId64 " on)\n", lr_schedule_text(*flags.lr_schedule).c_str(),
                static_cast<double>(flags.lr), step + 1);
  double total_ms = 0, data_ms = 0, enqueue_ms = 0;
  std::string timeline_error;
  int64_t timed_steps = 0;
  for (int64_t i = 0; i < steps; ++i, ++step) {
    const auto started = std::chrono::steady_clock::now();
    const bool last = i + 1 == steps;
    // The step before the last measures too (not reported), so that the
    // last one's events exist before it is enqueued.
    if (!flags.timeline.empty() && i + 2 >= steps) p.measure_next_step();
    if (flags.lr_schedule) p.set_lr(static_cast<float>(lr_at(*flags.lr_schedule, flags.lr, step)));
    const double loss = p.run_step(static_cast<uint64_t>(step), data, /*prepare_next=*/!last);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
    std::printf("step %" PRId64 ": loss %.6f, %.2f ms, %.1f samples/s", step + 1, loss, ms,
                static_cast<double>(p.global_batch()) * 1000.0 / ms);
    if (flags.lr_schedule) std::printf(", lr %.6g", static_cast<double>(p.lr()));
    if (p.last_gradient_norm())
      std::printf(", gradient norm %.6g%s", *p.last_gradient_norm(),
                  *p.last_gradient_norm() + 1e-6 > flags.clip_norm ? " (clipped)" : "");
    if (data.order.epochs) {
      const int64_t per_epoch = data.order.steps_per_epoch();
      std::printf(", epoch %" PRId64 " (step %" PRId64 " of %" PRId64 ")", step / per_epoch + 1, step % per_epoch + 1,
                  per_epoch);
      if (flags.epochs > 0 && timed_steps > 0 && !last)
        std::printf(", %s left", duration_text(total_ms / static_cast<double>(timed_steps) *
                                               static_cast<double>(steps - i - 1)).c_str());
    }
    if (spec.loss_scaling)
      std::printf(", loss scale %g%s", static_cast<double>(p.last_loss_scale()),
                  p.last_update_skipped() ? ": a gradient was not finite, update skipped, scale halved" : "");
    std::printf("\n");
    std::fflush(stdout);
    if (log.is_open()) {
      StepMetrics m;
      m.step = step + 1;
      m.epoch = data.order.epochs ? step / data.order.steps_per_epoch() + 1 : 0;
      m.loss = loss;
      m.lr = p.lr();
      m.ms = ms;
      m.samples_per_s = static_cast<double>(p.global_batch()) * 1000.0 / ms;
      if (spec.loss_scaling) m.loss_scale = p.last_loss_scale();
      m.update_skipped = spec.loss_scaling && p.last_update_skipped();
      m.gradient_norm = p.last_gradient_norm();
      log.write(m);
    }
    if (!std::isfinite(loss)) {
      std::fprintf(stderr, "train: error: the loss is not finite at step %" PRId64 "%s\n", step + 1,
                   flags.debug_poison ? " (debug poison: a step read a freed, dropped or not yet written buffer)" : "");
      return 3;
    }
    if (last && !flags.timeline.empty()) {
      const std::vector<Timeline::Span> spans = p.timeline_spans();
      std::fputs(timeline_summary(spans, ms, p.timeline_compute_ms(),
                                  TimelinePlan{spec.plan_simulated_ms, spec.plan_stall_ms})
                     .c_str(),
                 stdout);
      // A timeline that cannot be written costs no weights: the run goes on
      // to its saves and exits 1 at the end.
      if (write_timeline_csv(flags.timeline, spans, &timeline_error))
        std::printf("timeline: step %" PRId64 " written to %s\n", step + 1, flags.timeline.c_str());
      else
        std::fprintf(stderr, "train: error: --timeline: %s (the weights are still saved)\n", timeline_error.c_str());
    }
    if (i > 0 || steps == 1) {
      total_ms += ms;
      data_ms += p.last_data_ms();
      enqueue_ms += p.last_enqueue_ms();
      ++timed_steps;
    }
    if (flags.checkpoint_every > 0 && (step + 1) % flags.checkpoint_every == 0 &&
        !save_checkpoint(p, flags.save, step + 1, &error)) {
      std::fprintf(stderr, "train: error: --checkpoint-every: %s\n", error.c_str());
      return 1;
    }
    // --eval-every N, and always after the last step.
    if (evaluator && (last || (flags.eval_every > 0 && (step + 1) % flags.eval_every == 0)) &&
        !evaluate(step + 1, data.order.epochs ? step / data.order.steps_per_epoch() + 1 : 0))
      return 3;
  }
  if (evaluator && steps == 0 && !evaluate(step, 0)) return 3;
  report_skipped(data, "--data");
  report_skipped(val, "--val");
  if (timed_steps > 0)
    std::printf("mean step time: %.2f ms, throughput %.1f samples/s (%" PRId64
                " step(s), the first left out); of it the input on the host: %.2f ms; the host enqueued the "
                "step's work in %.2f ms\n",
                total_ms / timed_steps, static_cast<double>(p.global_batch()) * 1000.0 * timed_steps / total_ms,
                timed_steps,
                data_ms / timed_steps, enqueue_ms / timed_steps);
  std::printf("peak arena: %s of arena %s; device memory %s (resident %s + peak arena) of budget %s\n",
              mib(p.peak_arena_bytes()).c_str(), mib(spec.arena_bytes).c_str(),
              mib(spec.resident_region_bytes + p.peak_arena_bytes()).c_str(), mib(spec.resident_region_bytes).c_str(),
              mib(spec.budget_bytes).c_str());
  if (flags.debug_poison) {
    std::vector<float> resident(static_cast<size_t>(spec.resident_region_bytes / 4));
    if (!resident.empty()) copy_to_host(resident.data(), p.bytes(0), resident.size() * sizeof(float));
    for (int32_t t = 0; t < spec.tensor_count; ++t)
      if (count_poison(resident.data() + spec.tensors[t].offset_bytes / 4, static_cast<size_t>(spec.tensors[t].count)) >
          0) {
        std::fprintf(stderr, "train: error: tensor %s holds poisoned values: a step used a freed buffer\n",
                     spec.tensors[t].file);
        return 3;
      }
  }
  if (!flags.save.empty()) {
    if (!save_checkpoint(p, flags.save, step, &error)) {
      std::fprintf(stderr, "train: error: --save: %s\n", error.c_str());
      return 1;
    }
    std::printf("saved weights to %s/latest\n", flags.save.c_str());
  }
  if (!log.error().empty())
    std::fprintf(stderr, "train: error: --log: %s (the weights are saved)\n", log.error().c_str());
  return timeline_error.empty() && log.error().empty() ? 0 : 1;
}

}  // namespace

int run_program(int argc, char** argv, const ProgramSpec& spec) {
  bool help = false;
  for (int i = 1; i < argc; ++i) help |= std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0;
  if (spec.data_parallel == nullptr || help) return run_training(argc, argv, spec, nullptr);
  // Several ranks (runtime/collectives.h): MPI first, which may take its own arguments out of argv.
  std::string error;
  std::unique_ptr<Collectives> collectives = spec.data_parallel->make_collectives(&argc, &argv, &error);
  if (collectives == nullptr) {
    std::fprintf(stderr, "train: error: %s\n", error.c_str());
    return 2;
  }
  if (collectives->ranks() != spec.data_parallel->ranks) {
    std::fprintf(stderr,
                 "train: rank %d: error: this program's plan is for %d ranks, but mpirun started %d; start it with "
                 "mpirun -np %d, or compile a plan for %d\n",
                 collectives->rank(), spec.data_parallel->ranks, collectives->ranks(), spec.data_parallel->ranks,
                 collectives->ranks());
    collectives->finalize();
    return 2;
  }
  // A rank whose plan differs from rank 0's runs its own schedule (each with the same digest of the plans).
  const ProgramSpec& mine =
      spec.data_parallel->spec_of_rank != nullptr ? *spec.data_parallel->spec_of_rank(collectives->rank()) : spec;
  const int code = run_training(argc, argv, mine, collectives.get());
  collectives->finalize();
  return code;
}

}  // namespace mplan::rt
