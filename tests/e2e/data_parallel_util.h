#pragma once
// Helpers of the tests of programs of several ranks (data_parallel_test.cpp,
// data_parallel_faults_test.cpp): a plan of one rank's share of the batch
// with plan.json's "data_parallel" section added, its program, and mpirun.

#include <string>

#include "tests/e2e/e2e_util.h"

namespace mplan::e2e {

// How each rank's plan is made (the model's batch G split into `ranks`
// shares of B = G / ranks):
//   rounds       one round of B, unlimited budget;
//   sub_batches  rounds of B / 2, unlimited budget;
//   offload      one round of B in the least budget its tasks fit one by one:
//                blocks are offloaded and prefetched;
//   recompute    one round of B that drops every block it may after its last
//                forward use and recomputes it in the backward pass.
enum class RankScheme { rounds, sub_batches, offload, recompute };
const char* scheme_name(RankScheme scheme);

// The sub-batch of each round of a rank's plan.
int64_t rank_sub_batch(int64_t global_batch, int ranks, RankScheme scheme);

// Adds the data_parallel section: `ranks` ranks all running this plan, the
// resident dW blocks in buckets of at most `bucket_bytes` (at least one block
// each), in the order the last round's backward pass finishes them.
void add_data_parallel(Plan& plan, const Tdfg& tdfg, int ranks, int64_t bucket_bytes);

// The program of one rank's plan of `model_path` on `ranks` ranks, written to
// the folder `tag` (the model and its digest unchanged: the plan is of batch
// G / ranks, PlanOptions::batch).
Compiled compile_ranks(const std::string& model_path, int ranks, RankScheme scheme, const std::string& tag,
                       codegen::Target target = codegen::Target::cpu);

// The single-process program of the same model whose rounds are `sub_batch`
// samples each: the reference the ranks must train alike.
Compiled compile_single_process(const std::string& model_path, int64_t sub_batch, const std::string& tag);

// Builds a multi-rank program against this build's runtime and its MPI
// collectives; "" on success.
std::string build_ranks_program(const std::string& dir);

// Whether mpirun is on the PATH.
bool have_mpirun();
// "mpirun --allow-run-as-root --oversubscribe -np N": the launcher, run as
// any user on this machine's few cores.
std::string mpirun(int ranks);

}  // namespace mplan::e2e
