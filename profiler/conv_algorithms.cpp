// cuDNN's convolution algorithms: support rules, workspace and work
// (conv_algorithms.h). The workspace formulas follow what each algorithm
// keeps in memory; the time is phases_cost over the phases returned by
// conv_work (kernel_work.h). How fast each phase's arithmetic runs is the device's
// architecture table's business (profiler/arch_efficiency.h): the work here is
// the same on every GPU.

#include "profiler/conv_algorithms.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace mplan {
namespace {

constexpr double kFloatBytes = 4;
constexpr double kComplexBytes = 8;  // complex64
constexpr int64_t kFftTile = 32;     // cuDNN FFT_TILING works on 32x32 tiles

// ... except for a filter of one row, which needs no transform along the
// height: cuDNN then transforms each image row on its own (tiles of 1 x 32).
// Its reported workspace is exactly that on every 1x1 layer of the H100's fit
// split (cuDNN 9.19: image planes of rows x 17 complex values, filter planes
// of 17), and the 32x32 tile predicted 1x1 layers on 7x7 and 14x14 images
// 2-6x too slow (docs/cost-model.md).
int64_t fft_tile_rows(const ConvShape& s) { return s.R == 1 ? 1 : kFftTile; }

// The reduction length one CTA of a weight-gradient kernel sums before its
// partial result is added to dW: cuDNN's backward-filter kernels split the
// b*P*Q reduction over as many CTAs as it takes (split-K), so a layer with
// few weights (1x1, 3-channel first layers) still fills the GPU. (The first
// model capped the split at 64, which predicted such layers 3-8x too slow on
// P100 and V100: docs/cost-model.md.)
constexpr double kFilterReductionChunk = 1024;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct Sizes {
  double b, x, y, w;  // sub-batch, input, output and filter elements (X and Y for b samples)
  double cg, kg;      // channels per group
};

Sizes sizes_of(const ConvShape& s, int64_t b) {
  return Sizes{static_cast<double>(b),
               static_cast<double>(b) * s.C * s.H * s.W,
               static_cast<double>(b) * s.K * s.P * s.Q,
               static_cast<double>(s.K) * (s.C / s.groups) * s.R * s.S,
               static_cast<double>(s.C / s.groups),
               static_cast<double>(s.K / s.groups)};
}

// The image domain a transform-based algorithm tiles: the output of the
// operation (forward: Y; backward-data: dX; backward-filter: dY, the image
// whose correlation with X gives dW).
void transformed_image(ConvDirection d, const ConvShape& s, int64_t& h, int64_t& w) {
  if (d == ConvDirection::backward_data) {
    h = s.H;
    w = s.W;
  } else {
    h = s.P;
    w = s.Q;
  }
}

// Winograd tile: m x m outputs from a x a inputs (Lavin & Gray, F(m x m, r x r)).
struct WinogradTile {
  int64_t m, a;
};
WinogradTile nonfused_tile(const ConvShape& s) { return s.R == 5 ? WinogradTile{2, 6} : WinogradTile{4, 6}; }

int64_t winograd_tiles(ConvDirection d, const ConvShape& s, int64_t m) {
  int64_t h = 0, w = 0;
  transformed_image(d, s, h, w);
  return ceil_div(h, m) * ceil_div(w, m);
}

int64_t fft_tiles(ConvDirection d, const ConvShape& s) {
  int64_t h = 0, w = 0;
  transformed_image(d, s, h, w);
  return ceil_div(h, fft_tile_rows(s) - s.R + 1) * ceil_div(w, kFftTile - s.S + 1);
}

// Planes an FFT or Winograd algorithm transforms: "in" and "out" scale with b.
struct Planes {
  double in, filter, out;
};
// The two image operands of a direction per sample in planes: forward reads
// X (C planes) and writes Y (K); backward-data reads dY (K) and writes dX (C);
// backward-filter reads X (C) and dY (K) and writes dW (K*C/g filter planes).
Planes planes_of(ConvDirection d, const ConvShape& s, double b, double tiles) {
  const double filter = static_cast<double>(s.K) * (s.C / s.groups);
  switch (d) {
    case ConvDirection::forward: return {b * s.C * tiles, filter, b * s.K * tiles};
    case ConvDirection::backward_data: return {b * s.K * tiles, filter, b * s.C * tiles};
    case ConvDirection::backward_filter: return {b * s.C * tiles, b * s.K * tiles, filter};
  }
  return {};
}

double fft_plane_flops(int64_t n_h, int64_t n_w) {
  const double n = static_cast<double>(n_h) * n_w;
  return 2.5 * n * std::log2(std::max(n, 2.0));  // real-to-complex: half of 5 n log2 n
}

// Elements read by the operation and written by it, and its parallel outputs.
struct Operands {
  double read_elements, written_elements, outputs;
};
Operands operands_of(ConvDirection d, const Sizes& z) {
  switch (d) {
    case ConvDirection::forward: return {z.x + z.w, z.y, z.y};
    case ConvDirection::backward_data: return {z.y + z.w, z.x, z.x};
    case ConvDirection::backward_filter: return {z.x + z.y, 2 * z.w, z.w};  // dW += (read-modify-write)
  }
  return {};
}

// Parallel work of a backward-filter GEMM: the filter elements times the
// split of the b*P*Q reduction over CTAs (kFilterReductionChunk each).
double filter_splits(const ConvShape& s, int64_t b) {
  return std::ceil(static_cast<double>(b) * s.P * s.Q / kFilterReductionChunk);
}
double filter_parallelism(const ConvShape& s, int64_t b) {
  return static_cast<double>(s.K) * (s.C / s.groups) * s.R * s.S * filter_splits(s, b);
}

double direct_outputs(ConvDirection d, const ConvShape& s, int64_t b, const Sizes& z) {
  return d == ConvDirection::backward_filter ? filter_parallelism(s, b) : operands_of(d, z).outputs;
}

// The reduction one output tile of a GEMM-family kernel sums (its tile cost,
// arch_efficiency.h reduction_half_length): forward C/g*R*S, backward-data
// K/g*R*S, backward-filter the split-K chunk of b*P*Q (filter_splits).
double gemm_reduction_length(ConvDirection d, const ConvShape& s, int64_t b) {
  switch (d) {
    case ConvDirection::forward: return static_cast<double>(s.C / s.groups) * s.R * s.S;
    case ConvDirection::backward_data: return static_cast<double>(s.K / s.groups) * s.R * s.S;
    case ConvDirection::backward_filter:
      return std::min(static_cast<double>(b) * s.P * s.Q, kFilterReductionChunk);
  }
  return 0;
}

// A GEMM-family arithmetic kernel's tiling: its reduction per tile and, for
// backward-filter, what split-K divides (the architecture may split at a
// chunk of its own: kernel_work.h effective_work).
void set_gemm_tiling(KernelWork& w, ConvDirection d, const ConvShape& s, int64_t b) {
  w.reduction_length = gemm_reduction_length(d, s, b);
  w.pointwise = conv_is_pointwise(s);
  if (d != ConvDirection::backward_filter) return;
  w.filter_elements = static_cast<double>(s.K) * (s.C / s.groups) * s.R * s.S;
  w.filter_reduction = static_cast<double>(b) * s.P * s.Q;
}

bool is(std::string_view a, const char* b) { return a == b; }

}  // namespace

