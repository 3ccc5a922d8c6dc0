#include "driver/cost_source.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "profiler/analytic_model.h"
#include "profiler/cpu_measured.h"
#include "profiler/device.h"
#include "profiler/profile.h"

namespace mplan::driver {
namespace {

Result<LoadedCostModel> recorded(const CostSource& source, const Model& model, const std::string& model_path,
                                 const Tdfg& tdfg, int64_t batch) {
  Result<Profile> loaded = load_profile(source.profile);
  if (!loaded) return loaded.error();
  Profile profile = std::move(loaded).value();
  LoadedCostModel out;
  out.device_name = profile.device_name;
  out.device_line = fmt::format("device: {} (recorded profile {})", profile.device_name, source.profile);
  if (batch > 0)
    if (Status s = check_profile_reaches_batch(profile, batch, source.profile); !s) return s.error();
  // The profile's times are in its own math: a model that asks for another
  // is planned with the profile's, and says so (docs/profile-format.md, "math").
  if (is_16_bit(model.precision) && model.math != profile.math_mode)
    out.warnings.push_back(fmt::format(
        "{} is precision {}, but the profile was measured in {}: the plan counts 16-bit bytes but is priced with "
        "the profile's {} kernel times; profile the model in {} to plan in it",
        model_path, precision_name(model.precision),
        profile.math_mode.empty() ? "an unrecorded math" : profile.math_mode,
        profile.math_mode.empty() ? "recorded" : profile.math_mode, precision_name(model.precision)));
  else if (model.math != "default" && !profile.math_mode.empty() && model.math != profile.math_mode)
    out.warnings.push_back(fmt::format(
        "{} asks for math {}, but the profile's times are in {}: the plan is priced, and the program computes, in "
        "{}; profile the model in {} to plan in it",
        model_path, model.math, profile.math_mode, profile.math_mode, model.math));
  if (std::string untimed = untimed_kernel_warning(profile, tdfg, source.profile); !untimed.empty())
    out.warnings.push_back(std::move(untimed));
  Result<std::unique_ptr<RecordedCostModel>> cost =
      RecordedCostModel::create(std::move(profile), tdfg, {}, source.profile);
  if (!cost) return cost.error();
  out.model = std::move(cost).value();
  return out;
}

Result<LoadedCostModel> analytic(const CostSource& source, const Model& model, const std::string& model_path) {
  const bool default_device = source.device.empty();
  Result<Device> device = load_device(default_device ? kDefaultDevice : source.device);
  if (!device)
    return Error{{}, fmt::format("--device '{}': {}", source.device, device.error().to_string()), device.error().kind};
  const Result<MathMode> math = resolve_math_mode(*device, model.math);
  if (!math) {
    // The default device, a K40, has FP32 cores only: say how to plan a 16-bit model.
    const std::string hint =
        default_device && is_16_bit(model.precision)
            ? fmt::format(" ({} is the default device: give a GPU with {} tensor cores, e.g. --device h100, or a "
                          "profile with --profile)",
                          device->name, precision_name(model.precision))
            : "";
    return Error{{}, fmt::format("{}: {}{}", model_path, math.error().message, hint), math.error().kind};
  }
  LoadedCostModel out;
  out.device_name = device->name;
  out.device_line = default_device ? fmt::format("device: {} (default; use --device to choose)", device->name)
                                   : fmt::format("device: {}", device->name);
  out.model = std::make_unique<AnalyticCostModel>(*device, *math);
  return out;
}

}  // namespace

std::string untimed_kernel_warning(const Profile& profile, const Tdfg& tdfg, const std::string& file) {
  const std::vector<std::string> untimed = untimed_kernel_tasks(profile, tdfg);
  if (untimed.empty()) return "";
  return fmt::format(
      "{} records 0 ms for tasks that run kernels ({}), which the plan prices as free; the kernel profiler that "
      "made it ran no kernel for them: profile the model again (mplan profile --jobs, the kernel profiler, --merge) "
      "to time them",
      file, fmt::join(untimed, ", "));
}

Result<LoadedCostModel> make_cost_model(const CostSource& source, const Model& model, const std::string& model_path,
                                        const Tdfg& tdfg, int64_t batch) {
  if (static_cast<int>(!source.device.empty()) + static_cast<int>(!source.profile.empty()) +
          static_cast<int>(source.measure_cpu) > 1)
    return Error{{}, "--device, --profile and measuring on the CPU exclude each other: a profile names its own device",
                 ErrorKind::usage};
  if (!source.profile.empty()) return recorded(source, model, model_path, tdfg, batch);
  if (source.measure_cpu) {
    LoadedCostModel out;
    out.device_name = "cpu";
    out.device_line = "device: this machine's CPU (measured)";
    out.model = std::make_unique<CpuMeasuredCostModel>();
    return out;
  }
  return analytic(source, model, model_path);
}

}  // namespace mplan::driver
