// Architecture tables: every shipped one loads; bad files say where and what;
// the families of cuDNN's algorithms.

#include "profiler/arch_efficiency.h"

#include <gtest/gtest.h>

namespace mplan {
namespace {

const char* kGood = R"(name: test
conv_efficiency:
  implicit_gemm: {forward: 0.4, backward_data: 0.3, backward_filter: 0.3}
  implicit_precomp_gemm: {forward: 0.6, backward_data: 0.5, backward_filter: 0.5}
  gemm: {forward: 0.7, backward_data: 0.6, backward_filter: 0.6}
  fft: {forward: 0.6, backward_data: 0.5, backward_filter: 0.5}
  fft_tiling: {forward: 0.6, backward_data: 0.5, backward_filter: 0.5}
  winograd: {forward: 0.5, backward_data: 0.4}
  winograd_nonfused: {forward: 0.6, backward_data: 0.5, backward_filter: 0.5}
fft_transform_efficiency: 0.2
linear_gemm_efficiency: 0.7
half_saturation_items_per_sm: 8192
conv_call_overhead_us: 5
memory_efficiency: 0.8
tensor_core_efficiency: {tf32: 0.4}
)";

// The message of parsing kGood with `extra` appended, which must fail.
std::string error_with(const std::string& extra) {
  Result<ArchEfficiency> bad = parse_arch_efficiency(std::string(kGood) + extra, "t.yaml");
  EXPECT_FALSE(bad.ok()) << extra;
  return bad.ok() ? std::string() : bad.error().to_string();
}

TEST(ArchEfficiency, EveryShippedTableLoads) {
  const std::vector<std::string> names = available_architectures();
  for (const char* wanted : {"kepler", "maxwell", "pascal", "volta", "ampere", "hopper", "turing", "ada"})
    EXPECT_NE(std::find(names.begin(), names.end(), wanted), names.end()) << wanted;
  for (const std::string& name : names) {
    Result<ArchEfficiency> arch = load_arch_efficiency(name);
    ASSERT_TRUE(arch.ok()) << arch.error().to_string();
    for (int f = 0; f < kConvFamilies; ++f)
      for (int d = 0; d < 3; ++d) {
        if (f == static_cast<int>(ConvFamily::winograd) && d == 2) continue;  // no backward-filter winograd
        EXPECT_GT(arch->conv[f][d], 0) << name << " " << f << " " << d;
        EXPECT_LE(arch->conv[f][d], 1.5) << name;
      }
    EXPECT_FALSE(arch->held_out_error.empty()) << name << ": the bench writes the held-out error";
  }
  // Volta has FP16 tensor cores only; Ampere and Hopper TF32, FP16 and BF16; earlier GPUs none.
  EXPECT_GT(load_arch_efficiency("volta")->tensor_efficiency(MathMode::fp16), 0);
  EXPECT_EQ(load_arch_efficiency("volta")->tensor_efficiency(MathMode::tf32), 0);
  EXPECT_GT(load_arch_efficiency("ampere")->tensor_efficiency(MathMode::tf32), 0);
  EXPECT_GT(load_arch_efficiency("hopper")->tensor_efficiency(MathMode::bf16), 0);
  EXPECT_EQ(load_arch_efficiency("kepler")->tensor_efficiency(MathMode::fp16), 0);
  // Turing and Ada have no tables of their own: as written by the bench, Volta's and Ampere's math
  // modes (Turing FP16 only) and values, where not scaled by a speed factor fitted on their networks
  // (Turing FP32, Ada TF32).
  const ArchEfficiency turing = *load_arch_efficiency("turing"), volta = *load_arch_efficiency("volta");
  const ArchEfficiency ada = *load_arch_efficiency("ada"), ampere = *load_arch_efficiency("ampere");
  EXPECT_EQ(turing.tensor_efficiency(MathMode::fp16), volta.tensor_efficiency(MathMode::fp16));
  EXPECT_EQ(turing.tensor_efficiency(MathMode::tf32), 0);
  EXPECT_EQ(turing.memory_efficiency, volta.memory_efficiency);
  EXPECT_EQ(ada.conv, ampere.conv);
  EXPECT_EQ(ada.tensor_efficiency(MathMode::fp16), ampere.tensor_efficiency(MathMode::fp16));
  EXPECT_NE(turing.fitted_on.find("Volta's table"), std::string::npos) << turing.fitted_on;
  EXPECT_NE(ada.fitted_on.find("Ampere's table"), std::string::npos) << ada.fitted_on;
}

TEST(ArchEfficiency, ParsesEveryFigure) {
  Result<ArchEfficiency> arch = parse_arch_efficiency(kGood, "t.yaml");
  ASSERT_TRUE(arch.ok()) << arch.error().to_string();
  EXPECT_DOUBLE_EQ(arch->conv_efficiency(ConvFamily::gemm, ConvDirection::backward_filter), 0.6);
  EXPECT_DOUBLE_EQ(arch->conv_efficiency(ConvFamily::winograd, ConvDirection::backward_data), 0.4);
  EXPECT_DOUBLE_EQ(arch->fft_transform, 0.2);
  EXPECT_DOUBLE_EQ(arch->half_items_per_sm, 8192);
  EXPECT_DOUBLE_EQ(arch->tensor_efficiency(MathMode::tf32), 0.4);
  EXPECT_EQ(arch->tensor_efficiency(MathMode::fp16), 0);
}

TEST(ArchEfficiency, BadTablesSayWhereAndWhat) {
  const std::string good = kGood;
  auto error_of = [](const std::string& text) {
    Result<ArchEfficiency> arch = parse_arch_efficiency(text, "t.yaml");
    EXPECT_FALSE(arch.ok());
    return arch.ok() ? std::string() : arch.error().to_string();
  };
  std::string missing_family = good;
  missing_family.erase(missing_family.find("  fft_tiling:"), missing_family.find("  winograd:") - missing_family.find("  fft_tiling:"));
  EXPECT_NE(error_of(missing_family).find("missing 'fft_tiling"), std::string::npos);
  std::string typo = good;
  typo.replace(typo.find("backward_data: 0.3"), 18, "backwards_data: 0.3");
  EXPECT_NE(error_of(typo).find("unknown direction 'backwards_data'"), std::string::npos);
  std::string too_fast = good;
  too_fast.replace(too_fast.find("forward: 0.7"), 12, "forward: 7");
  const std::string fast_error = error_of(too_fast);
  EXPECT_NE(fast_error.find("t.yaml:5:"), std::string::npos) << fast_error;
  EXPECT_NE(fast_error.find("expected a fraction of peak"), std::string::npos);
  EXPECT_NE(error_of(good + "memroy: 1\n").find("unknown key 'memroy'"), std::string::npos);
  std::string bad_mode = good;
  bad_mode.replace(bad_mode.find("{tf32: 0.4}"), 11, "{fp8: 0.4}");
  EXPECT_NE(error_of(bad_mode).find("unknown math mode 'fp8'"), std::string::npos);
  EXPECT_NE(error_of("name: x\n").find("missing 'conv_efficiency'"), std::string::npos);
  Result<ArchEfficiency> unknown = load_arch_efficiency("fermi");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("volta"), std::string::npos);
}

