// 16-bit programs (docs/generated-program.md, "16-bit programs") on the CPU
// backend, the reference, and on CUDA (built and linked everywhere; run and
// held to the same envelope where a GPU is):
//   - against PyTorch (torch 1.13 under /usr/bin/python3): trained a few
//     steps, a bf16 program stays as close to float64 training as PyTorch's
//     own bf16 autocast does, and an fp16 program as close as float64
//     training with fp16 autocast emulated (PyTorch's CPU has no fp16
//     autocast) and GradScaler's loss scaling; and neither is float32
//     training in disguise;
//   - 200 steps on a CIFAR-size model: the 16-bit losses fall as float32's do;
//   - fp16's loss scaling: an overflow skips exactly that step's update and
//     halves the scale; clean steps grow it; the checkpoint keeps both.

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "codegen/target.h"
#include "frontend/parse.h"
#include "runtime/npy.h"
#include "tests/e2e/e2e_util.h"

namespace mplan::e2e {
namespace {

Compiled compile_at(const std::string& model_file, Precision precision, Budget budget, const std::string& tag,
                    codegen::Target target = codegen::Target::cpu) {
  Result<Model> model = load_model(source_dir() + "/" + model_file);
  if (!model) return Compiled{{}, "", model.error().to_string()};
  if (Status s = apply_precision(*model, precision, /*replace=*/true); !s) return Compiled{{}, "", s.error().message};
  return compile_model(*model, budget, tag, target);
}

using Weights = std::map<std::string, std::vector<float>>;

// The distance of one training run from another, both from the same initial
// weights: |a - b| / |b - init| over every parameter (the relative error of
// the whole update; running statistics and momentum buffers left out).
double update_distance(const Weights& a, const Weights& b, const Weights& init) {
  double diff = 0, moved = 0;
  for (const auto& [name, start] : init) {
    if (name.find(".momentum") != std::string::npos || name.find(".running_") != std::string::npos) continue;
    const std::vector<float>& x = a.at(name);
    const std::vector<float>& y = b.at(name);
    for (size_t i = 0; i < start.size(); ++i) {
      diff += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
      moved += (static_cast<double>(y[i]) - start[i]) * (static_cast<double>(y[i]) - start[i]);
    }
  }
  return std::sqrt(diff / moved);
}

// Trains the program and PyTorch from the program's initial weights on the
// same data, `steps` steps, and checks the 16-bit program's distance from
// float64 training against PyTorch's 16-bit run's.
// fp16 runs both start at `loss_scale` (GradScaler's 65536 overflows every_op's
// float16 weight gradients step after step: nothing would be compared).
// On CUDA the program is built against the CUDA runtime, and run only where
// a GPU is.
void expect_within_torch_envelope(const std::string& model_file, Precision precision, Budget budget, int steps,
                                  double loss_scale = 65536, codegen::Target target = codegen::Target::cpu) {
  const bool cuda = target == codegen::Target::cuda;
#ifndef MPLAN_RUNTIME_CUDA_LIBRARY_PATH
  if (cuda) GTEST_SKIP() << "no CUDA toolkit with cuDNN in this build: the CUDA program is not built";
  const std::string runtime_library;
#else
  const std::string runtime_library = cuda ? MPLAN_RUNTIME_CUDA_LIBRARY_PATH : "";
#endif
  const std::string name = model_file.substr(model_file.rfind('/') + 1, model_file.rfind('.') - model_file.rfind('/') - 1);
  const std::string tag = std::string("sixteen-") + (cuda ? "cuda-" : "") + name + "-" + precision_name(precision) +
                          "-" + budget_name(budget);
  Compiled compiled = compile_at(model_file, precision, budget, tag + "-build", target);
  ASSERT_EQ(compiled.error, "");
  if (budget == Budget::sub_batch) ASSERT_GT(compiled.plan.sub_batches.size(), 1u) << "the budget must split the batch";
  ASSERT_EQ(build_program(compiled.dir, runtime_library), "");
  if (cuda && !gpu_present()) GTEST_SKIP() << "no GPU on this machine: the CUDA program is built, not run";
  if (!have_torch()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch, numpy and yaml";
  const std::string dir = work_dir(tag);
  const std::string script = source_dir() + "/tests/e2e/torch_train.py";
  const std::string model_path = source_dir() + "/" + model_file;
  RunResult data = run_command("/usr/bin/python3 " + script + " data --model " + model_path +
                               " --samples 40 --seed 3 --out " + dir + "/data");
  ASSERT_EQ(data.exit_code, 0) << data.output;
  RunResult init = run_program(compiled.dir, "--steps 0 --seed 5 --save " + dir + "/init");
  ASSERT_EQ(init.exit_code, 0) << init.output;
  const std::string scale = precision == Precision::fp16 ? fmt::format(" --loss-scale {}", loss_scale) : "";
  RunResult run = run_program(compiled.dir, fmt::format("--steps {} --seed 5 --data {}/data --save {}/program{}", steps,
                                                        dir, dir, scale));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::string subs;
  for (int64_t n : compiled.plan.sub_batches) subs += (subs.empty() ? "" : ",") + std::to_string(n);
  auto torch = [&](const std::string& mode) {
    RunResult r = run_command(fmt::format("/usr/bin/python3 {} train --model {} --init {}/init/latest --data {}/data "
                                          "--steps {} --seed 5 --sub-batches {} --precision {} --out {}/{}{}",
                                          script, model_path, dir, dir, steps, subs, mode, dir, mode, scale));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return read_weights(dir + "/" + mode);
  };
  const Weights initial = read_weights(dir + "/init");
  const Weights program = read_weights(dir + "/program");
  const Weights reference = torch("fp64");
  const Weights torch_16 = torch(precision == Precision::bf16 ? "bf16-autocast" : "fp16");
  ASSERT_FALSE(reference.empty());
  ASSERT_FALSE(torch_16.empty());
  const double ours = update_distance(program, reference, initial);
  const double theirs = update_distance(torch_16, reference, initial);
  std::printf("%s %s at %s budget (sub-batches %s), %d steps: the update's distance from float64 training: "
              "%s program %.3g, PyTorch %s %.3g (ratio %.2f)\n",
              name.c_str(), precision_name(precision), budget_name(budget), subs.c_str(), steps,
              codegen::target_name(target), ours,
              precision == Precision::bf16 ? "autocast" : "emulated", theirs, ours / theirs);
  ASSERT_GT(update_distance(reference, initial, initial), 0) << "float64 training made no update";
  ASSERT_LT(theirs, 0.9) << "PyTorch's 16-bit run made (almost) no update: nothing is compared";
  // As far from float64 as PyTorch's own 16 bits, give or take half of it;
  // and not float32 arithmetic: rounding to 16 bits moves the update.
  EXPECT_LE(ours, 1.5 * theirs);
  EXPECT_GE(ours, 0.25 * theirs);
}

TEST(SixteenBitNumerics, EveryOpBf16AgreesWithAutocast) {
  expect_within_torch_envelope("examples/models/every_op.yaml", Precision::bf16, Budget::unlimited, 3);
}
TEST(SixteenBitNumerics, EveryOpBf16SubBatchesAgreeWithAutocast) {
  expect_within_torch_envelope("examples/models/every_op.yaml", Precision::bf16, Budget::sub_batch, 3);
}
TEST(SixteenBitNumerics, EveryOpFp16AgreesWithEmulatedAutocast) {
  expect_within_torch_envelope("examples/models/every_op.yaml", Precision::fp16, Budget::unlimited, 3, 256);
}
TEST(SixteenBitNumerics, CifarSmallBf16SubBatchesAgreeWithAutocast) {
  expect_within_torch_envelope("examples/models/cifar_small.yaml", Precision::bf16, Budget::sub_batch, 3);
}
TEST(SixteenBitNumerics, CifarSmallFp16SubBatchesAgreeWithEmulatedAutocast) {
  expect_within_torch_envelope("examples/models/cifar_small.yaml", Precision::fp16, Budget::sub_batch, 3);
}
// The CUDA programs of the same plans: the same casts around CUDA's float
// kernels (cast_kernels.h rounds as runtime/sixteen_bit.h does).
TEST(SixteenBitNumerics, CifarSmallBf16OnCudaAgreesWithAutocast) {
  expect_within_torch_envelope("examples/models/cifar_small.yaml", Precision::bf16, Budget::sub_batch, 3, 65536,
                               codegen::Target::cuda);
}
TEST(SixteenBitNumerics, EveryOpFp16OnCudaAgreesWithEmulatedAutocast) {
  expect_within_torch_envelope("examples/models/every_op.yaml", Precision::fp16, Budget::unlimited, 3, 256,
                               codegen::Target::cuda);
}

// The losses a run printed, in order.
std::vector<double> losses_of(const std::string& output) {
  std::vector<double> losses;
  static const std::regex line(R"(step \d+: loss ([-0-9.eEnaif+]+))");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line); it != std::sregex_iterator(); ++it)
    losses.push_back(std::stod((*it)[1]));
  return losses;
}

// The mean of steps [first, last] (1-based).
double mean_of_steps(const std::vector<double>& v, size_t first, size_t last) {
  double sum = 0;
  for (size_t i = first - 1; i < last; ++i) sum += v[i];
  return sum / static_cast<double>(last - first + 1);
}

// 128 CIFAR-size images of uniform noise with random labels: learning them
// is memorising, which takes the tiny model about a hundred steps in float32.
std::string write_noise_data(const std::string& dir) {
  const int64_t n = 128, elements = 3 * 32 * 32;
  std::vector<float> images(static_cast<size_t>(n * elements));
  std::vector<int32_t> labels(static_cast<size_t>(n));
  uint64_t state = 11;
  auto next = [&state] {  // SplitMix64
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  for (float& x : images) x = static_cast<float>(static_cast<double>(next() >> 11) * 0x1p-53 * 2.0 - 1.0);
  for (int32_t& y : labels) y = static_cast<int32_t>(next() % 10);
  std::string error;
  EXPECT_TRUE(rt::npy_write_f32(dir + "/images.npy", images.data(), {n, 3, 32, 32}, &error)) << error;
  EXPECT_TRUE(rt::npy_write_i32(dir + "/labels.npy", labels.data(), {n}, &error)) << error;
  return dir;
}

// The first 16 of those: one batch of cifar_tiny, so that every step sees
// the same samples.
std::string write_one_batch(const std::string& dir) {
  write_noise_data(dir);
  std::string error;
  const std::string one_batch = dir + "/one-batch";
  std::filesystem::create_directories(one_batch);
  rt::NpyArray images, labels;
  EXPECT_TRUE(rt::npy_read(dir + "/images.npy", &images, &error)) << error;
  EXPECT_TRUE(rt::npy_read(dir + "/labels.npy", &labels, &error)) << error;
  EXPECT_TRUE(rt::npy_write_f32(one_batch + "/images.npy", images.f32(), {16, 3, 32, 32}, &error)) << error;
  EXPECT_TRUE(rt::npy_write_i32(one_batch + "/labels.npy", labels.i32(), {16}, &error)) << error;
  return one_batch;
}

// 200 steps on data that float32 learns: bf16 and fp16 learn it too, to
// about the same loss, and never diverge.
TEST(SixteenBitTraining, TwoHundredStepsConvergeLikeFloat32) {
  const std::string data = write_noise_data(work_dir("sixteen-converge-data"));
  std::map<std::string, std::vector<double>> losses;
  for (Precision p : {Precision::fp32, Precision::bf16, Precision::fp16}) {
    Compiled compiled = compile_at("tests/e2e/cifar_tiny.yaml", p, Budget::unlimited,
                                   std::string("sixteen-converge-") + precision_name(p));
    ASSERT_EQ(compiled.error, "");
    ASSERT_EQ(build_program(compiled.dir), "");
    RunResult run = run_program(compiled.dir, "--steps 200 --seed 7 --data " + data);
    ASSERT_EQ(run.exit_code, 0) << run.output;
    losses[precision_name(p)] = losses_of(run.output);
    ASSERT_EQ(losses[precision_name(p)].size(), 200u) << run.output;
  }
  const double start = losses["fp32"].front();
  const std::vector<double>& fp32 = losses["fp32"];
  std::printf("mean loss of steps 61-80 and 181-200 (first step %.4f): fp32 %.4f %.4f, bf16 %.4f %.4f, fp16 %.4f "
              "%.4f\n", start, mean_of_steps(fp32, 61, 80), mean_of_steps(fp32, 181, 200),
              mean_of_steps(losses["bf16"], 61, 80), mean_of_steps(losses["bf16"], 181, 200),
              mean_of_steps(losses["fp16"], 61, 80), mean_of_steps(losses["fp16"], 181, 200));
  ASSERT_LT(mean_of_steps(fp32, 181, 200), 0.1 * start) << "float32 does not converge: the test says nothing";
  for (const char* p : {"bf16", "fp16"}) {
    const std::vector<double>& l = losses[p];
    for (double loss : l) ASSERT_TRUE(std::isfinite(loss)) << p;
    // The same curve: half-way down, and at the end.
    EXPECT_NEAR(mean_of_steps(l, 61, 80), mean_of_steps(fp32, 61, 80), 0.25 * mean_of_steps(fp32, 61, 80) + 0.02)
        << p;
    EXPECT_LT(mean_of_steps(l, 181, 200), 1.25 * mean_of_steps(fp32, 181, 200) + 0.02) << p << " ends above float32";
    // No divergence: no loss of the second half above the first step's.
    for (size_t i = 100; i < l.size(); ++i) EXPECT_LT(l[i], start) << p << " at step " << i + 1;
  }
}

// ---- fp16's loss scaling in the program --------------------------------------------------

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// "loss_scale 5e+29" in a checkpoint's meta.txt: the value, or NaN.
double meta_value(const std::string& dir, const std::string& key) {
  const std::string text = read_file(dir + "/latest/meta.txt");
  std::smatch m;
  if (!std::regex_search(text, m, std::regex("(^|\n)" + key + " ([^\n]+)"))) return NAN;
  return std::stod(m[2]);
}

class LossScaling : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    compiled_ = new Compiled(compile_at("tests/e2e/cifar_tiny.yaml", Precision::fp16, Budget::unlimited,
                                        "sixteen-loss-scale-build"));
    ASSERT_EQ(compiled_->error, "");
    ASSERT_EQ(build_program(compiled_->dir), "");
  }
  static void TearDownTestSuite() { delete compiled_; }
  static Compiled* compiled_;
};
Compiled* LossScaling::compiled_ = nullptr;

