// Data-parallel plans on a machine of several GPUs (docs/multi-gpu.md).
// The contention model, as multi-GPU vDNN (papers/multi-gpu-vdnn.txt,
// Section III) describes it: two GPUs on one PCIe switch that copy at once
// each take twice as long; on two switches each copy runs at full speed; the
// all-reduce delays an offload that shares its link. One rank alone re-timed
// is its plan. The gradient buckets follow the backward pass and cover every
// weight gradient once; the verifier rejects buckets that do not. The paper's
// staggering beats naive swapping, and mplan's search is at least as fast.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <set>

#include "frontend/parse.h"
#include "planner/data_parallel/data_parallel.h"
#include "planner/data_parallel/gradient_buckets.h"
#include "planner/data_parallel/rank_timing.h"
#include "planner/plan_json.h"
#include "planner/verify.h"
#include "profiler/analytic_model.h"
#include "profiler/device.h"
#include "profiler/machine.h"
#include "tdfg/tdfg.h"

namespace mplan {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

Device p100() {
  Result<Device> device = load_device("p100");
  EXPECT_TRUE(device.ok());
  return *device;
}

// GPUs of the P100 on `switches` switches whose uplinks carry what one GPU's link does.
Machine switched_machine(int gpus_per_switch, int switches) {
  const Device d = p100();
  std::string text = "name: test\ndescription: test\nswitches:\n";
  for (int s = 0; s < switches; ++s)
    text += fmt::format("  - {{name: s{}, uplink_gb_per_s: {}}}\n", s, d.device_to_host_bytes_per_s / 1e9);
  text += "numa:\n  - {host_memory_gb_per_s: 10000}\ngpus:\n";
  for (int s = 0; s < switches; ++s)
    text += fmt::format("  - {{device: p100, switch: s{}, numa: 0, count: {}}}\n", s, gpus_per_switch);
  Result<Machine> machine = parse_machine(text, "test.yaml");
  EXPECT_TRUE(machine.ok()) << machine.error().to_string();
  return *machine;
}

// A plan of one offload of `bytes` on the d2h stream, planned at the GPU
// link's full speed, after `compute_ms` of compute (task 0) if > 0.
Plan offload_plan(int64_t bytes, double compute_ms) {
  const double copy_ms = static_cast<double>(bytes) / p100().device_to_host_bytes_per_s * 1e3;
  Plan plan;
  plan.batch = 1;
  plan.sub_batch = 1;
  plan.sub_batches = {1};
  plan.buffers.push_back(Buffer{0, 0, kNoTask, 0, bytes, 0, false});
  plan.host_slots.push_back(HostSlot{0, 0, 0, bytes, 0});
  double at = 0;
  if (compute_ms > 0) {
    Step compute;
    compute.index = 0;
    compute.kind = StepKind::compute;
    compute.stream = StreamKind::compute;
    compute.task = 0;
    compute.records = 0;
    compute.end_ms = compute_ms;
    plan.steps.push_back(compute);
    plan.event_count = 1;
    at = compute_ms;
  }
  Step copy;
  copy.index = static_cast<int32_t>(plan.steps.size());
  copy.kind = StepKind::offload;
  copy.stream = StreamKind::d2h;
  copy.buffer = 0;
  copy.host_slot = 0;
  if (compute_ms > 0) copy.waits = {0};
  copy.start_ms = at;
  copy.end_ms = at + copy_ms;
  plan.steps.push_back(copy);
  return plan;
}

Tdfg one_task_graph() {
  Tdfg tdfg;
  tdfg.tasks.resize(1);
  tdfg.tasks[0].name = "FP(a)";
  return tdfg;
}

RanksTiming time_same_plan(const Machine& machine, const Plan& plan, int ranks,
                           const std::vector<GradientBucket>& buckets) {
  std::vector<RankSchedule> schedules(static_cast<size_t>(ranks), RankSchedule{&plan, &buckets});
  return time_ranks(one_task_graph(), machine, schedules);
}

double copy_ms(const RanksTiming& timing, int rank, int step) {
  return timing.ranks[rank].end_ms[step] - timing.ranks[rank].start_ms[step];
}

TEST(Contention, TwoGpusOnOneSwitchCopyingAtOnceEachTakeTwiceAsLong) {
  const Plan plan = offload_plan(kGiB, 0);
  const double alone = plan.steps[0].end_ms;
  const RanksTiming one = time_same_plan(switched_machine(2, 1), plan, 1, {});
  EXPECT_NEAR(one.step_ms, alone, 1e-6 * alone);
  const RanksTiming two = time_same_plan(switched_machine(2, 1), plan, 2, {});
  EXPECT_NEAR(copy_ms(two, 0, 0), 2 * alone, 1e-6 * alone);
  EXPECT_NEAR(copy_ms(two, 1, 0), 2 * alone, 1e-6 * alone);
  ASSERT_FALSE(two.links.empty());
  EXPECT_EQ(two.links[0].kind, "PCIe switch uplink");
  EXPECT_EQ(two.links[0].peak_transfers, 2);
}

TEST(Contention, OnTwoSwitchesEachCopyRunsAtFullSpeed) {
  const Plan plan = offload_plan(kGiB, 0);
  const double alone = plan.steps[0].end_ms;
  const RanksTiming two = time_same_plan(switched_machine(1, 2), plan, 2, {});
  EXPECT_NEAR(copy_ms(two, 0, 0), alone, 1e-6 * alone);
  EXPECT_NEAR(copy_ms(two, 1, 0), alone, 1e-6 * alone);
  // Four GPUs on two switches: two per uplink, twice as long each.
  const RanksTiming four = time_same_plan(switched_machine(2, 2), plan, 4, {});
  for (int r = 0; r < 4; ++r) EXPECT_NEAR(copy_ms(four, r, 0), 2 * alone, 1e-6 * alone) << r;
}

TEST(Contention, TheAllReduceDelaysAnOffloadThatSharesItsLink) {
  // Each GPU with a link of its own: only the ring's hops share them.
  const Machine machine = standalone_machine(p100(), 2);
  const Plan plan = offload_plan(kGiB, 1.0);
  const double alone = plan.steps[1].end_ms - plan.steps[1].start_ms;
  const RanksTiming without = time_same_plan(machine, plan, 2, {});
  EXPECT_NEAR(copy_ms(without, 0, 1), alone, 1e-6 * alone);
  GradientBucket bucket;
  bucket.blocks = {0};
  bucket.bytes = 2 * kGiB;
  bucket.ready_after_step = 0;
  const RanksTiming with = time_same_plan(machine, plan, 2, {bucket});
  // The hop out of GPU 0 crosses its PCIe link to the host with the offload:
  // they share it while both run.
  EXPECT_GT(copy_ms(with, 0, 1), 1.5 * alone);
  EXPECT_GT(with.buckets[0].end_ms, with.buckets[0].start_ms);
  EXPECT_GE(with.buckets[0].start_ms, 1.0);
}

// A small CNN whose plans offload at a tight budget.
constexpr const char* kNet =
    "name: net\ninput: [3, 64, 64]\nbatch: 32\nclasses: 10\nlayers:\n"
    "  - {name: conv1, op: conv, out: 32, kernel: 3, pad: 1}\n"
    "  - {name: relu1, op: relu}\n"
    "  - {name: conv2, op: conv, out: 32, kernel: 3, pad: 1}\n"
    "  - {name: relu2, op: relu}\n"
    "  - {name: pool, op: pool, mode: max, kernel: 2, stride: 2}\n"
    "  - {name: conv3, op: conv, out: 64, kernel: 3, pad: 1}\n"
    "  - {name: relu3, op: relu}\n"
    "  - {name: gap, op: global_avgpool}\n"
    "  - {name: flat, op: flatten}\n"
    "  - {name: fc, op: linear, out: 10}\n"
    "  - {name: loss, op: softmax_xent}\n";

struct Net {
  Model model;
  Tdfg tdfg;
};

Net net() {
  Result<Model> model = parse_model(kNet, "net.yaml");
  EXPECT_TRUE(model.ok()) << (model.ok() ? "" : model.error().to_string());
  Net n{*model, {}};
  n.tdfg = build_tdfg(n.model);
  return n;
}

PlanResult plan_at(const Net& n, const CostModel& cost, double budget_fraction, int64_t sub_batch = 0,
                   bool recompute = true) {
  PlanOptions options;
  options.recompute = recompute;
  options.budget_bytes = static_cast<int64_t>(budget_fraction * ideal_budget_bytes(n.tdfg, cost, 32));
  options.sub_batch = sub_batch;
  PlanResult r = plan_iteration(n.tdfg, cost, options);
  EXPECT_TRUE(r.feasible) << r.note;
  return r;
}

TEST(RankTiming, OneRankAloneIsItsPlan) {
  const Net n = net();
  const AnalyticCostModel cost(p100());
  for (const double fraction : {1.0, 0.6, 0.45}) {
    const PlanResult planned = plan_at(n, cost, fraction, 32, /*recompute=*/false);
    if (fraction < 0.5) EXPECT_GT(planned.plan.summary.offload_count, 0) << "a plan with copies";
    const std::vector<GradientBucket> buckets = gradient_buckets(n.tdfg, planned.plan, kDefaultBucketBytes);
    const RanksTiming timing = time_ranks(n.tdfg, standalone_machine(p100(), 1), {{&planned.plan, &buckets}});
    const double planned_ms = planned.plan.summary.simulated_ms;
    EXPECT_NEAR(timing.step_ms, planned_ms, 1e-6 * planned_ms) << fraction;
    for (const Step& s : planned.plan.steps) {
      if (s.kind == StepKind::alloc || s.kind == StepKind::free) continue;
      EXPECT_NEAR(timing.ranks[0].start_ms[s.index], s.start_ms, 1e-6 * planned_ms) << s.index;
    }
  }
}

TEST(GradientBuckets, FollowTheLastRoundAndCoverEveryGradientOnce) {
  const Net n = net();
  const AnalyticCostModel cost(p100());
  const PlanResult planned = plan_at(n, cost, 1.0, 16);  // two rounds
  ASSERT_EQ(planned.plan.sub_batches.size(), 2u);
  const Plan& plan = planned.plan;
  // A bucket of 1 byte closes at every block: one block each, in backward order.
  const std::vector<GradientBucket> each = gradient_buckets(n.tdfg, plan, 1);
  std::set<BlockId> gradients;
  for (size_t b = 0; b < n.tdfg.blocks.size(); ++b)
    if (n.tdfg.blocks[b].kind == BlockKind::weight_grad) gradients.insert(static_cast<BlockId>(b));
  ASSERT_EQ(each.size(), gradients.size());
  int32_t previous = -1;
  for (const GradientBucket& bucket : each) {
    ASSERT_EQ(bucket.blocks.size(), 1u);
    const Step& ready = plan.steps[bucket.ready_after_step];
    EXPECT_EQ(ready.round, 1) << "only the last round's sums are all-reduced";
    EXPECT_GT(bucket.ready_after_step, previous);
    previous = bucket.ready_after_step;
    EXPECT_EQ(n.tdfg.tasks[ready.task].kind, TaskKind::BP2);
  }
  EXPECT_NE(n.tdfg.tasks[plan.steps[each.front().ready_after_step].task].name.find("fc"), std::string::npos)
      << "the last layer's gradient is final first";
  // The default: everything in one bucket (the net is far below 25 MiB).
  const std::vector<GradientBucket> one = gradient_buckets(n.tdfg, plan, kDefaultBucketBytes);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].ready_after_step, each.back().ready_after_step);
  int64_t bytes = 0;
  for (const GradientBucket& b : each) bytes += b.bytes;
  EXPECT_EQ(one[0].bytes, bytes);
}

