// Programs of several ranks (docs/generated-program.md, "Several ranks") train
// the weights of the single-process program over the same global batch whose
// rounds are the ranks' shares: every rank's plan of B = G / N samples, run
// by `mpirun -np N`, against one process of rounds of B (or of the ranks'
// sub-batches). The ranks see the same samples in the same places (dropout
// masks included) and add their gradients in rank order, ((g0 + g1) + g2) +
// ..., in float; the single process adds each round's gradient into dW as its
// kernel sums (a direct convolution's backward-filter adds in double), so the
// weights agree within fp32 rounding, not bit for bit: after 3 steps 1.3e-7
// relative (every_op_nobn), and 9e-6 of the largest element in every_op,
// whose batch norms over 4 samples amplify the rounding (its gradients of the
// first step differ by 2.4e-7 relative). The plans of each rank cover one
// round, sub-batches, offloads and recomputation (every_op: batch norm and
// dropout recomputed).

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <regex>

#include "frontend/parse.h"
#include "planner/planner.h"
#include "planner/sub_batch.h"
#include "profiler/analytic_model.h"
#include "profiler/device.h"
#include "runtime/npy.h"
#include "tests/e2e/data_parallel_util.h"

namespace mplan::e2e {
namespace {

constexpr const char* kNoBn = "examples/models/every_op_nobn.yaml";  // batch 8, dropout
constexpr const char* kWithBn = "examples/models/every_op.yaml";     // batch 8, batch norm and dropout
constexpr const char* kArgs = "--steps 3 --seed 7";

// The single-process reference of rounds of `sub_batch`, trained once per
// folder (its program and weights are kept between the tests of a run).
std::map<std::string, std::vector<float>> reference_weights(const char* model, int64_t sub_batch,
                                                            std::string* output) {
  const std::string name = std::filesystem::path(model).stem().string();
  Compiled single = compile_single_process(model, sub_batch, "dp-single-" + name + "-" + std::to_string(sub_batch));
  EXPECT_EQ(single.error, "");
  EXPECT_EQ(build_program(single.dir), "");
  const RunResult run = run_program(single.dir, std::string(kArgs) + " --save " + single.dir + "/weights");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  *output = run.output;
  return run.exit_code == 0 ? read_weights(single.dir + "/weights") : std::map<std::string, std::vector<float>>{};
}

// The step lines' losses ("step 2: loss 2.301234"), in order.
std::vector<double> losses(const std::string& output) {
  std::vector<double> out;
  const std::regex line(R"(step \d+: loss ([0-9.eE+-]+))");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line); it != std::sregex_iterator(); ++it)
    out.push_back(std::stod((*it)[1].str()));
  return out;
}

// The losses agree to the printed digits' last place (fp32 rounding of the weights aside).
void expect_same_losses(const std::vector<double>& a, const std::vector<double>& b, const std::string& context) {
  ASSERT_EQ(a.size(), b.size()) << context;
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 2e-6) << "step " << i + 1 << "\n" << context;
}

// Without the batch-norm running statistics, which are rank 0's alone (as
// DDP keeps rank 0's buffers): every other tensor is compared.
std::map<std::string, std::vector<float>> without_running_statistics(std::map<std::string, std::vector<float>> w) {
  for (auto it = w.begin(); it != w.end();)
    it = it->first.find("running_") != std::string::npos ? w.erase(it) : std::next(it);
  return w;
}

// max over tensors of |a - b|_inf, over the largest |b| of any tensor: for
// batch norm models, whose conv biases before a batch norm get gradients that
// are rounding noise (their true gradient is 0), so that a tensor-wise
// relative difference measures noise.
double max_difference_over_largest(const std::map<std::string, std::vector<float>>& a,
                                   const std::map<std::string, std::vector<float>>& b, std::string* worst) {
  double largest = 1e-12, result = 0;
  for (const auto& [name, values] : b)
    for (float v : values) largest = std::max(largest, static_cast<double>(std::fabs(v)));
  for (const auto& [name, values] : b) {
    const auto it = a.find(name);
    if (it == a.end() || it->second.size() != values.size()) {
      *worst = name + " missing or of another size";
      return INFINITY;
    }
    for (size_t i = 0; i < values.size(); ++i) {
      const double d = std::fabs(static_cast<double>(it->second[i]) - values[i]) / largest;
      if (!(d <= result)) {
        result = std::isnan(d) ? INFINITY : d;
        *worst = name;
      }
    }
  }
  return result;
}

