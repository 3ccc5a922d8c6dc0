#include "codegen/output_dir.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>  // renameat2 (glibc 2.28, _GNU_SOURCE)
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>

namespace mplan::codegen {
namespace {

namespace fs = std::filesystem;

constexpr const char* kNewInfix = ".mplan-new-";
constexpr const char* kOldInfix = ".mplan-old-";

Error usage_error(const std::string& dir, const std::string& message) {
  return Error{SourceLocation{}, fmt::format("-o '{}': {}", dir, message), ErrorKind::usage};
}
Error io_error(const std::string& dir, const std::string& message) {
  return Error{SourceLocation{}, fmt::format("-o '{}': {}", dir, message), ErrorKind::io};
}

struct Target {
  fs::path dir;     // absolute, symlinks of existing parts resolved
  fs::path parent;  // the folder it is in
  std::string name;
};

// `dir` as an absolute path without trailing slashes, "." or "..", with the
// symbolic links of its existing part resolved (a link to a folder swaps the
// folder it names, not the link).
Result<Target> resolve(const std::string& text) {
  if (text.empty()) return usage_error(text, "the output folder is empty");
  std::error_code ec;
  fs::path absolute = fs::absolute(fs::path(text), ec);
  if (ec) return io_error(text, "cannot resolve the path: " + ec.message());
  fs::path resolved = fs::weakly_canonical(absolute.lexically_normal(), ec);
  if (ec) return io_error(text, "cannot resolve the path: " + ec.message());
  std::string normal = resolved.string();
  while (normal.size() > 1 && normal.back() == '/') normal.pop_back();
  Target t;
  t.dir = fs::path(normal);
  t.name = t.dir.filename().string();
  t.parent = t.dir.parent_path();
  if (t.name.empty() || t.name == "." || t.name == ".." || t.parent.empty())
    return usage_error(text, "cannot replace the root folder");
  return t;
}

bool is_prefix(const fs::path& ancestor, const fs::path& path) {
  auto m = std::mismatch(ancestor.begin(), ancestor.end(), path.begin(), path.end());
  return m.first == ancestor.end();
}

bool process_alive(long pid) {
  if (pid <= 0) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

// fsync of a folder, so that renames in it are durable.
void sync_folder(const fs::path& folder) {
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}


// An output folder's marker file: the explanation, "token <hex>" (the run
// that wrote it), then one line per file mplan wrote.
struct Marker {
  bool read = false;
  std::string token;
  std::set<std::string> top_level_names;
};
Marker read_marker(const fs::path& folder) {
  Marker m;
  FILE* file = std::fopen((folder / kOutputMarkerFile).c_str(), "r");
  if (file == nullptr) return m;
  char line[4096];
  int number = 0;
  while (std::fgets(line, sizeof line, file) != nullptr) {
    std::string text(line);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    ++number;
    if (number == 1) continue;  // the explanation
    if (number == 2) {
      if (text.rfind("token ", 0) == 0) m.token = text.substr(6);
      continue;
    }
    if (!text.empty()) m.top_level_names.insert(fs::path(text).begin()->string());
  }
  m.read = std::feof(file) != 0;
  std::fclose(file);
  return m;
}

// Moves the entries of `from` that `to` does not have, and that mplan did not
// write there (a build folder, the user's own files), into `to`.
void carry_over(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  const std::set<std::string> own = read_marker(from).top_level_names;
  for (const auto& entry : fs::directory_iterator(from, ec)) {
    if (own.count(entry.path().filename().string())) continue;
    const fs::path into = to / entry.path().filename();
    std::error_code exists_ec;
    if (fs::symlink_status(into, exists_ec).type() != fs::file_type::not_found) continue;
    std::error_code rename_ec;
    fs::rename(entry.path(), into, rename_ec);
  }
}

// Staging folders of `target` that killed runs left: their path, whether
// swapped out ("old"), the process and (new ones) the run's token.
struct Leftover {
  fs::path path;
  bool old = false;
  long pid = 0;
  std::string token;
};
std::vector<Leftover> find_leftovers(const Target& t) {
  std::vector<Leftover> found;
  std::error_code ec;
  const std::string prefix = "." + t.name;
  for (const auto& entry : fs::directory_iterator(t.parent, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string rest = name.substr(prefix.size());
    const bool is_new = rest.rfind(kNewInfix, 0) == 0, is_old = rest.rfind(kOldInfix, 0) == 0;
    if (!is_new && !is_old) continue;
    std::string id = rest.substr(std::strlen(kNewInfix));  // both infixes have the same length
    std::string token;
    if (const size_t dash = id.find('-'); dash != std::string::npos) {
      token = id.substr(dash + 1);
      id = id.substr(0, dash);
    }
    if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos || id.size() > 9) continue;
    found.push_back({entry.path(), is_old, std::stol(id), token});
  }
  return found;
}

// Finishes or undoes what a killed run left (see output_dir.h). A "new"
// folder whose marker carries its own token (or none yet) is an unfinished
// output: deleted. One whose marker carries another token is the previous
// output a kill caught right after the swap: handled as an "old" one.
void recover_leftovers(const Target& t) {
  for (const Leftover& l : find_leftovers(t)) {
    if (l.pid == static_cast<long>(::getpid()) || process_alive(l.pid)) continue;
    std::error_code ec;
    if (!l.old) {
      const Marker m = read_marker(l.path);
      if (!m.read || m.token == l.token) {
        fs::remove_all(l.path, ec);
        continue;
      }
    }
    if (fs::symlink_status(t.dir, ec).type() == fs::file_type::not_found) {
      fs::rename(l.path, t.dir, ec);  // killed between the two renames of the fallback: put it back
      continue;
    }
    carry_over(l.path, t.dir);
    fs::remove_all(l.path, ec);
  }
  sync_folder(t.parent);
}

// A token that tells this run's staging folder from any other.
std::string new_token() {
  std::random_device random;
  return fmt::format("{:08x}{:08x}", random(), random());
}

// Whether `path` is a safe relative path inside the folder.
bool is_inside(const std::string& path) {
  if (path.empty() || path.front() == '/') return false;
  for (const auto& part : fs::path(path))
    if (part == ".." || part == ".") return false;
  return true;
}

}  // namespace

int write_new_file_durably(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  size_t done = 0;
  int error = 0;
  while (done < text.size()) {
    const ssize_t wrote = ::write(fd, text.data() + done, text.size() - done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) {
      error = wrote < 0 ? errno : ENOSPC;
      break;
    }
    done += static_cast<size_t>(wrote);
  }
  if (error == 0 && ::fsync(fd) != 0) error = errno;
  if (::close(fd) != 0 && error == 0) error = errno;
  return error;
}

std::vector<std::string> leftover_staging_folders(const std::string& dir) {
  std::vector<std::string> out;
  Result<Target> t = resolve(dir);
  if (!t) return out;
  for (const Leftover& l : find_leftovers(*t)) out.push_back(l.path.string());
  return out;
}

Status replace_output_folder(const std::string& dir_text, const std::vector<OutputFile>& files) {
  Result<Target> resolved = resolve(dir_text);
  if (!resolved) return resolved.error();
  const Target& t = *resolved;
  std::error_code ec;

  // The current folder, or one above it, would vanish under the user's shell.
  const fs::path cwd = fs::current_path(ec);
  if (!ec && is_prefix(t.dir, fs::weakly_canonical(cwd, ec)))
    return usage_error(dir_text,
                       "is the current folder or one above it; mplan replaces the output folder as a whole, so "
                       "run it from outside (e.g. -o ../" + t.name + ")");

  const fs::file_status status = fs::symlink_status(t.dir, ec);
  const bool exists = status.type() != fs::file_type::not_found;
  if (exists && !fs::is_directory(status)) return usage_error(dir_text, "exists and is not a folder");
  if (exists) {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(t.dir, ec)) names.push_back(entry.path().filename().string());
    if (ec) return io_error(dir_text, "cannot list the folder: " + ec.message());
    const bool ours = std::find(names.begin(), names.end(), kOutputMarkerFile) != names.end() ||
                      std::find(names.begin(), names.end(), "plan.json") != names.end();
    if (!names.empty() && !ours) {
      std::sort(names.begin(), names.end());
      std::string shown;
      for (size_t i = 0; i < names.size() && i < 3; ++i) shown += (i ? ", " : "") + names[i];
      if (names.size() > 3) shown += fmt::format(", ... ({} entries)", names.size());
      return usage_error(dir_text, fmt::format("holds files mplan did not write ({}); mplan replaces its output "
                                               "folder as a whole, so give a new or empty folder, or the folder "
                                               "of an earlier `mplan compile`",
                                               shown));
    }
  }
  // Missing parents are created, as `mkdir -p` would.
  if (!fs::is_directory(t.parent, ec)) {
    fs::create_directories(t.parent, ec);
    if (ec || !fs::is_directory(t.parent))
      return io_error(dir_text, fmt::format("cannot create its parent folder '{}': {}", t.parent.string(),
                                            ec ? ec.message() : std::string("it is not a folder")));
  }
  for (const OutputFile& f : files)
    if (!is_inside(f.path))
      return Error{SourceLocation{}, "internal error: output file '" + f.path + "' is not inside the folder",
                   ErrorKind::internal};

