#include "runtime/image_folder.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "runtime/image_decode.h"
#include "runtime/json_lite.h"

namespace mplan::rt {
namespace fs = std::filesystem;
namespace {

bool is_image_name(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* ext : {".jpg", ".jpeg", ".png"}) {
    const size_t n = std::strlen(ext);
    if (lower.size() > n && lower.compare(lower.size() - n, n, ext) == 0) return true;
  }
  return false;
}

// The whole of a file, or false with *error naming it.
bool read_file(const std::string& path, std::vector<uint8_t>* bytes, std::string* error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = path + ": cannot be read (" + std::strerror(errno) + ")";
    return false;
  }
  bytes->clear();
  uint8_t buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = path + ": cannot be read (" + std::strerror(errno) + ")";
      ::close(fd);
      return false;
    }
    if (n == 0) break;
    bytes->insert(bytes->end(), buffer, buffer + n);
  }
  ::close(fd);
  return true;
}

class FolderFiles final : public ImageFiles {
 public:
  explicit FolderFiles(ImageFolderListing listing) : listing_(std::move(listing)) {}
  int64_t count() const override { return static_cast<int64_t>(listing_.files.size()); }
  bool read(int64_t i, std::vector<uint8_t>* bytes, std::string* error) const override {
    return read_file(name(i), bytes, error);
  }
  std::string name(int64_t i) const override { return listing_.dir + "/" + listing_.files[static_cast<size_t>(i)]; }

 private:
  ImageFolderListing listing_;
};

class ShardFiles final : public ImageFiles {
 public:
  ~ShardFiles() override {
    for (int fd : fds_)
      if (fd >= 0) ::close(fd);
  }
  int64_t count() const override { return static_cast<int64_t>(shard_.size()); }
  bool read(int64_t i, std::vector<uint8_t>* bytes, std::string* error) const override {
    const auto at = static_cast<size_t>(i);
    bytes->resize(static_cast<size_t>(size_[at]));
    size_t done = 0;
    while (done < bytes->size()) {
      const ssize_t n = ::pread(fds_[static_cast<size_t>(shard_[at])], bytes->data() + done, bytes->size() - done,
                                static_cast<off_t>(offset_[at] + static_cast<int64_t>(done)));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const std::string why = n < 0 ? " (" + std::string(std::strerror(errno)) + ")" : ": the shard ends early";
        *error = shard_path(shard_[at]) + ": sample " + std::to_string(i) + " (" + name(i) + ") cannot be read" + why;
        return false;
      }
      done += static_cast<size_t>(n);
    }
    return true;
  }
  std::string name(int64_t i) const override {
    return files_.empty() ? shard_path(shard_[static_cast<size_t>(i)]) + " sample " + std::to_string(i)
                          : dir_ + " (from " + files_[static_cast<size_t>(i)] + ")";
  }
  std::string shard_path(int32_t s) const {
    char name[32];
    std::snprintf(name, sizeof name, "/shard-%05d.bin", s);
    return dir_ + name;
  }

  std::string dir_;
  std::vector<int> fds_;
  std::vector<int32_t> shard_;
  std::vector<int64_t> offset_, size_;
  std::vector<std::string> files_;
};

std::vector<std::string> read_lines(const std::string& path, bool* ok) {
  std::ifstream in(path);
  *ok = static_cast<bool>(in);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool write_text(const std::string& path, const std::string& text, std::string* error) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    *error = path + ": cannot be written";
    return false;
  }
  return true;
}

std::string shard_name(int32_t s) {
  char name[32];
  std::snprintf(name, sizeof name, "shard-%05d.bin", s);
  return name;
}

}  // namespace

bool list_image_folder(const std::string& dir, ImageFolderListing* out, std::string* error) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    *error = dir + ": not a folder";
    return false;
  }
  out->dir = dir;
  out->classes.clear();
  out->files.clear();
  out->labels.clear();
  out->ignored = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.empty() && name[0] != '.' && it->is_directory(ec)) out->classes.push_back(name);
  }
  if (ec) {
    *error = dir + ": cannot be read (" + ec.message() + ")";
    return false;
  }
  if (out->classes.empty()) {
    *error = dir + ": has neither images.npy and labels.npy, nor shards.json, nor class folders of images "
                   "(an image folder has one folder per class)";
    return false;
  }
  std::sort(out->classes.begin(), out->classes.end());
  for (size_t c = 0; c < out->classes.size(); ++c) {
    const std::string folder = dir + "/" + out->classes[c];
    std::vector<std::string> names;
    for (fs::recursive_directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (it->is_directory(ec)) continue;
      const std::string relative = fs::relative(it->path(), dir, ec).string();
      if (!name.empty() && name[0] != '.' && is_image_name(name)) names.push_back(relative);
      else ++out->ignored;
    }
    if (ec) {
      *error = folder + ": cannot be read (" + ec.message() + ")";
      return false;
    }
    if (names.empty()) {
      *error = folder + ": an empty class folder (no .jpg, .jpeg or .png file): every class needs an image";
      return false;
    }
    std::sort(names.begin(), names.end());
    for (std::string& name : names) {
      out->files.push_back(std::move(name));
      out->labels.push_back(static_cast<int32_t>(c));
    }
  }
  return true;
}

