// Parsing of every op, defaults, generated names, `in:` and shape inference
// (docs/model-format.md, "Ops" and "Shapes").
#include <gtest/gtest.h>

#include "frontend/parse.h"

namespace mplan {
namespace {

// A model around `layers` (YAML list items, each line indented by 2). The
// first layer is on line 6 of the text.
std::string model_text(const std::string& layers, int64_t classes = 10,
                       const std::string& input = "[3, 32, 32]") {
  return "name: t\ninput: " + input + "\nbatch: 8\nclasses: " + std::to_string(classes) +
         "\nlayers:\n" + layers;
}

Model parse_ok(const std::string& text) {
  Result<Model> r = parse_model(text, "m.yaml");
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().to_string()) << "\n" << text;
  return r.ok() ? std::move(r).value() : Model{};
}

const Layer& layer(const Model& m, const std::string& name) {
  LayerId id = m.find(name);
  EXPECT_GE(id, 0) << "no layer " << name;
  static const Layer none;
  return id >= 0 ? m.layers[id] : none;
}

Shape shape(std::vector<int64_t> dims) { return Shape{std::move(dims)}; }

// Tail that turns any [C, H, W] output into the loss over 10 classes.
const std::string kHead =
    "  - {op: global_avgpool}\n  - {op: flatten}\n  - {op: linear, out: 10}\n"
    "  - {op: softmax_xent}\n";

TEST(ParseOps, ModelFieldsAndDefaults) {
  Model m = parse_ok(model_text("  - {op: flatten}\n  - {op: linear, out: 10}\n  - {op: softmax_xent}\n"));
  EXPECT_EQ(m.name, "t");
  EXPECT_EQ(m.source_file, "m.yaml");
  EXPECT_EQ(m.input, shape({3, 32, 32}));
  EXPECT_EQ(m.batch, 8);
  EXPECT_EQ(m.classes, 10);
  EXPECT_EQ(m.dtype, "float32");
  EXPECT_EQ(m.optimizer.kind, "sgd");
  EXPECT_DOUBLE_EQ(m.optimizer.lr, 0.01);
  EXPECT_DOUBLE_EQ(m.optimizer.momentum, 0.9);
  EXPECT_DOUBLE_EQ(m.optimizer.weight_decay, 0.0);
  ASSERT_EQ(m.layers.size(), 3u);
  EXPECT_EQ(m.layers[0].where.file, "m.yaml");
  EXPECT_EQ(m.layers[0].where.line, 6);
  EXPECT_EQ(m.layers[0].where.column, 5);
  EXPECT_EQ(m.layers[2].where.line, 8);
}

TEST(ParseOps, OptimizerDtypeAndNameFromFile) {
  std::string text =
      "input: [1, 4, 4]\nbatch: 2\nclasses: 16\ndtype: float32\n"
      "optimizer: {kind: sgd, lr: 0.1, momentum: 0.5, weight_decay: 1e-4}\n"
      "layers:\n  - op: flatten\n  - op: softmax_xent\n";
  Result<Model> r = parse_model(text, "dir/tiny_net.yaml");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->name, "tiny_net");
  EXPECT_DOUBLE_EQ(r->optimizer.lr, 0.1);
  EXPECT_DOUBLE_EQ(r->optimizer.momentum, 0.5);
  EXPECT_DOUBLE_EQ(r->optimizer.weight_decay, 1e-4);
  EXPECT_FALSE(r->optimizer.nesterov);
  EXPECT_FALSE(r->optimizer.no_decay_biases);
  EXPECT_FALSE(r->optimizer.no_decay_norms);
  EXPECT_DOUBLE_EQ(r->layers[1].label_smoothing, 0.0);
  EXPECT_EQ(r->layers[1].output, shape({16}));
}

