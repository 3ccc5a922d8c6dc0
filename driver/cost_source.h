#pragma once
// Where a command's costs come from, made in one place for every command
// (docs/architecture.md, "driver"): the analytic model of a device file
// (docs/device-format.md), a recorded profile (docs/profile-format.md), or
// the CPU runtime's kernels timed on this machine (profiler/cpu_measured.h).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "ops/model.h"
#include "profiler/cost_model.h"
#include "profiler/profile.h"
#include "tdfg/tdfg.h"

namespace mplan::driver {

// The papers' GPU (moDNN, vDNN): plans are for it unless the user says otherwise.
inline constexpr const char* kDefaultDevice = "k40";

struct CostSource {
  std::string device;        // --device: a name in examples/devices or a device file; "" for the default
  std::string profile;       // --profile: a profile.json (excludes device)
  bool measure_cpu = false;  // time the CPU runtime's kernels here (excludes both)
};

struct LoadedCostModel {
  std::unique_ptr<CostModel> model;
  std::string device_name;            // the device file's name, the profile's device, or "cpu"
  std::string device_line;            // what compile prints first: "device: k40 (default; use --device to choose)"
  std::vector<std::string> warnings;  // for stderr: a profile in another math, tasks a profile timed at 0 ms
};

// The cost model of `source` for `tdfg`, built from `model` (read from
// `model_path`, named in messages): the analytic model in the model's math
// mode on the device, or the profile, which must reach `batch` (0: any).
// Errors name the flag and the file.
Result<LoadedCostModel> make_cost_model(const CostSource& source, const Model& model, const std::string& model_path,
                                        const Tdfg& tdfg, int64_t batch);

// The warning for a profile (`file`) that records 0 ms for tasks of `tdfg`
// that run kernels, which a plan would price as free; "" when there are none.
std::string untimed_kernel_warning(const Profile& profile, const Tdfg& tdfg, const std::string& file);

}  // namespace mplan::driver
