// `mplan verify PLAN [--model model.yaml]`: replays a plan with the independent
// verifier (planner/verify.h) against the TDFG rebuilt from the model. PLAN is
// a plan.json (or evaluation-plan.json, the evaluation pass's) or the folder
// `mplan compile -o` wrote; the model defaults to
// the copy compile keeps beside plan.json (model.yaml). Exit 0 with
// "plan OK: ..." or every violation, one per line, and exit 1.

#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <string>

#include "cli/command.h"
#include "driver/compile.h"
#include "core/bytes.h"
#include "frontend/parse.h"
#include "planner/plan_json.h"
#include "planner/verify.h"
#include "driver/planned_model.h"
#include "tdfg/compact_backward.h"
#include "tdfg/tdfg.h"

namespace mplan::cli {

namespace {

struct VerifyOptions {
  std::string plan_path;
  std::string model_path;
};

void run_verify(const VerifyOptions& o) {
  const std::string path = plan_json_path(o.plan_path);
  const Plan plan = unwrap(load_plan(path));
  // Without --model, the copy `mplan compile` keeps beside the plan.
  std::string model_path = o.model_path;
  if (model_path.empty()) {
    model_path = (std::filesystem::path(path).parent_path() / driver::kModelCopyFile).string();
    if (std::filesystem::path(path).parent_path().empty()) model_path = driver::kModelCopyFile;
    std::error_code ec;
    if (!std::filesystem::exists(model_path, ec))
      fail_usage(fmt::format("{} has no {} beside it (the copy of the model `mplan compile` keeps): pass the model "
                             "the plan was made from with --model",
                             path, driver::kModelCopyFile));
  }
  const Model model = unwrap(load_model(model_path));
  const std::string digest = model_digest(model);
  if (digest != plan.model_digest)
    fail(fmt::format("{} was made for model '{}' (digest {}), but {} is model '{}' with digest {}: compile the "
                     "plan again or pass the model it was made from",
                     path, plan.model_name, plan.model_digest, model_path, model.name, digest));
  // The TDFG the plan was made for: the model with the plan's memory-saving variants.
  Result<Model> planned = driver::model_as_planned(model, plan);
  if (!planned) fail(fmt::format("{}: {}", path, planned.error().message));
  // An evaluation plan (evaluation-plan.json) is of the forward pass alone.
  const Tdfg tdfg = plan.evaluation ? build_evaluation_tdfg(*planned) : build_tdfg(*planned);
  VerifiedFigures figures;
  const std::vector<Violation> violations = verify_plan(plan, tdfg, &figures);
  // Legal but wasteful (prefetches freed unread): on stderr, the first few.
  constexpr size_t kWarningsShown = 5;
  for (size_t i = 0; i < figures.warnings.size() && i < kWarningsShown; ++i)
    fmt::print(stderr, "warning: {}\n", figures.warnings[i]);
  if (figures.prefetches_freed_unread > 0)
    fmt::print(stderr, "warning: {} prefetch{} ({}) freed before any step read {}\n", figures.prefetches_freed_unread,
               figures.prefetches_freed_unread == 1 ? "" : "es", format_bytes(figures.bytes_prefetched_unread),
               figures.prefetches_freed_unread == 1 ? "it" : "them");
  if (violations.empty()) {
    // The verifier's own figures, recomputed from the steps (equal to the
    // summary's, or there would be a violation), never the file's.
    fmt::print("plan OK: {} steps, {} buffers, {} events, {} round{} of sub-batch {}, peak arena {} of {} (budget {}); "
               "{} offloads, {} loads, {:.3f} ms simulated\n",
               plan.steps.size(), plan.buffers.size(), plan.event_count, plan.sub_batches.size(),
               plan.sub_batches.size() == 1 ? "" : "s", plan.sub_batch, format_bytes(figures.peak_arena_bytes),
               format_bytes(plan.arena_bytes), format_bytes(plan.budget_bytes), figures.offload_count,
               figures.load_count, figures.simulated_ms);
    return;
  }
  for (const Violation& v : violations) fmt::print("{}\n", to_string(v));
  std::fflush(stdout);
  fail(fmt::format("{}: {} violation{} in {} steps", path, violations.size(), violations.size() == 1 ? "" : "s",
                   plan.steps.size()));
}

void setup_verify(CLI::App& command) {
  auto o = std::make_shared<VerifyOptions>();
  command.add_option("plan", o->plan_path, "plan.json, or the folder `mplan compile -o` wrote")->required();
  command.add_option("--model", o->model_path,
                     "The model file the plan was made from (rebuilds the TDFG); default: the model.yaml "
                     "`mplan compile` keeps beside plan.json");
  command.callback([o] { run_verify(*o); });
}

const Registration registration("verify", "Check a plan with the independent verifier", setup_verify, 30);

}  // namespace

}  // namespace mplan::cli
