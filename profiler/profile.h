#pragma once
// profile.json (docs/profile-format.md): a cost model written down. Per layer
// signature (identical layers share one entry), per task kind, per sub-batch:
// every option (algorithm, time, workspace); plus the device's memory, copy
// engines and transfer lines. A RecordedCostModel serves such a file, after
// checking that it covers the model.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "profiler/cost_model.h"
#include "profiler/signature.h"

namespace mplan {

// A copy's time as a line: latency_ms + bytes / bytes_per_s * 1000.
struct TransferLine {
  double latency_ms = 0;
  double bytes_per_s = 0;
  double time_ms(int64_t bytes) const {
    return bytes <= 0 ? 0 : latency_ms + static_cast<double>(bytes) / bytes_per_s * 1000.0;
  }
};

// The task kind of a layer's recomputation from saved state in a profile
// (CostModel::recompute_from_saved_ms): batch norm's normalisation alone.
inline constexpr const char* kRecomputeKind = "recompute";

struct ProfileEntry {
  std::string signature;            // layer_signature(): op, shapes and parameters
  std::vector<std::string> layers;  // names of the model's layers with this signature (for people)
  // Task kind name ("FP", "BP1", "BP2", "update", and "recompute" for an FP
  // that recomputes from saved state) -> sub-batch -> options, fastest first.
  std::map<std::string, std::map<int64_t, std::vector<TaskOption>>> tasks;
};

struct Profile {
  static constexpr int kVersion = 1;
  std::string cost_model;           // CostModel::describe() of what made it
  // The math the times are in: "fp32", "tf32", "fp16" or "bf16" (the kernel
  // profiler and the CPU backend measure fp32); "" in a file from before the
  // field, whose plans then say "as recorded".
  std::string math_mode;
  std::string device_name;
  int64_t device_memory_bytes = 0;
  int copy_engines = 1;
  TransferLine host_to_device, device_to_host;
  // A copy's slowdown while the other direction copies too (CostModel::
  // duplex_slowdown); 1 where not measured (written only when above 1).
  double duplex_slowdown = 1.0;
  std::string model_name;           // for people; coverage is checked by signature
  int64_t batch = 0;
  std::vector<int64_t> sub_batches; // ascending
  std::vector<ProfileEntry> entries;
};

// Adds to `into` the entries of `from` whose signatures it lacks: a profile
// of a model and of the same model with its memory-saving variants
// (docs/profile-format.md) in one file.
void add_missing_entries(Profile& into, const Profile& from);

// Bounds of a profile's figures: a task time (11.6 days) and a byte count
// (a workspace, the device's memory).
inline constexpr double kMaxProfileTimeMs = 1e9;
inline constexpr int64_t kMaxProfileBytes = int64_t{1} << 60;

// The most sub-batch sizes one profile holds.
inline constexpr int64_t kMaxProfileSubBatches = 4096;

// Sub-batch lists of `mplan profile --sub-batches`: "pow2" (1, 2, 4, ... and
// the batch), "all" (1..batch), or "LIST" ("1,8,32"; sizes above the batch
// are allowed, for `compile --batch`). Errors name the flag.
Result<std::vector<int64_t>> parse_sub_batches(const std::string& text, int64_t batch);

// Asks `model` for every task of the TDFG at every sub-batch, once per signature.
Profile make_profile(const Tdfg& tdfg, const CostModel& model, const std::vector<int64_t>& sub_batches,
                     const std::string& device_name);

std::string profile_to_json(const Profile& profile);
// `file` names the text in errors (a truncated file says where it ends).
Result<Profile> parse_profile(const std::string& json_text, const std::string& file);
Result<Profile> load_profile(const std::string& path);

// Ok if the profile has every task of the TDFG at every one of its own
// sub-batches and at every one of `required_sub_batches`; otherwise an error
// naming the layer, task and sub-batch that is missing.
Status check_profile_covers(const Profile& profile, const Tdfg& tdfg,
                            const std::vector<int64_t>& required_sub_batches, const std::string& file);

// The tasks of the TDFG that run a kernel but whose every recorded time is
// 0 ms, as "<op> <kind>" with a count each ("add BP1 x12"), for a warning:
// a kernel profiler whose jobs ran no kernel for the BP1 of a multi-input op
// (add, concat, mul, matmul, attention) recorded 0 ms,
// and a plan from such a profile prices those tasks as free. Empty when
// every such task was timed. The profile must cover the TDFG.
std::vector<std::string> untimed_kernel_tasks(const Profile& profile, const Tdfg& tdfg);

// Ok if the profile's largest sub-batch reaches `batch` (a plan may run the
// whole batch as one sub-batch); otherwise an Error that lists the sizes the
// profile lacks (the powers of two above its largest, and the batch) and how
// to make them. Extrapolating past the largest recorded size would
// plan with times nobody measured.
Status check_profile_reaches_batch(const Profile& profile, int64_t batch, const std::string& file);

// Serves a profile. Sub-batches between recorded ones are interpolated
// linearly per algorithm; past the largest, time and workspace grow in
// proportion to b (docs/profile-format.md).
class RecordedCostModel final : public CostModel {
 public:
  // Refuses (with the missing layer or sub-batch named) a profile that does
  // not cover the TDFG at `required_sub_batches` and its own sub-batches.
  static Result<std::unique_ptr<RecordedCostModel>> create(Profile profile, const Tdfg& tdfg,
                                                           const std::vector<int64_t>& required_sub_batches,
                                                           const std::string& file);

  std::vector<TaskOption> options(const Tdfg& tdfg, TaskId t, int64_t sub_batch) const override;
  // The layer's "recompute" series where the profile has one.
  std::optional<double> recompute_from_saved_ms(const Tdfg& tdfg, TaskId t, int64_t sub_batch) const override;
  double host_to_device_ms(int64_t bytes) const override { return profile_.host_to_device.time_ms(bytes); }
  double device_to_host_ms(int64_t bytes) const override { return profile_.device_to_host.time_ms(bytes); }
  int copy_engines() const override { return profile_.copy_engines; }
  double duplex_slowdown() const override { return profile_.duplex_slowdown; }
  int64_t device_memory_bytes() const override { return profile_.device_memory_bytes; }
  std::string describe() const override;
  // "measured" unless the profile was written by the analytic model.
  CostModelInfo info() const override;

  const Profile& profile() const { return profile_; }

 private:
  using Series = std::map<int64_t, std::vector<TaskOption>>;
  RecordedCostModel(Profile profile, std::string file);
  const Series& series(const Tdfg& tdfg, TaskId t, const TaskShape& shape) const;
  static std::vector<TaskOption> options_at(const Series& series, int64_t sub_batch);

  Profile profile_;
  std::string file_;
  std::map<std::string, const Series*> by_task_signature_;
  // The update that remakes 16-bit weight copies, where the profile has one:
  // it serves the update of a plan that makes its copies where used.
  const Series* update_with_copies_ = nullptr;
  TaskKeyCache keys_;
};

}  // namespace mplan
