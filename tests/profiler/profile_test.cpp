// profile.json: a recorded profile round-trips (same answers), identical
// layers share one entry, and a truncated or mismatched file is refused with
// the missing layer or sub-batch named.

#include "profiler/profile.h"

#include <gtest/gtest.h>

#include <set>

#include "profiler/analytic_model.h"
#include "profiler/device.h"
#include "profiler/ideal.h"
#include "tdfg/bounds.h"
#include "tests/profiler/profiler_test_models.h"

namespace mplan {
namespace {

AnalyticCostModel p100_model() {
  Result<Device> device = load_device("p100");
  EXPECT_TRUE(device.ok());
  return AnalyticCostModel(*device);
}

TEST(Profile, RoundTripGivesTheSameAnswers) {
  const Model model = test::parse_or_die(test::kSmallCnn);
  const Tdfg tdfg = build_tdfg(model);
  const AnalyticCostModel analytic = p100_model();
  const std::vector<int64_t> sub_batches = *parse_sub_batches("pow2", model.batch);
  EXPECT_EQ(sub_batches, (std::vector<int64_t>{1, 2, 4, 8, 16}));
  const Profile written = make_profile(tdfg, analytic, sub_batches, "p100");
  const std::string text = profile_to_json(written);
  Result<Profile> read = parse_profile(text, "profile.json");
  ASSERT_TRUE(read.ok()) << read.error().to_string();
  auto recorded = RecordedCostModel::create(*read, tdfg, {model.batch}, "profile.json");
  ASSERT_TRUE(recorded.ok()) << recorded.error().to_string();
  const CostModel& replay = **recorded;
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t)
    for (int64_t b : sub_batches) {
      const auto expected = analytic.options(tdfg, t, b);
      const auto actual = replay.options(tdfg, t, b);
      ASSERT_EQ(expected.size(), actual.size()) << tdfg.tasks[t].name << " b=" << b;
      for (size_t i = 0; i < expected.size(); ++i) {
        EXPECT_EQ(expected[i].algorithm, actual[i].algorithm);
        EXPECT_EQ(expected[i].time_ms, actual[i].time_ms);  // exact: JSON keeps every digit
        EXPECT_EQ(expected[i].workspace_bytes, actual[i].workspace_bytes);
      }
    }
  for (int64_t bytes : {int64_t{1} << 10, int64_t{1} << 20, int64_t{3} << 28}) {
    EXPECT_NEAR(replay.host_to_device_ms(bytes), analytic.host_to_device_ms(bytes), 1e-9);
    EXPECT_NEAR(replay.device_to_host_ms(bytes), analytic.device_to_host_ms(bytes), 1e-9);
  }
  EXPECT_EQ(replay.device_memory_bytes(), analytic.device_memory_bytes());
  EXPECT_EQ(replay.copy_engines(), analytic.copy_engines());
  // Writing what was read gives the same file.
  EXPECT_EQ(profile_to_json(*read), text);
  // The math its times are in travels with it (the P100 has no tensor cores: fp32).
  EXPECT_EQ(read->math_mode, "fp32");
  EXPECT_EQ(replay.info().math_mode, "fp32");
  // Between recorded sub-batches: per algorithm, on the line between their
  // times (at 6, halfway between 4 and 8).
  const TaskId conv2 = tdfg.fp_of.at(model.find("conv2"));
  auto time_of = [&](int64_t b, const std::string& algorithm) {
    for (const TaskOption& o : replay.options(tdfg, conv2, b))
      if (o.algorithm == algorithm) return o.time_ms;
    ADD_FAILURE() << "no " << algorithm << " at " << b;
    return 0.0;
  };
  const std::vector<TaskOption> at_6 = replay.options(tdfg, conv2, 6);
  ASSERT_GT(at_6.size(), 1u);
  int moving = 0;  // algorithms whose time differs between 4 and 8 (not host-bound at both)
  for (const TaskOption& o : at_6) {
    EXPECT_NEAR(o.time_ms, (time_of(4, o.algorithm) + time_of(8, o.algorithm)) / 2, 1e-12) << o.algorithm;
    moving += time_of(8, o.algorithm) > time_of(4, o.algorithm);
  }
  EXPECT_GT(moving, 0);
  // ... and, per algorithm, the larger of their workspaces: cuDNN's are not
  // linear in b, and a plan must not give an algorithm less than it asks for.
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t)
    for (const TaskOption& o : replay.options(tdfg, t, 6)) {
      int64_t upper = -1;
      for (const TaskOption& u : replay.options(tdfg, t, 8))
        if (u.algorithm == o.algorithm) upper = std::max(upper, u.workspace_bytes);
      for (const TaskOption& l : replay.options(tdfg, t, 4))
        if (l.algorithm == o.algorithm) upper = std::max(upper, l.workspace_bytes);
      EXPECT_EQ(o.workspace_bytes, upper) << tdfg.tasks[t].name << " " << o.algorithm;
    }
}

