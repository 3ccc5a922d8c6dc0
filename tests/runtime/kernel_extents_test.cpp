// Operand extents (runtime/kernel_extents.h): every kernel of
// runtime/kernels.def says how much each of its pointer parameters touches,
// and the sizes follow the kernels' shapes.

#include <gtest/gtest.h>

#include "runtime/kernel_extents.h"

namespace mplan::rt {
namespace {

// A call of `kernel` that passes check_kernel_call: every tensor in slot 0,
// sizes 1, valid shapes.
KernelCall any_call(Kernel kernel) {
  KernelCall call{kernel, {}};
  ConvShape conv;
  conv.h = conv.w = 3;
  conv.r = conv.s = 3;
  conv.pad_h = conv.pad_w = 1;
  for (ParamType type : kernel_params(kernel)) {
    if (is_pointer(type)) {
      call.args.push_back(Arg::tensor(0));
      continue;
    }
    switch (type) {
      case ParamType::real: call.args.push_back(Arg::of_real(0.5)); break;
      case ParamType::flag: call.args.push_back(Arg::of_flag(false)); break;
      case ParamType::algorithm: call.args.push_back(Arg::of(int64_t{0})); break;
      case ParamType::conv_shape: call.args.push_back(Arg::of(conv)); break;
      case ParamType::pool_shape: call.args.push_back(Arg::of(PoolShape{})); break;
      case ParamType::micro_batches: call.args.push_back(Arg::of(std::vector<ConvMicroBatch>{{1, 0}})); break;
      default: call.args.push_back(Arg::of(int64_t{1})); break;
    }
  }
  return call;
}

// A kernel added to kernels.def without its extents fails here.
TEST(KernelExtents, EveryKernelDescribesEveryPointer) {
  for (int i = 0; i < kKernelCount; ++i) {
    const Kernel kernel = static_cast<Kernel>(i);
    const KernelCall call = any_call(kernel);
    ASSERT_EQ(check_kernel_call(call, 1), "") << kernel_name(kernel);
    const OperandExtents e = kernel_extents(call, Bindings{});
    const std::vector<ParamType>& params = kernel_params(kernel);
    ASSERT_EQ(e.elements.size(), params.size()) << kernel_name(kernel);
    for (size_t p = 0; p < params.size(); ++p) {
      if (is_pointer(params[p]))
        EXPECT_GE(e.elements[p], 0) << kernel_name(kernel) << ": pointer parameter " << p + 1
                                    << " has no extent in runtime/kernels.def";
      else
        EXPECT_EQ(e.elements[p], -1) << kernel_name(kernel) << ": parameter " << p + 1 << " is not a pointer";
    }
  }
}

TEST(KernelExtents, FollowTheShapes) {
  const Bindings none;
  // relu: count elements in and out.
  OperandExtents e = kernel_extents({Kernel::relu_forward, {Arg::tensor(0), Arg::tensor(1), Arg::of(int64_t{512})}},
                                    none);
  EXPECT_EQ(e.elements, (std::vector<int64_t>{512, 512, -1}));
  // A convolution: x, w, the optional bias, y and the workspace's bytes.
  ConvShape s;
  s.n = 2, s.c = 3, s.h = s.w = 8, s.k = 4, s.r = s.s = 3, s.pad_h = s.pad_w = 1;
  e = kernel_extents({Kernel::conv_forward,
                      {Arg::of(s), Arg::of(int64_t{0}), Arg::tensor(0), Arg::tensor(1), Arg::null(), Arg::tensor(2),
                       Arg::tensor(3), Arg::of(int64_t{100})}},
                     none);
  EXPECT_EQ(e.elements, (std::vector<int64_t>{-1, -1, 2 * 3 * 64, 4 * 3 * 9, 4, 2 * 4 * 64, 100, -1}));
  EXPECT_TRUE(e.optional[4]);
  EXPECT_FALSE(e.optional[5]);
  // SGD without momentum touches no momentum buffer.
  e = kernel_extents({Kernel::sgd_step,
                      {Arg::tensor(0), Arg::tensor(1), Arg::null(), Arg::of(int64_t{10}), Arg::of_real(0.1),
                       Arg::of_real(0), Arg::of_real(0), Arg::of_flag(true), Arg::of_flag(false)}},
                     none);
  EXPECT_EQ(e.elements[2], 0);
  // Attention: q reaches its last row's last head, rows q_stride apart.
  const int64_t n = 2, heads = 2, tq = 3, tk = 3, hd = 4, stride = 3 * heads * hd;
  e = kernel_extents({Kernel::attention_forward,
                      {Arg::tensor(0), Arg::tensor(0, heads * hd), Arg::tensor(0, 2 * heads * hd), Arg::tensor(1),
                       Arg::tensor(2), Arg::of(n), Arg::of(heads), Arg::of(tq), Arg::of(tk), Arg::of(hd),
                       Arg::of(stride), Arg::of(stride), Arg::of_real(0.5)}},
                     none);
  EXPECT_EQ(e.elements[0], (n * tq - 1) * stride + heads * hd);
  EXPECT_EQ(e.elements[3], n * heads * tq * tk);
  EXPECT_EQ(e.elements[4], n * tq * heads * hd);
  // Variables take the run's values: dropout from the bound first sample on.
  Bindings run;
  run.first_sample = -1;
  e = kernel_extents({Kernel::dropout_forward,
                      {Arg::tensor(0), Arg::tensor(1), Arg::tensor(2), Arg::of(int64_t{2}), Arg::of(int64_t{8}),
                       Arg::of(Variable::first_sample), Arg::of_real(0.5), Arg::of(Variable::seed),
                       Arg::of(Variable::step)}},
                     run);
  EXPECT_EQ(e.error, "argument 6 is a negative size");
}

TEST(KernelExtents, RefuseSizesNoKernelTakes) {
  const Bindings none;
  EXPECT_EQ(kernel_extents({Kernel::relu_forward, {Arg::tensor(0), Arg::tensor(1), Arg::of(int64_t{-1})}}, none).error,
            "argument 3 is a negative size");
  EXPECT_EQ(kernel_extents({Kernel::concat_forward,
                            {Arg::tensor(0), Arg::tensor(1), Arg::of(int64_t{1}), Arg::of(int64_t{4}),
                             Arg::of(int64_t{3}), Arg::of(int64_t{2}), Arg::of(int64_t{1})}},
                           none)
                .error,
            "a concat slice beyond its total channels");
  EXPECT_EQ(kernel_extents({Kernel::softmax_forward,
                            {Arg::tensor(0), Arg::tensor(1), Arg::of(int64_t{4}), Arg::of(int64_t{0})}},
                           none)
                .error,
            "a softmax over rows of no elements");
  PoolShape too_wide;
  too_wide.kernel_h = 3;
  EXPECT_NE(kernel_extents({Kernel::max_pool_forward, {Arg::of(too_wide), Arg::tensor(0), Arg::tensor(1)}}, none)
                .error.find("not a pooling shape"),
            std::string::npos);
  // A product past int64 saturates: no slot holds it.
  const int64_t huge = int64_t{1} << 40;
  EXPECT_EQ(kernel_extents({Kernel::linear_forward,
                            {Arg::tensor(0), Arg::tensor(1), Arg::null(), Arg::tensor(2), Arg::of(huge), Arg::of(huge),
                             Arg::of(int64_t{1})}},
                           none)
                .elements[0],
            kTooManyElements);
}

}  // namespace
}  // namespace mplan::rt
