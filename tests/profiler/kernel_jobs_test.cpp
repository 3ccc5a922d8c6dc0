// The job file of `mplan profile --jobs` (profiler/kernel_jobs.h): each job
// must run the kernels the program runs for its task, or a measured profile
// times something else. A task shape that dropped the layer's inputs once
// gave every BP1 of a multi-input op (add, concat, mul, matmul, attention) no
// kernel, and measured profiles timed it at 0 ms.

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "ops/op_table.h"
#include "frontend/parse.h"
#include "profiler/kernel_jobs.h"
#include "profiler/profile.h"
#include "profiler/signature.h"
#include "profiler/task_invocation.h"
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

// add(a, b) and add(sum, sum): the same shapes, one input read twice.
const char* kTwice = R"(
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
)";

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

// The update's job runs the program's update: one sgd_step per layer with
// parameters (frontend update_invocation), over all parameters once, so that
// a measured update pays every launch (one merged call timed 7 us for 79
// layers on the H200).
void expect_update_job_as_program(const Model& model) {
  const Tdfg tdfg = build_tdfg(model);
  const Invocation program = update_invocation(model);
  const rt::JobFile jobs = make_jobs(tdfg, {2}, 1, 0);
  const rt::Job* update = find_job(jobs, "update ", "@0");
  ASSERT_NE(update, nullptr);
  ASSERT_EQ(update->calls.size(), program.calls.size());
  const bool momentum = model.optimizer.momentum > 0, adamw = model.optimizer.adamw();
  int64_t next = 0;
  for (const rt::KernelCall& call : update->calls) {
    EXPECT_EQ(call.kernel, adamw ? rt::Kernel::adamw_step : rt::Kernel::sgd_step);
    if (adamw) {
      // W, dW, exp_avg and exp_avg_sq (after every exp_avg) sliced alike.
      EXPECT_EQ(call.args[0].offset_elements, next);
      EXPECT_EQ(call.args[2].offset_elements, next);
      EXPECT_EQ(call.args[3].offset_elements, model.parameter_count() + next);
      next += call.args[4].integer;
      continue;
    }
    // Weights, their gradients and the momentum sliced alike: in order, no
    // gap, no overlap, at least one parameter each.
    EXPECT_EQ(call.args[0].offset_elements, next);
    EXPECT_EQ(call.args[1].offset_elements, next);
    EXPECT_EQ(call.args[2].kind, momentum ? rt::ArgKind::tensor : rt::ArgKind::null_pointer);
    if (momentum) {
      EXPECT_EQ(call.args[2].offset_elements, next);
    }
    EXPECT_GE(call.args[3].integer, 1);
    next += call.args[3].integer;
  }
  EXPECT_EQ(next, model.parameter_count());
}