struct Case {
  const char* model;
  int ranks;
  RankScheme scheme;
  double tolerance;  // relative, of the weights
};

// gtest's name of a case (not its bytes, which hold a pointer).
void PrintTo(const Case& c, std::ostream* os) {
  *os << std::filesystem::path(c.model).stem().string() << " on " << c.ranks << " ranks, " << scheme_name(c.scheme);
}

class DataParallel : public ::testing::TestWithParam<Case> {};

TEST_P(DataParallel, RanksTrainTheSingleProcessWeights) {
  if (!have_mpirun()) GTEST_SKIP() << "no mpirun on the PATH (openmpi-bin): programs of several ranks are not run";
  const Case c = GetParam();
  const std::string name = std::filesystem::path(c.model).stem().string();
  const std::string tag = "dp-" + name + "-" + std::to_string(c.ranks) + "-" + scheme_name(c.scheme);
  Compiled ranks = compile_ranks(c.model, c.ranks, c.scheme, tag);
  ASSERT_EQ(ranks.error, "");
  if (c.scheme == RankScheme::offload) {
    int copies = 0;
    for (const Step& s : ranks.plan.steps) copies += s.kind == StepKind::offload;
    EXPECT_GT(copies, 0) << "the offload budget planned no offload";
  }
  if (c.scheme == RankScheme::sub_batches) {
    EXPECT_GT(ranks.plan.sub_batches.size(), 1u);
  }
  if (c.scheme == RankScheme::recompute) {
    bool recomputes = false;
    for (const Step& s : ranks.plan.steps) recomputes = recomputes || s.recompute;
    EXPECT_TRUE(recomputes);
  }
  EXPECT_GT(ranks.plan.data_parallel.buckets.size(), 1u);
  ASSERT_EQ(build_ranks_program(ranks.dir), "");
  const RunResult run = run_command(mpirun(c.ranks) + " " + ranks.dir + "/build/train " + kArgs + " --save " +
                                    ranks.dir + "/weights");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::string single_output;
  const auto single = reference_weights(c.model, rank_sub_batch(8, c.ranks, c.scheme), &single_output);
  ASSERT_FALSE(single.empty());
  const auto trained = read_weights(ranks.dir + "/weights");
  std::string worst;
  const auto a = without_running_statistics(trained), b = without_running_statistics(single);
  const double diff = c.model == kWithBn ? max_difference_over_largest(a, b, &worst)
                                         : max_relative_difference(a, b, &worst);
  std::printf("%s, %d ranks, %s: max difference from the single process %.3g at %s\n", name.c_str(),
              c.ranks, scheme_name(c.scheme), diff, worst.c_str());
  EXPECT_LE(diff, c.tolerance) << worst;
  // Rank 0 alone prints the step lines: the global batch's mean loss.
  EXPECT_EQ(losses(run.output).size(), 3u) << run.output;
  expect_same_losses(losses(run.output), losses(single_output), run.output + single_output);
  EXPECT_NE(run.output.find("batch 8 on " + std::to_string(c.ranks) + " ranks"), std::string::npos) << run.output;
}

INSTANTIATE_TEST_SUITE_P(
    Plans, DataParallel,
    ::testing::Values(Case{kNoBn, 2, RankScheme::rounds, 1e-6}, Case{kNoBn, 4, RankScheme::rounds, 1e-6},
                      Case{kNoBn, 2, RankScheme::sub_batches, 1e-6}, Case{kNoBn, 2, RankScheme::offload, 1e-6},
                      Case{kWithBn, 2, RankScheme::recompute, 5e-5}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return std::string(info.param.model == kNoBn ? "NoBn" : "WithBn") + std::to_string(info.param.ranks) +
             "Ranks_" + scheme_name(info.param.scheme);
    });

