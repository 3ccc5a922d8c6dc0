#pragma once
// Dynamic loss scaling for float16 training (docs/model-format.md,
// "Precision"), as torch.cuda.amp.GradScaler does it: the loss is
// multiplied by the scale before the backward pass; before the update the
// gradients are multiplied by 1/scale and checked for inf and NaN. A step
// with a non-finite gradient is skipped and the scale multiplied by the
// backoff factor; after growth_interval clean steps in a row it is
// multiplied by the growth factor (kept if still finite). bfloat16 has
// float32's range and needs none of this.
//
// The state is two numbers a checkpoint keeps. Header-only: the CPU backend
// runs unscale_and_check on its gradients; every backend's host code runs
// update_loss_scale.

#include <cmath>
#include <cstdint>

namespace mplan::rt {

// GradScaler's defaults.
struct LossScaleRules {
  float initial_scale = 65536.0f;  // 2^16
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  int32_t growth_interval = 2000;
};

struct LossScale {
  float scale = 65536.0f;
  int32_t growth_tracker = 0;  // clean steps since the scale last changed
};

// 1/scale as GradScaler computes it (in double, then float).
inline float inverse_scale(float scale) { return static_cast<float>(1.0 / static_cast<double>(scale)); }

// Multiplies each gradient by inv_scale; true when one of them (before or
// after) is not finite. Every element is scaled either way, as
// torch._amp_foreach_non_finite_check_and_unscale_ does.
inline bool unscale_and_check(float* gradients, int64_t n, float inv_scale) {
  bool non_finite = false;
  for (int64_t i = 0; i < n; ++i) {
    gradients[i] *= inv_scale;
    non_finite |= !std::isfinite(gradients[i]);
  }
  return non_finite;
}

// After the step's gradients were checked: whether the update is applied
// (no non-finite gradient), and the state for the next step
// (torch._amp_update_scale_).
inline bool update_loss_scale(LossScale& state, bool found_non_finite, const LossScaleRules& rules) {
  if (found_non_finite) {
    state.scale *= rules.backoff_factor;
    state.growth_tracker = 0;
    return false;
  }
  const int32_t clean = state.growth_tracker + 1;
  if (clean == rules.growth_interval) {
    const float grown = state.scale * rules.growth_factor;
    if (std::isfinite(grown)) state.scale = grown;
    state.growth_tracker = 0;
  } else {
    state.growth_tracker = clean;
  }
  return true;
}

}  // namespace mplan::rt