  recover_leftovers(t);

  const std::string pid = std::to_string(static_cast<long>(::getpid()));
  const std::string token = new_token();
  const fs::path staging = t.parent / ("." + t.name + kNewInfix + pid + "-" + token);
  const fs::path old = t.parent / ("." + t.name + kOldInfix + pid);
  fs::remove_all(old, ec);
  if (::mkdir(staging.c_str(), 0755) != 0)
    return io_error(dir_text, fmt::format("cannot create the temporary folder '{}' beside it: {}", staging.string(),
                                          std::strerror(errno)));
  auto abandon = [&](const std::string& message) {
    std::error_code ignored;
    fs::remove_all(staging, ignored);
    return io_error(dir_text, message);
  };
  // The marker first: it names this run (its token), which tells a staging
  // folder a kill interrupted from a previous output a kill swapped out.
  std::string marker = "This folder was written by `mplan compile`; the next compile into it replaces these files:\n";
  marker += "token " + token + "\n";
  for (const OutputFile& f : files) marker += f.path + "\n";
  if (int error = write_new_file_durably(staging / kOutputMarkerFile, marker); error != 0)
    return abandon(fmt::format("cannot write '{}': {}; the previous output is unchanged", kOutputMarkerFile,
                               std::strerror(error)));
  std::set<fs::path> made;
  for (const OutputFile& f : files) {
    const fs::path path = staging / f.path;
    if (path.has_parent_path() && path.parent_path() != staging && !made.count(path.parent_path())) {
      fs::create_directories(path.parent_path(), ec);
      if (ec) return abandon(fmt::format("cannot create '{}': {}", f.path, ec.message()));
      made.insert(path.parent_path());
    }
    if (int error = write_new_file_durably(path, f.text); error != 0)
      return abandon(fmt::format("cannot write '{}': {}; the previous output is unchanged", f.path,
                                 std::strerror(error)));
  }
  for (const fs::path& folder : made) sync_folder(folder);
  sync_folder(staging);

