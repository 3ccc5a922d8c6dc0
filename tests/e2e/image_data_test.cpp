// Image files as the program's data (runtime/image_folder.h,
// docs/generated-program.md, "Data"): an ImageFolder of JPEGs and PNGs
// (tests/e2e/image_folder_data.py: RGB, grey, alpha and palette files,
// larger and smaller than the input) trains the weights that torchvision's
// ImageFolder with Resize, CenterCrop and ToTensor gives as float32 arrays,
// bit for bit; the shards `mplan shard` makes of it train the same; a
// corrupt file stops the run naming it, or with --skip-corrupt is replaced
// and counted; random-resized crops train, differently; bad folders are
// refused by name.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/e2e/e2e_util.h"

namespace mplan::e2e {
namespace {

namespace fs = std::filesystem;

class ImageData : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    compiled_ = new Compiled(compile_model(source_dir() + "/tests/e2e/cifar_tiny.yaml", Budget::unlimited,
                                           "image-data-build"));
    ASSERT_EQ(compiled_->error, "");
    ASSERT_EQ(build_program(compiled_->dir), "");
  }
  static void TearDownTestSuite() { delete compiled_; }

  // A fresh folder with the images and their reference at resize `size`; "" without PIL and torchvision.
  static std::string make_images(const std::string& tag, int size) {
    const std::string dir = work_dir(tag);
    RunResult made = run_command("/usr/bin/python3 " + source_dir() + "/tests/e2e/image_folder_data.py make --out " +
                                 dir + " --size " + std::to_string(size));
    if (made.exit_code != 0) return "";
    return dir;
  }
  static RunResult train(const std::string& args) { return run_program(compiled_->dir, args); }
  static std::string mplan() { return MPLAN_EXE; }

  static Compiled* compiled_;
};
Compiled* ImageData::compiled_ = nullptr;

TEST_F(ImageData, AnImageFolderTrainsAsTorchvisionsImageFolderTensorsAndItsShardsToo) {
  for (int size : {32, 40}) {
    SCOPED_TRACE("Resize(" + std::to_string(size) + ")");
    const std::string dir = make_images("image-data-" + std::to_string(size), size);
    if (dir.empty()) GTEST_SKIP() << "/usr/bin/python3 cannot make the images with PIL and torchvision";
    const std::string resize = size == 32 ? "" : " --resize " + std::to_string(size);
    RunResult folder = train("--steps 3 --seed 2 --data " + dir + "/folder --save " + dir + "/w-folder" + resize);
    ASSERT_EQ(folder.exit_code, 0) << folder.output;
    EXPECT_NE(folder.output.find("(24 samples, image files in 3 classes, decoded to 3 channel(s), resized and "
                                 "centre-cropped)"),
              std::string::npos)
        << folder.output;
    RunResult reference = train("--steps 3 --seed 2 --data " + dir + "/reference --save " + dir + "/w-reference");
    ASSERT_EQ(reference.exit_code, 0) << reference.output;
    const auto weights = read_weights(dir + "/w-folder/latest");
    ASSERT_FALSE(weights.empty());
    EXPECT_EQ(weights, read_weights(dir + "/w-reference/latest"));

    RunResult packed = run_command(mplan() + " shard " + dir + "/folder -o " + dir + "/shards --shard-size 16KiB");
    ASSERT_EQ(packed.exit_code, 0) << packed.output;
    EXPECT_NE(packed.output.find("24 image files in 3 classes (3 other files left out)"), std::string::npos)
        << packed.output;
    EXPECT_TRUE(fs::exists(dir + "/shards/shard-00001.bin"));
    RunResult shards = train("--steps 3 --seed 2 --data " + dir + "/shards --save " + dir + "/w-shards" + resize);
    ASSERT_EQ(shards.exit_code, 0) << shards.output;
    EXPECT_NE(shards.output.find("image shards in 3 classes"), std::string::npos) << shards.output;
    EXPECT_EQ(read_weights(dir + "/w-shards/latest"), weights);
    // The folder as validation data, evaluated as the reference is.
    RunResult evaluated = train("--eval --load " + dir + "/w-folder --val " + dir + "/folder" + resize);
    RunResult evaluated_reference = train("--eval --load " + dir + "/w-folder --val " + dir + "/reference");
    ASSERT_EQ(evaluated.exit_code, 0) << evaluated.output;
    // "val: loss L top1 T% top5 F%", without the time after it.
    const auto val = [](const std::string& out) {
      const size_t at = out.find("val: ");
      return at == std::string::npos ? std::string() : out.substr(at, out.find(" (", at) - at);
    };
    EXPECT_NE(val(evaluated.output), "");
    EXPECT_EQ(val(evaluated.output), val(evaluated_reference.output));
  }
}