// A profile says which math its times are in, so that a plan made from it
// (and the program built from that plan) says it too; a file from before the
// field says "as recorded"; a math mplan does not know is refused.
TEST(Profile, CarriesTheMathItsTimesAreIn) {
  const Model model = test::parse_or_die(test::kSmallCnn);
  const Tdfg tdfg = build_tdfg(model);
  Result<Device> a100 = load_device("a100-80gb");
  ASSERT_TRUE(a100.ok());
  const AnalyticCostModel tf32(*a100, MathMode::tf32);
  const Profile written = make_profile(tdfg, tf32, {1, 16}, "a100");
  EXPECT_EQ(written.math_mode, "tf32");
  const std::string text = profile_to_json(written);
  EXPECT_NE(text.find("\"math\": \"tf32\""), std::string::npos);
  Result<Profile> read = parse_profile(text, "p.json");
  ASSERT_TRUE(read.ok()) << read.error().to_string();
  auto recorded = RecordedCostModel::create(*read, tdfg, {}, "p.json");
  ASSERT_TRUE(recorded.ok());
  EXPECT_EQ((*recorded)->info().math_mode, "tf32");
  // A profile of the recorded profile keeps it.
  EXPECT_EQ(make_profile(tdfg, **recorded, {1, 16}, "a100").math_mode, "tf32");

  std::string older = text;
  older.erase(older.find(" \"math\": \"tf32\",\n"), std::string(" \"math\": \"tf32\",\n").size());
  Result<Profile> old = parse_profile(older, "old.json");
  ASSERT_TRUE(old.ok()) << old.error().to_string();
  EXPECT_EQ(old->math_mode, "");
  auto old_recorded = RecordedCostModel::create(*old, tdfg, {}, "old.json");
  ASSERT_TRUE(old_recorded.ok());
  EXPECT_EQ((*old_recorded)->info().math_mode, "as recorded");
  EXPECT_EQ(make_profile(tdfg, **old_recorded, {1, 16}, "a100").math_mode, "");

  std::string bad = text;
  bad.replace(bad.find("\"tf32\""), 6, "\"fp8\"");
  Result<Profile> refused = parse_profile(bad, "bad.json");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().to_string().find("math"), std::string::npos) << refused.error().to_string();
  EXPECT_NE(refused.error().to_string().find("expected fp32, tf32, fp16 or bf16"), std::string::npos);
  std::string number = text;
  number.replace(number.find("\"tf32\""), 6, "32");
  EXPECT_FALSE(parse_profile(number, "number.json").ok());
}

