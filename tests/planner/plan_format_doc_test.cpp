// docs/plan-format.md against the code: every table of the page that the
// code determines is read from the page itself and checked here, so that the
// page cannot go stale. The constants (format name and version, alignment,
// plan limits); the fields the writer writes, in order, and which a step's
// kind requires; the verifier's violation kinds; the reads and writes of
// every op's tasks, in order, their saved blocks, in-place mode and recompute
// signature, against the TDFGs of the example models that together use every
// op (with and without in-place sharing); the workspaces; the model digest's
// fields, encodings and constants, recomputed from the page for every example
// model; and the shape of the plans mplan writes that the page states
// (host_bytes, stall_ms, host slots, round order, workspace steps).

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "frontend/parse.h"
#include "ops/op_table.h"
#include "planner/plan_json.h"
#include "planner/plan_limits.h"
#include "planner/verify.h"
#include "profiler/analytic_model.h"
#include "profiler/device.h"
#include "tdfg/tdfg.h"
#include "verify_plans.h"

namespace mplan {
namespace {

// ---- reading the page ---------------------------------------------------------------

const std::string& page() {
  static const std::string text = [] {
    std::ifstream in(std::string(MPLAN_SOURCE_DIR) + "/docs/plan-format.md");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }();
  return text;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

// Without backticks, trimmed.
std::string plain(const std::string& cell) {
  std::string out;
  for (char c : cell)
    if (c != '`') out += c;
  return trim(out);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep)) out.push_back(trim(part));
  return out;
}

// The names in backticks of a cell: "`start_ms`, `end_ms`" -> {start_ms, end_ms}.
std::vector<std::string> quoted_names(const std::string& cell) {
  std::vector<std::string> out;
  size_t at = 0;
  while ((at = cell.find('`', at)) != std::string::npos) {
    const size_t end = cell.find('`', at + 1);
    if (end == std::string::npos) break;
    out.push_back(cell.substr(at + 1, end - at - 1));
    at = end + 1;
  }
  return out;
}

struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  // The row whose first cell (plain) is `key`, or nullptr.
  const std::vector<std::string>* row(const std::string& key) const {
    for (const auto& r : rows)
      if (plain(r.at(0)) == key) return &r;
    return nullptr;
  }
};

std::vector<std::string> cells_of(const std::string& line) {
  std::string inner = trim(line);
  if (!inner.empty() && inner.front() == '|') inner.erase(0, 1);
  if (!inner.empty() && inner.back() == '|') inner.pop_back();
  return split(inner, '|');
}

// The markdown table whose header line is exactly `header`, the first after
// `after` (a heading) when given; empty rows when there is none.
Table find_table(const std::string& header, const std::string& after = "") {
  Table table;
  const std::string& text = page();
  size_t from = 0;
  if (!after.empty()) {
    from = text.find(after);
    if (from == std::string::npos) return table;
  }
  std::istringstream in(text.substr(from));
  std::string line;
  bool found = false;
  while (std::getline(in, line)) {
    if (!found) {
      if (trim(line) == header) {
        found = true;
        table.header = cells_of(line);
        std::getline(in, line);  // |---|---|
      }
      continue;
    }
    if (trim(line).empty() || trim(line).front() != '|') break;
    table.rows.push_back(cells_of(line));
  }
  return table;
}

// The first column's names, in order (a cell may name several fields).
std::vector<std::string> field_names(const Table& table) {
  std::vector<std::string> out;
  for (const auto& r : table.rows)
    for (const std::string& name : quoted_names(r.at(0))) out.push_back(name);
  return out;
}

// A product of integers and variables: "4 * b * heads".
int64_t evaluate(const std::string& formula, const std::map<std::string, int64_t>& vars) {
  int64_t value = 1;
  for (const std::string& factor : split(formula, '*')) {
    if (!factor.empty() && std::isdigit(static_cast<unsigned char>(factor[0]))) {
      value *= std::stoll(factor);
      continue;
    }
    auto it = vars.find(factor);
    if (it == vars.end()) {
      ADD_FAILURE() << "unknown variable '" << factor << "' in '" << formula << "'";
      return -1;
    }
    value *= it->second;
  }
  return value;
}

std::vector<std::string> example_models() { return {"every_op", "every_vision_op"}; }

Model load_example(const std::string& stem) {
  Result<Model> model = load_model(testing::example_model_path(stem));
  EXPECT_TRUE(model.ok()) << (model.ok() ? "" : model.error().to_string());
  return model.ok() ? std::move(model).value() : Model{};
}

