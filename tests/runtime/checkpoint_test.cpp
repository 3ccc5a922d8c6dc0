// Checkpoints (runtime/checkpoint.h): a folder per step and an atomically
// swapped `latest`; nothing that is not a checkpoint folder is ever written
// into or deleted; an interrupted save leaves the previous checkpoint loadable.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "runtime/checkpoint.h"

namespace mplan::rt {
namespace {

namespace fs = std::filesystem;

class Checkpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("mplan-checkpoint-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Saves tensor "w" = {value, value + 1} at `step` into `path`.
  bool save(const std::string& path, int64_t step, float value, std::string* error, uint64_t seed = 1) {
    const float data[2] = {value, value + 1};
    return checkpoint_save(path, CheckpointMeta{step, seed, "m", "0123", std::nullopt}, {{"w", {2}, data}}, error);
  }
  float load_w(const std::string& path, LoadedCheckpoint* loaded) {
    std::string error;
    EXPECT_TRUE(checkpoint_load(path, {"w"}, loaded, &error)) << error;
    auto it = loaded->tensors.find("w");
    return it == loaded->tensors.end() ? -1.0f : it->second.f32()[0];
  }

  fs::path dir_;
};

TEST_F(Checkpoint, SaveThenLoadGivesTheTensorsTheStepAndTheSeed) {
  std::string error;
  const std::string path = (dir_ / "ckpt").string();
  ASSERT_TRUE(save(path, 10, 3.5f, &error, /*seed=*/42)) << error;
  EXPECT_TRUE(fs::is_regular_file(dir_ / "ckpt" / "MPLAN_CHECKPOINT"));
  EXPECT_TRUE(fs::is_symlink(dir_ / "ckpt" / "latest"));
  LoadedCheckpoint loaded;
  EXPECT_EQ(load_w(path, &loaded), 3.5f);
  EXPECT_TRUE(loaded.has_meta);
  EXPECT_FALSE(loaded.recovered);
  EXPECT_EQ(loaded.meta.step, 10);
  EXPECT_EQ(loaded.meta.seed, 42u);
  // A newer save replaces it and removes the older step folder only then.
  ASSERT_TRUE(save(path, 20, 7.0f, &error)) << error;
  EXPECT_EQ(load_w(path, &loaded), 7.0f);
  EXPECT_EQ(loaded.meta.step, 20);
  EXPECT_FALSE(fs::exists(dir_ / "ckpt" / "step-000000010"));
}

TEST_F(Checkpoint, ATrailingSlashIsTheSameFolder) {
  std::string error;
  ASSERT_TRUE(save((dir_ / "ckpt").string() + "/", 1, 1.0f, &error)) << error;
  EXPECT_TRUE(fs::is_symlink(dir_ / "ckpt" / "latest"));
  EXPECT_FALSE(fs::exists(dir_ / "ckpt" / ".tmp"));
  LoadedCheckpoint loaded;
  EXPECT_EQ(load_w((dir_ / "ckpt").string() + "//", &loaded), 1.0f);
}

TEST_F(Checkpoint, RefusesAPathThatIsNotACheckpointFolder) {
  std::string error;
  // A plain file stays a plain file.
  { std::ofstream(dir_ / "notes.txt") << "keep me"; }
  EXPECT_FALSE(save((dir_ / "notes.txt").string(), 1, 1.0f, &error));
  EXPECT_NE(error.find("is not a checkpoint folder written by train"), std::string::npos) << error;
  std::ifstream notes(dir_ / "notes.txt");
  std::string text;
  std::getline(notes, text);
  EXPECT_EQ(text, "keep me");
  // A folder of someone's files is left alone.
  fs::create_directories(dir_ / "photos");
  { std::ofstream(dir_ / "photos" / "a.jpg") << "x"; }
  EXPECT_FALSE(save((dir_ / "photos").string(), 1, 1.0f, &error));
  EXPECT_TRUE(fs::exists(dir_ / "photos" / "a.jpg"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ / "photos"), fs::directory_iterator()), 1);
  // A device node is never replaced.
  EXPECT_FALSE(save("/dev/null", 1, 1.0f, &error));
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
}

// A save killed before its switch (a .partial folder, `latest` still on the
// old step) loads the old checkpoint; a `latest` that is missing or dangling
// is recovered from the newest complete step folder.
TEST_F(Checkpoint, AnInterruptedSaveLeavesTheLastGoodCheckpoint) {
  std::string error;
  const std::string path = (dir_ / "ckpt").string();
  ASSERT_TRUE(save(path, 5, 5.0f, &error)) << error;
  // The state after a kill mid-way through saving step 6.
  fs::create_directories(dir_ / "ckpt" / "step-000000006.partial");
  { std::ofstream(dir_ / "ckpt" / "step-000000006.partial" / "w.npy") << "half a fi"; }
  LoadedCheckpoint loaded;
  EXPECT_EQ(load_w(path, &loaded), 5.0f);
  EXPECT_FALSE(loaded.recovered);
  // Killed after the rename, before `latest` moved: `latest` names step 5, still good.
  ASSERT_TRUE(save(path, 6, 6.0f, &error)) << error;
  fs::remove(dir_ / "ckpt" / "latest");
  EXPECT_EQ(load_w(path, &loaded), 6.0f);
  EXPECT_TRUE(loaded.recovered);
  // A dangling `latest` (its folder removed by hand) is recovered too.
  ASSERT_TRUE(save(path, 7, 7.0f, &error)) << error;
  fs::create_directory_symlink("step-000000099", dir_ / "ckpt" / "latest.new");
  fs::rename(dir_ / "ckpt" / "latest.new", dir_ / "ckpt" / "latest");
  EXPECT_EQ(load_w(path, &loaded), 7.0f);
  EXPECT_TRUE(loaded.recovered);
  // The next save cleans the leftovers and works.
  ASSERT_TRUE(save(path, 8, 8.0f, &error)) << error;
  EXPECT_FALSE(fs::exists(dir_ / "ckpt" / "step-000000006.partial"));
  EXPECT_EQ(load_w(path, &loaded), 8.0f);
}

// Several complete step folders and no `latest` (an older step not yet
// removed when a save was cut short, and `latest` lost by other means): the
// recovery takes the newest step, by number (9 before 10), never an older one.
TEST_F(Checkpoint, RecoveryTakesTheNewestCompleteStep) {
  std::string error;
  const std::string path = (dir_ / "ckpt").string();
  ASSERT_TRUE(save(path, 9, 9.0f, &error)) << error;
  fs::copy(dir_ / "ckpt" / "step-000000009", dir_ / "step-9-copy", fs::copy_options::recursive);
  ASSERT_TRUE(save(path, 10, 10.0f, &error)) << error;
  ASSERT_FALSE(fs::exists(dir_ / "ckpt" / "step-000000009"));
  fs::rename(dir_ / "step-9-copy", dir_ / "ckpt" / "step-000000009");
  fs::remove(dir_ / "ckpt" / "latest");
  LoadedCheckpoint loaded;
  EXPECT_EQ(load_w(path, &loaded), 10.0f);
  EXPECT_TRUE(loaded.recovered);
  EXPECT_EQ(loaded.meta.step, 10);
}

// A save that fails writing (a tensor name that cannot be a file) leaves the
// previous checkpoint as `latest`, intact.
TEST_F(Checkpoint, AFailedSaveKeepsThePreviousCheckpoint) {
  std::string error;
  const std::string path = (dir_ / "ckpt").string();
  ASSERT_TRUE(save(path, 1, 1.0f, &error)) << error;
  const float data[2] = {9, 9};
  EXPECT_FALSE(checkpoint_save(path, CheckpointMeta{2, 1, "m", "0123", std::nullopt}, {{"no/such/folder/w", {2}, data}}, &error));
  LoadedCheckpoint loaded;
  EXPECT_EQ(load_w(path, &loaded), 1.0f);
  EXPECT_EQ(loaded.meta.step, 1);
}

TEST_F(Checkpoint, APlainFolderOfNpyFilesLoadsWithoutMeta) {
  std::string error;
  const float data[2] = {4, 5};
  ASSERT_TRUE(npy_write_f32((dir_ / "w.npy").string(), data, {2}, &error)) << error;
  LoadedCheckpoint loaded;
  EXPECT_EQ(load_w(dir_.string(), &loaded), 4.0f);
  EXPECT_FALSE(loaded.has_meta);
  EXPECT_FALSE(checkpoint_load((dir_ / "missing").string(), {"w"}, &loaded, &error));
  EXPECT_NE(error.find("no such folder"), std::string::npos) << error;
}

// fp16's loss scale and its counter go with the weights, to the bit.
TEST_F(Checkpoint, TheLossScaleStateRoundTrips) {
  std::string error;
  const std::string path = (dir_ / "ckpt").string();
  const float data[2] = {1, 2};
  CheckpointMeta meta{3, 1, "m", "0123", LossScale{1.25000002e+29f, 17}};
  ASSERT_TRUE(checkpoint_save(path, meta, {{"w", {2}, data}}, &error)) << error;
  LoadedCheckpoint loaded;
  load_w(path, &loaded);
  ASSERT_TRUE(loaded.meta.loss_scale.has_value());
  EXPECT_EQ(loaded.meta.loss_scale->scale, 1.25000002e+29f);
  EXPECT_EQ(loaded.meta.loss_scale->growth_tracker, 17);
  // Without one (every program but fp16's), none is written or read.
  ASSERT_TRUE(save(path, 4, 1.0f, &error)) << error;
  load_w(path, &loaded);
  EXPECT_FALSE(loaded.meta.loss_scale.has_value());
}

TEST_F(Checkpoint, ABadLossScaleIsRefusedByName) {
  std::string error;
  const std::string path = (dir_ / "ckpt").string();
  ASSERT_TRUE(save(path, 4, 1.0f, &error)) << error;
  const fs::path meta = fs::canonical(dir_ / "ckpt" / "latest") / "meta.txt";
  const std::string good = "step 4\nseed 1\nmodel m\ndigest 0123\n";
  for (const auto& [extra, message] : std::vector<std::pair<std::string, std::string>>{
           {"loss_scale 0\nloss_scale_growth_tracker 0\n", "loss_scale must be a finite number > 0, got '0'"},
           {"loss_scale inf\nloss_scale_growth_tracker 0\n", "loss_scale must be a finite number > 0, got 'inf'"},
           {"loss_scale 1024\nloss_scale_growth_tracker -1\n",
            "loss_scale_growth_tracker must be an integer >= 0, got '-1'"},
           {"loss_scale 1024\n", "has loss_scale without loss_scale_growth_tracker"},
           {"loss_scale_growth_tracker 3\n", "has loss_scale_growth_tracker without loss_scale"}}) {
    std::ofstream(meta) << good << extra;
    LoadedCheckpoint loaded;
    EXPECT_FALSE(checkpoint_load(path, {"w"}, &loaded, &error)) << extra;
    EXPECT_NE(error.find(message), std::string::npos) << error;
  }
}

}  // namespace
}  // namespace mplan::rt
