// The generated program's fixed code for several ranks (runtime/program_ranks.h).

#include "runtime/program_ranks.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <vector>

namespace mplan::rt {
namespace {

// One rank's start-up record, as exchanged (fixed size, plain bytes).
struct StartupRecord {
  int32_t status;
  char plan_digest[72];
  uint64_t run_digest;
  int64_t data_samples;
  int64_t val_samples;
  char message[400];
};

void copy_text(char* out, size_t size, const std::string& text) {
  std::memset(out, 0, size);
  std::memcpy(out, text.data(), std::min(size - 1, text.size()));
}

struct SaveRecord {
  int32_t ok;
  char message[400];
};

}  // namespace

uint64_t fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

int agree_to_start(Collectives& collectives, const ProgramSpec& spec, const RankStartup& mine) {
  const int32_t n = collectives.ranks(), me = collectives.rank();
  StartupRecord record{};
  record.status = mine.status;
  copy_text(record.plan_digest, sizeof record.plan_digest,
            std::string(spec.model_digest) + "/" + spec.data_parallel->plan_digest);
  record.run_digest = mine.run_digest;
  record.data_samples = mine.data_samples;
  record.val_samples = mine.val_samples;
  copy_text(record.message, sizeof record.message, mine.message);
  std::vector<StartupRecord> all(static_cast<size_t>(n));
  collectives.exchange(&record, sizeof record, all.data(), "the ranks' start-up check");
  // Failures first: a rank that cannot start says why on every rank.
  int code = 0;
  for (int32_t q = 0; q < n; ++q) {
    const StartupRecord& r = all[static_cast<size_t>(q)];
    if (r.status == 0) continue;
    if (code == 0) code = r.status;
    std::fprintf(stderr, "train: rank %d: error: rank %d cannot start: %s\n", me, q, r.message);
  }
  if (code != 0) return code;
  const StartupRecord& first = all[0];
  for (int32_t q = 1; q < n; ++q) {
    const StartupRecord& r = all[static_cast<size_t>(q)];
    if (std::strcmp(r.plan_digest, first.plan_digest) != 0) {
      std::fprintf(stderr,
                   "train: rank %d: error: rank %d runs another plan (model/plan digest %s) than rank 0 (%s): every "
                   "rank must run the same program\n",
                   me, q, r.plan_digest, first.plan_digest);
      code = 2;
    } else if (r.run_digest != first.run_digest) {
      std::fprintf(stderr,
                   "train: rank %d: error: rank %d was started with other training flags than rank 0 (--steps, "
                   "--epochs, --seed, --lr, --lr-schedule, --shuffle, --augment, --mean, --std, --clip-grad-norm, "
                   "--load, --save, --checkpoint-every, --val, --eval-every, --eval): every rank must get the same\n",
                   me, q);
      code = 2;
    } else if (r.data_samples != first.data_samples || r.val_samples != first.val_samples) {
      std::fprintf(stderr,
                   "train: rank %d: error: rank %d's data sets hold %" PRId64 " training and %" PRId64
                   " validation samples, rank 0's %" PRId64 " and %" PRId64 ": every rank must read the same data\n",
                   me, q, r.data_samples, r.val_samples, first.data_samples, first.val_samples);
      code = 2;
    }
  }
  return code;
}

void broadcast_running_statistics(Program& program) {
  const DataParallelSpec* dp = program.spec().data_parallel;
  if (program.collectives() == nullptr || dp == nullptr || dp->running_statistic_count == 0) return;
  for (int32_t i = 0; i < dp->running_statistic_count; ++i) {
    const Region& r = dp->running_statistics[i];
    std::vector<std::byte> bytes(static_cast<size_t>(r.bytes));
    if (program.rank() == 0) copy_to_host(bytes.data(), program.bytes(r.offset), bytes.size());
    program.collectives()->broadcast(bytes.data(), bytes.size(), "the broadcast of rank 0's running statistics");
    if (program.rank() != 0) copy_to_device(program.bytes(r.offset), bytes.data(), bytes.size());
  }
}

bool rank_0_saved(Collectives& collectives, bool ok, std::string* error) {
  SaveRecord record{};
  record.ok = ok ? 1 : 0;
  copy_text(record.message, sizeof record.message, ok ? std::string() : *error);
  std::vector<SaveRecord> all(static_cast<size_t>(collectives.ranks()));
  collectives.exchange(&record, sizeof record, all.data(), "the wait for rank 0's checkpoint");
  if (all[0].ok) return true;
  *error = std::string("rank 0 could not save: ") + all[0].message;
  return false;
}

}  // namespace mplan::rt
