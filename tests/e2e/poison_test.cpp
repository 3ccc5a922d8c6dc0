// The debug poison has teeth: with one event wait removed from a generated
// program, the run is caught. In debug mode (--debug-poison) the arena starts
// poisoned and every dead region is refilled with NaN; --debug-copy-delay-ms
// makes every copy start late, so the compute step that lost its wait reads
// the region before the copy lands and the loss turns NaN.

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "tests/e2e/e2e_util.h"

namespace mplan::e2e {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(Poison, RemovedWaitIsCaught) {
  // The intact program passes in debug mode with the same delays.
  Compiled intact = compile_model("examples/models/cifar_small.yaml", Budget::unlimited, "poison-intact");
  ASSERT_EQ(intact.error, "");
  ASSERT_EQ(build_program(intact.dir), "");
  RunResult ok = run_program(intact.dir, "--steps 2 --debug-poison --debug-copy-delay-ms 50");
  ASSERT_EQ(ok.exit_code, 0) << ok.output;

  // The same program without the compute stream's wait for round 0's input load.
  Compiled broken = compile_model("examples/models/cifar_small.yaml", Budget::unlimited, "poison-missing-wait");
  ASSERT_EQ(broken.error, "");
  const std::string path = broken.dir + "/train.cpp";
  std::string text = read_file(path);
  const std::regex wait(R"(\n *p\.wait\(p\.compute\(\)\.stream, t\.ev_load_X\);\n)");
  std::smatch match;
  ASSERT_TRUE(std::regex_search(text, match, wait)) << "no compute wait for the load of X round 0";
  std::printf("removing:%s", match.str().c_str());
  text = match.prefix().str() + "\n" + match.suffix().str();
  { std::ofstream(path) << text; }
  ASSERT_EQ(build_program(broken.dir), "");
  RunResult caught = run_program(broken.dir, "--steps 2 --debug-poison --debug-copy-delay-ms 50");
  std::printf("%s", caught.output.c_str());
  EXPECT_NE(caught.exit_code, 0) << caught.output;
  EXPECT_NE(caught.output.find("not finite"), std::string::npos) << caught.output;
}

}  // namespace
}  // namespace mplan::e2e