// A scale that overflows float16 (1e30 times any gradient is inf): the step
// makes no update, not even momentum's first; the scale halves; the next
// step is the step the run would have made without it.
TEST_F(LossScaling, AnOverflowSkipsExactlyThatStepsUpdate) {
  const std::string dir = work_dir("sixteen-loss-scale-skip");
  // The data: one batch, so that every step sees the same samples.
  RunResult data = have_torch() ? run_command("/usr/bin/python3 " + source_dir() +
                                              "/tests/e2e/torch_train.py data --model " + source_dir() +
                                              "/tests/e2e/cifar_tiny.yaml --samples 16 --seed 3 --out " + dir + "/data")
                                : RunResult{};
  const std::string data_flag = data.exit_code == 0 ? " --data " + dir + "/data" : "";
  RunResult init = run_program(compiled_->dir, "--steps 0 --seed 5 --save " + dir + "/init");
  ASSERT_EQ(init.exit_code, 0) << init.output;
  RunResult skipped = run_program(compiled_->dir, "--steps 1 --seed 5 --loss-scale 1e30 --save " + dir + "/skipped" +
                                                      data_flag);
  ASSERT_EQ(skipped.exit_code, 0) << skipped.output;
  EXPECT_NE(skipped.output.find("step 1: loss"), std::string::npos);
  EXPECT_NE(skipped.output.find("loss scale 1e+30: a gradient was not finite, update skipped, scale halved"),
            std::string::npos)
      << skipped.output;
  // Not one weight moved.
  const Weights initial = read_weights(dir + "/init"), after_skip = read_weights(dir + "/skipped");
  for (const auto& [name, values] : initial)
    if (name.find("running_") == std::string::npos) EXPECT_EQ(after_skip.at(name), values) << name;
  EXPECT_FLOAT_EQ(meta_value(dir + "/skipped", "loss_scale"), 5e29f);
  EXPECT_EQ(meta_value(dir + "/skipped", "loss_scale_growth_tracker"), 0);
  // The next step, from the checkpoint at a scale that fits, is the first
  // step of a run that never overflowed (its momentum starts as the gradient).
  // Without data of one batch the steps see other samples: compared only then.
  RunResult resumed = run_program(compiled_->dir, "--steps 1 --seed 5 --loss-scale 1024 --load " + dir +
                                                      "/skipped --save " + dir + "/resumed" + data_flag);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("step 2: loss"), std::string::npos) << resumed.output;
  EXPECT_EQ(resumed.output.find("update skipped"), std::string::npos) << resumed.output;
  RunResult clean = run_program(compiled_->dir, "--steps 1 --seed 5 --loss-scale 1024 --save " + dir + "/clean" +
                                                    data_flag);
  ASSERT_EQ(clean.exit_code, 0) << clean.output;
  if (!data_flag.empty()) {
    const Weights a = read_weights(dir + "/resumed"), b = read_weights(dir + "/clean");
    for (const auto& [name, values] : b)
      if (name.find("running_") == std::string::npos) EXPECT_EQ(a.at(name), values) << name;
  }
}