bool conv_is_pointwise(const ConvShape& s) {
  return s.R == 1 && s.S == 1 && s.stride_h == 1 && s.stride_w == 1 && s.pad_h == 0 && s.pad_w == 0 && s.groups == 1;
}

ConvShape make_conv_shape(int64_t C, int64_t H, int64_t W, int64_t K, int64_t R, int64_t S, int64_t stride,
                          int64_t pad, int64_t groups, bool bias) {
  ConvShape s{C, H, W, K, R, S, stride, stride, pad, pad, groups, 1, 1, bias};
  s.P = (H + 2 * pad - R) / stride + 1;
  s.Q = (W + 2 * pad - S) / stride + 1;
  return s;
}

const std::vector<std::string>& conv_algorithm_names(ConvDirection direction) {
  // cudnnConvolutionFwdAlgo_t, cudnnConvolutionBwdDataAlgo_t, cudnnConvolutionBwdFilterAlgo_t.
  static const std::vector<std::string> forward = {"implicit_gemm", "implicit_precomp_gemm", "gemm", "direct",
                                                   "fft", "fft_tiling", "winograd", "winograd_nonfused"};
  static const std::vector<std::string> backward_data = {"algo_0", "algo_1", "fft", "fft_tiling",
                                                         "winograd", "winograd_nonfused"};
  static const std::vector<std::string> backward_filter = {"algo_0", "algo_1", "fft", "algo_3",
                                                           "winograd", "winograd_nonfused", "fft_tiling"};
  switch (direction) {
    case ConvDirection::forward: return forward;
    case ConvDirection::backward_data: return backward_data;
    case ConvDirection::backward_filter: return backward_filter;
  }
  return forward;
}