// Ranks that run plans of their own (docs/multi-gpu.md, "Policies"): rank 0
// one round of its 4 samples with offloads, rank 1 two rounds of 2 in the
// same budget, each its own schedule in one program. Without batch norm the
// rounds change only the order of the sums: the single process of rounds of
// 4 is the reference.
TEST(DataParallelRun, RanksRunningPlansOfTheirOwnTrainTheSingleProcessWeights) {
  if (!have_mpirun()) GTEST_SKIP() << "no mpirun on the PATH (openmpi-bin): programs of several ranks are not run";
  Result<Model> model = load_model(source_dir() + "/" + kNoBn);
  ASSERT_TRUE(model.ok());
  Result<Device> device = load_device("k40");
  ASSERT_TRUE(device.ok());
  const AnalyticCostModel cost(*device);
  const Tdfg tdfg = build_tdfg(*model);
  PlanOptions options;
  options.batch = 4;
  options.sub_batch = 4;
  options.budget_bytes = resident_region_bytes(tdfg) + max_task_arena_bytes(tdfg, cost, 4, /*fastest=*/false) + 4096;
  Result<Plan> first = plan_iteration(tdfg, cost, options).take_plan();
  ASSERT_TRUE(first.ok()) << first.error().to_string();
  options.sub_batch = 2;
  Result<Plan> second = plan_iteration(tdfg, cost, options).take_plan();
  ASSERT_TRUE(second.ok()) << second.error().to_string();
  ASSERT_EQ(second->sub_batches.size(), 2u);
  int offloads = 0;
  for (const Step& s : first->steps) offloads += s.kind == StepKind::offload;
  EXPECT_GT(offloads, 0);
  add_data_parallel(*first, tdfg, 2, 4096);
  add_data_parallel(*second, tdfg, 2, 4096);
  first->data_parallel.plan_of_rank = second->data_parallel.plan_of_rank = {0, 1};
  second->data_parallel.rank = 1;
  const Compiled ranks = write_plan_program(*model, *first, "dp-own-plans", codegen::Target::cpu, {*second});
  ASSERT_EQ(ranks.error, "");
  std::ifstream source(ranks.dir + "/train.cpp");
  const std::string program((std::istreambuf_iterator<char>(source)), std::istreambuf_iterator<char>());
  EXPECT_NE(program.find("namespace rank_1 {"), std::string::npos);
  EXPECT_NE(program.find("kSpecOfRank[] = {&kSpec, &rank_1::kSpec}"), std::string::npos);
  ASSERT_EQ(build_ranks_program(ranks.dir), "");
  const RunResult run = run_command(mpirun(2) + " " + ranks.dir + "/build/train " + kArgs + " --save " + ranks.dir +
                                    "/weights");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::string single_output;
  const auto single = reference_weights(kNoBn, 4, &single_output);
  ASSERT_FALSE(single.empty());
  std::string worst;
  const double diff = max_relative_difference(read_weights(ranks.dir + "/weights"), single, &worst);
  EXPECT_LE(diff, 1e-6) << worst;
  expect_same_losses(losses(run.output), losses(single_output), run.output + single_output);
  // Without the second schedule the program is not written.
  const Compiled missing = write_plan_program(*model, *first, "dp-own-plans-missing");
  EXPECT_NE(missing.error.find("rank 1 runs rank 1's plan (plan-rank-1.json), which was not given"),
            std::string::npos)
      << missing.error;
}

// A data set of n samples of every_op's input (3, 16, 16), labels in its 10 classes.
void write_data(const std::string& dir, int64_t n, uint32_t seed) {
  std::filesystem::create_directories(dir);
  std::vector<float> images(static_cast<size_t>(n) * 3 * 16 * 16);
  std::vector<int32_t> labels(static_cast<size_t>(n));
  uint32_t state = seed;
  auto next = [&] { return state = state * 1664525u + 1013904223u; };
  for (float& v : images) v = static_cast<float>(next() >> 8) / 16777216.0f - 0.5f;
  for (int32_t& l : labels) l = static_cast<int32_t>(next() >> 16) % 10;
  std::string error;
  ASSERT_TRUE(rt::npy_write_f32(dir + "/images.npy", images.data(), {n, 3, 16, 16}, &error)) << error;
  ASSERT_TRUE(rt::npy_write_i32(dir + "/labels.npy", labels.data(), {n}, &error)) << error;
}

