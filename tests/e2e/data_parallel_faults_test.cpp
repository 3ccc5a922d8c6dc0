// Faults of a program of several ranks (docs/generated-program.md, "Several
// ranks"): a rank killed or hanging mid-run, a rank running another plan, a
// rank that cannot read its data, the wrong number of ranks, and a plain
// launch without mpirun. Each ends every rank with an error that names the
// rank at fault, within a bound, and leaves the last checkpoint whole. Rank 1
// is started through a shell that writes its pid (mpirun's MPMD syntax,
// `-np 1 train : -np 1 sh -c 'echo $$ > pid; exec train'`), so that the test
// can signal it.

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include "frontend/parse.h"
#include "runtime/npy.h"
#include "tests/e2e/data_parallel_util.h"

namespace mplan::e2e {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char* kModel = "examples/models/every_op_nobn.yaml";

// The 2-rank program of every_op_nobn (one round per rank), built once.
std::string two_rank_program() {
  Compiled c = compile_ranks(kModel, 2, RankScheme::rounds, "dp-every_op_nobn-2-rounds");
  EXPECT_EQ(c.error, "");
  const std::string error = build_ranks_program(c.dir);
  EXPECT_EQ(error, "");
  return error.empty() ? c.dir + "/build/train" : "";
}

// A shell command in the background: its pid, its output in `log`.
pid_t start(const std::string& command, const std::string& log) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const std::string line = command + " > " + log + " 2>&1";
    ::execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// Waits up to `seconds` for the process; its exit status, or -1 (then killed) past the bound.
int wait_for(pid_t pid, double seconds) {
  const auto started = Clock::now();
  for (;;) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    if (std::chrono::duration<double>(Clock::now() - started).count() > seconds) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

bool wait_until(const std::function<bool()>& ready, double seconds) {
  const auto started = Clock::now();
  while (!ready()) {
    if (std::chrono::duration<double>(Clock::now() - started).count() > seconds) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Rank 0 as it is, rank 1 through a shell that writes its pid to `pid_file`.
std::string two_ranks_with_pid(const std::string& train, const std::string& args, const std::string& pid_file) {
  return mpirun(1) + " " + train + " " + args + " : -np 1 sh -c 'echo $$ > " + pid_file + "; exec " + train + " " +
         args + "'";
}

// The checkpoint folder's latest step folder is whole (meta.txt is written
// last) and a run of the 2-rank program resumes from it.
void expect_checkpoint_resumes(const std::string& train, const std::string& dir) {
  ASSERT_TRUE(fs::exists(dir + "/latest/meta.txt")) << dir;
  const RunResult resumed = run_command(mpirun(2) + " " + train + " --steps 1 --load " + dir);
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
}

// A signal to rank 1 in the middle of a run that saves every 10 steps.
struct Interrupted {
  std::string output;
  int exit_code = 0;
  double seconds = 0;  // from the signal to mpirun's end
};
Interrupted signal_rank_1(const std::string& train, const std::string& work, int signal_number,
                          const std::string& extra) {
  Interrupted result;
  const pid_t mpirun_pid = start(two_ranks_with_pid(train, "--steps 1000000 --checkpoint-every 10 --save " + work +
                                                              "/ck" + extra, work + "/pid"),
                                 work + "/out");
  // Mid-run: after a checkpoint, at a step.
  EXPECT_TRUE(wait_until([&] { return fs::exists(work + "/ck/latest/meta.txt") && fs::exists(work + "/pid"); }, 60))
      << read_file(work + "/out");
  const pid_t rank_1 = std::stoi(read_file(work + "/pid"));
  const auto signalled = Clock::now();
  ::kill(rank_1, signal_number);
  result.exit_code = wait_for(mpirun_pid, 60);
  result.seconds = std::chrono::duration<double>(Clock::now() - signalled).count();
  if (signal_number == SIGSTOP) ::kill(rank_1, SIGKILL);
  result.output = read_file(work + "/out");
  return result;
}

#define SKIP_WITHOUT_MPIRUN() \
  if (!have_mpirun()) GTEST_SKIP() << "no mpirun on the PATH (openmpi-bin): programs of several ranks are not run"

TEST(DataParallelFaults, AKilledRankEndsEveryRankAndLeavesTheLastCheckpoint) {
  SKIP_WITHOUT_MPIRUN();
  const std::string train = two_rank_program();
  ASSERT_NE(train, "");
  const std::string work = work_dir("dp-fault-kill");
  const Interrupted run = signal_rank_1(train, work, SIGKILL, "");
  std::printf("rank 1 killed: mpirun ended %.2f s later with %d\n", run.seconds, run.exit_code);
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_GE(run.exit_code, 0) << "mpirun still ran 60 s after the kill:\n" << run.output;
  EXPECT_LT(run.seconds, 30) << run.output;
  // mpirun names the killed rank; rank 0 says why it ends.
  EXPECT_NE(run.output.find("rank 1"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("train: rank 0: error:"), std::string::npos) << run.output;
  expect_checkpoint_resumes(train, work + "/ck");
}

TEST(DataParallelFaults, AHungRankTimesOutOnEveryRankAndLeavesTheLastCheckpoint) {
  SKIP_WITHOUT_MPIRUN();
  const std::string train = two_rank_program();
  ASSERT_NE(train, "");
  const std::string work = work_dir("dp-fault-hang");
  // Rank 1 stopped (SIGSTOP): alive, silent; rank 0's watchdog ends the run.
  const Interrupted run = signal_rank_1(train, work, SIGSTOP, " --collective-timeout 2");
  std::printf("rank 1 stopped: mpirun ended %.2f s later with %d\n", run.seconds, run.exit_code);
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_LT(run.seconds, 30) << run.output;
  EXPECT_NE(run.output.find("train: rank 0: error: "), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("timed out after 2 s waiting for rank 1"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("train: rank 1: error: ended by the launcher"), std::string::npos) << run.output;
  expect_checkpoint_resumes(train, work + "/ck");
}

TEST(DataParallelFaults, ARankRunningAnotherPlanEndsEveryRank) {
  SKIP_WITHOUT_MPIRUN();
  const std::string train = two_rank_program();
  ASSERT_NE(train, "");
  // The same model, its ranks planned in sub-batches: another schedule.
  Compiled other = compile_ranks(kModel, 2, RankScheme::sub_batches, "dp-every_op_nobn-2-sub_batches");
  ASSERT_EQ(other.error, "");
  ASSERT_EQ(build_ranks_program(other.dir), "");
  const auto started = Clock::now();
  const RunResult run =
      run_command(mpirun(1) + " " + train + " --steps 2 : -np 1 " + other.dir + "/build/train --steps 2");
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - started).count(), 30);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  for (const char* rank : {"train: rank 0: error: rank 1 runs another plan", "train: rank 1: error: rank 1 runs"})
    EXPECT_NE(run.output.find(rank), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("step 1:"), std::string::npos) << run.output;
}

TEST(DataParallelFaults, ARankThatCannotReadItsDataEndsEveryRank) {
  SKIP_WITHOUT_MPIRUN();
  const std::string train = two_rank_program();
  ASSERT_NE(train, "");
  const std::string work = work_dir("dp-fault-data");
  // Rank 0 reads a data set of 16 samples; rank 1's folder does not exist.
  fs::create_directories(work + "/data");
  std::vector<float> images(16 * 3 * 16 * 16, 0.25f);
  std::vector<int32_t> labels(16, 3);
  std::string error;
  ASSERT_TRUE(rt::npy_write_f32(work + "/data/images.npy", images.data(), {16, 3, 16, 16}, &error)) << error;
  ASSERT_TRUE(rt::npy_write_i32(work + "/data/labels.npy", labels.data(), {16}, &error)) << error;
  const RunResult make = run_command(mpirun(1) + " " + train + " --steps 1 --data " + work + "/data : -np 1 " + train +
                                     " --steps 1 --data " + work + "/missing");
  EXPECT_EQ(make.exit_code, 2) << make.output;
  for (const char* line :
       {"train: rank 0: error: rank 1 cannot start: --data: ", "train: rank 1: error: rank 1 cannot start: --data: "})
    EXPECT_NE(make.output.find(line), std::string::npos) << line << "\n" << make.output;
  EXPECT_EQ(make.output.find("rank 0 cannot start"), std::string::npos) << make.output;
  EXPECT_NE(make.output.find(work + "/missing"), std::string::npos) << make.output;
}

TEST(DataParallelFaults, TheWrongNumberOfRanksAndAPlainLaunchAreRefused) {
  SKIP_WITHOUT_MPIRUN();
  const std::string train = two_rank_program();
  ASSERT_NE(train, "");
  const RunResult three = run_command(mpirun(3) + " " + train + " --steps 1");
  EXPECT_EQ(three.exit_code, 2) << three.output;
  for (int r = 0; r < 3; ++r)
    EXPECT_NE(three.output.find("train: rank " + std::to_string(r) +
                                ": error: this program's plan is for 2 ranks, but mpirun started 3"),
              std::string::npos)
        << three.output;
  const RunResult plain = run_command(train + " --steps 1");
  EXPECT_EQ(plain.exit_code, 2) << plain.output;
  EXPECT_NE(plain.output.find("was not started by an MPI launcher; start it with mpirun -np"), std::string::npos)
      << plain.output;
  // --help needs no launcher; --collective-timeout is for several ranks only.
  EXPECT_EQ(run_command(train + " --help").exit_code, 0);
  Compiled single = compile_single_process(kModel, 4, "dp-single-every_op_nobn-4");
  ASSERT_EQ(single.error, "");
  ASSERT_EQ(build_program(single.dir), "");
  const RunResult timeout = run_program(single.dir, "--steps 1 --collective-timeout 5");
  EXPECT_EQ(timeout.exit_code, 2) << timeout.output;
  EXPECT_NE(timeout.output.find("--collective-timeout: only a program of several ranks"), std::string::npos)
      << timeout.output;
}

// Codegen refuses a plan whose ranks run a plan it was not given, and a
// bucket read before the last round's backward pass has finished it.
TEST(DataParallelCodegen, MissingRankPlansAndEarlyBucketsAreRefused) {
  Result<Model> model = load_model(source_dir() + "/" + kModel);
  ASSERT_TRUE(model.ok());
  Compiled c = compile_ranks(kModel, 2, RankScheme::rounds, "dp-codegen-plan-of-rank");
  ASSERT_EQ(c.error, "");
  Plan plan = c.plan;
  plan.data_parallel.plan_of_rank = {0, 1};
  const Compiled refused = write_plan_program(*model, plan, "dp-codegen-plan-of-rank-refused");
  EXPECT_NE(refused.error.find("rank 1 runs rank 1's plan (plan-rank-1.json), which was not given"),
            std::string::npos)
      << refused.error;
  // A rank's plan of another memory layout.
  Plan other = c.plan;
  other.data_parallel.rank = 1;
  other.arena_bytes += 256;
  const Compiled layout = write_plan_program(*model, plan, "dp-codegen-plan-of-rank-layout", codegen::Target::cpu,
                                             {other});
  EXPECT_NE(layout.error.find("not of the same ranks and memory layout"), std::string::npos) << layout.error;
  // A bucket whose ready step is not of the last round.
  plan = c.plan;
  plan.data_parallel.buckets.front().ready_after_step = 0;
  const Compiled early = write_plan_program(*model, plan, "dp-codegen-early-bucket");
  EXPECT_NE(early.error.find("is not a compute step of the last round"), std::string::npos) << early.error;
}

}  // namespace
}  // namespace mplan::e2e
