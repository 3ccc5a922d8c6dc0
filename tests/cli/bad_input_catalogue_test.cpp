// The bad-input catalogue (docs/robustness.md): every input file
// mplan reads (model, device file, profile, plan) and every flag of every
// command, under careless and hostile values, each with the exit code and the
// message it must give (README, "Exit codes": 1 bad input, 2 usage,
// 3 infeasible, 4 I/O). Every case must end with "mplan: error: ...", never a
// signal, never a partial output. One ctest entry per case.

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_test_util.h"

namespace mplan::cli_test {
namespace {

using Json = nlohmann::ordered_json;

// ---- stock inputs -------------------------------------------------------------

const std::string kGood =
    "name: tiny\ninput: [3, 8, 8]\nbatch: 4\nclasses: 10\nlayers:\n"
    "  - {name: c1, op: conv, out: 4, kernel: 3, pad: 1}\n  - {name: r1, op: relu}\n"
    "  - {name: p1, op: pool, mode: max, kernel: 2}\n  - {name: f, op: flatten}\n"
    "  - {name: fc, op: linear, out: 10}\n  - {name: loss, op: softmax_xent}\n";
const std::string kHeader = "name: tiny\ninput: [3, 8, 8]\nbatch: 4\nclasses: 10\n";
const std::string kTail = "  - {op: flatten}\n  - {op: linear, out: 10}\n  - {op: softmax_xent}\n";

// A model whose layers are `layers` (YAML lines).
std::string model(const std::string& layers) { return kHeader + "layers:\n" + layers + kTail; }

// The K40's device file, as shipped.
const std::string& stock_device() {
  static const std::string text = read_file(std::string(MPLAN_SOURCE_DIR) + "/examples/devices/k40.yaml");
  return text;
}

// Produced once per run (when a case first needs them) by the built mplan: a
// profile and a plan of kGood.
struct Stock {
  std::string profile, plan;
};
const Stock& stock() {
  static const Stock s = [] {
    Stock out;
    const fs::path dir = fs::temp_directory_path() / ("mplan_catalogue_stock_" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    write_file(dir / "good.yaml", kGood);
    MplanRun p = run_mplan({"profile", (dir / "good.yaml").string(), "--device", "k40", "-o",
                            (dir / "profile.json").string()},
                           dir);
    EXPECT_EQ(p.exit_code, 0) << p.describe();
    out.profile = read_file(dir / "profile.json");
    MplanRun c = run_mplan({"compile", (dir / "good.yaml").string(), "--budget", "1MiB", "-o", (dir / "out").string()},
                           dir);
    EXPECT_EQ(c.exit_code, 0) << c.describe();
    out.plan = read_file(dir / "out" / "plan.json");
    fs::remove_all(dir);
    return out;
  }();
  return s;
}

std::string edited(const std::string& json_text, const std::function<void(Json&)>& edit) {
  Json j = Json::parse(json_text);
  edit(j);
  return j.dump(1);
}
// Text edits of the stock JSON (for what a JSON library would not write).
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}
std::string device_with(const std::string& from, const std::string& to) { return replaced(stock_device(), from, to); }

// ---- cases ----------------------------------------------------------------------

struct File {
  std::string name;
  std::function<std::string()> text;
};

// Arguments: "@x" is the path of x in the case's folder; "@good.yaml",
// "@k40.yaml", "@profile.json" and "@plan/" (plan.json and model.yaml) are
// always there.
struct Case {
  std::string name;
  std::vector<File> files;
  std::vector<std::string> args;
  int exit_code;
  std::string message;  // expected in stderr
  std::string output = "";  // a path ("@x") the command must not leave behind
};

File text_file(const std::string& name, const std::string& text) {
  return {name, [text] { return text; }};
}
File profile_file(const std::function<void(Json&)>& edit) {
  return {"p.json", [edit] { return edited(stock().profile, edit); }};
}
File profile_text(const std::function<std::string()>& make) { return {"p.json", make}; }
File plan_file(const std::function<void(Json&)>& edit) {
  return {"pl/plan.json", [edit] { return edited(stock().plan, edit); }};
}
File plan_text(const std::function<std::string()>& make) { return {"pl/plan.json", make}; }

const std::vector<std::string> kCompile = {"compile", "@good.yaml", "--budget", "1MiB", "-o", "@out"};
std::vector<std::string> compile_with(std::vector<std::string> more) {
  std::vector<std::string> args = kCompile;
  args.insert(args.end(), more.begin(), more.end());
  return args;
}
std::vector<std::string> with_profile() { return {"compile", "@good.yaml", "--budget", "1MiB", "--profile", "@p.json", "-o", "@out"}; }
std::vector<std::string> verify_plan_args() { return {"verify", "@pl/plan.json"}; }
std::vector<std::string> bounds_with_device() { return {"bounds", "@good.yaml", "--device", "@d.yaml"}; }

std::vector<Case> catalogue() {
  std::vector<Case> c;
  auto add = [&](Case k) { c.push_back(std::move(k)); };

  // ---- the command line --------------------------------------------------------
  add({"no_command", {}, {}, 2, "A subcommand is required"});
  add({"unknown_command", {}, {"frob"}, 2, "unknown command 'frob'"});
  add({"unknown_global_flag", {}, {"--frob"}, 2, "A subcommand is required"});
  for (const char* command : {"bounds", "profile", "compile", "inspect", "verify", "compare"})
    add({std::string("missing_argument_") + command, {}, {command}, 2, "is required"});
  add({"unknown_flag", {}, {"bounds", "@good.yaml", "--frob"}, 2, "--frob"});
  add({"extra_argument", {}, {"bounds", "@good.yaml", "extra"}, 2, "argument was not expected: extra"});

  // ---- the model file (through bounds; compile, profile and compare read it alike) --
  add({"model_missing", {}, {"bounds", "@nosuch.yaml"}, 4, "cannot read the model file: No such file"});
  add({"model_is_a_directory", {}, {"bounds", "@."}, 1, "it is a directory"});
  add({"model_is_a_device", {}, {"bounds", "/dev/zero"}, 1, "not a regular file"});
  add({"model_too_large", {{"big.yaml", [] { return std::string(); }}}, {"bounds", "@big.yaml"}, 1,
       "more than the 64.00 MiB"});  // made sparse below
  add({"model_empty", {text_file("m.yaml", "")}, {"bounds", "@m.yaml"}, 1, "the file is empty"});
  add({"model_only_comments", {text_file("m.yaml", "# nothing\n")}, {"bounds", "@m.yaml"}, 1, "the file is empty"});
  add({"model_not_yaml", {text_file("m.yaml", "layers: [ {name: a\n")}, {"bounds", "@m.yaml"}, 1, "not valid YAML"});
  add({"model_a_list", {text_file("m.yaml", "- 1\n- 2\n")}, {"bounds", "@m.yaml"}, 1, "expected a model"});
  add({"model_name_not_utf8", {text_file("m.yaml", "name: \xff\n" + kGood.substr(kGood.find('\n') + 1))},
       {"bounds", "@m.yaml"}, 1, "m.yaml:1:7: byte 0xFF is not valid UTF-8"});
  add({"model_layer_name_not_utf8", {text_file("m.yaml", model("  - {name: \"a\xc3\", op: relu}\n"))},
       {"compile", "@m.yaml", "--budget", "1MiB", "-o", "@out"}, 1, "m.yaml:6:", "@out"});
  add({"model_overlong_utf8", {text_file("m.yaml", model("  - {name: x\xc0\xaf, op: relu}\n"))},
       {"profile", "@m.yaml", "--device", "k40", "-o", "@p.json"}, 1, "not valid UTF-8", "@p.json"});
  add({"model_tab_indent", {text_file("m.yaml", kHeader + "layers:\n\t- {op: relu}\n" + kTail)},
       {"bounds", "@m.yaml"}, 1, "m.yaml:6:1: a tab indents this line"});
  add({"model_cr_line_endings", {text_file("m.yaml", "name: t\rinput: [3, 8, 8]\r")}, {"bounds", "@m.yaml"}, 1,
       "carriage return alone"});
  add({"model_content_after_end", {text_file("m.yaml", kGood + "...\nbatch: 5\n")}, {"bounds", "@m.yaml"}, 1,
       "content after the end of the document"});
  add({"model_second_document", {text_file("m.yaml", kGood + "---\nname: two\n")}, {"bounds", "@m.yaml"}, 1,
       "a second one starts here"});
  add({"model_deep_yaml", {text_file("m.yaml", kHeader + "layers: " + std::string(2500, '[') + std::string(2500, ']'))},
       {"bounds", "@m.yaml"}, 1, "nested too deeply"});
  add({"model_deep_expression",
       {text_file("m.yaml", "name: t\ninput: [3, 8, 8]\nbatch: \"" + std::string(400, '(') + "1" + std::string(400, ')') +
                                "\"\nclasses: 10\nlayers:\n" + kTail)},
       {"bounds", "@m.yaml"}, 1, "m.yaml:3:8: batch: parentheses and signs nested too deep"});
  add({"model_long_bad_value", {text_file("m.yaml", model("  - {op: conv, out: " + std::string(5000, 'x') + ", kernel: 3}\n"))},
       {"bounds", "@m.yaml"}, 1, "(5000 characters)"});
  add({"model_merge_key_not_a_map", {text_file("m.yaml", model("  - {<<: 3, op: relu}\n"))}, {"bounds", "@m.yaml"}, 1,
       "'<<' (a merge key) must name a map"});
  {
    std::string blocks = "  b0: {layers: [{op: relu}]}\n";
    for (int i = 1; i < 100; ++i)
      blocks += "  b" + std::to_string(i) + ": {layers: [{block: b" + std::to_string(i - 1) + "}]}\n";
    add({"model_blocks_nested_100_deep",
         {text_file("m.yaml", kHeader + "blocks:\n" + blocks + "layers:\n  - {block: b99}\n" + kTail)},
         {"bounds", "@m.yaml"}, 1, "nested more than 64 deep"});
  }
  add({"model_block_recursion",
       {text_file("m.yaml", kHeader + "blocks:\n  a: {layers: [{block: a}]}\nlayers:\n  - {block: a}\n" + kTail)},
       {"bounds", "@m.yaml"}, 1, "blocks cannot be recursive"});
  add({"model_repeat_huge",
       {text_file("m.yaml", kHeader + "blocks:\n  a: {layers: [{op: relu}]}\nlayers:\n  - {block: a, repeat: 1000000000}\n" + kTail)},
       {"bounds", "@m.yaml"}, 1, "expands to more than 200000 layers"});
  add({"model_unknown_op", {text_file("m.yaml", model("  - {op: convolution}\n"))}, {"bounds", "@m.yaml"}, 1,
       "unknown op 'convolution'"});
  add({"model_unknown_field", {text_file("m.yaml", kGood + "colour: red\n")}, {"bounds", "@m.yaml"}, 1,
       "unknown field 'colour'"});
  add({"model_duplicate_field", {text_file("m.yaml", model("  - {op: relu, op: relu}\n"))}, {"bounds", "@m.yaml"}, 1,
       "'op' is given twice"});
  add({"model_duplicate_layer_name", {text_file("m.yaml", model("  - {name: a, op: relu}\n  - {name: a, op: relu}\n"))},
       {"bounds", "@m.yaml"}, 1, "duplicate layer name 'a'"});
  add({"model_unknown_input", {text_file("m.yaml", model("  - {op: relu, in: nowhere}\n"))}, {"bounds", "@m.yaml"}, 1,
       "unknown layer 'nowhere'"});
  add({"model_cycle", {text_file("m.yaml", model("  - {name: a, op: relu, in: b}\n  - {name: b, op: relu}\n"))},
       {"bounds", "@m.yaml"}, 1, "is not an earlier layer"});
  add({"model_batch_zero", {text_file("m.yaml", replaced(kGood, "batch: 4", "batch: 0"))}, {"bounds", "@m.yaml"}, 1,
       "batch must be at least 1"});
  add({"model_batch_2_31", {text_file("m.yaml", replaced(kGood, "batch: 4", "batch: 2147483648"))}, {"bounds", "@m.yaml"},
       1, "larger than the largest accepted"});
  add({"model_batch_not_a_number", {text_file("m.yaml", replaced(kGood, "batch: 4", "batch: four"))},
       {"bounds", "@m.yaml"}, 1, "batch must be an integer"});
  add({"model_batch_overflowing_expression", {text_file("m.yaml", replaced(kGood, "batch: 4", "batch: \"9223372036854775807 + 1\""))},
       {"bounds", "@m.yaml"}, 1, "integer overflow"});
  add({"model_batch_at_max_too_large_for_the_model",
       {text_file("m.yaml", "name: t\ninput: [3, 8192, 8192]\nbatch: 2147483647\nclasses: 10\nlayers:\n" + kTail)},
       {"bounds", "@m.yaml"}, 1, "too large"});
  add({"model_input_not_three_dims", {text_file("m.yaml", replaced(kGood, "input: [3, 8, 8]", "input: [3, 8]"))},
       {"bounds", "@m.yaml"}, 1, "input must be the per-sample shape [C, H, W]"});
  add({"model_input_huge", {text_file("m.yaml", replaced(kGood, "input: [3, 8, 8]", "input: [2000000000, 2000000000, 2000000000]"))},
       {"bounds", "@m.yaml"}, 1, "is too large"});
  add({"model_kernel_larger_than_input", {text_file("m.yaml", model("  - {op: conv, out: 4, kernel: 11}\n"))},
       {"bounds", "@m.yaml"}, 1, "larger than its padded input"});
  add({"model_weights_too_large", {text_file("m.yaml", model("  - {op: conv, out: 2000000000, kernel: 3, pad: 1}\n"))},
       {"bounds", "@m.yaml"}, 1, "too large"});
  add({"model_add_of_one", {text_file("m.yaml", model("  - {name: a, op: add, in: [input]}\n"))}, {"bounds", "@m.yaml"}, 1,
       "add needs at least 2 inputs"});
  add({"model_concat_of_none", {text_file("m.yaml", model("  - {op: concat, in: []}\n"))}, {"bounds", "@m.yaml"}, 1,
       "non-empty list"});
  add({"model_no_loss", {text_file("m.yaml", kHeader + "layers:\n  - {op: flatten}\n  - {op: linear, out: 10}\n")},
       {"bounds", "@m.yaml"}, 1, "the model has no loss"});
  add({"model_lr_inf", {text_file("m.yaml", kGood + "optimizer: {lr: .inf}\n")}, {"bounds", "@m.yaml"}, 1,
       "lr must be a number"});
  add({"model_lr_nan", {text_file("m.yaml", kGood + "optimizer: {lr: .nan}\n")}, {"bounds", "@m.yaml"}, 1,
       "lr must be a number"});
  add({"model_momentum_one", {text_file("m.yaml", kGood + "optimizer: {momentum: 1}\n")}, {"bounds", "@m.yaml"}, 1,
       "momentum must be in [0, 1)"});
  add({"model_optimizer_adam", {text_file("m.yaml", kGood + "optimizer: {kind: adam}\n")}, {"bounds", "@m.yaml"}, 1,
       "kind 'adam' is not supported"});
  add({"model_dtype_half", {text_file("m.yaml", kGood + "dtype: float16\n")}, {"bounds", "@m.yaml"}, 1,
       "dtype 'float16' is not supported"});
  add({"model_dropout_p_two", {text_file("m.yaml", model("  - {op: dropout, p: 2}\n"))}, {"bounds", "@m.yaml"}, 1, "p must be in [0, 1), got 2"});
  add({"model_unused_output", {text_file("m.yaml", model("  - {name: a, op: relu}\n  - {op: relu, in: input}\n"))},
       {"bounds", "@m.yaml"}, 1, "its output is not used by any later layer"});

  // ---- bounds' flags ----------------------------------------------------------------
  add({"bounds_batch_zero", {}, {"bounds", "@good.yaml", "--batch", "0"}, 2, "--batch must be a positive number"});
  add({"bounds_batch_negative", {}, {"bounds", "@good.yaml", "--batch", "-3"}, 2, "--batch must be a positive number of samples, got -3"});
  add({"bounds_batch_text", {}, {"bounds", "@good.yaml", "--batch", "abc"}, 2, "Could not convert: --batch"});
  add({"bounds_batch_int64_max", {}, {"bounds", "@good.yaml", "--batch", "9223372036854775807"}, 2,
       "--batch must be between 1 and 2147483647"});
  add({"bounds_batch_beyond_int64", {}, {"bounds", "@good.yaml", "--batch", "99999999999999999999"}, 2, "--batch must be between 1 and 2147483647"});
  add({"bounds_batch_too_large_for_the_model",
       {text_file("m.yaml", "name: t\ninput: [3, 8192, 8192]\nbatch: 2\nclasses: 10\nlayers:\n" + kTail)},
       {"bounds", "@m.yaml", "--batch", "2147483647"}, 2, "the largest --batch for this model is"});
  add({"bounds_device_unknown", {}, {"bounds", "@good.yaml", "--device", "k41"}, 2, "not a device name"});
  add({"bounds_device_missing_file", {}, {"bounds", "@good.yaml", "--device", "@nosuch/d.yaml"}, 2, "no such file"});

  // ---- the device file (through bounds --device; compile, profile, compare alike) ----
  add({"device_missing_key", {text_file("d.yaml", device_with("sm_count: 15\n", ""))}, bounds_with_device(), 1,
       "missing 'sm_count'"});
  add({"device_unknown_key", {text_file("d.yaml", stock_device() + "colour: green\n")}, bounds_with_device(), 1,
       "unknown key 'colour'"});
  add({"device_duplicate_key", {text_file("d.yaml", stock_device() + "memory: 80GiB\n")}, bounds_with_device(), 1,
       "'memory' is given twice"});
  add({"device_inf_tflops", {text_file("d.yaml", device_with("peak_fp32_tflops: 4.29", "peak_fp32_tflops: .inf"))},
       bounds_with_device(), 1, "'peak_fp32_tflops': expected a positive finite number, got .inf"});
  add({"device_nan_bandwidth", {text_file("d.yaml", device_with("memory_bandwidth_gb_per_s: 288", "memory_bandwidth_gb_per_s: .nan"))},
       bounds_with_device(), 1, "positive finite number"});
  add({"device_negative_latency", {text_file("d.yaml", device_with("launch_latency_us: 5", "launch_latency_us: -5"))},
       bounds_with_device(), 1, "'launch_latency_us': expected a positive finite number"});
  add({"device_text_bandwidth", {text_file("d.yaml", device_with("host_to_device_gb_per_s: 10.04", "host_to_device_gb_per_s: fast"))},
       bounds_with_device(), 1, "'host_to_device_gb_per_s': expected a number"});
  add({"device_memory_unit", {text_file("d.yaml", device_with("memory: 12GiB", "memory: 12XB"))}, bounds_with_device(), 1,
       "unknown unit 'XB'"});
  add({"device_memory_zero", {text_file("d.yaml", device_with("memory: 12GiB", "memory: 0"))}, bounds_with_device(), 1,
       "'memory': expected a positive size"});
  add({"device_copy_engines_three", {text_file("d.yaml", device_with("copy_engines: 2", "copy_engines: 3"))},
       bounds_with_device(), 1, "'copy_engines': expected 1 to 2, got 3"});
  add({"device_sm_count_fraction", {text_file("d.yaml", device_with("sm_count: 15", "sm_count: 1.5"))},
       bounds_with_device(), 1, "'sm_count': expected a whole number"});
  add({"device_value_a_list", {text_file("d.yaml", device_with("sm_count: 15", "sm_count: [15]"))}, bounds_with_device(),
       1, "'sm_count': expected a single value"});
  add({"device_key_a_map", {text_file("d.yaml", stock_device() + "{a: 1}: 2\n")}, bounds_with_device(), 1,
       "expected a key name"});
  add({"device_content_after_end", {text_file("d.yaml", stock_device() + "...\nmemory: 1TiB\n")}, bounds_with_device(),
       1, "content after the end of the document"});
  add({"device_not_utf8", {text_file("d.yaml", device_with("name: k40", "name: k\xff"))}, bounds_with_device(), 1,
       "not valid UTF-8"});
  add({"device_empty", {text_file("d.yaml", "")}, bounds_with_device(), 1, "the file is empty"});
  add({"device_a_list", {text_file("d.yaml", "- k40\n")}, bounds_with_device(), 1, "expected a device"});
  add({"device_too_large", {text_file("d.yaml", stock_device() + "# " + std::string(1100000, 'x') + "\n")},
       bounds_with_device(), 1, "more than the 1.00 MiB"});
  add({"device_memory_1B_budget_refused", {text_file("d.yaml", device_with("memory: 12GiB", "memory: 1B"))},
       {"compile", "@good.yaml", "--budget", "1MiB", "--device", "@d.yaml", "-o", "@out"}, 2,
       "is more than the device's memory (1 B", "@out"});

  // ---- compile's flags --------------------------------------------------------------------
  add({"compile_target_unknown", {}, {"compile", "@good.yaml", "--budget", "1GiB", "--target", "tpu", "-o", "@out"}, 2,
       "--target 'tpu': expected cpu or cuda", "@out"});
  add({"compile_budget_text", {}, {"compile", "@good.yaml", "--budget", "lots", "-o", "@out"}, 2,
       "--budget 'lots': invalid size", "@out"});
  add({"compile_budget_negative", {}, {"compile", "@good.yaml", "--budget", "-1GiB", "-o", "@out"}, 2,
       "sizes cannot be negative", "@out"});
  add({"compile_budget_zero", {}, {"compile", "@good.yaml", "--budget", "0", "-o", "@out"}, 2,
       "the budget must be more than 0 bytes", "@out"});
  add({"compile_budget_malformed", {}, {"compile", "@good.yaml", "--budget", "1.2.3GiB", "-o", "@out"}, 2,
       "the number is malformed", "@out"});
  add({"compile_budget_unit", {}, {"compile", "@good.yaml", "--budget", "8GiBs", "-o", "@out"}, 2,
       "unknown unit 'GiBs'", "@out"});
  add({"compile_budget_exponent_huge", {}, {"compile", "@good.yaml", "--budget", "1e30GiB", "-o", "@out"}, 2,
       "it is too large", "@out"});
  add({"compile_budget_above_device", {}, {"compile", "@good.yaml", "--budget", "100t", "-o", "@out"}, 2,
       "is more than the device's memory (12.00 GiB", "@out"});
  add({"compile_budget_1PiB_above_device", {}, {"compile", "@good.yaml", "--budget", "1PiB", "-o", "@out"}, 2,
       "--allow-oversubscribe", "@out"});
  add({"compile_budget_below_minimum", {}, {"compile", "@good.yaml", "--budget", "4KiB", "-o", "@out"}, 3,
       "is below the minimum", "@out"});
  add({"compile_batch_zero", {}, compile_with({"--batch", "0"}), 2, "--batch must be a positive number", "@out"});
  add({"compile_batch_int64_max", {}, compile_with({"--batch", "9223372036854775807"}), 2,
       "--batch must be between 1 and 2147483647", "@out"});
  add({"compile_batch_2_31_rounds", {}, {"compile", "@good.yaml", "--budget", "20KiB", "--batch", "2147483647", "-o", "@out"},
       3, "a plan has at most 4096 rounds", "@out"});
  add({"compile_sub_batch_zero", {}, compile_with({"--sub-batch", "0"}), 2, "--sub-batch must be a positive number", "@out"});
  add({"compile_sub_batch_above_batch", {}, compile_with({"--sub-batch", "64"}), 2,
       "--sub-batch 64 is larger than the batch 4", "@out"});
  add({"compile_sub_batch_too_many_rounds", {}, compile_with({"--batch", "1000000", "--sub-batch", "1"}), 3,
       "a plan has at most", "@out"});
  add({"compile_copy_engines_three", {}, compile_with({"--copy-engines", "3"}), 2, "--copy-engines must be 1", "@out"});
  add({"compile_policy_unknown", {}, compile_with({"--policy", "fastest"}), 2, "--policy 'fastest': unknown policy", "@out"});
  add({"compile_policy_flag_mismatch", {}, compile_with({"--policy", "vdnn-all-m", "--sub-batch", "2"}), 2,
       "--sub-batch is an option of the planner", "@out"});
  add({"compile_policy_ideal_too_small", {}, {"compile", "@good.yaml", "--budget", "20KiB", "--policy", "ideal", "-o", "@out"},
       3, "--policy ideal", "@out"});
  add({"compile_workspace_unknown", {}, compile_with({"--workspace", "huge"}), 2, "--workspace 'huge': expected auto, undivided", "@out"});
  add({"compile_workspace_wd_size", {}, compile_with({"--workspace", "wd:lots"}), 2, "expected a size like 512MiB", "@out"});
  add({"compile_dump_lp_without_wd", {}, compile_with({"--dump-lp", "@w.lp"}), 2,
       "--dump-lp needs a WD workspace mode", "@out"});
  add({"compile_dump_lp_over_the_model", {}, compile_with({"--workspace", "wd:64KiB", "--dump-lp", "@good.yaml"}), 2,
       "is the input file", "@out"});
  add({"compile_dump_lp_missing_folder", {}, compile_with({"--workspace", "wd:64KiB", "--dump-lp", "@no/such/w.lp"}), 4,
       "--dump-lp", "@out"});
  add({"compile_device_and_profile", {}, compile_with({"--device", "k40", "--profile", "@profile.json"}), 2,
       "--device and --profile exclude each other", "@out"});
  add({"compile_device_unknown", {}, compile_with({"--device", "gtx480"}), 2, "not a device name", "@out"});
  add({"compile_out_is_a_file", {text_file("f", "x")}, {"compile", "@good.yaml", "--budget", "1MiB", "-o", "@f"}, 2,
       "exists and is not a folder"});
  add({"compile_out_holds_foreign_files", {text_file("o/thesis.tex", "x")},
       {"compile", "@good.yaml", "--budget", "1MiB", "-o", "@o"}, 2, "holds files mplan did not write (thesis.tex)"});
  add({"compile_out_holds_the_model", {text_file("o/m.yaml", kGood), text_file("o/plan.json", "{}")},
       {"compile", "@o/m.yaml", "--budget", "1MiB", "-o", "@o"}, 2, "holds the input file"});
  add({"compile_out_is_the_root", {}, {"compile", "@good.yaml", "--budget", "1MiB", "-o", "/"}, 2, "holds the input file"});
  add({"compile_out_parent_is_a_file", {text_file("f", "x")}, {"compile", "@good.yaml", "--budget", "1MiB", "-o", "@f/out"},
       4, "cannot create its parent folder"});
  add({"compile_model_missing", {}, {"compile", "@nosuch.yaml", "--budget", "1MiB", "-o", "@out"}, 4,
       "cannot read the model file", "@out"});

  // ---- the profile (through compile --profile) ------------------------------------------
  add({"profile_missing", {}, with_profile(), 4, "cannot read the profile", "@out"});
  add({"profile_number_overflow", {profile_text([] { return replaced(stock().profile, "\"bytes_per_s\": ", "\"bytes_per_s\": 1e999, \"x\": "); })},
       with_profile(), 1, "beyond the range of a double", "@out"});
  add({"profile_duplicate_key", {profile_text([] { return replaced(stock().profile, "\"version\": 1", "\"version\": 1, \"version\": 1"); })},
       with_profile(), 1, "the key \"version\" is given twice", "@out"});
  add({"profile_times_1e308", {profile_file([](Json& j) {
         for (auto& entry : j["layers"])
           for (auto& [kind, by_b] : entry["tasks"].items())
             for (auto& [b, options] : by_b.items())
               for (auto& o : options) o["time_ms"] = 1e308;
       })},
       with_profile(), 1, "expected time_ms in 0..1e+09", "@out"});
  add({"profile_negative_workspace", {profile_file([](Json& j) { j["layers"][0]["tasks"]["FP"]["1"][0]["workspace_bytes"] = -1; })},
       with_profile(), 1, "workspace_bytes in 0..", "@out"});
  add({"profile_workspace_2_63", {profile_file([](Json& j) { j["layers"][0]["tasks"]["FP"]["1"][0]["workspace_bytes"] = 9223372036854775807LL; })},
       with_profile(), 1, "workspace_bytes in 0..", "@out"});
  add({"profile_bandwidth_zero", {profile_file([](Json& j) { j["transfers"]["host_to_device"]["bytes_per_s"] = 0; })},
       with_profile(), 1, "bytes_per_s in 1..1e15", "@out"});
  add({"profile_deep_nesting", {profile_text([] { return std::string(100, '[') + std::string(100, ']'); })},
       with_profile(), 1, "nested more than 32 deep", "@out"});
  add({"profile_truncated", {profile_text([] { return stock().profile.substr(0, stock().profile.size() / 2); })},
       with_profile(), 1, "truncated", "@out"});
  add({"profile_not_utf8", {profile_text([] { return replaced(stock().profile, "\"k40\"", "\"k\xff\""); })},
       with_profile(), 1, "not valid UTF-8", "@out"});
  add({"profile_empty", {profile_text([] { return std::string(); })}, with_profile(), 1, "the file is empty", "@out"});
  add({"profile_wrong_format", {profile_file([](Json& j) { j["format"] = "mplan-plan"; })}, with_profile(), 1,
       "format: expected \"mplan-profile\"", "@out"});
  add({"profile_wrong_version", {profile_file([](Json& j) { j["version"] = 4294967297LL; })}, with_profile(), 1,
       "this mplan reads version 1", "@out"});
  add({"profile_copy_engines_wrapped", {profile_file([](Json& j) { j["device"]["copy_engines"] = 4294967297LL; })},
       with_profile(), 1, "device.copy_engines: expected 1 or 2", "@out"});
  add({"profile_memory_zero", {profile_file([](Json& j) { j["device"]["memory_bytes"] = 0; })}, with_profile(), 1,
       "device.memory_bytes", "@out"});
  add({"profile_sub_batches_descending", {profile_file([](Json& j) { j["sub_batches"] = {4, 2, 1}; })}, with_profile(), 1,
       "strictly ascending", "@out"});
  add({"profile_sub_batch_2_40", {profile_file([](Json& j) { j["sub_batches"] = {1, 2, 4, 1099511627776LL}; })},
       with_profile(), 1, "whole numbers in 1..2147483647", "@out"});
  add({"profile_unknown_task_kind", {profile_file([](Json& j) { j["layers"][0]["tasks"]["XP"] = Json::object(); })},
       with_profile(), 1, "expected a task kind", "@out"});
  add({"profile_missing_layer", {profile_file([](Json& j) { j["layers"].erase(0); })}, with_profile(), 1,
       "does not cover the model", "@out"});
  add({"profile_another_model", {profile_file([](Json& j) {
         for (auto& entry : j["layers"]) entry["signature"] = "conv 1x1 " + entry["signature"].get<std::string>();
       })},
       with_profile(), 1, "does not cover the model", "@out"});
  add({"profile_lacks_the_batch", {}, {"compile", "@good.yaml", "--budget", "1MiB", "--profile", "@profile.json",
                                       "--batch", "64", "-o", "@out"},
       1, "it lacks sub-batches 8, 16, 32, 64", "@out"});
  add({"profile_budget_above_its_device", {}, {"compile", "@good.yaml", "--budget", "1TiB", "--profile", "@profile.json", "-o", "@out"},
       2, "more than the device's memory", "@out"});

  // ---- profile's flags ---------------------------------------------------------------------
  add({"profile_over_the_model", {}, {"profile", "@good.yaml", "--device", "k40", "-o", "@good.yaml"}, 2,
       "is the input file"});
  add({"profile_over_the_device_file", {text_file("d.yaml", stock_device())},
       {"profile", "@good.yaml", "--device", "@d.yaml", "-o", "@d.yaml"}, 2, "is the input file"});
  add({"profile_output_a_folder", {text_file("taken/x", "")}, {"profile", "@good.yaml", "--device", "k40", "-o", "@taken"},
       4, "Is a directory"});
  add({"profile_output_folder_missing", {}, {"profile", "@good.yaml", "--device", "k40", "-o", "@no/p.json"}, 4,
       "its folder does not exist", "@no"});
  add({"profile_sub_batches_zero", {}, {"profile", "@good.yaml", "--device", "k40", "--sub-batches", "0", "-o", "@p.json"},
       2, "--sub-batches: 0 is outside", "@p.json"});
  add({"profile_sub_batches_text", {}, {"profile", "@good.yaml", "--device", "k40", "--sub-batches", "pow3", "-o", "@p.json"},
       2, "--sub-batches: 'pow3' is not a whole number", "@p.json"});
  add({"profile_sub_batches_2_31", {}, {"profile", "@good.yaml", "--device", "k40", "--sub-batches", "2147483648", "-o", "@p.json"},
       2, "outside 1..2147483647", "@p.json"});
  add({"profile_sub_batches_all_of_a_huge_batch", {text_file("m.yaml", replaced(kGood, "batch: 4", "batch: 100000"))},
       {"profile", "@m.yaml", "--device", "k40", "--sub-batches", "all", "-o", "@p.json"}, 2, "at most 4096", "@p.json"});
  add({"profile_sub_batches_too_large_for_the_model",
       {text_file("m.yaml", "name: t\ninput: [3, 8192, 8192]\nbatch: 2\nclasses: 10\nlayers:\n" + kTail)},
       {"profile", "@m.yaml", "--device", "k40", "--sub-batches", "2000000000", "-o", "@p.json"}, 2,
       "--sub-batches 2000000000 is too large for this model", "@p.json"});
  add({"profile_backend_unknown", {}, {"profile", "@good.yaml", "--backend", "tpu", "-o", "@p.json"}, 2,
       "--backend: expected analytic, cpu or cuda", "@p.json"});
  // Flags of the GPU work (--target, --jobs/--merge).
  add({"profile_repeats_zero", {}, {"profile", "@good.yaml", "--backend", "cuda", "--jobs", "@j.json", "--repeats", "0"},
       2, "--repeats: expected 1 to 10000", "@j.json"});
  add({"profile_merge_and_jobs", {}, {"profile", "@good.yaml", "--merge", "@t.json", "--jobs", "@j.json", "-o", "@p.json"},
       2, "--merge and --jobs exclude each other", "@p.json"});
  add({"profile_merge_missing", {}, {"profile", "@good.yaml", "--merge", "@missing.json", "-o", "@p.json"}, 4,
       "--merge", "@p.json"});
  add({"profile_analytic_without_device", {}, {"profile", "@good.yaml", "-o", "@p.json"}, 2,
       "--device: required with --backend analytic", "@p.json"});
  add({"profile_cpu_with_device", {}, {"profile", "@good.yaml", "--backend", "cpu", "--device", "k40", "-o", "@p.json"}, 2,
       "--device is for --backend analytic", "@p.json"});
  add({"profile_cpu_of_a_2_31_wide_layer",
       {text_file("m.yaml", "name: wide\ninput: [1, 4, 4]\nbatch: 1\nclasses: 10\nlayers:\n  - {op: flatten}\n"
                            "  - {name: wide, op: linear, out: 2147483647}\n  - {op: linear, out: 10}\n  - {op: softmax_xent}\n")},
       {"profile", "@m.yaml", "--backend", "cpu", "-o", "@p.json"}, 1, "the CPU profiler allows", "@p.json"});

  // ---- the plan (through verify and inspect) --------------------------------------------------
  add({"plan_missing", {}, {"verify", "@nosuch.json", "--model", "@good.yaml"}, 4, "cannot read the plan file"});
  add({"plan_number_overflow", {plan_text([] { return replaced(stock().plan, "\"budget_bytes\": ", "\"budget_bytes\": 1e999, \"x\": "); })},
       verify_plan_args(), 1, "beyond the range of a double"});
  add({"plan_duplicate_key", {plan_text([] { return replaced(stock().plan, "\"batch\": 4", "\"batch\": 4, \"batch\": 8"); })},
       verify_plan_args(), 1, "the key \"batch\" is given twice"});
  add({"plan_event_count_2e9", {plan_file([](Json& j) { j["event_count"] = 2000000000; })}, verify_plan_args(), 1,
       "event_count: 2000000000 events, but the plan has"});
  add({"plan_rounds_beyond_limit", {plan_file([](Json& j) { j["sub_batches"] = std::vector<int>(5000, 1); })},
       verify_plan_args(), 1, "more than 4096 rounds"});
  add({"plan_deep_nesting", {plan_text([] { return "{\"a\": " + std::string(60, '[') + std::string(60, ']') + "}"; })},
       verify_plan_args(), 1, "nested more than 32 deep"});
  add({"plan_truncated", {plan_text([] { return stock().plan.substr(0, stock().plan.size() - 40); })}, verify_plan_args(), 1,
       "truncated"});
  add({"plan_not_json", {plan_text([] { return std::string("plan: yes\n"); })}, verify_plan_args(), 1,
       "not a valid JSON plan file"});
  add({"plan_wrong_format", {plan_file([](Json& j) { j["format"] = "mplan-profile"; })}, verify_plan_args(), 1,
       "is not a plan file"});
  add({"plan_wrong_version", {plan_file([](Json& j) { j["format_version"] = 2; })}, verify_plan_args(), 1,
       "version 2 is not supported"});
  add({"plan_arena_near_int64_max", {plan_file([](Json& j) { j["arena_bytes"] = 9223372036854775000LL; })},
       verify_plan_args(), 1, "violation"});
  add({"plan_peak_arena_claimed_wrong", {plan_file([](Json& j) { j["summary"]["peak_arena_bytes"] = 1; })},
       verify_plan_args(), 1, "violation"});
  add({"plan_task_names_swapped", {plan_file([](Json& j) { std::swap(j["task_names"][0], j["task_names"][1]); })},
       verify_plan_args(), 1, "violation"});
  add({"plan_other_model_name", {plan_file([](Json& j) { j["model_name"] = "resnet50"; })}, verify_plan_args(), 1,
       "violation"});
  add({"plan_resident_bytes", {plan_file([](Json& j) { j["resident_bytes"] = 1; })}, verify_plan_args(), 1, "violation"});
  add({"plan_arena_below_formula", {plan_file([](Json& j) { j["arena_bytes"] = j["arena_bytes"].get<int64_t>() - 1024; })},
       verify_plan_args(), 1, "violation"});
  add({"plan_other_digest", {plan_file([](Json& j) { j["model_digest"] = "0000000000000000"; })}, verify_plan_args(), 1,
       "was made for model"});
  add({"plan_without_model_beside", {{"lone/plan.json", [] { return stock().plan; }}}, {"verify", "@lone/plan.json"}, 2,
       "pass the model the plan was made from with --model"});
  add({"plan_model_of_another", {text_file("m.yaml", replaced(kGood, "name: tiny", "name: other"))},
       {"verify", "@pl", "--model", "@m.yaml"}, 1, "was made for model 'tiny'"});
  add({"inspect_plan_missing", {}, {"inspect", "@nosuch.json"}, 4, "cannot read the plan file"});
  add({"inspect_plan_not_json", {plan_text([] { return std::string("[1, 2"); })}, {"inspect", "@pl/plan.json"}, 1,
       "not a valid JSON plan file"});
  add({"inspect_model_mismatch", {text_file("m.yaml", replaced(kGood, "name: tiny", "name: other"))},
       {"inspect", "@pl", "--model", "@m.yaml"}, 1, "was made for model 'tiny'"});

  // ---- compare's flags -------------------------------------------------------------------------
  add({"compare_budget_text", {}, {"compare", "@good.yaml", "--budget", "big"}, 2, "--budget: invalid size 'big'"});
  add({"compare_budget_above_device", {}, {"compare", "@good.yaml", "--budget", "1PiB"}, 2,
       "is more than the device's memory"});
  add({"compare_batch_zero", {}, {"compare", "@good.yaml", "--budget", "1MiB", "--batch", "0"}, 2,
       "--batch: must be a positive number"});
  add({"compare_batch_int64_max", {}, {"compare", "@good.yaml", "--budget", "1MiB", "--batch", "9223372036854775807"}, 2,
       "--batch must be between 1 and 2147483647"});
  add({"compare_policy_unknown", {}, {"compare", "@good.yaml", "--budget", "1MiB", "--policies", "ideal,best"}, 2,
       "--policies: unknown policy 'best'"});
  add({"compare_device_unknown", {}, {"compare", "@good.yaml", "--budget", "1MiB", "--device", "tpu"}, 2,
       "not a device name"});
  add({"compare_model_missing", {}, {"compare", "@nosuch.yaml", "--budget", "1MiB"}, 4, "cannot read the model file"});
  return c;
}

std::string test_name(const ::testing::TestParamInfo<Case>& info) { return info.param.name; }
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class Catalogue : public MplanTest, public ::testing::WithParamInterface<Case> {};

TEST_P(Catalogue, FailsWithItsMessageAndExitCode) {
  const Case& c = GetParam();
  write_file(path("good.yaml"), kGood);
  write_file(path("k40.yaml"), stock_device());
  write_file(path("profile.json"), stock().profile);
  fs::create_directories(path("pl"));
  write_file(path("pl/plan.json"), stock().plan);
  write_file(path("pl/model.yaml"), kGood);
  for (const File& f : c.files) {
    fs::create_directories((dir_ / f.name).parent_path());
    write_file(dir_ / f.name, f.text());
  }
  if (c.name == "model_too_large") fs::resize_file(path("big.yaml"), (int64_t{64} << 20) + 1);  // sparse
  std::vector<std::string> args;
  for (const std::string& a : c.args) args.push_back(a.rfind('@', 0) == 0 ? path(a.substr(1)) : a);
  const MplanRun r = mplan(args);
  EXPECT_EQ(r.signal, 0) << r.describe();
  EXPECT_EQ(r.exit_code, c.exit_code) << r.describe();
  EXPECT_TRUE(contains(r.err, "mplan: error:")) << r.describe();
  EXPECT_TRUE(contains(r.err, c.message)) << "expected: " << c.message << "\n" << r.describe();
  EXPECT_FALSE(contains(r.err, "internal error")) << r.describe();
  if (!c.output.empty()) EXPECT_FALSE(fs::exists(path(c.output.substr(1)))) << c.output << " was written";
  // No temporaries anywhere.
  for (const auto& entry : fs::recursive_directory_iterator(dir_)) {
    const std::string name = entry.path().filename().string();
    EXPECT_EQ(name.find(".tmp"), std::string::npos) << entry.path();
    EXPECT_EQ(name.find(".mplan-new"), std::string::npos) << entry.path();
  }
}

INSTANTIATE_TEST_SUITE_P(BadInput, Catalogue, ::testing::ValuesIn(catalogue()), test_name);

}  // namespace
}  // namespace mplan::cli_test
