#pragma once
// Runs the built `mplan` (MPLAN_EXE) as a user does: arguments as a list (no
// shell, so paths and values reach it verbatim), stdout and stderr captured
// apart, and the exit code. Each test gets a fresh temporary folder.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace mplan::cli_test {

namespace fs = std::filesystem;

struct MplanRun {
  int exit_code = -1;  // -1: did not exit normally (killed by a signal: a crash)
  int signal = 0;      // the signal that ended it, if any
  std::string out;     // stdout
  std::string err;     // stderr
  // For failure messages.
  std::string describe() const {
    return "exit " + std::to_string(exit_code) + (signal ? " signal " + std::to_string(signal) : "") +
           "\n--- stdout ---\n" + out + "--- stderr ---\n" + err;
  }
};

inline std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline void write_file(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// Path of a shipped example model, e.g. example_model("vgg16").
inline std::string example_model(const std::string& stem) {
  return std::string(MPLAN_SOURCE_DIR) + "/examples/models/" + stem + ".yaml";
}

// Runs `exe args...` with stdout and stderr sent to files in `scratch`
// (files, not pipes: no deadlock whatever the output size).
inline MplanRun run_mplan_at(const std::string& exe, const std::vector<std::string>& args, const fs::path& scratch) {
  MplanRun result;
  const std::string out_path = (scratch / ".mplan_stdout").string();
  const std::string err_path = (scratch / ".mplan_stderr").string();
  std::vector<std::string> argv_text{exe};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    result.err = "posix_spawn failed: " + std::to_string(spawned);
    return result;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  result.out = read_file(out_path);
  result.err = read_file(err_path);
  fs::remove(out_path);
  fs::remove(err_path);
  return result;
}

// Runs the built `mplan args...` (MPLAN_EXE).
inline MplanRun run_mplan(const std::vector<std::string>& args, const fs::path& scratch) {
  return run_mplan_at(MPLAN_EXE, args, scratch);
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A fixture with a fresh, empty temporary folder per test, removed afterwards.
class MplanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("mplan_ct_" + std::to_string(getpid()) + "_" + info->test_suite_name() + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ignored;
    // Give back write permission first, in case a test took it away.
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add, ignored);
    for (const auto& entry : fs::recursive_directory_iterator(dir_, ignored))
      if (entry.is_directory(ignored))
        fs::permissions(entry.path(), fs::perms::owner_all, fs::perm_options::add, ignored);
    fs::remove_all(dir_, ignored);
  }

  MplanRun mplan(std::initializer_list<std::string> args) const { return run_mplan(args, dir_); }
  MplanRun mplan(const std::vector<std::string>& args) const { return run_mplan(args, dir_); }
  MplanRun run_mplan_at(const std::string& exe, const std::vector<std::string>& args) const {
    return cli_test::run_mplan_at(exe, args, dir_);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // The files in the temporary folder, apart from the captured outputs.
  std::vector<std::string> files_in(const fs::path& folder) const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(folder)) {
      const std::string name = entry.path().filename().string();
      if (name != ".mplan_stdout" && name != ".mplan_stderr") names.push_back(name);
    }
    return names;
  }

  fs::path dir_;
};

}  // namespace mplan::cli_test
