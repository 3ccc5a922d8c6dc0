// The generated program's flags and input files under attack (issue: nothing
// lost, nothing crashes): every bad flag and file is refused before training,
// with a message and exit code 2; nothing that is not a checkpoint folder is
// ever written; a resumed run keeps its seed unless told otherwise.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "runtime/npy.h"
#include "tests/e2e/e2e_util.h"

namespace mplan::e2e {
namespace {

namespace fs = std::filesystem;

class ProgramFlags : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    compiled_ = new Compiled(compile_model("examples/models/every_op_nobn.yaml", Budget::unlimited, "program-flags"));
    ASSERT_EQ(compiled_->error, "");
    ASSERT_EQ(build_program(compiled_->dir), "");
  }
  static void TearDownTestSuite() { delete compiled_; }
  RunResult run(const std::string& args) { return run_program(compiled_->dir, args); }
  // A bad run: exit 2, the message, and no training step.
  void expect_refused(const std::string& args, const std::string& message) {
    RunResult r = run(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << args << "\n" << r.output;
    EXPECT_EQ(r.output.find("step 1:"), std::string::npos) << "trained before refusing: " << args;
  }
  std::string dir(const std::string& name) { return work_dir("program-flags-" + name); }
  static Compiled* compiled_;
};
Compiled* ProgramFlags::compiled_ = nullptr;

TEST_F(ProgramFlags, NumbersOutOfRangeAreRefused) {
  for (const char* lr : {"inf", "nan", "-1", "1e40", "0x", ""})
    expect_refused(std::string("--steps 1 --lr '") + lr + "'", "--lr: expected a finite number >= 0");
  expect_refused("--debug-copy-delay-ms 4294967297", "--debug-copy-delay-ms: expected an integer in [0, 60000]");
  expect_refused("--steps -1", "--steps: expected an integer in [0, ");
  expect_refused("--steps 12abc", "--steps: expected an integer");
  expect_refused("--seed -3", "--seed: expected an integer in [0, ");
  expect_refused("--reseed", "--reseed: needs --load DIR");
  expect_refused("--frobnicate", "unknown flag '--frobnicate'");
}

TEST_F(ProgramFlags, SaveNeverWritesOverWhatIsNotACheckpoint) {
  const std::string d = dir("save");
  { std::ofstream(d + "/notes.txt") << "keep me"; }
  expect_refused("--steps 1 --save " + d + "/notes.txt", "is not a checkpoint folder written by train");
  std::ifstream notes(d + "/notes.txt");
  std::string text;
  std::getline(notes, text);
  EXPECT_EQ(text, "keep me");
  fs::create_directories(d + "/photos");
  expect_refused("--steps 1 --save " + d + "/photos", "is not a checkpoint folder written by train");
  EXPECT_TRUE(fs::is_empty(d + "/photos"));
  expect_refused("--steps 1 --save /dev/null", "is not a checkpoint folder written by train");
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  // A trailing slash is the same folder: the weights land in it, not beside it.
  RunResult saved = run("--steps 1 --save " + d + "/weights/");
  ASSERT_EQ(saved.exit_code, 0) << saved.output;
  EXPECT_TRUE(fs::exists(d + "/weights/latest/meta.txt"));
  EXPECT_FALSE(fs::exists(d + "/weights.tmp"));
  EXPECT_FALSE(read_weights(d + "/weights").empty());
}

TEST_F(ProgramFlags, ResumingKeepsTheSeedUnlessToldOtherwise) {
  const std::string d = dir("seed");
  ASSERT_EQ(run("--steps 1 --seed 5 --save " + d + "/w").exit_code, 0);
  expect_refused("--load " + d + "/w --steps 1 --seed 6", "written by a run with --seed 5, this run has --seed 6");
  RunResult reseeded = run("--load " + d + "/w --steps 1 --seed 6 --reseed --save " + d + "/w");
  EXPECT_EQ(reseeded.exit_code, 0) << reseeded.output;
  EXPECT_NE(reseeded.output.find("step 2:"), std::string::npos) << reseeded.output;
}

TEST_F(ProgramFlags, FilesOfTheWrongShapeAreRefused) {
  const std::string d = dir("shapes");
  std::string error;
  // Images of the model's element count but another shape.
  const std::vector<float> images(4 * 3 * 16 * 16, 0.5f);
  const std::vector<int32_t> labels = {0, 1, 2, 3};
  fs::create_directories(d + "/data");
  ASSERT_TRUE(rt::npy_write_f32(d + "/data/images.npy", images.data(), {4, 3 * 16 * 16}, &error)) << error;
  ASSERT_TRUE(rt::npy_write_i32(d + "/data/labels.npy", labels.data(), {4}, &error)) << error;
  expect_refused("--steps 1 --data " + d + "/data",
                 "expected images.npy float32 of shape (4, 3, 16, 16), or uint8 of shape (4, 3, 16, 16) or (4, 16, "
                 "16, 3), for labels.npy's 4 samples; got images.npy float32 of shape (4, 768)");
  // A weight of the same count but another shape.
  ASSERT_EQ(run("--steps 0 --save " + d + "/w").exit_code, 0);
  const std::string conv1 = d + "/w/latest/conv1.weight.npy";
  rt::NpyArray weight;
  ASSERT_TRUE(rt::npy_read(conv1, &weight, &error)) << error;
  ASSERT_TRUE(rt::npy_write_f32(conv1, weight.f32(), {weight.elements()}, &error)) << error;
  expect_refused("--load " + d + "/w --steps 1", "conv1.weight.npy: expected float32 of shape (8, 3, 3, 3)");
  // A checkpoint of another model.
  const std::string meta = d + "/w/latest/meta.txt";
  { std::ofstream(meta) << "step 0\nseed 1\nmodel other\ndigest 00000000deadbeef\n"; }
  expect_refused("--load " + d + "/w --steps 1", "a checkpoint of model 'other'");
  { std::ofstream(meta) << "step -5\nseed 1\nmodel every_op_nobn\n"; }
  expect_refused("--load " + d + "/w --steps 1", "step must be an integer >= 0, got '-5'");
}

}  // namespace
}  // namespace mplan::e2e