// In one run: steps at a scale too large skip their updates and halve it
// until one fits; that step is then the run's first update, the same as a
// run started at that scale (the skipped steps left no gradient behind, and
// the momentum starts as the gradient).
TEST_F(LossScaling, SkippedStepsLeaveNothingBehind) {
  const std::string dir = work_dir("sixteen-loss-scale-in-run");
  const std::string one_batch = write_one_batch(dir);
  const double start = std::ldexp(1.0, 40);
  RunResult probe = run_program(compiled_->dir, fmt::format("--steps 60 --seed 5 --loss-scale {} --data {}", start,
                                                            one_batch));
  ASSERT_EQ(probe.exit_code, 0) << probe.output;
  int skipped = 0;
  while (probe.output.find(fmt::format("step {}: loss", skipped + 1)) != std::string::npos &&
         probe.output.find("update skipped", probe.output.find(fmt::format("step {}: loss", skipped + 1))) <
             probe.output.find(fmt::format("step {}: loss", skipped + 2)))
    ++skipped;
  ASSERT_GT(skipped, 0) << "2^40 did not overflow: nothing is tested\n" << probe.output;
  ASSERT_LT(skipped, 59) << probe.output;
  RunResult run = run_program(compiled_->dir, fmt::format("--steps {} --seed 5 --loss-scale {} --data {} --save {}/run",
                                                          skipped + 1, start, one_batch, dir));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  RunResult fresh = run_program(compiled_->dir, fmt::format("--steps 1 --seed 5 --loss-scale {} --data {} --save "
                                                            "{}/fresh", std::ldexp(start, -skipped), one_batch, dir));
  ASSERT_EQ(fresh.exit_code, 0) << fresh.output;
  const Weights a = read_weights(dir + "/run"), b = read_weights(dir + "/fresh");
  for (const auto& [name, values] : b)
    if (name.find("running_") == std::string::npos) EXPECT_EQ(a.at(name), values) << name;
}

