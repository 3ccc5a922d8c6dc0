// Model's methods and validate_model on models built in code (ops/model.h,
// frontend/parse.h).
#include <gtest/gtest.h>

#include "ops/model.h"
#include "frontend/parse.h"

namespace mplan {
namespace {

Layer make(const std::string& name, Op op, std::vector<LayerId> inputs) {
  Layer l;
  l.name = name;
  l.op = op;
  l.inputs = std::move(inputs);
  return l;
}

// input [3, 8, 8] -> conv(4, 3x3, groups 1) -> bn -> relu -> flatten -> linear(5) -> loss
Model small_model() {
  Model m;
  m.name = "small";
  m.input = Shape{{3, 8, 8}};
  m.batch = 2;
  m.classes = 5;
  Layer conv = make("conv", Op::conv, {kModelInput});
  conv.out = 4;
  conv.window = Window{3, 3, 1, 1, 0, 0};
  m.layers.push_back(conv);
  m.layers.push_back(make("bn", Op::batchnorm, {0}));
  m.layers.push_back(make("relu", Op::relu, {1}));
  m.layers.push_back(make("flat", Op::flatten, {2}));
  Layer fc = make("fc", Op::linear, {3});
  fc.out = 5;
  fc.bias = false;
  m.layers.push_back(fc);
  m.layers.push_back(make("loss", Op::softmax_xent, {4}));
  return m;
}

TEST(Model, OpNamesAndShapeHelpers) {
  EXPECT_STREQ(op_name(Op::conv), "conv");
  EXPECT_STREQ(op_name(Op::global_avgpool), "global_avgpool");
  EXPECT_STREQ(op_name(Op::softmax_xent), "softmax_xent");
  EXPECT_EQ((Shape{{64, 56, 56}}).elements(), 64 * 56 * 56);
  EXPECT_EQ((Shape{{64, 56, 56}}).to_string(), "[64, 56, 56]");
  EXPECT_EQ((Shape{{10}}).to_string(), "[10]");
  EXPECT_EQ((Shape{}).elements(), 1);
}

TEST(Model, ValidateComputesShapesAndCounts) {
  Model m = small_model();
  Status s = validate_model(m);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  EXPECT_EQ(m.layers[0].output, (Shape{{4, 6, 6}}));
  EXPECT_EQ(m.layers[3].output, (Shape{{144}}));
  EXPECT_EQ(m.layers[5].output, (Shape{{5}}));
  EXPECT_EQ(m.input_shape(0), m.input);
  EXPECT_EQ(m.input_shape(4), (Shape{{144}}));
  EXPECT_EQ(m.parameter_count(0), 4 * 3 * 3 * 3 + 4);
  EXPECT_EQ(m.parameter_count(1), 8);
  EXPECT_EQ(m.buffer_count(1), 8);
  EXPECT_EQ(m.buffer_count(0), 0);
  EXPECT_EQ(m.parameter_count(4), 144 * 5);
  EXPECT_EQ(m.parameter_count(), 112 + 8 + 720);
  EXPECT_EQ(m.find("fc"), 4);
  EXPECT_EQ(m.find("nope"), -1);
  // Stale shapes are recomputed from scratch.
  m.layers[0].out = 6;
  ASSERT_TRUE(validate_model(m).ok());
  EXPECT_EQ(m.layers[3].output, (Shape{{216}}));
}

TEST(Model, ValidateRejectsBrokenModels) {
  auto error_of = [](Model m) {
    Status s = validate_model(m);
    EXPECT_FALSE(s.ok());
    return s.ok() ? std::string() : s.error().message;
  };
  Model later = small_model();
  later.layers[1].inputs = {3};
  EXPECT_NE(error_of(later).find("not an earlier layer"), std::string::npos);
  Model dup = small_model();
  dup.layers[2].name = "bn";
  EXPECT_NE(error_of(dup).find("duplicate layer name"), std::string::npos);
  Model no_loss = small_model();
  no_loss.layers.pop_back();
  EXPECT_NE(error_of(no_loss).find("the model has no loss"), std::string::npos);
  Model zero_batch = small_model();
  zero_batch.batch = 0;
  EXPECT_NE(error_of(zero_batch).find("batch must be between 1 and"), std::string::npos);
  Model big_kernel = small_model();
  big_kernel.layers[0].window = Window{9, 9, 1, 1, 0, 0};
  EXPECT_NE(error_of(big_kernel).find("layer 'conv': kernel 9x9 is larger than its padded input 8x8"),
            std::string::npos);
  Model wrong_classes = small_model();
  wrong_classes.classes = 7;
  EXPECT_NE(error_of(wrong_classes).find("needs an input of shape [7]"), std::string::npos);
  Model empty = small_model();
  empty.layers.clear();
  EXPECT_NE(error_of(empty).find("no layers"), std::string::npos);
}

}  // namespace
}  // namespace mplan