// ---- constants ----------------------------------------------------------------------

std::map<std::string, std::string> constants() {
  std::map<std::string, std::string> out;
  for (const auto& r : find_table("| constant | value |").rows) out[plain(r.at(0))] = plain(r.at(1));
  return out;
}

TEST(PlanFormatDoc, ConstantsAreTheCodes) {
  const auto c = constants();
  ASSERT_FALSE(c.empty()) << "no '| constant | value |' table in docs/plan-format.md";
  EXPECT_EQ(c.size(), 7u);
  EXPECT_EQ(c.at("format"), kPlanFormatName);
  EXPECT_EQ(std::stoll(c.at("format_version")), kPlanFormatVersion);
  EXPECT_EQ(std::stoll(c.at("alignment_bytes")), kPlanAlignmentBytes);
  EXPECT_EQ(std::stoll(c.at("max_rounds")), kMaxRounds);
  EXPECT_EQ(std::stoll(c.at("max_task_runs")), kMaxTaskRounds);
  // The digest constants are checked by recomputing digests (below).
  EXPECT_TRUE(c.count("digest_offset_basis") && c.count("digest_prime"));
  // The page's title and its statements of the alignment follow the constants.
  EXPECT_NE(page().find("(format version " + std::to_string(kPlanFormatVersion) + ")"), std::string::npos);
  EXPECT_NE(page().find("multiple of " + std::to_string(kPlanAlignmentBytes) + " bytes"), std::string::npos);
}

// ---- the fields the writer writes ----------------------------------------------------

// A plan with one record of each kind and every optional field set.
Plan full_plan() {
  Plan p;
  p.model_name = "m";
  p.model_digest = "0123456789abcdef";
  p.weight_copies_where_used = true;
  p.evaluation = true;
  p.sub_batches = {2};
  p.sub_batch = 2;
  p.batch = 2;
  TaskChoice c;
  c.micro_batches.push_back(MicroBatch{2, "a", 1.0, 0});
  p.choices.push_back(c);
  p.buffers.push_back(Buffer{0, 0, kNoTask, 0, 4, 0, false});
  p.host_slots.push_back(HostSlot{0, 0, 0, 4, 0});
  Step s;
  s.kind = StepKind::compute;
  s.task = 0;
  s.buffer = 0;
  s.host_slot = 0;
  s.reads = {0};
  s.writes = {0};
  s.workspace = 0;
  s.waits = {0};
  s.records = 0;
  s.recompute = true;
  p.steps.push_back(s);
  p.event_count = 1;
  p.task_names = {"t"};
  p.block_names = {"b"};
  p.block_types = {"bfloat16"};
  p.data_parallel.ranks = 2;
  p.data_parallel.global_batch = 4;
  p.data_parallel.plan_of_rank = {0, 0};
  p.data_parallel.buckets.push_back(GradientBucket{{0}, 4, 0, 0.0, 1.0});
  return p;
}

using OrderedJson = nlohmann::ordered_json;

std::vector<std::string> keys(const OrderedJson& object) {
  std::vector<std::string> out;
  for (auto it = object.begin(); it != object.end(); ++it) out.push_back(it.key());
  return out;
}

TEST(PlanFormatDoc, FieldTablesListWhatTheWriterWritesInOrder) {
  const OrderedJson j = OrderedJson::parse(plan_to_json(full_plan()));
  struct Case {
    const char* heading;
    const char* header;
    OrderedJson object;
  };
  const std::vector<Case> cases = {
      {"## Header fields", "| field | type | meaning |", j},
      {"### `summary`", "| field | type | meaning |", j.at("summary")},
      {"### `data_parallel`", "| field | type | meaning |", j.at("data_parallel")},
      {"### `choices[]`", "| field | type | meaning |", j.at("choices").at(0)},
      {"### `buffers[]`", "| field | type | meaning |", j.at("buffers").at(0)},
      {"### `host_slots[]`", "| field | type | meaning |", j.at("host_slots").at(0)},
      {"### `steps[]`", "| field | type | required for | meaning |", j.at("steps").at(0)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.heading);
    const Table table = find_table(c.header, c.heading);
    ASSERT_FALSE(table.rows.empty()) << "no table under " << c.heading;
    EXPECT_EQ(field_names(table), keys(c.object));
  }
}