// Bad values are refused before training, by name.
TEST_F(LossScaling, BadFlagsAreRefusedByName) {
  for (const auto& [flags, message] : std::vector<std::pair<std::string, std::string>>{
           {"--loss-scale 0", "--loss-scale: expected a finite number > 0, got '0'"},
           {"--loss-scale inf", "--loss-scale: expected a finite number > 0, got 'inf'"},
           {"--loss-scale-growth-interval 0", "--loss-scale-growth-interval: expected an integer in [1, 2147483647]"},
           {"--loss-scale", "--loss-scale: expected a value"}}) {
    RunResult run = run_program(compiled_->dir, "--steps 1 " + flags);
    EXPECT_EQ(run.exit_code, 2) << flags << "\n" << run.output;
    EXPECT_NE(run.output.find(message), std::string::npos) << run.output;
  }
}

// Growth: after N clean steps the scale doubles, the counter restarts.
TEST_F(LossScaling, CleanStepsGrowTheScale) {
  const std::string dir = work_dir("sixteen-loss-scale-growth");
  RunResult run = run_program(compiled_->dir, "--steps 3 --seed 5 --loss-scale 1024 --loss-scale-growth-interval 2 "
                                              "--save " + dir + "/w");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("step 1: loss"), std::string::npos);
  std::vector<double> scales;
  static const std::regex line(R"(loss scale ([0-9.e+]+))");
  for (auto it = std::sregex_iterator(run.output.begin(), run.output.end(), line); it != std::sregex_iterator(); ++it)
    scales.push_back(std::stod((*it)[1]));
  EXPECT_EQ(scales, (std::vector<double>{1024, 1024, 2048})) << run.output;
  EXPECT_EQ(meta_value(dir + "/w", "loss_scale"), 2048);
  EXPECT_EQ(meta_value(dir + "/w", "loss_scale_growth_tracker"), 1);
  // Resumed, the checkpoint's state goes on: one more clean step grows it again.
  RunResult resumed = run_program(compiled_->dir, "--steps 1 --seed 5 --loss-scale-growth-interval 2 --load " + dir +
                                                      "/w --save " + dir + "/w2");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("loss scale 2048"), std::string::npos) << resumed.output;
  EXPECT_EQ(meta_value(dir + "/w2", "loss_scale"), 4096);
  EXPECT_EQ(meta_value(dir + "/w2", "loss_scale_growth_tracker"), 0);
}

