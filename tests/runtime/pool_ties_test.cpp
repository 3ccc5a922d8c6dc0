// Max-pool backward where windows hold several maxima, as they do after a ReLU
// (whole windows of zeros) or over constant planes: the gradient of each output
// goes to exactly one element, the first maximum in row-major window order,
// which is where PyTorch routes it (its CPU kernel keeps the first index whose
// value is strictly greater, padding excluded). Both CPU paths are covered: the
// 2x2 stride-2 fast path and the general one (3x3 stride 2, padding, ceil mode).
// The same routing is checked against PyTorch itself in torch_crosscheck_test.

#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "runtime/cpu/kernels.h"
#include "tests/runtime/runtime_test_util.h"

namespace mplan::rt::cpu {
namespace {

using test::random_vector;

// PyTorch's max_pool2d (forward and backward) written plainly: windows clipped
// to the input (padding is never a maximum), the first strictly greater value
// in row-major order wins.
void torch_max_pool(const PoolShape& sh, const std::vector<float>& x, const std::vector<float>& dy,
                    std::vector<float>* y, std::vector<float>* dx) {
  const int64_t P = sh.p(), Q = sh.q();
  y->assign(static_cast<size_t>(sh.n * sh.c * P * Q), 0.0f);
  dx->assign(x.size(), 0.0f);
  for (int64_t plane = 0; plane < sh.n * sh.c; ++plane)
    for (int64_t p = 0; p < P; ++p)
      for (int64_t q = 0; q < Q; ++q) {
        float best = -std::numeric_limits<float>::infinity();
        int64_t at = -1;
        for (int64_t i = p * sh.stride_h - sh.pad_h; i < p * sh.stride_h - sh.pad_h + sh.kernel_h; ++i)
          for (int64_t j = q * sh.stride_w - sh.pad_w; j < q * sh.stride_w - sh.pad_w + sh.kernel_w; ++j) {
            if (i < 0 || i >= sh.h || j < 0 || j >= sh.w) continue;
            const int64_t k = (plane * sh.h + i) * sh.w + j;
            if (at < 0 || x[k] > best) {
              best = x[k];
              at = k;
            }
          }
        const int64_t out = (plane * P + p) * Q + q;
        (*y)[out] = best;
        (*dx)[at] += dy[out];
      }
}

// Inputs full of ties: a constant plane, a plane of ReLU outputs (about half
// zeros, so many windows are all zero), and a plane of a few levels where equal
// values meet across the rows of a window.
std::vector<float> tied_input(const PoolShape& sh, uint32_t seed) {
  std::vector<float> x = random_vector(sh.n * sh.c * sh.h * sh.w, seed);
  const int64_t plane_size = sh.h * sh.w;
  for (int64_t plane = 0; plane < sh.n * sh.c; ++plane)
    for (int64_t k = 0; k < plane_size; ++k) {
      float& v = x[plane * plane_size + k];
      switch (plane % 3) {
        case 0: v = 0.25f; break;                                            // constant
        case 1: v = v > 0.2f ? v : 0.0f; break;                              // ReLU zeros
        default: v = static_cast<float>(static_cast<int>((v + 1.0f) * 1.5f)); break;  // levels 0, 1, 2
      }
    }
  return x;
}

void expect_torch_routing(const PoolShape& sh, uint32_t seed) {
  const std::vector<float> x = tied_input(sh, seed);
  const std::vector<float> dy = random_vector(sh.n * sh.c * sh.p() * sh.q(), seed + 1, 0.5f, 1.5f);
  std::vector<float> y_ref, dx_ref;
  torch_max_pool(sh, x, dy, &y_ref, &dx_ref);
  std::vector<float> y(y_ref.size()), dx(x.size(), 9.0f);
  max_pool_forward(sh, x.data(), y.data());
  EXPECT_EQ(y, y_ref);
  max_pool_backward(sh, x.data(), y.data(), dy.data(), dx.data(), /*accumulate=*/false);
  for (size_t i = 0; i < dx.size(); ++i) ASSERT_EQ(dx[i], dx_ref[i]) << "element " << i << " (plane " << i / (sh.h * sh.w)
                                                                   << ")";
  // The compact form routes each gradient to the same element.
  std::vector<uint8_t> places(y.size());
  std::vector<float> y_compact(y.size()), dx_compact(x.size(), 9.0f);
  max_pool_forward_indices(sh, x.data(), y_compact.data(), places.data());
  max_pool_backward_indices(sh, places.data(), dy.data(), dx_compact.data(), /*accumulate=*/false);
  for (size_t i = 0; i < dx.size(); ++i) ASSERT_EQ(dx_compact[i], dx_ref[i]) << "compact, element " << i;
}

TEST(PoolTies, TwoByTwoFastPathRoutesToTheFirstMaximum) {
  expect_torch_routing(PoolShape{2, 3, 8, 10, 2, 2, 2, 2, 0, 0, false}, 11);
  expect_torch_routing(PoolShape{1, 6, 7, 9, 2, 2, 2, 2, 0, 0, false}, 12);  // odd sizes
}

TEST(PoolTies, GeneralPathRoutesToTheFirstMaximumOfTheWindow) {
  // Overlapping 3x3 windows, stride 2: a tie spans rows of one window and
  // elements shared by neighbouring windows.
  expect_torch_routing(PoolShape{2, 3, 9, 11, 3, 3, 2, 2, 0, 0, false}, 21);
  expect_torch_routing(PoolShape{2, 3, 9, 11, 3, 3, 2, 2, 1, 1, false}, 22);  // padding
  expect_torch_routing(PoolShape{2, 3, 10, 8, 3, 3, 2, 2, 1, 1, true}, 23);   // ceil mode
  expect_torch_routing(PoolShape{1, 3, 14, 14, 3, 3, 2, 2, 0, 0, true}, 24);  // GoogLeNet's
  expect_torch_routing(PoolShape{1, 3, 6, 7, 2, 3, 1, 2, 0, 1, false}, 25);   // rectangular
}

// Accumulating backward adds the routed gradient to what is there, on ties too.
TEST(PoolTies, AccumulatingBackwardAddsTheRoutedGradient) {
  for (const PoolShape& sh : {PoolShape{1, 3, 8, 8, 2, 2, 2, 2, 0, 0, false},
                              PoolShape{1, 3, 9, 9, 3, 3, 2, 2, 1, 1, true}}) {
    const std::vector<float> x = tied_input(sh, 31);
    const std::vector<float> dy = random_vector(sh.n * sh.c * sh.p() * sh.q(), 32, 0.5f, 1.5f);
    std::vector<float> y_ref, dx_ref;
    torch_max_pool(sh, x, dy, &y_ref, &dx_ref);
    const std::vector<float> initial = random_vector(x.size(), 33);
    std::vector<float> dx = initial;
    max_pool_backward(sh, x.data(), y_ref.data(), dy.data(), dx.data(), /*accumulate=*/true);
    // Overlapping windows add several gradients to one element, in another order than the reference.
    for (size_t i = 0; i < dx.size(); ++i) ASSERT_NEAR(dx[i], initial[i] + dx_ref[i], 1e-5) << i;
  }
}

}  // namespace
}  // namespace mplan::rt::cpu
