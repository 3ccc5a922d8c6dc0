#include "profiler/install_paths.h"

#include <unistd.h>

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

}  // namespace mplan
