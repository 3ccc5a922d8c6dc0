// Each block's storage type at 16-bit precision (ops/precision.h, PyTorch
// autocast's op lists): 16-bit outputs of convolutions and GEMMs and of the
// element-wise ops that follow them; fp32 for layer norm, softmax, the loss,
// the input, weights (with a 16-bit copy beside them), their gradients and
// the optimizer state; a gradient in its output's type. Bytes follow.
#include <gtest/gtest.h>

#include "frontend/parse.h"
#include "tdfg/bounds.h"
#include "tests/tdfg/tiny_models.h"

namespace mplan {
namespace {

Model parse(const std::string& precision, const std::string& layers, const std::string& input = "[3, 8, 8]") {
  Result<Model> r = parse_model("name: t\ninput: " + input + "\nbatch: 4\nclasses: 10\nprecision: " + precision +
                                    "\nlayers:\n" + layers,
                                "m.yaml");
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().to_string());
  return r.ok() ? *r : Model{};
}

const char* kConvNet =
    "  - {name: conv, op: conv, out: 4, kernel: 3, pad: 1}\n"
    "  - {name: bn, op: batchnorm}\n"
    "  - {name: act, op: relu}\n"
    "  - {name: pool, op: pool, mode: max, kernel: 2, stride: 2}\n"
    "  - {name: flat, op: flatten}\n"
    "  - {name: fc, op: linear, out: 10}\n"
    "  - {name: loss, op: softmax_xent}\n";

const Block& block(const Tdfg& tdfg, const std::string& name) {
  static const Block missing = [] {
    Block b;
    b.name = "missing";
    b.dtype = DataType::int32;
    return b;
  }();
  const BlockId b = testing::find_block(tdfg, name);
  EXPECT_NE(b, kNoBlock) << "no block " << name;
  return b == kNoBlock ? missing : tdfg.blocks[b];
}

TEST(BlockTypes, ConvolutionChainInSixteenBits) {
  for (const char* p : {"bf16", "fp16"}) {
    const DataType low = std::string(p) == "bf16" ? DataType::bfloat16 : DataType::float16;
    const Model model = parse(p, kConvNet);
    const Tdfg tdfg = build_tdfg(model);
    EXPECT_EQ(block(tdfg, "X").dtype, DataType::float32);
    EXPECT_EQ(block(tdfg, "X").bytes_per_sample, 3 * 8 * 8 * 4);
    EXPECT_EQ(block(tdfg, "labels").dtype, DataType::int32);
    const Block& conv = block(tdfg, "Y[conv]");
    EXPECT_EQ(conv.dtype, low);
    EXPECT_EQ(conv.bytes_per_sample, 4 * 8 * 8 * 2);
    // Batch norm, ReLU (in place), pooling and flatten follow their input.
    const Block& bn = tdfg.blocks[tdfg.output_of[model.find("act")]];
    EXPECT_EQ(bn.dtype, low);
    EXPECT_EQ(bn.bytes_per_sample, 4 * 8 * 8 * 2);
    EXPECT_EQ(tdfg.blocks[tdfg.output_of[model.find("pool")]].dtype, low);
    EXPECT_EQ(tdfg.blocks[tdfg.output_of[model.find("flat")]].dtype, low);
    EXPECT_EQ(block(tdfg, "Y[fc]").dtype, low);
    EXPECT_EQ(block(tdfg, "dY[fc]").dtype, low);
    EXPECT_EQ(block(tdfg, "dY[conv+bn+act]").bytes_per_sample, 4 * 8 * 8 * 2);  // batch norm's BP1 in place
    // fp32 master weights and their 16-bit copy; fp32 gradients and state.
    const int64_t conv_params = 4 * 3 * 3 * 3 + 4;
    EXPECT_EQ(block(tdfg, "W[conv]").fixed_bytes, conv_params * 6);
    EXPECT_EQ(block(tdfg, "dW[conv]").fixed_bytes, conv_params * 4);
    EXPECT_EQ(block(tdfg, "W[bn]").fixed_bytes, 2 * 4 * 4);  // batch norm's gamma and beta: no copy
    EXPECT_EQ(block(tdfg, "W[bn]").dtype, DataType::float32);
  }
}

TEST(BlockTypes, FullPrecisionKeepsEveryBlockAsBefore) {
  const Model fp32_model = parse("fp32", kConvNet), tf32_model = parse("tf32", kConvNet);
  const Tdfg fp32 = build_tdfg(fp32_model), tf32 = build_tdfg(tf32_model);
  ASSERT_EQ(fp32.blocks.size(), tf32.blocks.size());
  for (size_t b = 0; b < fp32.blocks.size(); ++b) {
    EXPECT_EQ(fp32.blocks[b].bytes_per_sample, tf32.blocks[b].bytes_per_sample) << fp32.blocks[b].name;
    EXPECT_EQ(fp32.blocks[b].fixed_bytes, tf32.blocks[b].fixed_bytes) << fp32.blocks[b].name;
    if (fp32.blocks[b].kind != BlockKind::labels) {
      EXPECT_EQ(fp32.blocks[b].dtype, DataType::float32);
    }
  }
  EXPECT_EQ(block(fp32, "Y[conv]").bytes_per_sample, 4 * 8 * 8 * 4);
}

// A transformer block as autocast runs it: the residual stream is fp32
// (pos_embed adds an fp32 parameter; an add of fp32 and 16-bit promotes),
// softmax is fp32, the projections and attention 16-bit; layer norm's fp32
// output is stored as the 16-bit cast its only consumer makes of it (its
// gradient stays fp32), and attention keeps its probabilities in 16 bits.
TEST(BlockTypes, TransformerResidualStreamStaysFloat32) {
  const Model model = parse("bf16",
                            "  - {name: embed, op: patch_embed, out: 16, patch: 4}\n"
                            "  - {name: pos, op: pos_embed}\n"
                            "  - {name: ln, op: layernorm}\n"
                            "  - {name: qkv, op: linear, out: 48}\n"
                            "  - {name: attn, op: attention, heads: 2}\n"
                            "  - {name: proj, op: linear, out: 16}\n"
                            "  - {name: residual, op: add, in: [proj, pos]}\n"
                            "  - {name: scores, op: softmax}\n"
                            "  - {name: flat, op: flatten}\n"
                            "  - {name: head, op: linear, out: 10}\n"
                            "  - {name: loss, op: softmax_xent}\n",
                            "[3, 8, 8]");
  const Tdfg tdfg = build_tdfg(model);
  EXPECT_EQ(block(tdfg, "Y[embed]").dtype, DataType::bfloat16);
  EXPECT_EQ(block(tdfg, "Y[pos]").dtype, DataType::float32);
  EXPECT_EQ(block(tdfg, "Y[ln]").dtype, DataType::bfloat16);
  EXPECT_EQ(block(tdfg, "Y[ln]").bytes_per_sample, 4 * 16 * 2);
  EXPECT_EQ(block(tdfg, "dY[ln]").dtype, DataType::float32);
  EXPECT_EQ(block(tdfg, "dY[ln]").bytes_per_sample, 4 * 16 * 4);
  EXPECT_EQ(block(tdfg, "saved[attn]").bytes_per_sample, 2 * 4 * 4 * 2);  // heads x tokens x tokens
  EXPECT_EQ(block(tdfg, "Y[qkv]").dtype, DataType::bfloat16);
  EXPECT_EQ(block(tdfg, "Y[attn]").dtype, DataType::bfloat16);
  EXPECT_EQ(block(tdfg, "Y[proj]").dtype, DataType::bfloat16);
  EXPECT_EQ(block(tdfg, "Y[residual]").dtype, DataType::float32);
  EXPECT_EQ(block(tdfg, "Y[scores+flat]").dtype, DataType::float32);  // flatten is a view, in place
  EXPECT_EQ(block(tdfg, "Y[head]").dtype, DataType::bfloat16);
  EXPECT_EQ(block(tdfg, "dY[residual]").dtype, DataType::float32);
  EXPECT_EQ(block(tdfg, "dY[qkv]").dtype, DataType::bfloat16);
}

// The cast is fused into its producer only where that is exact and free:
// every consumer casts (all 16-bit ops), and the producer's own backward does
// not read the fp32 value (softmax's does).
TEST(BlockTypes, ACastIsFusedOnlyWhereEveryConsumerCastsAndTheBackwardDoesNotReadIt) {
  const Model model = parse("bf16",
                            "  - {name: embed, op: patch_embed, out: 16, patch: 4}\n"
                            "  - {name: pos, op: pos_embed}\n"
                            "  - {name: ln, op: layernorm}\n"
                            "  - {name: proj, op: linear, out: 16}\n"
                            "  - {name: residual, op: add, in: [proj, ln]}\n"
                            "  - {name: scores, op: softmax}\n"
                            "  - {name: mix, op: matmul, in: [scores, embed], transpose_b: true}\n"
                            "  - {name: flat, op: flatten}\n"
                            "  - {name: head, op: linear, out: 10}\n"
                            "  - {name: loss, op: softmax_xent}\n",
                            "[3, 8, 8]");
  const Tdfg tdfg = build_tdfg(model);
  EXPECT_EQ(block(tdfg, "Y[ln]").dtype, DataType::float32);  // the add reads it too
  EXPECT_EQ(block(tdfg, "Y[residual]").dtype, DataType::float32);
  EXPECT_EQ(block(tdfg, "Y[scores]").dtype, DataType::float32);  // its backward reads it
  EXPECT_EQ(block(tdfg, "Y[mix+flat]").dtype, DataType::bfloat16);
}

TEST(BlockTypes, SixteenBitsHalveTheActivationsInTheBounds) {
  const Model fp32_model = parse("fp32", kConvNet), bf16_model = parse("bf16", kConvNet);
  const Tdfg fp32 = build_tdfg(fp32_model), bf16 = build_tdfg(bf16_model);
  const MemoryBounds a = compute_bounds(fp32, 64), b = compute_bounds(bf16, 64);
  // The weights grow by their 16-bit copy; the activations shrink by half
  // but for the fp32 input and the loss's fp32 blocks.
  EXPECT_GT(b.weight_bytes, a.weight_bytes);
  EXPECT_LT(b.liveness_peak_bytes - b.weight_bytes, (a.liveness_peak_bytes - a.weight_bytes) * 6 / 10);
  EXPECT_GT(b.liveness_peak_bytes - b.weight_bytes, (a.liveness_peak_bytes - a.weight_bytes) * 4 / 10);
}

}  // namespace
}  // namespace mplan