int cudnn_algorithm_id(ConvDirection direction, std::string_view name) {
  const auto& names = conv_algorithm_names(direction);
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<int>(i);
  return -1;
}

int64_t fft_friendly_size(int64_t n) {
  for (int64_t m = std::max<int64_t>(n, 1);; ++m) {
    int64_t r = m;
    for (int64_t p : {2, 3, 5, 7})
      while (r % p == 0) r /= p;
    if (r == 1) return m;
  }
}

std::optional<std::string> conv_unsupported_reason(ConvDirection d, std::string_view algorithm,
                                                   const ConvShape& s) {
  if (cudnn_algorithm_id(d, algorithm) < 0)
    return fmt::format("cuDNN has no {} algorithm '{}'", conv_direction_name(d), algorithm);
  const bool stride_one = s.stride_h == 1 && s.stride_w == 1;
  auto needs_stride_one = [&]() -> std::optional<std::string> {
    if (!stride_one) return fmt::format("{} needs stride 1, got {}x{}", algorithm, s.stride_h, s.stride_w);
    return std::nullopt;
  };
  auto needs_filter_above_pad = [&]() -> std::optional<std::string> {
    if (s.R <= s.pad_h || s.S <= s.pad_w)
      return fmt::format("{} needs a filter larger than its padding, got {}x{} with padding {}x{}", algorithm,
                         s.R, s.S, s.pad_h, s.pad_w);
    return std::nullopt;
  };
  if (is(algorithm, "direct")) return std::string("direct is not implemented by cuDNN (every shape is refused)");
  // Dilated filters: cuDNN's FFT and Winograd algorithms take dilation 1 only.
  const bool dilated = s.dilation_h != 1 || s.dilation_w != 1;
  if (dilated && (algorithm.find("fft") != std::string_view::npos ||
                  algorithm.find("winograd") != std::string_view::npos))
    return fmt::format("{} needs dilation 1, got {}x{}", algorithm, s.dilation_h, s.dilation_w);
  if (is(algorithm, "winograd") && d == ConvDirection::backward_filter)
    return std::string("backward-filter winograd is not implemented by cuDNN");
  if (is(algorithm, "fft")) {
    if (auto why = needs_stride_one()) return why;
    if (auto why = needs_filter_above_pad()) return why;
    if (s.H + 2 * s.pad_h > 256 || s.W + 2 * s.pad_w > 256)
      return fmt::format("fft needs a padded image of at most 256x256, got {}x{}", s.H + 2 * s.pad_h,
                         s.W + 2 * s.pad_w);
    return std::nullopt;
  }
  if (is(algorithm, "fft_tiling")) {
    if (auto why = needs_stride_one()) return why;
    if (auto why = needs_filter_above_pad()) return why;
    if (s.R > kFftTile || s.S > kFftTile)
      return fmt::format("fft_tiling needs a filter of at most 32x32 (its tile), got {}x{}", s.R, s.S);
    return std::nullopt;
  }
  if (is(algorithm, "winograd")) {
    if (s.R != 3 || s.S != 3) return fmt::format("winograd needs a 3x3 filter, got {}x{}", s.R, s.S);
    return needs_stride_one();
  }
  if (is(algorithm, "winograd_nonfused")) {
    if (!((s.R == 3 && s.S == 3) || (s.R == 5 && s.S == 5)))
      return fmt::format("winograd_nonfused needs a 3x3 or 5x5 filter, got {}x{}", s.R, s.S);
    return needs_stride_one();
  }
  return std::nullopt;  // the GEMM family and algo_0/1/3 support every 2-D shape
}

double conv_direct_flops(const ConvShape& s, int64_t b) {
  return 2.0 * b * s.K * s.P * s.Q * (s.C / s.groups) * s.R * s.S;
}

