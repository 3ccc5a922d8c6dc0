// Profiling where only the runtime is (docs/design.md, Profiler): the job file of
// `mplan profile --jobs`, timed by the standalone kernel profiler (its CPU
// build here; the CUDA build runs the same file on a GPU node), merged into
// profile.json, which then plans a program that verifies.

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <fstream>
#include <sstream>

#include "frontend/parse.h"
#include "planner/verify.h"
#include "profiler/kernel_jobs.h"
#include "tests/e2e/e2e_util.h"

namespace mplan::e2e {
namespace {

#ifdef MPLAN_KERNEL_PROFILER_PATH
std::string file_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Writes the job file of `model` at `sub_batches`, times it with the kernel
// profiler and reads its result file.
void profile_jobs(const Tdfg& tdfg, const std::vector<int64_t>& sub_batches, const std::string& dir,
                  rt::JobFile* jobs, rt::ResultFile* results, const std::string& flags = "",
                  bool sixteen_bit_kernels = false) {
  *jobs = make_jobs(tdfg, sub_batches, /*repeats=*/1, /*warmup=*/0, sixteen_bit_kernels);
  jobs->copy_sizes = {int64_t{64} << 10, int64_t{1} << 20, int64_t{4} << 20};
  { std::ofstream(dir + "/jobs.json") << rt::jobs_to_json(*jobs); }
  RunResult run = run_command(std::string(MPLAN_KERNEL_PROFILER_PATH) + " " + dir + "/jobs.json -o " + dir +
                              "/times.json --quiet " + flags);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::ifstream in(dir + "/times.json");
  std::stringstream text;
  text << in.rdbuf();
  std::string error;
  ASSERT_TRUE(rt::parse_results(text.str(), results, &error)) << error;
  EXPECT_EQ(results->backend.backend, "cpu");
  EXPECT_EQ(results->results.size(), jobs->jobs.size());
}
#endif

TEST(KernelProfilerPipeline, JobsTimedAndMergedPlanAVerifiedProgram) {
#ifndef MPLAN_KERNEL_PROFILER_PATH
  GTEST_SKIP() << "the kernel profiler is not part of this build";
#else
  Result<Model> model = load_model(source_dir() + "/examples/models/cifar_small.yaml");
  ASSERT_TRUE(model.ok());
  const Tdfg tdfg = build_tdfg(*model);
  const std::vector<int64_t> sub_batches = {8, 32};
  const std::string dir = work_dir("kernel-profiler-pipeline");
  rt::JobFile jobs;
  rt::ResultFile results;
  profile_jobs(tdfg, sub_batches, dir, &jobs, &results);
  if (HasFatalFailure()) return;
  // Every conv job lists the CPU runtime's algorithms, each with its workspace.
  int conv_jobs = 0;
  for (const rt::JobResult& r : results.results) {
    EXPECT_EQ(r.error, "") << r.key;
    if (r.key.rfind("conv ", 0) != 0) continue;
    ++conv_jobs;
    EXPECT_GE(r.options.size(), 2u) << r.key;
  }
  EXPECT_GT(conv_jobs, 0);
  Result<Profile> profile = merge_results(tdfg, results, sub_batches, dir + "/times.json");
  ASSERT_TRUE(profile.ok()) << profile.error().to_string();
  auto cost = RecordedCostModel::create(*profile, tdfg, {}, "profile.json");
  ASSERT_TRUE(cost.ok()) << cost.error().to_string();
  EXPECT_NE((*cost)->describe().find("measured (cpu"), std::string::npos) << (*cost)->describe();
  // Copies both ways at once are timed and the profile says what they had.
  EXPECT_NE(profile->cost_model.find("GB/s each both ways at once"), std::string::npos) << profile->cost_model;
  // The profiler measures fp32: the profile and its plans say so.
  EXPECT_EQ(profile->math_mode, "fp32");
  EXPECT_EQ((*cost)->info().math_mode, "fp32");
  EXPECT_EQ((*cost)->info().kind, "measured");
  PlanOptions options;
  options.budget_bytes = int64_t{64} << 20;
  Result<Plan> plan = plan_iteration(tdfg, **cost, options).take_plan();
  ASSERT_TRUE(plan.ok()) << plan.error().to_string();
  EXPECT_TRUE(verify_plan(*plan, tdfg).empty());
  // The duplex slowdown is the both-ways time of the largest copy timed so
  // over the slower direction's alone, at least 1 (planner/streams.h uses it).
  // The added sizes' times stay far above the measured ones (the copies'
  // line must still grow with the size, however slow this machine was).
  double slowest = 0;
  for (const rt::CopyTiming& c : results.copies)
    slowest = std::max({slowest, c.host_to_device_ms, c.device_to_host_ms});
  const double base = 1.0 + 100 * slowest;
  rt::ResultFile timed = results;
  rt::CopyTiming largest;
  largest.bytes = int64_t{64} << 20;
  largest.host_to_device_ms = base;
  largest.device_to_host_ms = 1.25 * base;
  largest.both_directions_ms = 1.5 * base;
  timed.copies.push_back(largest);
  Result<Profile> slowed = merge_results(tdfg, timed, sub_batches, "times.json");
  ASSERT_TRUE(slowed.ok()) << slowed.error().to_string();
  EXPECT_DOUBLE_EQ(slowed->duplex_slowdown, 1.2);
  EXPECT_NE(slowed->cost_model.find("duplex slowdown 1.20"), std::string::npos) << slowed->cost_model;
  // Only the largest copy timed both ways counts: a smaller one with another ratio is left out.
  rt::CopyTiming smaller = largest;
  smaller.bytes = int64_t{32} << 20;
  smaller.both_directions_ms = 3.0 * base;
  timed.copies.insert(timed.copies.begin(), smaller);
  Result<Profile> largest_only = merge_results(tdfg, timed, sub_batches, "times.json");
  ASSERT_TRUE(largest_only.ok()) << largest_only.error().to_string();
  EXPECT_DOUBLE_EQ(largest_only->duplex_slowdown, 1.2);
  timed.copies.back().both_directions_ms = 1.1 * base;  // faster than the slower direction alone: full duplex
  Result<Profile> full_duplex = merge_results(tdfg, timed, sub_batches, "times.json");
  ASSERT_TRUE(full_duplex.ok()) << full_duplex.error().to_string();
  EXPECT_EQ(full_duplex->duplex_slowdown, 1.0);
  // A result file that lacks a task is refused, naming it.
  results.results.pop_back();
  Result<Profile> partial = merge_results(tdfg, results, sub_batches, "times.json");
  ASSERT_FALSE(partial.ok());
  EXPECT_NE(partial.error().message.find("no result"), std::string::npos) << partial.error().message;
#endif
}

// The kernels run in the model's math: a tf32 model's job file says tf32,
// the CPU backend (fp32 only) refuses it rather than timing fp32 under its
// name, and results timed in fp32 do not merge into a tf32 model's profile.
// Results in tf32 give a profile and plans in tf32.
TEST(KernelProfilerPipeline, TheJobsAndTheProfileAreInTheModelsMath) {
#ifndef MPLAN_KERNEL_PROFILER_PATH
  GTEST_SKIP() << "the kernel profiler is not part of this build";
#else
  Result<Model> model = load_model(source_dir() + "/examples/models/cifar_small.yaml");
  ASSERT_TRUE(model.ok());
  const Tdfg fp32_tdfg = build_tdfg(*model);
  const std::string dir = work_dir("kernel-profiler-math");
  rt::JobFile jobs;
  rt::ResultFile results;
  profile_jobs(fp32_tdfg, {4}, dir, &jobs, &results);
  if (HasFatalFailure()) return;
  EXPECT_EQ(jobs.math, "fp32");
  EXPECT_EQ(results.math, "fp32");

  Model tf32_model = *model;
  tf32_model.math = "tf32";
  const Tdfg tf32_tdfg = build_tdfg(tf32_model);
  rt::JobFile tf32_jobs = make_jobs(tf32_tdfg, {4}, 1, 0);
  EXPECT_EQ(tf32_jobs.math, "tf32");
  { std::ofstream(dir + "/tf32-jobs.json") << rt::jobs_to_json(tf32_jobs); }
  RunResult refused = run_command(std::string(MPLAN_KERNEL_PROFILER_PATH) + " " + dir + "/tf32-jobs.json -o " + dir +
                                  "/tf32-times.json --quiet");
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("math tf32"), std::string::npos) << refused.output;

