// A framework's cap on a convolution's cuDNN workspace in the calibration
// cases (bench/calibration/cases.h): TensorFlow's autotuner never runs an
// algorithm that needs more than TF_CUDNN_WORKSPACE_LIMIT_IN_MB (4 GiB by
// default), so its networks are predicted with the fastest option within it.

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "bench/calibration/cases.h"
#include "bench/calibration/fit.h"

namespace mplan::calibration {
namespace {

const std::string kSource = MPLAN_SOURCE_DIR;
const std::string kData = kSource + "/bench/data/calibration";

TEST(WorkspaceCap, TensorflowCapsAtFourGibOthersDoNot) {
  EXPECT_EQ(framework_workspace_limit_bytes("TensorFlow 1.15 (tf_cnn_benchmarks, replicated)"), int64_t{1} << 32);
  EXPECT_EQ(framework_workspace_limit_bytes("TensorFlow 2.2 (tf_cnn_benchmarks, replicated)"), int64_t{1} << 32);
  EXPECT_EQ(framework_workspace_limit_bytes("PyTorch 0.3.0 (NGC 17.12)"), 0);
  EXPECT_EQ(framework_workspace_limit_bytes("Torch7 (cudnn.torch)"), 0);
  EXPECT_EQ(framework_workspace_limit_bytes(""), 0);
}

// VGG-16's second layer at batch 192 on the V100 SXM3 (Lambda's TensorFlow
// row): FFT is its fastest forward option and needs more than TensorFlow's
// 4 GiB of workspace.
Case vgg_layer_case() {
  Case c;
  c.kind = CaseKind::network;
  c.device = "v100-sxm3";
  c.library = "cuDNN 7.6.5";
  c.label = "test";
  c.convs.push_back(
      {conv_task(make_conv_shape(64, 224, 224, 64, 3, 3, 1, 1), ConvDirection::forward, 192, c.library), 1.0});
  return c;
}

TEST(WorkspaceCap, PredictionTakesTheFastestOptionWithinTheCap) {
  Case c = vgg_layer_case();
  const Devices devices = load_case_devices({c});
  const Device& device = devices.at(c.device);
  std::string free_choice, capped_choice;
  const double free_ms = predict_ms(c, device, {}, &free_choice);
  const ConvTask& task = c.convs.front().first;
  int64_t free_workspace = -1;
  for (const ConvOption& o : task.options)
    if (o.algorithm == free_choice) free_workspace = o.workspace_bytes;
  // The premise: without a cap the model takes FFT, beyond TensorFlow's cap.
  ASSERT_EQ(free_choice, "fft");
  ASSERT_GT(free_workspace, int64_t{1} << 32);

  c.workspace_limit_bytes = framework_workspace_limit_bytes("TensorFlow 2.2 (tf_cnn_benchmarks, replicated)");
  const double capped_ms = predict_ms(c, device, {}, &capped_choice);
  EXPECT_NE(capped_choice, "fft");
  EXPECT_GT(capped_ms, free_ms);
  // ... and it is the fastest of the options that fit.
  double best = 1e300;
  for (const ConvOption& o : task.options)
    if (o.workspace_bytes <= c.workspace_limit_bytes)
      best = std::min(best, stream_time_ms(phases_cost(device, o.phases, c.math), c.stream));
  EXPECT_DOUBLE_EQ(capped_ms, best);

  // A cap at the choice's own workspace leaves it allowed.
  c.workspace_limit_bytes = free_workspace;
  EXPECT_DOUBLE_EQ(predict_ms(c, device, {}), free_ms);
}

TEST(WorkspaceCap, CommittedTensorflowRowsCarryTheCap) {
  int tensorflow = 0;
  std::vector<Case> cases = load_cases(kData, kSource);
  for (const Case& c : cases) {
    if (c.kind != CaseKind::network) continue;
    // TensorFlow's rows are the ones whose source is a TensorFlow repository
    // (tensorflow/tensorflow's benchmarks page, Lambda's lambda-tensorflow-benchmark).
    const bool tf = c.source.find("tensorflow") != std::string::npos;
    tensorflow += tf;
    EXPECT_EQ(c.workspace_limit_bytes, tf ? int64_t{1} << 32 : 0) << c.gpu << " " << c.label << " " << c.source;
  }
  // TensorFlow's published P100 and K80 rows and Lambda's tf_cnn_benchmarks rows.
  EXPECT_GE(tensorflow, 20);

  // The cap bites where it should: the Quadro RTX 8000's VGG-16 at batch 256.
  const auto vgg = std::find_if(cases.begin(), cases.end(), [](const Case& c) {
    return c.kind == CaseKind::network && c.device == "quadro-rtx8000" && c.label == "vgg16 b=256 train_step";
  });
  ASSERT_NE(vgg, cases.end());
  Case uncapped = *vgg;
  uncapped.workspace_limit_bytes = 0;
  const Devices devices = load_case_devices({*vgg});
  const Device& device = devices.at(vgg->device);
  EXPECT_GT(predict_ms(*vgg, device, {}), predict_ms(uncapped, device, {}) * 1.05);
}

}  // namespace
}  // namespace mplan::calibration