TEST(ArchEfficiency, GemmTileCostAndUnavailableAlgorithms) {
  const std::string good = kGood;
  Result<ArchEfficiency> plain = parse_arch_efficiency(good, "t.yaml");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->reduction_half(ConvFamily::implicit_precomp_gemm), 0);  // absent: no tile cost
  EXPECT_TRUE(plain->runs(ConvDirection::forward, "winograd"));
  Result<ArchEfficiency> arch = parse_arch_efficiency(
      good + "gemm_reduction_half_length: {implicit_precomp_gemm: 300, gemm: 40}\n"
             "unavailable_algorithms: {forward: [winograd], backward_filter: [fft_tiling, algo_3]}\n",
      "t.yaml");
  ASSERT_TRUE(arch.ok()) << arch.error().to_string();
  EXPECT_DOUBLE_EQ(arch->reduction_half(ConvFamily::implicit_precomp_gemm), 300);
  EXPECT_DOUBLE_EQ(arch->reduction_half(ConvFamily::gemm), 40);
  EXPECT_EQ(arch->filter_chunk(ConvFamily::gemm), 0);  // absent: the model's default
  Result<ArchEfficiency> split = parse_arch_efficiency(good + "filter_reduction_chunk: {implicit_precomp_gemm: 32768}\n", "t.yaml");
  ASSERT_TRUE(split.ok()) << split.error().to_string();
  EXPECT_DOUBLE_EQ(split->filter_chunk(ConvFamily::implicit_precomp_gemm), 32768);
  EXPECT_EQ(arch->reduction_half(ConvFamily::implicit_gemm), 0);
  EXPECT_FALSE(arch->runs(ConvDirection::forward, "winograd"));
  EXPECT_TRUE(arch->runs(ConvDirection::backward_data, "winograd"));
  EXPECT_FALSE(arch->runs(ConvDirection::backward_filter, "fft_tiling"));
  EXPECT_FALSE(arch->runs(ConvDirection::backward_filter, "algo_3"));
  EXPECT_TRUE(arch->runs(ConvDirection::forward, "fft_tiling"));

  auto error_of = [](const std::string& extra) { return error_with(extra); };
  EXPECT_NE(error_of("gemm_reduction_half_length: {fft: 10}\n").find("unknown GEMM family 'fft'"), std::string::npos);
  EXPECT_NE(error_of("filter_reduction_chunk: {winograd: 10}\n").find("unknown GEMM family 'winograd'"),
            std::string::npos);
  EXPECT_NE(error_of("filter_reduction_chunk: {gemm: 0.5}\n").find("expected 0 (the default) or at least 1"),
            std::string::npos);
  EXPECT_NE(error_of("gemm_reduction_half_length: {gemm: -1}\n").find("expected a finite number >= 0"), std::string::npos);
  // An infinite tile cost would price every GEMM kernel at infinite time.
  EXPECT_NE(error_of("gemm_reduction_half_length: {gemm: .inf}\n").find("expected a finite number >= 0"),
            std::string::npos);
  EXPECT_NE(error_of("gemm_reduction_half_length: 5\n").find("expected a map"), std::string::npos);
  EXPECT_NE(error_of("unavailable_algorithms: {forwards: [fft]}\n").find("unknown direction 'forwards'"),
            std::string::npos);
  EXPECT_NE(error_of("unavailable_algorithms: {backward_data: [algo_3]}\n").find("'algo_3' is no backward_data"),
            std::string::npos);
  EXPECT_NE(error_of("unavailable_algorithms: {forward: [direct]}\n").find("'direct' is no forward algorithm"),
            std::string::npos);
  EXPECT_NE(error_of("unavailable_algorithms: {forward: winograd}\n").find("expected a list"), std::string::npos);
  // The zero-workspace algorithm is the planner's leanest option: it cannot be left out.
  EXPECT_NE(error_of("unavailable_algorithms: {backward_data: [algo_0]}\n").find("cannot be left out"),
            std::string::npos);
  EXPECT_NE(error_of("unavailable_algorithms: {forward: [implicit_gemm]}\n").find("cannot be left out"),
            std::string::npos);
}