// The 16-bit weight copies exist from the first step: at learning rate 0
// the weights never change, so every step on the same batch has the same loss.
TEST(SixteenBitPrograms, TheFirstStepReadsTheWeightsCopy) {
  const std::string one_batch = write_one_batch(work_dir("sixteen-first-step"));
  Compiled compiled = compile_at("tests/e2e/cifar_tiny.yaml", Precision::bf16, Budget::unlimited,
                                 "sixteen-first-step-build");
  ASSERT_EQ(compiled.error, "");
  ASSERT_EQ(build_program(compiled.dir), "");
  RunResult run = run_program(compiled.dir, "--steps 2 --lr 0 --data " + one_batch);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::vector<double> losses = losses_of(run.output);
  ASSERT_EQ(losses.size(), 2u) << run.output;
  EXPECT_EQ(losses[0], losses[1]) << run.output;
}

// Weight copies made where used compute what resident copies do: each 16-bit
// op rounds the float32 weights as it loads them instead of reading the
// copy the update made, the same bits.
TEST(SixteenBitPrograms, CopiesMadeWhereUsedTrainAsResidentOnes) {
  std::map<std::string, Weights> trained;
  for (bool where_used : {false, true}) {
    Result<Model> model = load_model(source_dir() + "/tests/e2e/cifar_tiny.yaml");
    ASSERT_TRUE(model.ok());
    ASSERT_TRUE(apply_precision(*model, Precision::bf16, true).ok());
    model->weight_copies_where_used = where_used;
    const std::string tag = where_used ? "where-used" : "resident";
    Compiled compiled = compile_model(*model, Budget::unlimited, "sixteen-copies-" + tag);
    ASSERT_EQ(compiled.error, "");
    ASSERT_EQ(compiled.plan.weight_copies_where_used, where_used);
    const std::string text = read_file(compiled.dir + "/train.cpp");
    EXPECT_EQ(text.find("constexpr WeightCopy kWeightCopies[]") != std::string::npos, !where_used);
    trained[tag] = build_and_train(compiled, 2, 5);
    ASSERT_FALSE(trained[tag].empty());
  }
  EXPECT_EQ(trained["where-used"], trained["resident"]);
}