TEST(ParseOps, AdamwTakesPyTorchsDefaults) {
  const std::string layers = "layers:\n  - op: flatten\n  - op: softmax_xent\n";
  Result<Model> r = parse_model("input: [1, 4, 4]\nbatch: 2\nclasses: 16\noptimizer: {kind: adamw}\n" + layers,
                                "net.yaml");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_TRUE(r->optimizer.adamw());
  EXPECT_DOUBLE_EQ(r->optimizer.lr, 1e-3);
  EXPECT_DOUBLE_EQ(r->optimizer.weight_decay, 1e-2);
  EXPECT_DOUBLE_EQ(r->optimizer.beta1, 0.9);
  EXPECT_DOUBLE_EQ(r->optimizer.beta2, 0.999);
  EXPECT_DOUBLE_EQ(r->optimizer.eps, 1e-8);
  EXPECT_EQ(r->optimizer.state_per_parameter(), 2);
  r = parse_model("input: [1, 4, 4]\nbatch: 2\nclasses: 16\n"
                  "optimizer: {kind: adamw, lr: 0.003, betas: [0.8, 0.95], eps: 1e-6, weight_decay: 0.1}\n" + layers,
                  "net.yaml");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_DOUBLE_EQ(r->optimizer.lr, 0.003);
  EXPECT_DOUBLE_EQ(r->optimizer.beta1, 0.8);
  EXPECT_DOUBLE_EQ(r->optimizer.beta2, 0.95);
  EXPECT_DOUBLE_EQ(r->optimizer.eps, 1e-6);
  EXPECT_DOUBLE_EQ(r->optimizer.weight_decay, 0.1);
}

TEST(ParseOps, NesterovNoWeightDecayAndLabelSmoothing) {
  const std::string text =
      "input: [1, 4, 4]\nbatch: 2\nclasses: 16\n"
      "optimizer: {momentum: 0.9, weight_decay: 1e-4, nesterov: true, no_weight_decay: [norm, bias]}\n"
      "layers:\n  - op: flatten\n  - {op: softmax_xent, label_smoothing: 0.1}\n";
  Result<Model> r = parse_model(text, "net.yaml");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_TRUE(r->optimizer.nesterov);
  EXPECT_TRUE(r->optimizer.no_decay_biases);
  EXPECT_TRUE(r->optimizer.no_decay_norms);
  EXPECT_DOUBLE_EQ(r->layers[1].label_smoothing, 0.1);
  // The options change what the model trains, so they change its digest.
  Result<Model> plain = parse_model(
      "input: [1, 4, 4]\nbatch: 2\nclasses: 16\noptimizer: {momentum: 0.9, weight_decay: 1e-4}\n"
      "layers:\n  - op: flatten\n  - op: softmax_xent\n",
      "net.yaml");
  ASSERT_TRUE(plain.ok());
  EXPECT_NE(model_digest(*r), model_digest(*plain));
}

TEST(ParseOps, ConvDefaultsAndShape) {
  Model m = parse_ok(model_text("  - {name: c, op: conv, out: 16, kernel: 3, pad: 1}\n" + kHead));
  const Layer& c = layer(m, "c");
  EXPECT_EQ(c.op, Op::conv);
  EXPECT_EQ(c.out, 16);
  EXPECT_EQ(c.window, (Window{3, 3, 1, 1, 1, 1}));
  EXPECT_EQ(c.groups, 1);
  EXPECT_TRUE(c.bias);
  EXPECT_EQ(c.output, shape({16, 32, 32}));
  EXPECT_EQ(c.inputs, std::vector<LayerId>{kModelInput});
  EXPECT_EQ(m.parameter_count(m.find("c")), 16 * 3 * 3 * 3 + 16);
}