TEST(ArchEfficiency, PointwiseFactors) {
  const std::string good = kGood;
  Result<ArchEfficiency> plain = parse_arch_efficiency(good, "t.yaml");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->pointwise_factor(ConvFamily::implicit_gemm, ConvDirection::forward), 1.0);  // absent: 1
  Result<ArchEfficiency> arch = parse_arch_efficiency(
      good + "pointwise_conv_factor:\n  implicit_gemm: {forward: 1.25, backward_filter: 0.5}\n  gemm: {forward: 0.8}\n",
      "t.yaml");
  ASSERT_TRUE(arch.ok()) << arch.error().to_string();
  EXPECT_DOUBLE_EQ(arch->pointwise_factor(ConvFamily::implicit_gemm, ConvDirection::forward), 1.25);
  EXPECT_DOUBLE_EQ(arch->pointwise_factor(ConvFamily::implicit_gemm, ConvDirection::backward_filter), 0.5);
  EXPECT_DOUBLE_EQ(arch->pointwise_factor(ConvFamily::implicit_gemm, ConvDirection::backward_data), 1.0);
  EXPECT_DOUBLE_EQ(arch->pointwise_factor(ConvFamily::gemm, ConvDirection::forward), 0.8);
  EXPECT_DOUBLE_EQ(arch->pointwise_factor(ConvFamily::implicit_precomp_gemm, ConvDirection::forward), 1.0);

  auto error_of = [](const std::string& extra) { return error_with(extra); };
  EXPECT_NE(error_of("pointwise_conv_factor: {fft: {forward: 1}}\n").find("unknown GEMM family 'fft'"),
            std::string::npos);
  EXPECT_NE(error_of("pointwise_conv_factor: {gemm: {sideways: 1}}\n").find("unknown direction 'sideways'"),
            std::string::npos);
  EXPECT_NE(error_of("pointwise_conv_factor: {gemm: 2}\n").find("expected a map {forward"), std::string::npos);
  EXPECT_NE(error_of("pointwise_conv_factor: [1]\n").find("expected a map {implicit_gemm"), std::string::npos);
  EXPECT_NE(error_of("pointwise_conv_factor: {gemm: {forward: 0}}\n").find("expected a factor in (0, 5]"),
            std::string::npos);
  EXPECT_NE(error_of("pointwise_conv_factor: {gemm: {forward: 6}}\n").find("expected a factor in (0, 5]"),
            std::string::npos);
  EXPECT_NE(error_of("pointwise_conv_factor: {gemm: {forward: .nan}}\n").find("expected a factor in (0, 5]"),
            std::string::npos);
  EXPECT_NE(error_of("pointwise_conv_factor: {gemm: {forward: -1}}\n").find("expected a factor in (0, 5]"),
            std::string::npos);
  // gemm forward is 0.7 of peak: 2.5x would be 1.75, faster than the 1.5 any efficiency may be.
  EXPECT_NE(error_of("pointwise_conv_factor: {gemm: {forward: 2.5}}\n").find("at most 1.5 of peak"),
            std::string::npos);
  EXPECT_NE(error_of("pointwise_conv_factor: {gemm: {forward: x}}\n").find("expected a number"), std::string::npos);
}

