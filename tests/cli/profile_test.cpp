// `mplan profile` as a user runs it: the profile file it writes, and
// that a bad flag or an output path it cannot write fails clearly and leaves
// no file (nor a half-written one) behind.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "frontend/parse.h"
#include "tests/cli/cli_test_util.h"

namespace mplan::cli_test {
namespace {

class Profile : public MplanTest {
 protected:
  // Fails the test (and says why) unless `r` failed cleanly with a message naming `what`.
  void expect_clean_failure(const MplanRun& r, const std::string& what) {
    EXPECT_NE(r.exit_code, 0) << r.describe();
    EXPECT_EQ(r.signal, 0) << r.describe();
    EXPECT_EQ(r.err.rfind("mplan: error:", 0), 0u) << r.describe();
    EXPECT_TRUE(contains(r.err, what)) << "message does not name '" << what << "'\n" << r.describe();
    EXPECT_FALSE(contains(r.out, "wrote")) << r.describe();
  }
  // No temporary or partial file anywhere under the test's folder.
  void expect_no_temporaries() {
    for (const auto& entry : fs::recursive_directory_iterator(dir_))
      EXPECT_NE(entry.path().extension(), ".tmp") << entry.path();
  }
};

TEST_F(Profile, WritesAValidProfileOfTheModelOnTheDevice) {
  const std::string out = path("resnet50_p100.json");
  const MplanRun r = mplan({"profile", example_model("resnet50"), "--device", "p100", "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.out, "wrote " + out)) << r.out;
  ASSERT_TRUE(fs::is_regular_file(out));
  expect_no_temporaries();

  nlohmann::json p;
  ASSERT_NO_THROW(p = nlohmann::json::parse(read_file(out)));
  EXPECT_EQ(p["format"], "mplan-profile");
  EXPECT_EQ(p["version"], 1);
  EXPECT_EQ(p["device"]["name"], "p100");
  EXPECT_GT(p["device"]["memory_bytes"].get<int64_t>(), int64_t{1} << 30);
  for (const char* direction : {"host_to_device", "device_to_host"})
    EXPECT_GT(p["transfers"][direction]["bytes_per_s"].get<double>(), 0.0) << direction;

  Result<Model> model = load_model(example_model("resnet50"));
  ASSERT_TRUE(model.ok()) << model.error().to_string();
  const int64_t batch = model.value().batch;
  EXPECT_EQ(p["model"]["name"], model.value().name);
  EXPECT_EQ(p["model"]["batch"], batch);
  // Default sub-batches: pow2, i.e. 1, 2, 4, ... below the batch, then the batch.
  std::vector<int64_t> pow2;
  for (int64_t b = 1; b < batch; b *= 2) pow2.push_back(b);
  pow2.push_back(batch);
  EXPECT_EQ(p["sub_batches"].get<std::vector<int64_t>>(), pow2);

  // Every entry has every profiled sub-batch for each of its tasks, options
  // fastest first with positive times; ResNet's repeated blocks share entries.
  ASSERT_TRUE(p["layers"].is_array());
  ASSERT_FALSE(p["layers"].empty());
  std::set<std::string> covered;
  bool saw_update = false, saw_conv_choice = false;
  for (const auto& entry : p["layers"]) {
    ASSERT_TRUE(entry["signature"].is_string());
    for (const auto& name : entry["layers"]) covered.insert(name.get<std::string>());
    saw_update = saw_update || entry["tasks"].contains("update");
    for (const auto& [kind, by_sub_batch] : entry["tasks"].items()) {
      for (int64_t b : pow2) {
        const std::string key = std::to_string(b);
        ASSERT_TRUE(by_sub_batch.contains(key)) << entry["signature"] << " " << kind << " b=" << key;
        const auto& options = by_sub_batch[key];
        ASSERT_FALSE(options.empty());
        if (options.size() > 1) saw_conv_choice = true;
        double previous_ms = 0;
        for (const auto& option : options) {
          const double ms = option["time_ms"].get<double>();
          EXPECT_GT(ms, 0.0) << entry["signature"] << " " << kind;
          EXPECT_GE(ms, previous_ms) << "not fastest first: " << entry["signature"] << " " << kind;
          EXPECT_GE(option["workspace_bytes"].get<int64_t>(), 0);
          previous_ms = ms;
        }
      }
    }
  }
  EXPECT_TRUE(saw_update);
  EXPECT_TRUE(saw_conv_choice) << "no conv task offers a choice of algorithms";
  EXPECT_LT(p["layers"].size(), model.value().layers.size()) << "identical layers should share an entry";
  // Every weighted layer (each conv, batchnorm, the fc) is priced.
  for (const Layer& layer : model.value().layers)
    if (layer.op == Op::conv || layer.op == Op::linear || layer.op == Op::batchnorm)
      EXPECT_TRUE(covered.count(layer.name)) << layer.name << " is not in the profile";
}

TEST_F(Profile, TimesTheMemorySavingVariantsBesideThePlainForms) {
  // cifar_small's ReLUs before max pools and the pools have compact forms: the
  // profile prices both, and compile then finds every task it plans.
  const std::string out = path("cifar_small_p100.json");
  MplanRun r = mplan({"profile", example_model("cifar_small"), "--device", "p100", "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const nlohmann::json p = nlohmann::json::parse(read_file(out));
  std::set<std::string> compact, plain;
  for (const auto& entry : p["layers"]) {
    const std::string signature = entry["signature"].get<std::string>();
    const size_t at = signature.find(" backward=compact");
    if (at == std::string::npos) plain.insert(signature);
    else compact.insert(signature.substr(0, at));
  }
  EXPECT_EQ(compact.size(), 6u) << "the ReLU and the max pool of each of the three stages";
  for (const std::string& s : compact) EXPECT_TRUE(plain.count(s)) << s << ": its plain form is profiled too";
  r = mplan({"compile", example_model("cifar_small"), "--profile", out, "--budget", "3MiB", "-o", path("out")});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.out, "memory-saving variants")) << r.out;
}

TEST_F(Profile, ListedSubBatchesAreTheOnesProfiled) {
  const std::string out = path("p.json");
  const MplanRun r =
      mplan({"profile", example_model("cifar_small"), "--device", "k40", "--sub-batches", "8,1,2,8", "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const nlohmann::json p = nlohmann::json::parse(read_file(out));
  EXPECT_EQ(p["sub_batches"].get<std::vector<int64_t>>(), (std::vector<int64_t>{1, 2, 8}));
  for (const auto& entry : p["layers"])
    for (const auto& [kind, by_sub_batch] : entry["tasks"].items()) EXPECT_EQ(by_sub_batch.size(), 3u) << kind;
}

TEST_F(Profile, BadSubBatchesFailsAndWritesNoFile) {
  const std::string out = path("p.json");
  for (const std::string value : {"abc", "0", "1,x", "1,,2", "99999999999", "2.5", "pow3", ","}) {
    SCOPED_TRACE("--sub-batches " + value);
    const MplanRun r =
        mplan({"profile", example_model("resnet50"), "--device", "p100", "--sub-batches", value, "-o", out});
    expect_clean_failure(r, "--sub-batches");
    EXPECT_FALSE(fs::exists(out));
  }
  const MplanRun r =
      mplan({"profile", example_model("resnet50"), "--device", "p100", "--sub-batches=-4", "-o", out});
  expect_clean_failure(r, "--sub-batches");
  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(files_in(dir_).empty());
}

TEST_F(Profile, AFailedRunLeavesAnEarlierProfileUntouched) {
  const std::string out = path("p.json");
  write_file(out, "earlier profile");
  const MplanRun r =
      mplan({"profile", example_model("resnet50"), "--device", "p100", "--sub-batches", "0", "-o", out});
  expect_clean_failure(r, "--sub-batches");
  EXPECT_EQ(read_file(out), "earlier profile");
  // And a good run replaces it whole.
  const MplanRun good = mplan({"profile", example_model("cifar_small"), "--device", "p100", "-o", out});
  ASSERT_EQ(good.exit_code, 0) << good.describe();
  EXPECT_NO_THROW(nlohmann::json::parse(read_file(out)));
  expect_no_temporaries();
}

TEST_F(Profile, OutputIntoAMissingFolderFails) {
  const std::string out = path("no_such_folder/p.json");
  const MplanRun r = mplan({"profile", example_model("resnet50"), "--device", "p100", "-o", out});
  expect_clean_failure(r, out);
  EXPECT_FALSE(fs::exists(path("no_such_folder")));
  EXPECT_TRUE(files_in(dir_).empty());
}

TEST_F(Profile, UnwritableOutputFailsAndLeavesNoPartialFile) {
  // The output is an existing folder: the profile cannot replace it.
  fs::create_directories(path("taken"));
  MplanRun r = mplan({"profile", example_model("cifar_small"), "--device", "p100", "-o", path("taken")});
  expect_clean_failure(r, path("taken"));
  // The reason is the rename's (the target is a folder), not a stale "Success".
  EXPECT_TRUE(contains(r.err, "directory")) << r.err;
  EXPECT_FALSE(contains(r.err, "Success")) << r.err;
  EXPECT_TRUE(fs::is_directory(path("taken")));
  EXPECT_TRUE(files_in(path("taken")).empty());
  expect_no_temporaries();
  EXPECT_EQ(files_in(dir_), std::vector<std::string>{"taken"});

  // The output's folder is a file.
  write_file(path("plain"), "x");
  r = mplan({"profile", example_model("cifar_small"), "--device", "p100", "-o", path("plain/p.json")});
  expect_clean_failure(r, path("plain/p.json"));
  EXPECT_EQ(read_file(path("plain")), "x");
  expect_no_temporaries();

  // A folder without write permission (root may write anyway: only checked for others).
  if (geteuid() != 0) {
    fs::create_directories(path("locked"));
    fs::permissions(path("locked"), fs::perms::owner_read | fs::perms::owner_exec);
    r = mplan({"profile", example_model("cifar_small"), "--device", "p100", "-o", path("locked/p.json")});
    expect_clean_failure(r, path("locked/p.json"));
    fs::permissions(path("locked"), fs::perms::owner_all);
    EXPECT_TRUE(files_in(path("locked")).empty());
  }
}

TEST_F(Profile, MissingOrUnknownDeviceAndMissingOutputFail) {
  const std::string out = path("p.json");
  MplanRun r = mplan({"profile", example_model("resnet50"), "-o", out});
  expect_clean_failure(r, "--device");
  EXPECT_FALSE(fs::exists(out));

  r = mplan({"profile", example_model("resnet50"), "--device", "nosuch", "-o", out});
  expect_clean_failure(r, "nosuch");
  for (const char* device : {"k40", "p100"}) EXPECT_TRUE(contains(r.err, device)) << r.err;
  EXPECT_FALSE(fs::exists(out));

  r = mplan({"profile", example_model("resnet50"), "--device", "p100"});
  expect_clean_failure(r, "--output");

  r = mplan({"profile", example_model("resnet50"), "--device", "p100", "--backend", "tpu", "-o", out});
  expect_clean_failure(r, "--backend");
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(Profile, BadModelFailsWithItsLocationAndWritesNoFile) {
  write_file(path("bad.yaml"),
             "input: [3, 8, 8]\n"
             "batch: 0\n"
             "classes: 10\n"
             "layers:\n"
             "  - {op: flatten}\n"
             "  - {op: linear, out: 10}\n"
             "  - {op: softmax_xent}\n");
  const std::string out = path("p.json");
  const MplanRun r = mplan({"profile", path("bad.yaml"), "--device", "p100", "-o", out});
  expect_clean_failure(r, path("bad.yaml") + ":2:");
  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(r.out.empty()) << r.describe();
}

// Every profile committed under examples/profiles plans its model and writes
// its program: the H200's every_vision_op profile, measured when attention's
// BP1 job ran no kernel, once made codegen fail on a missing workspace. A
// profile with such 0 ms tasks says so in a warning; none may fail.
TEST_F(Profile, EveryCommittedProfileCompilesItsModel) {
  int compiled = 0;
  for (const auto& entry : fs::directory_iterator(std::string(MPLAN_SOURCE_DIR) + "/examples/profiles")) {
    const std::string name = entry.path().stem().string();  // <model>-<gpu>; model names have no '-'
    const std::string stem = name.substr(0, name.find('-'));
    SCOPED_TRACE(name);
    ASSERT_TRUE(fs::exists(example_model(stem))) << "no example model for " << entry.path();
    const MplanRun r = mplan({"compile", example_model(stem), "--profile", entry.path().string(), "--budget",
                              "16GiB", "-o", path("out-" + name)});
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_TRUE(fs::exists(path("out-" + name) + "/train.cpp")) << r.describe();
    ++compiled;
  }
  EXPECT_GE(compiled, 17);
}

}  // namespace
}  // namespace mplan::cli_test