TEST(GradientBuckets, TheVerifierRejectsBucketsThatMissOrRepeatOrComeEarly) {
  const Net n = net();
  const AnalyticCostModel cost(p100());
  Plan plan = plan_at(n, cost, 1.0).plan;
  for (const Task& t : n.tdfg.tasks) plan.task_names.push_back(t.name);
  for (const Block& b : n.tdfg.blocks) plan.block_names.push_back(b.name);
  plan.data_parallel.ranks = 2;
  plan.data_parallel.global_batch = 2 * plan.batch;
  plan.data_parallel.plan_of_rank = {0, 0};
  plan.data_parallel.buckets = gradient_buckets(n.tdfg, plan, 1);
  EXPECT_TRUE(verify_plan(plan, n.tdfg).empty());
  auto kinds = [&](const Plan& p) {
    std::vector<Violation> v = verify_plan(p, n.tdfg);
    return !v.empty() && std::all_of(v.begin(), v.end(), [](const Violation& x) {
      return x.kind == ViolationKind::gradient_buckets;
    });
  };
  Plan missing = plan;
  missing.data_parallel.buckets.pop_back();
  EXPECT_TRUE(kinds(missing));
  Plan twice = plan;
  twice.data_parallel.buckets.push_back(twice.data_parallel.buckets.front());
  EXPECT_TRUE(kinds(twice));
  Plan early = plan;
  early.data_parallel.buckets.back().ready_after_step = early.data_parallel.buckets.front().ready_after_step;
  EXPECT_TRUE(kinds(early));
  Plan bytes = plan;
  bytes.data_parallel.buckets[0].bytes += 4;
  EXPECT_TRUE(kinds(bytes));
}

