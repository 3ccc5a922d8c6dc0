// The program's data flags (runtime/dataset.h, docs/generated-program.md,
// "Data"): uint8 images train as the float32 images torchvision's ToTensor
// and Normalize make of them (computed by NumPy here), shuffled epochs read
// the same samples in a resumed run as in an uninterrupted one, --epochs
// runs whole epochs, and bad flags are refused by name before training.

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "runtime/npy.h"
#include "tests/e2e/e2e_util.h"

namespace mplan::e2e {
namespace {

class DataProgram : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    compiled_ = new Compiled(compile_model(source_dir() + "/tests/e2e/cifar_tiny.yaml", Budget::unlimited,
                                           "data-flags-build"));
    ASSERT_EQ(compiled_->error, "");
    ASSERT_EQ(build_program(compiled_->dir), "");
  }
  static void TearDownTestSuite() { delete compiled_; }
  static Compiled* compiled_;
};
Compiled* DataProgram::compiled_ = nullptr;

// n random uint8 images (N, 32, 32, 3) and labels in 10 classes into dir.
void write_uint8_data(const std::string& dir, int64_t n, uint32_t seed) {
  std::filesystem::create_directories(dir);
  std::mt19937 rng(seed);
  std::vector<uint8_t> images(static_cast<size_t>(n * 32 * 32 * 3));
  for (uint8_t& b : images) b = static_cast<uint8_t>(rng() & 0xff);
  std::vector<int32_t> labels(static_cast<size_t>(n));
  for (int32_t& y : labels) y = static_cast<int32_t>(rng() % 10);
  std::string error;
  ASSERT_TRUE(rt::npy_write_u8(dir + "/images.npy", images.data(), {n, 32, 32, 3}, &error)) << error;
  ASSERT_TRUE(rt::npy_write_i32(dir + "/labels.npy", labels.data(), {n}, &error)) << error;
}

TEST_F(DataProgram, Uint8ImagesTrainAsTheFloat32ImagesTorchvisionMakesOfThem) {
  const std::string dir = work_dir("data-uint8");
  write_uint8_data(dir + "/u8", 40, 1);
  // ToTensor then Normalize, in float32 as torchvision computes them.
  RunResult numpy = run_command(
      "/usr/bin/python3 -c \"import numpy as np, os, shutil; d='" + dir +
      "'; x=np.load(d+'/u8/images.npy'); m=np.array([0.49,0.48,0.45],np.float32).reshape(1,3,1,1); "
      "s=np.array([0.25,0.24,0.26],np.float32).reshape(1,3,1,1); "
      "f=(x.transpose(0,3,1,2).astype(np.float32)/np.float32(255)-m)/s; os.makedirs(d+'/f32'); "
      "np.save(d+'/f32/images.npy', np.ascontiguousarray(f.astype(np.float32))); "
      "shutil.copy(d+'/u8/labels.npy', d+'/f32/labels.npy')\"");
  if (numpy.exit_code != 0) GTEST_SKIP() << "/usr/bin/python3 cannot run NumPy: " << numpy.output;
  RunResult u8 = run_program(compiled_->dir, "--steps 4 --seed 2 --data " + dir +
                                                 "/u8 --mean 0.49,0.48,0.45 --std 0.25,0.24,0.26 --save " + dir + "/a");
  ASSERT_EQ(u8.exit_code, 0) << u8.output;
  EXPECT_NE(u8.output.find("(40 samples, uint8 NHWC, normalised)"), std::string::npos) << u8.output;
  RunResult f32 = run_program(compiled_->dir, "--steps 4 --seed 2 --data " + dir + "/f32 --save " + dir + "/b");
  ASSERT_EQ(f32.exit_code, 0) << f32.output;
  EXPECT_EQ(read_weights(dir + "/a"), read_weights(dir + "/b"));
}