int64_t conv_workspace_bytes(ConvDirection d, std::string_view algorithm, const ConvShape& s, int64_t b) {
  MPLAN_CHECK(conv_supported(d, algorithm, s), fmt::format("workspace of an unsupported algorithm {}", algorithm));
  if (is(algorithm, "implicit_gemm") || is(algorithm, "algo_0")) return 0;
  if (is(algorithm, "implicit_precomp_gemm") || (is(algorithm, "algo_1") && d == ConvDirection::backward_filter))
    // One int32 offset per (c, r, s) of the reduction and per output pixel.
    return 4 * ((s.C / s.groups) * s.R * s.S + s.P * s.Q);
  if (is(algorithm, "algo_1")) return 0;  // backward-data algo_1
  if (is(algorithm, "gemm") || is(algorithm, "algo_3"))
    return s.C * s.R * s.S * s.P * s.Q * b * 4;  // the im2col buffer
  if (is(algorithm, "fft")) {
    const int64_t n_h = fft_friendly_size(s.H + 2 * s.pad_h), n_w = fft_friendly_size(s.W + 2 * s.pad_w);
    const Planes p = planes_of(d, s, static_cast<double>(b), 1);
    return static_cast<int64_t>((p.in + p.filter + p.out) * n_h * (n_w / 2 + 1) * kComplexBytes);
  }
  if (is(algorithm, "fft_tiling")) {
    const Planes p = planes_of(d, s, static_cast<double>(b), static_cast<double>(fft_tiles(d, s)));
    return static_cast<int64_t>((p.in + p.filter + p.out) * fft_tile_rows(s) * (kFftTile / 2 + 1) * kComplexBytes);
  }
  if (is(algorithm, "winograd"))  // fused F(2x2,3x3): only the 4x4 transformed filters are stored
    return s.K * (s.C / s.groups) * 4 * 4 * 4;
  if (is(algorithm, "winograd_nonfused")) {
    const WinogradTile t = nonfused_tile(s);
    const Planes p = planes_of(d, s, static_cast<double>(b), static_cast<double>(winograd_tiles(d, s, t.m)));
    return static_cast<int64_t>((p.in + p.filter + p.out) * t.a * t.a * kFloatBytes);
  }
  MPLAN_CHECK(false, fmt::format("no workspace formula for {}", algorithm));
  return 0;
}

