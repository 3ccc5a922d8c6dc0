// Byte counts as users write them (core/bytes.h).
#include "core/bytes.h"

#include <gtest/gtest.h>

namespace mplan {
namespace {

int64_t bytes(const std::string& text) {
  Result<int64_t> r = parse_bytes(text);
  EXPECT_TRUE(r.ok()) << text << ": " << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : -1;
}

TEST(ParseBytes, BinaryAndDecimalUnits) {
  EXPECT_EQ(bytes("4096"), 4096);
  EXPECT_EQ(bytes("512MiB"), int64_t{512} << 20);
  EXPECT_EQ(bytes("512 MiB"), int64_t{512} << 20);
  EXPECT_EQ(bytes("8GiB"), int64_t{8} << 30);
  EXPECT_EQ(bytes("8g"), int64_t{8} << 30);
  EXPECT_EQ(bytes("1.5GiB"), int64_t{3} << 29);
  EXPECT_EQ(bytes("2KiB"), 2048);
  EXPECT_EQ(bytes("1TiB"), int64_t{1} << 40);
  EXPECT_EQ(bytes("12GB"), int64_t{12000000000});
  EXPECT_EQ(bytes("3kb"), 3000);
  EXPECT_EQ(bytes("7B"), 7);
  EXPECT_EQ(bytes("  16 mib "), int64_t{16} << 20);
}

TEST(ParseBytes, RejectsBadText) {
  for (const char* text : {"", "   ", "-1GiB", "GiB", "12 parsecs", "1.2.3MiB", "1e30", "99999999TiB"}) {
    Result<int64_t> r = parse_bytes(text);
    EXPECT_FALSE(r.ok()) << "accepted '" << text << "'";
    if (!r.ok()) {
      EXPECT_NE(r.error().message.find("expected a number and a unit"), std::string::npos);
    }
  }
  EXPECT_NE(parse_bytes("-1GiB").error().message.find("negative"), std::string::npos);
  EXPECT_NE(parse_bytes("5 parsecs").error().message.find("unknown unit 'parsecs'"), std::string::npos);
}

TEST(FormatBytes, HumanUnits) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1024), "1.00 KiB");
  EXPECT_EQ(format_bytes(int64_t{15} << 29), "7.50 GiB");
  EXPECT_EQ(format_bytes(-(int64_t{3} << 20)), "-3.00 MiB");
  EXPECT_EQ(format_bytes_exact(8053063680), "7.50 GiB (8053063680 B)");
}

TEST(FormatBytes, RoundTripsThroughParse) {
  for (int64_t b : {int64_t{1} << 20, int64_t{3} << 30, int64_t{5} << 40})
    EXPECT_EQ(bytes(format_bytes(b)), b);
}

}  // namespace
}  // namespace mplan
