// `mplan bounds model.yaml [--batch B] [--layers] [--json] [--device D]`: what
// the model needs in memory before any planning (tdfg/bounds.h): weights, the
// naive total, the liveness peak and moDNN's minimum (Eq. 2); with --device,
// moDNN's ideal case (profiler/ideal.h): its time and the memory it needs.

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "cli/command.h"
#include "driver/cost_source.h"
#include "driver/model_input.h"
#include "core/bytes.h"
#include "frontend/parse.h"
#include "frontend/validate.h"
#include "profiler/analytic_model.h"
#include "profiler/device.h"
#include "profiler/ideal.h"
#include "tdfg/bounds.h"
#include "tdfg/tdfg.h"

namespace mplan::cli {

namespace {

struct BoundsOptions {
  std::string model_path;
  int64_t batch = 0;  // 0: the model's batch
  bool batch_given = false;
  bool layers = false;
  bool json = false;
  std::string device;  // empty: no ideal-run figures
  std::string precision;  // "": the model's
};

// The ideal run's figures for the text and JSON outputs, with its device.
struct IdealFigures {
  std::string device;
  IdealRun run;
};

std::string task_name(const Tdfg& tdfg, TaskId t) {
  return t == kNoTask ? std::string("-") : tdfg.tasks[t].name;
}

nlohmann::json bounds_json(const Model& model, const Tdfg& tdfg, const MemoryBounds& bounds,
                           const std::optional<IdealFigures>& ideal, bool with_layers) {
  nlohmann::json out;
  out["model"] = model.name;
  out["batch"] = bounds.batch;
  out["precision"] = precision_name(model.precision);
  out["parameters"] = model.parameter_count();
  out["weight_bytes"] = bounds.weight_bytes;
  out["naive_bytes"] = bounds.naive_bytes;
  out["liveness_peak_bytes"] = bounds.liveness_peak_bytes;
  out["liveness_peak_task"] = task_name(tdfg, bounds.liveness_peak_task);
  out["modnn_min_bytes"] = bounds.modnn_min_bytes;
  out["least_round"] = bounds.least_round;
  out["least_round_min_bytes"] = bounds.least_round_min_bytes;
  out["modnn_min_task"] = task_name(tdfg, bounds.modnn_min_task);
  if (ideal) {
    out["device"] = ideal->device;
    out["ideal_time_ms"] = ideal->run.time_ms;
    out["ideal_peak_bytes"] = ideal->run.peak_bytes;
    out["ideal_peak_task"] = task_name(tdfg, ideal->run.peak_task);
    out["ideal_largest_workspace_bytes"] = ideal->run.workspace_bytes;
  }
  if (with_layers) {
    nlohmann::json rows = nlohmann::json::array();
    for (const LayerBytes& row : bounds.layers) {
      const Layer& layer = model.layers[row.layer];
      rows.push_back({{"name", layer.name},
                      {"op", op_name(layer.op)},
                      {"output_shape", layer.output.dims},
                      {"parameters", row.parameters},
                      {"forward_bytes", row.forward_bytes},
                      {"backward_bytes", row.backward_bytes}});
    }
    out["layers"] = rows;
  }
  return out;
}

std::string bounds_text(const Model& model, const Tdfg& tdfg, const MemoryBounds& bounds,
                        const std::optional<IdealFigures>& ideal, bool with_layers) {
  std::string out;
  out += fmt::format("model           {}\n", model.name);
  out += fmt::format("batch           {}\n", bounds.batch);
  out += fmt::format("precision       {}\n", precision_name(model.precision));
  out += fmt::format("parameters      {}\n", model.parameter_count());
  out += fmt::format("weights         {}  (W{} + dW + optimizer state)\n",
                     format_bytes_exact(bounds.weight_bytes),
                     is_16_bit(model.precision) ? " and its 16-bit copy" : "");
  out += fmt::format("naive           {}  (every block at once)\n",
                     format_bytes_exact(bounds.naive_bytes));
  out += fmt::format("liveness peak   {}  at {}\n", format_bytes_exact(bounds.liveness_peak_bytes),
                     task_name(tdfg, bounds.liveness_peak_task));
  out += fmt::format("Mmin (moDNN)    {}  set by {} (sub-batch 1, Eq. 2)\n",
                     format_bytes_exact(bounds.modnn_min_bytes),
                     task_name(tdfg, bounds.modnn_min_task));
  if (bounds.least_round > 1)
    out += fmt::format("least budget    {}  (Eq. 2 at sub-batch {}: a batchnorm sees one value per channel and "
                       "sample, so every round needs {} samples)\n",
                       format_bytes_exact(bounds.least_round_min_bytes), bounds.least_round, bounds.least_round);
  if (ideal) {
    out += fmt::format("device          {}\n", ideal->device);
    out += fmt::format("ideal time      {:.3f} ms per iteration  (full batch, fastest algorithms, "
                       "unlimited memory)\n", ideal->run.time_ms);
    out += fmt::format("ideal memory    {}  at {} (with the fastest algorithms' workspaces)\n",
                       format_bytes_exact(ideal->run.peak_bytes), task_name(tdfg, ideal->run.peak_task));
  }
  if (with_layers) {
    size_t name_width = 5, shape_width = 12;
    for (const Layer& layer : model.layers) {
      name_width = std::max(name_width, layer.name.size());
      shape_width = std::max(shape_width, layer.output.to_string().size());
    }
    out += fmt::format("\n{:<{}}  {:<14}  {:<{}}  {:>12}  {:>12}  {:>12}\n", "layer", name_width,
                       "op", "output shape", shape_width, "parameters", "forward", "backward");
    for (const LayerBytes& row : bounds.layers) {
      const Layer& layer = model.layers[row.layer];
      out += fmt::format("{:<{}}  {:<14}  {:<{}}  {:>12}  {:>12}  {:>12}\n", layer.name, name_width,
                         op_name(layer.op), layer.output.to_string(), shape_width, row.parameters,
                         format_bytes(row.forward_bytes), format_bytes(row.backward_bytes));
    }
  }
  return out;
}

void run_bounds(const BoundsOptions& options) {
  if (options.batch_given && options.batch <= 0)
    fail_usage(fmt::format("--batch must be a positive number of samples, got {}", options.batch));
  const std::optional<Precision> precision = unwrap(driver::precision_flag(options.precision));
  const Model model = unwrap(driver::load_model_input(options.model_path, 0, precision)).model;
  const int64_t batch = options.batch_given ? options.batch : model.batch;
  // Every byte count below is of tensors at this batch: bounded first.
  if (Status s = check_batch(model, batch, "--batch"); !s) fail_usage(s.error().message);
  const Tdfg tdfg = build_tdfg(model);
  const MemoryBounds bounds = compute_bounds(tdfg, batch);
  std::optional<IdealFigures> ideal;
  if (!options.device.empty()) {
    const driver::LoadedCostModel cost =
        unwrap(driver::make_cost_model(driver::CostSource{options.device, "", false}, model, options.model_path, tdfg, 0));
    ideal = IdealFigures{cost.model->describe(), ideal_run(tdfg, *cost.model, batch)};
  }
  // A 16-bit model's weight copies may instead be made where each task uses
  // them (docs/planner.md, "16-bit weight copies"): less resident, more per task.
  std::optional<MemoryBounds> where_used;
  if (has_weight_copies(model)) {
    Model copies = model;
    copies.weight_copies_where_used = true;
    where_used = compute_bounds(build_tdfg(copies), batch);
  }
  if (options.json) {
    nlohmann::json out = bounds_json(model, tdfg, bounds, ideal, options.layers);
    if (where_used)
      out["weight_copies_where_used"] = {{"weight_bytes", where_used->weight_bytes},
                                         {"modnn_min_bytes", where_used->modnn_min_bytes}};
    fmt::print("{}\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    std::string text = bounds_text(model, tdfg, bounds, ideal, options.layers);
    if (where_used)
      text += fmt::format("copies where used  weights {}, Mmin {}  (the 16-bit weight copies made by each task "
                          "that reads them, not resident)\n",
                          format_bytes_exact(where_used->weight_bytes), format_bytes_exact(where_used->modnn_min_bytes));
    fmt::print("{}", text);
  }
}

void setup_bounds(CLI::App& command) {
  auto options = std::make_shared<BoundsOptions>();
  command.add_option("model", options->model_path, "Model file (YAML)")->required();
  auto* batch = command.add_option("--batch", options->batch,
                                   "Mini-batch size to compute the bounds at (default: the model's batch)");
  command.add_flag("--layers", options->layers, "Also print a table of per-layer sizes");
  command.add_option("--precision", options->precision,
                     "Precision of the tensors, replacing the model's precision and math: fp32, tf32, bf16 or "
                     "fp16 (docs/model-format.md)");
  command.add_flag("--json", options->json, "Print JSON instead of text");
  command.add_option("--device", options->device,
                     "Also give moDNN's ideal case on this device (analytic model): a name in "
                     "examples/devices (k40, p100, h100, ...) or a device file");
  command.callback([options, batch] {
    options->batch_given = batch->count() > 0;
    run_bounds(*options);
  });
}

const Registration registration("bounds", "Memory bounds of a model: weights, naive, liveness peak, moDNN minimum",
                                setup_bounds, 10);

}  // namespace

}  // namespace mplan::cli