TEST(ArchEfficiency, CallAndKernelOverheads) {
  const std::string good = kGood;
  Result<ArchEfficiency> plain = parse_arch_efficiency(good, "t.yaml");
  ASSERT_TRUE(plain.ok());
  // Absent: every kernel and every family pays conv_call_overhead_us.
  EXPECT_DOUBLE_EQ(plain->kernel_overhead_us(), 5);
  EXPECT_DOUBLE_EQ(plain->call_overhead_us(ConvFamily::fft, ConvDirection::backward_data), 5);
  // A family's value: one number for every direction, or a map by direction.
  Result<ArchEfficiency> arch = parse_arch_efficiency(
      good + "conv_kernel_overhead_us: 0\nfamily_call_overhead_us: {implicit_precomp_gemm: 70, "
             "fft: {forward: 20, backward_filter: 30}}\n",
      "t.yaml");
  ASSERT_TRUE(arch.ok()) << arch.error().to_string();
  EXPECT_DOUBLE_EQ(arch->kernel_overhead_us(), 0);  // 0 is a value, not "absent"
  for (ConvDirection d : {ConvDirection::forward, ConvDirection::backward_data, ConvDirection::backward_filter})
    EXPECT_DOUBLE_EQ(arch->call_overhead_us(ConvFamily::implicit_precomp_gemm, d), 70);
  EXPECT_DOUBLE_EQ(arch->call_overhead_us(ConvFamily::fft, ConvDirection::forward), 20);
  EXPECT_DOUBLE_EQ(arch->call_overhead_us(ConvFamily::fft, ConvDirection::backward_data), 5);  // left out
  EXPECT_DOUBLE_EQ(arch->call_overhead_us(ConvFamily::fft, ConvDirection::backward_filter), 30);
  EXPECT_DOUBLE_EQ(arch->call_overhead_us(ConvFamily::implicit_gemm, ConvDirection::forward), 5);

  auto error_of = [](const std::string& extra) { return error_with(extra); };
  EXPECT_NE(error_of("conv_kernel_overhead_us: -1\n").find("expected a finite number >= 0"), std::string::npos);
  EXPECT_NE(error_of("conv_kernel_overhead_us: x\n").find("expected a number"), std::string::npos);
  EXPECT_NE(error_of("family_call_overhead_us: {direct: 3}\n").find("unknown family 'direct'"), std::string::npos);
  EXPECT_NE(error_of("family_call_overhead_us: {fft: .inf}\n").find("expected a finite number >= 0"),
            std::string::npos);
  EXPECT_NE(error_of("family_call_overhead_us: 3\n").find("expected a map of algorithm families"), std::string::npos);
  EXPECT_NE(error_of("family_call_overhead_us: {fft: {sideways: 3}}\n").find("unknown direction 'sideways'"),
            std::string::npos);
  EXPECT_NE(error_of("family_call_overhead_us: {fft: {forward: -3}}\n").find("expected a finite number >= 0"),
            std::string::npos);
  // The line after kGood's 15: the message says where.
  const std::string where = error_of("family_call_overhead_us: {gemm: -2}\n");
  EXPECT_NE(where.find("t.yaml:16:"), std::string::npos) << where;
}