// 40 samples, batch 16: an epoch is 2 steps and leaves 8 samples out. The
// random crops and flips are drawn from the seed and the sample's place in
// the run, so they too are the uninterrupted run's.
TEST_F(DataProgram, ShuffledAugmentedEpochsResumeAsIfUninterrupted) {
  const std::string dir = work_dir("data-epochs");
  write_uint8_data(dir + "/d", 40, 2);
  const std::string data = " --seed 4 --augment crop=4,flip --data " + dir + "/d";
  RunResult whole = run_program(compiled_->dir, "--epochs 3 --shuffle" + data + " --save " + dir + "/whole");
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  EXPECT_NE(whole.output.find("(40 samples, uint8 NHWC, augmented crop=4,flip), shuffled per epoch of 2 steps, the "
                              "last 8 samples of each epoch's order left out"),
            std::string::npos)
      << whole.output;
  EXPECT_NE(whole.output.find("step 6: loss"), std::string::npos) << whole.output;
  EXPECT_NE(whole.output.find("epoch 3 (step 2 of 2)"), std::string::npos) << whole.output;
  EXPECT_EQ(whole.output.find("step 7: loss"), std::string::npos) << whole.output;
  // Stopped after the first step of epoch 2, then resumed to the end of epoch 3.
  RunResult first = run_program(compiled_->dir, "--steps 3 --shuffle" + data + " --save " + dir + "/parts");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  RunResult rest =
      run_program(compiled_->dir, "--epochs 3 --shuffle" + data + " --load " + dir + "/parts --save " + dir + "/parts");
  ASSERT_EQ(rest.exit_code, 0) << rest.output;
  EXPECT_NE(rest.output.find("step 4: loss"), std::string::npos) << rest.output;
  EXPECT_NE(rest.output.find("step 6: loss"), std::string::npos) << rest.output;
  EXPECT_EQ(rest.output.find("step 7: loss"), std::string::npos) << rest.output;
  EXPECT_EQ(read_weights(dir + "/whole"), read_weights(dir + "/parts"));
  // In file order the same epochs train other weights.
  RunResult in_order = run_program(compiled_->dir, "--epochs 3" + data + " --save " + dir + "/in_order");
  ASSERT_EQ(in_order.exit_code, 0) << in_order.output;
  EXPECT_NE(in_order.output.find("in file order per epoch of 2 steps"), std::string::npos) << in_order.output;
  EXPECT_NE(read_weights(dir + "/whole"), read_weights(dir + "/in_order"));
  // And without the augmentations, other weights again.
  RunResult plain = run_program(compiled_->dir, "--epochs 3 --shuffle --seed 4 --data " + dir + "/d --save " + dir +
                                                    "/plain");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_NE(read_weights(dir + "/whole"), read_weights(dir + "/plain"));
}

// --log appends one JSON object per step, a resumed run included, and
// tools/plot_log.py draws them.
TEST_F(DataProgram, TheMetricsLogHasALinePerStepAcrossAResumeAndPlots) {
  const std::string dir = work_dir("data-log");
  write_uint8_data(dir + "/d", 40, 5);
  const std::string flags = " --shuffle --seed 4 --lr-schedule step,every=2,gamma=0.5 --data " + dir + "/d --log " +
                            dir + "/log.jsonl --save " + dir + "/ckpt";
  RunResult first = run_program(compiled_->dir, "--steps 3" + flags);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  RunResult rest = run_program(compiled_->dir, "--steps 2 --load " + dir + "/ckpt" + flags);
  ASSERT_EQ(rest.exit_code, 0) << rest.output;
  std::ifstream in(dir + "/log.jsonl");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 5u);
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto step = static_cast<int64_t>(i + 1);
    EXPECT_EQ(lines[i].rfind(fmt::format("{{\"step\": {}, \"epoch\": {}, \"loss\": ", step, (step - 1) / 2 + 1), 0),
              0u)
        << lines[i];
    // The schedule halves the rate every two updates.
    EXPECT_NE(lines[i].find(fmt::format("\"lr\": {:g}", 0.005 * std::pow(0.5, static_cast<double>(i / 2)))),
              std::string::npos)
        << lines[i];
    EXPECT_NE(lines[i].find("\"samples_per_s\": "), std::string::npos) << lines[i];
  }
  RunResult plot = run_command("/usr/bin/python3 " + source_dir() + "/tools/plot_log.py " + dir + "/log.jsonl -o " +
                               dir + "/curves.png");
  if (plot.output.find("needs matplotlib") != std::string::npos) GTEST_SKIP() << plot.output;
  ASSERT_EQ(plot.exit_code, 0) << plot.output;
  std::ifstream png(dir + "/curves.png", std::ios::binary);
  char magic[8] = {};
  png.read(magic, 8);
  EXPECT_EQ(std::string(magic + 1, 3), "PNG");
  // A folder is refused before training.
  RunResult folder = run_program(compiled_->dir, "--steps 1 --log " + dir);
  EXPECT_EQ(folder.exit_code, 2) << folder.output;
  EXPECT_NE(folder.output.find("--log: " + dir + ": names a folder"), std::string::npos) << folder.output;
}

// The value of `key` in a JSON line of the log ("val_loss").
double json_number(const std::string& line, const std::string& key) {
  const size_t at = line.find("\"" + key + "\": ");
  return at == std::string::npos ? NAN : std::stod(line.substr(at + key.size() + 4));
}

