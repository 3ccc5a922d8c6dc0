#pragma once
// Checkpoints of the generated program (docs/generated-program.md,
// "Checkpoints"): a folder that holds one complete folder per saved step and
// a symlink `latest` to the newest, swapped atomically.
//
//   DIR/MPLAN_CHECKPOINT        marker: a folder train may write into (and delete in)
//   DIR/step-000000010/         one .npy per tensor, tensors.txt, meta.txt
//   DIR/latest -> step-000000010
//
// A save writes DIR/step-N.partial/, fsyncs every file and the folder, renames
// it to DIR/step-N/, fsyncs DIR, then replaces `latest` by renaming a new
// symlink over it and fsyncs DIR again; only then are older step folders
// removed. A kill at any point leaves the previous checkpoint loadable, and
// a load that finds `latest` missing or dangling recovers the newest complete
// step folder. A path that exists but is not such a folder is never written.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/loss_scale.h"
#include "runtime/npy.h"

namespace mplan::rt {

// What a checkpoint says besides its tensors.
struct CheckpointMeta {
  int64_t step = 0;         // iterations done
  uint64_t seed = 1;        // --seed of the run (dropout masks and synthetic data depend on it)
  std::string model_name;
  std::string model_digest;
  // fp16's loss scale and its clean-step counter (runtime/loss_scale.h).
  std::optional<LossScale> loss_scale;
};

struct CheckpointTensor {
  std::string file;              // without .npy
  std::vector<int64_t> shape;
  const float* data = nullptr;   // host memory, product(shape) floats
};

// A path as given, without trailing separators ("out/w/" -> "out/w").
std::string normalize_checkpoint_path(const std::string& path);

// Whether `dir` may be saved into: missing, or a checkpoint folder. A program
// asks before it trains, so a bad --save costs nothing.
bool checkpoint_target_ok(const std::string& dir, std::string* error);

// Saves into `dir` (created if missing). false with *error when `dir` exists
// and is not a checkpoint folder, or when writing fails (the previous
// checkpoint is then untouched).
bool checkpoint_save(const std::string& dir, const CheckpointMeta& meta, const std::vector<CheckpointTensor>& tensors,
                     std::string* error);

// What a load found.
struct LoadedCheckpoint {
  std::string folder;                       // the folder the tensors were read from
  bool has_meta = false;                    // false for a plain folder of .npy files
  CheckpointMeta meta;
  bool recovered = false;                   // `latest` was missing or dangling
  std::map<std::string, NpyArray> tensors;  // file (without .npy) -> array, for the files asked for that exist
};

// Loads `files` (names without .npy) from a checkpoint folder written by
// checkpoint_save, or from a plain folder of .npy files in the same format
// (e.g. weights exported from PyTorch). A file that is absent is left out of
// the result; one that is present but unreadable is an error.
bool checkpoint_load(const std::string& dir, const std::vector<std::string>& files, LoadedCheckpoint* loaded,
                     std::string* error);

}  // namespace mplan::rt
