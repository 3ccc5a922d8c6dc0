// The kernel profiler's result file (runtime/jobs.h): a copy timing's
// both_directions_ms round-trips, may be absent (files from before it), and
// is refused, naming it, where it is not a positive number.

#include <gtest/gtest.h>

#include <string>

#include "runtime/jobs.h"

namespace mplan::rt {
namespace {

ResultFile one_copy(double both_ms) {
  ResultFile r;
  r.backend.backend = "cpu";
  r.backend.device = "test";
  r.repeats = 3;
  CopyTiming t;
  t.bytes = 1 << 20;
  t.host_to_device_ms = 0.5;
  t.device_to_host_ms = 0.25;
  t.both_directions_ms = both_ms;
  r.copies.push_back(t);
  return r;
}

TEST(ResultFile, BothDirectionsRoundTripsAndMayBeAbsent) {
  const std::string text = results_to_json(one_copy(0.625));
  ResultFile read;
  std::string error;
  ASSERT_TRUE(parse_results(text, &read, &error)) << error;
  ASSERT_EQ(read.copies.size(), 1u);
  EXPECT_EQ(read.copies[0].both_directions_ms, 0.625);
  EXPECT_EQ(read.copies[0].host_to_device_ms, 0.5);

  const std::string older = results_to_json(one_copy(0));  // not measured: not written
  EXPECT_EQ(older.find("both_directions_ms"), std::string::npos);
  ASSERT_TRUE(parse_results(older, &read, &error)) << error;
  EXPECT_EQ(read.copies[0].both_directions_ms, 0);
}

TEST(ResultFile, BothDirectionsMustBeAPositiveNumber) {
  const std::string text = results_to_json(one_copy(0.625));
  for (const char* bad : {"-1", "0", "\"abc\"", "null", "[]", "1e-400"}) {
    std::string hostile = text;
    hostile.replace(hostile.find("0.625"), 5, bad);
    ResultFile read;
    std::string error;
    EXPECT_FALSE(parse_results(hostile, &read, &error)) << bad;
    EXPECT_NE(error.find("both_directions_ms"), std::string::npos) << bad << ": " << error;
  }
}

// The math the kernels ran in round-trips in both files; a file without it
// (before the field) is fp32; anything but fp32 or tf32 is refused, naming it.
TEST(ResultFile, MathRoundTripsDefaultsToFp32AndIsChecked) {
  ResultFile tf32 = one_copy(0.625);
  tf32.math = "tf32";
  ResultFile read;
  std::string error;
  ASSERT_TRUE(parse_results(results_to_json(tf32), &read, &error)) << error;
  EXPECT_EQ(read.math, "tf32");
  std::string older = results_to_json(one_copy(0.625));
  older.erase(older.find(" \"math\": \"fp32\",\n"), std::string(" \"math\": \"fp32\",\n").size());
  ASSERT_EQ(older.find("math"), std::string::npos);
  ASSERT_TRUE(parse_results(older, &read, &error)) << error;
  EXPECT_EQ(read.math, "fp32");
  std::string hostile = results_to_json(tf32);
  hostile.replace(hostile.find("\"tf32\""), 6, "\"fp64\"");
  EXPECT_FALSE(parse_results(hostile, &read, &error));
  EXPECT_NE(error.find("\"math\""), std::string::npos) << error;

  JobFile jobs;
  jobs.math = "tf32";
  JobFile jobs_read;
  ASSERT_TRUE(parse_jobs(jobs_to_json(jobs), &jobs_read, &error)) << error;
  EXPECT_EQ(jobs_read.math, "tf32");
  // A 16-bit model's job file runs in its precision.
  std::string bf16_jobs = jobs_to_json(jobs);
  bf16_jobs.replace(bf16_jobs.find("\"tf32\""), 6, "\"bf16\"");
  ASSERT_TRUE(parse_jobs(bf16_jobs, &jobs_read, &error)) << error;
  EXPECT_EQ(jobs_read.math, "bf16");
  std::string bad_jobs = jobs_to_json(jobs);
  bad_jobs.replace(bad_jobs.find("\"tf32\""), 6, "\"fp64\"");
  EXPECT_FALSE(parse_jobs(bad_jobs, &jobs_read, &error));
  EXPECT_NE(error.find("\"math\""), std::string::npos) << error;
}

}  // namespace
}  // namespace mplan::rt