namespace {

// The bias phase of conv_work (its last): the bias added to Y after the
// forward convolution, its gradient (a reduction of dY over b, P, Q) computed
// with the filter gradient (plain kernels).
std::vector<KernelWork> bias_work(ConvDirection d, const ConvShape& s, int64_t b) {
  const double y = static_cast<double>(b) * s.K * s.P * s.Q;
  if (s.bias && d == ConvDirection::forward) return {KernelWork{y, 2 * y * kFloatBytes, y, 1, 1}};
  if (s.bias && d == ConvDirection::backward_filter) return {KernelWork{y, y * kFloatBytes, y, 1, 1}};
  return {};
}

// conv_work of one call over every group at once (what the GEMM kernels do).
std::vector<KernelWork> conv_work_one_call(ConvDirection d, std::string_view algorithm, ConvFamily family,
                                           const ConvShape& s, int64_t b) {
  const Sizes z = sizes_of(s, b);
  const Operands io = operands_of(d, z);
  const double direct = conv_direct_flops(s, b);
  const double operand_bytes = (io.read_elements + io.written_elements) * kFloatBytes;
  const double outputs = direct_outputs(d, s, b, z);
  const double workspace = static_cast<double>(conv_workspace_bytes(d, algorithm, s, b));
  std::vector<KernelWork> phases;
  // The family's arithmetic kernel, a transform kernel, a memory-bound kernel.
  // The call's first kernel pays the call overhead, the others the kernel overhead.
  auto cudnn_kernel = [&phases] {
    return phases.empty() ? KernelWork::Cudnn::first_kernel : KernelWork::Cudnn::further_kernel;
  };
  auto arithmetic = [&](double flops, double bytes, double items) {
    KernelWork w{flops, bytes, items, 1, 1};
    w.cudnn = cudnn_kernel();
    w.kind = KernelClass::conv;
    w.family = family;
    w.direction = d;
    return w;
  };
  auto transform = [&](double flops, double bytes, double items) {
    KernelWork w{flops, bytes, items, 1, 1};
    w.cudnn = cudnn_kernel();
    w.family = family;
    w.direction = d;
    w.kind = KernelClass::transform;
    return w;
  };
  auto streaming = [&](double flops, double bytes, double items) {
    KernelWork w{flops, bytes, items, 1, 1};
    w.cudnn = cudnn_kernel();
    w.family = family;
    w.direction = d;
    return w;
  };

  if (family == ConvFamily::implicit_gemm || family == ConvFamily::implicit_precomp_gemm) {
    // The direct method's arithmetic over implicitly unfolded operands in one
    // kernel; the precomputed variants first write their offset tables (the
    // workspace) in a small kernel of their own. Backward-filter reduces over
    // b*P*Q split across CTAs (filter_parallelism).
    if (workspace > 0) phases.push_back(streaming(0, workspace, workspace / kFloatBytes));
    phases.push_back(arithmetic(direct, operand_bytes + workspace, outputs));
    set_gemm_tiling(phases.back(), d, s, b);
    phases.front().pointwise = phases.back().pointwise;  // the call's first kernel
  } else if (family == ConvFamily::gemm) {
    // im2col (memory bound: read the image, write the buffer), then one GEMM.
    const double image_bytes = z.x * kFloatBytes;  // forward and backward-filter both unfold X
    phases.push_back(streaming(0, image_bytes + workspace, workspace / kFloatBytes));
    phases.push_back(arithmetic(direct, operand_bytes - image_bytes + workspace, outputs));
    set_gemm_tiling(phases.back(), d, s, b);
    phases.front().pointwise = phases.back().pointwise;
  } else if (family == ConvFamily::fft || family == ConvFamily::fft_tiling) {
    const bool tiled = family == ConvFamily::fft_tiling;
    const int64_t n_h = tiled ? fft_tile_rows(s) : fft_friendly_size(s.H + 2 * s.pad_h);
    const int64_t n_w = tiled ? kFftTile : fft_friendly_size(s.W + 2 * s.pad_w);
    const double spectrum = static_cast<double>(n_h) * (n_w / 2 + 1);
    const Planes p = planes_of(d, s, z.b, tiled ? static_cast<double>(fft_tiles(d, s)) : 1.0);
    const double plane_flops = fft_plane_flops(n_h, n_w);
    // Forward transforms of the two operands, the pointwise complex GEMM over
    // channels at every frequency, the inverse transform of the result.
    const double operand_in = d == ConvDirection::backward_data ? z.y : z.x;
    const double operand_filter = d == ConvDirection::backward_filter ? z.y : z.w;
    const double result = io.written_elements;
    phases.push_back(transform(p.in * plane_flops, operand_in * kFloatBytes + p.in * spectrum * kComplexBytes,
                               p.in * spectrum));
    phases.push_back(transform(p.filter * plane_flops,
                               operand_filter * kFloatBytes + p.filter * spectrum * kComplexBytes,
                               p.filter * spectrum));
    // Complex multiply-add (8 flops) over the reduction: channels (and the batch for backward-filter).
    const double reduction = d == ConvDirection::forward          ? z.cg
                             : d == ConvDirection::backward_data ? z.kg
                                                                  : z.b * (tiled ? fft_tiles(d, s) : 1);
    phases.push_back(arithmetic(8.0 * p.out * reduction * spectrum, workspace, p.out * spectrum));
    phases.push_back(transform(p.out * plane_flops, p.out * spectrum * kComplexBytes + result * kFloatBytes,
                               p.out * spectrum));
  } else if (family == ConvFamily::winograd) {
    // F(2x2,3x3) fused (Lavin & Gray): 16 multiplies per 2x2 output tile and
    // channel instead of 36; transforms in registers. Filter transform first.
    const double tiles = static_cast<double>(winograd_tiles(d, s, 2));
    const double in_planes = d == ConvDirection::forward ? z.b * s.C : z.b * s.K;
    const double out_planes = d == ConvDirection::forward ? z.b * s.K : z.b * s.C;
    const double reduction = d == ConvDirection::forward ? z.cg : z.kg;
    phases.push_back(transform(z.w * 16.0, z.w * kFloatBytes + workspace, z.w));
    const double flops = 2.0 * out_planes * reduction * tiles * 16 + in_planes * tiles * 32 + out_planes * tiles * 24;
    phases.push_back(arithmetic(flops, operand_bytes - z.w * kFloatBytes + workspace, io.outputs));
  } else if (family == ConvFamily::winograd_nonfused) {
    // Transform input and filter to a x a tiles, a x a batched GEMMs, inverse transform.
    const WinogradTile t = nonfused_tile(s);
    const double tiles = static_cast<double>(winograd_tiles(d, s, t.m));
    const Planes p = planes_of(d, s, z.b, tiles);
    const double tile_bytes = static_cast<double>(t.a) * t.a * kFloatBytes;
    const double operand_in = d == ConvDirection::backward_data ? z.y : z.x;
    const double operand_filter = d == ConvDirection::backward_filter ? z.y : z.w;
    const double reduction = d == ConvDirection::forward          ? z.cg
                             : d == ConvDirection::backward_data ? z.kg
                                                                  : z.b * tiles;
    phases.push_back(transform(p.in * t.a * t.a * 4.0, operand_in * kFloatBytes + p.in * tile_bytes, p.in * t.a * t.a));
    phases.push_back(transform(p.filter * t.a * t.a * 4.0, operand_filter * kFloatBytes + p.filter * tile_bytes,
                               p.filter * t.a * t.a));
    phases.push_back(arithmetic(2.0 * p.out * reduction * t.a * t.a, workspace, p.out * t.a * t.a));
    phases.push_back(transform(p.out * t.a * t.a * 4.0, p.out * tile_bytes + io.written_elements * kFloatBytes,
                               io.outputs));
  } else {
    MPLAN_CHECK(false, fmt::format("no work model for {}", algorithm));
  }

  for (const KernelWork& w : bias_work(d, s, b)) phases.push_back(w);
  return phases;
}

// A grouped convolution as cuDNN 9 runs it (the H200's kernel times of
// depthwise layers, 8-512 groups, every legacy algorithm):
// - the transform algorithms (FFT, FFT tiling, Winograd) loop over the
//   groups: time grows with the group count, 45-55 us per group for FFT and
//   FFT tiling whatever the layer's size, so they are one group's work
//   repeated, every launch after the call's first paying the further-kernel
//   overhead (the model's single call was 15-100x too fast);
// - on a depthwise layer (one input channel per group) the GEMM algorithms
//   all run one grouped kernel, as fast as the implicit GEMM's whatever the
//   algorithm (explicit GEMM forward measured 0.02-0.05 ms where its im2col
//   phase and call overhead priced 0.1): the implicit GEMM's work of the
//   direction. On a layer with wider groups they keep their own phases (a
//   dilated 2-group layer's precomputed GEMM ran 2x the implicit GEMM's).
std::vector<KernelWork> grouped_conv_work(ConvDirection d, std::string_view algorithm, ConvFamily family,
                                          const ConvShape& s, int64_t b) {
  MPLAN_CHECK(s.C % s.groups == 0 && s.K % s.groups == 0,
              fmt::format("conv_work: {} input and {} output channels in {} groups", s.C, s.K, s.groups));
  if (!conv_family_is_transform(family)) {
    if (s.C != s.groups) return conv_work_one_call(d, algorithm, family, s, b);
    const char* implicit = d == ConvDirection::forward ? "implicit_gemm" : "algo_0";
    ConvFamily implicit_family{};
    conv_family_of(d, implicit, implicit_family);
    return conv_work_one_call(d, implicit, implicit_family, s, b);
  }
  ConvShape one = s;
  one.C = s.C / s.groups;
  one.K = s.K / s.groups;
  one.groups = 1;
  one.bias = false;
  std::vector<KernelWork> phases = conv_work_one_call(d, algorithm, family, one, b);
  const size_t first_group = phases.size();
  for (size_t i = 0; i < first_group; ++i) {
    KernelWork rest = phases[i];
    rest.cudnn = KernelWork::Cudnn::further_kernel;
    rest.repeats = s.groups - 1;
    phases.push_back(rest);
  }
  for (const KernelWork& w : bias_work(d, s, b)) phases.push_back(w);
  return phases;
}

}  // namespace

std::vector<KernelWork> conv_work(ConvDirection d, std::string_view algorithm, const ConvShape& s, int64_t b) {
  MPLAN_CHECK(conv_supported(d, algorithm, s), fmt::format("work of an unsupported algorithm {}", algorithm));
  ConvFamily family{};
  MPLAN_CHECK(conv_family_of(d, algorithm, family), fmt::format("no family for {}", algorithm));
  std::vector<KernelWork> phases =
      s.groups == 1 ? conv_work_one_call(d, algorithm, family, s, b) : grouped_conv_work(d, algorithm, family, s, b);
  for (KernelWork& w : phases) w.bytes_in_math_operands = true;
  return phases;
}

}  // namespace mplan
