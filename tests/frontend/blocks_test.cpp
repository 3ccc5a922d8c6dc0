// Blocks, repeats, expressions and name resolution (docs/model-format.md,
// "Blocks").
#include <gtest/gtest.h>

#include "frontend/parse.h"

namespace mplan {
namespace {

Model parse_ok(const std::string& text) {
  Result<Model> r = parse_model(text, "m.yaml");
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().to_string()) << "\n" << text;
  return r.ok() ? std::move(r).value() : Model{};
}

std::vector<std::string> names(const Model& m) {
  std::vector<std::string> out;
  for (const Layer& l : m.layers) out.push_back(l.name);
  return out;
}

const Layer& layer(const Model& m, const std::string& name) {
  LayerId id = m.find(name);
  EXPECT_GE(id, 0) << "no layer " << name;
  static const Layer none;
  return id >= 0 ? m.layers[id] : none;
}

// A residual unit: conv-bn-relu, conv, add with the block's input.
const std::string kResidualBlock = R"y(
blocks:
  unit:
    params: {width: 8, stride: 1}
    layers:
      - {name: conv1, op: conv, out: $width, kernel: 3, pad: 1}
      - {op: batchnorm}
      - {op: relu}
      - {name: conv2, op: conv, out: $width, kernel: 3, pad: 1}
      - {name: sum, op: add, in: [conv2, input]}
)y";

const std::string kTail =
    "  - {name: gap, op: global_avgpool}\n  - {op: flatten}\n  - {name: fc, op: linear, out: 10}\n"
    "  - {name: loss, op: softmax_xent}\n";

TEST(Blocks, SingleInstanceNamesAndInput) {
  Model m = parse_ok("input: [8, 16, 16]\nbatch: 4\nclasses: 10\n" + kResidualBlock +
                     "layers:\n"
                     "  - {name: stem, op: relu}\n"
                     "  - {name: layer1, block: unit}\n"
                     "  - {name: after, op: relu, in: layer1}\n" + kTail);
  EXPECT_EQ(names(m), (std::vector<std::string>{
                          "stem", "layer1.conv1", "layer1.batchnorm_1", "layer1.relu_1",
                          "layer1.conv2", "layer1.sum", "after", "gap", "flatten_1", "fc", "loss"}));
  // `input` inside the block is the block's input: the layer before the entry.
  EXPECT_EQ(layer(m, "layer1.conv1").inputs, std::vector<LayerId>{m.find("stem")});
  EXPECT_EQ(layer(m, "layer1.sum").inputs,
            (std::vector<LayerId>{m.find("layer1.conv2"), m.find("stem")}));
  // `layer1` from outside is the instance's output, its last layer.
  EXPECT_EQ(layer(m, "after").inputs, std::vector<LayerId>{m.find("layer1.sum")});
  EXPECT_EQ(m.find("layer1"), m.find("layer1.sum"));
  EXPECT_EQ(layer(m, "layer1.conv1").out, 8);
  // Layers made from a block point at their line in the block definition.
  EXPECT_EQ(layer(m, "layer1.conv1").where.line, 9);  // line 4 is empty, 5 is "blocks:"
  EXPECT_EQ(layer(m, "layer1.conv1").where.column, 9);
}

TEST(Blocks, WithOverridesDefaultsAndExpressions) {
  Model m = parse_ok(R"y(input: [3, 8, 8]
batch: 2
classes: 10
blocks:
  b:
    params: {width: 4, expansion: 2, has_bias: 0}
    layers:
      - {name: c, op: conv, out: "$width * $expansion", kernel: "($width - 1) / 2", bias: $has_bias}
      - {name: d, op: conv, out: "$width*$expansion", kernel: [1, "$expansion - 1"], stride: $expansion}
layers:
  - {name: x, block: b}
  - {name: y, block: b, with: {width: 6, has_bias: 1}}
  - {op: flatten}
  - {op: linear, out: "2 * 5"}
  - {op: softmax_xent}
)y");
  EXPECT_EQ(layer(m, "x.c").out, 8);
  EXPECT_EQ(layer(m, "x.c").window.kernel_h, 1);  // (4 - 1) / 2
  EXPECT_FALSE(layer(m, "x.c").bias);
  EXPECT_EQ(layer(m, "x.d").window, (Window{1, 1, 2, 2, 0, 0}));
  EXPECT_EQ(layer(m, "x.d").output, (Shape{{8, 4, 4}}));
  EXPECT_EQ(layer(m, "y.c").out, 12);
  EXPECT_EQ(layer(m, "y.c").window.kernel_h, 2);  // (6 - 1) / 2
  EXPECT_TRUE(layer(m, "y.c").bias);
  EXPECT_EQ(layer(m, "y.c").output, (Shape{{12, 3, 3}}));
  EXPECT_EQ(layer(m, "linear_1").out, 10);
}