// kernel_gap_us: the device's share of a launch, host_overhead_us the host's
// share of a cuDNN overhead (docs/cost-model.md, "Host and device"); absent,
// the whole launch and every overhead are the device's.
TEST(ArchEfficiency, HostAndDeviceShares) {
  const std::string good = kGood;
  Result<ArchEfficiency> plain = parse_arch_efficiency(good, "t.yaml");
  ASSERT_TRUE(plain.ok());
  EXPECT_LT(plain->kernel_gap_us, 0);
  Result<ArchEfficiency> arch = parse_arch_efficiency(good + "kernel_gap_us: 0.75\n", "t.yaml");
  ASSERT_TRUE(arch.ok()) << arch.error().to_string();
  EXPECT_DOUBLE_EQ(arch->kernel_gap_us, 0.75);
  EXPECT_NE(error_with("kernel_gap_us: -1\n").find("'kernel_gap_us': expected a finite number >= 0"),
            std::string::npos);
  EXPECT_NE(error_with("kernel_gap_us: [1]\n").find("'kernel_gap_us': expected a number"), std::string::npos);
  // host_overhead_us: absent, no overhead is the host's.
  EXPECT_DOUBLE_EQ(plain->host_overhead_us, 0);
  Result<ArchEfficiency> host = parse_arch_efficiency(good + "host_overhead_us: 12\n", "t.yaml");
  ASSERT_TRUE(host.ok()) << host.error().to_string();
  EXPECT_DOUBLE_EQ(host->host_overhead_us, 12);
  EXPECT_NE(error_with("host_overhead_us: -2\n").find("'host_overhead_us': expected a finite number >= 0"),
            std::string::npos);
  // Every shipped table fitted on networks has the same gap (one value fitted
  // for every architecture) and puts its call overhead on the host; Hopper's,
  // fitted on kernel times from an idle stream, splits nothing.
  const double volta = load_arch_efficiency("volta")->kernel_gap_us;
  EXPECT_GT(volta, 0);
  for (const std::string& name : available_architectures()) {
    const ArchEfficiency arch = *load_arch_efficiency(name);
    if (name == "hopper") {
      EXPECT_LT(arch.kernel_gap_us, 0);
      EXPECT_EQ(arch.host_overhead_us, 0);
      continue;
    }
    EXPECT_EQ(arch.kernel_gap_us, volta) << name;
    EXPECT_EQ(arch.host_overhead_us, arch.conv_call_overhead_us) << name;
  }
}