TEST(PlanFormatDoc, StepFieldsRequiredByEachKindAreTheOnesWrittenByDefault) {
  const Table table = find_table("| field | type | required for | meaning |", "### `steps[]`");
  ASSERT_FALSE(table.rows.empty());
  for (StepKind kind : {StepKind::compute, StepKind::offload, StepKind::prefetch, StepKind::alloc, StepKind::free}) {
    SCOPED_TRACE(step_kind_name(kind));
    std::vector<std::string> required;
    for (const auto& r : table.rows) {
      const std::string need = plain(r.at(2));
      const std::vector<std::string> kinds = split(need, ',');
      if (need == "all" || std::find(kinds.begin(), kinds.end(), step_kind_name(kind)) != kinds.end())
        for (const std::string& name : quoted_names(r.at(0))) required.push_back(name);
    }
    Plan p = full_plan();
    Step s;  // every field at its default
    s.kind = kind;
    p.steps = {s};
    p.event_count = 0;
    const OrderedJson j = OrderedJson::parse(plan_to_json(p));
    EXPECT_EQ(required, keys(j.at("steps").at(0)));
  }
}

TEST(PlanFormatDoc, ViolationKindsAreTheVerifiers) {
  const Table table = find_table("| kind | violation |");
  ASSERT_FALSE(table.rows.empty());
  std::vector<std::string> kinds;
  for (int k = 0;; ++k) {
    const std::string name = violation_kind_name(static_cast<ViolationKind>(k));
    if (name == "?") break;
    kinds.push_back(name);
  }
  EXPECT_EQ(field_names(table), kinds);
}

// ---- the per-op table -----------------------------------------------------------------

const std::vector<std::string> kOpColumns = {
    "op",         "FP reads",   "FP writes", "BP1 reads",           "BP1 writes",           "BP2 reads",
    "BP2 writes", "saved bytes", "in place", "recomputed FP reads", "recomputed FP writes"};

std::string op_table_header() {
  std::string h = "|";
  for (const std::string& c : kOpColumns) h += " " + c + " |";
  return h;
}

// "`pool`, mode max" -> "pool mode max"; "`conv`" -> "conv".
std::string row_key(const std::string& cell) {
  const std::vector<std::string> parts = split(cell, ',');
  std::string key = plain(parts.at(0));
  for (size_t i = 1; i < parts.size(); ++i) key += " " + plain(parts[i]);
  return key;
}

std::string layer_key(const Layer& layer) {
  std::string key = op_name(layer.op);
  if (layer.op == Op::pool) key += layer.pool_mode == PoolMode::max ? " mode max" : " mode avg";
  return key;
}

bool is_none(const std::string& cell) { return plain(cell) == "—"; }

// The variables of the page's byte formulas for a layer at sub-batch b.
std::map<std::string, int64_t> variables(const Layer& layer, const std::vector<Shape>& inputs, int64_t b) {
  std::map<std::string, int64_t> v;
  v["b"] = b;
  const Shape& x = inputs.at(0);
  v["C"] = x.dims.at(0);
  v["E"] = layer.output.elements();
  v["P"] = x.dims.size() == 3 ? x.dims[1] * x.dims[2] : x.dims.size() == 2 ? x.dims[0] : 1;
  v["heads"] = layer.heads;
  v["Tq"] = x.dims.at(0);
  v["Tk"] = inputs.size() == 1 ? x.dims.at(0) : inputs.at(1).dims.at(0);
  v["T"] = layer.output.dims.at(0);
  v["p"] = layer.window.kernel_h;
  return v;
}

constexpr BlockId kMissing = -100;  // a token whose block the layer does not have

