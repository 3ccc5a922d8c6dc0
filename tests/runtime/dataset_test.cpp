// The program's data (runtime/dataset.h): uint8 and float32 images mapped
// from .npy files, scaled and normalised as torchvision's ToTensor and
// Normalize compute them, and the order the steps read them in -- in file
// order, or per epoch, shuffled from the seed alone.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "runtime/dataset.h"
#include "runtime/npy.h"

namespace mplan::rt {
namespace {

std::string fresh_dir(const std::string& name) {
  const std::string dir = (std::filesystem::temp_directory_path() / ("mplan-dataset-" + name)).string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void write_labels(const std::string& dir, const std::vector<int32_t>& labels) {
  std::string error;
  ASSERT_TRUE(npy_write_i32(dir + "/labels.npy", labels.data(), {static_cast<int64_t>(labels.size())}, &error))
      << error;
}

TEST(EpochPermutation, IsAPermutationDrawnFromTheSeedAndTheEpoch) {
  const std::vector<int64_t> a = epoch_permutation(7, 0, 1000);
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[static_cast<size_t>(i)], i);
  EXPECT_EQ(a, epoch_permutation(7, 0, 1000));
  EXPECT_NE(a, epoch_permutation(7, 1, 1000));
  EXPECT_NE(a, epoch_permutation(8, 0, 1000));
  // Shuffled, not nearly in order: fewer than 1% of the samples keep their place.
  int64_t fixed = 0;
  for (int64_t i = 0; i < 1000; ++i) fixed += a[static_cast<size_t>(i)] == i;
  EXPECT_LT(fixed, 10);
}

TEST(SampleOrder, InFileOrderStepsWrapModuloTheDataSet) {
  SampleOrder order;
  order.count = 10;
  order.batch = 4;
  EXPECT_EQ(order.index(0, 0), 0);
  EXPECT_EQ(order.index(2, 1), 9);
  EXPECT_EQ(order.index(2, 2), 0);  // 4 * 2 + 2 = 10 -> 0
  EXPECT_EQ(order.steps_per_epoch(), 0);
}

TEST(SampleOrder, EpochsLeaveOutTheLastPartialBatch) {
  SampleOrder order;
  order.count = 10;
  order.batch = 4;
  order.epochs = true;
  EXPECT_EQ(order.steps_per_epoch(), 2);
  // Epoch 1 starts at step 2 with sample 0 again; samples 8 and 9 are never read.
  EXPECT_EQ(order.index(1, 3), 7);
  EXPECT_EQ(order.index(2, 0), 0);
  EXPECT_EQ(order.index(3, 3), 7);
}

TEST(SampleOrder, ShuffledEpochsReadEachSampleAtMostOnceAndDifferPerEpoch) {
  SampleOrder order;
  order.count = 103;
  order.batch = 10;
  order.epochs = true;
  order.shuffle = true;
  order.seed = 3;
  std::vector<std::vector<int64_t>> epochs(3);
  for (uint64_t step = 0; step < 30; ++step) {
    order.prepare(step);
    for (int64_t k = 0; k < 10; ++k) epochs[step / 10].push_back(order.index(step, k));
  }
  for (const std::vector<int64_t>& e : epochs) {
    const std::set<int64_t> distinct(e.begin(), e.end());
    EXPECT_EQ(distinct.size(), 100u);
    EXPECT_LT(*distinct.rbegin(), 103);
  }
  EXPECT_NE(epochs[0], epochs[1]);
  // A resumed run (a fresh order prepared at step 14) reads what this one read.
  SampleOrder resumed = order;
  resumed.prepare(0);  // any other epoch first, then back
  resumed.prepare(14);
  for (int64_t k = 0; k < 10; ++k) EXPECT_EQ(resumed.index(14, k), epochs[1][static_cast<size_t>(40 + k)]);
}

// Two 2x2 images of 3 channels, their bytes i + 10 * sample.
std::vector<uint8_t> image_bytes(bool channels_last) {
  std::vector<uint8_t> bytes(24);
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c)
      for (int p = 0; p < 4; ++p) {
        const int at = channels_last ? n * 12 + p * 3 + c : n * 12 + c * 4 + p;
        bytes[static_cast<size_t>(at)] = static_cast<uint8_t>(n * 100 + c * 10 + p);
      }
  return bytes;
}

TEST(Dataset, Uint8ImagesInEitherLayoutAreScaledAndNormalisedPerChannel) {
  for (bool channels_last : {false, true}) {
    SCOPED_TRACE(channels_last ? "NHWC" : "NCHW");
    const std::string dir = fresh_dir(channels_last ? "nhwc" : "nchw");
    std::string error;
    const std::vector<uint8_t> bytes = image_bytes(channels_last);
    const std::vector<int64_t> shape =
        channels_last ? std::vector<int64_t>{2, 2, 2, 3} : std::vector<int64_t>{2, 3, 2, 2};
    ASSERT_TRUE(npy_write_u8(dir + "/images.npy", bytes.data(), shape, &error)) << error;
    write_labels(dir, {1, 0});
    const std::vector<float> mean = {0.5f, 0.25f, 0.0f}, std = {0.5f, 2.0f, 1.0f};
    Dataset data;
    ASSERT_TRUE(load_dataset(dir, 3, 2, 2, 2, mean, std, &data, &error)) << error;
    EXPECT_EQ(data.channels_last, channels_last);
    std::vector<float> x(12);
    int64_t used = -1;
    ASSERT_TRUE(data.read(1, 0, x.data(), &used, &error)) << error;
    EXPECT_EQ(used, 1);
    for (int c = 0; c < 3; ++c)
      for (int p = 0; p < 4; ++p) {
        const float scaled = static_cast<float>(100 + c * 10 + p) / 255.0f;
        const auto ch = static_cast<size_t>(c);
        EXPECT_EQ(x[static_cast<size_t>(c * 4 + p)], (scaled - mean[ch]) / std[ch])
            << c << " " << p;
      }
  }
}

TEST(Dataset, Float32ImagesAreReadAsTheyAre) {
  const std::string dir = fresh_dir("f32");
  std::vector<float> values(24);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.25f * static_cast<float>(i) - 3;
  std::string error;
  ASSERT_TRUE(npy_write_f32(dir + "/images.npy", values.data(), {2, 3, 2, 2}, &error)) << error;
  write_labels(dir, {0, 1});
  Dataset data;
  ASSERT_TRUE(load_dataset(dir, 3, 2, 2, 2, {}, {}, &data, &error)) << error;
  std::vector<float> x(12);
  int64_t used = -1;
  ASSERT_TRUE(data.read(1, 0, x.data(), &used, &error)) << error;
  EXPECT_TRUE(std::equal(x.begin(), x.end(), values.begin() + 12));
}

TEST(Dataset, WhatDoesNotMatchTheModelIsRefusedByName) {
  const std::string dir = fresh_dir("bad");
  std::string error;
  const std::vector<uint8_t> bytes = image_bytes(false);
  ASSERT_TRUE(npy_write_u8(dir + "/images.npy", bytes.data(), {2, 3, 2, 2}, &error)) << error;
  write_labels(dir, {0, 1});
  Dataset data;
  EXPECT_FALSE(load_dataset(dir, 3, 4, 4, 2, {}, {}, &data, &error));
  EXPECT_NE(error.find("or uint8 of shape (2, 3, 4, 4) or (2, 4, 4, 3), for labels.npy's 2 samples; got images.npy "
                       "uint8 of shape (2, 3, 2, 2)"),
            std::string::npos)
      << error;
  EXPECT_FALSE(load_dataset(dir, 3, 2, 2, 1, {}, {}, &data, &error));
  EXPECT_NE(error.find("labels.npy: label 1 at 1 is not a class in [0, 1)"), std::string::npos) << error;
  EXPECT_FALSE(load_dataset(dir, 3, 2, 2, 2, {0.5f}, {0.5f}, &data, &error));
  EXPECT_NE(error.find("expected 3 values each (one per channel), got 1 and 1"), std::string::npos) << error;
  write_labels(dir, {0, 1, 1});
  EXPECT_FALSE(load_dataset(dir, 3, 2, 2, 2, {}, {}, &data, &error));
  EXPECT_NE(error.find("for labels.npy's 3 samples"), std::string::npos) << error;
  // A file cut short is refused before any sample is read (the header's size
  // against the file's, as npy_read checks it).
  std::filesystem::resize_file(dir + "/images.npy", std::filesystem::file_size(dir + "/images.npy") - 5);
  write_labels(dir, {0, 1});
  EXPECT_FALSE(load_dataset(dir, 3, 2, 2, 2, {}, {}, &data, &error));
  EXPECT_NE(error.find("images.npy: data ends early: expected 24 elements"), std::string::npos) << error;
  std::filesystem::remove(dir + "/images.npy");
  EXPECT_FALSE(load_dataset(dir, 3, 2, 2, 2, {}, {}, &data, &error));
  EXPECT_NE(error.find("images.npy: cannot open for reading"), std::string::npos) << error;
}

// A 3x4 image of one channel, values 1 .. 12 row by row.
std::vector<float> small_image() {
  std::vector<float> x(12);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i + 1);
  return x;
}