TEST(ParseOps, ConvHeightWidthForms) {
  // H: (32 + 2*1 - 3)/1 + 1 = 32; W: (32 + 2*2 - 5)/2 + 1 = 16.
  Model m = parse_ok(model_text(
      "  - {name: c, op: conv, out: 4, kernel: [3, 5], stride: [1, 2], pad: [1, 2], bias: false}\n" +
      kHead));
  const Layer& c = layer(m, "c");
  EXPECT_EQ(c.window, (Window{3, 5, 1, 2, 1, 2}));
  EXPECT_FALSE(c.bias);
  EXPECT_EQ(c.output, shape({4, 32, 16}));
  EXPECT_EQ(m.parameter_count(m.find("c")), 4 * 3 * 3 * 5);
}

TEST(ParseOps, ConvStrideFloorsAndGroups) {
  // (32 - 7 + 2*3)/2 + 1 = 16 (floor of 15.5); groups 4: weights 32*(16/4)*3*3.
  Model m = parse_ok(model_text(
      "  - {name: c1, op: conv, out: 16, kernel: 7, stride: 2, pad: 3}\n"
      "  - {name: c2, op: conv, out: 32, kernel: 3, groups: 4, pad: 1, bias: false}\n" + kHead));
  EXPECT_EQ(layer(m, "c1").output, shape({16, 16, 16}));
  EXPECT_EQ(layer(m, "c2").groups, 4);
  EXPECT_EQ(layer(m, "c2").output, shape({32, 16, 16}));
  EXPECT_EQ(m.parameter_count(m.find("c2")), 32 * 4 * 3 * 3);
}

TEST(ParseOps, PoolFloorAndCeilMode) {
  // 32 -> floor((32-3)/2)+1 = 15; ceil mode: ceil(29/2)+1 = 16 (as PyTorch).
  Model m = parse_ok(model_text(
      "  - {name: p1, op: pool, mode: max, kernel: 3, stride: 2, in: input}\n"
      "  - {name: p2, op: pool, mode: max, kernel: 3, stride: 2, ceil_mode: true, in: input}\n"
      "  - {name: p3, op: pool, mode: avg, kernel: 2, in: input}\n"
      "  - {name: j, op: add, in: [p2, p3]}\n"
      "  - {name: g1, op: global_avgpool, in: p1}\n  - {name: g2, op: global_avgpool, in: j}\n"
      "  - {op: concat, in: [g1, g2]}\n  - {op: flatten}\n  - {op: linear, out: 10}\n"
      "  - {op: softmax_xent}\n"));
  EXPECT_EQ(layer(m, "p1").output, shape({3, 15, 15}));
  EXPECT_FALSE(layer(m, "p1").ceil_mode);
  EXPECT_EQ(layer(m, "p1").pool_mode, PoolMode::max);
  EXPECT_EQ(layer(m, "p2").output, shape({3, 16, 16}));
  EXPECT_TRUE(layer(m, "p2").ceil_mode);
  // stride defaults to the kernel.
  EXPECT_EQ(layer(m, "p3").window, (Window{2, 2, 2, 2, 0, 0}));
  EXPECT_EQ(layer(m, "p3").pool_mode, PoolMode::avg);
  EXPECT_EQ(layer(m, "p3").output, shape({3, 16, 16}));
}

TEST(ParseOps, PoolCeilModeDropsWindowStartingInRightPadding) {
  // PyTorch: MaxPool2d(2, 2, padding=1, ceil_mode=True) on 5x5 gives 3x3 (the
  // 4th window would start in the right padding); on 7x9 with kernel (3, 2),
  // stride (2, 3), pad 1 it gives 4x4 (checked with torch 2.x).
  Model m = parse_ok(model_text(
      "  - {name: p, op: pool, mode: max, kernel: 2, stride: 2, pad: 1, ceil_mode: true}\n"
      "  - {op: flatten}\n  - {op: linear, out: 10}\n  - {op: softmax_xent}\n",
      10, "[3, 5, 5]"));
  EXPECT_EQ(layer(m, "p").output, shape({3, 3, 3}));
  Model m2 = parse_ok(model_text(
      "  - {name: q, op: pool, mode: avg, kernel: [3, 2], stride: [2, 3], pad: 1, ceil_mode: true}\n"
      "  - {op: flatten}\n  - {op: linear, out: 10}\n  - {op: softmax_xent}\n",
      10, "[3, 7, 9]"));
  EXPECT_EQ(layer(m2, "q").output, shape({3, 4, 4}));
}