// The blocks a cell's tokens name for task t of layer l, each once, in order.
std::vector<BlockId> expand(const std::string& cell, const Tdfg& tdfg, LayerId l, TaskId t) {
  const Layer& layer = tdfg.model->layers[l];
  std::vector<LayerId> inputs;
  for (LayerId in : layer.inputs)
    if (std::find(inputs.begin(), inputs.end(), in) == inputs.end()) inputs.push_back(in);
  auto earlier_writer = [&](BlockId b) {
    for (TaskId u = 0; u < t; ++u) {
      const auto& w = tdfg.tasks[u].writes;
      if (std::find(w.begin(), w.end(), b) != w.end()) return true;
    }
    return false;
  };
  std::vector<BlockId> out;
  auto add = [&](BlockId b) {
    if (b == kNoBlock) b = kMissing;
    if (std::find(out.begin(), out.end(), b) == out.end()) out.push_back(b);
  };
  for (const std::string& raw : split(plain(cell), ',')) {
    const std::string token = trim(raw);
    if (token == "X*") {
      for (LayerId in : inputs) add(in == kModelInput ? tdfg.input_block : tdfg.output_of[in]);
    } else if (token == "dX*" || token == "acc(dX*)") {
      for (LayerId in : inputs) {
        if (in == kModelInput || tdfg.gradient_of[in] == kNoBlock) continue;
        if (token == "dX*" || earlier_writer(tdfg.gradient_of[in])) add(tdfg.gradient_of[in]);
      }
    } else if (token == "W") {
      add(tdfg.weight_of[l]);
    } else if (token == "state") {
      add(tdfg.state_of[l]);
    } else if (token == "saved") {
      add(tdfg.saved_of[l]);
    } else if (token == "Y") {
      add(tdfg.output_of[l]);
    } else if (token == "dY") {
      add(tdfg.gradient_of[l]);
    } else if (token == "dW") {
      add(tdfg.weight_grad_of[l]);
    } else if (token == "labels") {
      add(tdfg.labels_block);
    } else if (token == "loss") {
      add(tdfg.loss_block);
    } else {
      ADD_FAILURE() << "unknown token '" << token << "' in '" << cell << "'";
      add(kMissing);
    }
  }
  return out;
}

std::string names(const Tdfg& tdfg, const std::vector<BlockId>& blocks) {
  std::string out;
  for (BlockId b : blocks)
    out += (out.empty() ? "" : ", ") + (b >= 0 ? tdfg.blocks[b].name : std::string("(missing)"));
  return "[" + out + "]";
}

const char* in_place_name(InPlace mode) {
  switch (mode) {
    case InPlace::never: return "never";
    case InPlace::overwrites_input: return "overwrites input";
    case InPlace::view: return "view";
  }
  return "?";
}

TEST(PlanFormatDoc, EveryOpHasARowInOpsDefOrder) {
  const Table table = find_table(op_table_header());
  ASSERT_FALSE(table.rows.empty()) << "no table with the header '" << op_table_header() << "'";
  std::vector<std::string> expected;
  for (const OpSpec* spec : all_op_specs()) {
    if (spec->op == Op::pool) {
      expected.push_back("pool mode max");
      expected.push_back("pool mode avg");
    } else {
      expected.push_back(spec->name);
    }
  }
  std::vector<std::string> rows;
  for (const auto& r : table.rows) {
    EXPECT_EQ(r.size(), kOpColumns.size()) << r.at(0);
    rows.push_back(row_key(r.at(0)));
  }
  EXPECT_EQ(rows, expected);
  for (const auto& r : table.rows) {
    const std::string key = row_key(r.at(0));
    const Op op = [&] {
      for (const OpSpec* spec : all_op_specs())
        if (key.rfind(spec->name, 0) == 0 && (key.size() == std::strlen(spec->name) || key[std::strlen(spec->name)] == ' '))
          return spec->op;
      return Op::relu;
    }();
    const OpSpec& spec = op_spec(op);
    EXPECT_EQ(plain(r.at(8)), spec.bp1_in_place ? "BP1 only" : in_place_name(spec.in_place)) << key;
  }
}