bool is_shard_folder(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir + "/shards.json", ec);
}

std::shared_ptr<ImageFiles> open_image_folder(const ImageFolderListing& listing) {
  return std::make_shared<FolderFiles>(listing);
}

std::shared_ptr<ImageFiles> open_shards(const std::string& dir, std::vector<int32_t>* labels,
                                        std::vector<std::string>* classes, std::string* error) {
  std::vector<uint8_t> text;
  if (!read_file(dir + "/shards.json", &text, error)) return nullptr;
  json::Value header;
  std::string message;
  int64_t samples = 0, shards = 0, version = 0;
  const json::Value *format = nullptr, *v = nullptr, *n = nullptr, *s = nullptr;
  if (!json::parse(std::string(text.begin(), text.end()), &header, &message) ||
      (format = header.find("format")) == nullptr || format->text != "mplan-shards" ||
      (v = header.find("version")) == nullptr || !v->as_int(&version) || version != 1 ||
      (n = header.find("samples")) == nullptr || !n->as_int(&samples) || samples < 1 ||
      (s = header.find("shards")) == nullptr || !s->as_int(&shards) || shards < 1 || shards > 1000000) {
    *error = dir + "/shards.json: expected {\"format\": \"mplan-shards\", \"version\": 1, \"samples\": N >= 1, "
                   "\"shards\": S >= 1}" + (message.empty() ? "" : " (" + message + ")");
    return nullptr;
  }
  NpyArray index, label_array;
  if (!npy_read(dir + "/index.npy", &index, error) || !npy_read(dir + "/labels.npy", &label_array, error))
    return nullptr;
  if (index.type != NpyType::i32 || index.shape != std::vector<int64_t>{samples, 2}) {
    *error = dir + "/index.npy: expected int32 of shape (" + std::to_string(samples) + ", 2) for shards.json's " +
             std::to_string(samples) + " samples";
    return nullptr;
  }
  if (label_array.type != NpyType::i32 || label_array.shape != std::vector<int64_t>{samples}) {
    *error = dir + "/labels.npy: expected int32 of shape (" + std::to_string(samples) + ",)";
    return nullptr;
  }
  bool ok = false;
  *classes = read_lines(dir + "/classes.txt", &ok);
  if (!ok || classes->empty()) {
    *error = dir + "/classes.txt: missing or empty (the class names, one per line)";
    return nullptr;
  }
  auto files = std::make_shared<ShardFiles>();
  files->dir_ = dir;
  files->files_ = read_lines(dir + "/files.txt", &ok);
  if (!ok || static_cast<int64_t>(files->files_.size()) != samples) files->files_.clear();
  std::vector<int64_t> shard_bytes(static_cast<size_t>(shards), 0);
  for (int32_t k = 0; k < shards; ++k) {
    const int fd = ::open(files->shard_path(k).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      *error = files->shard_path(k) + ": cannot be read (" + std::strerror(errno) + ")";
      return nullptr;
    }
    files->fds_.push_back(fd);
    std::error_code ec;
    shard_bytes[static_cast<size_t>(k)] = static_cast<int64_t>(fs::file_size(files->shard_path(k), ec));
  }
  std::vector<int64_t> end(static_cast<size_t>(shards), 0);
  for (int64_t i = 0; i < samples; ++i) {
    const int32_t shard = index.i32()[2 * i], bytes = index.i32()[2 * i + 1];
    const int32_t label = label_array.i32()[i];
    if (shard < 0 || shard >= shards || bytes < 1 || label < 0 || label >= static_cast<int32_t>(classes->size())) {
      *error = dir + "/index.npy or labels.npy: sample " + std::to_string(i) + " names shard " +
               std::to_string(shard) + ", " + std::to_string(bytes) + " bytes, class " + std::to_string(label) +
               ": out of range";
      return nullptr;
    }
    files->shard_.push_back(shard);
    files->offset_.push_back(end[static_cast<size_t>(shard)]);
    files->size_.push_back(bytes);
    end[static_cast<size_t>(shard)] += bytes;
  }
  for (int32_t k = 0; k < shards; ++k)
    if (end[static_cast<size_t>(k)] != shard_bytes[static_cast<size_t>(k)]) {
      *error = files->shard_path(k) + ": holds " + std::to_string(shard_bytes[static_cast<size_t>(k)]) +
               " bytes, index.npy says " + std::to_string(end[static_cast<size_t>(k)]);
      return nullptr;
    }
  labels->assign(label_array.i32(), label_array.i32() + samples);
  return files;
}