  Result<Profile> mismatch = merge_results(tf32_tdfg, results, {4}, "times.json");
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.error().message.find("timed in fp32 math, but the model asks for tf32"), std::string::npos)
      << mismatch.error().message;
  rt::ResultFile tf32_results = results;
  tf32_results.math = "tf32";
  Result<Profile> tf32_profile = merge_results(tf32_tdfg, tf32_results, {4}, "times.json");
  ASSERT_TRUE(tf32_profile.ok()) << tf32_profile.error().to_string();
  EXPECT_EQ(tf32_profile->math_mode, "tf32");
  // A model that leaves the math to the GPU takes the results' math.
  Result<Profile> default_math = merge_results(fp32_tdfg, tf32_results, {4}, "times.json");
  ASSERT_TRUE(default_math.ok()) << default_math.error().to_string();
  EXPECT_EQ(default_math->math_mode, "tf32");
#endif
}

// Every op's jobs run: tasks without a kernel (an add's and a concat's BP1
// pass the gradient through) and kernels with their own scratch (batch norm's
// BP1 per-channel sums, which a job once gave a slot of 0 bytes: found on the
// first GPU run). The merged profile prices batch norm's BP1 with that scratch.
TEST(KernelProfilerPipeline, EveryOpsJobsRunAndMerge) {
#ifndef MPLAN_KERNEL_PROFILER_PATH
  GTEST_SKIP() << "the kernel profiler is not part of this build";
#else
  Result<Model> model = load_model(source_dir() + "/examples/models/every_op.yaml");
  ASSERT_TRUE(model.ok());
  const Tdfg tdfg = build_tdfg(*model);
  const std::vector<int64_t> sub_batches = {2, 8};
  rt::JobFile jobs;
  rt::ResultFile results;
  profile_jobs(tdfg, sub_batches, work_dir("kernel-profiler-every-op"), &jobs, &results);
  if (HasFatalFailure()) return;
  // Every task runs a kernel, an add's and a concat's BP1 too (they copy
  // the gradient to each input's; a job without one timed them at 0 ms).
  for (const rt::Job& job : jobs.jobs) EXPECT_FALSE(job.calls.empty()) << job.key;
  for (const rt::JobResult& r : results.results) {
    EXPECT_EQ(r.error, "") << r.key;
    ASSERT_FALSE(r.options.empty()) << r.key;
    EXPECT_GT(r.options.front().time_ms, 0.0) << r.key;
    if (r.key.rfind("batchnorm ", 0) == 0 && r.key.find(" BP1@") != std::string::npos) {
      EXPECT_GT(r.options.front().workspace_bytes, 0) << r.key;
    }
  }
  Result<Profile> profile = merge_results(tdfg, results, sub_batches, "times.json");
  ASSERT_TRUE(profile.ok()) << profile.error().to_string();
  // A batch norm's recomputation (its normalisation alone) is timed apart
  // and recorded under "recompute".
  int recomputations = 0;
  for (const ProfileEntry& e : profile->entries) {
    if (e.signature.rfind("batchnorm ", 0) != 0) continue;
    ++recomputations;
    ASSERT_EQ(e.tasks.count(kRecomputeKind), 1u) << e.signature;
    EXPECT_EQ(e.tasks.at(kRecomputeKind).size(), sub_batches.size()) << e.signature;
  }
  EXPECT_GT(recomputations, 0);
#endif
}