// The copies' slowdown both ways at once (CostModel::duplex_slowdown) travels
// with the profile: written where above 1, 1 where absent (older files), and
// refused out of 1..100.
TEST(Profile, CarriesTheDuplexSlowdownOfItsCopies) {
  const Model model = test::parse_or_die(test::kSmallCnn);
  const Tdfg tdfg = build_tdfg(model);
  Result<Device> device = load_device("h200");
  ASSERT_TRUE(device.ok());
  const Profile full_duplex = make_profile(tdfg, AnalyticCostModel(*device), {1, 16}, "h200");
  EXPECT_EQ(full_duplex.duplex_slowdown, 1.0);
  EXPECT_EQ(profile_to_json(full_duplex).find("duplex_slowdown"), std::string::npos);
  device->copy_duplex_slowdown = 1.375;
  const std::string text = profile_to_json(make_profile(tdfg, AnalyticCostModel(*device), {1, 16}, "h200"));
  EXPECT_NE(text.find("\"duplex_slowdown\": 1.375"), std::string::npos) << text.substr(0, 600);
  Result<Profile> read = parse_profile(text, "p.json");
  ASSERT_TRUE(read.ok()) << read.error().to_string();
  EXPECT_EQ(read->duplex_slowdown, 1.375);
  auto recorded = RecordedCostModel::create(*read, tdfg, {}, "p.json");
  ASSERT_TRUE(recorded.ok());
  EXPECT_EQ((*recorded)->duplex_slowdown(), 1.375);
  EXPECT_EQ(profile_to_json(*read), text);
  for (const char* good : {"1", "100"}) {
    std::string changed = text;
    changed.replace(changed.find("1.375"), 5, good);
    Result<Profile> accepted = parse_profile(changed, "ok.json");
    ASSERT_TRUE(accepted.ok()) << good << ": " << accepted.error().to_string();
    EXPECT_EQ(accepted->duplex_slowdown, std::stod(good));
  }
  for (const char* bad : {"0.5", "101", "\"fast\""}) {
    std::string changed = text;
    changed.replace(changed.find("1.375"), 5, bad);
    Result<Profile> refused = parse_profile(changed, "bad.json");
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.error().to_string().find("transfers.duplex_slowdown"), std::string::npos)
        << refused.error().to_string();
  }
}

TEST(Profile, IdenticalLayersShareOneEntry) {
  const Model model = test::parse_or_die(test::kSmallCnn);
  const Tdfg tdfg = build_tdfg(model);
  const Profile profile = make_profile(tdfg, p100_model(), {1, 16}, "p100");
  int conv_entries = 0;
  for (const ProfileEntry& e : profile.entries) {
    if (e.signature.rfind("conv ", 0) != 0) continue;
    ++conv_entries;
    if (e.signature.find("in=[16, 32, 32] out=[16, 32, 32] kernel=3x3") != std::string::npos) {
      EXPECT_EQ(e.layers, (std::vector<std::string>{"conv2", "conv3", "conv4"}));
    }
  }
  // conv1 (3 input channels), conv2 = conv3 = conv4, conv5.
  EXPECT_EQ(conv_entries, 3);
}

TEST(Profile, ResNet50HasEachDistinctConvShapeOnce) {
  Result<Model> model = load_model(std::string(MPLAN_SOURCE_DIR) + "/examples/models/resnet50.yaml");
  ASSERT_TRUE(model.ok()) << model.error().to_string();
  const Tdfg tdfg = build_tdfg(*model);
  const Profile profile = make_profile(tdfg, p100_model(), {1, 128}, "p100");
  std::set<std::string> distinct;
  size_t conv_layers = 0;
  for (const Layer& layer : model->layers) conv_layers += layer.op == Op::conv;
  size_t conv_entries = 0, layers_listed = 0;
  for (const ProfileEntry& e : profile.entries) {
    EXPECT_TRUE(distinct.insert(e.signature).second) << "twice: " << e.signature;
    if (e.signature.rfind("conv ", 0) == 0) {
      ++conv_entries;
      layers_listed += e.layers.size();
    }
  }
  EXPECT_EQ(conv_layers, 53u);
  EXPECT_EQ(layers_listed, conv_layers);  // every conv layer is under exactly one entry
  // torchvision's ResNet-50 (v1.5) has 23 distinct conv shapes (input, output, kernel, stride).
  EXPECT_EQ(conv_entries, 23u);
}

TEST(Profile, TruncatedFileIsRefused) {
  const Model model = test::parse_or_die(test::kSmallCnn);
  const Tdfg tdfg = build_tdfg(model);
  const std::string text = profile_to_json(make_profile(tdfg, p100_model(), {1, 16}, "p100"));
  Result<Profile> cut = parse_profile(text.substr(0, text.size() / 2), "p.json");
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.error().to_string().find("p.json:"), std::string::npos);
  EXPECT_NE(cut.error().message.find("truncated"), std::string::npos) << cut.error().to_string();
  Result<Profile> not_profile = parse_profile("{\"format\": \"something else\"}", "p.json");
  ASSERT_FALSE(not_profile.ok());
  EXPECT_NE(not_profile.error().message.find("mplan-profile"), std::string::npos);
}