// The 16-bit kernels (ops/sixteen_bit_kernels.h; on the CPU, the casts
// around the float kernels, runtime/cpu/ops_sixteen_bit.cpp) train the
// bracketed program's weights bit for bit: over rounds that add weight
// gradients (sub-batches), with 16-bit input gradients added up after the
// kernel (sixteen_branches), with fp16's loss scale (every_op: convolutions
// and linear layers with and without bias), and with weights rounded into
// scratch where their copies are made where used.
struct KernelsCase {
  const char* model;
  Precision precision;
  Budget budget;
  bool copies_where_used;
};

class SixteenBitKernels : public ::testing::TestWithParam<KernelsCase> {};

TEST_P(SixteenBitKernels, TrainTheBracketedProgramsWeightsBitForBit) {
  const KernelsCase& c = GetParam();
  Result<Model> model = load_model(source_dir() + "/" + c.model);
  ASSERT_TRUE(model.ok());
  ASSERT_TRUE(apply_precision(*model, c.precision, true).ok());
  model->weight_copies_where_used = c.copies_where_used;
  const std::string name = std::string(c.model).substr(std::string(c.model).rfind('/') + 1);
  const std::string tag = fmt::format("sixteen-kernels-{}-{}-{}{}", name.substr(0, name.rfind('.')),
                                      precision_name(c.precision), budget_name(c.budget),
                                      c.copies_where_used ? "-where-used" : "");
  std::map<bool, Weights> trained;
  for (bool kernels : {false, true}) {
    Compiled compiled =
        compile_model(*model, c.budget, tag + (kernels ? "-kernels" : "-casts"), codegen::Target::cpu, kernels);
    ASSERT_EQ(compiled.error, "");
    const std::string text = read_file(compiled.dir + "/train.cpp");
    const bool calls_kernels =
        text.find("conv_forward_16(") != std::string::npos || text.find("linear_forward_16(") != std::string::npos;
    EXPECT_EQ(calls_kernels, kernels);
    if (kernels && c.budget == Budget::sub_batch) {
      EXPECT_NE(text.find("_16("), std::string::npos);
      EXPECT_NE(text.find("added to float32"), std::string::npos) << "no weight gradient added after its kernel";
    }
    if (kernels && c.copies_where_used) EXPECT_NE(text.find("(autocast's cast)"), std::string::npos);
    if (kernels && std::string(c.model).find("branches") != std::string::npos)
      EXPECT_NE(text.find("added to bfloat16"), std::string::npos) << "no input gradient added after its kernel";
    trained[kernels] = build_and_train(compiled, 2, 5);
    ASSERT_FALSE(trained[kernels].empty());
  }
  EXPECT_EQ(trained[true], trained[false]);
}

