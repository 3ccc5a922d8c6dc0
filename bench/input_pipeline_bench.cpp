// The generated program's input pipeline against what a GPU step needs
// (docs/generated-program.md, "Data"): a CIFAR-size data set (32 x 32 RGB,
// 10 classes) as a uint8 array, as folders of PNG and of JPEG files, and as
// the shards of each, read with the CIFAR recipe (shuffled epochs, crop=4,
// flip, normalised) by Dataset::read on the host threads, as the program
// makes each step's samples while the device runs the step before. The
// step's need is the samples per second of the plan's simulated step on a
// recorded GPU profile (cifar_resnet, batch 64, H200, unlimited budget, plus
// the input's copy to the device in the plan): the pipeline keeps up when
// its rate is above it. Rates are measured on this machine's cores; a GPU
// node's host has more, and the rate scales with them (one sample a thread).
//
//   build/bench/input_pipeline_bench [--samples N] [--batches K] [--markdown FILE]

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "driver/cost_source.h"
#include "frontend/parse.h"
#include "planner/planner.h"
#include "runtime/dataset.h"
#include "runtime/image_folder.h"
#include "runtime/npy.h"
#include "tdfg/tdfg.h"

#if __has_include(<png.h>) && __has_include(<jpeglib.h>)
#include <jpeglib.h>
#include <png.h>
#define MPLAN_BENCH_IMAGES 1
#endif

namespace mplan {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kSide = 32, kChannels = 3, kClasses = 10;

// A smooth random image with noise (what JPEG and PNG compress as they would a photo).
std::vector<uint8_t> make_image(std::mt19937& rng) {
  std::vector<uint8_t> pixels(static_cast<size_t>(kSide * kSide * kChannels));
  std::uniform_int_distribution<int> coarse(0, 255), noise(-12, 12);
  int grid[5][5][3];
  for (auto& row : grid)
    for (auto& cell : row)
      for (int& v : cell) v = coarse(rng);
  for (int64_t y = 0; y < kSide; ++y)
    for (int64_t x = 0; x < kSide; ++x)
      for (int64_t c = 0; c < kChannels; ++c) {
        const double fy = static_cast<double>(y) / 8.0, fx = static_cast<double>(x) / 8.0;
        const int y0 = static_cast<int>(fy), x0 = static_cast<int>(fx);
        const double ty = fy - y0, tx = fx - x0;
        const double v = (1 - ty) * ((1 - tx) * grid[y0][x0][c] + tx * grid[y0][x0 + 1][c]) +
                         ty * ((1 - tx) * grid[y0 + 1][x0][c] + tx * grid[y0 + 1][x0 + 1][c]);
        pixels[static_cast<size_t>((y * kSide + x) * kChannels + c)] =
            static_cast<uint8_t>(std::clamp(static_cast<int>(v) + noise(rng), 0, 255));
      }
  return pixels;
}

#ifdef MPLAN_BENCH_IMAGES
void write_png(const std::string& path, const std::vector<uint8_t>& pixels) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = kSide;
  image.height = kSide;
  image.format = PNG_FORMAT_RGB;
  png_image_write_to_file(&image, path.c_str(), 0, pixels.data(), 0, nullptr);
}

void write_jpeg(const std::string& path, const std::vector<uint8_t>& pixels) {
  jpeg_compress_struct info;
  jpeg_error_mgr error;
  info.err = jpeg_std_error(&error);
  jpeg_create_compress(&info);
  FILE* file = std::fopen(path.c_str(), "wb");
  jpeg_stdio_dest(&info, file);
  info.image_width = kSide;
  info.image_height = kSide;
  info.input_components = 3;
  info.in_color_space = JCS_RGB;
  jpeg_set_defaults(&info);
  jpeg_set_quality(&info, 90, TRUE);
  jpeg_start_compress(&info, TRUE);
  while (info.next_scanline < info.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(pixels.data()) + info.next_scanline * kSide * kChannels;
    jpeg_write_scanlines(&info, &row, 1);
  }
  jpeg_finish_compress(&info);
  jpeg_destroy_compress(&info);
  std::fclose(file);
}
#endif