TEST(Blocks, RepeatChainsRepetitionsAndNamesThem) {
  Model m = parse_ok("input: [8, 16, 16]\nbatch: 4\nclasses: 10\n" + kResidualBlock +
                     "layers:\n"
                     "  - {name: layer1, block: unit, repeat: 3}\n"
                     "  - {name: pick, op: add, in: [layer1.1, layer1]}\n" + kTail);
  ASSERT_EQ(m.layers.size(), 3u * 5 + 1 + 4);
  EXPECT_EQ(m.layers[0].name, "layer1.0.conv1");
  EXPECT_EQ(m.layers[5].name, "layer1.1.conv1");
  EXPECT_EQ(m.layers[14].name, "layer1.2.sum");
  // Repetition 0 reads the model input; repetition i reads repetition i-1.
  EXPECT_EQ(layer(m, "layer1.0.conv1").inputs, std::vector<LayerId>{kModelInput});
  EXPECT_EQ(layer(m, "layer1.0.sum").inputs,
            (std::vector<LayerId>{m.find("layer1.0.conv2"), kModelInput}));
  EXPECT_EQ(layer(m, "layer1.1.conv1").inputs, std::vector<LayerId>{m.find("layer1.0.sum")});
  EXPECT_EQ(layer(m, "layer1.2.sum").inputs,
            (std::vector<LayerId>{m.find("layer1.2.conv2"), m.find("layer1.1.sum")}));
  // `layer1.1` is repetition 1's output; `layer1` the last repetition's.
  EXPECT_EQ(layer(m, "pick").inputs,
            (std::vector<LayerId>{m.find("layer1.1.sum"), m.find("layer1.2.sum")}));
  EXPECT_EQ(m.find("layer1"), m.find("layer1.2.sum"));
  EXPECT_EQ(m.find("layer1.1"), m.find("layer1.1.sum"));
  EXPECT_EQ(layer(m, "gap").inputs, std::vector<LayerId>{m.find("pick")});
}

TEST(Blocks, IndexAndRepeatExpressions) {
  Model m = parse_ok(R"y(input: [1, 4, 4]
batch: 1
classes: 10
blocks:
  grow:
    params: {base: 2}
    layers:
      - {name: c, op: conv, out: "$base * ($index + 1)", kernel: 1}
  stage:
    params: {n: 3}
    layers:
      - {name: g, block: grow, repeat: "$n - 1", with: {base: "$index + 10"}}
layers:
  - {name: s, block: stage, repeat: 2, with: {n: 4}}
  - {op: flatten}
  - {op: linear, out: 10}
  - {op: softmax_xent}
)y");
  // Stage repetition i instantiates grow 3 times with base = 10 + i; grow
  // repetition j has out = base * (j + 1).
  EXPECT_EQ(layer(m, "s.0.g.0.c").out, 10);
  EXPECT_EQ(layer(m, "s.0.g.2.c").out, 30);
  EXPECT_EQ(layer(m, "s.1.g.0.c").out, 11);
  EXPECT_EQ(layer(m, "s.1.g.2.c").out, 33);
  EXPECT_EQ(m.layers.size(), 2u * 3 + 3);
  EXPECT_EQ(layer(m, "s.1.g.0.c").inputs, std::vector<LayerId>{m.find("s.0.g.2.c")});
  EXPECT_EQ(m.find("s.0"), m.find("s.0.g.2.c"));
  EXPECT_EQ(m.find("s.1.g"), m.find("s.1.g.2.c"));
}

