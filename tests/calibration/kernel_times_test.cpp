// The calibration bench's kernel-time cases (bench/calibration/kernel_times.h):
// the committed H100 result files read into one case per measured option with
// the shape the model's own TDFG gives, what is left out counted, bad files
// refused with the file and key named, the whole-layer split fixed and
// deterministic, and an own table's entries without data derived by its rule.

#include "bench/calibration/kernel_times.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "bench/calibration/fit.h"
#include "frontend/parse.h"
#include "profiler/ideal.h"
#include "profiler/profile.h"

namespace mplan::calibration {
namespace {

const std::string kSource = MPLAN_SOURCE_DIR;
const std::string kData = kSource + "/bench/data/calibration";

std::vector<KernelTimesFile> committed_files() {
  Result<std::vector<KernelTimesFile>> files = load_kernel_times_files(kData, kSource);
  EXPECT_TRUE(files.ok()) << (files.ok() ? "" : files.error().to_string());
  return files.ok() ? std::move(files).value() : std::vector<KernelTimesFile>{};
}

std::unique_ptr<Model> model_of(const std::string& name) {
  Result<Model> model = load_model(kSource + "/examples/models/" + name + ".yaml");
  EXPECT_TRUE(model.ok());
  return std::make_unique<Model>(std::move(model).value());
}

// A result file of one job, in the format the kernel profiler writes.
std::string results_text(const std::string& backend, const std::string& libraries, const std::string& key,
                         const std::string& options, const std::string& error = "") {
  return "{\"format\": \"mplan-kernel-times\", \"version\": 1, \"backend\": {\"name\": \"" + backend +
         "\", \"device\": \"NVIDIA H100 80GB HBM3\", \"driver\": \"13.0\", \"runtime\": \"13.0\", \"libraries\": \"" +
         libraries + "\", \"memory_bytes\": 85017493504}, \"repeats\": 3, \"copies\": [], \"results\": [{\"key\": \"" +
         key + "\"" + (error.empty() ? "" : ", \"error\": \"" + error + "\"") + ", \"options\": [" + options + "]}]}";
}

const char* const kFp32Libraries = "cuDNN 9.19.0 (FP32, TF32 off), cuBLAS 13.1.0 (FP32, TF32 off, no workspace)";
const char* const kCifarConv1Fp =
    "conv in=[3, 32, 32] out=[32, 32, 32] kernel=3x3 stride=1x1 pad=1x1 groups=1 bias=1 FP";

// The H100's committed files (split by layer, the first rows of
// kernel_times.csv), in the file's order. The H200's, split by layer too,
// follow them.
std::vector<KernelTimesFile> layer_split_files() {
  std::vector<KernelTimesFile> files = committed_files();
  std::vector<KernelTimesFile> kept;
  for (KernelTimesFile& f : files)
    if (!f.holdout_whole && f.device == "h100") kept.push_back(std::move(f));
  return kept;
}

TEST(KernelTimes, CommittedFilesReadAsOneCasePerMeasuredOption) {
  const std::vector<KernelTimesFile> files = layer_split_files();
  ASSERT_EQ(files.size(), 3u);
  KernelTimesSummary summary;
  const std::vector<Case> cases = load_kernel_time_cases(files, &summary);
  // Every option of every job (counted from the JSON files independently):
  // AlexNet 630 conv options + 316 other jobs, cifar_small 258 + 115,
  // ResNet-50 822 (of 843: 21 FFT-tiling options at stride 2 left out) + 190,
  // less each file's update (timed as one merged sgd_step: update_job).
  std::map<CaseKind, int> kinds;
  for (const Case& c : cases) {
    ++kinds[c.kind];
    EXPECT_TRUE(c.kernel_times);
    EXPECT_EQ(c.device, "h100");
    EXPECT_EQ(c.gpu, "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(c.library, "cuDNN 9.19.0 (CUDA 13.0)");
    EXPECT_EQ(c.math, MathMode::fp32);
    EXPECT_GT(c.measured_ms, 0);
  }
  EXPECT_EQ(kinds[CaseKind::conv_task], 630 + 258 + 822);
  EXPECT_EQ(kinds[CaseKind::other_task], 316 + 115 + 190 - 3);
  EXPECT_EQ(summary.skipped.at("update timed as one merged sgd_step (kernel_times.csv update_job)"), 3);
  EXPECT_EQ(summary.skipped.at("failed on the GPU: batchnorm BP1"), 36);
  EXPECT_EQ(summary.skipped.at("runs no kernel (0 ms): add BP1"), 12);
  EXPECT_EQ(summary.skipped.at("forward fft_tiling: the model refuses it (fft_tiling needs stride 1)"), 12);
  EXPECT_EQ(summary.skipped.at("backward_data fft_tiling: the model refuses it (fft_tiling needs stride 1)"), 9);
}

TEST(KernelTimes, ConvCasesCarryTheSignaturesShapeAndTheMeasuredTimes) {
  const std::vector<KernelTimesFile> files = committed_files();
  ASSERT_FALSE(files.empty());
  const std::vector<Case> cases = load_kernel_time_cases(files);
  // AlexNet's conv1 forward at sub-batch 1: three options in the file.
  const std::string task =
      "conv in=[3, 227, 227] out=[96, 55, 55] kernel=11x11 stride=4x4 pad=0x0 groups=1 bias=1 FP@1";
  std::map<std::string, double> measured;
  for (const Case& c : cases) {
    if (c.task != task) continue;
    measured[c.algorithm] = c.measured_ms;
    EXPECT_EQ(c.measured_fastest, "implicit_gemm");
    ASSERT_EQ(c.convs.size(), 1u);
    const ConvTask& t = c.convs[0].first;
    EXPECT_EQ(t.direction, ConvDirection::forward);
    EXPECT_EQ(t.batch, 1);
    EXPECT_EQ(t.shape.C, 3);
    EXPECT_EQ(t.shape.H, 227);
    EXPECT_EQ(t.shape.K, 96);
    EXPECT_EQ(t.shape.R, 11);
    EXPECT_EQ(t.shape.stride_h, 4);
    EXPECT_EQ(t.shape.P, 55);
    EXPECT_TRUE(t.shape.bias);
    ASSERT_EQ(t.options.size(), 1u);
    EXPECT_EQ(t.options[0].algorithm, c.algorithm);
  }
  ASSERT_EQ(measured.size(), 3u);
  EXPECT_DOUBLE_EQ(measured.at("implicit_gemm"), 0.063423998653888702);
  EXPECT_DOUBLE_EQ(measured.at("implicit_precomp_gemm"), 0.065535999834537506);
  EXPECT_DOUBLE_EQ(measured.at("gemm"), 0.104032002389431);
}

TEST(KernelTimes, MeasuredIdealIsTheMergedProfilesIdeal) {
  // The same sum through another path: the profile `mplan profile --merge` made of the file.
  const std::vector<KernelTimesFile> files = committed_files();
  ASSERT_FALSE(files.empty());
  const KernelTimesFile& alexnet = files[0];
  ASSERT_EQ(alexnet.model->name, "alexnet");
  const Result<double> measured = measured_ideal_ms(alexnet, 200);
  ASSERT_TRUE(measured.ok()) << measured.error().to_string();
  Result<Profile> profile = load_profile(kSource + "/examples/profiles/alexnet-h100-sxm.json");
  ASSERT_TRUE(profile.ok());
  auto recorded = RecordedCostModel::create(std::move(profile).value(), alexnet.tdfg, {200}, "alexnet-h100-sxm.json");
  ASSERT_TRUE(recorded.ok());
  EXPECT_NEAR(*measured, ideal_run(alexnet.tdfg, **recorded, 200).time_ms, 1e-9 * *measured);
  // ResNet-50's file lacks batch norm's BP1: no ideal, and the missing task is named.
  const Result<double> partial = measured_ideal_ms(files[2], 128);
  ASSERT_FALSE(partial.ok());
  EXPECT_NE(partial.error().message.find("batchnorm"), std::string::npos);
}

TEST(KernelTimes, BadFilesAreRefusedWithTheKeyNamed) {
  auto parse = [](const std::string& text, MathMode math = MathMode::fp32) {
    return parse_kernel_times_file(text, "t.json", model_of("cifar_small"), "h100", math, "test");
  };
  const std::string option = "{\"algorithm\": \"implicit_gemm\", \"time_ms\": 0.05, \"workspace_bytes\": 0}";
  // A CPU result file is no GPU measurement.
  Result<KernelTimesFile> cpu = parse(results_text("cpu", kFp32Libraries, std::string(kCifarConv1Fp) + "@1", option));
  ASSERT_FALSE(cpu.ok());
  EXPECT_NE(cpu.error().to_string().find("t.json"), std::string::npos);
  // The manifest's math must be what the file says it ran.
  EXPECT_FALSE(parse(results_text("cuda", kFp32Libraries, std::string(kCifarConv1Fp) + "@1", option),
                     MathMode::tf32)
                   .ok());
  EXPECT_FALSE(parse(results_text("cuda", "cuDNN 9.19.0 (TF32 on)", std::string(kCifarConv1Fp) + "@1", option)).ok());
  // Not JSON of the format.
  EXPECT_FALSE(parse("{\"format\": \"mplan-profile\"}").ok());
  LayerSplit split;
  auto cases_of = [&](const std::string& key) {
    Result<KernelTimesFile> f = parse(results_text("cuda", kFp32Libraries, key, option));
    EXPECT_TRUE(f.ok()) << f.error().to_string();
    split.add_model(f->tdfg);
    return kernel_time_cases(*f, split);
  };
  // A key of another model, and malformed keys.
  for (const std::string& key : {std::string("conv in=[3, 227, 227] out=[96, 55, 55] kernel=11x11 stride=4x4 pad=0x0 "
                                             "groups=1 bias=1 FP@1"),
                                 std::string(kCifarConv1Fp), std::string(kCifarConv1Fp) + "@x",
                                 std::string(kCifarConv1Fp) + "@0"}) {
    Result<std::vector<Case>> cases = cases_of(key);
    ASSERT_FALSE(cases.ok()) << key;
    EXPECT_NE(cases.error().message.find(key.substr(0, 20)), std::string::npos) << cases.error().message;
  }
  // A good one.
  Result<std::vector<Case>> good = cases_of(std::string(kCifarConv1Fp) + "@4");
  ASSERT_TRUE(good.ok()) << good.error().to_string();
  ASSERT_EQ(good->size(), 1u);
  EXPECT_EQ((*good)[0].convs[0].first.batch, 4);
}

// A file whose profiler merged the update into one sgd_step (kernel_times.csv
// update_job: merged) gives no update case; one that ran it per layer does.
TEST(KernelTimes, AMergedUpdateIsLeftOutAndCounted) {
  const std::unique_ptr<Model> model = model_of("cifar_small");
  const Tdfg tdfg = build_tdfg(*model);
  std::string update_key;
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t)
    if (tdfg.tasks[t].kind == TaskKind::update) update_key = task_signature(describe_task(tdfg, t)) + "@0";
  ASSERT_FALSE(update_key.empty());
  const std::string option = "{\"algorithm\": \"default\", \"time_ms\": 0.008, \"workspace_bytes\": 0}";
  for (const bool merged : {false, true}) {
    Result<KernelTimesFile> f = parse_kernel_times_file(results_text("cuda", kFp32Libraries, update_key, option),
                                                        "t.json", model_of("cifar_small"), "h100", MathMode::fp32,
                                                        "test");
    ASSERT_TRUE(f.ok()) << f.error().to_string();
    f->update_merged = merged;
    LayerSplit split;
    split.add_model(f->tdfg);
    KernelTimesSummary summary;
    Result<std::vector<Case>> cases = kernel_time_cases(*f, split, &summary);
    ASSERT_TRUE(cases.ok()) << cases.error().to_string();
    EXPECT_EQ(cases->size(), merged ? 0u : 1u);
    EXPECT_EQ(summary.skipped.count("update timed as one merged sgd_step (kernel_times.csv update_job)"),
              merged ? 1u : 0u);
  }
}

// The graph API's engine configurations (graph_<r>, runtime/cuda/conv_graph.h)
// are no case and never the measured fastest: the model prices the legacy
// algorithms, and agreement is counted among those.
TEST(KernelTimes, GraphEngineConfigurationsAreLeftOutAndCounted) {
  const std::string options =
      "{\"algorithm\": \"graph_0\", \"time_ms\": 0.01, \"workspace_bytes\": 0}, "
      "{\"algorithm\": \"implicit_precomp_gemm\", \"time_ms\": 0.04, \"workspace_bytes\": 64}, "
      "{\"algorithm\": \"implicit_gemm\", \"time_ms\": 0.05, \"workspace_bytes\": 0}";
  Result<KernelTimesFile> f = parse_kernel_times_file(
      results_text("cuda", kFp32Libraries, std::string(kCifarConv1Fp) + "@4", options), "t.json",
      model_of("cifar_small"), "h100", MathMode::fp32, "test");
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  LayerSplit split;
  split.add_model(f->tdfg);
  KernelTimesSummary stats;
  Result<std::vector<Case>> cases = kernel_time_cases(*f, split, &stats);
  ASSERT_TRUE(cases.ok()) << cases.error().to_string();
  ASSERT_EQ(cases->size(), 2u);
  for (const Case& c : *cases) {
    EXPECT_NE(c.algorithm, "graph_0");
    EXPECT_EQ(c.measured_fastest, "implicit_precomp_gemm");
  }
  int skipped = 0;
  for (const auto& [why, count] : stats.skipped)
    if (why.find("graph-API engine configurations") != std::string::npos) skipped += count;
  EXPECT_EQ(skipped, 1);
}

// The split of the committed files' layers: the rule, pinned.
TEST(KernelTimesSplit, SecondOfEveryThreeLayersOfEachOpIsHeldOutWhole) {
  const std::vector<KernelTimesFile> files = layer_split_files();
  ASSERT_EQ(files.size(), 3u);
  LayerSplit split;
  for (const KernelTimesFile& f : files) split.add_model(f.tdfg);
  // AlexNet's five convolutions come first: conv2 and conv5 held out.
  std::vector<std::pair<std::string, bool>> convs;
  for (const auto& [layer, holdout] : split.layers())
    if (layer.rfind("conv ", 0) == 0) convs.emplace_back(layer, holdout);
  ASSERT_EQ(convs.size(), 5u + 3u + 23u);
  for (size_t i = 0; i < convs.size(); ++i) EXPECT_EQ(convs[i].second, i % 3 == 1) << convs[i].first;
  EXPECT_EQ(convs[1].first, "conv in=[96, 27, 27] out=[256, 27, 27] kernel=5x5 stride=1x1 pad=2x2 groups=1 bias=1");
  EXPECT_EQ(convs[4].first, "conv in=[384, 13, 13] out=[256, 13, 13] kernel=3x3 stride=1x1 pad=1x1 groups=1 bias=1");
  // Every case of a layer is on one side, at every sub-batch and for every algorithm.
  const std::vector<Case> cases = load_kernel_time_cases(files);
  std::map<std::string, std::set<bool>> sides;
  std::map<std::string, std::set<std::string>> sub_batches;
  for (const Case& c : cases) {
    sides[c.layer].insert(c.holdout);
    EXPECT_EQ(c.holdout, split.holdout(c.layer));
    sub_batches[c.layer].insert(c.task.substr(c.task.rfind('@')));
  }
  for (const auto& [layer, set] : sides) EXPECT_EQ(set.size(), 1u) << layer;
  EXPECT_GT(sub_batches.at(convs[1].first).size(), 1u);  // held out at several sub-batches
  // Deterministic: built again (and from the files in the same order), the same split.
  LayerSplit again;
  for (const KernelTimesFile& f : layer_split_files()) again.add_model(f.tdfg);
  EXPECT_EQ(again.layers(), split.layers());
  // A layer seen in an earlier file keeps its first number: softmax_xent over
  // 1000 classes is AlexNet's (number 0, fit), not ResNet-50's third.
  EXPECT_FALSE(split.holdout("softmax_xent in=[1000] out=[1000]"));
  EXPECT_TRUE(split.holdout("softmax_xent in=[10] out=[10]"));
}

TEST(OwnTable, EntriesWithoutDataKeepTheParentsRatioToPrecomputedGemm) {
  Params p;
  OwnTable own;
  own.table = arch_table(p, "hopper", ArchEfficiency{});
  const ArchEfficiency parent = own.table;
  const int ipg = static_cast<int>(ConvFamily::implicit_precomp_gemm);
  const int wino = static_cast<int>(ConvFamily::winograd);
  const int fwd = static_cast<int>(ConvDirection::forward);
  own.measured[ipg][fwd] = true;
  own.table.conv[ipg][fwd] = 0.3;
  own.table.conv[wino][fwd] = 0.99;  // no data: ignored
  own.table.memory_efficiency = 0.5;
  own.table.conv_kernel_overhead_us = 7;
  own.table.family_call_overhead_us[ipg][fwd] = 60;
  own.table.pointwise_call_overhead_us[ipg][fwd] = 120;
  p.own["hopper"] = own;
  const ArchEfficiency table = arch_table(p, "hopper", ArchEfficiency{});
  EXPECT_DOUBLE_EQ(table.conv[ipg][fwd], 0.3);
  EXPECT_DOUBLE_EQ(table.conv[wino][fwd], 0.3 * parent.conv[wino][fwd] / parent.conv[ipg][fwd]);
  // A direction whose precomputed GEMM has no data keeps the parent's values.
  const int bd = static_cast<int>(ConvDirection::backward_data);
  EXPECT_DOUBLE_EQ(table.conv[wino][bd], parent.conv[wino][bd]);
  EXPECT_DOUBLE_EQ(table.memory_efficiency, 0.5);
  EXPECT_DOUBLE_EQ(table.kernel_overhead_us(), 7);
  EXPECT_DOUBLE_EQ(table.call_overhead_us(ConvFamily::implicit_precomp_gemm, ConvDirection::forward), 60);
  EXPECT_DOUBLE_EQ(table.call_overhead_us(ConvFamily::implicit_precomp_gemm, ConvDirection::forward, true), 120);
  // Tensor cores stay the parent's; other architectures are untouched.
  EXPECT_DOUBLE_EQ(table.tensor_tf32, parent.tensor_tf32);
  EXPECT_EQ(arch_table(p, "ampere", ArchEfficiency{}).conv, arch_table(Params{}, "ampere", ArchEfficiency{}).conv);
}

// Generations without data of their own borrow a relative's values, tensor
// cores included: Turing Volta's (FP16 only), Ada Ampere's (TF32, FP16, BF16).
TEST(SharedTable, TuringAndAdaBorrowVoltaAndAmpere) {
  Params p;
  p.arch["volta"].s = 0.7;
  p.arch["volta"].fp16 = 0.25;
  p.arch["ampere"].tf32 = 0.35;
  p.arch["ampere"].fp16 = 0.6;
  EXPECT_EQ(params_arch("turing"), "volta");
  EXPECT_EQ(params_arch("ada"), "ampere");
  const ArchEfficiency turing = arch_table(p, "turing", ArchEfficiency{});
  const ArchEfficiency ada = arch_table(p, "ada", ArchEfficiency{});
  EXPECT_EQ(turing.conv, arch_table(p, "volta", ArchEfficiency{}).conv);
  EXPECT_DOUBLE_EQ(turing.conv[static_cast<int>(ConvFamily::implicit_precomp_gemm)][0], 0.7);
  EXPECT_DOUBLE_EQ(turing.tensor_fp16, 0.25);
  EXPECT_EQ(turing.tensor_tf32, 0);
  EXPECT_EQ(turing.tensor_bf16, 0);
  EXPECT_EQ(ada.conv, arch_table(p, "ampere", ArchEfficiency{}).conv);
  EXPECT_DOUBLE_EQ(ada.tensor_tf32, 0.35);
  EXPECT_DOUBLE_EQ(ada.tensor_fp16, 0.6);
  EXPECT_DOUBLE_EQ(ada.tensor_bf16, 0.6);
  // Speed factors fitted on a borrower's own networks scale its compute, and nothing else.
  const ArchEfficiency volta = arch_table(p, "volta", ArchEfficiency{});
  p.speed["turing"][MathMode::fp32] = 0.5;
  p.speed["ada"][MathMode::tf32] = 1.5;
  const ArchEfficiency slow = arch_table(p, "turing", ArchEfficiency{});
  const ArchEfficiency fast = arch_table(p, "ada", ArchEfficiency{});
  for (int f = 0; f < kConvFamilies; ++f)
    for (int d = 0; d < 3; ++d) EXPECT_DOUBLE_EQ(slow.conv[f][d], std::min(1.0, volta.conv[f][d] * 0.5)) << f << d;
  EXPECT_DOUBLE_EQ(slow.linear_gemm, std::min(0.9, volta.linear_gemm * 0.5));
  EXPECT_DOUBLE_EQ(slow.tensor_fp16, 0.25);
  EXPECT_DOUBLE_EQ(slow.memory_efficiency, volta.memory_efficiency);
  EXPECT_DOUBLE_EQ(fast.tensor_tf32, 0.35 * 1.5);
  EXPECT_DOUBLE_EQ(fast.tensor_fp16, 0.6);
  EXPECT_EQ(fast.conv, arch_table(p, "ampere", ArchEfficiency{}).conv);
  EXPECT_EQ(arch_table(p, "volta", ArchEfficiency{}).conv, volta.conv);  // the relative does not move
  // An FP16 factor moves BF16 too (BF16 is priced as FP16).
  p.speed["ada"][MathMode::fp16] = 0.5;
  EXPECT_DOUBLE_EQ(arch_table(p, "ada", ArchEfficiency{}).tensor_bf16, 0.3);
  // A table fitted on networks has no call overheads of its own (networks
  // cannot tell a call's from a kernel's, nor a pointwise layer's): a file's
  // earlier ones are dropped.
  ArchEfficiency file;
  file.conv_kernel_overhead_us = 3;
  file.family_call_overhead_us[0][0] = 50;
  file.pointwise_call_overhead_us[0][0] = 90;
  const ArchEfficiency refitted = arch_table(p, "volta", file);
  EXPECT_LT(refitted.conv_kernel_overhead_us, 0);
  EXPECT_EQ(refitted.family_call_overhead_us, ArchEfficiency::unset_overheads());
  EXPECT_EQ(refitted.pointwise_call_overhead_us, ArchEfficiency::unset_overheads());
}

// The fit: a borrower's fit cases fit its speed factor alone; its relative's
// values are those of the same fit without them.
TEST(SharedTable, BorrowersCasesFitTheirSpeedFactorOnly) {
  Case volta_case, turing_case;
  for (Case* c : {&volta_case, &turing_case}) {
    c->kind = CaseKind::conv_task;
    c->library = "cuDNN 7.0";
    c->math = MathMode::fp32;
    c->convs.push_back({conv_task(make_conv_shape(64, 28, 28, 64, 3, 3, 1, 1), ConvDirection::forward, 32, c->library), 1.0});
  }
  volta_case.device = "v100";
  turing_case.device = "quadro-rtx8000";
  Devices devices = load_case_devices({volta_case, turing_case});
  calibration::apply(Params{}, devices);
  volta_case.measured_ms = predict_ms(volta_case, devices.at("v100"), {}) * 1.3;
  turing_case.measured_ms = predict_ms(turing_case, devices.at("quadro-rtx8000"), {}) * 2.0;
  const Params alone = fit({volta_case}, devices);
  const Params both = fit({volta_case, turing_case}, devices);
  EXPECT_TRUE(alone.speed.empty());
  ASSERT_EQ(both.speed.count("turing"), 1u);
  EXPECT_EQ(both.arch.at("volta").s, alone.arch.at("volta").s);
  // The Turing case ran 2x the Volta table's time: its factor slows Turing's compute.
  EXPECT_LT(both.speed.at("turing").at(MathMode::fp32), 0.8);
}

// A release candidate has a factor of its own (convnet-benchmarks timed the
// Titan X's single layers with cuDNN R3-rc1 and its networks with R3), and
// the committed data say which is which.
TEST(SourceTerms, ReleaseCandidateIsAReleaseOfItsOwn) {
  EXPECT_EQ(release_key("maxwell", "cuDNN R3-rc1 (auto-tuner on)"), "maxwell.R3-rc1");
  EXPECT_EQ(release_key("maxwell", "cuDNN R3"), "maxwell.R3");
  EXPECT_EQ(release_key("kepler", "cuDNN R2"), "kepler.R2");
  EXPECT_EQ(old_release("cuDNN R3-rc1"), 3);
  EXPECT_EQ(old_release("cuDNN R30"), 0);
  EXPECT_EQ(old_release("cuDNN R4"), 0);
  Case c;
  c.kind = CaseKind::conv_task;
  c.library = "cuDNN R3-rc1";
  c.release = old_release(c.library);
  c.device = "titanx";
  c.convs.push_back({conv_task(make_conv_shape(64, 28, 28, 64, 3, 3, 1, 1), ConvDirection::forward, 32, c.library), 1.0});
  Devices devices = load_case_devices({c});
  const double plain = predict_ms(c, devices.at("titanx"), {});
  EXPECT_GT(plain, 0);
  EXPECT_DOUBLE_EQ(predict_ms(c, devices.at("titanx"), {{"maxwell.R3-rc1", 2.0}}), 2 * plain);
  EXPECT_DOUBLE_EQ(predict_ms(c, devices.at("titanx"), {{"maxwell.R3", 2.0}}), plain);
  // The Titan X's single layers are R3-rc1's, its networks R3's, and the fit gives each a factor.
  std::map<std::string, int> titanx_layers, titanx_networks;
  const std::vector<Case> cases = load_cases(kData, kSource);
  for (const Case& loaded : cases) {
    if (loaded.device != "titanx") continue;
    if (loaded.kind == CaseKind::conv_task) ++titanx_layers[loaded.library];
    if (loaded.kind == CaseKind::network) ++titanx_networks[loaded.library];
  }
  EXPECT_EQ(titanx_layers["cuDNN R3-rc1"], 15);
  EXPECT_EQ(titanx_layers.count("cuDNN R3"), 0u);
  EXPECT_EQ(titanx_networks["cuDNN R3"], 9);
  EXPECT_EQ(titanx_networks.count("cuDNN R3-rc1"), 0u);
  std::vector<Case> published;
  for (const Case& loaded : cases)
    if (!loaded.kernel_times) published.push_back(loaded);
  const SourceTerms factors = fit_source_terms(published, load_case_devices(published));
  EXPECT_EQ(factors.count("maxwell.R3"), 1u);
  EXPECT_EQ(factors.count("maxwell.R3-rc1"), 1u);
}

// What cuDNN never ran for a fit task the model supports is not offered
// (cuDNN 9.19 on the H100: no fused Winograd, no backward-filter FFT tiling).
TEST(OwnTable, AlgorithmsCudnnNeverRanAreUnavailable) {
  const ConvShape three = make_conv_shape(64, 56, 56, 64, 3, 3, 1, 1);
  const ConvShape strided = make_conv_shape(64, 56, 56, 128, 3, 3, 2, 1);
  auto timed = [](ConvDirection d, const ConvShape& s, const std::string& algorithm, bool holdout) {
    Case c;
    c.kernel_times = true;
    c.holdout = holdout;
    c.algorithm = algorithm;
    ConvTask task;
    task.shape = s;
    task.direction = d;
    task.batch = 8;
    task.options.push_back(conv_option(d, algorithm, s, 8));
    c.convs.push_back({task, 1.0});
    return c;
  };
  std::vector<Case> cases;
  for (const char* a : {"implicit_gemm", "implicit_precomp_gemm", "gemm", "fft", "fft_tiling", "winograd_nonfused"})
    cases.push_back(timed(ConvDirection::forward, three, a, false));
  cases.push_back(timed(ConvDirection::forward, strided, "implicit_gemm", false));  // winograd refused: says nothing
  cases.push_back(timed(ConvDirection::forward, three, "winograd", true));         // held out: not looked at
  for (const char* a : {"algo_0", "algo_1", "algo_3", "fft"})
    cases.push_back(timed(ConvDirection::backward_filter, three, a, false));
  const auto off = unavailable_algorithms(cases);
  EXPECT_EQ(off[static_cast<int>(ConvDirection::forward)], std::vector<std::string>{"winograd"});
  EXPECT_TRUE(off[static_cast<int>(ConvDirection::backward_data)].empty());  // no backward-data task: nothing known
  EXPECT_EQ(off[static_cast<int>(ConvDirection::backward_filter)],
            (std::vector<std::string>{"fft_tiling", "winograd_nonfused"}));
}

// The GEMM families share the own table's one tile cost, and its list of
// algorithms cuDNN does not run is kept.
TEST(OwnTable, TileCostIsSharedByTheGemmFamilies) {
  Params p;
  OwnTable own;
  own.table = arch_table(p, "hopper", ArchEfficiency{});
  own.table.reduction_half_length[static_cast<int>(ConvFamily::implicit_precomp_gemm)] = 80;
  own.table.unavailable[static_cast<int>(ConvDirection::forward)] = {"winograd"};
  own.table.filter_reduction_chunk[static_cast<int>(ConvFamily::gemm)] = 256;
  p.own["hopper"] = own;
  const ArchEfficiency table = arch_table(p, "hopper", ArchEfficiency{});
  for (ConvFamily f : {ConvFamily::implicit_gemm, ConvFamily::implicit_precomp_gemm, ConvFamily::gemm})
    EXPECT_DOUBLE_EQ(table.reduction_half(f), 80) << conv_family_name(f);
  EXPECT_EQ(table.reduction_half(ConvFamily::fft), 0);
  EXPECT_DOUBLE_EQ(table.filter_chunk(ConvFamily::gemm), 256);  // per family, not shared
  EXPECT_EQ(table.filter_chunk(ConvFamily::implicit_gemm), 0);
  EXPECT_FALSE(table.runs(ConvDirection::forward, "winograd"));
  // The shared architectures have neither.
  const ArchEfficiency ampere = arch_table(p, "ampere", ArchEfficiency{});
  EXPECT_EQ(ampere.reduction_half(ConvFamily::gemm), 0);
  EXPECT_EQ(ampere.filter_chunk(ConvFamily::gemm), 0);
  EXPECT_TRUE(ampere.runs(ConvDirection::forward, "winograd"));
}


// A GPU held out whole (kernel_times.csv's split "holdout": a GPU the fit
// never sees): every one of its cases is held out, and it leaves the other
// files' layer split exactly as it was. Here the H200's files are marked so.
TEST(KernelTimesSplit, AGpuHeldOutWholeIsHeldOutEverywhereAndMovesNoOtherLayer) {
  std::vector<KernelTimesFile> all = committed_files();
  int whole = 0;
  for (KernelTimesFile& f : all) {
    EXPECT_FALSE(f.holdout_whole) << f.file << ": kernel_times.csv holds out no file whole now";
    if (f.device != "h200") continue;
    f.holdout_whole = true;
    ++whole;
  }
  ASSERT_GE(whole, 2);
  LayerSplit split;
  const std::vector<Case> cases = load_kernel_time_cases(all, nullptr, &split);
  LayerSplit by_layers;
  for (const KernelTimesFile& f : layer_split_files()) by_layers.add_model(f.tdfg);
  EXPECT_EQ(split.layers(), by_layers.layers());
  int h200 = 0;
  for (const Case& c : cases) {
    if (c.device != "h200") {
      EXPECT_EQ(c.holdout, by_layers.holdout(c.layer)) << c.task;
      continue;
    }
    ++h200;
    EXPECT_TRUE(c.holdout) << c.task;
    EXPECT_EQ(c.gpu, "NVIDIA H200");
  }
  EXPECT_GT(h200, 1000);
}

}  // namespace
}  // namespace mplan::calibration