TEST_F(ImageData, ACorruptFileStopsTheRunByNameOrIsReplacedAndCounted) {
  const std::string dir = make_images("image-data-corrupt", 32);
  if (dir.empty()) GTEST_SKIP() << "/usr/bin/python3 cannot make the images with PIL and torchvision";
  // A JPEG cut short and a file that is no image at all.
  const std::string cut = dir + "/folder/cat/img00.jpg";
  fs::resize_file(cut, fs::file_size(cut) / 2);
  std::ofstream(dir + "/folder/dog/img07.png") << "not a png";
  RunResult stopped = train("--steps 2 --data " + dir + "/folder");
  EXPECT_EQ(stopped.exit_code, 2) << stopped.output;
  EXPECT_NE(stopped.output.find("train: error: --data: " + cut + ": JPEG: "), std::string::npos) << stopped.output;
  EXPECT_NE(stopped.output.find("--skip-corrupt replaces such samples"), std::string::npos) << stopped.output;
  RunResult skipped = train("--steps 2 --skip-corrupt --data " + dir + "/folder");
  ASSERT_EQ(skipped.exit_code, 0) << skipped.output;
  EXPECT_NE(skipped.output.find("--data: skipped 2 image file(s) that did not decode"), std::string::npos)
      << skipped.output;
  // mplan shard checks each header: the file that is no image is named, or left out and counted.
  RunResult refused = run_command(mplan() + " shard " + dir + "/folder -o " + dir + "/shards");
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.output.find(dir + "/folder/dog/img07.png: not a JPEG or PNG image"), std::string::npos)
      << refused.output;
  EXPECT_FALSE(fs::exists(dir + "/shards"));
  RunResult packed = run_command(mplan() + " shard --skip-corrupt " + dir + "/folder -o " + dir + "/shards");
  ASSERT_EQ(packed.exit_code, 0) << packed.output;
  EXPECT_NE(packed.output.find("wrote 23 samples"), std::string::npos) << packed.output;
}

TEST_F(ImageData, RandomResizedCropsTrainOtherWeightsReproducibly) {
  const std::string dir = make_images("image-data-rrc", 32);
  if (dir.empty()) GTEST_SKIP() << "/usr/bin/python3 cannot make the images with PIL and torchvision";
  const std::string flags = " --steps 3 --seed 5 --shuffle --augment rrc,flip --data " + dir + "/folder --save ";
  RunResult a = train(flags + dir + "/a");
  RunResult b = train(flags + dir + "/b");
  RunResult plain = train(" --steps 3 --seed 5 --shuffle --data " + dir + "/folder --save " + dir + "/plain");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  ASSERT_EQ(b.exit_code, 0) << b.output;
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_NE(a.output.find("random-resized crops"), std::string::npos) << a.output;
  EXPECT_EQ(read_weights(dir + "/a/latest"), read_weights(dir + "/b/latest"));
  EXPECT_NE(read_weights(dir + "/a/latest"), read_weights(dir + "/plain/latest"));
}

TEST_F(ImageData, BadFoldersAndFlagsAreRefusedByName) {
  const std::string dir = work_dir("image-data-bad");
  fs::create_directories(dir + "/empty-class/a");
  fs::create_directories(dir + "/empty-class/b");
  std::ofstream(dir + "/empty-class/a/x.png") << "x";
  fs::create_directories(dir + "/flat");
  std::ofstream(dir + "/flat/x.png") << "x";
  fs::create_directories(dir + "/many");
  for (int c = 0; c < 11; ++c) {
    fs::create_directories(dir + "/many/c" + std::to_string(c));
    std::ofstream(dir + "/many/c" + std::to_string(c) + "/x.png") << "x";
  }
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--data " + dir + "/empty-class", dir + "/empty-class/b: an empty class folder"},
      {"--data " + dir + "/flat", "nor class folders of images"},
      {"--data " + dir + "/many", dir + "/many: 11 classes (c0 ... c9), but the model has 10"},
      {"--resize 40", "--resize: applies to image files"},
      {"--skip-corrupt", "--skip-corrupt: applies to image files"},
      {"--augment rrc --data " + dir + "/empty-class/a/..", "an empty class folder"},
      {"--resize 0 --data " + dir + "/flat", "--resize: expected an integer in [1, 65536]"},
  };
  for (const auto& [flags, expect] : cases) {
    RunResult run = train(flags);
    EXPECT_EQ(run.exit_code, 2) << flags << "\n" << run.output;
    EXPECT_NE(run.output.find(expect), std::string::npos) << flags << "\n" << run.output;
  }
}

}  // namespace
}  // namespace mplan::e2e