TEST(ParseOps, EveryOtherOpWithDefaults) {
  Model m = parse_ok(model_text(
      "  - {name: bn, op: batchnorm}\n"
      "  - {name: r, op: relu}\n"
      "  - {name: n, op: lrn}\n"
      "  - {name: d, op: dropout}\n"
      "  - {name: g, op: global_avgpool}\n"
      "  - {name: f, op: flatten}\n"
      "  - {name: fc, op: linear, out: 10, bias: false}\n"
      "  - {name: bn1d, op: batchnorm, eps: 0.001, momentum: 0.2}\n"
      "  - {name: loss, op: softmax_xent}\n"));
  EXPECT_DOUBLE_EQ(layer(m, "bn").eps, 1e-5);
  EXPECT_DOUBLE_EQ(layer(m, "bn").momentum, 0.1);
  EXPECT_EQ(layer(m, "bn").output, shape({3, 32, 32}));
  EXPECT_EQ(m.parameter_count(m.find("bn")), 6);
  EXPECT_EQ(m.buffer_count(m.find("bn")), 6);
  EXPECT_EQ(layer(m, "r").output, shape({3, 32, 32}));
  EXPECT_EQ(layer(m, "n").lrn_size, 5);
  EXPECT_DOUBLE_EQ(layer(m, "n").alpha, 1e-4);
  EXPECT_DOUBLE_EQ(layer(m, "n").beta, 0.75);
  EXPECT_DOUBLE_EQ(layer(m, "n").k, 2.0);
  EXPECT_DOUBLE_EQ(layer(m, "d").p, 0.5);
  EXPECT_EQ(layer(m, "g").output, shape({3, 1, 1}));
  EXPECT_EQ(layer(m, "f").output, shape({3}));
  EXPECT_EQ(layer(m, "fc").output, shape({10}));
  EXPECT_EQ(m.parameter_count(m.find("fc")), 30);
  EXPECT_DOUBLE_EQ(layer(m, "bn1d").eps, 0.001);
  EXPECT_DOUBLE_EQ(layer(m, "bn1d").momentum, 0.2);
  EXPECT_EQ(layer(m, "bn1d").output, shape({10}));
  EXPECT_EQ(m.parameter_count(m.find("bn1d")), 20);
  EXPECT_EQ(layer(m, "loss").op, Op::softmax_xent);
  EXPECT_EQ(layer(m, "loss").output, shape({10}));
  EXPECT_EQ(m.parameter_count(), 6 + 30 + 20);
}

TEST(ParseOps, ExplicitFieldsOfLrnAndDropout) {
  Model m = parse_ok(model_text(
      "  - {name: n, op: lrn, size: 3, alpha: 0.001, beta: 0.5, k: 1}\n"
      "  - {name: d, op: dropout, p: 0.25}\n" + kHead));
  EXPECT_EQ(layer(m, "n").lrn_size, 3);
  EXPECT_DOUBLE_EQ(layer(m, "n").alpha, 0.001);
  EXPECT_DOUBLE_EQ(layer(m, "n").beta, 0.5);
  EXPECT_DOUBLE_EQ(layer(m, "n").k, 1.0);
  EXPECT_DOUBLE_EQ(layer(m, "d").p, 0.25);
}

