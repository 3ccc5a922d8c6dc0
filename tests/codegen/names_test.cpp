#include "codegen/names.h"

#include <gtest/gtest.h>

namespace mplan::codegen {
namespace {

TEST(Names, IdentifiersKeepOnlyWordCharacters) {
  EXPECT_EQ(sanitise_identifier("conv1"), "conv1");
  EXPECT_EQ(sanitise_identifier("Y[conv1]"), "Y_conv1");
  EXPECT_EQ(sanitise_identifier("a/b\"c"), "a_b_c");
  EXPECT_EQ(sanitise_identifier("3x3"), "n3x3");
  EXPECT_EQ(sanitise_identifier("__reserved__"), "reserved");
  EXPECT_EQ(sanitise_identifier("conv_1"), "conv_1");
  EXPECT_EQ(sanitise_identifier("*/\n"), "unnamed");
  EXPECT_EQ(sanitise_identifier(""), "unnamed");
}

TEST(Names, FileNamesStayInTheirFolder) {
  EXPECT_EQ(sanitise_file_name("conv1.weight"), "conv1.weight");
  EXPECT_EQ(sanitise_file_name("../../etc/passwd"), "etc_passwd");
  EXPECT_EQ(sanitise_file_name(".."), "unnamed");
  EXPECT_EQ(sanitise_file_name(".hidden"), "hidden");
  EXPECT_EQ(sanitise_file_name("-rf"), "rf");
  EXPECT_EQ(sanitise_file_name("a\\b\nc"), "a_b_c");
  EXPECT_LE(sanitise_file_name(std::string(500, 'x')).size(), 100u);
}

TEST(Names, CommentsStayOnOneLine) {
  EXPECT_EQ(comment_text("a\nb\r\nc"), "a b  c");
  EXPECT_EQ(comment_text("ends with \\"), "ends with  ");
  EXPECT_EQ(comment_text(std::string(200, 'x'), 10), std::string(10, 'x') + "...");
}

TEST(Names, StringLiteralsEscapeEverything) {
  EXPECT_EQ(cpp_string_literal("plain"), "\"plain\"");
  EXPECT_EQ(cpp_string_literal("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(cpp_string_literal("x\ny"), "\"x\\012y\"");
  EXPECT_EQ(cpp_string_literal("?\?="), "\"?\\?=\"");
}

}  // namespace
}  // namespace mplan::codegen
