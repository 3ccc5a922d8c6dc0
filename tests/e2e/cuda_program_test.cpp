// The CUDA program (issue: "when nvcc is present, the CUDA runtime, the GPU
// profiler and a generated CUDA program of the small model are built and
// linked by a test"): cifar_small, every_op and every_vision_op (the imported ops'
// ops) compiled for --target cuda
// build against runtime/cuda. Where a GPU is, its weights after 3 steps must
// agree with the CPU program's (fp32, TF32 off; relative 1e-4); elsewhere that
// part skips and says so.

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/e2e/e2e_util.h"

namespace mplan::e2e {
namespace {

class CudaProgram : public ::testing::TestWithParam<const char*> {
 protected:
  std::string model() const { return std::string("examples/models/") + GetParam() + ".yaml"; }
};

#ifdef MPLAN_RUNTIME_CUDA_LIBRARY_PATH
// The CUDA program of the model's sub-batched plan, built; "" or why not.
std::string build_cuda_program(const std::string& model, const std::string& tag, Compiled* out) {
  *out = compile_model(model, Budget::sub_batch, tag, codegen::Target::cuda);
  if (!out->error.empty()) return out->error;
  return build_program(out->dir, MPLAN_RUNTIME_CUDA_LIBRARY_PATH);
}
#endif

TEST_P(CudaProgram, BuildsAndLinksAgainstTheCudaRuntime) {
#ifndef MPLAN_RUNTIME_CUDA_LIBRARY_PATH
  GTEST_SKIP() << "no CUDA toolkit with cuDNN in this build: the CUDA runtime and program are not built";
#else
  Compiled cuda;
  ASSERT_EQ(build_cuda_program(model(), std::string("cuda-") + GetParam(), &cuda), "");
  EXPECT_TRUE(std::filesystem::exists(cuda.dir + "/build/train"));
#endif
}

// On a GPU: 3 steps from the same seed and data as the CPU program of the same plan.
TEST_P(CudaProgram, OnAGpuTrainsTheCpuProgramsWeights) {
#ifndef MPLAN_RUNTIME_CUDA_LIBRARY_PATH
  GTEST_SKIP() << "no CUDA toolkit with cuDNN in this build: the CUDA program is not built";
#else
  if (!gpu_present()) GTEST_SKIP() << "no GPU on this machine: the CUDA program is built, not run";
  Compiled cuda;
  ASSERT_EQ(build_cuda_program(model(), std::string("cuda-") + GetParam(), &cuda), "");
  Compiled cpu = compile_model(model(), Budget::sub_batch, std::string("cuda-cpu-") + GetParam());
  ASSERT_EQ(cpu.error, "");
  ASSERT_EQ(build_program(cpu.dir), "");
  RunResult gpu_run = run_program(cuda.dir, "--steps 3 --seed 11 --save " + cuda.dir + "/weights");
  ASSERT_EQ(gpu_run.exit_code, 0) << gpu_run.output;
  RunResult cpu_run = run_program(cpu.dir, "--steps 3 --seed 11 --save " + cpu.dir + "/weights");
  ASSERT_EQ(cpu_run.exit_code, 0) << cpu_run.output;
  std::string worst;
  const double diff =
      max_relative_difference(read_weights(cuda.dir + "/weights"), read_weights(cpu.dir + "/weights"), &worst);
  std::printf("%s: CUDA vs CPU after 3 steps: max relative difference %.3g at %s\n", GetParam(), diff, worst.c_str());
  EXPECT_LE(diff, 1e-4) << worst;
#endif
}

INSTANTIATE_TEST_SUITE_P(SmallModels, CudaProgram, ::testing::Values("cifar_small", "every_op", "every_vision_op"));

}  // namespace
}  // namespace mplan::e2e
