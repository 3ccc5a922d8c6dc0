// Bad input: every error names file, line and column of the offending node
// and says what was expected (docs/model-format.md, "Errors").
#include <gtest/gtest.h>

#include <random>
#include <sstream>

#include "frontend/parse.h"

namespace mplan {
namespace {

// Lines 1-5 are the header; the first layer is on line 6, its map at column 5.
std::string model_text(const std::string& layers, const std::string& input = "[3, 32, 32]") {
  return "name: t\ninput: " + input + "\nbatch: 8\nclasses: 10\nlayers:\n" + layers;
}

const std::string kTail = "  - {op: flatten}\n  - {op: linear, out: 10}\n  - {op: softmax_xent}\n";

// Parses `text` and checks that it fails with `expected` in the message, at
// `line` and at the column where `anchor` starts on that line (the offending
// node; "{" for a whole layer written as a flow map). Line 0: no location.
void expect_error(const std::string& text, int line, const std::string& anchor,
                  const std::string& expected) {
  Result<Model> r = parse_model(text, "m.yaml");
  ASSERT_FALSE(r.ok()) << "parsed without error:\n" << text;
  const Error& e = r.error();
  int column = 0;
  if (line > 0) {
    std::string line_text;
    std::istringstream lines(text);
    for (int i = 0; i < line; ++i) std::getline(lines, line_text);
    size_t at = line_text.find(anchor);
    ASSERT_NE(at, std::string::npos) << "test bug: '" << anchor << "' not on line " << line;
    column = static_cast<int>(at) + 1;
  }
  EXPECT_EQ(e.where.file, "m.yaml");
  EXPECT_EQ(e.where.line, line) << e.to_string();
  EXPECT_EQ(e.where.column, column) << e.to_string() << "\n(expected at '" << anchor << "')";
  EXPECT_NE(e.message.find(expected), std::string::npos)
      << "message: " << e.to_string() << "\nexpected to contain: " << expected;
}

TEST(ParseErrors, OutputThatReachesNoLoss) {
  // relu_1 (line 7) feeds nothing: the next layer reads conv_1 explicitly.
  expect_error(model_text("  - {op: conv, out: 4, kernel: 3}\n"
                          "  - {op: relu}\n"
                          "  - {op: flatten, in: conv_1}\n"
                          "  - {op: linear, out: 10}\n  - {op: softmax_xent}\n"),
               7, "{", "layer 'relu_1': its output is not used by any later layer");
}

TEST(ParseErrors, EmptyFile) {
  expect_error("", 0, "", "the file is empty");
  expect_error("# only a comment\n\n", 0, "", "the file is empty");
  Result<Model> r = parse_model("", "m.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().to_string().rfind("m.yaml: the file is empty", 0), 0u) << r.error().to_string();
}

TEST(ParseErrors, NotYaml) {
  expect_error("name: t\ninput: [3, 32\nbatch: 1\n", 3, ": 1", "not valid YAML");
  expect_error("a: b: c\n", 1, ": c", "not valid YAML");
  expect_error("just some words\n", 1, "just", "expected a model: a map with name, input");
  expect_error("- a\n- b\n", 1, "- a", "expected a model");
  // yaml-cpp 0.7's LoadAll never returns on these (jbeder/yaml-cpp#1040).
  EXPECT_FALSE(parse_model(",", "m.yaml").ok());
  EXPECT_FALSE(parse_model(",ame: t\ninput: [1, 2, 2]\n", "m.yaml").ok());
  expect_error("name: a\n---\nname: b\n", 2, "---", "expected one YAML document");
}

TEST(ParseErrors, UnknownOp) {
  expect_error(model_text("  - {op: convolution, out: 3}\n" + kTail), 6, "convolution",
               "unknown op 'convolution' (expected one of: conv, linear, relu");
}

TEST(ParseErrors, MissingFields) {
  expect_error(model_text("  - {name: c, op: conv, kernel: 3}\n" + kTail), 6, "{",
               "layer 'c': missing 'out'");
  expect_error(model_text("  - {name: c, op: conv, out: 3}\n" + kTail), 6, "{",
               "layer 'c': missing 'kernel'");
  expect_error(model_text("  - {name: p, op: pool, kernel: 2}\n" + kTail), 6, "{",
               "layer 'p': missing 'mode'");
  expect_error(model_text("  - {name: x}\n" + kTail), 6, "{", "missing 'op'");
  expect_error("name: t\ninput: [3, 32, 32]\nclasses: 10\nlayers:\n" + kTail, 1, "name",
               "missing 'batch'");
  expect_error("name: t\ninput: [3, 32, 32]\nbatch: 2\nclasses: 10\n", 1, "name", "missing 'layers'");
  expect_error("name: t\nbatch: 2\nclasses: 10\nlayers:\n" + kTail, 1, "name", "missing 'input'");
}

TEST(ParseErrors, MistypedFields) {
  expect_error(model_text("  - {name: c, op: conv, out: \"abc\", kernel: 3}\n" + kTail), 6, "\"abc\"",
               "layer 'c': out must be an integer");
  expect_error(model_text("  - {name: c, op: conv, out: 2.5, kernel: 3}\n" + kTail), 6, "2.5",
               "out must be an integer");
  expect_error(model_text("  - {name: c, op: conv, out: [1, 2], kernel: 3}\n" + kTail), 6, "[1, 2]",
               "out must be an integer, got a list");
  expect_error(model_text("  - {name: c, op: conv, out: 4, kernel: [1, 2, 3]}\n" + kTail), 6, "[1, 2, 3]",
               "kernel must be an integer or a list [h, w]");
  expect_error(model_text("  - {name: c, op: conv, out: 4, kernel: 1, bias: maybe}\n" + kTail), 6, "maybe",
               "bias must be true or false, got 'maybe'");
  expect_error(model_text("  - {name: d, op: dropout, p: high}\n" + kTail), 6, "high",
               "p must be a number, got 'high'");
  expect_error(model_text("  - {name: p, op: pool, mode: median, kernel: 2}\n" + kTail), 6, "median",
               "mode must be max or avg, got 'median'");
  expect_error(model_text("  - {op: relu, in: {a: 1}}\n" + kTail), 6, "{a: 1}",
               "in must be a layer name or a non-empty list of names");
  expect_error("name: t\ninput: 3\nbatch: 8\nclasses: 10\nlayers:\n" + kTail, 2, "3",
               "input must be the per-sample shape [C, H, W], got '3'");
  expect_error("name: t\ninput: [3, 32]\nbatch: 8\nclasses: 10\nlayers:\n" + kTail, 2, "[3, 32]",
               "got a list of 2");
  expect_error("name: t\ninput: [3, 32, 32]\nbatch: 8\nclasses: 10\nlayers: relu\n", 5, "relu",
               "layers must be a non-empty list of layers, got 'relu'");
  expect_error("name: t\ninput: [3, 32, 32]\nbatch: 8\nclasses: 10\nlayers: []\n", 5, "[]",
               "layers must be a non-empty list");
  expect_error(model_text("  - relu\n" + kTail), 6, "relu",
               "expected a layer (a map with op: or block:), got 'relu'");
  expect_error("name: t\ninput: [3, 32, 32]\nbatch: 8\nclasses: 10\ndtype: float16\nlayers:\n" + kTail,
               5, "float16", "dtype 'float16' is not supported (expected float32)");
  expect_error("name: t\ninput: [3, 32, 32]\nbatch: 8\nclasses: 10\noptimizer: {kind: adam}\nlayers:\n" +
                   kTail,
               5, "adam", "optimizer: kind 'adam' is not supported (expected sgd or adamw)");
  const std::string head = "name: t\ninput: [3, 32, 32]\nbatch: 8\nclasses: 10\n";
  expect_error(head + "optimizer: {momentum: 0, nesterov: true}\nlayers:\n" + kTail, 5, "true",
               "nesterov needs a momentum above 0");
  expect_error(head + "optimizer: {nesterov: sometimes}\nlayers:\n" + kTail, 5, "sometimes",
               "nesterov must be true or false");
  expect_error(head + "optimizer: {kind: adamw, momentum: 0.9}\nlayers:\n" + kTail, 5, "momentum",
               "unknown field 'momentum' in a adamw optimizer");
  expect_error(head + "optimizer: {kind: adamw, betas: [0.9]}\nlayers:\n" + kTail, 5, "[0.9]",
               "betas must be [beta1, beta2], got a list");
  expect_error(head + "optimizer: {kind: adamw, betas: [0.9, 1]}\nlayers:\n" + kTail, 5, "1]",
               "betas must be in [0, 1), got '1'");
  expect_error(head + "optimizer: {kind: adamw, eps: 0}\nlayers:\n" + kTail, 5, "0}", "eps must be positive, got 0");
  expect_error(head + "optimizer: {no_weight_decay: bias}\nlayers:\n" + kTail, 5, "bias",
               "no_weight_decay must be a list of bias and norm, got 'bias'");
  expect_error(head + "optimizer: {no_weight_decay: [bias, gamma]}\nlayers:\n" + kTail, 5, "gamma",
               "no_weight_decay: expected bias or norm, got 'gamma'");
  expect_error(head + "optimizer: {no_weight_decay: [norm, norm]}\nlayers:\n" + kTail, 5, "norm]",
               "no_weight_decay: norm is given twice");
  expect_error(model_text("  - {op: flatten}\n  - {op: linear, out: 10}\n  - {op: softmax_xent, label_smoothing: 1}\n"),
               8, "1}", "label_smoothing must be in [0, 1), got 1");
}

TEST(ParseErrors, NegativeAndZeroSizes) {
  expect_error(model_text("  - {name: c, op: conv, out: -4, kernel: 3}\n" + kTail), 6, "-4",
               "layer 'c': out must be at least 1, got -4");
  expect_error(model_text("  - {name: c, op: conv, out: 0, kernel: 3}\n" + kTail), 6, "0,",
               "out must be at least 1, got 0");
  expect_error(model_text("  - {name: c, op: conv, out: 4, kernel: 0}\n" + kTail), 6, "0}",
               "kernel must be at least 1, got 0");
  expect_error(model_text("  - {name: c, op: conv, out: 4, kernel: [3, 0]}\n" + kTail), 6, "0]",
               "kernel must be at least 1, got 0");
  expect_error(model_text("  - {name: c, op: conv, out: 4, kernel: 3, stride: 0}\n" + kTail), 6, "0}",
               "stride must be at least 1, got 0");
  expect_error(model_text("  - {name: c, op: conv, out: 4, kernel: 3, pad: -1}\n" + kTail), 6, "-1",
               "pad must be at least 0, got -1");
  expect_error(model_text("  - {name: c, op: conv, out: 4, kernel: 3, groups: 0}\n" + kTail), 6, "0}",
               "groups must be at least 1, got 0");
  expect_error(model_text("  - {op: linear, out: -1}\n" + kTail), 6, "-1", "out must be at least 1");
  expect_error(model_text(kTail, "[3, 0, 32]"), 2, "0,", "input must be at least 1, got 0");
  expect_error(model_text(kTail, "[3, -5, 32]"), 2, "-5", "input must be at least 1, got -5");
}

TEST(ParseErrors, HugeNumbersAreErrorsNotOverflow) {
  expect_error(model_text("  - {op: linear, out: 99999999999999999999}\n" + kTail), 6, "9999",
               "number too large for a 64-bit integer");
  expect_error(model_text("  - {op: linear, out: 3000000000}\n" + kTail), 6, "3000000000",
               "larger than the largest accepted (2147483647)");
  expect_error(model_text("  - {op: linear, out: \"2147483647 * 2147483647 * 4\"}\n" + kTail), 6,
               "\"2147483647", "integer overflow");
  expect_error(model_text(kTail, "[2000000000, 2000000000, 2000000000]"), 2, "[", "is too large");
  // Every field fits, but the output does not.
  expect_error(model_text("  - {name: c, op: conv, out: 2000000000, kernel: 1}\n" + kTail,
                          "[3, 2000, 2000]"),
               6, "{", "layer 'c': its output [2000000000, 2000, 2000] is too large");
  expect_error(model_text("  - {op: flatten}\n  - {name: fc, op: linear, out: 2147483647}\n"
                          "  - {op: softmax_xent}\n"),
               7, "{", "layer 'fc': its weights are too large");
  expect_error("name: t\ninput: [1000, 1000, 1000]\nbatch: 2000000000\nclasses: 10\nlayers:\n" + kTail,
               6, "{", "times the batch 2000000000 is too large");
}

TEST(ParseErrors, KernelLargerThanPaddedInput) {
  expect_error(model_text("  - {name: conv3, op: conv, out: 4, kernel: 7, pad: 0}\n" + kTail,
                          "[3, 5, 5]"),
               6, "{", "layer 'conv3': kernel 7x7 is larger than its padded input 5x5");
  expect_error(model_text("  - {name: p, op: pool, mode: max, kernel: [2, 9], pad: [0, 1]}\n" + kTail,
                          "[3, 5, 5]"),
               6, "{", "layer 'p': kernel 2x9 is larger than its padded input 5x7");
}

TEST(ParseErrors, OtherShapeRules) {
  expect_error(model_text("  - {name: fc, op: linear, out: 10}\n  - {op: softmax_xent}\n"), 6, "{",
               "layer 'fc': linear needs a 1-D [N] input but its input 'input' is [3, 32, 32]; add "
               "{op: flatten} before it");
  expect_error(model_text("  - {name: c, op: conv, out: 4, kernel: 1, groups: 2}\n" + kTail), 6, "{",
               "its 3 input channels are not divisible by groups = 2");
  expect_error(model_text("  - {name: c, op: conv, out: 3, kernel: 1, groups: 3}\n"
                          "  - {name: d, op: conv, out: 4, kernel: 1, groups: 3}\n" + kTail),
               7, "{", "out = 4 is not divisible by groups = 3");
  expect_error(model_text("  - {name: p, op: pool, mode: max, kernel: 2, pad: 2}\n" + kTail), 6, "{",
               "pad 2x2 is more than half of kernel 2x2");
  expect_error(model_text("  - {op: flatten}\n  - {name: c, op: conv, out: 4, kernel: 1}\n" + kTail),
               7, "{", "conv needs a [C, H, W] input but its input 'flatten_1' is [3072]");
  expect_error(model_text("  - {op: flatten}\n  - {op: linear, out: 7}\n  - {name: loss, op: softmax_xent}\n"),
               8, "{", "layer 'loss': the loss needs an input of shape [10] (the model's classes) but "
                     "its input 'linear_1' is [7]");
  expect_error(model_text("  - {name: j, op: concat, in: [input, f]}\n"), 6, "f]", "in: unknown layer 'f'");
  expect_error(model_text("  - {op: flatten}\n  - {name: j, op: concat, in: [input, flatten_1]}\n" + kTail),
               7, "{", "concat joins along the channel axis");
  // Same rank, another size: a stride-2 convolution's output beside the input.
  expect_error(model_text("  - {name: c, op: conv, out: 4, kernel: 2, stride: 2}\n"
                          "  - {name: j, op: concat, in: [input, c]}\n" + kTail),
               7, "{", "but 'input' is [3, 32, 32] and 'c' is [4, 16, 16]");
  expect_error(model_text("  - {name: s, op: add, in: [input]}\n" + kTail), 6, "{",
               "add needs at least 2 inputs");
  expect_error(model_text("  - {name: r, op: relu, in: [input, input]}\n" + kTail), 6, "{",
               "relu takes exactly 1 input, got 2");
  expect_error(model_text("  - {name: d, op: dropout, p: 1}\n" + kTail), 6, "1}", "p must be in [0, 1)");
}

TEST(ParseErrors, InputNamesUnknownOrLaterLayer) {
  expect_error(model_text("  - {name: a, op: relu, in: nope}\n" + kTail), 6, "nope",
               "layer 'a': in: unknown layer 'nope'");
  expect_error(model_text("  - {name: a, op: relu, in: b}\n  - {name: b, op: relu}\n" + kTail), 6, "b}",
               "in: 'b' is not an earlier layer");
  expect_error(model_text("  - {name: a, op: relu, in: b}\n  - {name: b, op: relu}\n" + kTail), 6, "b}",
               "cycle");
  expect_error(model_text("  - {name: a, op: relu, in: a}\n" + kTail), 6, "a}", "would be a cycle");
  expect_error(model_text("  - {name: a, op: add, in: [input, relu_1]}\n  - {op: relu}\n" + kTail),
               6, "relu_1", "in: 'relu_1' is not an earlier layer");
}

TEST(ParseErrors, DuplicateAndReservedNames) {
  expect_error(model_text("  - {name: a, op: relu}\n  - {name: a, op: relu}\n" + kTail), 7, "a,",
               "duplicate layer name 'a' (already used by the layer at line 6)");
  expect_error(model_text("  - {op: relu}\n  - {name: relu_1, op: relu}\n" + kTail), 7, "relu_1",
               "duplicate layer name 'relu_1'");
  expect_error(model_text("  - {name: relu_2, op: relu}\n  - {op: relu}\n" + kTail), 7, "{",
               "give this layer a name");
  expect_error(model_text("  - {name: input, op: relu}\n" + kTail), 6, "input", "'input' is reserved");
  expect_error(model_text("  - {name: a.b, op: relu}\n" + kTail), 6, "a.b", "name must be a name without '.'");
}

TEST(ParseErrors, AddOfDifferentShapes) {
  expect_error(model_text("  - {name: c, op: conv, out: 8, kernel: 3}\n"
                          "  - {name: s, op: add, in: [c, input]}\n" + kTail),
               7, "{", "layer 's': add needs inputs of the same shape, but 'c' is [8, 30, 30] and "
                     "'input' is [3, 32, 32]");
}

TEST(ParseErrors, LossRules) {
  expect_error(model_text("  - {op: flatten}\n  - {name: fc, op: linear, out: 10}\n"), 7, "{",
               "the model has no loss: expected its last layer to be {op: softmax_xent}, but the last "
               "layer 'fc' is a linear");
  expect_error(model_text("  - {op: flatten}\n  - {op: linear, out: 10}\n  - {name: l1, op: softmax_xent}\n"
                          "  - {name: l2, op: softmax_xent}\n"),
               9, "{", "layer 'l2': a second loss layer (the first is 'l1' at line 8)");
  expect_error(model_text("  - {op: flatten}\n  - {op: linear, out: 10}\n  - {name: loss, op: softmax_xent}\n"
                          "  - {name: after, op: relu}\n"),
               8, "{", "layer 'loss': the loss must be the last layer, but 'after' follows it");
}

TEST(ParseErrors, BatchAndClasses) {
  expect_error("name: t\ninput: [3, 32, 32]\nbatch: 0\nclasses: 10\nlayers:\n" + kTail, 3, "0",
               "batch must be at least 1, got 0");
  expect_error("name: t\ninput: [3, 32, 32]\nbatch: -2\nclasses: 10\nlayers:\n" + kTail, 3, "-2",
               "batch must be at least 1, got -2");
  expect_error("name: t\ninput: [3, 32, 32]\nbatch: 8\nclasses: 0\nlayers:\n" + kTail, 4, "0",
               "classes must be at least 1, got 0");
}

TEST(ParseErrors, UnknownKeys) {
  expect_error(model_text("  - {op: relu, size: 3}\n" + kTail), 6, "size",
               "unknown field 'size' in a relu layer (expected one of: name, op, in)");
  expect_error(model_text("  - {op: conv, out: 3, kernel: 1, padding: 1}\n" + kTail), 6, "padding",
               "unknown field 'padding' in a conv layer");
  expect_error("name: t\ninput: [3, 32, 32]\nbatch: 8\nclasses: 10\nlayer:\n" + kTail, 5, "layer",
               "unknown field 'layer' in a model");
  expect_error(model_text("  - {op: conv, out: 3, out: 4, kernel: 1}\n" + kTail), 6, "out: 4",
               "'out' is given twice");
  expect_error("name: t\ninput: [3, 32, 32]\nbatch: 8\nclasses: 10\noptimizer: {lr: 0.1, dampening: 1}\n"
               "layers:\n" + kTail,
               5, "dampening", "unknown field 'dampening' in a optimizer");
}

// A block for the block error tests; its conv2 is on line 9.
const std::string kBlockHeader = R"y(name: t
input: [4, 8, 8]
batch: 2
classes: 10
blocks:
  unit:
    params: {width: 4}
    layers:
      - {name: conv2, op: conv, out: $width, kernel: "1 + $index * 20"}
layers:
)y";

TEST(ParseErrors, RepeatZero) {
  expect_error(kBlockHeader + "  - {name: l, block: unit, repeat: 0}\n" + kTail, 11, "0}",
               "block instance 'l': repeat must be at least 1, got 0");
  expect_error(kBlockHeader + "  - {name: l, block: unit, repeat: \"2 - 3\"}\n" + kTail, 11, "\"2 - 3\"",
               "repeat must be at least 1, got -1");
}

TEST(ParseErrors, ErrorsInsideBlocksNameTheInstance) {
  // Repetition 1 has a 21x21 kernel: the error points at the block definition
  // (line 9) and names the instance used on line 11.
  expect_error(kBlockHeader + "  - {name: layer1, block: unit, repeat: 2}\n" + kTail, 9, "{",
               "layer 'layer1.1.conv2' (block 'unit' used at line 11): kernel 21x21 is larger than "
               "its padded input 8x8");
  expect_error(kBlockHeader + "  - {name: b, block: unit, with: {width: -3}}\n" + kTail, 9, "$width",
               "layer 'b.conv2' (block 'unit' used at line 11): out must be at least 1, got -3");
  expect_error(kBlockHeader + "  - {name: b, block: unit, with: {width: \"$width\"}}\n" + kTail, 11, "\"$width\"",
               "with.width: unknown parameter '$width' (no parameters are defined here)");
}

TEST(ParseErrors, ErrorsInNestedBlocksNameEveryInstance) {
  std::string text = R"y(name: t
input: [4, 8, 8]
batch: 2
classes: 10
blocks:
  inner:
    params: {k: 1}
    layers:
      - {name: c, op: conv, out: 4, kernel: $k}
  outer:
    layers:
      - {name: i, block: inner, with: {k: 9}}
layers:
  - {name: o, block: outer}
)y" + kTail;
  expect_error(text, 9, "{",
               "layer 'o.i.c' (block 'inner' used at line 12, inside block 'outer' used at line 14): "
               "kernel 9x9 is larger than its padded input 8x8");
}

TEST(ParseErrors, BadBlockUse) {
  expect_error(kBlockHeader + "  - {name: l, block: unti}\n" + kTail, 11, "unti",
               "unknown block 'unti' (defined: unit)");
  expect_error(model_text("  - {name: l, block: unit}\n" + kTail), 6, "unit",
               "unknown block 'unit' (the file defines no blocks)");
  expect_error(kBlockHeader + "  - {name: l, block: unit, with: {widht: 8}}\n" + kTail, 11, "widht",
               "block 'unit' has no parameter 'widht' (its parameters: width)");
  expect_error(kBlockHeader + "  - {name: l, block: unit, in: [input, input]}\n" + kTail, 11, "[input",
               "a block takes one input, got a list of 2");
  expect_error(kBlockHeader + "  - {name: l, block: unit, op: relu}\n" + kTail, 11, "{",
               "either 'op' or 'block', not both");
  expect_error(kBlockHeader + "  - {name: l, block: unit, out: 3}\n" + kTail, 11, "out",
               "unknown field 'out' in a block instance");
  expect_error(model_text("  - {name: a, op: relu, $x: 3}\n" + kTail), 6, "$x", "unknown field '$x'");
  expect_error(model_text("  - {name: a, op: conv, out: $x, kernel: 1}\n" + kTail), 6, "$x",
               "unknown parameter '$x' (no parameters are defined here)");
  expect_error(kBlockHeader + "  - {name: l, block: unit, with: {width: \"8 / 0\"}}\n" + kTail, 11, "\"8 / 0\"",
               "division by zero");
}

TEST(ParseErrors, RecursiveBlocks) {
  expect_error(R"y(input: [4, 8, 8]
batch: 2
classes: 10
blocks:
  a:
    layers:
      - {op: relu}
      - {name: again, block: a}
layers:
  - {name: x, block: a}
)y" + kTail,
               8, "a}", "block 'a' uses itself (a -> a); blocks cannot be recursive");
  expect_error(R"y(input: [4, 8, 8]
batch: 2
classes: 10
blocks:
  a:
    layers:
      - {name: to_b, block: b}
  b:
    layers:
      - {name: to_a, block: a}
layers:
  - {name: x, block: a}
)y" + kTail,
               10, "a}", "block 'a' uses itself (a -> b -> a)");
}