TEST(ArchEfficiency, PointwiseCallOverheads) {
  const std::string good = kGood;
  Result<ArchEfficiency> arch = parse_arch_efficiency(
      good + "family_call_overhead_us: {implicit_precomp_gemm: 40}\n"
             "pointwise_call_overhead_us: {implicit_precomp_gemm: {forward: 120}, gemm: 90}\n",
      "t.yaml");
  ASSERT_TRUE(arch.ok()) << arch.error().to_string();
  const ConvFamily ipg = ConvFamily::implicit_precomp_gemm;
  EXPECT_DOUBLE_EQ(arch->call_overhead_us(ipg, ConvDirection::forward, /*pointwise=*/true), 120);
  EXPECT_DOUBLE_EQ(arch->call_overhead_us(ipg, ConvDirection::forward), 40);  // another layer
  EXPECT_DOUBLE_EQ(arch->call_overhead_us(ipg, ConvDirection::backward_data, true), 40);  // left out: the family's
  EXPECT_DOUBLE_EQ(arch->call_overhead_us(ConvFamily::gemm, ConvDirection::backward_filter, true), 90);
  EXPECT_DOUBLE_EQ(arch->call_overhead_us(ConvFamily::implicit_gemm, ConvDirection::forward, true), 5);

  auto error_of = [](const std::string& extra) { return error_with(extra); };
  // The GEMM families only: no other family has a pointwise kernel of its own.
  EXPECT_NE(error_of("pointwise_call_overhead_us: {fft: 3}\n").find("'fft' is not a GEMM family"), std::string::npos);
  EXPECT_NE(error_of("pointwise_call_overhead_us: {direct: 3}\n").find("unknown family 'direct'"), std::string::npos);
  EXPECT_NE(error_of("pointwise_call_overhead_us: [1]\n").find("expected a map of algorithm families"),
            std::string::npos);
  EXPECT_NE(error_of("pointwise_call_overhead_us: {gemm: {up: 3}}\n").find("unknown direction 'up'"),
            std::string::npos);
  const std::string where = error_of("pointwise_call_overhead_us: {gemm: -2}\n");
  EXPECT_NE(where.find("t.yaml:16:"), std::string::npos) << where;
  EXPECT_NE(where.find("'pointwise_call_overhead_us.gemm'"), std::string::npos) << where;
}

TEST(ArchEfficiency, FamiliesOfCudnnAlgorithms) {
  ConvFamily f{};
  ASSERT_TRUE(conv_family_of(ConvDirection::backward_data, "algo_0", f));
  EXPECT_EQ(f, ConvFamily::implicit_gemm);
  ASSERT_TRUE(conv_family_of(ConvDirection::backward_filter, "algo_1", f));
  EXPECT_EQ(f, ConvFamily::implicit_precomp_gemm);
  ASSERT_TRUE(conv_family_of(ConvDirection::backward_filter, "algo_3", f));
  EXPECT_EQ(f, ConvFamily::gemm);
  ASSERT_TRUE(conv_family_of(ConvDirection::forward, "winograd_nonfused", f));
  EXPECT_EQ(f, ConvFamily::winograd_nonfused);
  EXPECT_FALSE(conv_family_of(ConvDirection::backward_data, "algo_3", f));
  EXPECT_FALSE(conv_family_of(ConvDirection::forward, "algo_0", f));
  EXPECT_FALSE(conv_family_of(ConvDirection::backward_data, "implicit_gemm", f));
  EXPECT_TRUE(conv_family_uses_tensor_cores(ConvFamily::implicit_precomp_gemm));
  EXPECT_FALSE(conv_family_uses_tensor_cores(ConvFamily::winograd));
}

}  // namespace
}  // namespace mplan
