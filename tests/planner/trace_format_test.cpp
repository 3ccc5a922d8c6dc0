// trace.json (Chrome trace event format) and memory.svg of real plans.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <map>
#include <set>

#include "planner/memory_svg.h"
#include "planner/trace.h"
#include "verify_plans.h"

namespace mplan {
namespace {

using testing::plan_example;

const int64_t kMiB = int64_t{1} << 20;

int device_steps(const Plan& plan) {
  int n = 0;
  for (const Step& s : plan.steps) n += s.stream != StreamKind::host;
  return n;
}

void check_trace(const Plan& plan, const std::set<int>& expected_tids) {
  const nlohmann::json trace = nlohmann::json::parse(plan_to_trace_json(plan));
  ASSERT_TRUE(trace.is_object());
  ASSERT_TRUE(trace["traceEvents"].is_array());
  std::set<int> named_tids, used_tids;
  std::map<int, std::string> names;
  int complete = 0, counters = 0;
  bool process_named = false;
  double last_counter_ts = -1;
  for (const auto& e : trace["traceEvents"]) {
    const std::string ph = e["ph"];
    ASSERT_TRUE(e.contains("pid"));
    if (ph == "M") {
      if (e["name"] == "process_name") process_named = true;
      if (e["name"] == "thread_name") {
        named_tids.insert(e["tid"].get<int>());
        names[e["tid"].get<int>()] = e["args"]["name"];
      }
    } else if (ph == "X") {
      ++complete;
      used_tids.insert(e["tid"].get<int>());
      ASSERT_TRUE(e["ts"].is_number());
      ASSERT_TRUE(e["dur"].is_number());
      EXPECT_GE(e["dur"].get<double>(), 0.0);
      EXPECT_FALSE(e["name"].get<std::string>().empty());
    } else if (ph == "C") {
      ++counters;
      const double ts = e["ts"];
      EXPECT_GE(ts, last_counter_ts) << "counter samples go back in time";
      last_counter_ts = ts;
      ASSERT_TRUE(e["args"]["bytes"].is_number_integer());
      EXPECT_GE(e["args"]["bytes"].get<int64_t>(), 0);
      EXPECT_LE(e["args"]["bytes"].get<int64_t>(), plan.arena_bytes);
    } else {
      ADD_FAILURE() << "unexpected phase " << ph;
    }
  }
  EXPECT_TRUE(process_named);
  EXPECT_EQ(complete, device_steps(plan));
  EXPECT_GT(counters, 1);
  EXPECT_EQ(named_tids, expected_tids);
  for (int tid : used_tids) EXPECT_TRUE(named_tids.count(tid)) << "track " << tid << " has no name";
  // Microseconds: the last event ends at the simulated time (in ms) times 1000.
  double end_us = 0;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X") end_us = std::max(end_us, e["ts"].get<double>() + e["dur"].get<double>());
  EXPECT_NEAR(end_us, plan.summary.simulated_ms * 1000.0, 1e-6 * end_us + 1e-9);
}

TEST(TraceFormat, OneTrackPerStreamWithTwoCopyEngines) {
  const testing::Planned p = plan_example("cifar_small", 3 * kMiB, 2);
  check_trace(p.plan, {1, 2, 3});  // compute, h2d, d2h
}

TEST(TraceFormat, OneSharedCopyTrackWithOneCopyEngine) {
  const testing::Planned p = plan_example("cifar_small", 3 * kMiB, 1);
  check_trace(p.plan, {1, 4});  // compute, copy
}

TEST(TraceFormat, StepsAreNamedByTaskAndBlock) {
  // Sub-batch 7 at 3 MiB without early drops offloads (testing::tight_cifar_small).
  const testing::Planned& p = testing::tight_cifar_small();
  const nlohmann::json trace = nlohmann::json::parse(plan_to_trace_json(p.plan));
  std::set<std::string> names;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X") names.insert(e["name"].get<std::string>());
  EXPECT_TRUE(names.count("FP(conv1) r0"));
  EXPECT_TRUE(names.count("update"));
  EXPECT_TRUE(names.count("prefetch X r0"));
  bool offload = false;
  for (const std::string& n : names) offload |= n.rfind("offload Y[", 0) == 0;
  EXPECT_TRUE(offload);
}

TEST(TraceFormat, ArenaUsageFollowsAllocAndFree) {
  const testing::Planned p = plan_example("cifar_small", 3 * kMiB, 2);
  const std::vector<ArenaSample> samples = arena_usage(p.plan);
  ASSERT_GT(samples.size(), 2u);
  EXPECT_EQ(samples.front().time_ms, 0.0);
  EXPECT_EQ(samples.back().bytes, 0) << "every buffer is freed by the end";
  int64_t most = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    most = std::max(most, samples[i].bytes);
    if (i > 0) {
      EXPECT_GT(samples[i].time_ms, samples[i - 1].time_ms);
    }
  }
  // Live bytes never exceed the highest offset in use.
  EXPECT_LE(most, p.plan.summary.peak_arena_bytes);
  EXPECT_GT(most, 0);
}

TEST(MemorySvg, IsSelfContainedWithLabelledLines) {
  const testing::Planned p = plan_example("cifar_small", 3 * kMiB, 2);
  const std::string svg = plan_memory_svg(p.plan);
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("cifar_small: device memory"), std::string::npos);
  EXPECT_NE(svg.find("budget 3.00 MiB"), std::string::npos);
  EXPECT_NE(svg.find("resident "), std::string::npos);
  EXPECT_NE(svg.find("sub-batch " + std::to_string(p.plan.sub_batch)), std::string::npos) << svg.substr(0, 600);
  EXPECT_NE(svg.find(" ms</text>"), std::string::npos);
  EXPECT_NE(svg.find(" MiB</text>"), std::string::npos);
  EXPECT_EQ(svg.find("href"), std::string::npos) << "no external references";
  EXPECT_EQ(svg.find("<script"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

TEST(MemorySvg, EscapesNames) {
  Plan plan = plan_example("cifar_small", 3 * kMiB, 2).plan;
  plan.model_name = "a<b&c";
  const std::string svg = plan_memory_svg(plan);
  EXPECT_NE(svg.find("a&lt;b&amp;c"), std::string::npos);
  EXPECT_EQ(svg.find("a<b"), std::string::npos);
}

}  // namespace
}  // namespace mplan
