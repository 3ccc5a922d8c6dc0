#pragma once
// Image files as training data (`train --data DIR`, docs/generated-program.md,
// "Data"): a folder in torchvision's ImageFolder layout, one folder per class,
// or the shards made of one (`mplan shard`), each sample an encoded JPEG or
// PNG file that runtime/image_decode.h decodes.
//
// An image folder: DIR/<class>/<file>, the classes and then each class's
// files in byte order of their names (torchvision sorts both), label =
// the class's place. Files ending in .jpg, .jpeg or .png (any case) are
// samples; hidden files and others are counted and left out.
//
// A shard folder (format version 1), for reads of large sequential runs:
//   DIR/shards.json    {"format": "mplan-shards", "version": 1, "samples": N, "shards": S}
//   DIR/shard-00000.bin ... the samples' file bytes, concatenated in sample order
//   DIR/index.npy      int32 (N, 2): each sample's shard and byte count (its
//                      offset is the sum of the counts before it in its shard)
//   DIR/labels.npy     int32 (N,)
//   DIR/classes.txt    the class names, one per line, in label order
//   DIR/files.txt      each sample's file in the folder it was made from (for messages)

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/npy.h"

namespace mplan::rt {

// An image folder's samples in order.
struct ImageFolderListing {
  std::string dir;
  std::vector<std::string> classes;
  std::vector<std::string> files;  // relative to dir: "<class>/<file>"
  std::vector<int32_t> labels;
  int64_t ignored = 0;  // files that are not .jpg, .jpeg or .png
};

// Lists DIR. False, with *error naming the folder, where DIR has no class
// folder, a class folder has no image file, or DIR cannot be read.
bool list_image_folder(const std::string& dir, ImageFolderListing* out, std::string* error);

// Whether DIR is a shard folder (it has shards.json).
bool is_shard_folder(const std::string& dir);

// The encoded files of a data set, by sample.
class ImageFiles {
 public:
  virtual ~ImageFiles() = default;
  virtual int64_t count() const = 0;
  // Sample i's bytes into *bytes; false, with *error naming the file, where it cannot be read.
  virtual bool read(int64_t i, std::vector<uint8_t>* bytes, std::string* error) const = 0;
  // The file sample i came from, for messages.
  virtual std::string name(int64_t i) const = 0;
};

// The files of a listed image folder.
std::shared_ptr<ImageFiles> open_image_folder(const ImageFolderListing& listing);

// A shard folder's files, labels and classes; nullptr, with *error naming
// the file, where one is missing, of another format or inconsistent.
std::shared_ptr<ImageFiles> open_shards(const std::string& dir, std::vector<int32_t>* labels,
                                        std::vector<std::string>* classes, std::string* error);

// Writes the shards of a listed folder into `out` (created; must not exist),
// shards of about `shard_bytes` each, every file read and its header checked
// (a file that is not a JPEG or PNG is refused, naming it, unless
// skip_corrupt: then it is left out and counted in *skipped). The folder is
// written beside `out` and renamed into place at the end, so that a failed
// run leaves nothing named `out`. `progress(done, total)` is called as files are copied.
bool write_shards(const ImageFolderListing& listing, const std::string& out, int64_t shard_bytes, bool skip_corrupt,
                  int64_t* skipped, const std::function<void(int64_t, int64_t)>& progress, std::string* error);

}  // namespace mplan::rt
