// `mplan profile model.yaml --device DEVICE [--sub-batches pow2|all|LIST] -o profile.json`:
// writes the analytic cost model of the model on a device as a profile
// (docs/profile-format.md), one entry per distinct layer signature;
// `--backend cpu` measures the CPU runtime here; `--backend cuda --jobs
// jobs.json` writes the job file for the kernel profiler on a GPU node and
// `--merge times.json` turns its results into the profile.

#include <fmt/format.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <set>
#include <string>

#include "cli/command.h"
#include "driver/cost_source.h"
#include "driver/model_input.h"
#include "driver/paths.h"
#include "core/input_file.h"
#include "frontend/parse.h"
#include "frontend/validate.h"
#include "profiler/analytic_model.h"
#include "profiler/cpu_measured.h"
#include "profiler/device.h"
#include "profiler/kernel_jobs.h"
#include "profiler/profile.h"
#include "runtime/jobs.h"
#include "tdfg/compact_backward.h"
#include "tdfg/tdfg.h"

namespace mplan::cli {
namespace {

struct ProfileOptions {
  std::string model_path;
  std::string device = "";
  std::string sub_batches = "pow2";
  std::string output;
  std::string backend = "analytic";  // analytic (--device), cpu (measured here), cuda (--jobs)
  std::string jobs;                  // --jobs: write the kernel profiler's job file
  std::string merge;                 // --merge: the kernel profiler's results -> profile.json
  int repeats = 10;                  // --repeats: timed runs per kernel in the job file
  std::string precision;             // --precision: replaces the model's ("": the model's)
};

// Flag checks shared by both backends: the output is not an input, and the
// sub-batches are sizes mplan computes with for this model (they may exceed
// the model's batch, for `compile --batch`).
std::vector<int64_t> checked_sub_batches(const ProfileOptions& options, const Model& model) {
  const std::vector<int64_t> sub_batches = unwrap(parse_sub_batches(options.sub_batches, model.batch));
  for (int64_t b : sub_batches)
    if (Status s = check_batch(model, b, "--sub-batches"); !s) fail_usage(s.error().message);
  return sub_batches;
}

// The model's TDFG and, where some of its layers have a memory-saving
// backward that frees a tensor (tdfg/compact_backward.h), the TDFG with those
// variants: a profile times both forms, so that compile prices the compact
// ones as measured (docs/profile-format.md).
struct ProfiledGraphs {
  explicit ProfiledGraphs(Model m)
      : model(std::move(m)), compact(with_compact_backward(model, compact_backward_layers(model))),
        plain(build_tdfg(model)), variants(build_tdfg(compact)) {}
  ProfiledGraphs(const ProfiledGraphs&) = delete;
  ProfiledGraphs& operator=(const ProfiledGraphs&) = delete;
  bool has_variants() const { return !compact_backward_names(compact).empty(); }
  const Model model, compact;
  const Tdfg plain, variants;  // of model and of compact
};

// The model to profile, at --precision where given. A 16-bit model's tasks
// are timed as its program runs them (profiler/task_invocation.h): its
// blocks in their types, its kernels between casts, and on CUDA the 16-bit
// kernels of its convolutions and linear layers; the profile says so in its
// math (docs/profile-format.md).
Model profiled_model(const ProfileOptions& options) {
  const std::optional<Precision> precision = unwrap(driver::precision_flag(options.precision));
  return unwrap(driver::load_model_input(options.model_path, 0, precision)).model;
}

void check_output(const ProfileOptions& options) {
  if (options.output.empty()) fail_usage("-o: expected the path of the profile to write");
  refuse_overwriting_inputs("-o", options.output,
                            {options.model_path, options.device.find('/') != std::string::npos ||
                                                         std::filesystem::exists(options.device)
                                                     ? options.device
                                                     : std::string()});
}

// The kernel profiler's result file, bounded like a profile.
std::string read_text(const std::string& path, const char* flag) {
  Result<std::string> text = read_input_file(path, "the kernel profiler's results", kMaxProfileFileBytes);
  if (!text) fail(fmt::format("{} '{}': {}", flag, path, text.error().message), text.error().kind);
  return std::move(text).value();
}

// --jobs: the kernels of every distinct task at every sub-batch, for
// profiler/kernel_profiler to time where the GPU is (docs/profile-format.md).
void run_write_jobs(const ProfileOptions& options) {
  if (options.repeats < 1 || options.repeats > 10000) fail_usage("--repeats: expected 1 to 10000");
  refuse_overwriting_inputs("--jobs", options.jobs, {options.model_path});
  const ProfiledGraphs graphs(profiled_model(options));
  const Model& model = graphs.model;
  const std::vector<int64_t> sub_batches = checked_sub_batches(options, model);
  const Tdfg& tdfg = graphs.plain;
  // A 16-bit CUDA program calls the 16-bit kernels of its convolutions and
  // linear layers; the CPU program brackets the float ones with casts.
  const bool sixteen_bit_kernels = options.backend == "cuda";
  rt::JobFile jobs = make_jobs(tdfg, sub_batches, options.repeats, /*warmup=*/2, sixteen_bit_kernels);
  if (graphs.has_variants()) {
    std::set<std::string> keys;
    for (const rt::Job& job : jobs.jobs) keys.insert(job.key);
    for (rt::Job& job : make_jobs(graphs.variants, sub_batches, options.repeats, 2, sixteen_bit_kernels).jobs)
      if (keys.insert(job.key).second) jobs.jobs.push_back(std::move(job));
  }
  write_file_atomically(options.jobs, rt::jobs_to_json(jobs));
  fmt::print("wrote {}: {} jobs (the distinct ones of {}'s {} tasks at sub-batches {}), {} copy sizes\n"
             "next: on the GPU node, mplan_kernel_profiler {} -o times.json (its CUDA build); then here,\n"
             "      mplan profile {} --merge times.json --sub-batches {} -o profile.json\n",
             options.jobs, jobs.jobs.size(), model.name, tdfg.tasks.size(), options.sub_batches,
             jobs.copy_sizes.size(), options.jobs, options.model_path, options.sub_batches);
}

// --merge: the kernel profiler's result file as profile.json.
void run_merge(const ProfileOptions& options) {
  check_output(options);
  refuse_overwriting_inputs("-o", options.output, {options.merge});
  const ProfiledGraphs graphs(profiled_model(options));
  const Model& model = graphs.model;
  const std::vector<int64_t> sub_batches = checked_sub_batches(options, model);
  const Tdfg& tdfg = graphs.plain;
  rt::ResultFile results;
  std::string error;
  if (!rt::parse_results(read_text(options.merge, "--merge"), &results, &error))
    fail(fmt::format("--merge '{}': {}", options.merge, error));
  Profile profile = unwrap(merge_results(tdfg, results, sub_batches, options.merge));
  if (graphs.has_variants()) {
    // Results of a job file without the compact forms still make a profile:
    // compile then prices those forms from the plain ones.
    Result<Profile> compact = merge_results(graphs.variants, results, sub_batches, options.merge);
    if (compact) add_missing_entries(profile, *compact);
    else
      fmt::print(stderr, "mplan: warning: the memory-saving variants are not timed: {}\n", compact.error().message);
  }
  if (std::string untimed = driver::untimed_kernel_warning(profile, tdfg, options.merge); !untimed.empty())
    fmt::print(stderr, "mplan: warning: {}\n", untimed);
  write_file_atomically(options.output, profile_to_json(profile));
  fmt::print("wrote {}: {} measured on {} ({}), {} distinct layers, sub-batches {}\n", options.output, model.name,
             results.backend.device, results.backend.backend, profile.entries.size(), options.sub_batches);
}

// --backend cpu: times the CPU runtime's ops and algorithms on this machine
// (profiler/cpu_measured.h) and writes them as the profile.
void run_cpu_profile(const ProfileOptions& options) {
  if (!options.device.empty())
    fail_usage("--device is for --backend analytic; --backend cpu measures this machine");
  check_output(options);
  const ProfiledGraphs graphs(profiled_model(options));
  const Model& model = graphs.model;
  const std::vector<int64_t> sub_batches = checked_sub_batches(options, model);
  const CpuMeasuredCostModel cost_model;
  Profile profile;
  try {
    profile = make_profile(graphs.plain, cost_model, sub_batches, "cpu");
    if (graphs.has_variants())
      add_missing_entries(profile, make_profile(graphs.variants, cost_model, sub_batches, "cpu"));
  } catch (const MeasurementTooLarge& e) {
    fail(fmt::format("--backend cpu: {}", e.what()));
  }
  // The CPU backend computes a 16-bit model's precision exactly, through its casts.
  if (is_16_bit(model.precision)) profile.math_mode = precision_name(model.precision);
  write_file_atomically(options.output, profile_to_json(profile));
  fmt::print("wrote {}: {} measured on the CPU, {} distinct layers, {} measurements, sub-batches {}\n",
             options.output, model.name, profile.entries.size(), cost_model.measurements(), options.sub_batches);
}

void run_profile(const ProfileOptions& options) {
  if (!options.merge.empty()) {
    if (!options.jobs.empty()) fail_usage("--merge and --jobs exclude each other");
    if (options.output.empty()) fail_usage("--merge needs -o/--output profile.json");
    return run_merge(options);
  }
  if (!options.jobs.empty()) {
    if (options.backend != "cuda" && options.backend != "cpu")
      fail_usage("--jobs: writes the job file of a measured backend: --backend cuda (or cpu)");
    return run_write_jobs(options);
  }
  if (options.output.empty()) fail_usage("-o/--output: required (where to write profile.json)");
  if (options.backend == "cpu") return run_cpu_profile(options);
  if (options.backend == "cuda")
    fail_usage("--backend cuda: mplan does not link CUDA; write a job file with --jobs jobs.json, run "
               "profiler/kernel_profiler on the GPU node, then --merge its results");
  if (options.backend != "analytic")
    fail_usage("--backend: expected analytic, cpu or cuda, not '" + options.backend + "'");
  if (options.device.empty()) fail_usage("--device: required with --backend analytic");
  check_output(options);
  const ProfiledGraphs graphs(profiled_model(options));
  const Model& model = graphs.model;
  const std::vector<int64_t> sub_batches = checked_sub_batches(options, model);
  const Tdfg& tdfg = graphs.plain;
  const driver::LoadedCostModel cost =
      unwrap(driver::make_cost_model(driver::CostSource{options.device, "", false}, model, options.model_path, tdfg, 0));
  const std::string& device_name = cost.device_name;
  const CostModel& cost_model = *cost.model;
  Profile profile = make_profile(tdfg, cost_model, sub_batches, device_name);
  if (graphs.has_variants())
    add_missing_entries(profile, make_profile(graphs.variants, cost_model, sub_batches, device_name));
  write_file_atomically(options.output, profile_to_json(profile));
  size_t tasks = 0;
  for (const ProfileEntry& entry : profile.entries) tasks += entry.tasks.size();
  fmt::print("wrote {}: {} on {}, {} distinct layers ({} tasks of {}), sub-batches {}\n", options.output,
             model.name, device_name, profile.entries.size(), tasks, tdfg.tasks.size(), options.sub_batches);
}

void setup_profile(CLI::App& command) {
  auto options = std::make_shared<ProfileOptions>();
  command.add_option("model", options->model_path, "Model file (YAML)")->required();
  command.add_option("--device", options->device,
                     "Device: a name from examples/devices (k40, titanx, p100, v100, ...) or a path to a device file "
                     "(required with --backend analytic)");
  command.add_option("--backend", options->backend,
                     "analytic: the device file's model; cpu: time the CPU runtime's algorithms on this machine; "
                     "cuda: with --jobs, the job file for the kernel profiler on a GPU node")
      ->capture_default_str();
  command.add_option("--jobs", options->jobs,
                     "Write the kernel profiler's job file (every distinct task's kernels at every sub-batch) here");
  command.add_option("--merge", options->merge,
                     "Turn the kernel profiler's result file (from the GPU node) into profile.json (-o)");
  command.add_option("--repeats", options->repeats, "With --jobs: timed runs of each kernel (median kept)")
      ->capture_default_str();
  command.add_option("--sub-batches", options->sub_batches,
                     "Sub-batches to profile: pow2 (1, 2, 4, ... and the batch), all (1..batch), or a list "
                     "such as 1,8,32")
      ->capture_default_str();
  command.add_option("--precision", options->precision,
                     "Precision of the tensors, replacing the model's precision and math: fp32, tf32, bf16 or fp16 "
                     "(docs/model-format.md); a 16-bit model is timed as its program runs it");
  command.add_option("-o,--output", options->output, "Where to write profile.json (not with --jobs)");
  command.callback([options] { run_profile(*options); });
}

const Registration registration("profile", "Write a profile (cost model) of a model on a device: profile.json",
                                setup_profile, 30);

}  // namespace
}  // namespace mplan::cli