TEST(Blocks, NestedBlocksWithParametersFromTheOuterBlock) {
  Model m = parse_ok(R"y(input: [4, 8, 8]
batch: 1
classes: 10
blocks:
  conv_bn:
    params: {out: 4, stride: 1}
    layers:
      - {name: conv, op: conv, out: $out, kernel: 3, stride: $stride, pad: 1, bias: false}
      - {name: bn, op: batchnorm}
  down:
    params: {width: 4}
    layers:
      - {name: a, block: conv_bn, with: {out: "$width * 2", stride: 2}}
      - {name: b, block: conv_bn, with: {out: "$width * 2"}}
      - {name: proj, block: conv_bn, in: input, with: {out: "$width * 2", stride: 2}}
      - {name: sum, op: add, in: [b, proj]}
layers:
  - {name: d1, block: down}
  - {name: d2, block: down, with: {width: 8}}
  - {op: global_avgpool}
  - {op: flatten}
  - {op: linear, out: 10}
  - {op: softmax_xent}
)y");
  EXPECT_EQ(layer(m, "d1.a.conv").output, (Shape{{8, 4, 4}}));
  EXPECT_EQ(layer(m, "d1.proj.conv").inputs, std::vector<LayerId>{kModelInput});
  EXPECT_EQ(layer(m, "d1.sum").inputs,
            (std::vector<LayerId>{m.find("d1.b.bn"), m.find("d1.proj.bn")}));
  EXPECT_EQ(layer(m, "d2.a.conv").inputs, std::vector<LayerId>{m.find("d1.sum")});
  EXPECT_EQ(layer(m, "d2.proj.conv").inputs, std::vector<LayerId>{m.find("d1.sum")});
  EXPECT_EQ(layer(m, "d2.sum").output, (Shape{{16, 2, 2}}));
  EXPECT_EQ(layer(m, "d2.proj.conv").out, 16);
}

TEST(Blocks, NamesResolveToOwnLayersThenInputThenOuterLayers) {
  Model m = parse_ok(R"y(input: [4, 8, 8]
batch: 1
classes: 10
blocks:
  b:
    layers:
      - {name: conv1, op: conv, out: 4, kernel: 1}
      - {name: own, op: add, in: [conv1, input]}
      - {name: outer, op: add, in: [own, stem]}
layers:
  - {name: stem, op: relu}
  - {name: conv1, op: conv, out: 4, kernel: 1}
  - {name: i, block: b, in: stem}
  - {op: add, in: [i, conv1]}
  - {op: flatten}
  - {op: linear, out: 10}
  - {op: softmax_xent}
)y");
  // Inside the block `conv1` is the block's own conv1, not the outer one.
  EXPECT_EQ(layer(m, "i.own").inputs, (std::vector<LayerId>{m.find("i.conv1"), m.find("stem")}));
  // `stem` is not a block layer: it resolves where the block is used.
  EXPECT_EQ(layer(m, "i.outer").inputs, (std::vector<LayerId>{m.find("i.own"), m.find("stem")}));
  // The block entry's `in:` sets the block's input.
  EXPECT_EQ(layer(m, "i.conv1").inputs, std::vector<LayerId>{m.find("stem")});
  EXPECT_EQ(layer(m, "add_1").inputs, (std::vector<LayerId>{m.find("i.outer"), m.find("conv1")}));
}

TEST(Blocks, GeneratedInstanceNamesAndReferencesIntoInstances) {
  Model m = parse_ok("input: [8, 16, 16]\nbatch: 4\nclasses: 10\n" + kResidualBlock +
                     "layers:\n"
                     "  - {block: unit}\n"
                     "  - {block: unit, repeat: 2}\n"
                     "  - {op: add, in: [unit_1.conv1, unit_2.0.sum, unit_2]}\n" + kTail);
  EXPECT_EQ(m.layers[0].name, "unit_1.conv1");
  EXPECT_EQ(m.layers[5].name, "unit_2.0.conv1");
  EXPECT_EQ(layer(m, "unit_2.0.conv1").inputs, std::vector<LayerId>{m.find("unit_1.sum")});
  EXPECT_EQ(layer(m, "add_1").inputs,
            (std::vector<LayerId>{m.find("unit_1.conv1"), m.find("unit_2.0.sum"), m.find("unit_2.1.sum")}));
}

TEST(Blocks, DeepRepeatStaysFast) {
  // 1000 residual units: a ResNet-1001-sized expansion is a few lines.
  Model m = parse_ok("input: [8, 16, 16]\nbatch: 4\nclasses: 10\n" + kResidualBlock +
                     "layers:\n  - {name: body, block: unit, repeat: 1000}\n" + kTail);
  EXPECT_EQ(m.layers.size(), 5004u);
  EXPECT_EQ(m.layers[4999].name, "body.999.sum");
}

}  // namespace
}  // namespace mplan