TEST(ParseErrors, BadBlockDefinitions) {
  std::string head = "input: [4, 8, 8]\nbatch: 2\nclasses: 10\nblocks:\n";
  std::string use = "layers:\n  - {name: x, block: a}\n" + kTail;
  expect_error(head + "  a: {params: {w: 1}}\n" + use, 5, "{params", "block 'a': missing 'layers'");
  expect_error(head + "  a: {layers: []}\n" + use, 5, "[]", "block 'a': layers must be a non-empty list");
  expect_error(head + "  a: {layers: [{op: relu}], params: {w: x}}\n" + use, 5, "x}",
               "parameter 'w' must be an integer");
  expect_error(head + "  a: {layers: [{op: relu}], params: {index: 1}}\n" + use, 5, "index",
               "'index' is built in");
  expect_error(head + "  a: {layers: [{op: relu}], extra: 1}\n" + use, 5, "extra",
               "unknown field 'extra' in a block definition");
  expect_error(head + "  a: [1, 2]\n" + use, 5, "[1, 2]", "block 'a': expected a map");
}

TEST(ParseErrors, BlockInstanceRefersToLaterLayerOrIntoMissingRepetition) {
  expect_error(kBlockHeader + "  - {name: l, block: unit, repeat: 2}\n  - {op: relu, in: l.5}\n" + kTail,
               12, "l.5", "in: unknown layer 'l.5' ('l' has no layer or repetition '5')");
  expect_error(kBlockHeader + "  - {name: l, block: unit, in: m}\n  - {name: m, op: relu}\n" + kTail,
               11, "m}", "in: 'm' is not an earlier layer");
}

// Robustness: no prefix of a valid model, and no random corruption of it,
// crashes the parser; each gives a model or an Error with a location.
TEST(ParseErrors, NeverCrashesOnTruncatedOrCorruptedInput) {
  std::string valid = kBlockHeader + "  - {name: layer1, block: unit, repeat: 1}\n"
                      "  - {op: batchnorm}\n  - {op: pool, mode: avg, kernel: [2, 2], ceil_mode: true}\n" +
                      kTail;
  ASSERT_TRUE(parse_model(valid, "m.yaml").ok()) << parse_model(valid, "m.yaml").error().to_string();
  for (size_t n = 0; n < valid.size(); ++n) {
    Result<Model> r = parse_model(valid.substr(0, n), "m.yaml");
    if (!r.ok()) { EXPECT_FALSE(r.error().message.empty()); }
  }
  std::mt19937 rng(12345);
  const std::string alphabet = "{}[]:,-\"'$#&*!|>0123456789 \nabc.";
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text = valid;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) text[rng() % text.size()] = alphabet[rng() % alphabet.size()];
    Result<Model> r = parse_model(text, "m.yaml");
    if (!r.ok()) { EXPECT_FALSE(r.error().message.empty()); }
  }
}

}  // namespace
}  // namespace mplan
