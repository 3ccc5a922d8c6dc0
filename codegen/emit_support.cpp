// The fixed text of every generated program (docs/generated-program.md says
// what its flags do and how weights are stored).

#include "codegen/emit_support.h"

namespace mplan::codegen {

std::string support_types() {
  return R"CPP(#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/runtime.h"

namespace {

using namespace mplan::rt;

// A byte range of the device allocation (resident region, then the arena) or
// of the host buffer.
struct Region {
  size_t offset;
  size_t bytes;
};

// How a tensor starts (docs/generated-program.md, "Initialisation").
enum class Init { zeros, ones, uniform_fan_in };

// One tensor of the weights file format: a slice of a resident block.
struct Tensor {
  const char* file;     // <file>.npy under --save / --load (a sanitised name)
  size_t offset;        // bytes from the start of the device allocation
  int64_t count;        // floats
  int rank;
  int64_t shape[4];
  Init init;
  int64_t fan_in;       // uniform_fan_in: bound 1/sqrt(fan_in)
  bool optional;        // may be absent from --load (then it starts as initialised)
};
)CPP";
}

std::string support_helpers() {
  return R"CPP(
// Everything a step touches; no globals (llm.c keeps its state in structs too).
struct Context {
  Arena arena{};
  HostBuffer host{};
  Stream compute{"compute"};
  Stream h2d{"h2d"};
  Stream d2h{"d2h"};
  Stream& copy = h2d;  // the one shared copy stream of a plan with one copy engine
  std::vector<Event> ev = std::vector<Event>(kEventCount);
  // Debug mode only: orders each poisoning after every user of the region.
  std::vector<Event> debug_ev = std::vector<Event>(kDebugEventCount);
  uint64_t seed = 1;
  float lr = kDefaultLr;
  bool debug_poison = false;
  int copy_delay_ms = 0;
  bool first_update = true;        // torch.optim.SGD: the momentum buffer starts as the first gradient
  double loss_sum = 0;             // summed over the rounds; written on the compute stream only
  size_t peak_arena_end_bytes = 0; // highest end of an allocated arena range
};

float* F(const Context& c, Region r) { return arena_f32(c.arena, r.offset, r.bytes / sizeof(float)); }
int32_t* I32(const Context& c, Region r) { return arena_i32(c.arena, r.offset, r.bytes / sizeof(int32_t)); }
uint8_t* U8(const Context& c, Region r) { return static_cast<uint8_t*>(arena_at(c.arena, r.offset, r.bytes)); }
void* D(const Context& c, Region r) { return arena_at(c.arena, r.offset, r.bytes); }
void* H(const Context& c, Region r) { return host_at(c.host, r.offset, r.bytes); }

// An alloc step: bookkeeping only (the plan placed the buffer); tracks the peak.
void note_alloc(Context& c, Region r) {
  size_t end = r.offset + (r.bytes + 255) / 256 * 256 - kResidentRegionBytes;
  c.peak_arena_end_bytes = std::max(c.peak_arena_end_bytes, end);
}

// Debug mode: fills a region whose buffer is dead (freed, or offloaded and
// dropped) with NaN, in stream order right after its last user.
void poison(Context& c, Stream& stream, Region r) {
  if (c.debug_poison) launch(stream, [&c, r] { arena_release(c.arena, r.offset, r.bytes); });
}

// Debug mode: a step's float outputs must be finite; a NaN there means the step
// read poison (a freed, dropped or not yet written buffer). Caught where it is
// made, since later ops may launder it (relu maps NaN to 0).
struct Named {
  Region region;
  const char* name;
};
void check_finite(int step_index, std::initializer_list<Named> outputs, const Context& c) {
  for (const Named& out : outputs) {
    const float* p = F(c, out.region);
    for (size_t i = 0; i < out.region.bytes / sizeof(float); ++i)
      if (!std::isfinite(p[i])) {
        std::fprintf(stderr,
                     "train: error: step %d wrote a value that is not finite into %s (element %zu%s): it read a "
                     "freed, dropped or not yet written buffer, or raced with a copy\n",
                     step_index, out.name, i, is_poison(p[i]) ? ", the poison pattern" : "");
        std::fflush(stderr);
        std::_Exit(3);
      }
  }
}

// Debug mode: a copy that starts late, so that a missing wait shows up.
void copy_delay(Context& c, Stream& stream) {
  if (c.copy_delay_ms > 0)
    launch(stream, [ms = c.copy_delay_ms] { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); });
}

// prefetch: host slot -> device buffer; offload: device buffer -> host slot.
void copy_to_device(Context& c, Region device, Region host, Stream& stream) {
  copy_delay(c, stream);
  copy_async(D(c, device), H(c, host), device.bytes, stream);
}
void copy_to_host(Context& c, Region device, Region host, Stream& stream) {
  copy_delay(c, stream);
  copy_async(H(c, host), D(c, device), device.bytes, stream);
}

)CPP";
}

