#include "profiler/install_paths.h"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#ifndef MPLAN_SOURCE_DIR
#define MPLAN_SOURCE_DIR "."
#endif

namespace mplan {
namespace {

namespace fs = std::filesystem;

bool is_folder(const fs::path& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

// An install prefix (share/mplan) or a source checkout under `root`.
bool layout_at(const fs::path& root, const std::string& found_by, InstallPaths* out) {
  const fs::path share = root / "share" / "mplan";
  if (is_folder(share / "devices")) {
    *out = {(share / "devices").string(), (share / "runtime").string(), (share / "examples" / "models").string(),
            found_by};
    return true;
  }
  if (is_folder(root / "examples" / "devices") && is_folder(root / "runtime")) {
    *out = {(root / "examples" / "devices").string(), (root / "runtime").string(),
            (root / "examples" / "models").string(), found_by};
    return true;
  }
  return false;
}

InstallPaths resolve() {
  InstallPaths paths;
  if (const char* home = std::getenv("MPLAN_HOME"); home != nullptr && *home != '\0') {
    if (layout_at(fs::path(home), "MPLAN_HOME", &paths)) return paths;
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && exe.has_parent_path() && layout_at(exe.parent_path().parent_path(), "the executable's folder", &paths))
    return paths;
  const fs::path source(MPLAN_SOURCE_DIR);
  paths = {(source / "examples" / "devices").string(), (source / "runtime").string(),
           (source / "examples" / "models").string(), "the source tree"};
  return paths;
}

}  // namespace

const InstallPaths& install_paths() {
  static const InstallPaths paths = resolve();
  return paths;
}

std::vector<std::string> yaml_names_in(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error))
    if (entry.path().extension() == ".yaml") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

Result<std::string> shipped_file(const std::string& name_or_path, const std::string& dir, const std::string& kind) {
  std::error_code error;
  if (fs::is_regular_file(name_or_path, error)) return name_or_path;
  const std::string shipped = dir + "/" + name_or_path + ".yaml";
  if (name_or_path.find('/') == std::string::npos && fs::is_regular_file(shipped, error)) return shipped;
  std::string names;
  for (const std::string& name : yaml_names_in(dir)) names += (names.empty() ? "" : ", ") + name;
  return Error{{}, fmt::format("{} '{}': no such file, and not a {} name (expected a path to a {} file or one of: {})",
                               kind, name_or_path, kind, kind, names.empty() ? "none found in " + dir : names),
               ErrorKind::usage};
}

}  // namespace mplan
