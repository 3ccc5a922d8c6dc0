// Kernels as data (runtime/kernel_call.h): names and parameters from the
// kernels' own signatures, the checks of a call against them, and run_kernel
// on the CPU backend computing what the kernel called directly computes.

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "runtime/cpu/kernels.h"
#include "runtime/kernel_call.h"
#include "runtime/ops.h"

namespace mplan::rt {
namespace {

std::vector<float> random_values(size_t n, unsigned seed) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> uniform(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = uniform(random);
  return v;
}

TEST(KernelCall, EveryKernelHasAUniqueNameAndItsParameters) {
  std::set<std::string> names;
  for (int i = 0; i < kKernelCount; ++i) {
    const Kernel k = static_cast<Kernel>(i);
    const std::string name = kernel_name(k);
    EXPECT_TRUE(names.insert(name).second) << name;
    Kernel back;
    ASSERT_TRUE(kernel_from_name(name, &back)) << name;
    EXPECT_EQ(back, k);
    EXPECT_FALSE(kernel_params(k).empty()) << name;
  }
  Kernel none;
  EXPECT_FALSE(kernel_from_name("conv_sideways", &none));
  // The parameters are the C++ signature's, in order.
  const std::vector<ParamType> relu = {ParamType::const_f32, ParamType::f32, ParamType::i64};
  EXPECT_EQ(kernel_params(Kernel::relu_forward), relu);
  const std::vector<ParamType>& conv = kernel_params(Kernel::conv_forward);
  ASSERT_EQ(conv.size(), 8u);
  EXPECT_EQ(conv[0], ParamType::conv_shape);
  EXPECT_EQ(conv[1], ParamType::algorithm);
  EXPECT_EQ(conv[6], ParamType::bytes);
  EXPECT_EQ(conv[7], ParamType::i64);
}

TEST(KernelCall, ChecksSayWhatDoesNotFit) {
  KernelCall call{Kernel::relu_forward, {Arg::tensor(0), Arg::tensor(1), Arg::of(int64_t{16})}};
  EXPECT_EQ(check_kernel_call(call, 2), "");
  EXPECT_NE(check_kernel_call(call, 1).find("names slot 1 (offset 0) of 1"), std::string::npos);
  call.args.pop_back();
  EXPECT_NE(check_kernel_call(call, 2).find("relu_forward takes 3 arguments"), std::string::npos);
  call.args.push_back(Arg::of_real(1.5));
  EXPECT_NE(check_kernel_call(call, 2).find("argument 3 of relu_forward is a real, the parameter is int64_t"),
            std::string::npos)
      << check_kernel_call(call, 2);
  // A variable only where its type fits: the seed is an integer, lr a float.
  KernelCall sgd{Kernel::sgd_step,
                 {Arg::tensor(0), Arg::tensor(1), Arg::null(), Arg::of(int64_t{4}), Arg::of(Variable::seed),
                  Arg::of_real(0), Arg::of_real(0), Arg::of(Variable::first_update), Arg::of_flag(false)}};
  EXPECT_NE(check_kernel_call(sgd, 2).find("(seed), the parameter is float"), std::string::npos)
      << check_kernel_call(sgd, 2);
  // Micro-batches must add up to the shape's images.
  ConvShape shape;
  shape.n = 4;
  shape.c = shape.k = 2;
  shape.h = shape.w = 4;
  shape.r = shape.s = 3;
  KernelCall micro{Kernel::conv_forward_micro,
                   {Arg::of(shape), Arg::of(std::vector<ConvMicroBatch>{{1, 0}, {2, 0}}), Arg::tensor(0), Arg::tensor(1),
                    Arg::null(), Arg::tensor(2), Arg::null(), Arg::of(int64_t{0})}};
  EXPECT_NE(check_kernel_call(micro, 3).find("add up to 3 images, the shape has 4"), std::string::npos)
      << check_kernel_call(micro, 3);
  shape.r = 9;  // larger than the padded input
  KernelCall bad{Kernel::conv_forward, {Arg::of(shape), Arg::of(int64_t{0}), Arg::tensor(0), Arg::tensor(1), Arg::null(),
                                        Arg::tensor(2), Arg::null(), Arg::of(int64_t{0})}};
  EXPECT_NE(check_kernel_call(bad, 3).find("not a valid convolution shape"), std::string::npos);
}

// run_kernel with the CPU backend and no stream: the same numbers as the
// synchronous kernel called directly, for a convolution with its workspace.
TEST(KernelCall, RunKernelCallsTheKernelWithItsArguments) {
  ConvShape shape;
  shape.n = 2;
  shape.c = 3;
  shape.h = shape.w = 6;
  shape.k = 4;
  shape.r = shape.s = 3;
  shape.pad_h = shape.pad_w = 1;
  const std::vector<float> x = random_values(shape.x_elements(), 1);
  const std::vector<float> w = random_values(shape.w_elements() + shape.k, 2);
  const ConvAlgoId gemm = static_cast<ConvAlgoId>(cpu::ConvAlgo::gemm);
  const int64_t workspace_bytes = conv_workspace_bytes(Context{}, ConvDirection::forward, shape, gemm);
  ASSERT_GT(workspace_bytes, 0);
  std::vector<float> y_called(shape.y_elements()), y_direct(shape.y_elements());
  std::vector<float> workspace(workspace_bytes / 4 + 1);
  KernelCall call{Kernel::conv_forward,
                  {Arg::of(shape), Arg::of(int64_t{gemm}), Arg::tensor(0), Arg::tensor(1),
                   Arg::tensor(1, shape.w_elements()), Arg::tensor(2), Arg::tensor(3), Arg::of(workspace_bytes)}};
  void* slots[] = {const_cast<float*>(x.data()), const_cast<float*>(w.data()), y_called.data(), workspace.data()};
  Bindings bindings;
  bindings.slots = slots;
  bindings.slot_count = 4;
  run_kernel(Context{}, call, bindings);
  cpu::conv_forward(cpu::ConvAlgo::gemm, shape, x.data(), w.data(), w.data() + shape.w_elements(), y_direct.data(),
                    workspace.data(), workspace_bytes);
  EXPECT_EQ(y_called, y_direct);
}

// Variables come from the bindings: the dropout mask of sample 5 at step 7.
TEST(KernelCall, VariablesComeFromTheRun) {
  const int64_t n = 2, elements = 64;
  std::vector<float> x(n * elements, 1.0f), y(n * elements);
  std::vector<uint8_t> mask(n * elements);
  KernelCall call{Kernel::dropout_forward,
                  {Arg::tensor(0), Arg::tensor(1), Arg::tensor(2), Arg::of(n), Arg::of(elements),
                   Arg::of(Variable::first_sample), Arg::of_real(0.5), Arg::of(Variable::seed), Arg::of(Variable::step)}};
  void* slots[] = {x.data(), y.data(), mask.data()};
  Bindings bindings;
  bindings.slots = slots;
  bindings.slot_count = 3;
  bindings.seed = 3;
  bindings.step = 7;
  bindings.first_sample = 5;
  run_kernel(Context{}, call, bindings);
  for (int64_t e = 0; e < elements; ++e)
    EXPECT_EQ(mask[elements + e], dropout_uniform(3, 7, 6, static_cast<uint64_t>(e)) >= 0.5f) << e;
}

}  // namespace
}  // namespace mplan::rt
