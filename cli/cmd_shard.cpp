// `mplan shard FOLDER -o OUT [--shard-size SIZE] [--skip-corrupt]`: packs an
// image folder (ImageFolder layout: one folder per class of JPEG and PNG
// files) into the shard format of the generated program's `--data`
// (runtime/image_folder.h; docs/generated-program.md, "Data"): the files'
// bytes concatenated into shards of about SIZE for large sequential reads,
// with an index, the labels and the class names. Every file's header is
// checked on the way; nothing named OUT exists until the whole is written.

#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <string>

#include "cli/command.h"
#include "core/bytes.h"
#include "runtime/image_decode.h"
#include "runtime/image_folder.h"

namespace mplan::cli {
namespace {

struct ShardFlags {
  std::string folder, out, shard_size = "256MiB";
  bool skip_corrupt = false;
};

void run_shard(const ShardFlags& f) {
  Result<int64_t> shard_bytes = parse_bytes(f.shard_size);
  if (!shard_bytes) fail_usage(fmt::format("--shard-size '{}': {}", f.shard_size, shard_bytes.error().message));
  if (*shard_bytes < 1) fail_usage(fmt::format("--shard-size '{}': must be more than 0 bytes", f.shard_size));
  if (!rt::image_codecs_available())
    fail("this mplan was built without libjpeg and libpng (libjpeg62-turbo-dev, libpng-dev): it cannot check "
         "image files");
  refuse_overwriting_inputs("-o", f.out, {f.folder}, /*output_is_folder=*/true);
  rt::ImageFolderListing listing;
  std::string error;
  if (!rt::list_image_folder(f.folder, &listing, &error)) fail(error);
  fmt::print("{}: {} image files in {} classes{}\n", f.folder, listing.files.size(), listing.classes.size(),
             listing.ignored > 0 ? fmt::format(" ({} other files left out)", listing.ignored) : "");
  auto last = std::chrono::steady_clock::now();
  const auto progress = [&](int64_t done, int64_t total) {
    const auto now = std::chrono::steady_clock::now();
    if (done < total && now - last < std::chrono::seconds(2)) return;
    last = now;
    fmt::print("  {} of {} files\n", done, total);
    std::fflush(stdout);
  };
  int64_t skipped = 0;
  if (!rt::write_shards(listing, f.out, *shard_bytes, f.skip_corrupt, &skipped, progress, &error)) fail(error);
  fmt::print("wrote {} samples to {}{}\n", static_cast<int64_t>(listing.files.size()) - skipped, f.out,
             skipped > 0 ? fmt::format(", {} corrupt file(s) left out (--skip-corrupt)", skipped) : "");
}

void setup_shard(CLI::App& command) {
  auto f = std::make_shared<ShardFlags>();
  command.add_option("folder", f->folder, "An image folder: one folder per class of .jpg, .jpeg and .png files")
      ->required();
  command.add_option("-o,--out", f->out, "The shard folder to write (must not exist)")->required();
  command.add_option("--shard-size", f->shard_size, "About how large each shard is (default 256MiB)");
  command.add_flag("--skip-corrupt", f->skip_corrupt, "Leave out, and count, files that are not JPEG or PNG images");
  command.callback([f] { run_shard(*f); });
}

const Registration registration("shard", "Pack an image folder into shards for `train --data` "
                                "(docs/generated-program.md)", setup_shard, 60);

}  // namespace
}  // namespace mplan::cli