TEST(PlanFormatDoc, OpTableGivesEveryTasksReadsAndWritesInOrder) {
  const Table table = find_table(op_table_header());
  ASSERT_FALSE(table.rows.empty());
  std::map<std::string, const std::vector<std::string>*> rows;
  for (const auto& r : table.rows) rows[row_key(r.at(0))] = &r;
  // Which (row, column) a task checked: every filled cell must be checked once.
  std::set<std::pair<std::string, size_t>> checked;
  std::set<std::string> shared;  // rows whose in-place sharing was seen
  for (const std::string& stem : example_models()) {
    const Model model = load_example(stem);
    ASSERT_FALSE(model.layers.empty()) << stem;
    for (bool in_place : {true, false}) {
      TdfgOptions options;
      options.in_place = in_place;
      const Tdfg tdfg = build_tdfg(model, options);
      for (LayerId l = 0; l < static_cast<LayerId>(model.layers.size()); ++l) {
        const Layer& layer = model.layers[l];
        const std::string key = layer_key(layer);
        SCOPED_TRACE(stem + (in_place ? "" : " (no in-place)") + ", layer " + layer.name + ", row " + key);
        ASSERT_TRUE(rows.count(key)) << "no row for " << key;
        const std::vector<std::string>& row = *rows.at(key);
        auto check = [&](TaskId t, size_t reads_column, bool recompute) {
          const Task& task = tdfg.tasks[t];
          const std::vector<BlockId>& reads = recompute ? task.recompute_reads : task.reads;
          const std::vector<BlockId>& writes = recompute ? task.recompute_writes : task.writes;
          EXPECT_EQ(names(tdfg, expand(row[reads_column], tdfg, l, t)), names(tdfg, reads))
              << task.name << ": column '" << kOpColumns[reads_column] << "'";
          EXPECT_EQ(names(tdfg, expand(row[reads_column + 1], tdfg, l, t)), names(tdfg, writes))
              << task.name << ": column '" << kOpColumns[reads_column + 1] << "'";
          checked.insert({key, reads_column});
        };
        const TaskId fp = tdfg.fp_of[l];
        ASSERT_NE(fp, kNoTask);
        check(fp, 1, false);
        if (tdfg.tasks[fp].in_place) shared.insert(key);
        if (tdfg.bp1_of[l] != kNoTask && tdfg.tasks[tdfg.bp1_of[l]].in_place) shared.insert(key);
        if (is_none(row[3])) EXPECT_EQ(tdfg.bp1_of[l], kNoTask) << "the row has no BP1";
        else if (tdfg.bp1_of[l] != kNoTask) check(tdfg.bp1_of[l], 3, false);
        if (is_none(row[5])) EXPECT_EQ(tdfg.bp2_of[l], kNoTask) << "the row has no BP2";
        else if (tdfg.bp2_of[l] != kNoTask) check(tdfg.bp2_of[l], 5, false);
        if (is_none(row[9])) {
          EXPECT_TRUE(tdfg.tasks[fp].recompute_reads.empty() && tdfg.tasks[fp].recompute_writes.empty())
              << "the row has no recompute signature";
        } else {
          check(fp, 9, true);
        }
        // The saved block and its bytes at two sub-batches.
        const std::vector<Shape> inputs = model.input_shapes(l);
        if (is_none(row[7])) {
          EXPECT_EQ(tdfg.saved_of[l], kNoBlock) << "the row has no saved block";
        } else if (tdfg.saved_of[l] == kNoBlock) {
          ADD_FAILURE() << "the row has a saved block, the layer none";
        } else {
          for (int64_t b : {1, 3})
            EXPECT_EQ(tdfg.blocks[tdfg.saved_of[l]].bytes(b), evaluate(plain(row[7]), variables(layer, inputs, b)))
                << "saved bytes at sub-batch " << b;
          checked.insert({key, 7});
        }
      }
    }
  }
  for (const auto& r : table.rows) {
    const std::string key = row_key(r.at(0));
    for (size_t column : {size_t{1}, size_t{3}, size_t{5}, size_t{7}, size_t{9}})
      if (!is_none(r.at(column))) {
        EXPECT_TRUE(checked.count({key, column}))
            << "row " << key << ", column '" << kOpColumns[column]
            << "': no layer of the example models checks it (add one to " << "examples/models/every_op.yaml or "
            << "every_vision_op.yaml)";
      }
    if (plain(r.at(8)) != "never") {
      EXPECT_TRUE(shared.count(key)) << "row " << key << ": no layer computed in place";
    }
  }
}

// ---- workspaces -----------------------------------------------------------------------

