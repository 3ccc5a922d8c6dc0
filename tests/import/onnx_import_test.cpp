// `mplan import` on small ONNX graphs built here (tests/import/onnx_builder.h):
// what each node becomes, what is folded, what is refused and how.

#include <gtest/gtest.h>

#include <random>

#include "frontend/onnx/onnx_import.h"
#include "frontend/parse.h"
#include "tests/import/onnx_builder.h"

namespace mplan::onnx_import {
namespace {

using onnx_test::GraphBuilder;

Model parse(const ImportResult& r) {
  Result<Model> model = parse_model(r.yaml, "imported.yaml");
  EXPECT_TRUE(model.ok()) << (model.ok() ? "" : model.error().to_string()) << "\n" << r.yaml;
  return model.ok() ? model.value() : Model{};
}

const Layer* find(const Model& m, const std::string& name) {
  const LayerId id = m.find(name);
  return id < 0 ? nullptr : &m.layers[static_cast<size_t>(id)];
}

// A small conv net as PyTorch writes it: conv, batch norm, ReLU, an
// Identity, Dropout in eval mode, global pooling, Flatten, Gemm.
GraphBuilder conv_net(int64_t batch = 2) {
  GraphBuilder g;
  g.input("x", {batch, 3, 8, 8});
  g.param("conv.weight", {4, 3, 3, 3});
  g.param("conv.bias", {4});
  for (const char* p : {"bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"}) g.param(p, {4});
  g.param("fc.weight", {5, 4});
  g.param("fc.bias", {5});
  auto* conv = g.node("Conv", {"x", "conv.weight", "conv.bias"}, {"c"}, "/conv/Conv");
  GraphBuilder::ints(conv, "pads", {1, 1, 1, 1});
  GraphBuilder::ints(conv, "kernel_shape", {3, 3});
  g.node("BatchNormalization", {"c", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"}, {"b"},
         "/bn/BatchNormalization");
  g.node("Relu", {"b"}, {"r"}, "/relu/Relu");
  g.node("Identity", {"r"}, {"i"}, "/Identity");
  g.node("Dropout", {"i"}, {"d"}, "/dropout/Dropout");
  g.node("GlobalAveragePool", {"d"}, {"p"}, "/pool/GlobalAveragePool");
  auto* flat = g.node("Flatten", {"p"}, {"f"}, "/Flatten");
  GraphBuilder::integer(flat, "axis", 1);
  auto* gemm = g.node("Gemm", {"f", "fc.weight", "fc.bias"}, {"logits"}, "/fc/Gemm");
  GraphBuilder::integer(gemm, "transB", 1);
  g.output("logits", {batch, 5});
  return g;
}

TEST(OnnxImport, ConvNetBecomesLayersNamedAfterItsNodes) {
  Result<ImportResult> r = import_onnx_bytes(conv_net().bytes(), "net.onnx", {});
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  const Model m = parse(*r);
  EXPECT_EQ(m.batch, 2);  // the graph's
  EXPECT_EQ(m.classes, 5);
  EXPECT_EQ(m.input.dims, (std::vector<int64_t>{3, 8, 8}));
  // conv, batchnorm, relu, pool, linear and the loss: Identity, Dropout (eval)
  // and Flatten fold away (the linear reads the pooled [4, 1, 1] through a reshape).
  ASSERT_NE(find(m, "conv/Conv"), nullptr);
  EXPECT_EQ(find(m, "conv/Conv")->window.pad_h, 1);
  EXPECT_EQ(find(m, "bn/BatchNormalization")->op, Op::batchnorm);
  EXPECT_EQ(find(m, "fc/Gemm")->op, Op::linear);
  EXPECT_EQ(m.layers.back().op, Op::softmax_xent);
  for (const Layer& l : m.layers) EXPECT_NE(l.op, Op::dropout) << l.name;
  EXPECT_EQ(m.parameter_count(), 4 * 27 + 4 + 2 * 4 + 5 * 4 + 5);
  EXPECT_EQ(r->onnx_parameters, m.parameter_count());
  EXPECT_NE(r->yaml.find("# Imported by `mplan import` from net.onnx"), std::string::npos);
}

TEST(OnnxImport, FlagsSetTheBatchClassesAndOptimizer) {
  ImportOptions options;
  options.batch = 64;
  options.classes = 5;
  options.name = "tiny";
  options.optimizer.lr = 0.1;
  Result<ImportResult> r = import_onnx_bytes(conv_net().bytes(), "net.onnx", options);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  const Model m = parse(*r);
  EXPECT_EQ(m.batch, 64);
  EXPECT_EQ(m.name, "tiny");
  EXPECT_DOUBLE_EQ(m.optimizer.lr, 0.1);

  options.classes = 7;
  r = import_onnx_bytes(conv_net().bytes(), "net.onnx", options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("--classes 7 does not match the logits' 5"), std::string::npos);

  options = {};
  options.input = "images";
  r = import_onnx_bytes(conv_net().bytes(), "net.onnx", options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("no input 'images'"), std::string::npos);
}

// A graph exported in 16 bits imports at that precision (said in a note);
// --precision writes the one asked for.
TEST(OnnxImport, SixteenBitGraphsImportAtTheirPrecision) {
  for (const auto& [type, name] : {std::pair{onnx::TensorProto::FLOAT16, "fp16"},
                                   std::pair{onnx::TensorProto::BFLOAT16, "bf16"}}) {
    GraphBuilder g = conv_net();
    g.input_type("x", type);
    Result<ImportResult> r = import_onnx_bytes(g.bytes(), "net.onnx", {});
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_STREQ(precision_name(parse(*r).precision), name);
    ASSERT_FALSE(r->notes.empty());
    EXPECT_NE(r->notes.back().find(std::string("imported as precision ") + name), std::string::npos)
        << r->notes.back();
  }
  ImportOptions options;
  options.precision = Precision::bf16;
  Result<ImportResult> r = import_onnx_bytes(conv_net().bytes(), "net.onnx", options);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(parse(*r).precision, Precision::bf16);
  r = import_onnx_bytes(conv_net().bytes(), "net.onnx", {});
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->yaml.find("precision"), std::string::npos);  // a float32 graph writes none
}

TEST(OnnxImport, ADynamicBatchNeedsTheBatchFlag) {
  Result<ImportResult> r = import_onnx_bytes(conv_net(/*batch=*/-1).bytes(), "net.onnx", {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("no fixed batch size: give one with --batch"), std::string::npos);
  ImportOptions options;
  options.batch = 16;
  r = import_onnx_bytes(conv_net(-1).bytes(), "net.onnx", options);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(parse(*r).batch, 16);
}

TEST(OnnxImport, EveryUnsupportedNodeIsReportedWithItsAttributes) {
  GraphBuilder g;
  g.input("x", {2, 3, 8, 8});
  g.param("w", {4, 3, 1, 1});
  g.node("Conv", {"x", "w"}, {"c"}, "/conv/Conv");
  auto* leaky = g.node("LeakyRelu", {"c"}, {"l"}, "/act/LeakyRelu");
  GraphBuilder::real(leaky, "alpha", 0.125f);
  g.node("Relu", {"l"}, {"r"}, "/relu/Relu");  // after a refused node: not reported itself
  auto* top = g.node("TopK", {"r"}, {"t"}, "/topk/TopK");
  GraphBuilder::integer(top, "axis", 1);
  g.node("GlobalAveragePool", {"t"}, {"p"}, "/pool");
  g.output("p");
  Result<ImportResult> r = import_onnx_bytes(g.bytes(), "bad.onnx", {});
  ASSERT_FALSE(r.ok());
  const std::string& m = r.error().message;
  EXPECT_NE(m.find("2 nodes cannot be imported, so nothing was written"), std::string::npos) << m;
  EXPECT_NE(m.find("node '/act/LeakyRelu' (LeakyRelu, alpha=0.125)"), std::string::npos) << m;
  EXPECT_NE(m.find("node '/topk/TopK' (TopK, axis=1)"), std::string::npos) << m;
  EXPECT_NE(m.find("mplan has no layer for the ONNX op LeakyRelu"), std::string::npos) << m;
  EXPECT_EQ(m.find("/relu/Relu"), std::string::npos) << "a node is refused for itself only";
}

TEST(OnnxImport, SiluAndGeluPatternsBecomeOneLayer) {
  GraphBuilder g;
  g.input("x", {2, 6, 1, 1});
  auto* flat = g.node("Flatten", {"x"}, {"xf"}, "/Flatten");
  GraphBuilder::integer(flat, "axis", 1);
  g.param("w", {6, 6});  // MatMul's (in, out)
  g.node("MatMul", {"xf", "w"}, {"h"}, "/fc/MatMul");
  g.node("Sigmoid", {"h"}, {"s"}, "/act/Sigmoid");
  g.node("Mul", {"h", "s"}, {"silu"}, "/act/Mul");  // SiLU
  g.constant_real("root2", 1.4142135f);
  g.constant_real("one", 1.0f);
  g.constant_real("half", 0.5f);
  g.node("Div", {"silu", "root2"}, {"a"}, "/gelu/Div");
  g.node("Erf", {"a"}, {"e"}, "/gelu/Erf");
  g.node("Add", {"e", "one"}, {"e1"}, "/gelu/Add");
  g.node("Mul", {"silu", "e1"}, {"m"}, "/gelu/Mul");
  g.node("Mul", {"m", "half"}, {"gelu"}, "/gelu/Mul_1");
  g.param("w2", {6, 3});
  g.node("MatMul", {"gelu", "w2"}, {"logits"}, "/head/MatMul");
  g.output("logits", {2, 3});
  Result<ImportResult> r = import_onnx_bytes(g.bytes(), "act.onnx", {});
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  const Model m = parse(*r);
  std::vector<Op> ops;
  for (const Layer& l : m.layers) ops.push_back(l.op);
  EXPECT_EQ(ops, (std::vector<Op>{Op::reshape, Op::linear, Op::silu, Op::gelu, Op::linear, Op::softmax_xent}));
  EXPECT_FALSE(find(m, "fc/MatMul")->bias);
  EXPECT_NE(r->yaml.find("its ONNX weight is stored (in, out)"), std::string::npos);
}

TEST(OnnxImport, GelusTanhFormBecomesOneLayerAndASquareAloneAProduct) {
  // PyTorch 1.13's export of GELU(approximate='tanh'), node for node.
  GraphBuilder g;
  g.input("x", {2, 4, 3, 3});
  g.node("Mul", {"x", "x"}, {"x2"}, "/g/Mul");
  g.node("Mul", {"x", "x2"}, {"x3"}, "/g/Mul_1");
  g.constant_real("kappa", 0.044715f);
  g.node("Mul", {"kappa", "x3"}, {"k3"}, "/g/Mul_2");
  g.node("Add", {"x", "k3"}, {"inner"}, "/g/Add");
  g.constant_real("beta", 0.7978845834732056f);
  g.node("Mul", {"beta", "inner"}, {"arg"}, "/g/Mul_3");
  g.node("Tanh", {"arg"}, {"t"}, "/g/Tanh");
  g.constant_real("one", 1.0f);
  g.node("Add", {"one", "t"}, {"t1"}, "/g/Add_1");
  g.node("Mul", {"x", "t1"}, {"m"}, "/g/Mul_4");
  g.constant_real("half", 0.5f);
  g.node("Mul", {"half", "m"}, {"gelu"}, "/g/Mul_5");
  g.node("Mul", {"gelu", "gelu"}, {"sq"}, "/square");  // a square on its own: a product
  g.node("GlobalAveragePool", {"sq"}, {"p"}, "/pool");
  auto* flat = g.node("Flatten", {"p"}, {"logits"}, "/Flatten");
  GraphBuilder::integer(flat, "axis", 1);
  g.output("logits", {2, 4});
  Result<ImportResult> r = import_onnx_bytes(g.bytes(), "tanh.onnx", {});
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  const Model m = parse(*r);
  const Layer* gelu = find(m, "g/Mul_5");
  ASSERT_NE(gelu, nullptr) << r->yaml;
  EXPECT_EQ(gelu->op, Op::gelu);
  EXPECT_TRUE(gelu->tanh_approximation);
  const Layer* square = find(m, "square");
  ASSERT_NE(square, nullptr) << r->yaml;
  EXPECT_EQ(square->op, Op::mul);
  EXPECT_EQ(square->inputs[0], square->inputs[1]);
}

TEST(OnnxImport, ASigmoidGateOfAnotherTensorIsASigmoidAndAProduct) {
  // Squeeze-and-excitation: x * sigmoid(conv(pool(x))).
  GraphBuilder g;
  g.input("x", {2, 4, 5, 5});
  g.param("w", {4, 4, 1, 1});
  g.node("GlobalAveragePool", {"x"}, {"p"}, "/se/pool");
  g.node("Conv", {"p", "w"}, {"c"}, "/se/fc");
  g.node("Sigmoid", {"c"}, {"s"}, "/se/Sigmoid");
  g.node("Mul", {"s", "x"}, {"y"}, "/se/Mul");
  g.node("GlobalAveragePool", {"y"}, {"q"}, "/pool");
  auto* flat = g.node("Flatten", {"q"}, {"logits"}, "/Flatten");
  GraphBuilder::integer(flat, "axis", 1);
  g.output("logits", {2, 4});
  Result<ImportResult> r = import_onnx_bytes(g.bytes(), "se.onnx", {});
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  const Model m = parse(*r);
  EXPECT_EQ(find(m, "se/Sigmoid")->op, Op::sigmoid);
  const Layer* mul = find(m, "se/Mul");
  ASSERT_NE(mul, nullptr);
  EXPECT_EQ(mul->op, Op::mul);
  EXPECT_EQ(m.layers[static_cast<size_t>(mul->inputs[0])].name, "se/Sigmoid");
  EXPECT_EQ(mul->inputs[1], kModelInput);
}

TEST(OnnxImport, ShuffleNetsReshapeTransposeReshapeIsAChannelShuffle) {
  GraphBuilder g;
  g.input("x", {2, 6, 4, 4});
  g.constant_ints("split", {2, 2, 3, 4, 4});  // the traced batch 2, 2 groups of 3
  g.constant_ints("merge", {2, -1, 4, 4});
  g.node("Reshape", {"x", "split"}, {"a"}, "/Reshape");
  auto* t = g.node("Transpose", {"a"}, {"b"}, "/Transpose");
  GraphBuilder::ints(t, "perm", {0, 2, 1, 3, 4});
  g.node("Reshape", {"b", "merge"}, {"c"}, "/Reshape_1");
  g.node("GlobalAveragePool", {"c"}, {"p"}, "/pool");
  auto* flat = g.node("Flatten", {"p"}, {"logits"}, "/Flatten");
  GraphBuilder::integer(flat, "axis", 1);
  g.output("logits", {2, 6});
  Result<ImportResult> r = import_onnx_bytes(g.bytes(), "shuffle.onnx", {});
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  const Model m = parse(*r);
  ASSERT_GE(m.layers.size(), 2u);
  EXPECT_EQ(m.layers[0].op, Op::channel_shuffle);
  EXPECT_EQ(m.layers[0].groups, 2);
}

TEST(OnnxImport, BadFilesAreErrorsThatNameTheFile) {
  for (const std::string& bytes : {std::string(), std::string("not a protobuf \x01\x02\xff", 19)}) {
    Result<ImportResult> r = import_onnx_bytes(bytes, "junk.onnx", {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().where.file, "junk.onnx");
  }
  Result<ImportResult> missing = import_onnx("/nonexistent/model.onnx", {});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("cannot read the ONNX file"), std::string::npos);
  EXPECT_TRUE(is_onnx_path("a/b.onnx"));
  EXPECT_FALSE(is_onnx_path("a/b.yaml"));
}

TEST(OnnxImport, DamagedFilesAreErrorsNotCrashes) {
  // Bytes of a valid model with a few flipped at random (fixed seeds): each
  // either imports to a model that parses, or is an error naming the file.
  const std::string good = conv_net().bytes();
  std::mt19937 rng(14);
  int imported = 0, refused = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string bytes = good;
    const int flips = 1 + trial % 3;
    for (int f = 0; f < flips; ++f)
      bytes[rng() % bytes.size()] = static_cast<char>(rng() & 0xff);
    Result<ImportResult> r = import_onnx_bytes(bytes, "damaged.onnx", {});
    if (r.ok()) {
      ++imported;
      EXPECT_TRUE(parse_model(r->yaml, "damaged.yaml").ok()) << "trial " << trial;
    } else {
      ++refused;
      EXPECT_EQ(r.error().where.file, "damaged.onnx");
      EXPECT_FALSE(r.error().message.empty());
    }
  }
  std::printf("damaged files: %d imported, %d refused\n", imported, refused);
  EXPECT_GT(refused, 0);
}

TEST(OnnxImport, AGraphWithoutAnImageInputIsRefused) {
  GraphBuilder g;
  g.input("tokens", {2, 16});
  g.param("w", {16, 4});
  g.node("MatMul", {"tokens", "w"}, {"y"}, "/MatMul");
  g.output("y", {2, 4});
  Result<ImportResult> r = import_onnx_bytes(g.bytes(), "seq.onnx", {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("no image input"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace mplan::onnx_import