TEST(KernelJobs, TheUpdateJobLaunchesOneStepPerWeightedLayerAsTheProgramDoes) {
  for (const char* name : {"cifar_small", "resnet50", "every_op"}) {
    SCOPED_TRACE(name);
    Result<Model> model = load_model(std::string(MPLAN_SOURCE_DIR) + "/examples/models/" + name + ".yaml");
    ASSERT_TRUE(model.ok()) << model.error().to_string();
    expect_update_job_as_program(*model);
  }
  // Six weighted layers with 13 parameters in all, no momentum: slices of
  // ceil(13 / 6) would make five calls.
  SCOPED_TRACE("tiny");
  expect_update_job_as_program(test::parse_or_die(R"(
name: tiny
input: [1, 2, 2]
batch: 2
classes: 2
optimizer: {kind: sgd, lr: 0.1}
layers:
  - {name: c1, op: conv, out: 1, kernel: 1, bias: false}
  - {name: c2, op: conv, out: 1, kernel: 1, bias: false}
  - {name: c3, op: conv, out: 1, kernel: 1, bias: false}
  - {name: c4, op: conv, out: 1, kernel: 1, bias: false}
  - {name: c5, op: conv, out: 1, kernel: 1, bias: false}
  - {name: flat, op: flatten}
  - {name: fc, op: linear, out: 2, bias: false}
  - {name: loss, op: softmax_xent}
)"));
  SCOPED_TRACE("adamw");
  expect_update_job_as_program(test::parse_or_die(R"(
name: tiny_adamw
input: [1, 2, 2]
batch: 2
classes: 2
optimizer: {kind: adamw, lr: 0.001}
layers:
  - {name: c1, op: conv, out: 2, kernel: 1}
  - {name: flat, op: flatten}
  - {name: fc, op: linear, out: 2}
  - {name: loss, op: softmax_xent}
)"));
}

// add(x, x) reads one layer twice: one gradient, copied then added to. Its
// signature says so, so it never shares a job with add(x, y), whose two
// gradients are both written.
TEST(KernelJobs, AnInputReadTwiceIsAddedToAndKeepsItsOwnSignature) {
  const Model model = test::parse_or_die(kTwice);
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

// A profile that records 0 ms for tasks that run kernels (as one whose jobs
// ran no kernel for add's BP1 does) is named by op and task, for compile's
// and merge's warning; once they are timed, nothing is said. The test sets
// the times itself, so that it does not depend on the committed file staying
// as measured.
TEST(KernelJobs, AProfileThatTimedKernelsAtZeroIsNamed) {
  Result<Model> model = load_model(std::string(MPLAN_SOURCE_DIR) + "/examples/models/resnet50.yaml");
  ASSERT_TRUE(model.ok()) << model.error().to_string();
  const Tdfg tdfg = build_tdfg(*model);
  Result<Profile> profile = load_profile(std::string(MPLAN_SOURCE_DIR) + "/examples/profiles/resnet50-h200.json");
  ASSERT_TRUE(profile.ok()) << profile.error().to_string();
  auto set_times = [&](bool zero_add_bp1) {
    for (ProfileEntry& e : profile->entries)
      for (auto& [kind, series] : e.tasks)
        for (auto& [b, options] : series)
          for (TaskOption& o : options)
            o.time_ms = zero_add_bp1 && kind == "BP1" && e.signature.rfind("add ", 0) == 0 ? 0.0 : 0.01;
  };
  set_times(true);
  EXPECT_EQ(untimed_kernel_tasks(*profile, tdfg), (std::vector<std::string>{"add BP1 x16"}));
  set_times(false);
  EXPECT_TRUE(untimed_kernel_tasks(*profile, tdfg).empty());
}

// Tasks of one signature share a cost-model key, and only they: the key's
// shape of every task is the task's own, add(x, x) and add(x, y) included
// (task_fingerprint hashes the inputs' positions as describe_task keeps them).
TEST(KernelJobs, EveryTaskGetsTheKeyOfItsOwnSignature) {
  const Model model = test::parse_or_die(kTwice);
  const Tdfg tdfg = build_tdfg(model);
  TaskKeyCache keys;
  std::set<int32_t> distinct;
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t) {
    const int32_t key = keys.key(tdfg, t);
    EXPECT_EQ(task_signature(keys.shape(key)), task_signature(describe_task(tdfg, t))) << tdfg.tasks[t].name;
    distinct.insert(key);
  }
  std::set<std::string> signatures;
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t)
    signatures.insert(task_signature(describe_task(tdfg, t)));
  EXPECT_EQ(distinct.size(), signatures.size());
}

// An op's own scratch (attention's BP1) is the task's workspace whatever the
// profile records: the H200's every_vision_op profile, measured when that
// job ran no kernel, says 0 bytes, and the program's kernel needs some.
TEST(KernelJobs, AnOpsScratchIsGivenWhateverTheProfileRecords) {
  Result<Model> model = load_model(std::string(MPLAN_SOURCE_DIR) + "/examples/models/every_vision_op.yaml");
  ASSERT_TRUE(model.ok()) << model.error().to_string();
  const Tdfg tdfg = build_tdfg(*model);
  const std::string file = std::string(MPLAN_SOURCE_DIR) + "/examples/profiles/every_vision_op-h200.json";
  Result<Profile> profile = load_profile(file);
  ASSERT_TRUE(profile.ok()) << profile.error().to_string();
  for (ProfileEntry& e : profile->entries)
    for (auto& [kind, series] : e.tasks)
      for (auto& [b, options] : series)
        for (TaskOption& o : options) o.workspace_bytes = 0;
  auto cost = RecordedCostModel::create(*profile, tdfg, {}, file);
  ASSERT_TRUE(cost.ok()) << cost.error().to_string();
  int with_scratch = 0;
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t) {
    const TaskShape shape = describe_task(tdfg, t);
    for (int64_t b : {2, 3, 8}) {
      const int64_t scratch = task_scratch_bytes(shape, b);
      if (scratch == 0) continue;
      ++with_scratch;
      for (const TaskOption& o : (*cost)->options(tdfg, t, b))
        EXPECT_GE(o.workspace_bytes, scratch) << tdfg.tasks[t].name << " at " << b;
    }
  }
  EXPECT_GT(with_scratch, 0);
}

}  // namespace
}  // namespace mplan
