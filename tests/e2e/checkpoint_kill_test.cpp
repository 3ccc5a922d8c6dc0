// A training program killed at every point of a checkpoint save: strace's
// fault injection kills it at the Nth rename, symlink, unlink and fsync of a
// save. The folder must then load the old step or the new one, never neither,
// through `latest` alone: the switch of `latest` is one atomic rename, so no
// kill point may leave it missing or dangling (the recovery scan of step
// folders is for saves interrupted by other means). Resuming from it to step 4
// must give exactly the weights of an uninterrupted run: the runs read uint8
// data in shuffled epochs of two steps with random crops and flips, so the
// resumed steps must also draw the samples and the augmentations the
// uninterrupted run drew (runtime/dataset.h).

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "runtime/checkpoint.h"
#include "runtime/npy.h"
#include "tests/e2e/e2e_util.h"

namespace mplan::e2e {
namespace {

namespace fs = std::filesystem;

std::string quoted(const std::string& s) { return "'" + s + "'"; }

TEST(CheckpointKill, EveryKillPointLeavesALoadableCheckpointAndResumesBitIdentical) {
  if (run_command("strace -V").exit_code != 0) GTEST_SKIP() << "strace is not installed (scripts/install-deps.sh)";
  Compiled compiled = compile_model("examples/models/every_op_nobn.yaml", Budget::unlimited, "checkpoint-kill");
  ASSERT_EQ(compiled.error, "");
  ASSERT_EQ(build_program(compiled.dir), "");
  const std::string work = work_dir("checkpoint-kill-runs");
  const std::string start = work + "/start", reference = work + "/reference";
  // 20 uint8 images of the model's (3, 16, 16), stored (N, H, W, C): epochs of 2 steps of 8.
  std::vector<uint8_t> images(20 * 16 * 16 * 3);
  std::vector<int32_t> labels(20);
  for (size_t i = 0; i < images.size(); ++i) images[i] = static_cast<uint8_t>((i * 37 + i / 7) & 0xff);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int32_t>(i * 3 % 10);
  fs::create_directories(work + "/data");
  std::string error;
  ASSERT_TRUE(rt::npy_write_u8(work + "/data/images.npy", images.data(), {20, 16, 16, 3}, &error)) << error;
  ASSERT_TRUE(rt::npy_write_i32(work + "/data/labels.npy", labels.data(), {20}, &error)) << error;
  const std::string data =
      " --data " + work + "/data --shuffle --augment crop=2,flip --mean 0.5,0.5,0.5 --std 0.25,0.25,0.25";
  // The checkpoint every kill starts from (step 2), and the uninterrupted run to step 4.
  ASSERT_EQ(run_program(compiled.dir, "--steps 2 --seed 3 --save " + start + data).exit_code, 0);
  ASSERT_EQ(run_command("cp -a " + quoted(start) + " " + quoted(reference)).exit_code, 0);
  RunResult full = run_program(compiled.dir, "--load " + reference + " --steps 2 --seed 3 --save " + reference + data);
  ASSERT_EQ(full.exit_code, 0) << full.output;
  const auto expected = read_weights(reference);
  ASSERT_FALSE(expected.empty());

  std::vector<std::string> files;
  for (const auto& [name, values] : expected) files.push_back(name);
  // The sanitizer options of scripts/sanitize.sh, if any, without leak checking.
  const char* asan = std::getenv("ASAN_OPTIONS");
  const std::string asan_options_without_leaks =
      std::string("ASAN_OPTIONS=") + (asan != nullptr && *asan != 0 ? std::string(asan) + ":" : "") + "detect_leaks=0";
  int kill_points = 0;
  for (const char* call : {"rename", "symlink", "unlink", "unlinkat", "fsync"}) {
    for (int n = 1; n < 200; ++n) {
      const std::string dir = work + "/killed";
      fs::remove_all(dir);
      ASSERT_EQ(run_command("cp -a " + quoted(start) + " " + quoted(dir)).exit_code, 0);
      // Step 3, saved into the same folder, killed at the n-th `call` of the run.
      // Leak checking (of a sanitizer build, scripts/sanitize.sh) does not work under ptrace.
      RunResult killed = run_command(std::string("strace -f -o /dev/null -E ") + quoted(asan_options_without_leaks) +
                                     " -e trace=" + call + " -e inject=" + call +
                                     ":signal=KILL:when=" + std::to_string(n) + " " +
                                     quoted(compiled.dir + "/build/train") + " --load " + dir +
                                     " --steps 1 --seed 3 --save " + dir + data);
      if (killed.exit_code == 0) break;  // the run has fewer such calls: every point was tried
      ASSERT_EQ(killed.exit_code, 137) << call << " #" << n << ": " << killed.output;
      ++kill_points;
      rt::LoadedCheckpoint loaded;
      ASSERT_TRUE(rt::checkpoint_load(dir, files, &loaded, &error)) << call << " #" << n << ": " << error;
      ASSERT_TRUE(loaded.meta.step == 2 || loaded.meta.step == 3) << call << " #" << n << ": " << loaded.meta.step;
      EXPECT_FALSE(loaded.recovered) << call << " #" << n << ": `latest` was missing or dangling; the load fell back "
                                     << "to scanning the step folders";
      const std::string steps = std::to_string(4 - loaded.meta.step);
      RunResult resumed =
          run_program(compiled.dir, "--load " + dir + " --steps " + steps + " --seed 3 --save " + dir + data);
      ASSERT_EQ(resumed.exit_code, 0) << call << " #" << n << ": " << resumed.output;
      std::string worst;
      EXPECT_EQ(max_relative_difference(read_weights(dir), expected, &worst), 0.0)
          << "killed at " << call << " #" << n << " (resumed from step " << loaded.meta.step << "): " << worst;
    }
  }
  std::printf("kill points tried: %d (every rename, symlink, unlink and fsync of a save)\n", kill_points);
  EXPECT_GT(kill_points, 20);
}

}  // namespace
}  // namespace mplan::e2e