// VGG-16's swapping on the paper's machine: per-GPU batch 120 with vDNN
// swapping every layer's input (vdnn-all-p) at 16 GB.
TEST(Staggering, ThePapersRuleBeatsNaiveSwappingAndMplanBeatsBoth) {
  const std::string path = std::string(MPLAN_SOURCE_DIR) + "/examples/models/vgg16.yaml";
  Result<Model> model = load_model(path);
  ASSERT_TRUE(model.ok()) << model.error().to_string();
  model->batch = 120;
  const Tdfg tdfg = build_tdfg(*model);
  const Machine machine = *load_machine("p100x4-two-switches");
  const AnalyticCostModel cost(machine.gpus[0].device);
  PlanOptions options;
  options.budget_bytes = 16 * kGiB;
  options.policy = PolicyKind::vdnn_all_p;
  const PlanResult alone = plan_iteration(tdfg, cost, options);
  ASSERT_TRUE(alone.feasible) << alone.note;
  DataParallelOptions dp;
  dp.ranks = 2;  // two GPUs of one switch
  dp.stagger = Stagger::none;
  const RankPlans naive = plan_data_parallel(tdfg, cost, machine, options, dp, alone);
  dp.stagger = Stagger::paper;
  const RankPlans paper = plan_data_parallel(tdfg, cost, machine, options, dp, alone);
  EXPECT_GT(naive.timing.step_ms, 1.2 * alone.plan.summary.simulated_ms) << "the shared uplink slows both";
  EXPECT_LT(paper.timing.step_ms, naive.timing.step_ms);
  EXPECT_EQ(paper.plans.size(), 2u) << "the two GPUs of the switch swap different layers";
  PlanOptions mplan_options;
  mplan_options.budget_bytes = 16 * kGiB;
  const PlanResult mplan_alone = plan_iteration(tdfg, cost, mplan_options);
  dp.stagger = Stagger::search;
  const RankPlans mplan = plan_data_parallel(tdfg, cost, machine, mplan_options, dp, mplan_alone);
  EXPECT_LE(mplan.timing.step_ms, paper.timing.step_ms);
}

}  // namespace
}  // namespace mplan

