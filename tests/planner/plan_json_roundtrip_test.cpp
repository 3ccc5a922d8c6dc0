// plan.json: writing then reading gives back an equal plan (every field,
// doubles exactly), and the reader refuses bad files with clear messages.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>

#include "planner/plan_json.h"
#include "verify_plans.h"

namespace mplan {
namespace {

using testing::plan_example;

const testing::Planned& tight() {
  static const testing::Planned p = plan_example("cifar_small", 3 * (int64_t{1} << 20));
  return p;
}

// A small plan with every field away from its default, including awkward doubles.
Plan odd_plan() {
  Plan p;
  p.model_name = "odd \"name\" with\nnewline and unicode \u00e9";
  p.model_digest = "0123456789abcdef";
  p.device = "fake";
  p.cost_model_kind = "analytic";
  p.math_mode = "tf32";
  p.cost_model_error = "conv tasks median 12% \"quoted\"";
  p.budget_bytes = (int64_t{1} << 40) + 3;
  p.resident_bytes = 1000;
  p.resident_region_bytes = 1024;
  p.arena_bytes = 4096;
  p.host_bytes = 77;
  p.batch = 7;
  p.sub_batch = 4;
  p.sub_batches = {4, 3};
  p.copy_engines = 1;
  p.event_count = 2;
  p.task_names = {"FP(a)", "update"};
  p.block_names = {"X", "Y[a]"};
  TaskChoice c;
  c.task = 0;
  c.round = 1;
  c.sub_batch = 3;
  c.algorithm = "winograd";
  c.time_ms = 0.1 + 0.2;  // not exactly 0.3
  c.workspace_bytes = 512;
  c.workspace = 1;
  c.workspace_offset = 256;
  c.gain_ms = -1e-300;
  c.micro_batches = {MicroBatch{2, "fft", 1.0 / 3.0, 100}, MicroBatch{1, "gemm", 5e-324, 0}};
  p.choices = {c};
  p.buffers = {Buffer{0, 1, kNoTask, 0, 300, 0, false}, Buffer{1, kNoBlock, 0, 1, 512, 256, false},
               Buffer{2, 0, kNoTask, kOnceRound, 8, 0, true}};
  p.host_slots = {HostSlot{0, 1, 1, 300, 64}};
  Step compute;
  compute.index = 0;
  compute.kind = StepKind::compute;
  compute.stream = StreamKind::compute;
  compute.task = 0;
  compute.round = 1;
  compute.reads = {2, 0};
  compute.writes = {0};
  compute.workspace = 1;
  compute.waits = {0, 1};
  compute.records = 1;
  compute.start_ms = 123456.789;
  compute.end_ms = std::nextafter(123456.789, 1e9);
  Step copy;
  copy.index = 1;
  copy.kind = StepKind::offload;
  copy.stream = StreamKind::copy;
  copy.round = -1;
  copy.buffer = 0;
  copy.host_slot = 0;
  copy.task = 0;  // not needed by the kind, kept anyway
  copy.start_ms = 1e-9;
  copy.end_ms = 2.5;
  p.steps = {compute, copy};
  p.summary.simulated_ms = 1.0 / 7.0;
  p.summary.ideal_ms = 0.7;
  p.summary.peak_arena_bytes = 4000;
  p.summary.peak_live_bytes = 3000;
  p.summary.fragmentation = 0.333;
  p.summary.bytes_to_host = 1;
  p.summary.bytes_to_device = 2;
  p.summary.offload_count = 3;
  p.summary.prefetch_count = 4;
  p.summary.input_load_count = 5;
  p.summary.input_bytes = 6;
  p.summary.defragmentation_count = 7;
  p.summary.stall_ms = 8.25;
  p.summary.planner_ms = 9.5;
  p.summary.notes = {"batchnorm statistics are per sub-batch", ""};
  return p;
}

Plan round_trip(const Plan& plan) {
  Result<Plan> back = plan_from_json(plan_to_json(plan), "plan.json");
  EXPECT_TRUE(back.ok()) << (back.ok() ? "" : back.error().to_string());
  return back.ok() ? back.value() : Plan{};
}

TEST(PlanJson, RealPlanRoundTripsExactly) {
  const Plan& plan = tight().plan;
  ASSERT_GT(plan.steps.size(), 100u);
  const Plan back = round_trip(plan);
  EXPECT_TRUE(plans_equal(plan, back));
  EXPECT_EQ(plan_to_json(back), plan_to_json(plan));
}

TEST(PlanJson, EveryFieldRoundTrips) {
  const Plan plan = odd_plan();
  const Plan back = round_trip(plan);
  EXPECT_TRUE(plans_equal(plan, back));
  EXPECT_EQ(back.steps[0].end_ms, plan.steps[0].end_ms);
  EXPECT_EQ(back.choices[0].micro_batches[1].time_ms, 5e-324);
  EXPECT_EQ(back.steps[1].task, 0);
  EXPECT_EQ(back.model_name, plan.model_name);
}

TEST(PlanJson, EqualityNoticesEachChange) {
  const Plan plan = odd_plan();
  Plan changed = plan;
  changed.steps[1].end_ms = std::nextafter(2.5, 3.0);
  EXPECT_FALSE(plans_equal(plan, changed));
  changed = plan;
  changed.choices[0].micro_batches[0].algorithm = "gemm";
  EXPECT_FALSE(plans_equal(plan, changed));
  changed = plan;
  changed.summary.notes.pop_back();
  EXPECT_FALSE(plans_equal(plan, changed));
  changed = plan;
  changed.block_names[0] = "Z";
  EXPECT_FALSE(plans_equal(plan, changed));
}

TEST(PlanJson, FileIsVersionedAndOneLinePerStep) {
  const std::string text = plan_to_json(tight().plan);
  const nlohmann::json j = nlohmann::json::parse(text);
  EXPECT_EQ(j["format"], kPlanFormatName);
  EXPECT_EQ(j["format_version"], kPlanFormatVersion);
  EXPECT_EQ(j["steps"].size(), tight().plan.steps.size());
  size_t lines = std::count(text.begin(), text.end(), '\n');
  EXPECT_GE(lines, tight().plan.steps.size() + tight().plan.buffers.size());
}

// The error of reading `text`; fails the test if it is read.
std::string refusal(const std::string& text) {
  Result<Plan> r = plan_from_json(text, "bad.json");
  EXPECT_FALSE(r.ok());
  return r.ok() ? std::string() : r.error().to_string();
}

nlohmann::json valid_json() { return nlohmann::json::parse(plan_to_json(odd_plan())); }

TEST(PlanJson, RefusesTextThatIsNotJson) {
  std::string e = refusal("this is not json");
  EXPECT_NE(e.find("bad.json:1:"), std::string::npos) << e;
  EXPECT_NE(e.find("not a valid JSON"), std::string::npos) << e;
  e = refusal("");
  EXPECT_NE(e.find("not a valid JSON"), std::string::npos) << e;
  // Truncated: the position is the end of the text.
  std::string text = plan_to_json(odd_plan());
  e = refusal(text.substr(0, text.size() / 2));
  EXPECT_NE(e.find("bad.json:"), std::string::npos) << e;
  e = refusal("[1, 2, 3]");
  EXPECT_NE(e.find("expected an object"), std::string::npos) << e;
}

TEST(PlanJson, RefusesAnotherFormatOrVersion) {
  nlohmann::json j = valid_json();
  j["format_version"] = 2;
  std::string e = refusal(j.dump());
  EXPECT_NE(e.find("version 2 is not supported"), std::string::npos) << e;
  j = valid_json();
  j["format"] = "something-else";
  e = refusal(j.dump());
  EXPECT_NE(e.find("not a plan file"), std::string::npos) << e;
  j = valid_json();
  j.erase("format");
  e = refusal(j.dump());
  EXPECT_NE(e.find("missing field \"format\""), std::string::npos) << e;
}

TEST(PlanJson, RefusesMissingFields) {
  for (const char* key : {"budget_bytes", "sub_batches", "summary", "choices", "buffers", "steps", "event_count"}) {
    nlohmann::json j = valid_json();
    j.erase(key);
    const std::string e = refusal(j.dump());
    EXPECT_NE(e.find(std::string("missing field \"") + key + "\""), std::string::npos) << e;
  }
  nlohmann::json j = valid_json();
  j["steps"][0].erase("kind");
  std::string e = refusal(j.dump());
  EXPECT_NE(e.find("steps[0]: missing field \"kind\""), std::string::npos) << e;
  j = valid_json();
  j["steps"][0].erase("reads");  // a compute step must list its reads
  e = refusal(j.dump());
  EXPECT_NE(e.find("steps[0]: missing field \"reads\""), std::string::npos) << e;
  j = valid_json();
  j["summary"].erase("stall_ms");
  e = refusal(j.dump());
  EXPECT_NE(e.find("summary: missing field \"stall_ms\""), std::string::npos) << e;
}

TEST(PlanJson, RefusesIdsOutOfRange) {
  nlohmann::json j = valid_json();
  j["steps"][1]["buffer"] = 99;
  std::string e = refusal(j.dump());
  EXPECT_NE(e.find("steps[1].buffer"), std::string::npos) << e;
  EXPECT_NE(e.find("out of range"), std::string::npos) << e;
  j = valid_json();
  j["steps"][0]["waits"] = {5};
  e = refusal(j.dump());
  EXPECT_NE(e.find("steps[0].waits[0]"), std::string::npos) << e;
  j = valid_json();
  j["steps"][0]["task"] = 2;  // two task names
  e = refusal(j.dump());
  EXPECT_NE(e.find("steps[0].task"), std::string::npos) << e;
  j = valid_json();
  j["buffers"][1]["id"] = 7;
  e = refusal(j.dump());
  EXPECT_NE(e.find("buffers[1].id"), std::string::npos) << e;
  j = valid_json();
  j["steps"][1]["index"] = 0;
  e = refusal(j.dump());
  EXPECT_NE(e.find("steps[1].index"), std::string::npos) << e;
  j = valid_json();
  j["choices"][0]["round"] = 2;  // two rounds
  e = refusal(j.dump());
  EXPECT_NE(e.find("choices[0].round"), std::string::npos) << e;
}

TEST(PlanJson, RefusesWrongTypes) {
  nlohmann::json j = valid_json();
  j["budget_bytes"] = "4GiB";
  std::string e = refusal(j.dump());
  EXPECT_NE(e.find("budget_bytes: expected an integer, found string"), std::string::npos) << e;
  j = valid_json();
  j["steps"][0]["kind"] = "teleport";
  e = refusal(j.dump());
  EXPECT_NE(e.find("\"teleport\" is not one of"), std::string::npos) << e;
  j = valid_json();
  j["steps"][0]["start_ms"] = nullptr;
  e = refusal(j.dump());
  EXPECT_NE(e.find("steps[0].start_ms: expected a number"), std::string::npos) << e;
  j = valid_json();
  j["buffers"][0]["resident"] = 1;
  e = refusal(j.dump());
  EXPECT_NE(e.find("expected true or false"), std::string::npos) << e;
  j = valid_json();
  j["steps"] = nlohmann::json::object();
  e = refusal(j.dump());
  EXPECT_NE(e.find("steps: expected an array"), std::string::npos) << e;
  j = valid_json();
  j["copy_engines"] = 3;
  e = refusal(j.dump());
  EXPECT_NE(e.find("copy_engines"), std::string::npos) << e;
}

TEST(PlanJson, MissingFileIsAnError) {
  Result<Plan> r = load_plan("/nonexistent/plan.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().to_string().find("/nonexistent/plan.json"), std::string::npos);
}

}  // namespace
}  // namespace mplan
