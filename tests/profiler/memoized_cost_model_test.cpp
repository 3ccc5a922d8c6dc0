#include "profiler/memoized_cost_model.h"

#include <gtest/gtest.h>

#include <map>
#include <utility>

#include "profiler/analytic_model.h"
#include "tdfg/tdfg.h"
#include "tests/profiler/profiler_test_models.h"

namespace mplan {
namespace {

// The analytic model, counting the questions it is asked per (task, sub-batch).
class CountingCost final : public CostModel {
 public:
  explicit CountingCost(Device device) : device_(std::move(device)), analytic_(device_) {}
  std::vector<TaskOption> options(const Tdfg& tdfg, TaskId t, int64_t sub_batch) const override {
    ++asked[{t, sub_batch}];
    return analytic_.options(tdfg, t, sub_batch);
  }
  double host_to_device_ms(int64_t bytes) const override { return analytic_.host_to_device_ms(bytes); }
  double device_to_host_ms(int64_t bytes) const override { return 2 * analytic_.device_to_host_ms(bytes); }
  int copy_engines() const override { return 1; }
  double duplex_slowdown() const override { return 1.25; }
  int64_t device_memory_bytes() const override { return 12345; }
  std::string describe() const override { return "counting"; }
  bool measures_when_asked() const override { return true; }
  CostModelInfo info() const override {
    CostModelInfo out;
    out.kind = "recorded";
    return out;
  }

  mutable std::map<std::pair<TaskId, int64_t>, int> asked;

 private:
  Device device_;  // the analytic model keeps a reference
  AnalyticCostModel analytic_;
};

void expect_same(const std::vector<TaskOption>& a, const std::vector<TaskOption>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].algorithm, b[i].algorithm);
    EXPECT_EQ(a[i].time_ms, b[i].time_ms);
    EXPECT_EQ(a[i].workspace_bytes, b[i].workspace_bytes);
  }
}

TEST(MemoizedCostModel, AsksItsSourceOncePerTaskAndSubBatchAndAnswersAsItDoes) {
  const Model model = test::parse_or_die(test::kSmallCnn);  // the TDFG points to it
  const Tdfg tdfg = build_tdfg(model);
  const CountingCost source(test::device_or_die("k40"));
  const MemoizedCostModel memoized(source, tdfg);
  for (int pass = 0; pass < 3; ++pass)
    for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t)
      for (int64_t b : {1, 7, 16}) {
        const std::vector<TaskOption> remembered = memoized.options(tdfg, t, b);
        const int asked = source.asked[{t, b}];
        expect_same(remembered, source.options(tdfg, t, b));
        --source.asked[{t, b}];  // not the test's own question
        EXPECT_EQ(asked, 1) << tdfg.tasks[t].name << " at " << b;
      }
}

TEST(MemoizedCostModel, ForwardsAnotherTdfgsQuestionsAndEverythingElse) {
  const Model model = test::parse_or_die(test::kSmallCnn);
  const Tdfg tdfg = build_tdfg(model);
  const Tdfg other = build_tdfg(model);
  const CountingCost source(test::device_or_die("k40"));
  const MemoizedCostModel memoized(source, tdfg);
  for (int pass = 0; pass < 2; ++pass) memoized.options(other, 0, 4);
  EXPECT_EQ((source.asked[{0, 4}]), 2);  // another TDFG is not remembered
  EXPECT_EQ(memoized.host_to_device_ms(1 << 20), source.host_to_device_ms(1 << 20));
  EXPECT_EQ(memoized.device_to_host_ms(1 << 20), source.device_to_host_ms(1 << 20));
  EXPECT_EQ(memoized.copy_engines(), 1);
  EXPECT_EQ(memoized.duplex_slowdown(), 1.25);
  EXPECT_EQ(memoized.device_memory_bytes(), 12345);
  EXPECT_EQ(memoized.describe(), "counting");
  EXPECT_TRUE(memoized.measures_when_asked());
  EXPECT_EQ(memoized.info().kind, "recorded");
}

}  // namespace
}  // namespace mplan