// The data sets under `root`: "array" always, the folders and shards where images can be written.
std::vector<std::pair<std::string, std::string>> make_data(const std::string& root, int64_t samples) {
  fs::remove_all(root);
  fs::create_directories(root + "/array");
  std::mt19937 rng(7);
  std::vector<uint8_t> all;
  std::vector<int32_t> labels;
  std::vector<std::pair<std::string, std::string>> sets = {{"uint8 array (images.npy, NHWC)", root + "/array"}};
#ifdef MPLAN_BENCH_IMAGES
  for (const char* kind : {"png", "jpeg"})
    for (int64_t c = 0; c < kClasses; ++c) fs::create_directories(fmt::format("{}/{}/class{}", root, kind, c));
#endif
  for (int64_t i = 0; i < samples; ++i) {
    const std::vector<uint8_t> image = make_image(rng);
    const auto label = static_cast<int32_t>(i % kClasses);
    all.insert(all.end(), image.begin(), image.end());
    labels.push_back(label);
#ifdef MPLAN_BENCH_IMAGES
    write_png(fmt::format("{}/png/class{}/{:06d}.png", root, label, i), image);
    write_jpeg(fmt::format("{}/jpeg/class{}/{:06d}.jpg", root, label, i), image);
#endif
  }
  std::string error;
  rt::npy_write_u8(root + "/array/images.npy", all.data(), {samples, kSide, kSide, kChannels}, &error);
  rt::npy_write_i32(root + "/array/labels.npy", labels.data(), {samples}, &error);
#ifdef MPLAN_BENCH_IMAGES
  for (const char* kind : {"png", "jpeg"}) {
    const std::string folder = fmt::format("{}/{}", root, kind);
    sets.emplace_back(fmt::format("{} folder", kind == std::string("png") ? "PNG" : "JPEG (quality 90)"), folder);
    rt::ImageFolderListing listing;
    int64_t skipped = 0;
    if (rt::list_image_folder(folder, &listing, &error) &&
        rt::write_shards(listing, folder + "-shards", int64_t{256} << 20, false, &skipped, {}, &error))
      sets.emplace_back(fmt::format("{} shards", kind == std::string("png") ? "PNG" : "JPEG"), folder + "-shards");
  }
#endif
  return sets;
}

// Samples per second of making `batches` batches of `batch` on `threads`
// host threads (one sample a thread at a time, as Program::make_input).
double rate(rt::Dataset& data, int64_t batch, int64_t batches, int threads) {
  std::vector<float> out(static_cast<size_t>(batch * kChannels * kSide * kSide));
  const auto started = std::chrono::steady_clock::now();
  for (int64_t step = 0; step < batches; ++step) {
    data.order.prepare(static_cast<uint64_t>(step));
    std::atomic<int64_t> next{0};
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&] {
        std::string error;
        for (int64_t k; (k = next++) < batch;) {
          int64_t used = 0;
          const int64_t at = data.order.index(static_cast<uint64_t>(step), k);
          data.read(at, static_cast<uint64_t>(step * batch + k), out.data() + k * kChannels * kSide * kSide, &used,
                    &error);
        }
      });
    for (std::thread& w : workers) w.join();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return static_cast<double>(batch * batches) / seconds;
}

// The step the input must keep up with: cifar_resnet on the H200 profile.
struct Need {
  double step_ms = 0;
  int64_t batch = 0;
  std::string what;
};

