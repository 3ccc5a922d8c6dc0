// train --timeline FILE (runtime/timeline.h): the last step's copies and
// compute-stream waits, measured, one row each in the plan's order, so that
// each row can be set beside its plan.json step; a file that cannot be
// written is refused before training.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/e2e/e2e_util.h"

namespace mplan::e2e {
namespace {

struct Row {
  std::string kind;
  int order = 0;
  int64_t bytes = 0;
  int event = 0;
  double start_ms = 0, end_ms = 0;
};

std::vector<Row> read_rows(const std::string& path, std::string* header) {
  std::ifstream in(path);
  std::vector<Row> rows;
  std::string line;
  std::getline(in, *header);
  while (std::getline(in, line)) {
    std::stringstream fields(line);
    Row r;
    std::string cell;
    std::getline(fields, r.kind, ',');
    std::getline(fields, cell, ',');
    r.order = std::stoi(cell);
    std::getline(fields, cell, ',');
    r.bytes = std::stoll(cell);
    std::getline(fields, cell, ',');
    r.event = std::stoi(cell);
    std::getline(fields, cell, ',');
    r.start_ms = std::stod(cell);
    std::getline(fields, cell, ',');
    r.end_ms = std::stod(cell);
    rows.push_back(r);
  }
  return rows;
}

TEST(Timeline, EveryCopyAndComputeWaitOfTheStepInThePlansOrder) {
  const Compiled c = compile_model("examples/models/cifar_small.yaml", Budget::offload, "timeline");
  ASSERT_EQ(c.error, "");
  ASSERT_EQ(build_program(c.dir), "");
  // What the plan has, in its order: the copies by direction, the compute stream's waits.
  std::vector<int64_t> prefetch_bytes, offload_bytes;
  std::vector<int32_t> compute_waits;
  for (const Step& s : c.plan.steps) {
    if (s.kind == StepKind::prefetch) prefetch_bytes.push_back(c.plan.buffers.at(s.buffer).bytes);
    if (s.kind == StepKind::offload) offload_bytes.push_back(c.plan.buffers.at(s.buffer).bytes);
    if (s.stream == StreamKind::compute)
      for (EventId e : s.waits) compute_waits.push_back(e);
  }
  ASSERT_FALSE(offload_bytes.empty()) << "the offload budget's plan has no offloads";
  ASSERT_FALSE(compute_waits.empty());

  const std::string csv = c.dir + "/timeline.csv";
  const RunResult r = run_program(c.dir, "--steps 2 --timeline " + csv);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("timeline: step "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the compute stream's "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("of stall)"), std::string::npos) << r.output;
  const std::string copies = std::to_string(offload_bytes.size()) + (offload_bytes.size() == 1 ? " copy," : " copies,");
  EXPECT_NE(r.output.find("timeline: d2h: " + copies), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("timeline: step 2 written to " + csv), std::string::npos) << r.output;
  for (const auto& entry : std::filesystem::directory_iterator(c.dir))
    EXPECT_EQ(entry.path().filename().string().find("timeline.csv.partial"), std::string::npos) << entry.path();

  std::string header;
  const std::vector<Row> rows = read_rows(csv, &header);
  EXPECT_EQ(header, "kind,order,bytes,event,start_ms,end_ms");
  std::vector<int64_t> h2d, d2h;
  std::vector<int32_t> waits;
  int next[3] = {0, 0, 0};
  for (const Row& row : rows) {
    const int k = row.kind == "h2d" ? 0 : row.kind == "d2h" ? 1 : 2;
    ASSERT_TRUE(row.kind == "h2d" || row.kind == "d2h" || row.kind == "wait") << row.kind;
    EXPECT_EQ(row.order, next[k]++) << "rows of a kind are numbered in order";
    EXPECT_LE(row.start_ms, row.end_ms) << row.kind << " " << row.order;
    if (k == 0) h2d.push_back(row.bytes);
    if (k == 1) d2h.push_back(row.bytes);
    if (k == 2) {
      waits.push_back(row.event);
      EXPECT_EQ(row.bytes, 0);
    } else {
      EXPECT_EQ(row.event, -1);
    }
  }
  EXPECT_EQ(h2d, prefetch_bytes);
  EXPECT_EQ(d2h, offload_bytes);
  EXPECT_EQ(waits, compute_waits);
}

TEST(Timeline, AFileThatCannotBeWrittenIsRefusedBeforeTraining) {
  const Compiled c = compile_model("examples/models/cifar_small.yaml", Budget::unlimited, "timeline-refused");
  ASSERT_EQ(c.error, "");
  ASSERT_EQ(build_program(c.dir), "");
  RunResult r = run_program(c.dir, "--steps 1 --timeline " + c.dir + "/no-such-folder/t.csv");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--timeline: "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("step 1:"), std::string::npos) << r.output;
  r = run_program(c.dir, "--steps 0 --timeline " + c.dir + "/t.csv");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--timeline: needs at least one step"), std::string::npos) << r.output;
  // A folder, or a name that ends as one, is refused before training too.
  r = run_program(c.dir, "--steps 1 --timeline " + c.dir);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("is a folder"), std::string::npos) << r.output;
  r = run_program(c.dir, "--steps 1 --timeline " + c.dir + "/t.csv/");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("names a folder"), std::string::npos) << r.output;
  // A plan without offloads: no d2h rows (its h2d rows are the input loads),
  // and nothing of the user's beside the file is touched.
  {
    std::ofstream mine(c.dir + "/t.csv.partial");
    mine << "mine\n";
  }
  r = run_program(c.dir, "--steps 1 --timeline " + c.dir + "/t.csv");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("timeline: d2h: no copies"), std::string::npos) << r.output;
  std::string header;
  for (const Row& row : read_rows(c.dir + "/t.csv", &header)) EXPECT_NE(row.kind, "d2h");
  std::ifstream mine(c.dir + "/t.csv.partial");
  std::string line;
  std::getline(mine, line);
  EXPECT_EQ(line, "mine");
}

}  // namespace
}  // namespace mplan::e2e
