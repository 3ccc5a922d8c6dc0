// The program's learning-rate schedules (runtime/lr_schedule.h): each against
// torch.optim.lr_scheduler's own class, stepped after every update
// (tests/runtime/torch_lr_schedules.py, when /usr/bin/python3 has PyTorch),
// and the flag's parser on good and bad text.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/lr_schedule.h"

namespace mplan::rt {
namespace {

bool torch_available() {
  static const bool have = std::system("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1") == 0;
  return have;
}

// PyTorch's learning rate at each of `updates` updates.
std::vector<double> torch_lrs(double lr, int updates, const std::string& spec) {
  const std::string command = "/usr/bin/python3 " + std::string(MPLAN_SOURCE_DIR) +
                              "/tests/runtime/torch_lr_schedules.py " + std::to_string(lr) + " " +
                              std::to_string(updates) + " '" + spec + "'";
  std::vector<double> out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  double v = 0;
  while (std::fscanf(pipe, "%lf", &v) == 1) out.push_back(v);
  ::pclose(pipe);
  return out;
}

void expect_as_torch(const std::string& spec, int updates, double lr = 0.1) {
  SCOPED_TRACE(spec);
  std::string error;
  const std::optional<LrSchedule> s = parse_lr_schedule(spec, &error);
  ASSERT_TRUE(s) << error;
  const std::vector<double> want = torch_lrs(lr, updates, spec);
  ASSERT_EQ(want.size(), static_cast<size_t>(updates)) << "the PyTorch script failed";
  for (int u = 0; u < updates; ++u)
    EXPECT_NEAR(lr_at(*s, lr, u), want[static_cast<size_t>(u)], 1e-9 + 1e-6 * std::fabs(want[static_cast<size_t>(u)]))
        << "update " << u;
}

class LrScheduleTorch : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch_available()) GTEST_SKIP() << "PyTorch is not installed for /usr/bin/python3";
  }
};

TEST_F(LrScheduleTorch, ConstantStepAndMultistep) {
  expect_as_torch("constant", 5);
  expect_as_torch("step,every=3", 10);
  expect_as_torch("step,every=2,gamma=0.5", 9);
  expect_as_torch("multistep,milestones=2:5:6,gamma=0.3", 9);
}

TEST_F(LrScheduleTorch, CosineWithAndWithoutWarmUp) {
  expect_as_torch("cosine,steps=12", 12);
  expect_as_torch("cosine,steps=12,min=0.001", 12);
  expect_as_torch("cosine,steps=20,warmup=5", 20);
  expect_as_torch("cosine,steps=17,warmup=4,start=0.01,min=0.002", 17);
}

TEST_F(LrScheduleTorch, OneCycle) {
  expect_as_torch("onecycle,steps=20", 20, 0.4);
  expect_as_torch("onecycle,steps=11,pct=0.25,div=10,final_div=100", 11, 0.4);
  expect_as_torch("onecycle,steps=7,pct=0.5", 7, 0.4);
}

TEST(LrSchedule, PastItsStepsCosineStaysAtItsFloor) {
  std::string error;
  const std::optional<LrSchedule> s = parse_lr_schedule("cosine,steps=10,min=0.01", &error);
  ASSERT_TRUE(s) << error;
  EXPECT_DOUBLE_EQ(lr_at(*s, 0.1, 10), 0.01);
  EXPECT_DOUBLE_EQ(lr_at(*s, 0.1, 25), 0.01);
}

TEST(LrSchedule, TheTextRoundTrips) {
  for (const char* text :
       {"constant", "step,every=3,gamma=0.5", "multistep,milestones=2:5,gamma=0.1",
        "cosine,steps=20,warmup=5,start=0.01,min=0.001", "onecycle,steps=9,pct=0.3,div=25,final_div=10000"}) {
    std::string error;
    const std::optional<LrSchedule> s = parse_lr_schedule(text, &error);
    ASSERT_TRUE(s) << text << ": " << error;
    EXPECT_EQ(lr_schedule_text(*s), text);
  }
}

TEST(LrSchedule, BadTextIsRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "expected constant, step"},
      {"linear", "expected constant, step"},
      {"step", "step needs every="},
      {"step,every=0", "every=0: expected a number of updates >= 1"},
      {"step,every=3,gamma=-1", "gamma=-1: expected a finite factor >= 0"},
      {"step,every=3,warmup=2", "'warmup=2' is not a key of step (it takes every=, gamma=)"},
      {"step,every=3,every=4", "every= is given twice"},
      {"constant,gamma=2", "is not a key of constant (it takes none)"},
      {"multistep,milestones=5:3", "milestones=5:3: expected update counts >= 1 in ascending order"},
      {"multistep,milestones=", "expected update counts"},
      {"cosine,warmup=2", "cosine needs steps="},
      {"cosine,steps=10,warmup=10", "warmup=10: expected a number of updates >= 0 and below steps="},
      {"cosine,steps=10,start=0", "start=0: expected a factor in (0, 1]"},
      {"cosine,steps=10,min=nan", "min=nan: expected a learning rate >= 0"},
      {"onecycle,steps=1", "steps=1: expected a number of updates >= 2"},
      {"onecycle,steps=10,pct=0.05", "pct=0.05: expected a share in (0, 1)"},
      {"onecycle,steps=10,div=0", "div=0: expected a factor > 0"},
      {"step,every", "'every' is not a key of step"},
  };
  for (const auto& [text, expect] : cases) {
    std::string error;
    EXPECT_FALSE(parse_lr_schedule(text, &error).has_value()) << text;
    EXPECT_NE(error.find(expect), std::string::npos) << text << ": " << error;
  }
}

}  // namespace
}  // namespace mplan::rt