TEST(Augment, ACropWindowsTheZeroPaddedImageAtItsOffsets) {
  Augment a;
  a.crop_padding = 1;
  std::vector<float> x = small_image(), scratch(12);
  // Offsets (0, 2) of the padded 5x6 image: rows -1 .. 1, columns 1 .. 4.
  apply_augment(a, AugmentDraw{0, 2, false}, 1, 3, 4, x.data(), scratch.data());
  EXPECT_EQ(x, (std::vector<float>{0, 0, 0, 0, 2, 3, 4, 0, 6, 7, 8, 0}));
}

TEST(Augment, AFlipMirrorsTheCroppedWindow) {
  Augment a;
  a.crop_padding = 1;
  a.flip = true;
  std::vector<float> x = small_image(), scratch(12);
  apply_augment(a, AugmentDraw{1, 2, true}, 1, 3, 4, x.data(), scratch.data());
  // The window of offsets (1, 2) is rows 0 .. 2, columns 1 .. 4, then mirrored.
  EXPECT_EQ(x, (std::vector<float>{0, 4, 3, 2, 0, 8, 7, 6, 0, 12, 11, 10}));
  Augment flip_only;
  flip_only.flip = true;
  x = small_image();
  apply_augment(flip_only, AugmentDraw{0, 0, true}, 1, 3, 4, x.data(), scratch.data());
  EXPECT_EQ(x, (std::vector<float>{4, 3, 2, 1, 8, 7, 6, 5, 12, 11, 10, 9}));
}