TEST(PlanFormatDoc, WorkspaceTableGivesEveryTasksWorkspace) {
  const Table table = find_table("| op | tasks | workspace bytes |");
  ASSERT_FALSE(table.rows.empty());
  Result<Device> device = load_device("k40");
  ASSERT_TRUE(device.ok());
  const AnalyticCostModel cost(*device);
  std::set<std::string> seen;
  for (const std::string& stem : example_models()) {
    const Model model = load_example(stem);
    const Tdfg tdfg = build_tdfg(model);
    for (LayerId l = 0; l < static_cast<LayerId>(model.layers.size()); ++l) {
      const Layer& layer = model.layers[l];
      const OpSpec& spec = op_spec(layer.op);
      const std::vector<std::string>* row = table.row(spec.name);
      SCOPED_TRACE(stem + ", layer " + layer.name);
      std::vector<std::string> kinds = row ? split(plain(row->at(1)), ',') : std::vector<std::string>{};
      if (spec.has_algorithms) {
        ASSERT_NE(row, nullptr) << spec.name << " chooses algorithms: its row is missing";
        EXPECT_EQ(kinds, (std::vector<std::string>{"FP", "BP1", "BP2"}));
        seen.insert(spec.name);
        continue;
      }
      for (TaskId t : {tdfg.fp_of[l], tdfg.bp1_of[l], tdfg.bp2_of[l]}) {
        if (t == kNoTask) continue;
        const Task& task = tdfg.tasks[t];
        const bool listed = std::find(kinds.begin(), kinds.end(), task_kind_name(task.kind)) != kinds.end();
        for (int64_t b : {1, 3}) {
          const int64_t planned = cost.options(tdfg, t, b).front().workspace_bytes;
          const int64_t expected = listed ? evaluate(plain(row->at(2)), variables(layer, model.input_shapes(l), b)) : 0;
          EXPECT_EQ(planned, expected) << task.name << " at sub-batch " << b;
        }
        if (listed) seen.insert(spec.name);
      }
    }
  }
  for (const auto& r : table.rows) EXPECT_TRUE(seen.count(plain(r.at(0)))) << "row " << plain(r.at(0)) << " unchecked";
}

// ---- the model digest -------------------------------------------------------------------

class Digest {
 public:
  Digest(uint64_t basis, uint64_t prime) : hash_(basis), prime_(prime) {}
  void bytes(const void* data, size_t size) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < size; ++i) {
      hash_ ^= p[i];
      hash_ *= prime_;
    }
  }
  void integer(int64_t v) { bytes(&v, sizeof v); }
  void real(double v) { bytes(&v, sizeof v); }
  void text(const std::string& s) {
    integer(static_cast<int64_t>(s.size()));
    bytes(s.data(), s.size());
  }
  void list(const std::vector<int64_t>& v) {
    integer(static_cast<int64_t>(v.size()));
    for (int64_t x : v) integer(x);
  }
  std::string hex() const {
    char text[17];
    std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash_));
    return text;
  }

 private:
  uint64_t hash_;
  uint64_t prime_;
};

// A field's value: exactly one of these is set, by its encoding.
struct Value {
  std::string text;
  int64_t integer = 0;
  double real = 0;
  std::vector<int64_t> list;
};

std::optional<Value> model_field(const Model& m, const std::string& name) {
  Value v;
  if (name == "name") v.text = m.name;
  else if (name == "input") v.list = m.input.dims;
  else if (name == "batch") v.integer = m.batch;
  else if (name == "classes") v.integer = m.classes;
  else if (name == "dtype") v.text = m.dtype;
  else if (name == "optimizer.kind") v.text = m.optimizer.kind;
  else if (name == "optimizer.lr") v.real = m.optimizer.lr;
  else if (name == "optimizer.momentum") v.real = m.optimizer.momentum;
  else if (name == "optimizer.weight_decay") v.real = m.optimizer.weight_decay;
  else if (name == "layers") v.integer = static_cast<int64_t>(m.layers.size());
  else return std::nullopt;
  return v;
}

std::optional<Value> layer_field(const Layer& l, const std::string& name) {
  Value v;
  const Window& w = l.window;
  const std::map<std::string, int64_t> ints = {
      {"op", static_cast<int64_t>(l.op)}, {"out", l.out}, {"groups", l.groups}, {"bias", l.bias},
      {"kernel_h", w.kernel_h}, {"kernel_w", w.kernel_w}, {"stride_h", w.stride_h}, {"stride_w", w.stride_w},
      {"pad_h", w.pad_h}, {"pad_w", w.pad_w}, {"pool_mode", static_cast<int64_t>(l.pool_mode)},
      {"ceil_mode", l.ceil_mode}, {"lrn_size", l.lrn_size}, {"dilation_h", w.dilation_h},
      {"dilation_w", w.dilation_w}, {"tanh_approximation", l.tanh_approximation}, {"out_h", l.out_h},
      {"out_w", l.out_w}, {"axis", l.axis}, {"begin", l.begin}, {"end", l.end}, {"transpose_b", l.transpose_b},
      {"heads", l.heads}};
  const std::map<std::string, double> reals = {{"eps", l.eps},   {"momentum", l.momentum}, {"alpha", l.alpha},
                                               {"beta", l.beta}, {"k", l.k},               {"p", l.p},
                                               {"clip_min", l.clip_min}, {"clip_max", l.clip_max},
                                               {"scale", l.scale}};
  if (name == "name") v.text = l.name;
  else if (name == "in") v.list.assign(l.inputs.begin(), l.inputs.end());
  else if (name == "output") v.list = l.output.dims;
  else if (name == "shape") v.list = l.shape;
  else if (ints.count(name)) v.integer = ints.at(name);
  else if (reals.count(name)) v.real = reals.at(name);
  else return std::nullopt;
  return v;
}

