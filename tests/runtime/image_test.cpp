// Image-file data (runtime/image_decode.h, image_transform.h, image_folder.h):
// PNG decoding to RGB and grey as PIL converts, the reasons bad files are
// refused, Pillow's bilinear resize on hand-checked values (from Pillow
// 9.4), torchvision's centre crop and random-resized-crop windows, the
// listing of an image folder and the shards round trip. The whole pipeline
// against torchvision's ImageFolder is tests/e2e/image_data_test.cpp.

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "runtime/image_decode.h"
#include "runtime/image_folder.h"
#include "runtime/image_transform.h"

#if __has_include(<png.h>)
#include <png.h>
#define MPLAN_TEST_HAS_PNG 1
#endif

namespace mplan::rt {
namespace {

namespace fs = std::filesystem;

std::string fresh_dir(const std::string& tag) {
  const fs::path dir = fs::temp_directory_path() / ("mplan-image-test-" + tag + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

Image gray(int64_t height, int64_t width, std::vector<uint8_t> pixels) {
  return Image{height, width, 1, std::move(pixels)};
}

#ifdef MPLAN_TEST_HAS_PNG
// An RGBA PNG of 2 x 3 pixels, in memory.
std::vector<uint8_t> rgba_png(const std::vector<uint8_t>& pixels) {
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  image.width = 3;
  image.height = 2;
  image.format = PNG_FORMAT_RGBA;
  png_alloc_size_t size = 0;
  EXPECT_TRUE(png_image_write_to_memory(&image, nullptr, &size, 0, pixels.data(), 0, nullptr));
  std::vector<uint8_t> bytes(size);
  EXPECT_TRUE(png_image_write_to_memory(&image, bytes.data(), &size, 0, pixels.data(), 0, nullptr));
  bytes.resize(size);
  return bytes;
}

const std::vector<uint8_t> kRgba = {10, 20, 30, 0,  200, 100, 50, 255, 0,  0,   0,   128,
                                    255, 255, 255, 9, 1,   2,   3,  4,   90, 180, 250, 77};

TEST(ImageDecode, PngDecodesToRgbWithoutAlphaAndToPilsGrey) {
  if (!image_codecs_available()) GTEST_SKIP() << "built without libjpeg and libpng";
  const std::vector<uint8_t> bytes = rgba_png(kRgba);
  EXPECT_EQ(image_format(bytes.data(), bytes.size()), ImageFormat::png);
  Image rgb, grey;
  std::string error;
  ASSERT_TRUE(decode_image(bytes.data(), bytes.size(), 3, &rgb, &error)) << error;
  EXPECT_EQ(rgb.height, 2);
  EXPECT_EQ(rgb.width, 3);
  for (size_t p = 0; p < 6; ++p)
    for (size_t c = 0; c < 3; ++c) EXPECT_EQ(rgb.pixels[3 * p + c], kRgba[4 * p + c]) << p << " " << c;
  ASSERT_TRUE(decode_image(bytes.data(), bytes.size(), 1, &grey, &error)) << error;
  for (size_t p = 0; p < 6; ++p) {
    // PIL's convert("L"): L = R * 299/1000 + G * 587/1000 + B * 114/1000, in 16-bit fixed point.
    const int expected = (kRgba[4 * p] * 19595 + kRgba[4 * p + 1] * 38470 + kRgba[4 * p + 2] * 7471 + 0x8000) >> 16;
    EXPECT_EQ(grey.pixels[p], expected) << p;
  }
  int64_t height = 0, width = 0;
  ASSERT_TRUE(read_image_size(bytes.data(), bytes.size(), &height, &width, &error)) << error;
  EXPECT_EQ(height, 2);
  EXPECT_EQ(width, 3);
}

TEST(ImageDecode, BadFilesAreRefusedWithTheReason) {
  if (!image_codecs_available()) GTEST_SKIP() << "built without libjpeg and libpng";
  Image image;
  std::string error;
  const std::string text = "hello";
  EXPECT_FALSE(decode_image(reinterpret_cast<const uint8_t*>(text.data()), text.size(), 3, &image, &error));
  EXPECT_EQ(error, "not a JPEG or PNG image (it starts with 0x68 0x65)");
  EXPECT_FALSE(decode_image(nullptr, 0, 3, &image, &error));
  EXPECT_EQ(error, "an empty file, not a JPEG or PNG image");
  std::vector<uint8_t> png = rgba_png(kRgba);
  png.resize(png.size() / 2);
  EXPECT_FALSE(decode_image(png.data(), png.size(), 3, &image, &error));
  EXPECT_EQ(error.rfind("PNG: ", 0), 0u) << error;
  const std::vector<uint8_t> jpeg = {0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 'J', 'F', 'I', 'F', 0, 1, 2, 3};
  EXPECT_FALSE(decode_image(jpeg.data(), jpeg.size(), 3, &image, &error));
  EXPECT_EQ(error.rfind("JPEG: ", 0), 0u) << error;
  EXPECT_FALSE(decode_image(png.data(), png.size(), 2, &image, &error));
  EXPECT_NE(error.find("1 (grey) or 3 (RGB) channels, not 2"), std::string::npos) << error;
}
#endif

TEST(ImageTransform, ResizeIsPillowsBilinearFilter) {
  // Image.fromarray(...).resize(size, Image.BILINEAR) in Pillow 9.4.
  const Image row = gray(1, 4, {0, 100, 200, 255});
  EXPECT_EQ(resize_bilinear(row, 1, 2).pixels, (std::vector<uint8_t>{71, 209}));
  EXPECT_EQ(resize_bilinear(row, 1, 7).pixels, (std::vector<uint8_t>{0, 36, 93, 150, 204, 235, 255}));
  std::vector<uint8_t> ramp(30);
  for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<uint8_t>(8 * i);
  const Image both = resize_bilinear(gray(5, 6, ramp), 3, 4);
  EXPECT_EQ(both.pixels, (std::vector<uint8_t>{24, 35, 47, 58, 99, 110, 122, 133, 174, 185, 197, 208}));
  EXPECT_EQ(resize_bilinear(row, 1, 4).pixels, row.pixels);
}

TEST(ImageTransform, ResizeShorterSideKeepsTheAspectByTruncation) {
  // torchvision's Resize(4): the longer side int(4 * 7 / 5) = 5.
  const Image image = resize_shorter_side(gray(5, 7, std::vector<uint8_t>(35, 9)), 4);
  EXPECT_EQ(image.height, 4);
  EXPECT_EQ(image.width, 5);
  const Image tall = resize_shorter_side(gray(9, 4, std::vector<uint8_t>(36, 9)), 2);
  EXPECT_EQ(tall.width, 2);
  EXPECT_EQ(tall.height, 4);
}

TEST(ImageTransform, CentreCropRoundsTiesToEvenAndPadsWithZeros) {
  // round((5 - 2) / 2) = round(1.5) = 2; round((3 - 2) / 2) = round(0.5) = 0.
  EXPECT_EQ(center_window(5, 3, 2, 2).top, 2);
  EXPECT_EQ(center_window(5, 3, 2, 2).left, 0);
  EXPECT_EQ(center_window(7, 8, 2, 2).top, 2);  // round(2.5) = 2
  EXPECT_EQ(center_window(7, 8, 2, 2).left, 3);
  // A window larger than the image: zeros around it, as CenterCrop pads.
  const Image padded = crop(gray(1, 1, {7}), center_window(1, 1, 3, 3));
  EXPECT_EQ(padded.pixels, (std::vector<uint8_t>{0, 0, 0, 0, 7, 0, 0, 0, 0}));
}

TEST(ImageTransform, RandomResizedWindowsStayInTheImageWithinScaleAndRatio) {
  int fallbacks = 0;
  for (uint64_t seed = 1; seed <= 2000; ++seed) {
    const auto uniform = [seed](int k) {
      uint64_t z = seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(k) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 31)) * 0x94d049bb133111ebull;
      return static_cast<double>((z ^ (z >> 29)) >> 11) * (1.0 / 9007199254740992.0);
    };
    const Window w = random_resized_window(60, 80, uniform);
    ASSERT_GE(w.top, 0);
    ASSERT_GE(w.left, 0);
    ASSERT_LE(w.top + w.height, 60);
    ASSERT_LE(w.left + w.width, 80);
    const double share = static_cast<double>(w.height * w.width) / (60.0 * 80.0);
    const double ratio = static_cast<double>(w.width) / static_cast<double>(w.height);
    // Rounding to whole pixels moves both a little past the drawn ranges.
    EXPECT_GE(share, 0.07) << seed;
    EXPECT_GE(ratio, 0.70) << seed;
    EXPECT_LE(ratio, 1.40) << seed;
    const Window again = random_resized_window(60, 80, uniform);
    EXPECT_EQ(again.top, w.top);
    EXPECT_EQ(again.width, w.width);
    if (w.height == 60 && w.width == 80) ++fallbacks;
  }
  EXPECT_LT(fallbacks, 20);
  // Every draw misses (the first share too large, then always the same): the
  // centred window of the clamped ratio.
  const Window wide = random_resized_window(10, 100, [](int k) { return k % 4 == 0 ? 0.999 : 0.999; });
  EXPECT_EQ(wide.height, 10);
  EXPECT_EQ(wide.width, 13);  // round(10 * 4/3)
  EXPECT_EQ(wide.left, (100 - 13) / 2);
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

TEST(ImageFolder, ListsClassesAndFilesInByteOrderAndLeavesOthersOut) {
  const std::string dir = fresh_dir("list");
  for (const char* file : {"b/2.png", "b/10.PNG", "a/x.jpg", "a/sub/y.jpeg", "a/.hidden.png", "a/notes.txt"})
    write_bytes(dir + "/" + file, {1, 2, 3});
  fs::create_directories(dir + "/.git");
  ImageFolderListing listing;
  std::string error;
  ASSERT_TRUE(list_image_folder(dir, &listing, &error)) << error;
  EXPECT_EQ(listing.classes, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(listing.files, (std::vector<std::string>{"a/sub/y.jpeg", "a/x.jpg", "b/10.PNG", "b/2.png"}));
  EXPECT_EQ(listing.labels, (std::vector<int32_t>{0, 0, 1, 1}));
  EXPECT_EQ(listing.ignored, 2);
  fs::create_directories(dir + "/c");
  write_bytes(dir + "/c/readme.md", {1});
  EXPECT_FALSE(list_image_folder(dir, &listing, &error));
  EXPECT_EQ(error, dir + "/c: an empty class folder (no .jpg, .jpeg or .png file): every class needs an image");
  const std::string flat = fresh_dir("flat");
  write_bytes(flat + "/x.png", {1});
  EXPECT_FALSE(list_image_folder(flat, &listing, &error));
  EXPECT_NE(error.find("nor class folders of images"), std::string::npos) << error;
}

#ifdef MPLAN_TEST_HAS_PNG
TEST(ImageFolder, ShardsHoldEveryFilesBytesAndRefuseAnInconsistentIndex) {
  if (!image_codecs_available()) GTEST_SKIP() << "built without libjpeg and libpng";
  const std::string dir = fresh_dir("shards");
  std::vector<std::vector<uint8_t>> files;
  for (int k = 0; k < 5; ++k) {
    std::vector<uint8_t> pixels = kRgba;
    pixels[0] = static_cast<uint8_t>(k);
    files.push_back(rgba_png(pixels));
    write_bytes(dir + "/in/" + (k < 3 ? "a" : "b") + "/" + std::to_string(k) + ".png", files.back());
  }
  write_bytes(dir + "/in/b/broken.png", {'n', 'o', 'p', 'e'});
  ImageFolderListing listing;
  std::string error;
  ASSERT_TRUE(list_image_folder(dir + "/in", &listing, &error)) << error;
  int64_t skipped = -1;
  EXPECT_FALSE(write_shards(listing, dir + "/out", 200, false, &skipped, {}, &error));
  EXPECT_EQ(error, dir + "/in/b/broken.png: not a JPEG or PNG image (it starts with 0x6e 0x6f) (pass --skip-corrupt "
                         "to leave such files out)");
  EXPECT_FALSE(fs::exists(dir + "/out"));
  ASSERT_TRUE(write_shards(listing, dir + "/out", 200, true, &skipped, {}, &error)) << error;
  EXPECT_EQ(skipped, 1);
  EXPECT_TRUE(is_shard_folder(dir + "/out"));
  std::vector<int32_t> labels;
  std::vector<std::string> classes;
  std::shared_ptr<ImageFiles> shards = open_shards(dir + "/out", &labels, &classes, &error);
  ASSERT_NE(shards, nullptr) << error;
  ASSERT_EQ(shards->count(), 5);
  EXPECT_EQ(labels, (std::vector<int32_t>{0, 0, 0, 1, 1}));
  EXPECT_EQ(classes, (std::vector<std::string>{"a", "b"}));
  for (int64_t i = 0; i < 5; ++i) {
    std::vector<uint8_t> bytes;
    ASSERT_TRUE(shards->read(i, &bytes, &error)) << error;
    EXPECT_EQ(bytes, files[static_cast<size_t>(i)]) << i;
  }
  EXPECT_NE(shards->name(4).find("(from b/4.png)"), std::string::npos) << shards->name(4);
  // More than one shard (about 200 bytes each), and a shard cut short is refused.
  ASSERT_TRUE(fs::exists(dir + "/out/shard-00001.bin"));
  fs::resize_file(dir + "/out/shard-00000.bin", fs::file_size(dir + "/out/shard-00000.bin") - 1);
  EXPECT_EQ(open_shards(dir + "/out", &labels, &classes, &error), nullptr);
  EXPECT_NE(error.find("shard-00000.bin: holds"), std::string::npos) << error;
  // The target must not exist.
  EXPECT_FALSE(write_shards(listing, dir + "/out", 200, true, &skipped, {}, &error));
  EXPECT_EQ(error, dir + "/out: exists; give a new folder for the shards");
}
#endif

}  // namespace
}  // namespace mplan::rt