// A 16-bit model's jobs are its program's calls: each kernel between the
// casts of its operands, in slots of its blocks' types, and with the CUDA
// program's 16-bit kernels where asked (the CPU build runs those too). They
// run without an error, merge into a profile in the model's precision, and
// plan a verified iteration.
TEST(KernelProfilerPipeline, SixteenBitJobsRunAsTheirProgramsCallThem) {
#ifndef MPLAN_KERNEL_PROFILER_PATH
  GTEST_SKIP() << "the kernel profiler is not part of this build";
#else
  for (const char* precision : {"bf16", "fp16"})
    for (bool sixteen_bit_kernels : {false, true}) {
      SCOPED_TRACE(std::string(precision) + (sixteen_bit_kernels ? ", 16-bit kernels" : ", casts"));
      Result<Model> model =
          parse_model(file_text(source_dir() + "/examples/models/every_op.yaml") + "\nprecision: " + precision + "\n",
                      "every_op.yaml");
      ASSERT_TRUE(model.ok()) << model.error().to_string();
      const Tdfg tdfg = build_tdfg(*model);
      const std::vector<int64_t> sub_batches = {2, 8};
      rt::JobFile jobs;
      rt::ResultFile results;
      profile_jobs(tdfg, sub_batches, work_dir(std::string("kernel-profiler-") + precision), &jobs, &results, "",
                   sixteen_bit_kernels);
      if (HasFatalFailure()) return;
      EXPECT_EQ(jobs.math, precision);
      EXPECT_EQ(results.math, precision);
      std::set<std::string> kernels;
      for (const rt::Job& job : jobs.jobs)
        for (const rt::KernelCall& call : job.calls) kernels.insert(rt::kernel_name(call.kernel));
      EXPECT_EQ(kernels.count("cast_to_float"), 1u);
      EXPECT_EQ(kernels.count("cast_from_float"), 1u);
      EXPECT_EQ(kernels.count("conv_forward_16"), sixteen_bit_kernels ? 1u : 0u);
      EXPECT_EQ(kernels.count("linear_backward_weights_16"), sixteen_bit_kernels ? 1u : 0u);
      EXPECT_EQ(kernels.count("conv_forward"), sixteen_bit_kernels ? 0u : 1u);
      for (const rt::JobResult& r : results.results) {
        EXPECT_EQ(r.error, "") << r.key;
        if (r.key.rfind("conv ", 0) == 0) EXPECT_GE(r.options.size(), 2u) << r.key << ": its algorithms";
      }
      Result<Profile> profile = merge_results(tdfg, results, sub_batches, "times.json");
      ASSERT_TRUE(profile.ok()) << profile.error().to_string();
      EXPECT_EQ(profile->math_mode, precision);
      auto cost = RecordedCostModel::create(*profile, tdfg, {}, "profile.json");
      ASSERT_TRUE(cost.ok()) << cost.error().to_string();
      PlanOptions options;
      options.budget_bytes = int64_t{64} << 20;
      Result<Plan> plan = plan_iteration(tdfg, **cost, options).take_plan();
      ASSERT_TRUE(plan.ok()) << plan.error().to_string();
      EXPECT_TRUE(verify_plan(*plan, tdfg).empty());
    }
#endif
}