TEST(ParseOps, AddAndConcat) {
  Model m = parse_ok(model_text(
      "  - {name: a, op: conv, out: 8, kernel: 1}\n"
      "  - {name: b, op: conv, out: 8, kernel: 3, pad: 1, in: input}\n"
      "  - {name: c, op: conv, out: 4, kernel: 1, in: input}\n"
      "  - {name: sum, op: add, in: [a, b]}\n"
      "  - {name: cat, op: concat, in: [sum, c, input]}\n" + kHead));
  EXPECT_EQ(layer(m, "sum").inputs, (std::vector<LayerId>{m.find("a"), m.find("b")}));
  EXPECT_EQ(layer(m, "sum").output, shape({8, 32, 32}));
  EXPECT_EQ(layer(m, "cat").inputs,
            (std::vector<LayerId>{m.find("sum"), m.find("c"), kModelInput}));
  EXPECT_EQ(layer(m, "cat").output, shape({15, 32, 32}));
  EXPECT_EQ(m.input_shape(m.find("cat"), 2), shape({3, 32, 32}));
  EXPECT_EQ(m.input_shape(m.find("cat"), 1), shape({4, 32, 32}));
}

TEST(ParseOps, GeneratedNamesCountEachOpInItsList) {
  Model m = parse_ok(model_text(
      "  - {name: first, op: conv, out: 8, kernel: 3}\n"
      "  - {op: conv, out: 8, kernel: 3}\n"
      "  - {op: relu}\n"
      "  - {op: relu}\n" + kHead));
  ASSERT_EQ(m.layers.size(), 8u);
  EXPECT_EQ(m.layers[0].name, "first");
  EXPECT_EQ(m.layers[1].name, "conv_2");  // the second conv of the list
  EXPECT_EQ(m.layers[2].name, "relu_1");
  EXPECT_EQ(m.layers[3].name, "relu_2");
  EXPECT_EQ(m.layers[4].name, "global_avgpool_1");
  EXPECT_EQ(m.layers[7].name, "softmax_xent_1");
  // Default input: the previous layer; the first layer reads the model input.
  EXPECT_EQ(m.layers[0].inputs, std::vector<LayerId>{kModelInput});
  for (LayerId l = 1; l < 8; ++l) EXPECT_EQ(m.layers[l].inputs, std::vector<LayerId>{l - 1});
}

TEST(ParseOps, BlockStyleMapsAndInAsAString) {
  Model m = parse_ok(model_text(
      "  - name: c\n"
      "    op: conv\n"
      "    out: 8\n"
      "    kernel: 3\n"
      "  - op: relu\n"
      "    in: c\n"
      "  - op: add\n"
      "    in:\n"
      "      - c\n"
      "      - relu_1\n" + kHead, 10, "[8, 10, 10]"));
  EXPECT_EQ(layer(m, "c").where.line, 6);
  EXPECT_EQ(layer(m, "c").where.column, 5);
  EXPECT_EQ(layer(m, "relu_1").inputs, std::vector<LayerId>{0});
  EXPECT_EQ(layer(m, "add_1").inputs, (std::vector<LayerId>{0, 1}));
  EXPECT_EQ(layer(m, "add_1").output, shape({8, 8, 8}));
}

TEST(ParseOps, KernelExactlyFillingPaddedInputIsAllowed) {
  Model m = parse_ok(model_text("  - {name: c, op: conv, out: 2, kernel: 7, pad: 1}\n" + kHead, 10,
                                "[1, 5, 5]"));
  EXPECT_EQ(layer(m, "c").output, shape({2, 1, 1}));
}

TEST(ParseOps, LoadModelReadsAFile) {
  std::string path = ::testing::TempDir() + "/fe_load_model_test.yaml";
  {
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::string text = model_text("  - {op: flatten}\n  - {op: linear, out: 10}\n  - {op: softmax_xent}\n");
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }
  Result<Model> r = load_model(path);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->source_file, path);
  EXPECT_EQ(r->layers.size(), 3u);
  std::remove(path.c_str());

  Result<Model> missing = load_model(path + ".does-not-exist");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().to_string().find("cannot read the model file"), std::string::npos);
  EXPECT_EQ(missing.error().where.file, path + ".does-not-exist");
}

}  // namespace
}  // namespace mplan
