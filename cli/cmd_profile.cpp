// `mplan profile model.yaml --device DEVICE [--sub-batches pow2|all|LIST] -o profile.json`:
// writes the analytic cost model of the model on a device as a profile
// (docs/profile-format.md), one entry per distinct layer signature. Measured
// backends come with the runtimes.

#include <fmt/format.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "cli/command.h"
#include "frontend/parse.h"
#include "frontend/validate.h"
#include "profiler/analytic_model.h"
#include "profiler/cpu_measured.h"
#include "profiler/device.h"
#include "profiler/profile.h"
#include "tdfg/tdfg.h"

namespace mplan::cli {
namespace {

struct ProfileOptions {
  std::string model_path;
  std::string device = "";
  std::string sub_batches = "pow2";
  std::string output;
  std::string backend = "analytic";  // analytic (--device) or cpu (measured here; cg)
};

// Flag checks shared by both backends: the output is not an input, and the
// sub-batches are sizes mplan computes with for this model (they may exceed
// the model's batch, for `compile --batch`; issue 12).
std::vector<int64_t> checked_sub_batches(const ProfileOptions& options, const Model& model) {
  const std::vector<int64_t> sub_batches = unwrap(parse_sub_batches(options.sub_batches, model.batch));
  for (int64_t b : sub_batches)
    if (Status s = check_batch(model, b, "--sub-batches"); !s) fail_usage(s.error().message);
  return sub_batches;
}

void check_output(const ProfileOptions& options) {
  if (options.output.empty()) fail_usage("-o: expected the path of the profile to write");
  refuse_overwriting_inputs("-o", options.output,
                            {options.model_path, options.device.find('/') != std::string::npos ||
                                                         std::filesystem::exists(options.device)
                                                     ? options.device
                                                     : std::string()});
}

// --backend cpu: times the CPU runtime's ops and algorithms on this machine
// (profiler/cpu_measured.h) and writes them as the profile.
void run_cpu_profile(const ProfileOptions& options) {
  if (!options.device.empty())
    fail_usage("--device is for --backend analytic; --backend cpu measures this machine");
  check_output(options);
  const Model model = unwrap(load_model(options.model_path));
  const std::vector<int64_t> sub_batches = checked_sub_batches(options, model);
  const Tdfg tdfg = build_tdfg(model);
  const CpuMeasuredCostModel cost_model;
  Profile profile;
  try {
    profile = make_profile(tdfg, cost_model, sub_batches, "cpu");
  } catch (const MeasurementTooLarge& e) {
    fail(fmt::format("--backend cpu: {}", e.what()));
  }
  write_file_atomically(options.output, profile_to_json(profile));
  fmt::print("wrote {}: {} measured on the CPU, {} distinct layers, {} measurements, sub-batches {}\n",
             options.output, model.name, profile.entries.size(), cost_model.measurements(), options.sub_batches);
}

void run_profile(const ProfileOptions& options) {
  if (options.backend == "cpu") return run_cpu_profile(options);
  if (options.backend != "analytic") fail_usage("--backend: expected analytic or cpu, not '" + options.backend + "'");
  if (options.device.empty()) fail_usage("--device: required with --backend analytic");
  check_output(options);
  const Model model = unwrap(load_model(options.model_path));
  Result<Device> device = load_device(options.device);
  if (!device) {
    fail("--device: " + device.error().to_string(), device.error().kind);
  }
  const std::vector<int64_t> sub_batches = checked_sub_batches(options, model);
  const Tdfg tdfg = build_tdfg(model);
  const AnalyticCostModel cost_model(*device);
  const Profile profile = make_profile(tdfg, cost_model, sub_batches, device->name);
  write_file_atomically(options.output, profile_to_json(profile));
  size_t tasks = 0;
  for (const ProfileEntry& entry : profile.entries) tasks += entry.tasks.size();
  fmt::print("wrote {}: {} on {}, {} distinct layers ({} tasks of {}), sub-batches {}\n", options.output,
             model.name, device->name, profile.entries.size(), tasks, tdfg.tasks.size(), options.sub_batches);
}

void setup_profile(CLI::App& command) {
  auto options = std::make_shared<ProfileOptions>();
  command.add_option("model", options->model_path, "Model file (YAML)")->required();
  command.add_option("--device", options->device,
                     "Device: a name from examples/devices (k40, titanx, p100, v100, ...) or a path to a device file "
                     "(required with --backend analytic)");
  command.add_option("--backend", options->backend,
                     "analytic: the device file's model; cpu: time the CPU runtime's algorithms on this machine")
      ->capture_default_str();
  command.add_option("--sub-batches", options->sub_batches,
                     "Sub-batches to profile: pow2 (1, 2, 4, ... and the batch), all (1..batch), or a list "
                     "such as 1,8,32")
      ->capture_default_str();
  command.add_option("-o,--output", options->output, "Where to write profile.json")->required();
  command.callback([options] { run_profile(*options); });
}

const Registration registration("profile", "Write a profile (cost model) of a model on a device: profile.json",
                                setup_profile, 30);

}  // namespace
}  // namespace mplan::cli
