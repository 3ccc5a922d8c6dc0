// Model files under attack: what once crashed or answered in
// jargon now gets a located, plain message. Items: 7 (nesting limit), 8
// (UTF-8), 13/6 (batch bounds), 14 (content after '...'), 15 (messages: deep
// YAML, expression nesting, tabs, CR-only endings, merge keys, units), 17
// (concat of one input).

#include <gtest/gtest.h>

#include <string>

#include "core/bytes.h"
#include "core/input_file.h"
#include "frontend/parse.h"
#include "frontend/validate.h"

namespace mplan {
namespace {

const std::string kHeader = "name: t\ninput: [3, 8, 8]\nbatch: 4\nclasses: 10\n";
const std::string kTail = "  - {op: flatten}\n  - {op: linear, out: 10}\n  - {op: softmax_xent}\n";

Error error_of(const std::string& text) {
  Result<Model> r = parse_model(text, "m.yaml");
  EXPECT_FALSE(r.ok()) << "parsed:\n" << text.substr(0, 400);
  return r.ok() ? Error{} : r.error();
}

// Item 7: blocks nested ~3,500 deep overflowed the stack (SIGSEGV) with
// O(N^2) memory. Now a limit, at the block instance that crosses it.
std::string nested_blocks(int depth) {
  std::string text = kHeader + "blocks:\n";
  text += "  b0: {layers: [{op: relu}]}\n";
  for (int i = 1; i < depth; ++i)
    text += "  b" + std::to_string(i) + ": {layers: [{block: b" + std::to_string(i - 1) + "}]}\n";
  text += "layers:\n  - {block: b" + std::to_string(depth - 1) + "}\n" + kTail;
  return text;
}

TEST(HostileModel, BlocksNestedDeeplyGetALocatedLimit) {
  const Error e = error_of(nested_blocks(3500));
  EXPECT_NE(e.message.find("nested more than 64 deep"), std::string::npos) << e.to_string();
  EXPECT_GT(e.where.line, 5) << e.to_string();  // at a block definition's use
  EXPECT_GT(e.where.column, 0);
  // Within the limit: fine, and the per-layer label stays short.
  Result<Model> ok = parse_model(nested_blocks(60), "m.yaml");
  ASSERT_TRUE(ok.ok()) << ok.error().to_string();
}

// Item 8: bytes that are not UTF-8 in a name: accepted by `bounds`, fatal in
// the JSON writers. Refused at parse time with file:line:col.
TEST(HostileModel, NamesThatAreNotUtf8AreRefusedWhereTheyAre) {
  Error e = error_of("name: \xff\xfe\ninput: [3, 8, 8]\nbatch: 4\nclasses: 10\nlayers:\n" + kTail);
  EXPECT_EQ(e.where.line, 1);
  EXPECT_EQ(e.where.column, 7);
  EXPECT_NE(e.message.find("0xFF is not valid UTF-8"), std::string::npos) << e.to_string();
  e = error_of(kHeader + "layers:\n  - {name: ok\xc3(, op: relu}\n" + kTail);  // a truncated sequence
  EXPECT_EQ(e.where.line, 6);
  EXPECT_EQ(e.where.column, 14);
  e = error_of(kHeader + "layers:\n  - {name: \xc0\x80, op: relu}\n" + kTail);  // an overlong NUL
  EXPECT_EQ(e.where.line, 6);
  // Real Unicode is fine.
  Result<Model> ok = parse_model(kHeader + "layers:\n  - {name: \"r\xc3\xa9lu\xe2\x82\xac\", op: relu}\n" + kTail, "m.yaml");
  ASSERT_TRUE(ok.ok()) << ok.error().to_string();
}

TEST(HostileModel, Utf8Validator) {
  EXPECT_EQ(first_invalid_utf8("plain"), std::string_view::npos);
  EXPECT_EQ(first_invalid_utf8("\xf0\x9f\x98\x80"), std::string_view::npos);  // U+1F600
  EXPECT_EQ(first_invalid_utf8("ab\xed\xa0\x80"), 2u);                           // a surrogate
  EXPECT_EQ(first_invalid_utf8("\xf4\x90\x80\x80"), 0u);                         // past U+10FFFF
  EXPECT_EQ(first_invalid_utf8("a\x80"), 1u);                                    // a lone continuation
  EXPECT_EQ(first_invalid_utf8("\xe2\x82"), 0u);                                 // truncated
}

// Item 14: content after a YAML end marker was silently ignored.
TEST(HostileModel, ContentAfterTheEndMarkerIsAnError) {
  const Error e = error_of(kHeader + "layers:\n" + kTail + "...\nlayers: [{op: relu}]\n");
  EXPECT_EQ(e.where.line, 10);
  EXPECT_NE(e.message.find("content after the end of the document"), std::string::npos) << e.to_string();
  // A comment after it is fine, and so is the marker alone.
  EXPECT_TRUE(parse_model(kHeader + "layers:\n" + kTail + "...\n# the end\n", "m.yaml").ok());
}

// Item 15: messages in plain words.
TEST(HostileModel, DeepYamlNestingSaysSo) {
  const Error e = error_of(kHeader + "layers: " + std::string(3000, '[') + std::string(3000, ']') + "\n");
  EXPECT_NE(e.message.find("nested too deeply"), std::string::npos) << e.to_string();
  EXPECT_EQ(e.message.find("bad file"), std::string::npos) << e.to_string();
  EXPECT_EQ(e.where.line, 5);
}

TEST(HostileModel, DeepExpressionKeepsTheReasonAndQuotesLittle) {
  const std::string expression = std::string(5000, '(') + "1" + std::string(5000, ')');
  const Error e = error_of("name: t\ninput: [3, 8, 8]\nbatch: \"" + expression + "\"\nclasses: 10\nlayers:\n" + kTail);
  EXPECT_NE(e.message.find("nested too deep"), std::string::npos) << e.message.substr(0, 300);
  EXPECT_LT(e.message.size(), 400u) << "the message echoes the whole expression";
  EXPECT_EQ(e.where.line, 3);
}

TEST(HostileModel, TabsAndOldMacLineEndingsSaySo) {
  Error e = error_of(kHeader + "layers:\n\t- {op: relu}\n" + kTail);
  EXPECT_EQ(e.where.line, 6);
  EXPECT_NE(e.message.find("a tab indents this line"), std::string::npos) << e.to_string();
  e = error_of("name: t\rinput: [3, 8, 8]\rbatch: 4\r");
  EXPECT_EQ(e.where.line, 1);
  EXPECT_NE(e.message.find("carriage return alone"), std::string::npos) << e.to_string();
  // CRLF is fine.
  std::string crlf;
  for (char c : kHeader + "layers:\n" + kTail) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  EXPECT_TRUE(parse_model(crlf, "m.yaml").ok());
}

TEST(HostileModel, MergeKeysAreResolved) {
  Result<Model> m = parse_model(kHeader +
                                    "layers:\n"
                                    "  - &conv {name: c1, op: conv, out: 4, kernel: 3, pad: 1}\n"
                                    "  - {<<: *conv, name: c2}\n"
                                    "  - {<<: [*conv], name: c3, out: 6}\n" +
                                    kTail,
                                "m.yaml");
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  ASSERT_EQ(m->layers.size(), 6u);
  EXPECT_EQ(m->layers[1].name, "c2");
  EXPECT_EQ(m->layers[1].out, 4);
  EXPECT_EQ(m->layers[2].out, 6);  // the map's own field hides the merged one
  const Error e = error_of(kHeader + "layers:\n  - {<<: 5, op: relu}\n" + kTail);
  EXPECT_NE(e.message.find("merge key"), std::string::npos) << e.to_string();
  EXPECT_EQ(e.where.line, 6);
}

TEST(HostileModel, SizesInTheUnitsMplanPrints) {
  EXPECT_EQ(*parse_bytes("1PiB"), int64_t{1} << 50);
  EXPECT_EQ(*parse_bytes("2 EiB"), int64_t{2} << 60);
  EXPECT_EQ(*parse_bytes("1e3"), 1000);
  EXPECT_EQ(*parse_bytes("1.5e1KiB"), 15 * 1024);
  Result<int64_t> huge = parse_bytes("1e30GiB");
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.error().message.find("too large"), std::string::npos) << huge.error().message;
  EXPECT_EQ(huge.error().message.find("unknown unit"), std::string::npos) << huge.error().message;
  Result<int64_t> unit = parse_bytes("3 XB");
  ASSERT_FALSE(unit.ok());
  EXPECT_NE(unit.error().message.find("PiB"), std::string::npos) << "the message lists the units";
}

// Items 13 and 6: a batch whose tensors would not fit int64 arithmetic.
TEST(HostileModel, BatchesAreBoundedByWhatTheModelsTensorsTake) {
  Result<Model> m = parse_model(kHeader + "layers:\n" + kTail, "m.yaml");
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(check_batch(*m, 4, "--batch").ok());
  EXPECT_TRUE(check_batch(*m, 2147483647, "--batch").ok());  // a tiny model: 2^31 samples fit
  const Status big = check_batch(*m, 9223372036854775807, "--batch");
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.error().message.find("between 1 and 2147483647"), std::string::npos) << big.error().message;
  // A large model at 2^31 - 1 samples: over 2^58 elements, refused with the largest batch that fits.
  Result<Model> large = parse_model(
      "name: t\ninput: [3, 4096, 4096]\nbatch: 4\nclasses: 10\nlayers:\n  - {op: conv, out: 64, kernel: 3}\n" + kTail,
      "m.yaml");
  ASSERT_TRUE(large.ok()) << large.error().to_string();
  const Status s = check_batch(*large, 2147483647, "--batch");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("the largest --batch for this model is"), std::string::npos)
      << s.error().message;
}

// Item 17: a concat of one input is the identity.
TEST(HostileModel, ConcatOfOneInputIsTheIdentity) {
  Result<Model> m = parse_model(kHeader +
                                    "layers:\n"
                                    "  - {name: c, op: conv, out: 4, kernel: 3}\n"
                                    "  - {name: one, op: concat, in: [c]}\n" +
                                    kTail,
                                "m.yaml");
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  EXPECT_EQ(m->layers[1].output, m->layers[0].output);
  const Error e = error_of(kHeader + "layers:\n  - {name: a, op: add, in: [input]}\n" + kTail);
  EXPECT_NE(e.message.find("add needs at least 2 inputs"), std::string::npos) << e.to_string();
}

}  // namespace
}  // namespace mplan
