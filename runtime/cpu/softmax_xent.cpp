// Softmax cross-entropy, the loss, averaged over the full mini-batch across
// sub-batches (docs/generated-program.md, "Semantics"; moDNN §III:
// sub-batches with accumulated gradients equal full-batch training).

#include <cmath>

#include "runtime/check.h"
#include "runtime/cpu/op_profile.h"
#include "runtime/cpu/kernels.h"

namespace mplan::rt::cpu {

void softmax_xent_forward(const float* logits, const int32_t* labels, float* probs,
                          float* loss_sum, int64_t n, int64_t classes, bool accumulate_loss, float label_smoothing) {
  const double e = label_smoothing;
  OpTimer timer(OpKind::softmax_xent);
  double loss = 0.0;
  for (int64_t b = 0; b < n; ++b) {
    const float* z = logits + b * classes;
    float* pr = probs + b * classes;
    float top = z[0];
    for (int64_t j = 1; j < classes; ++j) top = z[j] > top ? z[j] : top;
    double sum = 0.0;
    for (int64_t j = 0; j < classes; ++j) sum += std::exp(static_cast<double>(z[j]) - top);
    for (int64_t j = 0; j < classes; ++j)
      pr[j] = static_cast<float>(std::exp(static_cast<double>(z[j]) - top) / sum);
    const int32_t label = labels[b];
    MPLAN_RT_CHECK(label >= 0 && label < classes, "label outside [0, classes)");
    // -log softmax, from the logits (not log of a rounded probability).
    const double log_sum = std::log(sum);
    if (e == 0) {
      loss += log_sum - (static_cast<double>(z[label]) - top);
    } else {
      // (1 - e) (-log p_label) + e/classes sum_k (-log p_k).
      double shifted = 0.0;
      for (int64_t j = 0; j < classes; ++j) shifted += static_cast<double>(z[j]) - top;
      loss += (1 - e) * (log_sum - (static_cast<double>(z[label]) - top)) +
              e / static_cast<double>(classes) * (static_cast<double>(classes) * log_sum - shifted);
    }
  }
  *loss_sum = static_cast<float>(accumulate_loss ? *loss_sum + loss : loss);
}

void softmax_xent_evaluate(const float* logits, const int32_t* labels, float* probs, float* metrics, int64_t n,
                           int64_t classes, float label_smoothing) {
  OpTimer timer(OpKind::softmax_xent);
  double loss = 0.0, top1 = 0.0, top5 = 0.0, counted = 0.0;
  for (int64_t b = 0; b < n; ++b) {
    float sample_loss = 0.0f;
    const int32_t label = labels[b];
    // The padding of a last, partial batch has label -1: its probabilities
    // are computed (with a label of 0), never counted.
    const int32_t known = label < 0 ? 0 : label;
    softmax_xent_forward(logits + b * classes, &known, probs + b * classes, &sample_loss, 1, classes, false,
                         label_smoothing);
    if (label < 0) continue;
    const float* z = logits + b * classes;
    int64_t above = 0;
    for (int64_t j = 0; j < classes; ++j) above += z[j] > z[label] ? 1 : 0;
    loss += sample_loss;
    top1 += above < 1 ? 1.0 : 0.0;
    top5 += above < 5 ? 1.0 : 0.0;
    counted += 1.0;
  }
  metrics[0] = static_cast<float>(loss);
  metrics[1] = static_cast<float>(top1);
  metrics[2] = static_cast<float>(top5);
  metrics[3] = static_cast<float>(counted);
}

void softmax_xent_backward(const float* probs, const int32_t* labels, float* dlogits, int64_t n,
                           int64_t classes, float scale, bool accumulate, float label_smoothing) {
  OpTimer timer(OpKind::softmax_xent);
  // The smoothed target's two values, in float (1 and 0 without smoothing).
  const float spread = label_smoothing / static_cast<float>(classes);
  const float hit = (1.0f - label_smoothing) + spread;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t j = 0; j < classes; ++j) {
      const int64_t at = b * classes + j;
      const float g = (probs[at] - (j == labels[b] ? hit : spread)) * scale;
      dlogits[at] = accumulate ? dlogits[at] + g : g;
    }
}

}  // namespace mplan::rt::cpu
