// `mplan verify PLAN [--model model.yaml]`: replays a plan with the independent
// verifier (planner/verify.h) against the TDFG rebuilt from the model. PLAN is
// a plan.json (or evaluation-plan.json, the evaluation pass's) or the folder
// `mplan compile -o` wrote; the model defaults to
// the copy compile keeps beside plan.json (model.yaml). Exit 0 with
// "plan OK: ..." or every violation, one per line, and exit 1.

#include <fmt/format.h>

#include <algorithm>
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

// Verifies one plan file against `model`; prints "plan OK" or its violations
// and fails.
void verify_plan_file(const std::string& path, const Plan& plan, const Model& model, const std::string& model_path) {
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
    const std::string rank =
        plan.data_parallel.ranks > 1
            ? fmt::format(" (rank {} of {})", plan.data_parallel.rank, plan.data_parallel.ranks)
                                     : "";
    fmt::print("plan OK{}: {} steps, {} buffers, {} events, {} round{} of sub-batch {}, peak arena {} of {} (budget "
               "{}); {} offloads, {} loads, {:.3f} ms simulated\n",
               rank, plan.steps.size(), plan.buffers.size(), plan.event_count, plan.sub_batches.size(),
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

// The plan of another rank (docs/multi-gpu.md) must be of the same ranks and
// all-reduce the same buckets as rank 0's.
void check_same_ranks(const std::string& path, const Plan& other, const Plan& first, int32_t rank) {
  const DataParallel &a = other.data_parallel, &b = first.data_parallel;
  std::string why;
  if (a.rank != rank) why = fmt::format("it is the plan of rank {}", a.rank);
  else if (a.ranks != b.ranks || a.plan_of_rank != b.plan_of_rank) why = "its ranks differ from plan.json's";
  else if (a.global_batch != b.global_batch) why = "its global batch differs from plan.json's";
  else if (a.buckets.size() != b.buckets.size()) why = "it has another number of gradient buckets";
  for (size_t k = 0; why.empty() && k < a.buckets.size(); ++k)
    if (a.buckets[k].blocks != b.buckets[k].blocks || a.buckets[k].bytes != b.buckets[k].bytes)
      why = fmt::format("its gradient bucket {} differs from plan.json's (every rank all-reduces the same)", k);
  if (!why.empty()) fail(fmt::format("{}: not rank {}'s plan beside plan.json: {}", path, rank, why));
}

void run_verify(const VerifyOptions& o) {
  const std::string path = plan_json_path(o.plan_path);
  const Plan plan = unwrap(load_plan(path));
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  // Without --model, the copy `mplan compile` keeps beside the plan.
  std::string model_path = o.model_path;
  if (model_path.empty()) {
    model_path = (folder / driver::kModelCopyFile).string();
    if (folder.empty()) model_path = driver::kModelCopyFile;
    std::error_code ec;
    if (!std::filesystem::exists(model_path, ec))
      fail_usage(fmt::format("{} has no {} beside it (the copy of the model `mplan compile` keeps): pass the model "
                             "the plan was made from with --model",
                             path, driver::kModelCopyFile));
  }
  const Model model = unwrap(load_model(model_path));
  verify_plan_file(path, plan, model, model_path);
  // A folder of a data-parallel plan: every rank's plan beside plan.json.
  std::error_code ec;
  if (!std::filesystem::is_directory(o.plan_path, ec) || plan.data_parallel.ranks <= 1 || plan.data_parallel.rank != 0)
    return;
  std::vector<int32_t> others = plan.data_parallel.plan_of_rank;
  std::sort(others.begin(), others.end());
  others.erase(std::unique(others.begin(), others.end()), others.end());
  for (int32_t rank : others) {
    if (rank == 0) continue;
    const std::string other_path = (folder / driver::rank_plan_file(rank)).string();
    const Plan other = unwrap(load_plan(other_path));
    check_same_ranks(other_path, other, plan, rank);
    verify_plan_file(other_path, other, model, model_path);
  }
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
