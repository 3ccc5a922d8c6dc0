#pragma once
// The generated program's fixed code for several ranks (runtime/program.cpp's
// run_program; docs/generated-program.md, "Several ranks"): the start-up
// agreement of the ranks, rank 0's checkpoints and batch norm's running
// statistics. Backend-neutral: through runtime/collectives.h only.

#include <cstdint>
#include <string>

#include "runtime/collectives.h"
#include "runtime/program.h"

namespace mplan::rt {

// What every rank must agree on before training, and whether it can start.
struct RankStartup {
  int32_t status = 0;         // 0: ready; else the exit code of its failure (2: bad input)
  std::string message;        // the failure
  uint64_t run_digest = 0;    // the flags that shape the training (run_digest_text)
  int64_t data_samples = 0;   // --data's samples (0: synthetic)
  int64_t val_samples = 0;    // --val's
};

// Exchanges every rank's RankStartup and checks them: a rank that cannot
// start, a rank running another plan (ProgramSpec's plan digest), other
// training flags or another data set ends every rank, each printing the
// rank(s) at fault. 0 when all agree, else the exit code.
int agree_to_start(Collectives& collectives, const ProgramSpec& spec, const RankStartup& mine);

// Rank 0's batch-norm running statistics onto every rank (DDP's broadcast_buffers).
void broadcast_running_statistics(Program& program);

// After rank 0's save (ok, or its error): every rank learns how it went.
// False, with rank 0's *error, when it failed.
bool rank_0_saved(Collectives& collectives, bool ok, std::string* error);

// FNV-1a, 64 bits: the run digest of the flags' text.
uint64_t fnv1a(const std::string& text);

}  // namespace mplan::rt
