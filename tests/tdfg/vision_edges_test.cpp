// The backward edges of the vision-model ops (ops/*.cpp): what each
// BP reads from the forward pass decides liveness, offloading and
// recomputation, so these must be exact; and the attention matrix must be a
// block the planner sees (the point of attention as one op).

#include <gtest/gtest.h>

#include <set>

#include "frontend/parse.h"
#include "tdfg/tdfg.h"

namespace mplan {
namespace {

using Names = std::set<std::string>;

Model parse(const std::string& layers, const std::string& input = "[4, 8, 8]") {
  const std::string text = "name: t\ninput: " + input + "\nbatch: 4\nclasses: 3\nlayers:\n" + layers;
  Result<Model> m = parse_model(text, "t.yaml");
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().to_string());
  return m.ok() ? std::move(m).value() : Model{};
}

Names reads(const Tdfg& tdfg, const std::string& task) {
  for (const Task& t : tdfg.tasks)
    if (t.name == task) {
      Names names;
      for (BlockId b : t.reads) names.insert(tdfg.blocks[b].name);
      return names;
    }
  ADD_FAILURE() << "no task " << task;
  return {};
}

const std::string kHead = "  - {op: global_avgpool}\n  - {op: flatten}\n  - {name: fc, op: linear, out: 3}\n"
                          "  - {op: softmax_xent}\n";

TEST(VisionEdges, ActivationsReadWhatTheirDerivativeNeeds) {
  const Model m = parse("  - {name: c, op: conv, out: 4, kernel: 1}\n  - {name: hs, op: hardswish}\n"
                        "  - {name: hsig, op: hardsigmoid}\n  - {name: si, op: silu}\n  - {name: g, op: gelu}\n"
                        "  - {name: sg, op: sigmoid}\n  - {name: cl, op: clip}\n" + kHead);
  const Tdfg tdfg = build_tdfg(m);
  ASSERT_TRUE(check_tdfg(tdfg).ok());
  EXPECT_EQ(reads(tdfg, "BP1(hs)"), (Names{"Y[c]", "dY[hs]"}));     // x
  EXPECT_EQ(reads(tdfg, "BP1(hsig)"), (Names{"Y[hs]", "dY[hsig]"}));  // x
  EXPECT_EQ(reads(tdfg, "BP1(si)"), (Names{"Y[hsig]", "dY[si]"}));    // x
  EXPECT_EQ(reads(tdfg, "BP1(g)"), (Names{"Y[si]", "dY[g]"}));        // x
  EXPECT_EQ(reads(tdfg, "BP1(sg)"), (Names{"Y[sg]", "dY[sg]"}));      // y
  EXPECT_EQ(reads(tdfg, "BP1(cl)"), (Names{"Y[cl]", "dY[cl]"}));      // y
}

TEST(VisionEdges, MovesAndSlicesReadNothingFromTheForwardPass) {
  const Model m = parse("  - {name: c, op: conv, out: 4, kernel: 1}\n  - {name: sh, op: channel_shuffle, groups: 2}\n"
                        "  - {name: a, op: slice, end: 2}\n  - {name: b, op: slice, in: sh, begin: 2, end: 4}\n"
                        "  - {name: j, op: concat, in: [b, a]}\n  - {name: r, op: reshape, shape: [4, 64]}\n"
                        "  - {op: flatten}\n  - {name: fc, op: linear, out: 3}\n  - {op: softmax_xent}\n");
  // The edges of the ops themselves: the flatten after r would otherwise share r's blocks (in place).
  const Tdfg tdfg = build_tdfg(m, TdfgOptions{.in_place = false});
  ASSERT_TRUE(check_tdfg(tdfg).ok());
  for (const char* l : {"sh", "b", "r"})
    EXPECT_EQ(reads(tdfg, std::string("BP1(") + l + ")"), (Names{"dY[" + std::string(l) + "]"}));
  // a is dY[sh]'s second writer in the backward pass (b's came first): it adds to it.
  EXPECT_EQ(reads(tdfg, "BP1(a)"), (Names{"dY[a]", "dY[sh]"}));
}

TEST(VisionEdges, ProductsAndScalesReadTheOtherFactor) {
  const Model m = parse("  - {name: c, op: conv, out: 4, kernel: 1}\n  - {name: p, op: global_avgpool}\n"
                        "  - {name: m, op: mul, in: [c, p]}\n  - {name: s, op: channel_scale}\n"
                        "  - {name: ln, op: layernorm}\n" + kHead);
  const Tdfg tdfg = build_tdfg(m);
  ASSERT_TRUE(check_tdfg(tdfg).ok());
  EXPECT_EQ(reads(tdfg, "BP1(m)"), (Names{"Y[c]", "Y[p]", "dY[m]"}));
  EXPECT_EQ(reads(tdfg, "BP1(s)"), (Names{"W[s]", "dY[s]"}));
  EXPECT_EQ(reads(tdfg, "BP2(s)"), (Names{"Y[m]", "dY[s]"}));
  EXPECT_EQ(reads(tdfg, "BP1(ln)"), (Names{"Y[s]", "W[ln]", "saved[ln]", "dY[ln]"}));
  EXPECT_EQ(reads(tdfg, "BP2(ln)"), (Names{"Y[s]", "saved[ln]", "dY[ln]"}));
}

TEST(VisionEdges, TheAttentionMatrixIsASavedBlockThePlannerSees) {
  // 16 tokens of 12 features, 3 heads: 3 * 16 * 16 floats per sample.
  const Model m = parse("  - {name: pe, op: patch_embed, out: 12, patch: 2}\n  - {name: ct, op: class_token}\n"
                        "  - {name: pos, op: pos_embed}\n  - {name: qkv, op: linear, out: 36}\n"
                        "  - {name: att, op: attention, heads: 3}\n  - {name: tok, op: slice, end: 1}\n"
                        "  - {op: flatten}\n  - {name: fc, op: linear, out: 3}\n  - {op: softmax_xent}\n");
  // The edges of the ops themselves: the flatten after r would otherwise share r's blocks (in place).
  const Tdfg tdfg = build_tdfg(m, TdfgOptions{.in_place = false});
  ASSERT_TRUE(check_tdfg(tdfg).ok());
  const LayerId att = m.find("att");
  ASSERT_GE(att, 0);
  const BlockId saved = tdfg.saved_of[static_cast<size_t>(att)];
  ASSERT_NE(saved, kNoBlock);
  EXPECT_EQ(tdfg.blocks[saved].bytes_per_sample, 3 * 17 * 17 * 4);  // the class token makes 17 tokens
  EXPECT_EQ(reads(tdfg, "BP1(att)"), (Names{"Y[qkv]", "saved[att]", "dY[att]"}));
  EXPECT_EQ(reads(tdfg, "BP2(pe)"), (Names{"X", "dY[pe]"}));
  EXPECT_EQ(reads(tdfg, "BP2(ct)"), (Names{"dY[ct]"}));
  EXPECT_EQ(reads(tdfg, "BP2(pos)"), (Names{"dY[pos]"}));
}

}  // namespace
}  // namespace mplan
