// The ops the vision models added (docs/model-format.md): their
// fields, shapes and parameter counts, and the errors that point at the node.

#include <gtest/gtest.h>

#include "ops/op_table.h"
#include "frontend/parse.h"

namespace mplan {
namespace {

std::string model_text(const std::string& layers, const std::string& input = "[4, 8, 8]", int64_t classes = 3) {
  return "name: t\ninput: " + input + "\nbatch: 4\nclasses: " + std::to_string(classes) + "\nlayers:\n" + layers;
}

const std::string kHead = "  - {op: global_avgpool}\n  - {op: flatten}\n  - {op: linear, out: 3}\n"
                          "  - {op: softmax_xent}\n";
const std::string kSequenceHead = "  - {op: slice, end: 1}\n  - {op: flatten}\n  - {op: linear, out: 3}\n"
                                  "  - {op: softmax_xent}\n";

Model parse_ok(const std::string& text) {
  Result<Model> r = parse_model(text, "m.yaml");
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().to_string()) << "\n" << text;
  return r.ok() ? std::move(r).value() : Model{};
}

// The error's message contains `expected`, at line `line` of the text.
void expect_error(const std::string& text, int line, const std::string& expected) {
  Result<Model> r = parse_model(text, "m.yaml");
  ASSERT_FALSE(r.ok()) << "parsed without error:\n" << text;
  EXPECT_EQ(r.error().where.line, line) << r.error().to_string();
  EXPECT_NE(r.error().message.find(expected), std::string::npos) << r.error().to_string();
}

const Layer& layer(const Model& m, const std::string& name) {
  const LayerId id = m.find(name);
  EXPECT_GE(id, 0) << name;
  static const Layer none;
  return id >= 0 ? m.layers[static_cast<size_t>(id)] : none;
}

int64_t params(const Model& m, const std::string& name) { return m.parameter_count(m.find(name)); }

TEST(VisionOps, EveryVisionOpExampleParsesWithItsShapesAndParameters) {
  Result<Model> r = load_model(std::string(MPLAN_SOURCE_DIR) + "/examples/models/every_vision_op.yaml");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  const Model& m = *r;
  EXPECT_EQ(layer(m, "dil").output.dims, (std::vector<int64_t>{8, 8, 8}));  // dilation 2, pad 2: same size
  EXPECT_EQ(params(m, "dw"), 8 * 1 * 9 + 8);                                // depthwise
  EXPECT_EQ(params(m, "dil"), 8 * 4 * 9 + 8);                               // 2 groups
  EXPECT_EQ(layer(m, "se").output.dims, (std::vector<int64_t>{8, 8, 8}));   // [8,8,8] * [8,1,1]
  EXPECT_EQ(params(m, "scale"), 8);
  EXPECT_EQ(params(m, "ln_c"), 16);
  EXPECT_EQ(layer(m, "one").output.dims, (std::vector<int64_t>{4, 8, 8}));  // a concat of one input
  EXPECT_EQ(layer(m, "apool").output.dims, (std::vector<int64_t>{8, 4, 4}));
  EXPECT_EQ(layer(m, "patches").output.dims, (std::vector<int64_t>{4, 12}));  // 2x2 patches of [8, 4, 4]
  EXPECT_EQ(params(m, "patches"), 12 * 8 * 2 * 2 + 12);
  EXPECT_EQ(layer(m, "cls").output.dims, (std::vector<int64_t>{5, 12}));
  EXPECT_EQ(params(m, "cls"), 12);
  EXPECT_EQ(params(m, "pos"), 5 * 12);
  EXPECT_EQ(params(m, "ln_f"), 24);
  EXPECT_EQ(layer(m, "qkv").output.dims, (std::vector<int64_t>{5, 36}));  // a linear layer per token
  EXPECT_EQ(params(m, "qkv"), 12 * 36 + 36);
  EXPECT_EQ(layer(m, "att").output.dims, (std::vector<int64_t>{5, 12}));
  EXPECT_EQ(params(m, "att"), 0);
  EXPECT_EQ(layer(m, "scores").output.dims, (std::vector<int64_t>{5, 5}));
  EXPECT_EQ(layer(m, "mixed").output.dims, (std::vector<int64_t>{5, 12}));
  EXPECT_EQ(layer(m, "att3").output.dims, (std::vector<int64_t>{5, 12}));
  EXPECT_EQ(layer(m, "flat").output.dims, (std::vector<int64_t>{12}));
  // PyTorch's shapes of the parameter tensors (the weights files, docs/generated-program.md).
  const auto tensors = [&](const std::string& name) {
    const LayerId id = m.find(name);
    return op_spec(m.layers[static_cast<size_t>(id)].op).parameters(m.layers[static_cast<size_t>(id)],
                                                                   m.input_shapes(id));
  };
  EXPECT_EQ(tensors("cls")[0].shape, (std::vector<int64_t>{1, 1, 12}));
  EXPECT_EQ(tensors("pos")[0].shape, (std::vector<int64_t>{1, 5, 12}));
  EXPECT_EQ(tensors("scale")[0].shape, (std::vector<int64_t>{8, 1, 1}));
  EXPECT_EQ(tensors("patches")[0].shape, (std::vector<int64_t>{12, 8, 2, 2}));
}

TEST(VisionOps, FieldsHaveTheirDefaults) {
  const Model m = parse_ok(model_text("  - {name: c, op: clip}\n  - {name: g, op: gelu}\n  - {name: l, op: layernorm}\n"
                                      "  - {name: a, op: adaptive_avgpool, out: [2, 3]}\n" + kHead));
  EXPECT_EQ(layer(m, "c").clip_min, 0.0);
  EXPECT_EQ(layer(m, "c").clip_max, 6.0);
  EXPECT_FALSE(layer(m, "g").tanh_approximation);
  EXPECT_DOUBLE_EQ(layer(m, "l").eps, 1e-5);
  EXPECT_EQ(layer(m, "a").output.dims, (std::vector<int64_t>{4, 2, 3}));
}

TEST(VisionOps, BadFieldsAndShapesAreErrorsAtTheLayer) {
  // Line 6 is the first layer.
  expect_error(model_text("  - {name: c, op: conv, out: 4, kernel: 3, dilation: 4}\n" + kHead), 6,
               "kernel 9x9 is larger than its padded input 8x8 (kernel 3x3 at dilation 4x4)");
  expect_error(model_text("  - {name: c, op: clip, min: 6, max: 0}\n" + kHead), 6, "min must be below max");
  expect_error(model_text("  - {name: g, op: gelu, approximate: fast}\n" + kHead), 6,
               "approximate must be none or tanh, got 'fast'");
  expect_error(model_text("  - {name: s, op: channel_shuffle, groups: 3}\n" + kHead), 6,
               "its 4 channels are not divisible by groups = 3");
  expect_error(model_text("  - {name: s, op: slice, axis: 0, begin: 2, end: 6}\n" + kHead), 6,
               "[begin, end) = [2, 6) is not a non-empty range of axis 0 of size 4");
  expect_error(model_text("  - {name: s, op: slice, axis: 3, end: 1}\n" + kHead), 6, "axis 3 is not an axis");
  expect_error(model_text("  - {name: r, op: reshape, shape: [4, 60]}\n" + kHead), 6, "shape [4, 60] has 240 elements");
  expect_error(model_text("  - {name: p, op: global_avgpool}\n  - {name: m, op: mul, in: [input, p]}\n"
                          "  - {name: n, op: mul, in: [input, m]}\n  - {name: q, op: adaptive_avgpool, out: 2}\n"
                          "  - {name: z, op: mul, in: [m, q]}\n" + kHead),
               10, "mul needs inputs of one shape, or one of them [C, 1, ...]");
  expect_error(model_text("  - {name: pe, op: patch_embed, out: 6, patch: 16}\n" + kSequenceHead), 6,
               "patch 16 is larger than its input's 8x8 image");
  expect_error(model_text("  - {name: ct, op: class_token}\n" + kHead), 6, "class_token needs a sequence [T, D]");
  expect_error(model_text("  - {name: pe, op: patch_embed, out: 7, patch: 2}\n  - {name: a, op: attention, heads: 2}\n" +
                          kSequenceHead),
               7, "a packed attention input is [T, 3D]");
  expect_error(model_text("  - {name: pe, op: patch_embed, out: 6, patch: 2}\n  - {name: a, op: attention, heads: 4, "
                          "in: [pe, pe, pe]}\n" + kSequenceHead),
               7, "its 6 features are not divisible by heads = 4");
  expect_error(model_text("  - {name: pe, op: patch_embed, out: 6, patch: 2}\n  - {name: a, op: attention, heads: 2, "
                          "in: [pe, pe]}\n" + kSequenceHead),
               7, "attention takes one input");
  expect_error(model_text("  - {name: pe, op: patch_embed, out: 6, patch: 2}\n  - {name: x, op: linear, out: 4}\n"
                          "  - {name: m, op: matmul, in: [pe, x]}\n" + kSequenceHead),
               8, "matmul's inner sizes differ");
  expect_error(model_text("  - {name: l, op: layernorm, eps: 0}\n" + kHead), 6, "eps must be positive");
  expect_error(model_text("  - {name: a, op: adaptive_avgpool, out: 0}\n" + kHead), 6, "out must be at least 1");
}

TEST(VisionOps, AConcatOfOneInputIsACopyAndLinearAppliesToEachToken) {
  const Model m = parse_ok(model_text("  - {name: one, op: concat, in: [input]}\n" + kHead));
  EXPECT_EQ(layer(m, "one").output.dims, (std::vector<int64_t>{4, 8, 8}));
  const Model seq = parse_ok(model_text("  - {name: pe, op: patch_embed, out: 6, patch: 4}\n"
                                        "  - {name: fc1, op: linear, out: 10}\n" + kSequenceHead));
  EXPECT_EQ(layer(seq, "fc1").output.dims, (std::vector<int64_t>{4, 10}));
  EXPECT_EQ(params(seq, "fc1"), 6 * 10 + 10);  // per token, shared
}

}  // namespace
}  // namespace mplan