namespace mplan {
namespace {

Plan data_parallel_plan() {
  const Net n = net();
  const AnalyticCostModel cost(p100());
  Plan plan = plan_at(n, cost, 1.0).plan;
  DataParallel& d = plan.data_parallel;
  d.ranks = 2;
  d.rank = 0;
  d.global_batch = 2 * plan.batch;
  d.machine = "test";
  d.policy = "alone";
  d.plan_of_rank = {0, 0};
  d.bucket_bytes = kDefaultBucketBytes;
  d.step_ms = 3.5;
  d.buckets = gradient_buckets(n.tdfg, plan, 1);
  d.rank_figures = {{3.5, 0.25, 0.125}, {3.5, 0.25, 0.125}};
  d.links = {{"node 0 GPU 0 PCIe link, to the host", "PCIe", 2, 0.5, 1.25, 1e6}};
  return plan;
}

TEST(DataParallelJson, RoundTripsAndRefusesRanksThatContradict) {
  const Plan plan = data_parallel_plan();
  const std::string text = plan_to_json(plan);
  Result<Plan> back = plan_from_json(text, "plan.json");
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_TRUE(plans_equal(plan, *back));
  using Json = nlohmann::ordered_json;
  auto refused = [&](const std::function<void(Json&)>& change, const std::string& says) {
    Json bad = Json::parse(text);
    change(bad["data_parallel"]);
    Result<Plan> r = plan_from_json(bad.dump(), "plan.json");
    ASSERT_FALSE(r.ok()) << says;
    EXPECT_NE(r.error().message.find(says), std::string::npos) << r.error().message;
  };
  refused([](Json& d) { d["plan_of_rank"] = {1, 1}; }, "plan_of_rank[0]");
  refused([](Json& d) { d["plan_of_rank"] = {0}; }, "1 entries for 2 ranks");
  refused([](Json& d) { d["ranks"] = 1; }, "data_parallel.ranks");
  refused([](Json& d) { d["global_batch"] = 3; }, "2 ranks of batch");
  refused([](Json& d) { d["buckets"][0]["blocks"] = Json::array(); }, "is empty");
  refused([](Json& d) { d["rank_figures"].erase(0); }, "1 entries for 2 ranks");
}

}  // namespace
}  // namespace mplan

