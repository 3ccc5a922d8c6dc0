// The job file of `mplan profile --jobs` (profiler/kernel_jobs.h): each job
// must run the kernels the program runs for its task, or a measured profile
// times something else. Until 2026-11-27 every BP1 of a multi-input op (add,
// concat, mul, matmul, attention) had no kernel, because the task's shape
// dropped the layer's inputs, and every measured profile timed it at 0 ms
// (docs/gpu-validation.md, fourth H200 session).

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "frontend/parse.h"
#include "profiler/kernel_jobs.h"
#include "profiler/profile.h"
#include "profiler/signature.h"
#include "tdfg/tdfg.h"
#include "tests/profiler/profiler_test_models.h"

namespace mplan {
namespace {

const rt::Job* find_job(const rt::JobFile& jobs, const std::string& prefix, const std::string& suffix) {
  for (const rt::Job& job : jobs.jobs)
    if (job.key.rfind(prefix, 0) == 0 && job.key.size() >= suffix.size() &&
        job.key.compare(job.key.size() - suffix.size(), suffix.size(), suffix) == 0)
      return &job;
  return nullptr;
}

int64_t count_role(const rt::Job& job, const std::string& role) {
  return std::count(job.slot_roles.begin(), job.slot_roles.end(), role);
}

// Every job of the example models that use every op runs at least one
// kernel, and a multi-input op's BP1 writes each of its inputs' gradients.
TEST(KernelJobs, EveryJobOfTheExampleModelsRunsAKernel) {
  for (const char* name : {"every_op", "every_vision_op", "cifar_inception", "cifar_densenet", "resnet50"}) {
    SCOPED_TRACE(name);
    Result<Model> model = load_model(std::string(MPLAN_SOURCE_DIR) + "/examples/models/" + name + ".yaml");
    ASSERT_TRUE(model.ok()) << model.error().to_string();
    const Tdfg tdfg = build_tdfg(*model);
    const rt::JobFile jobs = make_jobs(tdfg, {2}, 1, 0);
    ASSERT_FALSE(jobs.jobs.empty());
    for (const rt::Job& job : jobs.jobs) EXPECT_FALSE(job.calls.empty()) << job.key << " runs no kernel";
    for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t) {
      const TaskShape shape = describe_task(tdfg, t);
      if (shape.kind != TaskKind::BP1 || shape.inputs.size() < 2) continue;
      const rt::Job* job = find_job(jobs, task_signature(shape) + "@", "@2");
      ASSERT_NE(job, nullptr) << task_signature(shape);
      EXPECT_EQ(count_role(*job, "input_gradient"), static_cast<int64_t>(shape.inputs.size())) << job->key;
    }
  }
}

// add(x, x) reads one layer twice: one gradient, copied then added to. Its
// signature says so, so it never shares a job with add(x, y), whose two
// gradients are both written.
TEST(KernelJobs, AnInputReadTwiceIsAddedToAndKeepsItsOwnSignature) {
  const Model model = test::parse_or_die(R"(
name: twice
input: [4, 6, 6]
batch: 4
classes: 3
layers:
  - {name: a, op: conv, out: 4, kernel: 3, pad: 1}
  - {name: b, op: conv, out: 4, kernel: 3, pad: 1, in: input}
  - {name: sum, op: add, in: [a, b]}
  - {name: double, op: add, in: [sum, sum]}
  - {name: gap, op: global_avgpool}
  - {name: flat, op: flatten}
  - {name: fc, op: linear, out: 3}
  - {name: loss, op: softmax_xent}
)");
  const Tdfg tdfg = build_tdfg(model);
  const rt::JobFile jobs = make_jobs(tdfg, {4}, 1, 0);
  const rt::Job* once = find_job(jobs, "add in=[4, 6, 6]+[4, 6, 6] out=[4, 6, 6] BP1", "@4");
  const rt::Job* twice = find_job(jobs, "add in=[4, 6, 6]+[4, 6, 6] out=[4, 6, 6] inputs=0+0 BP1", "@4");
  ASSERT_NE(once, nullptr);
  ASSERT_NE(twice, nullptr);
  auto adds = [](const rt::Job& job) {
    std::vector<bool> flags;
    for (const rt::KernelCall& call : job.calls) flags.push_back(call.args.back().flag);
    return flags;
  };
  EXPECT_EQ(adds(*once), (std::vector<bool>{false, false})) << once->key;
  EXPECT_EQ(adds(*twice), (std::vector<bool>{false, true})) << twice->key;
}

// A profile measured before the fix (ResNet-50 on the H200, committed as
// measured) records its 16 adds' BP1 at 0 ms: compile and merge warn of it,
// naming the op and task. Once they are timed, nothing is said.
TEST(KernelJobs, AProfileThatTimedKernelsAtZeroIsNamed) {
  Result<Model> model = load_model(std::string(MPLAN_SOURCE_DIR) + "/examples/models/resnet50.yaml");
  ASSERT_TRUE(model.ok()) << model.error().to_string();
  const Tdfg tdfg = build_tdfg(*model);
  Result<Profile> profile = load_profile(std::string(MPLAN_SOURCE_DIR) + "/examples/profiles/resnet50-h200.json");
  ASSERT_TRUE(profile.ok()) << profile.error().to_string();
  EXPECT_EQ(untimed_kernel_tasks(*profile, tdfg), (std::vector<std::string>{"add BP1 x16"}));
  for (ProfileEntry& e : profile->entries)
    for (auto& [kind, series] : e.tasks)
      for (auto& [b, options] : series)
        for (TaskOption& o : options)
          if (o.time_ms == 0) o.time_ms = 0.01;
  EXPECT_TRUE(untimed_kernel_tasks(*profile, tdfg).empty());
}

}  // namespace
}  // namespace mplan