void feed(Digest& d, const std::string& encoding, const Value& v, const std::string& field) {
  if (encoding == "text") d.text(v.text);
  else if (encoding == "int") d.integer(v.integer);
  else if (encoding == "real") d.real(v.real);
  else if (encoding == "list") d.list(v.list);
  else ADD_FAILURE() << "field " << field << ": unknown encoding '" << encoding << "'";
}

// The digest of `m` as the page says to compute it.
std::string page_digest(const Model& m) {
  const auto c = constants();
  Digest d(std::stoull(c.at("digest_offset_basis")), std::stoull(c.at("digest_prime")));
  const Table model_fields = find_table("| field | hashed as |", "## The model digest");
  const Table layer_fields = find_table("| field | hashed as | unset |", "## The model digest");
  EXPECT_FALSE(model_fields.rows.empty());
  EXPECT_FALSE(layer_fields.rows.empty());
  for (const auto& r : model_fields.rows) {
    const std::string name = plain(r.at(0));
    const std::optional<Value> v = model_field(m, name);
    if (!v) {
      ADD_FAILURE() << "the page hashes a model field '" << name << "' the test does not know";
      continue;
    }
    feed(d, plain(r.at(1)), *v, name);
    if (name != "layers") continue;
    for (const Layer& layer : m.layers)
      for (const auto& lr : layer_fields.rows) {
        const std::string lname = plain(lr.at(0));
        const std::optional<Value> lv = layer_field(layer, lname);
        if (!lv) {
          ADD_FAILURE() << "the page hashes a layer field '" << lname << "' the test does not know";
          continue;
        }
        feed(d, plain(lr.at(1)), *lv, lname);
      }
  }
  return d.hex();
}

TEST(PlanFormatDoc, DigestComputedFromThePageIsModelDigestForEveryExampleModel) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(fs::path(MPLAN_SOURCE_DIR) / "examples" / "models"))
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty());
  for (const fs::path& file : files) {
    Result<Model> model = load_model(file.string());
    ASSERT_TRUE(model.ok()) << model.error().to_string();
    EXPECT_EQ(page_digest(*model), model_digest(*model)) << file.filename();
  }
}

TEST(PlanFormatDoc, UnsetLayerFieldsHaveThePagesValues) {
  const Table table = find_table("| field | hashed as | unset |", "## The model digest");
  ASSERT_FALSE(table.rows.empty());
  const Layer unset{};
  for (const auto& r : table.rows) {
    const std::string name = plain(r.at(0)), encoding = plain(r.at(1)), value = plain(r.at(2));
    if (value.empty()) continue;
    const std::optional<Value> v = layer_field(unset, name);
    ASSERT_TRUE(v) << name;
    if (encoding == "int") EXPECT_EQ(v->integer, std::stoll(value)) << name;
    else if (encoding == "real") EXPECT_EQ(v->real, std::stod(value)) << name;
    else if (encoding == "list") EXPECT_TRUE(value == "empty" && v->list.empty()) << name;
    else ADD_FAILURE() << name << ": no unset value for " << encoding;
  }
}

TEST(PlanFormatDoc, DigestExampleHasThePagesDigest) {
  const std::string& text = page();
  const size_t section = text.find("## The model digest");
  ASSERT_NE(section, std::string::npos);
  const size_t begin = text.find("```yaml\n", section);
  const size_t end = text.find("```\n", begin + 8);
  ASSERT_TRUE(begin != std::string::npos && end != std::string::npos);
  const std::string yaml = text.substr(begin + 8, end - begin - 8);
  const size_t at = text.find("digest: `", end);
  ASSERT_NE(at, std::string::npos);
  const std::string stated = text.substr(at + 9, text.find('`', at + 9) - at - 9);
  Result<Model> model = parse_model(yaml, "docs/plan-format.md");
  ASSERT_TRUE(model.ok()) << model.error().to_string();
  EXPECT_EQ(stated, model_digest(*model));
  EXPECT_EQ(stated, page_digest(*model));
}