std::string support_main() {
  return R"CPP(
// ---- initialisation and data ---------------------------------------------------

// SplitMix64's finaliser: the counter-based generator of weights and synthetic data.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
// A uniform number in [0, 1) from (seed, stream, a, b).
double uniform01(uint64_t seed, uint64_t stream, uint64_t a, uint64_t b) {
  uint64_t h = mix64(seed + 0x9e3779b97f4a7c15ull);
  h = mix64(h ^ (stream * 0xd1b54a32d192ed03ull));
  h = mix64(h ^ (a * 0xabc98388fb8fac03ull));
  h = mix64(h ^ (b * 0x8cb92ba72f3d8dd7ull));
  return static_cast<double>(h >> 11) * (1.0 / 9007199254740992.0);
}

// Zeroes the resident region (gradients, optimizer state), then fills every
// tensor: conv and linear weights and biases uniform in +-1/sqrt(fan_in)
// (the bound of PyTorch's default init), batch-norm gamma 1 and beta 0,
// running mean 0 and variance 1.
void init_weights(Context& c) {
  if (kResidentRegionBytes > 0) fill_f32(F(c, Region{0, kResidentRegionBytes}), kResidentRegionBytes / 4, 0.0f);
  for (size_t t = 0; t < sizeof(kTensors) / sizeof(kTensors[0]); ++t) {
    const Tensor& tensor = kTensors[t];
    float* p = arena_f32(c.arena, tensor.offset, static_cast<size_t>(tensor.count));
    const double bound = tensor.fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(tensor.fan_in)) : 0.0;
    for (int64_t i = 0; i < tensor.count; ++i) {
      switch (tensor.init) {
        case Init::zeros: p[i] = 0.0f; break;
        case Init::ones: p[i] = 1.0f; break;
        case Init::uniform_fan_in:
          p[i] = static_cast<float>((2.0 * uniform01(c.seed, 1, t, static_cast<uint64_t>(i)) - 1.0) * bound);
          break;
      }
    }
  }
}

// --data DIR: images.npy (N, C, H, W) float32 and labels.npy (N) int32.
struct Dataset {
  NpyArray images, labels;
  int64_t count = 0;  // 0: synthetic data
};

bool load_dataset(const std::string& dir, Dataset* data, std::string* error) {
  if (!npy_read(dir + "/images.npy", &data->images, error) || !npy_read(dir + "/labels.npy", &data->labels, error))
    return false;
  const int64_t n = data->labels.elements();
  if (data->images.type != NpyType::f32 || data->labels.type != NpyType::i32 || n < 1 ||
      data->images.elements() != n * kInputElements) {
    *error = dir + ": expected images.npy float32 of shape (N, " + std::to_string(kInputC) + ", " +
             std::to_string(kInputH) + ", " + std::to_string(kInputW) + ") and labels.npy int32 of shape (N)";
    return false;
  }
  for (int64_t i = 0; i < n; ++i)
    if (data->labels.i32()[i] < 0 || data->labels.i32()[i] >= kClasses) {
      *error = dir + "/labels.npy: label " + std::to_string(data->labels.i32()[i]) + " at " + std::to_string(i) +
               " is not a class in [0, " + std::to_string(kClasses) + ")";
      return false;
    }
  data->count = n;
  return true;
}

// Fills the host slots of every round's images and labels for this step:
// samples step*B .. step*B + B-1 (mod N for a data set of N samples).
void fill_inputs(Context& c, const Dataset& data, int64_t step) {
  for (int r = 0; r < kRounds; ++r) {
    float* x = static_cast<float*>(H(c, kInputSlots[r]));
    int32_t* y = static_cast<int32_t*>(H(c, kLabelSlots[r]));
    for (int64_t i = 0; i < kSubBatches[r]; ++i) {
      const uint64_t sample = static_cast<uint64_t>(step * kBatch + kFirstSample[r] + i);
      if (data.count > 0) {
        const int64_t at = static_cast<int64_t>(sample % static_cast<uint64_t>(data.count));
        std::memcpy(x + i * kInputElements, data.images.f32() + at * kInputElements, kInputElements * sizeof(float));
        y[i] = data.labels.i32()[at];
      } else {
        // Learnable: each class has its own coarse mean image (a 4x4 grid of
        // cells per channel, each uniform in [-1, 1)), each sample adds noise
        // uniform in [-0.5, 0.5), so the loss falls within a few steps.
        y[i] = static_cast<int32_t>(uniform01(c.seed, 3, sample, 0) * kClasses);
        for (int64_t e = 0; e < kInputElements; ++e) {
          const int64_t ch = e / (kInputH * kInputW), h = e / kInputW % kInputH, w = e % kInputW;
          const uint64_t cell = static_cast<uint64_t>(ch * 16 + h * 4 / kInputH * 4 + w * 4 / kInputW);
          x[i * kInputElements + e] = static_cast<float>(2.0 * uniform01(c.seed, 4, y[i], cell) - 1.0 +
                                                         uniform01(c.seed, 2, sample, e) - 0.5);
        }
      }
    }
  }
}