namespace mplan {
namespace {

// mplan's search on the paper's machine, four GPUs, CIFAR models whose plans
// offload at the budget: the candidate that plans for the shared link (all
// of the slowdown, or half) wins where its copies collide, by more than
// rounding, against the plan made alone.
RankPlans search_on_paper_machine(const std::string& name, int64_t budget, RankPlans* alone_ranks) {
  Result<Model> model = load_model(std::string(MPLAN_SOURCE_DIR) + "/examples/models/" + name + ".yaml");
  EXPECT_TRUE(model.ok());
  const Tdfg tdfg = build_tdfg(*model);
  const Machine machine = *load_machine("p100x4-two-switches");
  const AnalyticCostModel cost(machine.gpus[0].device);
  PlanOptions options;
  options.budget_bytes = budget;
  // The rank policies' choice alone: loads ahead (PlanOptions::load_ahead)
  // make each candidate faster by its own amount (cifar_mobilenet below:
  // the shared link's 16.05 ms to 14.79 ms, taking the lead from half the
  // link's 14.87 ms). Compaction likewise.
  options.load_ahead = false;
  options.compaction = false;
  const PlanResult alone = plan_iteration(tdfg, cost, options);
  EXPECT_TRUE(alone.feasible) << alone.note;
  DataParallelOptions dp;
  dp.ranks = 4;
  dp.stagger = Stagger::none;
  *alone_ranks = plan_data_parallel(tdfg, cost, machine, options, dp, alone);
  dp.stagger = Stagger::search;
  return plan_data_parallel(tdfg, cost, machine, options, dp, alone);
}

double candidate_ms(const RankPlans& r, const std::string& label) {
  for (const auto& [name, ms] : r.candidates)
    if (name == label) return ms;
  ADD_FAILURE() << "no candidate " << label;
  return 0;
}

TEST(MplanSearch, PlansForTheSharedLinkWhereEveryRankCopiesAtOnce) {
  RankPlans alone;
  const RankPlans search = search_on_paper_machine("cifar_densenet", 24 << 20, &alone);
  EXPECT_EQ(search.policy, "shared link");
  EXPECT_LT(search.timing.step_ms, 0.99 * alone.timing.step_ms);
  EXPECT_LT(search.timing.step_ms, candidate_ms(search, "half the shared link"));
}

TEST(MplanSearch, PlansForHalfTheSharedLinkWhereCopiesOverlapInPart) {
  RankPlans alone;
  const RankPlans search = search_on_paper_machine("cifar_mobilenet", 32 << 20, &alone);
  EXPECT_EQ(search.policy, "half the shared link");
  EXPECT_LT(search.timing.step_ms, 0.99 * alone.timing.step_ms);
  EXPECT_LT(search.timing.step_ms, 0.99 * candidate_ms(search, "shared link"));
}

}  // namespace
}  // namespace mplan

namespace mplan {
namespace {

// The update of every rank waits for every bucket's all-reduce: the weights
// are updated with the sums over the ranks, never a rank's own gradients.
TEST(RankTiming, EveryRanksUpdateWaitsForTheLastAllReduce) {
  const Net n = net();
  const AnalyticCostModel cost(p100());
  const PlanResult planned = plan_at(n, cost, 1.0);
  const std::vector<GradientBucket> buckets = gradient_buckets(n.tdfg, planned.plan, 1);
  ASSERT_GT(buckets.size(), 1u);
  const RankSchedule rank{&planned.plan, &buckets};
  const RanksTiming timing = time_ranks(n.tdfg, standalone_machine(p100(), 2), {rank, rank});
  ASSERT_EQ(timing.buckets.size(), buckets.size());
  const double last_sum = timing.buckets.back().end_ms;
  EXPECT_GT(last_sum, timing.buckets.back().start_ms);
  for (const Step& s : planned.plan.steps) {
    if (s.kind != StepKind::compute || n.tdfg.tasks[s.task].kind != TaskKind::update) continue;
    for (int r = 0; r < 2; ++r) EXPECT_GE(timing.ranks[r].start_ms[s.index], last_sum) << r;
  }
}

}  // namespace
}  // namespace mplan