// ---- what plans mplan writes look like ----------------------------------------------------

void expect_documented_shape(const Tdfg& tdfg, const Plan& plan) {
  // Resident blocks end to end in block order; the arena's formula.
  int64_t resident_end = 0;
  for (const Buffer& b : plan.buffers) {
    if (!b.resident) continue;
    EXPECT_EQ(b.offset, resident_end) << "resident " << tdfg.blocks[b.block].name;
    resident_end = b.offset + align_up(b.bytes);
  }
  EXPECT_EQ(plan.resident_region_bytes, resident_end);
  EXPECT_EQ(plan.arena_bytes, align_down(plan.budget_bytes - plan.resident_region_bytes));
  // Host slots end to end; host_bytes the largest aligned end; one slot per instance.
  int64_t host_end = 0, largest = 0;
  std::set<std::pair<BlockId, int32_t>> instances;
  for (const HostSlot& h : plan.host_slots) {
    EXPECT_EQ(h.host_offset, host_end);
    host_end += align_up(std::max<int64_t>(1, h.bytes));
    largest = std::max(largest, align_up(h.host_offset + h.bytes));
    EXPECT_TRUE(instances.insert({h.block, h.round}).second) << "a second host slot for " << tdfg.blocks[h.block].name;
  }
  EXPECT_EQ(plan.host_bytes, host_end);
  EXPECT_EQ(plan.host_bytes, largest);
  // stall_ms as the page defines it: over the compute stream's steps (compute and move).
  double stall = 0, end = 0;
  for (const Step& s : plan.steps) {
    if (s.kind != StepKind::compute && s.kind != StepKind::move) continue;
    stall += std::max(0.0, s.start_ms - end);
    end = std::max(end, s.end_ms);
  }
  EXPECT_NEAR(plan.summary.stall_ms, stall, 1e-9 * std::max(1.0, stall));
  // Compute steps grouped by round, the update last; choices in issue order.
  int32_t round = 0;
  std::vector<std::pair<TaskId, int32_t>> runs;
  for (const Step& s : plan.steps) {
    if (s.kind != StepKind::compute) continue;
    const int32_t r = s.round == kOnceRound ? static_cast<int32_t>(plan.sub_batches.size()) : s.round;
    EXPECT_GE(r, round) << "step " << s.index << " of round " << s.round << " after round " << round;
    round = r;
    if (!s.recompute) runs.push_back({s.task, s.round});
  }
  TaskId last_task = kNoTask;
  for (const Step& s : plan.steps)
    if (s.kind == StepKind::compute) last_task = s.task;
  EXPECT_EQ(last_task, tdfg.update_task) << "the update is the last compute step";
  ASSERT_EQ(runs.size(), plan.choices.size());
  for (size_t i = 0; i < runs.size(); ++i)
    EXPECT_EQ(runs[i], std::make_pair(plan.choices[i].task, plan.choices[i].round)) << "choice " << i;
  // A workspace: alloc right before its compute step, free right after.
  for (const TaskChoice& c : plan.choices) {
    if (c.workspace == kNoBuffer) continue;
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      const Step& s = plan.steps[i];
      if (s.kind != StepKind::compute || s.workspace != c.workspace) continue;
      ASSERT_TRUE(i > 0 && i + 1 < plan.steps.size());
      EXPECT_TRUE(plan.steps[i - 1].kind == StepKind::alloc && plan.steps[i - 1].buffer == c.workspace);
      EXPECT_TRUE(plan.steps[i + 1].kind == StepKind::free && plan.steps[i + 1].buffer == c.workspace);
    }
  }
}

TEST(PlanFormatDoc, PlansMplanWritesHaveTheShapeThePageStates) {
  constexpr int64_t kMiB = int64_t{1} << 20;
  for (int64_t sub_batch : {int64_t{0}, int64_t{7}}) {
    SCOPED_TRACE("sub-batch " + std::to_string(sub_batch));
    const testing::Planned p = testing::plan_example("cifar_small", 3 * kMiB, 2, sub_batch);
    ASSERT_FALSE(p.plan.steps.empty());
    EXPECT_FALSE(p.plan.host_slots.empty());
    expect_documented_shape(p.tdfg, p.plan);
  }
}

}  // namespace
}  // namespace mplan