// ---- weights on disk: one .npy per tensor (docs/generated-program.md) ----------

bool save_weights(Context& c, const std::string& dir, int64_t step, std::string* error) {
  namespace fs = std::filesystem;
  // Written to DIR.tmp, then swapped in, so an interrupted save never leaves a
  // half-written checkpoint under DIR.
  const std::string tmp = dir + ".tmp", old = dir + ".old";
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) {
    *error = tmp + ": " + ec.message();
    return false;
  }
  std::string manifest = "# mplan weights of " + std::string(kModelName) + ": file, shape\n";
  for (const Tensor& t : kTensors) {
    std::vector<int64_t> shape(t.shape, t.shape + t.rank);
    if (!npy_write_f32(tmp + "/" + t.file + ".npy", arena_f32(c.arena, t.offset, t.count), shape, error))
      return false;
    manifest += std::string(t.file) + ".npy";
    for (int64_t d : shape) manifest += " " + std::to_string(d);
    manifest += "\n";
  }
  const int32_t step32 = static_cast<int32_t>(step);
  if (!npy_write_i32(tmp + "/step.npy", &step32, {1}, error)) return false;
  std::ofstream(tmp + "/tensors.txt") << manifest;
  fs::remove_all(old, ec);
  if (fs::exists(dir)) fs::rename(dir, old, ec);
  fs::rename(tmp, dir, ec);
  if (ec) {
    *error = dir + ": " + ec.message();
    return false;
  }
  fs::remove_all(old, ec);
  return true;
}

bool load_weights(Context& c, const std::string& dir, int64_t* step, std::string* error) {
  for (const Tensor& t : kTensors) {
    const std::string path = dir + "/" + t.file + ".npy";
    if (t.optional && !std::filesystem::exists(path)) continue;
    NpyArray array;
    if (!npy_read(path, &array, error)) return false;
    if (array.type != NpyType::f32 || array.elements() != t.count) {
      *error = path + ": expected float32 with " + std::to_string(t.count) + " elements";
      return false;
    }
    std::memcpy(arena_f32(c.arena, t.offset, t.count), array.f32(), t.count * sizeof(float));
  }
  *step = 0;
  NpyArray step_array;
  if (std::filesystem::exists(dir + "/step.npy")) {
    if (!npy_read(dir + "/step.npy", &step_array, error)) return false;
    if (step_array.type != NpyType::i32 || step_array.elements() != 1) {
      *error = dir + "/step.npy: expected one int32";
      return false;
    }
    *step = step_array.i32()[0];
  }
  c.first_update = *step == 0;
  return true;
}

// ---- flags and main -----------------------------------------------------------

struct Flags {
  int64_t steps = 10;
  uint64_t seed = 1;
  float lr = kDefaultLr;
  std::string data, save, load;
  int64_t checkpoint_every = 0;
  bool debug_poison = false;
  int copy_delay_ms = 0;
};

[[noreturn]] void flag_error(const std::string& message) {
  std::fprintf(stderr, "train: error: %s (see --help)\n", message.c_str());
  std::exit(2);
}

int64_t parse_int(const std::string& flag, const char* text, int64_t min) {
  char* end = nullptr;
  errno = 0;
  long long value = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < min)
    flag_error(flag + ": expected an integer >= " + std::to_string(min) + ", got '" + text + "'");
  return value;
}

Flags parse_flags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) flag_error(flag + ": expected a value");
      return argv[++i];
    };
    if (flag == "--help" || flag == "-h") {
      std::printf(
          "usage: train [--steps N] [--seed S] [--lr LR] [--data DIR] [--save DIR] [--load DIR]\n"
          "             [--checkpoint-every N] [--debug-poison] [--debug-copy-delay-ms MS]\n"
          "Trains %s by the plan compiled into it; see docs/generated-program.md.\n",
          kModelName);
      std::exit(0);
    } else if (flag == "--steps") {
      flags.steps = parse_int(flag, value(), 0);
    } else if (flag == "--seed") {
      flags.seed = static_cast<uint64_t>(parse_int(flag, value(), 0));
    } else if (flag == "--lr") {
      const char* text = value();
      char* end = nullptr;
      flags.lr = std::strtof(text, &end);
      if (end == text || *end != '\0' || !(flags.lr >= 0)) flag_error("--lr: expected a number >= 0, got '" + std::string(text) + "'");
    } else if (flag == "--data") {
      flags.data = value();
    } else if (flag == "--save") {
      flags.save = value();
    } else if (flag == "--load") {
      flags.load = value();
    } else if (flag == "--checkpoint-every") {
      flags.checkpoint_every = parse_int(flag, value(), 0);
    } else if (flag == "--debug-poison") {
      flags.debug_poison = true;
    } else if (flag == "--debug-copy-delay-ms") {
      flags.copy_delay_ms = static_cast<int>(parse_int(flag, value(), 0));
    } else {
      flag_error("unknown flag '" + flag + "'");
    }
  }
  if (flags.checkpoint_every > 0 && flags.save.empty()) flag_error("--checkpoint-every: needs --save DIR");
  return flags;
}

