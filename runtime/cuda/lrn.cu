// Local response normalisation across channels (PyTorch LocalResponseNorm), as
// runtime/cpu/lrn.cpp, for the windows cuDNN's cudnnLRNCrossChannel* does not
// take (ops.cpp says which): one thread per element, in double.
//   scale_c = k + alpha/size * sum_{c' = c - size/2}^{c + (size-1)/2} x_{c'}^2
//   y_c = x_c * scale_c^-beta
//   dx_i = dy_i * scale_i^-beta
//          - 2*alpha*beta/size * x_i * sum over j whose window holds i of dy_j x_j scale_j^(-beta-1)

#include "runtime/cuda/check.h"
#include "runtime/cuda/grid.cuh"
#include "runtime/cuda/kernels.h"
#include "runtime/cuda/stream.h"

namespace mplan::rt::cuda {
namespace {

// alpha, beta and k stay float so that every expression below promotes and
// rounds as the CPU's does (alpha / size is a float division there too).
struct LrnParams {
  int64_t n, c, hw, size;
  float alpha, beta, k;
};

// scale at channel ch, position i of the sample starting at xs.
__device__ double lrn_scale(const float* xs, int64_t ch, int64_t i, const LrnParams& l) {
  const int64_t lo = max64(ch - l.size / 2, 0), hi = min64(ch + (l.size - 1) / 2, l.c - 1);
  double sum = 0.0;
  for (int64_t j = lo; j <= hi; ++j) sum += static_cast<double>(xs[j * l.hw + i]) * xs[j * l.hw + i];
  return l.k + l.alpha / l.size * sum;
}

__global__ void lrn_forward_kernel(const float* x, float* y, LrnParams l) {
  MPLAN_FOR_EACH(at, l.n * l.c * l.hw) {
    const int64_t b = at / (l.c * l.hw), ch = (at / l.hw) % l.c, i = at % l.hw;
    const float* xs = x + b * l.c * l.hw;
    y[at] = static_cast<float>(x[at] * pow(lrn_scale(xs, ch, i, l), -static_cast<double>(l.beta)));
  }
}

__global__ void lrn_backward_kernel(const float* x, const float* dy, float* dx, LrnParams l, bool accumulate) {
  MPLAN_FOR_EACH(at, l.n * l.c * l.hw) {
    const int64_t b = at / (l.c * l.hw), ch = (at / l.hw) % l.c, i = at % l.hw;
    const float* xs = x + b * l.c * l.hw;
    const float* dys = dy + b * l.c * l.hw;
    // Channel ch lies in the window of j iff j - size/2 <= ch <= j + (size-1)/2.
    const int64_t lo = max64(ch - (l.size - 1) / 2, 0), hi = min64(ch + l.size / 2, l.c - 1);
    double sum = 0.0;
    for (int64_t j = lo; j <= hi; ++j) {
      const int64_t at_j = j * l.hw + i;
      sum += dys[at_j] * static_cast<double>(xs[at_j]) *
             pow(lrn_scale(xs, j, i, l), -static_cast<double>(l.beta) - 1.0);
    }
    const double g = dy[at] * pow(lrn_scale(xs, ch, i, l), -static_cast<double>(l.beta)) -
                     2.0 * l.alpha * l.beta / l.size * x[at] * sum;
    dx[at] = static_cast<float>(accumulate ? dx[at] + g : g);
  }
}

}  // namespace

void lrn_forward(const float* x, float* y, int64_t n, int64_t c, int64_t hw, int64_t size, float alpha, float beta,
                 float k, cudaStream_t stream) {
  if (n * c * hw <= 0) return;
  const LrnParams l{n, c, hw, size, alpha, beta, k};
  lrn_forward_kernel<<<blocks_for(n * c * hw), kThreads, 0, stream>>>(x, y, l);
  MPLAN_CUDA_CHECK_LAUNCH();
}

void lrn_backward(const float* x, const float* dy, float* dx, int64_t n, int64_t c, int64_t hw, int64_t size,
                  float alpha, float beta, float k, bool accumulate, cudaStream_t stream) {
  if (n * c * hw <= 0) return;
  const LrnParams l{n, c, hw, size, alpha, beta, k};
  lrn_backward_kernel<<<blocks_for(n * c * hw), kThreads, 0, stream>>>(x, dy, dx, l, accumulate);
  MPLAN_CUDA_CHECK_LAUNCH();
}

}  // namespace mplan::rt::cuda
