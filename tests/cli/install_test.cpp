// Installed use (docs/robustness.md): `cmake --install` into a temporary
// prefix gives an mplan that finds its device files and the runtime relative
// to itself (PREFIX/share/mplan), not through the source tree it was built
// from; MPLAN_HOME points any mplan at another installation. The test
// compiles a model with the installed mplan and builds and runs the
// generated program against the installed runtime.

#include <cstdlib>

#include "tests/cli/cli_test_util.h"

namespace mplan::cli_test {
namespace {

const std::string kTiny =
    "name: tiny\ninput: [3, 8, 8]\nbatch: 4\nclasses: 10\nlayers:\n"
    "  - {name: c1, op: conv, out: 4, kernel: 3, pad: 1}\n  - {name: r1, op: relu}\n"
    "  - {name: f, op: flatten}\n  - {name: fc, op: linear, out: 10}\n  - {name: loss, op: softmax_xent}\n";

std::string quoted(const std::string& text) { return "'" + text + "'"; }

class Install : public MplanTest {};

TEST_F(Install, AnInstalledMplanFindsItsDevicesAndRuntimeRelativeToItself) {
  const fs::path prefix = dir_ / "prefix";
  const std::string log = (dir_ / "install.log").string();
  ASSERT_EQ(std::system(("cmake --install " + quoted(MPLAN_BINARY_DIR) + " --prefix " + quoted(prefix.string()) +
                         " > " + quoted(log) + " 2>&1")
                            .c_str()),
            0)
      << read_file(log);
  const fs::path share = prefix / "share" / "mplan";
  ASSERT_TRUE(fs::exists(prefix / "bin" / "mplan"));
  ASSERT_TRUE(fs::exists(share / "devices" / "k40.yaml"));
  ASSERT_TRUE(fs::exists(share / "runtime" / "runtime.h"));
  ASSERT_TRUE(fs::exists(share / "examples" / "models" / "cifar_small.yaml"));
  // A device only the installation has: found only if mplan looks there.
  std::string device = read_file(share / "devices" / "k40.yaml");
  device.replace(device.find("name: k40"), 9, "name: installed_only");
  write_file(share / "devices" / "installed_only.yaml", device);
  write_file(path("tiny.yaml"), kTiny);

  const std::string installed = (prefix / "bin" / "mplan").string();
  const MplanRun c = run_mplan_at(installed, {"compile", path("tiny.yaml"), "--device", "installed_only", "--budget",
                                              "1MiB", "-o", path("out")});
  ASSERT_EQ(c.exit_code, 0) << c.describe();
  const std::string cmake_lists = read_file(path("out/CMakeLists.txt"));
  EXPECT_TRUE(contains(cmake_lists, (share / "runtime").string())) << cmake_lists.substr(0, 2000);
  EXPECT_FALSE(contains(cmake_lists, std::string(MPLAN_SOURCE_DIR) + "/runtime")) << "the source tree leaked in";

  // The generated program builds against the installed runtime and runs.
  const std::string build_log = path("build.log");
  ASSERT_EQ(std::system(("cmake -S " + quoted(path("out")) + " -B " + quoted(path("out/build")) + " > " +
                         quoted(build_log) + " 2>&1 && cmake --build " + quoted(path("out/build")) + " -j2 >> " +
                         quoted(build_log) + " 2>&1")
                            .c_str()),
            0)
      << read_file(build_log);
  const std::string run_log = path("run.log");
  EXPECT_EQ(std::system((quoted(path("out/build/train")) + " --steps 1 > " + quoted(run_log) + " 2>&1").c_str()), 0)
      << read_file(run_log);
  EXPECT_TRUE(contains(read_file(run_log), "step 1")) << read_file(run_log);

  // MPLAN_HOME points the build tree's mplan at the installation.
  MplanRun without = mplan({"bounds", path("tiny.yaml"), "--device", "installed_only"});
  EXPECT_EQ(without.exit_code, 2) << without.describe();
  ::setenv("MPLAN_HOME", prefix.c_str(), 1);
  MplanRun with = mplan({"bounds", path("tiny.yaml"), "--device", "installed_only"});
  ::unsetenv("MPLAN_HOME");
  EXPECT_EQ(with.exit_code, 0) << with.describe();
}

}  // namespace
}  // namespace mplan::cli_test