std::string mib(size_t bytes) {
  char text[64];
  std::snprintf(text, sizeof text, "%.2f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  const Flags flags = parse_flags(argc, argv);
  Context c;
  c.seed = flags.seed;
  c.lr = flags.lr;
  c.debug_poison = flags.debug_poison;
  c.copy_delay_ms = flags.copy_delay_ms;
  // One device allocation for the whole run (llm.c's single cudaMalloc).
  c.arena = arena_create(kDeviceBytes, flags.debug_poison);
  c.host = host_buffer_create(kHostBytes > 0 ? kHostBytes : 1);
  init_weights(c);
  std::string error;
  int64_t step = 0;
  if (!flags.load.empty() && !load_weights(c, flags.load, &step, &error)) {
    std::fprintf(stderr, "train: error: --load: %s\n", error.c_str());
    return 2;
  }
  Dataset data;
  if (!flags.data.empty() && !load_dataset(flags.data, &data, &error)) {
    std::fprintf(stderr, "train: error: --data: %s\n", error.c_str());
    return 2;
  }
  std::printf("%s: batch %" PRId64 " in %d sub-batch(es), budget %s, %s%s\n", kModelName, kBatch, kRounds,
              mib(kBudgetBytes).c_str(), data.count > 0 ? "data " : "synthetic data",
              data.count > 0 ? flags.data.c_str() : "");
  double total_ms = 0;
  int64_t timed_steps = 0;
  for (int64_t i = 0; i < flags.steps; ++i, ++step) {
    fill_inputs(c, data, step);
    c.loss_sum = 0;
    const auto started = std::chrono::steady_clock::now();
    train_step(c, step);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
    c.first_update = false;
    const double loss = c.loss_sum / kBatch;
    std::printf("step %" PRId64 ": loss %.6f, %.2f ms, %.1f samples/s\n", step + 1, loss, ms, kBatch * 1000.0 / ms);
    std::fflush(stdout);
    if (!std::isfinite(loss)) {
      std::fprintf(stderr, "train: error: the loss is not finite at step %" PRId64 "%s\n", step + 1,
                   flags.debug_poison ? " (debug poison: a step read a freed, dropped or not yet written buffer)" : "");
      return 3;
    }
    if (i > 0 || flags.steps == 1) {
      total_ms += ms;
      ++timed_steps;
    }
    if (flags.checkpoint_every > 0 && (step + 1) % flags.checkpoint_every == 0 &&
        !save_weights(c, flags.save, step + 1, &error)) {
      std::fprintf(stderr, "train: error: --checkpoint-every: %s\n", error.c_str());
      return 2;
    }
  }
  if (timed_steps > 0)
    std::printf("mean step time: %.2f ms, throughput %.1f samples/s (%" PRId64 " step(s), the first left out)\n",
                total_ms / timed_steps, kBatch * 1000.0 * timed_steps / total_ms, timed_steps);
  std::printf("peak arena: %s of arena %s; device memory %s (resident %s + peak arena) of budget %s\n",
              mib(c.peak_arena_end_bytes).c_str(), mib(kArenaBytes).c_str(),
              mib(kResidentRegionBytes + c.peak_arena_end_bytes).c_str(), mib(kResidentRegionBytes).c_str(),
              mib(kBudgetBytes).c_str());
  for (const Tensor& t : kTensors)
    if (count_poison(arena_f32(c.arena, t.offset, t.count), t.count) > 0) {
      std::fprintf(stderr, "train: error: tensor %s holds poisoned values: a step used a freed buffer\n", t.file);
      return 3;
    }
  if (!flags.save.empty() && !save_weights(c, flags.save, step, &error)) {
    std::fprintf(stderr, "train: error: --save: %s\n", error.c_str());
    return 2;
  }
  if (!flags.save.empty()) std::printf("saved weights to %s\n", flags.save.c_str());
  arena_destroy(c.arena);
  host_buffer_destroy(c.host);
  return 0;
}
)CPP";
}

}  // namespace mplan::codegen
