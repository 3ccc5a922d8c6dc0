// Dynamic loss scaling (runtime/loss_scale.h), scenario by scenario as
// torch.cuda.amp.GradScaler behaves: an overflow skips exactly that step's
// update and halves the scale; growth_interval clean steps in a row double
// it; the scale never grows to infinity.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "runtime/loss_scale.h"

namespace mplan::rt {
namespace {

TEST(LossScale, AForcedOverflowSkipsThatStepAndHalvesTheScale) {
  LossScale state{1024.0f, 5};
  const LossScaleRules rules;
  for (float bad : {INFINITY, -INFINITY, NAN}) {
    std::vector<float> grads = {2048.0f, bad, -512.0f};
    EXPECT_TRUE(unscale_and_check(grads.data(), 3, inverse_scale(state.scale)));
    const float before = state.scale;
    EXPECT_FALSE(update_loss_scale(state, true, rules));
    EXPECT_EQ(state.scale, before / 2);
    EXPECT_EQ(state.growth_tracker, 0);
  }
  std::vector<float> clean = {2048.0f, -512.0f};
  EXPECT_FALSE(unscale_and_check(clean.data(), 2, inverse_scale(state.scale)));
  EXPECT_TRUE(update_loss_scale(state, false, rules));
  EXPECT_EQ(state.growth_tracker, 1);
}

TEST(LossScale, UnscalingMultipliesEveryElementByTheInverse) {
  std::vector<float> grads = {3.0f, INFINITY, -6.0f, 1.5f};
  EXPECT_TRUE(unscale_and_check(grads.data(), 4, inverse_scale(3.0f)));
  EXPECT_EQ(grads[0], 3.0f * static_cast<float>(1.0 / 3.0));
  EXPECT_TRUE(std::isinf(grads[1]));
  EXPECT_EQ(grads[2], -6.0f * static_cast<float>(1.0 / 3.0));
  EXPECT_EQ(grads[3], 1.5f * static_cast<float>(1.0 / 3.0));
}

// A run of steps with overflows at chosen steps: the scale after each step,
// computed by hand from GradScaler's rules (growth interval 3).
TEST(LossScale, GrowsAfterIntervalCleanStepsInARow) {
  const LossScaleRules rules{.initial_scale = 8.0f, .growth_factor = 2.0f, .backoff_factor = 0.5f, .growth_interval = 3};
  LossScale state{rules.initial_scale, 0};
  const std::vector<bool> overflow = {false, false, false, false, true, false, false, false, false, false, false};
  const std::vector<float> scale_after = {8, 8, 16, 16, 8, 8, 8, 16, 16, 16, 32};
  const std::vector<int32_t> tracker_after = {1, 2, 0, 1, 0, 1, 2, 0, 1, 2, 0};
  int32_t applied = 0;
  for (size_t step = 0; step < overflow.size(); ++step) {
    applied += update_loss_scale(state, overflow[step], rules) ? 1 : 0;
    EXPECT_EQ(state.scale, scale_after[step]) << "step " << step;
    EXPECT_EQ(state.growth_tracker, tracker_after[step]) << "step " << step;
  }
  EXPECT_EQ(applied, 10);  // every step but the one that overflowed
}

TEST(LossScale, NeverGrowsToInfinity) {
  const LossScaleRules rules{.growth_interval = 1};
  LossScale state{std::ldexp(1.0f, 127), 0};
  EXPECT_TRUE(update_loss_scale(state, false, rules));
  EXPECT_EQ(state.scale, std::ldexp(1.0f, 127));
  EXPECT_EQ(state.growth_tracker, 0);
}

}  // namespace
}  // namespace mplan::rt