TEST(Profile, MismatchedModelIsRefusedNamingTheLayer) {
  const Model model = test::parse_or_die(test::kSmallCnn);
  const Tdfg tdfg = build_tdfg(model);
  std::string other_text = test::kSmallCnn;
  other_text.replace(other_text.find("out: 32, kernel: 5"), 7, "out: 48");
  const Model other = test::parse_or_die(other_text);
  const Tdfg other_tdfg = build_tdfg(other);
  const Profile profile = make_profile(tdfg, p100_model(), {1, 16}, "p100");
  auto refused = RecordedCostModel::create(profile, other_tdfg, {16}, "p.json");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("layer 'conv5'"), std::string::npos) << refused.error().to_string();
}

TEST(Profile, MissingSubBatchIsRefusedNamingIt) {
  const Model model = test::parse_or_die(test::kSmallCnn);
  const Tdfg tdfg = build_tdfg(model);
  Profile profile = make_profile(tdfg, p100_model(), {1, 8, 16}, "p100");
  // Not asked for: 4.
  auto refused = RecordedCostModel::create(profile, tdfg, {4}, "p.json");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("sub-batch 4"), std::string::npos) << refused.error().to_string();
  // A layer whose entry lost a sub-batch the file claims to cover.
  for (ProfileEntry& e : profile.entries)
    if (e.signature.rfind("linear", 0) == 0) e.tasks["BP2"].erase(8);
  auto partial = RecordedCostModel::create(profile, tdfg, {16}, "p.json");
  ASSERT_FALSE(partial.ok());
  EXPECT_NE(partial.error().message.find("layer 'fc' BP2 has no entry for sub-batch 8"), std::string::npos)
      << partial.error().to_string();
}

TEST(Profile, SubBatchLists) {
  EXPECT_EQ(*parse_sub_batches("pow2", 12), (std::vector<int64_t>{1, 2, 4, 8, 12}));
  EXPECT_EQ(*parse_sub_batches("all", 3), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(*parse_sub_batches("32,1,8", 64), (std::vector<int64_t>{1, 8, 32}));
  EXPECT_FALSE(parse_sub_batches("0,4", 64).ok());
  // Sizes above the model's batch are profiled too up to 2^31 - 1.
  EXPECT_EQ(*parse_sub_batches("128", 64), (std::vector<int64_t>{128}));
  EXPECT_FALSE(parse_sub_batches("2147483648", 64).ok());
  EXPECT_FALSE(parse_sub_batches("all", 1 << 20).ok());
  EXPECT_FALSE(parse_sub_batches("four", 64).ok());
}

TEST(IdealRun, SumsTheFastestOptionsAndAddsTheirWorkspaces) {
  const Model model = test::parse_or_die(test::kSmallCnn);
  const Tdfg tdfg = build_tdfg(model);
  const AnalyticCostModel cost = p100_model();
  const IdealRun ideal = ideal_run(tdfg, cost);
  EXPECT_EQ(ideal.batch, 16);
  double sum = 0;
  std::vector<int64_t> workspaces;
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t) {
    const TaskOption fastest = fastest_option(cost, tdfg, t, 16);
    sum += fastest.time_ms;
    workspaces.push_back(fastest.workspace_bytes);
    EXPECT_EQ(ideal.choices[t].algorithm, fastest.algorithm);
  }
  EXPECT_DOUBLE_EQ(ideal.time_ms, sum);
  // At least the zero-workspace liveness peak; exactly the peak with the workspaces.
  EXPECT_GE(ideal.peak_bytes, compute_bounds(tdfg, 16).liveness_peak_bytes);
  const std::vector<int64_t> live = liveness_profile(tdfg, 16, workspaces);
  EXPECT_EQ(ideal.peak_bytes, *std::max_element(live.begin(), live.end()));
  ASSERT_NE(ideal.peak_task, kNoTask);
  EXPECT_EQ(live[ideal.peak_task], ideal.peak_bytes);
}

}  // namespace
}  // namespace mplan