Need gpu_need() {
  const std::string model_path = std::string(MPLAN_SOURCE_DIR) + "/examples/models/cifar_resnet.yaml";
  Result<Model> model = load_model(model_path);
  if (!model) return {};
  const Tdfg tdfg = build_tdfg(*model);
  const std::string profile = std::string(MPLAN_SOURCE_DIR) + "/examples/profiles/cifar_resnet-h200.json";
  Result<driver::LoadedCostModel> cost = driver::make_cost_model({"", profile, false}, *model, model_path, tdfg, 0);
  if (!cost) return {};
  PlanOptions options;
  options.budget_bytes = int64_t{8} << 30;
  const PlanResult planned = plan_iteration(tdfg, *cost->model, options);
  if (!planned.feasible) return {};
  return Need{planned.plan.summary.simulated_ms, model->batch,
              fmt::format("cifar_resnet, batch {}, examples/profiles/cifar_resnet-h200.json, 8 GiB", model->batch)};
}

}  // namespace
}  // namespace mplan

int main(int argc, char** argv) {
  using namespace mplan;
  int64_t samples = 4096, batches = 16;
  std::string markdown;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--samples" && i + 1 < argc) samples = std::stoll(argv[++i]);
    else if (flag == "--batches" && i + 1 < argc) batches = std::stoll(argv[++i]);
    else if (flag == "--markdown" && i + 1 < argc) markdown = argv[++i];
    else {
      std::fprintf(stderr, "usage: input_pipeline_bench [--samples N] [--batches K] [--markdown FILE]\n");
      return 2;
    }
  }
  const Need need = gpu_need();
  if (need.step_ms <= 0) {
    std::fprintf(stderr, "input_pipeline_bench: could not plan cifar_resnet on its H200 profile\n");
    return 1;
  }
  const double need_rate = static_cast<double>(need.batch) * 1000.0 / need.step_ms;
  const std::string root = (fs::temp_directory_path() / "mplan-input-bench").string();
  std::printf("making %lld samples under %s ...\n", static_cast<long long>(samples), root.c_str());
  const auto sets = make_data(root, samples);
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::string table = fmt::format(
      "| data | samples/s, {} thread(s) | samples/s, 1 thread | over the GPU step's need |\n|---|---|---|---|\n",
      threads);
  for (const auto& [name, dir] : sets) {
    rt::Dataset data;
    std::string error;
    const std::vector<float> mean = {0.4914f, 0.4822f, 0.4465f}, std = {0.2470f, 0.2435f, 0.2616f};
    if (!rt::load_dataset(dir, kChannels, kSide, kSide, kClasses, mean, std, &data, &error)) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), error.c_str());
      return 1;
    }
    data.order.count = data.count;
    data.order.batch = need.batch;
    data.order.epochs = data.order.shuffle = true;
    data.order.seed = 1;
    data.augment.crop_padding = 4;
    data.augment.flip = true;
    data.seed = 1;
    rate(data, need.batch, 2, threads);  // warm the page cache
    const double all = rate(data, need.batch, batches, threads), one = rate(data, need.batch, batches, 1);
    table += fmt::format("| {} | {:.0f} | {:.0f} | {:.1f}x |\n", name, all, one, all / need_rate);
    std::printf("%s: %.0f samples/s on %d threads, %.0f on one (%.1fx the step's need)\n", name.c_str(), all,
                threads, one, all / need_rate);
  }
  fs::remove_all(root);
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  const std::string text = fmt::format(
      "# The input pipeline against a GPU step\n\nGenerated by `build/bench/input_pipeline_bench --markdown "
      "docs/benchmarks-input.md` ({}, this machine: {} hardware thread(s)). {} CIFAR-size samples (32 x 32 RGB, "
      "10 classes) read with the CIFAR recipe (shuffled epochs, crop=4, flip, normalised) by the program's "
      "Dataset::read, one sample a thread, in batches of {}. The need: {} samples/s, the batch over the simulated "
      "step of {} ({:.3f} ms, the input's copy to the device included). A rate above the need keeps the device "
      "busy; the rate grows with the host's cores (the 1-thread column is the rate per core).\n\n{}",
      date, threads, samples, need.batch, static_cast<int64_t>(need_rate), need.what, need.step_ms, table);
  std::printf("\n%s", text.c_str());
  if (!markdown.empty()) std::ofstream(markdown) << text;
  return 0;
}
