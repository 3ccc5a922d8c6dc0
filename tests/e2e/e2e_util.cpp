#include "tests/e2e/e2e_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "driver/evaluation_plan.h"
#include "driver/planned_model.h"
#include "planner/deciders/deciders.h"
#include "planner/sim/iteration_sim.h"
#include "frontend/parse.h"
#include "planner/sub_batch.h"
#include "profiler/analytic_model.h"
#include "profiler/device.h"
#include "runtime/npy.h"
#include "tdfg/compact_backward.h"
#include "tdfg/tdfg.h"

namespace mplan::e2e {
namespace fs = std::filesystem;

const char* budget_name(Budget budget) {
  switch (budget) {
    case Budget::unlimited: return "unlimited";
    case Budget::sub_batch: return "sub_batch";
    case Budget::offload: return "offload";
  }
  return "?";
}

std::string source_dir() { return MPLAN_SOURCE_DIR; }

namespace {
// ctest runs each test in its own process, and the tests of one suite share
// their program's folder (SetUpTestSuite in each process): writing and
// building it are serialised by a lock file beside the folder, or one process
// runs `train` while another relinks it (CI: "Permission denied").
class FolderLock {
 public:
  explicit FolderLock(const std::string& folder) {
    const std::string path = fs::path(folder).lexically_normal().string() + ".lock";
    fs::create_directories(fs::path(path).parent_path());
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~FolderLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  int fd_ = -1;
};
}  // namespace

std::string work_dir(const std::string& tag) {
  fs::path dir = fs::path(MPLAN_BINARY_DIR) / "e2e-work" / tag;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

Compiled compile_model(const std::string& model_path, Budget budget, const std::string& tag, codegen::Target target) {
  std::string path = fs::path(model_path).is_absolute() ? model_path : source_dir() + "/" + model_path;
  Result<Model> model = load_model(path);
  if (!model) return Compiled{{}, "", model.error().to_string()};
  return compile_model(*model, budget, tag, target);
}

Compiled compile_model(const Model& model, Budget budget, const std::string& tag, codegen::Target target,
                       bool sixteen_bit_kernels_on_cpu) {
  Result<Device> device = load_device("k40");
  if (!device) return Compiled{{}, "", device.error().to_string()};
  const AnalyticCostModel cost(*device);
  // The offload budget is the least room the tasks need one by one, which the
  // model's memory-saving variants would change: that scenario plans the
  // model with them (where any frees a tensor), so that its blocks are
  // offloaded with the variants' records among them.
  const Model with_variants = with_compact_backward(model, compact_backward_layers(model));
  const Model& budgeted = budget == Budget::offload ? with_variants : model;
  const Tdfg tdfg = build_tdfg(budgeted);
  PlanOptions options;
  const int64_t resident = resident_region_bytes(tdfg);
  const int64_t batch = model.batch;
  switch (budget) {
    case Budget::unlimited: options.budget_bytes = int64_t{1} << 30; break;
    case Budget::sub_batch:
      options.budget_bytes =
          resident + 2 * max_task_arena_bytes(tdfg, cost, std::max<int64_t>(1, batch / 4), /*fastest=*/false) + 4096;
      break;
    case Budget::offload:
      options.sub_batch = batch;
      options.budget_bytes = resident + max_task_arena_bytes(tdfg, cost, batch, /*fastest=*/false) + 4096;
      break;
  }
  // As `mplan compile` plans: the model with and without its memory-saving
  // variants, the faster kept (driver/planned_model.h).
  if (budget == Budget::offload) {
    Result<Plan> plan = plan_iteration(tdfg, cost, options).take_plan();
    if (!plan) return Compiled{{}, "", "make_plan: " + plan.error().to_string()};
    plan->compact_backward_layers = compact_backward_names(budgeted);
    return write_plan_program(budgeted, std::move(*plan), tag, target, {}, sixteen_bit_kernels_on_cpu);
  }
  driver::PlannedModel planned = driver::plan_model(
      model, true, options, [&](const Tdfg& candidate) { return plan_iteration(candidate, cost, options); });
  Result<Plan> plan = std::move(planned.planned).take_plan();
  if (!plan) return Compiled{{}, "", "make_plan: " + plan.error().to_string()};
  plan->compact_backward_layers = planned.compact_layers;
  plan->weight_copies_where_used = planned.copies_where_used;
  return write_plan_program(*planned.model, std::move(*plan), tag, target, {}, sixteen_bit_kernels_on_cpu);
}

std::map<std::string, std::vector<float>> build_and_train(const Compiled& compiled, int steps, int seed) {
  EXPECT_EQ(compiled.error, "");
  if (!compiled.error.empty()) return {};
  const std::string build_error = build_program(compiled.dir);
  EXPECT_EQ(build_error, "");
  if (!build_error.empty()) return {};
  const RunResult run = run_program(compiled.dir, fmt::format("--steps {} --seed {} --save {}/weights", steps, seed,
                                                              compiled.dir));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find(fmt::format("step {}: loss", steps)), std::string::npos) << run.output;
  if (run.exit_code != 0) return {};
  return read_weights(compiled.dir + "/weights");
}

namespace {

// mplan's decider, and every droppable block dropped after its last forward use.
class DropEverything final : public Decider {
 public:
  DropEverything() : inner_(make_modnn_decider(ModnnRules{})) {}
  bool may_drop(const IterationSim&, BlockId) override { return true; }
  std::optional<int64_t> make_room(IterationSim& sim, const RoomRequest& r) override {
    return inner_->make_room(sim, r);
  }
  size_t choose_option(IterationSim& sim, int32_t r, int32_t k, const std::vector<TaskOption>& o) override {
    return inner_->choose_option(sim, r, k, o);
  }
  bool defragment_on_failure() const override { return true; }
  void after_task(IterationSim& sim, int32_t r, int32_t k) override {
    const Tdfg& tdfg = sim.tdfg();
    if (tdfg.tasks[sim.task_at(k)].kind != TaskKind::FP) return;
    for (const std::vector<BlockId>* list : {&sim.inputs_at(k), &sim.outputs_at(k)}) {
      for (BlockId b : *list) {
        const int32_t i = sim.instance(r, b);
        if (!sim.droppable(i)) continue;
        const std::vector<int32_t>& u = sim.uses(b);
        auto next = std::upper_bound(u.begin(), u.end(), k);
        if (next != u.end() && tdfg.tasks[sim.task_at(*next)].kind != TaskKind::FP) sim.drop(i);
      }
    }
  }