// --data with --shuffle, --val, --clip-grad-norm and a checkpoint every step
// (before each save the ranks compare their weights' hashes): the ranks read the
// single process's samples (rank r the r-th share of each shuffled global
// batch), evaluate the same validation set (its last batch padded) to the
// same metrics, and rank 0's checkpoint resumes on another number of ranks.
TEST(DataParallelRun, ShuffledDataValidationAndResumingOnOtherRankCounts) {
  if (!have_mpirun()) GTEST_SKIP() << "no mpirun on the PATH (openmpi-bin): programs of several ranks are not run";
  const std::string work = work_dir("dp-data");
  write_data(work + "/train", 40, 3);
  write_data(work + "/val", 21, 5);
  Compiled two = compile_ranks(kNoBn, 2, RankScheme::rounds, "dp-every_op_nobn-2-rounds");
  Compiled four = compile_ranks(kNoBn, 4, RankScheme::rounds, "dp-every_op_nobn-4-rounds");
  Compiled single = compile_single_process(kNoBn, 4, "dp-single-every_op_nobn-4");
  for (const Compiled* c : {&two, &four, &single}) ASSERT_EQ(c->error, "");
  ASSERT_EQ(build_ranks_program(two.dir), "");
  ASSERT_EQ(build_ranks_program(four.dir), "");
  ASSERT_EQ(build_program(single.dir), "");
  // Clipping reads the summed gradients: the same norm on every rank as in the single process.
  const std::string data = " --data " + work + "/train --shuffle --val " + work + "/val --seed 9 --clip-grad-norm 0.2";
  const RunResult reference = run_program(single.dir, "--steps 4" + data + " --save " + work + "/single");
  ASSERT_EQ(reference.exit_code, 0) << reference.output;
  // Two steps on 2 ranks, then two more resumed on 4 ranks from rank 0's checkpoint.
  const RunResult first = run_command(mpirun(2) + " " + two.dir + "/build/train --steps 2" + data +
                                      " --checkpoint-every 1 --save " + work + "/ranks");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("(clipped)"), std::string::npos) << first.output;
  const RunResult second = run_command(mpirun(4) + " " + four.dir + "/build/train --steps 2" + data + " --load " +
                                       work + "/ranks --save " + work + "/ranks");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  std::string worst;
  const double diff =
      max_relative_difference(read_weights(work + "/ranks"), read_weights(work + "/single"), &worst);
  std::printf("2 then 4 ranks on shuffled data vs the single process: max relative difference %.3g at %s\n", diff,
              worst.c_str());
  EXPECT_LE(diff, 1e-6) << worst;
  // The losses of steps 1-2 and 3-4, and the validation after the last step.
  std::vector<double> ranks_losses = losses(first.output);
  for (double l : losses(second.output)) ranks_losses.push_back(l);
  expect_same_losses(ranks_losses, losses(reference.output), first.output + second.output + reference.output);
  const std::regex val(R"(val: loss (\S+) top1 (\S+)% top5 (\S+)% \(21 samples after step 4)");
  std::smatch ranks_val, single_val;
  ASSERT_TRUE(std::regex_search(second.output, ranks_val, val)) << second.output;
  ASSERT_TRUE(std::regex_search(reference.output, single_val, val)) << reference.output;
  EXPECT_NEAR(std::stod(ranks_val[1].str()), std::stod(single_val[1].str()), 2e-4);
  EXPECT_EQ(ranks_val[2].str(), single_val[2].str());
  EXPECT_EQ(ranks_val[3].str(), single_val[3].str());
}

// `mplan compile --gpus 2` writes a program that mpirun runs on 2 ranks.
TEST(DataParallelRun, MplanCompileGpusBuildsAProgramOfTwoRanks) {
  if (!have_mpirun()) GTEST_SKIP() << "no mpirun on the PATH (openmpi-bin): programs of several ranks are not run";
  const std::string dir = work_dir("dp-compile-gpus");
  const RunResult compiled = run_command(std::string(MPLAN_EXE) + " compile " + source_dir() + "/" + kNoBn +
                                         " --budget 1GiB --gpus 2 --target cpu -o " + dir);
  ASSERT_EQ(compiled.exit_code, 0) << compiled.output;
  ASSERT_EQ(build_ranks_program(dir), "");
  const RunResult run = run_command(mpirun(2) + " " + dir + "/build/train --steps 2");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(losses(run.output).size(), 2u) << run.output;
  EXPECT_NE(run.output.find("batch 8 on 2 ranks (4 each"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace mplan::e2e
