// The standalone kernel profiler, CPU build (mplan_kernel_profiler), as a user
// runs it: a job file in, a result file out that runtime/jobs.h parses, every
// algorithm of the backend timed for a convolution with the workspace it
// needs, jobs that cannot run reported in the file, bad input refused with a
// message and exit code 2.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "runtime/jobs.h"
#include "runtime/ops.h"

namespace mplan {
namespace {

namespace fs = std::filesystem;
using rt::Arg;

fs::path scratch_dir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("kernel_profiler_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs the profiler with `args`; its exit code, stderr in *errors.
int run_profiler(const std::string& args, const fs::path& dir, std::string* errors) {
  const fs::path err = dir / "stderr.txt";
  const std::string command = std::string("'") + MPLAN_KERNEL_PROFILER_EXE + "' " + args + " 2> '" + err.string() + "'";
  const int status = std::system(command.c_str());
  *errors = read(err);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

const rt::ConvShape kConv{2, 3, 8, 8, 4, 3, 3, 1, 1, 1, 1, 1};

rt::JobFile small_jobs() {
  rt::JobFile file;
  file.model = "kernel profiler test";
  file.warmup = 1;
  file.repeats = 3;
  file.copy_sizes = {4096, 65536};
  const rt::ConvShape& s = kConv;
  {  // a convolution: the profiler varies its algorithm and workspace
    rt::Job job;
    job.key = "conv@2";
    job.slot_bytes = {s.x_elements() * 4, s.w_elements() * 4, s.k * 4, s.y_elements() * 4, 0};
    job.slot_roles = {"input", "weight", "weight", "output", "workspace"};
    job.calls.push_back({rt::Kernel::conv_forward,
                         {Arg::of(s), Arg::of(int64_t{0}), Arg::tensor(0), Arg::tensor(1), Arg::tensor(2),
                          Arg::tensor(3), Arg::null(), Arg::of(int64_t{0})}});
    file.jobs.push_back(job);
  }
  {  // relu in place: one option, "default"
    rt::Job job;
    job.key = "relu@2";
    job.slot_bytes = {512 * 4};
    job.slot_roles = {"output"};
    job.calls.push_back({rt::Kernel::relu_forward, {Arg::tensor(0), Arg::tensor(0), Arg::of(int64_t{512})}});
    file.jobs.push_back(job);
  }
  {  // batch norm's backward data with its 2*c-float workspace slot, from saved statistics
    rt::Job job;
    job.key = "bn_bp1@2";
    const int64_t n = 2, c = 3, hw = 16;
    job.slot_bytes = {n * c * hw * 4, c * 4, c * 4, c * 4, n * c * hw * 4, n * c * hw * 4, 2 * c * 4};
    job.slot_roles = {"input", "weight", "saved", "saved", "gradient", "input_gradient", "workspace"};
    job.calls.push_back({rt::Kernel::batchnorm_backward_data,
                         {Arg::tensor(0), Arg::tensor(1), Arg::tensor(2), Arg::tensor(3), Arg::tensor(4),
                          Arg::tensor(5), Arg::tensor(6), Arg::of(n), Arg::of(c), Arg::of(hw), Arg::of_flag(false)}});
    file.jobs.push_back(job);
  }
  {  // the loss, with labels (class 0)
    rt::Job job;
    job.key = "loss@2";
    job.slot_bytes = {2 * 10 * 4, 2 * 4, 2 * 10 * 4, 4};
    job.slot_roles = {"input", "labels", "output", "loss"};
    job.calls.push_back({rt::Kernel::softmax_xent_forward,
                         {Arg::tensor(0), Arg::tensor(1), Arg::tensor(2), Arg::tensor(3), Arg::of(int64_t{2}),
                          Arg::of(int64_t{10}), Arg::of_real(0)}});
    file.jobs.push_back(job);
  }
  {  // slots too small for the call: an error in the result, not a crash
    rt::Job job;
    job.key = "too_small@2";
    job.slot_bytes = {16};
    job.slot_roles = {"output"};
    job.calls.push_back({rt::Kernel::relu_forward, {Arg::tensor(0), Arg::tensor(0), Arg::of(int64_t{512})}});
    file.jobs.push_back(job);
  }
  return file;
}

TEST(KernelProfiler, TimesAJobFileAndWritesAResultFile) {
  const fs::path dir = scratch_dir("times");
  write(dir / "jobs.json", rt::jobs_to_json(small_jobs()));
  std::string errors;
  ASSERT_EQ(run_profiler("'" + (dir / "jobs.json").string() + "' -o '" + (dir / "times.json").string() + "'", dir,
                         &errors),
            0)
      << errors;
  rt::ResultFile results;
  std::string error;
  const std::string text = read(dir / "times.json");
  ASSERT_TRUE(rt::parse_results(text, &results, &error)) << error;
  EXPECT_EQ(results.backend.backend, "cpu");
  EXPECT_GT(results.backend.memory_bytes, 0);
  EXPECT_NE(text.find("\"repeats\": 3"), std::string::npos);  // (parse_results does not read it back)
  ASSERT_EQ(results.results.size(), 5u);

  // The convolution: every CPU algorithm that runs the shape, fastest first,
  // each with the workspace the backend says it needs.
  const rt::JobResult& conv = results.results[0];
  EXPECT_EQ(conv.key, "conv@2");
  EXPECT_TRUE(conv.error.empty()) << conv.error;
  std::set<std::string> expected_names, names;
  const rt::Context inline_context;
  for (rt::ConvAlgoId algo = 0; algo < rt::conv_algorithm_count(rt::ConvDirection::forward); ++algo) {
    const int64_t bytes = rt::conv_workspace_bytes(inline_context, rt::ConvDirection::forward, kConv, algo);
    if (bytes < 0) continue;
    expected_names.insert(rt::conv_algorithm_name(rt::ConvDirection::forward, algo));
    for (const rt::JobOption& o : conv.options) {
      if (o.algorithm == rt::conv_algorithm_name(rt::ConvDirection::forward, algo)) {
        EXPECT_EQ(o.workspace_bytes, bytes) << o.algorithm;
      }
    }
  }
  for (const rt::JobOption& o : conv.options) names.insert(o.algorithm);
  EXPECT_EQ(names, expected_names);
  EXPECT_GE(names.size(), 2u);
  EXPECT_TRUE(std::is_sorted(conv.options.begin(), conv.options.end(),
                             [](const rt::JobOption& a, const rt::JobOption& b) { return a.time_ms < b.time_ms; }));

  for (size_t j : {1, 2, 3}) {
    const rt::JobResult& r = results.results[j];
    EXPECT_TRUE(r.error.empty()) << r.key << ": " << r.error;
    ASSERT_EQ(r.options.size(), 1u) << r.key;
    EXPECT_EQ(r.options[0].algorithm, "default");
  }
  EXPECT_EQ(results.results[1].options[0].workspace_bytes, 0);
  EXPECT_EQ(results.results[2].options[0].workspace_bytes, 2 * 3 * 4) << "the job's workspace slot";

  const rt::JobResult& bad = results.results[4];
  EXPECT_TRUE(bad.options.empty());
  EXPECT_NE(bad.error.find("slot 0"), std::string::npos) << bad.error;

  ASSERT_EQ(results.copies.size(), 2u);
  EXPECT_EQ(results.copies[0].bytes, 4096);
  EXPECT_EQ(results.copies[1].bytes, 65536);
  for (const rt::CopyTiming& c : results.copies) {
    EXPECT_GT(c.host_to_device_ms, 0.0);
    EXPECT_GT(c.device_to_host_ms, 0.0);
    EXPECT_GT(c.both_directions_ms, 0.0) << "an h2d and a d2h of the same size at once";
  }
  EXPECT_NE(text.find("\"both_directions_ms\": "), std::string::npos);
  EXPECT_NE(errors.find("wrote"), std::string::npos) << "progress on stderr: " << errors;
}

TEST(KernelProfiler, RefusesBadInputWithAMessage) {
  const fs::path dir = scratch_dir("bad");
  std::string errors;
  const std::string out = " -o '" + (dir / "times.json").string() + "'";

  EXPECT_EQ(run_profiler("'" + (dir / "missing.json").string() + "'" + out, dir, &errors), 2);
  EXPECT_NE(errors.find("cannot open"), std::string::npos) << errors;

  write(dir / "other.json", "{\"format\": \"mplan-kernel-times\", \"version\": 1}");
  EXPECT_EQ(run_profiler("'" + (dir / "other.json").string() + "'" + out, dir, &errors), 2);
  EXPECT_NE(errors.find("not an mplan job file"), std::string::npos) << errors;

  write(dir / "broken.json", "{\"format\": \"mplan-jobs\", ");
  EXPECT_EQ(run_profiler("'" + (dir / "broken.json").string() + "'" + out, dir, &errors), 2);
  EXPECT_NE(errors.find("line"), std::string::npos) << "the JSON error says where: " << errors;

  write(dir / "jobs.json", rt::jobs_to_json(small_jobs()));
  EXPECT_EQ(run_profiler("'" + (dir / "jobs.json").string() + "'", dir, &errors), 2);
  EXPECT_NE(errors.find("usage"), std::string::npos) << errors;
  EXPECT_EQ(run_profiler("'" + (dir / "jobs.json").string() + "' --fast" + out, dir, &errors), 2);
  EXPECT_NE(errors.find("unknown option --fast"), std::string::npos) << errors;
  EXPECT_FALSE(fs::exists(dir / "times.json")) << "no result file from bad input";
}

}  // namespace
}  // namespace mplan