// --val evaluates every sample once with the forward-only plan: a data set
// of 40 samples in batches of 16 (the last padded with 8 that do not count)
// gives the sample-weighted mean of its first 32 and its last 8; the
// evaluation after the last step is the one --eval makes of the saved
// weights; --eval-every adds evaluations and the log has a line for each.
TEST_F(DataProgram, EvaluationCountsEverySampleOnceAndMatchesEvalOfTheSavedWeights) {
  const std::string dir = work_dir("data-eval");
  write_uint8_data(dir + "/d", 64, 6);
  write_uint8_data(dir + "/val", 40, 7);
  RunResult split = run_command(
      "/usr/bin/python3 -c \"import numpy as np, os; d='" + dir + "'\n"
      "for name, part in (('head', slice(0, 32)), ('tail', slice(32, 40))):\n"
      "  os.makedirs(d+'/'+name)\n"
      "  for f in ('images', 'labels'): np.save(d+'/'+name+'/'+f+'.npy', np.load(d+'/val/'+f+'.npy')[part])\"");
  if (split.exit_code != 0) GTEST_SKIP() << "/usr/bin/python3 cannot run NumPy: " << split.output;
  const std::string normalise = " --mean 0.5,0.5,0.5 --std 0.25,0.25,0.25";
  RunResult trained = run_program(compiled_->dir, "--steps 6 --eval-every 4 --data " + dir + "/d --val " + dir +
                                                      "/val --save " + dir + "/ckpt --log " + dir + "/log.jsonl" +
                                                      normalise);
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_NE(trained.output.find("(40 samples after step 4,"), std::string::npos) << trained.output;
  EXPECT_NE(trained.output.find("(40 samples after step 6,"), std::string::npos) << trained.output;
  std::ifstream in(dir + "/log.jsonl");
  std::vector<std::string> evaluations;
  int steps = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"val_loss\"") != std::string::npos) evaluations.push_back(line);
    else ++steps;
  }
  EXPECT_EQ(steps, 6);
  ASSERT_EQ(evaluations.size(), 2u);
  EXPECT_EQ(evaluations[1].rfind("{\"step\": 6, \"val_loss\": ", 0), 0u) << evaluations[1];
  EXPECT_NE(evaluations[1].find("\"val_samples\": 40}"), std::string::npos) << evaluations[1];

  auto evaluate = [&](const std::string& data) {
    const std::string log = dir + "/" + data + ".jsonl";
    RunResult run = run_program(compiled_->dir, "--eval --load " + dir + "/ckpt --val " + dir + "/" + data +
                                                    " --log " + log + normalise);
    EXPECT_EQ(run.exit_code, 0) << run.output;
    std::ifstream file(log);
    std::string line;
    std::getline(file, line);
    return line;
  };
  const std::string whole = evaluate("val"), head = evaluate("head"), tail = evaluate("tail");
  // The same weights, the same samples: the last evaluation of the run.
  EXPECT_EQ(whole.substr(whole.find("\"val_loss\"")), evaluations[1].substr(evaluations[1].find("\"val_loss\"")));
  for (const char* key : {"val_loss", "val_top1", "val_top5"}) {
    SCOPED_TRACE(key);
    const double weighted = (32 * json_number(head, key) + 8 * json_number(tail, key)) / 40;
    EXPECT_NEAR(json_number(whole, key), weighted, 1e-5 * std::max(1.0, std::fabs(weighted)));
  }
  EXPECT_EQ(json_number(tail, "val_samples"), 8);
}

TEST_F(DataProgram, BadDataFlagsAreRefusedByName) {
  const std::string dir = work_dir("data-bad");
  write_uint8_data(dir + "/d", 40, 3);
  write_uint8_data(dir + "/small", 10, 3);
  const std::string d = " --data " + dir + "/d";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--epochs 2", "--epochs: needs --data DIR"},
      {"--shuffle", "--shuffle: needs --data DIR"},
      {"--augment flip", "--augment: needs --data DIR"},
      {"--augment crop=2,blur" + d, "--augment 'crop=2,blur': 'blur' is not an augmentation"},
      {"--epochs 2 --steps 3" + d, "--epochs: give --epochs or --steps, not both"},
      {"--epochs 0" + d, "--epochs: expected an integer in [1, "},
      {"--mean 0.5,0.5,0.5" + d, "--mean: needs --std"},
      {"--std 0.5,0.5,0.5" + d, "--std: needs --mean"},
      {"--mean 0.5,0.5 --std 1,1" + d, "expected 3 values each (one per channel), got 2 and 2"},
      {"--mean 0.5,x,0.5 --std 1,1,1" + d, "--mean: expected finite numbers separated by commas"},
      {"--mean 0.5,0.5,0.5 --std 1,0,1" + d, "--std: expected numbers > 0 separated by commas"},
      {"--shuffle --data " + dir + "/small",
       "the data set " + dir + "/small has 10 samples, fewer than the batch of 16"},
      {"--eval-every 2" + d, "--eval-every: needs --val DIR"},
      {"--eval", "--eval: needs --val DIR"},
      {"--eval --steps 2 --val " + dir + "/d", "--eval: evaluates and stops; --steps and --epochs train"},
      {"--eval --save " + dir + "/s --val " + dir + "/d", "--eval: evaluates and stops; --save has nothing"},
      {"--val " + dir + "/missing", "--val: " + dir + "/missing/labels.npy"},
  };
  for (const auto& [flags, expect] : cases) {
    RunResult run = run_program(compiled_->dir, flags);
    EXPECT_EQ(run.exit_code, 2) << flags << "\n" << run.output;
    EXPECT_NE(run.output.find(expect), std::string::npos) << flags << "\n" << run.output;
    EXPECT_EQ(run.output.find("step 1: loss"), std::string::npos) << flags << "\n" << run.output;
  }
}

}  // namespace
}  // namespace mplan::e2e
