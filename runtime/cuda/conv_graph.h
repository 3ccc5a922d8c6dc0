#pragma once
// Convolutions through cuDNN's graph API, beside the legacy API's algorithms
// (runtime/cuda/conv.cpp). PyTorch reaches cuDNN 9's engines this way; the
// legacy algorithms left ResNet-50's step at 1.12x PyTorch's on an H200, with
// its convolutions 110 of the step's 146 ms (docs/gpu-validation.md).
//
// Algorithm id kGraphAlgorithmBase + r (runtime/ops.h; named "graph_<r>") is
// the r-th engine configuration that cuDNN's heuristics (CUDNN_HEUR_MODE_A)
// propose for the convolution, in their order, counting only those that
// finalize into an execution plan and suit the math mode (fp32: no TF32
// tensor-core engine; never one that down-converts its inputs, as PyTorch)
// and compile no kernel at run time.
// The same shape (sub-batch included), GPU and cuDNN give the same list, so a
// profile's graph_<r> is the program's. Filter gradients add to dw, as in the
// legacy path, but not through beta 1: cuDNN's frontends (and PyTorch) build
// these graphs with beta 0 only, so the filter-gradient graph writes into
// scratch after the engine's workspace (dw's bytes, counted in the workspace
// this direction asks for) and a kernel adds it to dw (one pass over the
// weights, estimated at about 0.15% of ResNet-50's step, not measured). The data gradient, whose scratch
// would be an activation, has a graph that writes dx and one that adds to it
// (beta 1), each with its own list (its workspace query gives the larger of
// the two): whether engines take beta 1 is for a GPU to show (fewer
// configurations, or none, is the safe outcome: the legacy path then runs).
//
// Plans are built with a cuDNN handle of their own and run with the caller's
// (its stream); a plan is run from one host thread at a time, as the program
// and the profiler do (cuDNN does not promise more for every engine).
//
// A configuration cuDNN does not offer or refuses (NOT_SUPPORTED, BAD_PARAM)
// is reported to the caller, which falls back to the legacy algorithms and
// says so; any other failure is an error, as on the legacy path. The GPU
// tests (tests/gpu/conv_test.cpp) check each configuration's numerics against
// the CPU.

#include <cudnn.h>

#include <cstdint>

#include "runtime/ops.h"

namespace mplan::rt::cuda {

// Workspace bytes of the configuration, -1 where there is none (the
// heuristics propose fewer, or cuDNN refuses the shape).
int64_t graph_workspace_bytes(ConvDirection direction, const ConvShape& shape, ConvAlgoId algo);

// Runs the configuration on the handle's stream: forward y = conv(x, w)
// (a = x, b = w, out = y); backward-data dx (+)= (a = dy, b = w, out = dx);
// backward-filter dw += (a = x, b = dy, out = dw; the graph writes the
// scratch, then a kernel adds it to dw on the same stream, and a failure of
// that launch ends the program, as every checked call does). Returns cuDNN's
// status: NOT_SUPPORTED without running anything where there is no such
// configuration here, too little workspace or a pointer off the 16-byte
// alignment the plans were built for.
cudnnStatus_t graph_run(cudnnHandle_t handle, ConvDirection direction, const ConvShape& shape, ConvAlgoId algo,
                        bool accumulate, const void* a, const void* b, void* out, void* workspace,
                        int64_t workspace_bytes);

}  // namespace mplan::rt::cuda