bool write_shards(const ImageFolderListing& listing, const std::string& out, int64_t shard_bytes, bool skip_corrupt,
                  int64_t* skipped, const std::function<void(int64_t, int64_t)>& progress, std::string* error) {
  std::error_code ec;
  if (fs::exists(out, ec)) {
    *error = out + ": exists; give a new folder for the shards";
    return false;
  }
  const fs::path target = fs::path(out).lexically_normal();
  std::random_device random;
  const fs::path temporary = target.parent_path() / ("." + target.filename().string() + ".mplan-new-" +
                                                     std::to_string(::getpid()) + "-" + std::to_string(random()));
  fs::create_directories(temporary, ec);
  if (ec) {
    *error = temporary.string() + ": cannot be created (" + ec.message() + ")";
    return false;
  }
  auto fail = [&](const std::string& message) {
    *error = message;
    fs::remove_all(temporary, ec);
    return false;
  };
  *skipped = 0;
  std::vector<int32_t> index, labels;
  std::string files;
  int32_t shard = 0;
  int64_t in_shard = 0;
  std::ofstream current(temporary / shard_name(0), std::ios::binary | std::ios::trunc);
  std::vector<uint8_t> bytes;
  const auto total = static_cast<int64_t>(listing.files.size());
  for (int64_t i = 0; i < total; ++i) {
    const std::string path = listing.dir + "/" + listing.files[static_cast<size_t>(i)];
    std::string problem;
    int64_t height = 0, width = 0;
    if (!read_file(path, &bytes, &problem)) return fail(problem);
    if (bytes.size() > static_cast<size_t>(INT32_MAX)) return fail(path + ": larger than 2 GiB");
    if (!read_image_size(bytes.data(), bytes.size(), &height, &width, &problem)) {
      if (!skip_corrupt) return fail(path + ": " + problem + " (pass --skip-corrupt to leave such files out)");
      ++*skipped;
      continue;
    }
    if (in_shard > 0 && in_shard + static_cast<int64_t>(bytes.size()) > shard_bytes) {
      current.close();
      if (!current) return fail((temporary / shard_name(shard)).string() + ": cannot be written");
      current.open(temporary / shard_name(++shard), std::ios::binary | std::ios::trunc);
      in_shard = 0;
    }
    current.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!current) return fail((temporary / shard_name(shard)).string() + ": cannot be written");
    in_shard += static_cast<int64_t>(bytes.size());
    index.push_back(shard);
    index.push_back(static_cast<int32_t>(bytes.size()));
    labels.push_back(listing.labels[static_cast<size_t>(i)]);
    files += listing.files[static_cast<size_t>(i)] + "\n";
    if (progress) progress(i + 1, total);
  }
  current.close();
  if (!current) return fail((temporary / shard_name(shard)).string() + ": cannot be written");
  const auto samples = static_cast<int64_t>(labels.size());
  if (samples == 0) return fail(listing.dir + ": no image could be read");
  std::string classes;
  for (const std::string& name : listing.classes) classes += name + "\n";
  const std::string header = "{\"format\": \"mplan-shards\", \"version\": 1, \"samples\": " +
                             std::to_string(samples) + ", \"shards\": " + std::to_string(shard + 1) + "}\n";
  if (!npy_write_i32((temporary / "index.npy").string(), index.data(), {samples, 2}, error) ||
      !npy_write_i32((temporary / "labels.npy").string(), labels.data(), {samples}, error) ||
      !write_text((temporary / "classes.txt").string(), classes, error) ||
      !write_text((temporary / "files.txt").string(), files, error) ||
      !write_text((temporary / "shards.json").string(), header, error))
    return fail(*error);
  fs::rename(temporary, target, ec);
  if (ec) return fail(out + ": cannot be created (" + ec.message() + ")");
  return true;
}

}  // namespace mplan::rt