TEST(Augment, DrawsAreUniformAndAFunctionOfTheSeedAndThePlace) {
  Augment a;
  a.crop_padding = 4;
  a.flip = true;
  std::vector<int64_t> offsets(9, 0);
  int64_t flips = 0;
  constexpr int64_t kDraws = 90000;
  for (uint64_t place = 0; place < kDraws; ++place) {
    const AugmentDraw d = draw_augment(a, 11, place);
    ASSERT_GE(d.dy, 0);
    ASSERT_LE(d.dy, 8);
    ASSERT_GE(d.dx, 0);
    ASSERT_LE(d.dx, 8);
    ++offsets[static_cast<size_t>(d.dx)];
    flips += d.flip;
  }
  for (int64_t count : offsets) EXPECT_NEAR(static_cast<double>(count), kDraws / 9.0, 600);  // ~6 sigma
  EXPECT_NEAR(static_cast<double>(flips), kDraws / 2.0, 900);
  const AugmentDraw d = draw_augment(a, 11, 12345), again = draw_augment(a, 11, 12345);
  EXPECT_TRUE(d.dy == again.dy && d.dx == again.dx && d.flip == again.flip);
  int64_t same = 0;
  for (uint64_t place = 0; place < 100; ++place) {
    const AugmentDraw p = draw_augment(a, 11, place), q = draw_augment(a, 12, place);
    same += p.dy == q.dy && p.dx == q.dx && p.flip == q.flip;
  }
  EXPECT_LT(same, 10) << "the seed does not change the draws";
}

TEST(Augment, TheListIsParsedAndBadItemsAreRefusedByName) {
  std::string error;
  std::optional<Augment> a = parse_augment("crop=4,flip", &error);
  ASSERT_TRUE(a) << error;
  EXPECT_EQ(a->crop_padding, 4);
  EXPECT_TRUE(a->flip);
  a = parse_augment("flip", &error);
  ASSERT_TRUE(a) << error;
  EXPECT_EQ(a->crop_padding, -1);
  EXPECT_FALSE(a->random_resized_crop);
  a = parse_augment("rrc,flip", &error);
  ASSERT_TRUE(a) << error;
  EXPECT_TRUE(a->random_resized_crop);
  EXPECT_TRUE(a->flip);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "'' is not an augmentation (expected crop=PADDING, flip, rrc)"},
      {"rotate", "'rotate' is not an augmentation"},
      {"crop=-1", "crop=-1: expected crop=PADDING, PADDING a whole number of pixels in [0, 1024]"},
      {"crop=", "crop=: expected crop=PADDING"},
      {"crop=2,crop=3", "'crop=3' is given twice"},
      {"flip,flip", "'flip' is given twice"},
      {"rrc,rrc", "'rrc' is given twice"},
      {"flip,", "'' is not an augmentation"},
  };
  for (const auto& [text, expect] : bad) {
    EXPECT_FALSE(parse_augment(text, &error).has_value()) << text;
    EXPECT_NE(error.find(expect), std::string::npos) << text << ": " << error;
  }
}

}  // namespace
}  // namespace mplan::rt
