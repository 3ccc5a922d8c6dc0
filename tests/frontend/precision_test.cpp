// The model's precision (docs/model-format.md, `precision`): parsed, folded
// into `math`, checked against it, in the digest only where it changes what
// the model computes, and replaced as the command line's --precision does.
#include <gtest/gtest.h>

#include "frontend/parse.h"

namespace mplan {
namespace {

std::string model_with(const std::string& header_lines) {
  return "name: t\ninput: [3, 8, 8]\nbatch: 4\nclasses: 10\n" + header_lines +
         "layers:\n  - {op: conv, out: 4, kernel: 3}\n  - {op: flatten}\n  - {op: linear, out: 10}\n"
         "  - {op: softmax_xent}\n";
}

Model parsed(const std::string& header_lines) {
  Result<Model> r = parse_model(model_with(header_lines), "m.yaml");
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().to_string());
  return r.ok() ? *r : Model{};
}

std::string error_of(const std::string& header_lines) {
  Result<Model> r = parse_model(model_with(header_lines), "m.yaml");
  EXPECT_FALSE(r.ok()) << "parsed:\n" << header_lines;
  return r.ok() ? "" : r.error().to_string();
}

TEST(Precision, EachValueFoldsIntoMath) {
  const Model none = parsed("");
  EXPECT_EQ(none.precision, Precision::fp32);
  EXPECT_EQ(none.math, "default");
  for (const char* name : {"fp32", "tf32", "bf16", "fp16"}) {
    const Model m = parsed(std::string("precision: ") + name + "\n");
    EXPECT_STREQ(precision_name(m.precision), name);
    EXPECT_EQ(m.math, name);
  }
}

TEST(Precision, AMathThatAgreesOrIsDefaultIsAccepted) {
  EXPECT_EQ(parsed("precision: tf32\nmath: tf32\n").math, "tf32");
  EXPECT_EQ(parsed("precision: bf16\nmath: default\n").math, "bf16");
}

TEST(Precision, BadValuesAndContradictionsNameTheKey) {
  std::string e = error_of("precision: fp8\n");
  EXPECT_NE(e.find("m.yaml:5:12"), std::string::npos) << e;
  EXPECT_NE(e.find("precision 'fp8' is not one of fp32, tf32, bf16 and fp16"), std::string::npos) << e;
  e = error_of("precision: bf16\nmath: tf32\n");
  EXPECT_NE(e.find("precision bf16 computes convolutions and GEMMs in bf16, but math is 'tf32'"), std::string::npos)
      << e;
  e = error_of("precision: fp32\nmath: tf32\n");
  EXPECT_NE(e.find("precision fp32 contradicts math 'tf32'"), std::string::npos) << e;
  e = error_of("math: bf16\n");
  EXPECT_NE(e.find("write 'precision: bf16' instead"), std::string::npos) << e;
  // AdamW counts updates as iterations, which fp16's skipped updates are not.
  e = error_of("precision: fp16\noptimizer: {kind: adamw}\n");
  EXPECT_NE(e.find("optimizer adamw with precision fp16 is not supported"), std::string::npos) << e;
  EXPECT_EQ(parsed("precision: bf16\noptimizer: {kind: adamw}\n").optimizer.kind, "adamw");
}

TEST(Precision, OnlySixteenBitsChangeTheDigest) {
  const std::string plain = model_digest(parsed(""));
  EXPECT_EQ(model_digest(parsed("precision: fp32\n")), plain);
  EXPECT_EQ(model_digest(parsed("precision: tf32\n")), plain);
  const std::string bf16 = model_digest(parsed("precision: bf16\n"));
  const std::string fp16 = model_digest(parsed("precision: fp16\n"));
  EXPECT_NE(bf16, plain);
  EXPECT_NE(fp16, plain);
  EXPECT_NE(bf16, fp16);
}

TEST(Precision, ReplacingIgnoresTheFilesMathAndPrecision) {
  Model m = parsed("precision: tf32\n");
  EXPECT_FALSE(apply_precision(m, Precision::bf16).ok());  // tf32's math contradicts bf16
  ASSERT_TRUE(apply_precision(m, Precision::bf16, /*replace=*/true).ok());
  EXPECT_EQ(m.precision, Precision::bf16);
  EXPECT_EQ(m.math, "bf16");
  ASSERT_TRUE(apply_precision(m, Precision::fp32, /*replace=*/true).ok());
  EXPECT_EQ(m.precision, Precision::fp32);
  EXPECT_EQ(m.math, "fp32");
}

}  // namespace
}  // namespace mplan
