// The CUDA backend's 16-bit kernels (runtime/ops_sixteen_bit.h: cuDNN's
// convolutions and cublasGemmEx on bfloat16 and float16, float accumulation)
// against the CPU reference: the inputs rounded to the type, the float
// kernels of runtime/cpu, each result rounded once. The sums run in another
// order on the GPU, so a result may differ by a unit in its last 16-bit
// place: the tolerance is two of them, relative to the tensor's largest value.

#include <cstring>

#include "runtime/cpu/conv_kernels.h"
#include "runtime/cpu/kernels.h"
#include "runtime/sixteen_bit.h"
#include "tests/gpu/gpu_test_util.h"

namespace mplan::gpu_test {
namespace {

using rt::ConvShape;

constexpr int64_t kBfloat16 = static_cast<int64_t>(rt::StorageType::bfloat16);
constexpr int64_t kFloat16 = static_cast<int64_t>(rt::StorageType::float16);

// Two units in the last place, relative: 2^-7 (bfloat16), 2^-10 (float16).
double tolerance(int64_t type) { return type == kBfloat16 ? 1.0 / 128 : 1.0 / 1024; }

std::vector<uint16_t> narrowed(const std::vector<float>& values, int64_t type) {
  std::vector<uint16_t> out(values.size());
  if (type == kBfloat16)
    rt::to_bfloat16(values.data(), out.data(), static_cast<int64_t>(values.size()));
  else
    rt::to_float16(values.data(), out.data(), static_cast<int64_t>(values.size()));
  return out;
}

std::vector<float> widened(const std::vector<uint16_t>& values, int64_t type) {
  std::vector<float> out(values.size());
  if (type == kBfloat16)
    rt::from_bfloat16(values.data(), out.data(), static_cast<int64_t>(values.size()));
  else
    rt::from_float16(values.data(), out.data(), static_cast<int64_t>(values.size()));
  return out;
}

// Random values that the type holds exactly: the reference's inputs.
std::vector<float> representable(size_t count, uint32_t seed, int64_t type) {
  return widened(narrowed(random_floats(count, seed), type), type);
}

// The CPU reference's result as the 16-bit kernel stores it.
std::vector<float> rounded(const std::vector<float>& values, int64_t type) {
  return widened(narrowed(values, type), type);
}

std::vector<float> downloaded(const DeviceBuffer& buffer, size_t count, int64_t type) {
  return widened(buffer.download<uint16_t>(count), type);
}

class GpuSixteenBit : public ::testing::TestWithParam<int64_t> {};

TEST_P(GpuSixteenBit, ConvolutionsMatchTheCpuReference) {
  MPLAN_REQUIRE_GPU();
  const int64_t type = GetParam();
  // ConvShape{n, c, h, w, k, r, s, stride_h, stride_w, pad_h, pad_w, groups}: 3x3 "same", and a 1x1.
  const ConvShape shapes[] = {{2, 8, 9, 9, 16, 3, 3, 1, 1, 1, 1, 1}, {4, 16, 7, 7, 8, 1, 1, 1, 1, 0, 0, 1}};
  for (const ConvShape& s : shapes) {
    const auto x = representable(s.x_elements(), 1, type), w = representable(s.w_elements(), 2, type),
               bias = representable(s.k, 3, type), dy = representable(s.y_elements(), 4, type);
    const DeviceBuffer dx16(narrowed(x, type)), dw16(narrowed(w, type)), dbias16(narrowed(bias, type)),
        ddy16(narrowed(dy, type));
    DeviceBuffer workspace(64 << 20);
    const rt::Context ctx;
    for (bool with_bias : {false, true}) {
      std::vector<float> expected(s.y_elements());
      rt::cpu::conv_forward(rt::cpu::ConvAlgo::direct, s, x.data(), w.data(), with_bias ? bias.data() : nullptr,
                            expected.data(), nullptr, 0);
      DeviceBuffer y(expected.size() * 2);
      rt::conv_forward_16(ctx, s, 1, dx16.u8(), dw16.u8(), with_bias ? dbias16.u8() : nullptr, y.u8(),
                          workspace.bytes(), 64 << 20, type);
      EXPECT_TRUE(close(downloaded(y, expected.size(), type), rounded(expected, type), tolerance(type)))
          << "forward, bias " << with_bias;
    }
    {
      std::vector<float> expected(s.x_elements());
      rt::cpu::conv_backward_data(rt::cpu::ConvAlgo::direct, s, w.data(), dy.data(), expected.data(), nullptr, 0,
                                  false);
      DeviceBuffer dx(narrowed(random_floats(expected.size(), 5), type));  // written, not added to
      rt::conv_backward_data_16(ctx, s, 1, dw16.u8(), ddy16.u8(), dx.u8(), workspace.bytes(), 64 << 20, type);
      EXPECT_TRUE(close(downloaded(dx, expected.size(), type), rounded(expected, type), tolerance(type)))
          << "backward data";
    }
    {
      std::vector<float> expected(s.w_elements());
      rt::cpu::conv_backward_filter(rt::cpu::ConvAlgo::direct, s, x.data(), dy.data(), expected.data(), nullptr, 0,
                                    false);
      DeviceBuffer dw(narrowed(random_floats(expected.size(), 6), type));  // written, not added to
      rt::conv_backward_filter_16(ctx, s, 1, dx16.u8(), ddy16.u8(), dw.u8(), workspace.bytes(), 64 << 20, type);
      EXPECT_TRUE(close(downloaded(dw, expected.size(), type), rounded(expected, type), tolerance(type)))
          << "backward filter";
    }
  }
}

TEST_P(GpuSixteenBit, LinearLayersMatchTheCpuReference) {
  MPLAN_REQUIRE_GPU();
  const int64_t type = GetParam();
  const int64_t n = 8, in = 24, out = 16;
  const auto x = representable(n * in, 1, type), w = representable(out * in, 2, type),
             bias = representable(out, 3, type), dy = representable(n * out, 4, type);
  const DeviceBuffer dx16(narrowed(x, type)), dw16(narrowed(w, type)), dbias16(narrowed(bias, type)),
      ddy16(narrowed(dy, type));
  const rt::Context ctx;
  for (bool with_bias : {false, true}) {
    std::vector<float> expected(n * out);
    rt::cpu::linear_forward(x.data(), w.data(), with_bias ? bias.data() : nullptr, expected.data(), n, in, out);
    DeviceBuffer y(expected.size() * 2);
    rt::linear_forward_16(ctx, dx16.u8(), dw16.u8(), with_bias ? dbias16.u8() : nullptr, y.u8(), n, in, out, type);
    EXPECT_TRUE(close(downloaded(y, expected.size(), type), rounded(expected, type), tolerance(type)))
        << "forward, bias " << with_bias;
  }
  {
    std::vector<float> expected(n * in);
    rt::cpu::linear_backward_data(w.data(), dy.data(), expected.data(), n, in, out, false);
    DeviceBuffer dx(narrowed(random_floats(expected.size(), 5), type));
    rt::linear_backward_data_16(ctx, dw16.u8(), ddy16.u8(), dx.u8(), n, in, out, type);
    EXPECT_TRUE(close(downloaded(dx, expected.size(), type), rounded(expected, type), tolerance(type)))
        << "backward data";
  }
  {
    std::vector<float> expected(out * in);
    rt::cpu::linear_backward_weights(x.data(), dy.data(), expected.data(), n, in, out, false);
    DeviceBuffer dw(narrowed(random_floats(expected.size(), 6), type));
    rt::linear_backward_weights_16(ctx, dx16.u8(), ddy16.u8(), dw.u8(), n, in, out, type);
    EXPECT_TRUE(close(downloaded(dw, expected.size(), type), rounded(expected, type), tolerance(type)))
        << "backward weights";
  }
}

INSTANTIATE_TEST_SUITE_P(Types, GpuSixteenBit, ::testing::Values(kBfloat16, kFloat16),
                         [](const ::testing::TestParamInfo<int64_t>& info) {
                           return std::string(info.param == kBfloat16 ? "bfloat16" : "float16");
                         });

}  // namespace
}  // namespace mplan::gpu_test
