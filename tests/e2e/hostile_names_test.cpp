// Layer names are free text: quotes, "*/", newlines, backslashes and path
// separators must neither break the generated code nor escape the weights
// folder. A model whose every layer has such a name compiles, builds, trains
// and saves one file per tensor inside the checkpoint folder of --save.

#include <gtest/gtest.h>

#include <filesystem>

#include "frontend/parse.h"
#include "tests/e2e/e2e_util.h"

namespace mplan::e2e {
namespace {

TEST(HostileNames, GeneratedCodeCompilesAndRuns) {
  Result<Model> loaded = load_model(source_dir() + "/examples/models/every_op_nobn.yaml");
  ASSERT_TRUE(loaded.ok()) << loaded.error().to_string();
  Model model = *loaded;
  const std::vector<std::string> hostile = {
      "conv\"1\"", "*/ relu /*", "line\nbreak", "../../escape", "a/b", "a\\b", "?\?=trigraph", "back\\",
      "tab\there", "$(rm -rf x)", "'single'", "ünï", "%s%n", ".hidden", "-dash", "", "a b", "x\r\ny", "]]=]]"};
  for (size_t i = 0; i < model.layers.size(); ++i)
    model.layers[i].name = hostile[i % hostile.size()] + (i < hostile.size() ? "" : std::to_string(i));
  model.name = "evil\"*/\nmodel";
  Compiled compiled = compile_model(model, Budget::unlimited, "hostile-names");
  ASSERT_EQ(compiled.error, "");
  ASSERT_EQ(build_program(compiled.dir), "");
  const std::string save = compiled.dir + "/weights";
  std::filesystem::remove_all(save);
  RunResult run = run_program(compiled.dir, "--steps 2 --save " + save);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // The checkpoint folder holds its marker, the `latest` link and one step
  // folder; every tensor file is directly inside that, with a name of safe characters.
  const std::filesystem::path step = std::filesystem::canonical(std::filesystem::path(save) / "latest");
  EXPECT_EQ(step.parent_path(), std::filesystem::canonical(save));
  int files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(step)) {
    EXPECT_EQ(entry.path().parent_path(), step) << entry.path();
    const std::string name = entry.path().filename().string();
    EXPECT_EQ(name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"),
              std::string::npos)
        << name;
    ++files;
  }
  // 7 layers with weight and bias (conv3 has no bias), each with a momentum buffer, meta.txt, tensors.txt.
  EXPECT_EQ(files, (7 * 2 - 1) * 2 + 2);
}

}  // namespace
}  // namespace mplan::e2e
