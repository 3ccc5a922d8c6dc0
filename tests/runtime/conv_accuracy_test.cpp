// The CPU backend is the reference every other backend is checked against, so
// each of its convolution algorithms must be as accurate as PyTorch's fp32
// convolutions. On ResNet-18's layers at batch 8 and a 64x64 input, with data
// of random signs (the products cancel, as gradients do), each algorithm and
// direction is measured against a float64 reference, as the largest error
// relative to the result's own largest element.
//
// The bounds are PyTorch's envelope: PyTorch 1.13's fp32 CPU convolutions on
// the same shapes and data err by at most 6.2e-7 forward and backward-data and
// 3.7e-6 backward-filter (the stem's 8,192-term sums); the bounds allow
// 1.5e-6 and 5e-6. A "direct" that summed each output in a float running sum
// erred by up to 2.1e-6 forward and backward-data on the 256- and
// 512-channel layers; a plan that ran it there trained ResNet-18 to weight
// updates 30 times further from float64 than PyTorch's
// (docs/generated-program.md, "Accuracy of the CPU reference").

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "runtime/cpu/conv_kernels.h"

namespace mplan::rt::cpu {
namespace {

constexpr double kForwardBound = 1.5e-6;         // forward and backward-data
constexpr double kBackwardFilterBound = 5e-6;

struct Layer {
  const char* name;
  ConvShape shape;
};

ConvShape conv(int64_t c, int64_t hw, int64_t k, int64_t rs, int64_t stride, int64_t pad, int64_t groups = 1,
               int64_t dilation = 1) {
  ConvShape s;
  s.n = 8;
  s.c = c;
  s.h = s.w = hw;
  s.k = k;
  s.r = s.s = rs;
  s.stride_h = s.stride_w = stride;
  s.pad_h = s.pad_w = pad;
  s.groups = groups;
  s.dilation_h = s.dilation_w = dilation;
  return s;
}

// ResNet-18 at a 64x64 input: the stem, a 3x3 layer of each stage, the
// strided 3x3 and 1x1 layers that open a stage; then a MobileNet-style
// depthwise layer and a dilated one, which take their own paths.
std::vector<Layer> layers() {
  return {
      {"conv1 7x7/2", conv(3, 64, 64, 7, 2, 3)},
      {"layer1 3x3", conv(64, 16, 64, 3, 1, 1)},
      {"layer2 3x3", conv(128, 8, 128, 3, 1, 1)},
      {"layer3 3x3", conv(256, 4, 256, 3, 1, 1)},
      {"layer4 3x3", conv(512, 2, 512, 3, 1, 1)},
      {"layer2.0 3x3/2", conv(64, 16, 128, 3, 2, 1)},
      {"layer4.0 3x3/2", conv(256, 4, 512, 3, 2, 1)},
      {"layer4.0 downsample 1x1/2", conv(256, 4, 512, 1, 2, 0)},
      {"depthwise 3x3", conv(64, 32, 64, 3, 1, 1, 64)},
      {"dilated 3x3", conv(128, 8, 128, 3, 1, 2, 1, 2)},
  };
}

std::vector<float> normal(size_t count, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(count);
  for (float& x : v) x = dist(rng);
  return v;
}

// The float64 convolution, all three directions at once.
struct Reference {
  std::vector<double> y, dx, dw;
};
Reference reference(const ConvShape& s, const std::vector<float>& x, const std::vector<float>& w,
                    const std::vector<float>& dy) {
  Reference ref{std::vector<double>(s.y_elements()), std::vector<double>(s.x_elements()),
                std::vector<double>(s.w_elements())};
  const int64_t P = s.p(), Q = s.q(), cg = s.c / s.groups, kg = s.k / s.groups;
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t k = 0; k < s.k; ++k)
      for (int64_t p = 0; p < P; ++p)
        for (int64_t q = 0; q < Q; ++q) {
          const int64_t yi = ((n * s.k + k) * P + p) * Q + q;
          double sum = 0.0;
          for (int64_t cl = 0; cl < cg; ++cl) {
            const int64_t c = k / kg * cg + cl;
            for (int64_t r = 0; r < s.r; ++r)
              for (int64_t t = 0; t < s.s; ++t) {
                const int64_t ih = p * s.stride_h - s.pad_h + r * s.dilation_h;
                const int64_t iw = q * s.stride_w - s.pad_w + t * s.dilation_w;
                if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) continue;
                const int64_t xi = ((n * s.c + c) * s.h + ih) * s.w + iw;
                const int64_t wi = ((k * cg + cl) * s.r + r) * s.s + t;
                sum += static_cast<double>(x[xi]) * w[wi];
                ref.dx[xi] += static_cast<double>(dy[yi]) * w[wi];
                ref.dw[wi] += static_cast<double>(dy[yi]) * x[xi];
              }
          }
          ref.y[yi] = sum;
        }
  return ref;
}

