// A CUDA program of several ranks (docs/generated-program.md, "Several
// ranks"): NCCL sums its gradient buckets, MPI starts the ranks. Built and
// linked against the runtime's CUDA backend and its NCCL collectives where
// nvcc, cuDNN, NCCL and MPI are; it runs only where GPUs are, which this test
// does not need.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "tests/e2e/data_parallel_util.h"

namespace mplan::e2e {
namespace {

TEST(DataParallelCuda, AProgramOfTwoRanksBuildsAndLinksWithNccl) {
#if !defined(MPLAN_RUNTIME_CUDA_LIBRARY_PATH) || !defined(MPLAN_RUNTIME_CUDA_NCCL_LIBRARY_PATH)
  GTEST_SKIP() << "no CUDA toolkit with cuDNN, NCCL and MPI in this build: the CUDA collectives are not built";
#else
  Compiled cuda = compile_ranks("examples/models/every_op_nobn.yaml", 2, RankScheme::sub_batches,
                                "dp-cuda-every_op_nobn-2", codegen::Target::cuda);
  ASSERT_EQ(cuda.error, "");
  std::ifstream in(cuda.dir + "/train.cpp");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("p.start_bucket("), std::string::npos);
  EXPECT_NE(text.find("p.wait_buckets();"), std::string::npos);
  ASSERT_EQ(build_program(cuda.dir, MPLAN_RUNTIME_CUDA_LIBRARY_PATH), "");
  EXPECT_TRUE(std::filesystem::exists(cuda.dir + "/build/train"));
  // NCCL is linked in.
  const RunResult symbols =
      run_command("nm -C " + cuda.dir + "/build/train | grep -c 'NcclCollectives\\|ncclAllReduce'");
  EXPECT_NE(symbols.output, "0\n") << symbols.output;
#endif
}

}  // namespace
}  // namespace mplan::e2e
