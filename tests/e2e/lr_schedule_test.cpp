// The program's --lr-schedule (runtime/lr_schedule.h, docs/generated-program.md):
// the schedule's rate reaches every update, a resumed run continues the
// schedule where the checkpoint left it, and a schedule that ends before the
// run does is refused before training.

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "runtime/lr_schedule.h"
#include "tests/e2e/e2e_util.h"

namespace mplan::e2e {
namespace {

class LrScheduleProgram : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    compiled_ = new Compiled(compile_model(source_dir() + "/tests/e2e/cifar_tiny.yaml", Budget::unlimited,
                                           "lr-schedule-build"));
    ASSERT_EQ(compiled_->error, "");
    ASSERT_EQ(build_program(compiled_->dir), "");
  }
  static void TearDownTestSuite() { delete compiled_; }
  static Compiled* compiled_;
};
Compiled* LrScheduleProgram::compiled_ = nullptr;

constexpr const char* kSchedule = "cosine,steps=6,warmup=2,start=0.25,min=0.001";

// Four steps under the schedule train the same weights, bit for bit, as
// four runs of one step, each resumed from the one before with --lr set to
// the schedule's rate for that update; the first two steps run in one
// process and the last two resume from its checkpoint, so update 2 is the
// cosine's first.
TEST_F(LrScheduleProgram, EveryUpdateUsesTheSchedulesRateAcrossAResume) {
  const std::string dir = work_dir("lr-schedule-resume");
  const float lr = 0.05f;
  RunResult first = run_program(compiled_->dir, fmt::format("--steps 2 --seed 3 --lr {} --lr-schedule {} --save {}/a",
                                                            lr, kSchedule, dir));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  RunResult second = run_program(compiled_->dir, fmt::format("--steps 2 --seed 3 --lr {} --lr-schedule {} --load "
                                                             "{}/a --save {}/a",
                                                             lr, kSchedule, dir, dir));
  ASSERT_EQ(second.exit_code, 0) << second.output;
  std::string error;
  const std::optional<rt::LrSchedule> schedule = rt::parse_lr_schedule(kSchedule, &error);
  ASSERT_TRUE(schedule) << error;
  std::string load;
  for (int u = 0; u < 4; ++u) {
    const auto rate = static_cast<float>(rt::lr_at(*schedule, lr, u));
    const std::string line = fmt::format("step {}: loss", u + 1);
    const std::string& out = u < 2 ? first.output : second.output;
    const size_t at = out.find(line);
    ASSERT_NE(at, std::string::npos) << out;
    EXPECT_NE(out.find(fmt::format(", lr {:.6g}", rate), at), std::string::npos) << out;
    RunResult one = run_program(compiled_->dir, fmt::format("--steps 1 --seed 3 --lr {:.9g}{} --save {}/b", rate,
                                                            load, dir));
    ASSERT_EQ(one.exit_code, 0) << one.output;
    load = " --load " + dir + "/b";
  }
  EXPECT_NE(second.output.find("lr schedule: " + std::string(kSchedule) + " from lr 0.05 (update 3 on)"),
            std::string::npos)
      << second.output;
  EXPECT_EQ(read_weights(dir + "/a"), read_weights(dir + "/b"));
}

TEST_F(LrScheduleProgram, AScheduleThatEndsBeforeTheRunIsRefused) {
  const std::string dir = work_dir("lr-schedule-refused");
  RunResult run = run_program(compiled_->dir, "--steps 7 --lr-schedule onecycle,steps=6");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("--lr-schedule: steps=6 ends before the run's last update (7); give steps= of at least 7"),
            std::string::npos)
      << run.output;
  RunResult bad = run_program(compiled_->dir, "--steps 1 --lr-schedule cosine,warmup=2");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--lr-schedule 'cosine,warmup=2': cosine needs steps="), std::string::npos) << bad.output;
  EXPECT_EQ(bad.output.find("step 1"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace mplan::e2e