double error_against(const std::vector<float>& got, const std::vector<double>& want) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::fabs(got[i] - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  return diff / scale;
}

// One algorithm in one direction, whole batch (micro == 0) or in micro-batches
// of `micro` images sharing one workspace (mu-cuDNN §II: the filter gradient
// adds slice after slice).
std::vector<float> run(ConvAlgo algo, ConvDirection dir, const ConvShape& s, const std::vector<float>& x,
                       const std::vector<float>& w, const std::vector<float>& dy, int64_t micro) {
  std::vector<ConvMicroBatch> slices;
  for (int64_t first = 0; first < s.n; first += micro > 0 ? micro : s.n)
    slices.push_back({std::min(micro > 0 ? micro : s.n, s.n - first), static_cast<ConvAlgoId>(algo)});
  const int count = static_cast<int>(slices.size());
  std::vector<float> workspace(conv_micro_workspace_bytes(dir, s, slices.data(), count) / sizeof(float) + 1);
  const size_t bytes = workspace.size() * sizeof(float);
  switch (dir) {
    case ConvDirection::forward: {
      std::vector<float> y(s.y_elements());
      conv_forward_micro(s, slices.data(), count, x.data(), w.data(), nullptr, y.data(), workspace.data(), bytes);
      return y;
    }
    case ConvDirection::backward_data: {
      std::vector<float> dx(s.x_elements());
      conv_backward_data_micro(s, slices.data(), count, w.data(), dy.data(), dx.data(), workspace.data(), bytes,
                               false);
      return dx;
    }
    case ConvDirection::backward_filter: {
      std::vector<float> dw(s.w_elements());
      conv_backward_filter_micro(s, slices.data(), count, x.data(), dy.data(), dw.data(), workspace.data(), bytes,
                                 false);
      return dw;
    }
  }
  return {};
}

// Each layer's data (x, w, dy of random signs, w at PyTorch's initial scale)
// and its float64 results, made once for both tests.
struct Case {
  Layer layer;
  std::vector<float> x, w, dy;
  Reference ref;
};
const std::vector<Case>& cases() {
  static const std::vector<Case> all = [] {
    std::vector<Case> made;
    uint32_t seed = 7;
    for (const Layer& layer : layers()) {
      const ConvShape& s = layer.shape;
      const float w_scale = 1.0f / std::sqrt(static_cast<float>(s.c / s.groups * s.r * s.s));
      Case c{layer, normal(s.x_elements(), ++seed, 1.0f), normal(s.w_elements(), ++seed, w_scale),
             normal(s.y_elements(), ++seed, 1.0f), {}};
      c.ref = reference(s, c.x, c.w, c.dy);
      made.push_back(std::move(c));
    }
    return made;
  }();
  return all;
}

void expect_within_envelope(int64_t micro) {
  for (const Case& c : cases()) {
    const Layer& layer = c.layer;
    const ConvShape& s = layer.shape;
    const std::vector<float>&x = c.x, &w = c.w, &dy = c.dy;
    const Reference& ref = c.ref;
    int ran = 0;
    for (ConvAlgo algo : kConvAlgos)
      for (ConvDirection dir : {ConvDirection::forward, ConvDirection::backward_data, ConvDirection::backward_filter}) {
        if (!conv_algo_supported(algo, dir, s)) continue;
        ++ran;
        const std::vector<float> got = run(algo, dir, s, x, w, dy, micro);
        const std::vector<double>& want =
            dir == ConvDirection::forward ? ref.y : dir == ConvDirection::backward_data ? ref.dx : ref.dw;
        const double bound = dir == ConvDirection::backward_filter ? kBackwardFilterBound : kForwardBound;
        EXPECT_LE(error_against(got, want), bound)
            << layer.name << ", " << conv_algo_name(algo) << ", " << conv_direction_name(dir);
      }
    EXPECT_GE(ran, 3) << layer.name;
  }
}

TEST(ConvAccuracy, EveryAlgorithmAndDirectionIsWithinPyTorchsFp32Envelope) { expect_within_envelope(0); }

// Micro-batches of 3, 3 and 2 images: what a small workspace makes of "gemm",
// the filter gradient summed over the slices.
TEST(ConvAccuracy, MicroBatchedConvolutionsStayWithinTheEnvelope) { expect_within_envelope(3); }

}  // namespace
}  // namespace mplan::rt::cpu