// --cold-cache MIB overwrites that much device memory before every timed run
// (the GPU's L2 is the point; here the CPU's caches): every job still runs
// and merges. A size that is not one is refused.
TEST(KernelProfilerPipeline, ColdCacheRunsEveryJob) {
#ifndef MPLAN_KERNEL_PROFILER_PATH
  GTEST_SKIP() << "the kernel profiler is not part of this build";
#else
  Result<Model> model = load_model(source_dir() + "/examples/models/cifar_small.yaml");
  ASSERT_TRUE(model.ok());
  const Tdfg tdfg = build_tdfg(*model);
  const std::string dir = work_dir("kernel-profiler-cold-cache");
  rt::JobFile jobs;
  rt::ResultFile results;
  profile_jobs(tdfg, {4}, dir, &jobs, &results, "--cold-cache 8");
  if (HasFatalFailure()) return;
  for (const rt::JobResult& r : results.results) EXPECT_EQ(r.error, "") << r.key;
  EXPECT_TRUE(merge_results(tdfg, results, {4}, "times.json").ok());
  // Said on stderr (without --quiet): the flush happened, or why not.
  RunResult said = run_command(std::string(MPLAN_KERNEL_PROFILER_PATH) + " " + dir + "/jobs.json -o " + dir +
                               "/said.json --cold-cache 8");
  ASSERT_EQ(said.exit_code, 0) << said.output;
  EXPECT_NE(said.output.find("after 8 MiB of device memory are overwritten"), std::string::npos) << said.output;
  RunResult warm = run_command(std::string(MPLAN_KERNEL_PROFILER_PATH) + " " + dir + "/jobs.json -o " + dir +
                               "/warm.json");
  EXPECT_EQ(warm.output.find("overwritten"), std::string::npos) << warm.output;
  for (const char* bad : {"0", "x", "65537", ""}) {
    RunResult run = run_command(std::string(MPLAN_KERNEL_PROFILER_PATH) + " " + dir + "/jobs.json -o " + dir +
                                "/bad.json --cold-cache " + bad);
    EXPECT_EQ(run.exit_code, 2) << bad << ": " << run.output;
    EXPECT_NE(run.output.find("--cold-cache"), std::string::npos) << run.output;
  }
#endif
}

}  // namespace
}  // namespace mplan::e2e
