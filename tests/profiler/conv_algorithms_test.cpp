// Workspace formulas against hand computations, cuDNN's support rules, and
// the enum values the generated program passes to cuDNN.

#include "profiler/conv_algorithms.h"

#include <gtest/gtest.h>

namespace mplan {
namespace {

TEST(ConvWorkspace, GemmIsTheIm2colBuffer) {
  // VGG conv2_1: 64 -> 128, 3x3, pad 1, on 112x112, b = 8.
  // C*R*S*P*Q*b*4 = 64*9 * 112*112 * 8 * 4 = 576 * 12544 * 32 = 231,211,008 bytes.
  const ConvShape vgg = make_conv_shape(64, 112, 112, 128, 3, 3, 1, 1);
  EXPECT_EQ(vgg.P, 112);
  EXPECT_EQ(conv_workspace_bytes(ConvDirection::forward, "gemm", vgg, 8), 231211008);
  // mnistCUDNN conv1 (1 -> 20, 5x5, 28x28, b = 1): 25 * 576 * 4 = 57,600 bytes,
  // exactly what cudnnFind reports (bench/data/calibration/cudnn_per_algo_mnistcudnn.csv).
  const ConvShape mnist = make_conv_shape(1, 28, 28, 20, 5, 5, 1, 0);
  EXPECT_EQ(conv_workspace_bytes(ConvDirection::forward, "gemm", mnist, 1), 57600);
  EXPECT_EQ(conv_workspace_bytes(ConvDirection::forward, "implicit_gemm", vgg, 8), 0);
  EXPECT_EQ(conv_workspace_bytes(ConvDirection::backward_data, "algo_0", vgg, 8), 0);
  EXPECT_EQ(conv_workspace_bytes(ConvDirection::backward_filter, "algo_0", vgg, 8), 0);
}

TEST(ConvWorkspace, FftHoldsThePaddedSpectra) {
  // CIFAR conv: 3 -> 16, 5x5, pad 2, 32x32, b = 4. Padded image 36x36 (36 = 2^2 3^2
  // is FFT-friendly), half spectrum 36 x 19 = 684 complex64 (8 bytes) per plane.
  // Planes: input 4*3 = 12, filter 16*3 = 48, output 4*16 = 64: 124 planes.
  // 124 * 684 * 8 = 678,528 bytes.
  const ConvShape cifar = make_conv_shape(3, 32, 32, 16, 5, 5, 1, 2);
  EXPECT_EQ(fft_friendly_size(36), 36);
  EXPECT_EQ(fft_friendly_size(37), 40);
  EXPECT_EQ(conv_workspace_bytes(ConvDirection::forward, "fft", cifar, 4), 678528);
  // FFT tiling: 32x32 tiles, each giving 32 - 5 + 1 = 28 outputs a side, so
  // 2 x 2 tiles per 32x32 output. Planes: 4*3*4 = 48 + 16*3 = 48 + 4*16*4 = 256
  // = 352, each 32 x 17 complex64: 352 * 544 * 8 = 1,531,904 bytes.
  EXPECT_EQ(conv_workspace_bytes(ConvDirection::forward, "fft_tiling", cifar, 4), 1531904);
}

TEST(ConvWorkspace, FftTilingIsWhatCudnnReportsOnTheH100) {
  // cuDNN 9.19's reported workspaces (bench/data/gpu/*-h100-sxm-times*.json).
  // A 3x3 filter: 32x32 tiles, 13x13 fits one. AlexNet conv4, 384 -> 384 on
  // 13x13, b = 1: planes 384 + 384*384 + 384 = 148,224 of 32 x 17 complex64.
  const ConvShape alexnet = make_conv_shape(384, 13, 13, 384, 3, 3, 1, 1);
  EXPECT_EQ(conv_workspace_bytes(ConvDirection::forward, "fft_tiling", alexnet, 1), 645070848);
  // A 1x1 filter has one row, and cuDNN transforms each image row on its own
  // (tiles of 1 x 32): ResNet-50's 512 -> 128 on 28x28, b = 32: image planes
  // (32*512 + 32*128) * 28 rows * 1 tile a row, filter planes 128*512, each
  // row 17 complex64: (573,440 + 65,536) * 17 * 8 = 86,900,736 bytes. The
  // 32x32 tile (544 complex values) gave 23x that on 7x7 images.
  const ConvShape bottleneck = make_conv_shape(512, 28, 28, 128, 1, 1, 1, 0);
  EXPECT_EQ(conv_workspace_bytes(ConvDirection::forward, "fft_tiling", bottleneck, 32), 86900736);
  const ConvShape last = make_conv_shape(2048, 7, 7, 512, 1, 1, 1, 0);
  EXPECT_EQ(conv_workspace_bytes(ConvDirection::forward, "fft_tiling", last, 32), 220594176);
  EXPECT_EQ(conv_workspace_bytes(ConvDirection::backward_data, "fft_tiling", last, 32), 220594176);
}

TEST(ConvWorkspace, WinogradHoldsTransformedTiles) {
  // ResNet conv: 64 -> 64, 3x3, pad 1, 56x56, b = 2.
  const ConvShape resnet = make_conv_shape(64, 56, 56, 64, 3, 3, 1, 1);
  // Fused F(2x2,3x3): only the 4x4 transformed filters: 64*64*16*4 = 262,144 bytes.
  EXPECT_EQ(conv_workspace_bytes(ConvDirection::forward, "winograd", resnet, 2), 262144);
  // Non-fused F(4x4,3x3), 6x6 tiles: 56/4 = 14, 14*14 = 196 tiles a plane.
  // Input 2*64*196 = 25,088 + filter 64*64 = 4,096 + output 25,088 = 54,272 tiles
  // of 36 floats: 54,272 * 36 * 4 = 7,815,168 bytes.
  EXPECT_EQ(conv_workspace_bytes(ConvDirection::forward, "winograd_nonfused", resnet, 2), 7815168);
  // The workspace of the batch-dependent algorithms grows with b; fused Winograd's does not.
  EXPECT_GT(conv_workspace_bytes(ConvDirection::forward, "winograd_nonfused", resnet, 4), 7815168);
  EXPECT_EQ(conv_workspace_bytes(ConvDirection::forward, "winograd", resnet, 4), 262144);
}

TEST(ConvSupport, WinogradNeeds3x3AndStride1) {
  const ConvShape five = make_conv_shape(16, 28, 28, 16, 5, 5, 1, 2);
  const ConvShape stride2 = make_conv_shape(16, 28, 28, 16, 3, 3, 2, 1);
  const ConvShape ok = make_conv_shape(16, 28, 28, 16, 3, 3, 1, 1);
  for (ConvDirection d : {ConvDirection::forward, ConvDirection::backward_data}) {
    EXPECT_FALSE(conv_supported(d, "winograd", five));
    EXPECT_FALSE(conv_supported(d, "winograd", stride2));
    EXPECT_TRUE(conv_supported(d, "winograd", ok));
    EXPECT_FALSE(conv_supported(d, "winograd_nonfused", stride2));
    EXPECT_TRUE(conv_supported(d, "winograd_nonfused", five));  // cuDNN's non-fused kernels take 5x5
  }
  EXPECT_EQ(*conv_unsupported_reason(ConvDirection::forward, "winograd", five),
            "winograd needs a 3x3 filter, got 5x5");
  // cuDNN has no fused Winograd for the filter gradient.
  EXPECT_FALSE(conv_supported(ConvDirection::backward_filter, "winograd", ok));
  EXPECT_TRUE(conv_supported(ConvDirection::backward_filter, "winograd_nonfused", ok));
}

TEST(ConvSupport, FftNeedsStride1AndASmallImage) {
  const ConvShape stride2 = make_conv_shape(16, 28, 28, 16, 3, 3, 2, 1);
  const ConvShape big = make_conv_shape(3, 300, 300, 16, 3, 3, 1, 1);
  const ConvShape pad_too_big = make_conv_shape(16, 28, 28, 16, 1, 1, 1, 1);
  for (ConvDirection d : {ConvDirection::forward, ConvDirection::backward_data, ConvDirection::backward_filter}) {
    EXPECT_FALSE(conv_supported(d, "fft", stride2));
    EXPECT_FALSE(conv_supported(d, "fft_tiling", stride2));
    EXPECT_FALSE(conv_supported(d, "fft", big));  // 302x302 padded > 256x256
    EXPECT_TRUE(conv_supported(d, "fft_tiling", big));
    EXPECT_FALSE(conv_supported(d, "fft", pad_too_big));  // filter must exceed the padding
  }
  EXPECT_EQ(*conv_unsupported_reason(ConvDirection::forward, "fft", stride2), "fft needs stride 1, got 2x2");
}

TEST(ConvSupport, GemmFamilyTakesEveryShapeAndDirectNone) {
  const ConvShape odd = make_conv_shape(3, 224, 224, 64, 7, 7, 2, 3);
  EXPECT_TRUE(conv_supported(ConvDirection::forward, "implicit_gemm", odd));
  EXPECT_TRUE(conv_supported(ConvDirection::forward, "implicit_precomp_gemm", odd));
  EXPECT_TRUE(conv_supported(ConvDirection::forward, "gemm", odd));
  EXPECT_TRUE(conv_supported(ConvDirection::backward_data, "algo_1", odd));
  EXPECT_TRUE(conv_supported(ConvDirection::backward_filter, "algo_3", odd));
  EXPECT_FALSE(conv_supported(ConvDirection::forward, "direct", odd));
  EXPECT_FALSE(conv_supported(ConvDirection::forward, "no_such_algorithm", odd));
}

TEST(ConvAlgorithms, CudnnEnumValues) {
  EXPECT_EQ(cudnn_algorithm_id(ConvDirection::forward, "implicit_gemm"), 0);
  EXPECT_EQ(cudnn_algorithm_id(ConvDirection::forward, "winograd"), 6);
  EXPECT_EQ(cudnn_algorithm_id(ConvDirection::forward, "winograd_nonfused"), 7);
  EXPECT_EQ(cudnn_algorithm_id(ConvDirection::backward_data, "fft_tiling"), 3);
  EXPECT_EQ(cudnn_algorithm_id(ConvDirection::backward_data, "winograd_nonfused"), 5);
  EXPECT_EQ(cudnn_algorithm_id(ConvDirection::backward_filter, "algo_3"), 3);
  EXPECT_EQ(cudnn_algorithm_id(ConvDirection::backward_filter, "fft_tiling"), 6);
  EXPECT_EQ(cudnn_algorithm_id(ConvDirection::backward_filter, "gemm"), -1);
}

}  // namespace
}  // namespace mplan