  if (!exists) {
    if (::rename(staging.c_str(), t.dir.c_str()) != 0)
      return abandon(fmt::format("cannot move the new output into place: {}", std::strerror(errno)));
    sync_folder(t.parent);
    return Ok{};
  }
  // One atomic step: DIR now holds the new output, `staging` the previous one.
  if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, t.dir.c_str(), RENAME_EXCHANGE) == 0) {
    sync_folder(t.parent);
    fs::path previous = staging;
    if (::rename(staging.c_str(), old.c_str()) == 0) previous = old;
    carry_over(previous, t.dir);
    fs::remove_all(previous, ec);
    sync_folder(t.dir);
    sync_folder(t.parent);
    return Ok{};
  }
  if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
    return abandon(fmt::format("cannot swap the new output in: {}; the previous output is unchanged",
                               std::strerror(errno)));
  // A file system without RENAME_EXCHANGE: two renames; a kill between them
  // leaves DIR missing and `old` complete, which the next run puts back.
  if (::rename(t.dir.c_str(), old.c_str()) != 0)
    return abandon(fmt::format("cannot move the previous output aside: {}; it is unchanged", std::strerror(errno)));
  if (::rename(staging.c_str(), t.dir.c_str()) != 0) {
    const int error = errno;
    ::rename(old.c_str(), t.dir.c_str());
    return abandon(fmt::format("cannot move the new output into place: {}; the previous output is unchanged",
                               std::strerror(error)));
  }
  sync_folder(t.parent);
  carry_over(old, t.dir);
  fs::remove_all(old, ec);
  sync_folder(t.parent);
  return Ok{};
}

}  // namespace mplan::codegen