 private:
  std::unique_ptr<Decider> inner_;
};

}  // namespace

PlanResult drop_everything_plan(const Model& model, const CostModel& cost, int64_t arena_bytes) {
  DropEverything decider;
  return one_round_plan(model, cost, decider, arena_bytes);
}

PlanResult one_round_plan(const Model& model, const CostModel& cost, Decider& decider, int64_t arena_bytes) {
  const Tdfg tdfg = build_tdfg(model);
  SimOptions o;
  o.sub_batches = {model.batch};  // one round: full-batch statistics
  o.arena_bytes = arena_bytes;
  PlanResult sim = simulate_iteration(tdfg, cost, o, decider);
  if (!sim.feasible) return sim;
  Plan& plan = sim.plan;
  plan.model_name = model.name;
  plan.model_digest = model_digest(model);
  plan.device = cost.describe();
  plan.batch = model.batch;
  plan.resident_bytes = tdfg.resident_bytes();
  plan.budget_bytes = plan.resident_region_bytes + plan.arena_bytes;
  return sim;
}

Compiled write_plan_program(const Model& model, Plan plan, const std::string& tag, codegen::Target target,
                            std::vector<Plan> rank_plans, bool sixteen_bit_kernels_on_cpu) {
  Compiled out;
  const Tdfg tdfg = build_tdfg(model);
  out.plan = std::move(plan);
  out.plan.task_names.clear();
  out.plan.block_names.clear();
  for (const Task& t : tdfg.tasks) out.plan.task_names.push_back(t.name);
  for (const Block& b : tdfg.blocks) out.plan.block_names.push_back(b.name);
  std::vector<const Plan*> others;
  for (Plan& other : rank_plans) {
    other.task_names = out.plan.task_names;
    other.block_names = out.plan.block_names;
    others.push_back(&other);
  }
  codegen::CodegenOptions cg;
  cg.model_file = model.source_file;
  cg.target = target;
  cg.sixteen_bit_kernels_on_cpu = sixteen_bit_kernels_on_cpu;
  // The evaluation pass beside it, as `mplan compile` plans it (driver/evaluation_plan.h).
  Result<Device> device = load_device("k40");
  if (!device) return Compiled{out.plan, "", device.error().to_string()};
  const AnalyticCostModel cost(*device);
  Result<driver::EvaluationPlan> evaluation = driver::plan_evaluation(model, cost, out.plan);
  if (!evaluation) return Compiled{out.plan, "", "plan_evaluation: " + evaluation.error().to_string()};
  const codegen::EvaluationSchedule schedule{&evaluation->tdfg, &evaluation->planned.plan};
  Result<codegen::GeneratedProgram> program = codegen::emit_program(model, tdfg, out.plan, cg, &schedule, others);
  if (!program) return Compiled{out.plan, "", "emit_program: " + program.error().to_string()};
  // The folder is kept between runs: files are rewritten only when their text
  // changed, so an unchanged program is not rebuilt (cmake --build is incremental).
  out.dir = (fs::path(MPLAN_BINARY_DIR) / "e2e-work" / tag).string();
  const FolderLock lock(out.dir);
  fs::create_directories(out.dir);
  codegen::GeneratedProgram changed;
  for (const codegen::GeneratedFile& file : program->files) {
    std::ifstream in(out.dir + "/" + file.path, std::ios::binary);
    std::string old((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (old != file.text) changed.files.push_back(file);
  }
  Status written = codegen::write_program(changed, out.dir);
  if (!written) out.error = written.error().to_string();
  return out;
}

RunResult run_command(const std::string& command) {
  RunResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return result;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.output.append(buffer.data(), n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

static std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool gpu_present() {
  std::error_code ec;
  const std::filesystem::path gpus = "/proc/driver/nvidia/gpus";
  return std::filesystem::is_directory(gpus, ec) && !std::filesystem::is_empty(gpus, ec);
}

std::string build_program(const std::string& dir, const std::string& runtime_library) {
  const FolderLock lock(dir);
  RunResult configure = run_command("cmake -S " + quoted(dir) + " -B " + quoted(dir + "/build") +
                                    " -DCMAKE_BUILD_TYPE=Release -DMPLAN_RUNTIME_LIBRARY=" +
                                    quoted(runtime_library.empty() ? MPLAN_RUNTIME_LIBRARY_PATH : runtime_library));
  if (configure.exit_code != 0) return "cmake configure failed:\n" + configure.output;
  RunResult build = run_command("cmake --build " + quoted(dir + "/build") + " -j2");
  if (build.exit_code != 0) {
    std::string log = build.output;
    return "cmake build failed:\n" + (log.size() > 6000 ? log.substr(log.size() - 6000) : log);
  }
  return "";
}

RunResult run_program(const std::string& dir, const std::string& args) {
  return run_command(quoted(dir + "/build/train") + " " + args);
}

std::map<std::string, std::vector<float>> read_weights(const std::string& path) {
  // A checkpoint folder holds its newest checkpoint in latest/ (runtime/checkpoint.h).
  const std::string dir = fs::exists(fs::path(path) / "latest") ? path + "/latest" : path;
  std::map<std::string, std::vector<float>> weights;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".npy") continue;
    rt::NpyArray array;
    std::string error;
    if (!rt::npy_read(entry.path().string(), &array, &error)) {
      ADD_FAILURE() << error;
      continue;
    }
    if (array.type != rt::NpyType::f32) continue;
    weights[entry.path().stem().string()] = std::vector<float>(array.f32(), array.f32() + array.elements());
  }
  return weights;
}

double max_relative_difference(const std::map<std::string, std::vector<float>>& a,
                               const std::map<std::string, std::vector<float>>& b, std::string* worst) {
  double result = 0;
  if (a.size() != b.size()) {
    *worst = "different tensor sets";
    return INFINITY;
  }
  for (const auto& [name, values] : b) {
    auto it = a.find(name);
    if (it == a.end() || it->second.size() != values.size()) {
      *worst = name + " missing or of another size";
      return INFINITY;
    }
    double max_abs = 0, max_diff = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      max_abs = std::max(max_abs, static_cast<double>(std::fabs(values[i])));
      double d = std::fabs(static_cast<double>(it->second[i]) - values[i]);
      if (std::isnan(d)) d = INFINITY;
      max_diff = std::max(max_diff, d);
    }
    double rel = max_diff / std::max(max_abs, 1e-12);
    if (rel > result || (std::isinf(rel) && worst->empty())) {
      result = rel;
      *worst = name + " (max diff " + std::to_string(max_diff) + ", max |value| " + std::to_string(max_abs) + ")";
    }
  }
  return result;
}

bool have_torch() {
  static const bool have = run_command("/usr/bin/python3 -c 'import torch, numpy, yaml'").exit_code == 0;
  return have;
}

}  // namespace mplan::e2e
