// The example models (examples/models/*.yaml) load, have torchvision's (or the source
// paper's) learnable-parameter counts, and have the structure their comments claim.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ops/model.h"
#include "frontend/parse.h"

namespace mplan {
namespace {

std::string models_dir() { return std::string(MPLAN_SOURCE_DIR) + "/examples/models"; }

// Loads examples/models/<file>; fails the test (and returns an empty model) on an error.
Model load_example(const std::string& file) {
  Result<Model> model = load_model(models_dir() + "/" + file);
  if (!model.ok()) {
    ADD_FAILURE() << file << ": " << model.error().to_string();
    return Model{};
  }
  return std::move(model).value();
}

int count_op(const Model& model, Op op) {
  return static_cast<int>(std::count_if(model.layers.begin(), model.layers.end(),
                                        [op](const Layer& l) { return l.op == op; }));
}

// The depth in the papers' sense: the most conv and linear layers on any path from
// the input to the loss (projection shortcuts are off the longest path).
int weighted_depth(const Model& model) {
  std::vector<int> depth(model.layers.size(), 0);
  for (LayerId l = 0; l < static_cast<LayerId>(model.layers.size()); ++l) {
    int deepest_input = 0;
    for (LayerId in : model.layers[l].inputs)
      if (in != kModelInput) deepest_input = std::max(deepest_input, depth[in]);
    bool weighted = model.layers[l].op == Op::conv || model.layers[l].op == Op::linear;
    depth[l] = deepest_input + (weighted ? 1 : 0);
  }
  return model.layers.empty() ? 0 : depth.back();
}

const Layer& layer_named(const Model& model, const std::string& name) {
  LayerId l = model.find(name);
  if (l < 0) {
    ADD_FAILURE() << model.name << ": no layer named '" << name << "'";
    static const Layer none;
    return none;
  }
  return model.layers[l];
}

struct Expected {
  std::string file;
  int64_t parameters;
  int64_t batch;
  std::vector<int64_t> input;
  int64_t classes;
  int depth;  // weighted_depth
};

// ImageNet counts are torchvision's (sum of p.numel() over model.parameters(); googlenet
// with aux_logits=False). alexnet: one-tower 227-input net of SuperNeurons (fc1 reads
// 256*6*6); resnet1001: He et al.'s CIFAR pre-activation net, cross-checked against a
// PyTorch build of the same layers.
const std::vector<Expected> kExamples = {
    {"alexnet.yaml", 62'378'344, 200, {3, 227, 227}, 1000, 8},
    {"vgg16.yaml", 138'357'544, 256, {3, 224, 224}, 1000, 16},
    {"vgg19.yaml", 143'667'240, 256, {3, 224, 224}, 1000, 19},
    {"resnet18.yaml", 11'689'512, 256, {3, 224, 224}, 1000, 18},
    {"resnet34.yaml", 21'797'672, 256, {3, 224, 224}, 1000, 34},
    {"resnet50.yaml", 25'557'032, 128, {3, 224, 224}, 1000, 50},
    {"resnet101.yaml", 44'549'160, 64, {3, 224, 224}, 1000, 101},
    {"resnet152.yaml", 60'192'808, 64, {3, 224, 224}, 1000, 152},
    {"resnet1001.yaml", 10'327'706, 64, {3, 32, 32}, 10, 1001},
    {"googlenet.yaml", 6'624'904, 128, {3, 224, 224}, 1000, 22},
    {"densenet121.yaml", 7'978'856, 64, {3, 224, 224}, 1000, 121},
    {"cifar_small.yaml", 66'570, 32, {3, 32, 32}, 10, 4},
    {"every_op.yaml", 6'146, 8, {3, 16, 16}, 10, 6},
    {"every_op_nobn.yaml", 6'066, 8, {3, 16, 16}, 10, 6},
    // The CPU bench's CIFAR nets (bench/cpu_vs_torch.py), cross-checked against the
    // PyTorch modules of bench/torch_cifar_models.py (same parameter shapes).
    {"cifar_resnet.yaml", 272'474, 64, {3, 32, 32}, 10, 20},
    {"cifar_densenet.yaml", 176'122, 32, {3, 32, 32}, 10, 40},
    {"cifar_inception.yaml", 201'322, 64, {3, 32, 32}, 10, 12},
    {"cifar_mobilenet.yaml", 823'722, 128, {3, 32, 32}, 10, 28},
    {"cifar_vgg.yaml", 1'392'778, 64, {3, 32, 32}, 10, 8},
};

TEST(ExampleModels, EveryYamlInExamplesParses) {
  std::set<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator(models_dir())) {
    if (entry.path().extension() != ".yaml") continue;
    found.insert(entry.path().filename().string());
    Result<Model> model = load_model(entry.path().string());
    EXPECT_TRUE(model.ok()) << entry.path() << ": " << model.error().to_string();
  }
  for (const Expected& e : kExamples) EXPECT_TRUE(found.count(e.file)) << e.file << " is missing";
}

TEST(ExampleModels, ParameterCountsBatchesAndShapes) {
  for (const Expected& e : kExamples) {
    SCOPED_TRACE(e.file);
    Model model = load_example(e.file);
    if (model.layers.empty()) continue;
    EXPECT_EQ(model.parameter_count(), e.parameters);
    EXPECT_EQ(model.batch, e.batch);
    EXPECT_EQ(model.input.dims, e.input);
    EXPECT_EQ(model.classes, e.classes);
    EXPECT_EQ(model.layers.back().op, Op::softmax_xent);
    EXPECT_EQ(model.layers.back().output.dims, std::vector<int64_t>{e.classes});
    EXPECT_EQ(count_op(model, Op::softmax_xent), 1);
    EXPECT_EQ(weighted_depth(model), e.depth);
    EXPECT_EQ(model.name + ".yaml", e.file);
  }
}

// SuperNeurons footnote 3: CONV1→RELU1→LRN1→POOL1→CONV2→RELU2→LRN2→POOL2→CONV3→RELU3→
// CONV4→RELU4→CONV5→RELU5→POOL5→FC1→RELU6→Dropout1→FC2→RELU7→Dropout2→FC3→Softmax.
TEST(ExampleModels, AlexNetFollowsTheSuperNeuronsLayerList) {
  Model model = load_example("alexnet.yaml");
  std::vector<std::string> ops;  // op names, so that a failure prints readably
  for (const Layer& l : model.layers)
    if (l.op != Op::flatten) ops.push_back(op_name(l.op));  // our format needs an explicit flatten
  const std::vector<std::string> paper = {
      "conv", "relu", "lrn", "pool", "conv", "relu", "lrn", "pool",
      "conv", "relu", "conv", "relu", "conv", "relu", "pool",
      "linear", "relu", "dropout", "linear", "relu", "dropout",
      "linear", "softmax_xent"};
  EXPECT_EQ(ops, paper);
  EXPECT_EQ(count_op(model, Op::flatten), 1);
  // Sec. 4.1.1 at batch 200: CONV1, CONV2, CONV3 outputs of 221.56, 142.38, 49.51 MB (MiB).
  const auto output_bytes = [&](const char* name) {
    return layer_named(model, name).output.elements() * model.batch * model.dtype_bytes();
  };
  EXPECT_EQ(layer_named(model, "conv1").output.dims, (std::vector<int64_t>{96, 55, 55}));
  EXPECT_EQ(output_bytes("conv1"), 232'320'000);  // 221.56 MiB
  EXPECT_EQ(output_bytes("conv2"), 149'299'200);  // 142.38 MiB
  EXPECT_EQ(output_bytes("conv3"), 51'916'800);   //  49.51 MiB
  EXPECT_EQ(layer_named(model, "pool5").output.dims, (std::vector<int64_t>{256, 6, 6}));
  EXPECT_DOUBLE_EQ(layer_named(model, "lrn1").k, 1.0);  // SuperNeurons' cuDNN LRN
  EXPECT_EQ(layer_named(model, "lrn1").lrn_size, 5);
  EXPECT_DOUBLE_EQ(layer_named(model, "dropout2").p, 0.5);
}

TEST(ExampleModels, VggHasNoBatchnormAndTwoDropouts) {
  for (const char* file : {"vgg16.yaml", "vgg19.yaml"}) {
    SCOPED_TRACE(file);
    Model model = load_example(file);
    EXPECT_EQ(count_op(model, Op::batchnorm), 0);
    EXPECT_EQ(count_op(model, Op::dropout), 2);
    EXPECT_EQ(count_op(model, Op::pool), 5);
    EXPECT_EQ(count_op(model, Op::linear), 3);
    EXPECT_EQ(layer_named(model, "pool5").output.dims, (std::vector<int64_t>{512, 7, 7}));
  }
}

// torchvision ResNets: 3x3 stride on the first block of layers 2-4 (v1.5 for Bottleneck),
// a downsample conv1x1+bn exactly where the shape changes.
TEST(ExampleModels, ResNetStructureMatchesTorchvision) {
  struct Net { const char* file; int convs; int adds; int64_t final_channels; };
  for (const Net& net : {Net{"resnet18.yaml", 20, 8, 512}, Net{"resnet34.yaml", 36, 16, 512},
                         Net{"resnet50.yaml", 53, 16, 2048}, Net{"resnet101.yaml", 104, 33, 2048},
                         Net{"resnet152.yaml", 155, 50, 2048}}) {
    SCOPED_TRACE(net.file);
    Model model = load_example(net.file);
    EXPECT_EQ(count_op(model, Op::conv), net.convs);
    EXPECT_EQ(count_op(model, Op::batchnorm), net.convs);
    EXPECT_EQ(count_op(model, Op::add), net.adds);
    for (const Layer& l : model.layers)
      if (l.op == Op::conv) {
        EXPECT_FALSE(l.bias) << l.name;
      }
    const Layer& stem = layer_named(model, "conv1");
    EXPECT_EQ(stem.window, (Window{7, 7, 2, 2, 3, 3}));
    EXPECT_EQ(layer_named(model, "maxpool").output.dims, (std::vector<int64_t>{64, 56, 56}));
    EXPECT_EQ(layer_named(model, "avgpool").output.dims,
              (std::vector<int64_t>{net.final_channels, 1, 1}));
  }
  Model r50 = load_example("resnet50.yaml");
  // layer2.0 of torchvision: stride 2 on conv2 (3x3), not on conv1 (1x1).
  EXPECT_EQ(layer_named(r50, "layer2.first.conv1").window.stride_h, 1);
  EXPECT_EQ(layer_named(r50, "layer2.first.conv2").window.stride_h, 2);
  EXPECT_EQ(layer_named(r50, "layer2.first.downsample_conv").window.stride_h, 2);
  EXPECT_EQ(layer_named(r50, "layer1.first.downsample_conv").window.stride_h, 1);
  EXPECT_EQ(layer_named(r50, "layer3.rest.4.conv3").output.dims,
            (std::vector<int64_t>{1024, 14, 14}));
  // The identity shortcut of a plain block adds the previous block's output.
  const Layer& add = layer_named(r50, "layer3.rest.1.add");
  ASSERT_EQ(add.inputs.size(), 2u);
  EXPECT_EQ(add.inputs[1], r50.find("layer3.rest.0.relu3"));
  Model r18 = load_example("resnet18.yaml");
  // BasicBlock nets keep 64 channels through layer1: no downsample there.
  for (const Layer& l : r18.layers)
    EXPECT_FALSE(l.name.rfind("layer1.", 0) == 0 &&
                 l.name.find("downsample") != std::string::npos) << l.name;
  EXPECT_EQ(layer_named(r18, "layer2.first.conv1").window.stride_h, 2);
  EXPECT_EQ(layer_named(r18, "layer4.rest.relu2").output.dims, (std::vector<int64_t>{512, 7, 7}));
}

// He et al. 2016: depth 9n + 2 = 1001 with n = 111, i.e. 1 + 3 * 111 * 3 + 1 weighted layers
// on the longest path; the 3 projection shortcuts make 1003 convs in all.
TEST(ExampleModels, ResNet1001IsThePreActivationBottleneckNet) {
  Model model = load_example("resnet1001.yaml");
  EXPECT_EQ(count_op(model, Op::conv), 1 + 3 * 111 * 3 + 3);
  EXPECT_EQ(count_op(model, Op::linear), 1);
  EXPECT_EQ(count_op(model, Op::add), 3 * 111);
  EXPECT_EQ(count_op(model, Op::batchnorm), 3 * 111 * 3 + 1);
  EXPECT_EQ(weighted_depth(model), 9 * 111 + 2);
  EXPECT_EQ(layer_named(model, "stage1.first.add").output.dims, (std::vector<int64_t>{64, 32, 32}));
  EXPECT_EQ(layer_named(model, "stage2.first.add").output.dims, (std::vector<int64_t>{128, 16, 16}));
  EXPECT_EQ(layer_named(model, "stage3.rest.109.add").output.dims,
            (std::vector<int64_t>{256, 8, 8}));
  // Pre-activation: the unit's first op is batchnorm and the sum is not followed by a relu.
  const Layer& bn = layer_named(model, "stage2.rest.0.bn1");
  ASSERT_EQ(bn.inputs.size(), 1u);
  EXPECT_EQ(bn.inputs[0], model.find("stage2.first.add"));
}

TEST(ExampleModels, GoogLeNetFollowsTorchvision) {
  Model model = load_example("googlenet.yaml");
  EXPECT_EQ(count_op(model, Op::conv), 57);
  EXPECT_EQ(count_op(model, Op::concat), 9);
  for (const Layer& l : model.layers) {
    if (l.op == Op::batchnorm) {
      EXPECT_DOUBLE_EQ(l.eps, 0.001) << l.name;
    }
    if (l.op == Op::pool) {
      EXPECT_TRUE(l.ceil_mode) << l.name;
    }
    if (l.op == Op::conv) {
      EXPECT_FALSE(l.bias) << l.name;
    }
  }
  // torchvision's "5x5" branch is a 3x3 conv.
  EXPECT_EQ(layer_named(model, "inception4a.branch3_2.conv").window.kernel_h, 3);
  EXPECT_EQ(layer_named(model, "maxpool1").output.dims, (std::vector<int64_t>{64, 56, 56}));
  EXPECT_EQ(layer_named(model, "inception3b.concat").output.dims,
            (std::vector<int64_t>{480, 28, 28}));
  EXPECT_EQ(layer_named(model, "inception5b.concat").output.dims,
            (std::vector<int64_t>{1024, 7, 7}));
  EXPECT_DOUBLE_EQ(layer_named(model, "dropout").p, 0.2);
}

TEST(ExampleModels, DenseNet121FollowsTorchvision) {
  Model model = load_example("densenet121.yaml");
  EXPECT_EQ(count_op(model, Op::concat), 6 + 12 + 24 + 16);
  EXPECT_EQ(count_op(model, Op::conv), 1 + 2 * 58 + 3);
  EXPECT_EQ(layer_named(model, "denseblock1").output.dims, (std::vector<int64_t>{256, 56, 56}));
  EXPECT_EQ(layer_named(model, "transition3").output.dims, (std::vector<int64_t>{512, 7, 7}));
  EXPECT_EQ(layer_named(model, "denseblock4.15.concat").output.dims,
            (std::vector<int64_t>{1024, 7, 7}));
  EXPECT_EQ(layer_named(model, "transition1.pool").pool_mode, PoolMode::avg);
}

TEST(ExampleModels, EveryOpUsesEveryOp) {
  const std::vector<Op> all_ops = {Op::conv, Op::linear, Op::relu, Op::pool,
                                   Op::global_avgpool, Op::batchnorm, Op::lrn, Op::dropout,
                                   Op::add, Op::concat, Op::flatten, Op::softmax_xent};
  Model with_bn = load_example("every_op.yaml");
  Model without_bn = load_example("every_op_nobn.yaml");
  for (Op op : all_ops) {
    EXPECT_GE(count_op(with_bn, op), 1) << op_name(op);
    if (op != Op::batchnorm) {
      EXPECT_GE(count_op(without_bn, op), 1) << op_name(op);
    }
  }
  EXPECT_EQ(count_op(without_bn, Op::batchnorm), 0);
  for (const Model* model : {&with_bn, &without_bn}) {
    SCOPED_TRACE(model->name);
    bool grouped = false, square3_stride1 = false, max_pool = false, avg_pool = false;
    for (const Layer& l : model->layers) {
      if (l.op == Op::conv) {
        grouped |= l.groups > 1;
        square3_stride1 |= l.window.kernel_h == 3 && l.window.kernel_w == 3 &&
                           l.window.stride_h == 1 && l.window.stride_w == 1;
      }
      if (l.op == Op::pool) (l.pool_mode == PoolMode::max ? max_pool : avg_pool) = true;
    }
    EXPECT_TRUE(grouped);
    EXPECT_TRUE(square3_stride1);
    EXPECT_TRUE(max_pool);
    EXPECT_TRUE(avg_pool);
  }
  // The same net but for the batchnorms: same layers otherwise, in the same order.
  std::vector<std::string> names_without_bn;
  for (const Layer& l : with_bn.layers)
    if (l.op != Op::batchnorm) names_without_bn.push_back(l.name);
  std::vector<std::string> names;
  for (const Layer& l : without_bn.layers) names.push_back(l.name);
  EXPECT_EQ(names, names_without_bn);
}

TEST(ExampleModels, CifarSmallIsSmall) {
  Model model = load_example("cifar_small.yaml");
  EXPECT_GE(model.parameter_count(), 50'000);
  EXPECT_LE(model.parameter_count(), 200'000);
  EXPECT_EQ(count_op(model, Op::conv), 3);
  EXPECT_EQ(count_op(model, Op::linear), 1);
}

}  // namespace
}  // namespace mplan