INSTANTIATE_TEST_SUITE_P(Models, SixteenBitKernels,
                         ::testing::Values(KernelsCase{"examples/models/cifar_small.yaml", Precision::bf16,
                                                       Budget::sub_batch, false},
                                           KernelsCase{"tests/e2e/sixteen_branches.yaml", Precision::bf16,
                                                       Budget::sub_batch, false},
                                           KernelsCase{"examples/models/every_op.yaml", Precision::fp16,
                                                       Budget::unlimited, false},
                                           KernelsCase{"tests/e2e/cifar_tiny.yaml", Precision::bf16,
                                                       Budget::unlimited, true}));

// The loss-scale flags belong to fp16 programs.
TEST(SixteenBitPrograms, LossScaleFlagsAreRefusedWithoutFp16) {
  Compiled compiled = compile_at("tests/e2e/cifar_tiny.yaml", Precision::bf16, Budget::unlimited,
                                 "sixteen-bf16-flags-build");
  ASSERT_EQ(compiled.error, "");
  ASSERT_EQ(build_program(compiled.dir), "");
  RunResult run = run_program(compiled.dir, "--steps 1 --loss-scale 1024");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("--loss-scale: only an fp16 program scales its loss; this one is bf16"),
            std::string::npos)
      << run.output;
}

}  // namespace
}  // namespace mplan::e2e
