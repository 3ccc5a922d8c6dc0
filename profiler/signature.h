#pragma once
// What the cost of a task depends on, and a string key for it, so that
// identical layers (the repeated blocks of a ResNet) are costed, measured and
// recorded once: the op, the task kind, the per-sample shapes and the op's
// parameters that change the work (not names, not eps or p).

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "profiler/conv_algorithms.h"
#include "tdfg/tdfg.h"

namespace mplan {

struct TaskShape {
  Op op = Op::relu;
  TaskKind kind = TaskKind::FP;
  // The layer's op and fields (name and place cleared): what the op table's
  // entries read. The fields below repeat the common ones. Its inputs are
  // not the model's layer ids but each input's first position among them
  // (add(x, y) reads {0, 1}, add(x, x) {0, 0}): a backward task reads them to
  // know which input gradients it writes and which it adds to, so they must
  // stay, but no name may enter a signature.
  Layer layer;
  std::vector<Shape> inputs;  // per-sample shapes of the layer's inputs
  Shape output;               // per-sample shape of its output
  // Op parameters that change the work.
  int64_t out = 0;            // conv: out channels; linear: out features
  int64_t groups = 1;
  bool bias = false;
  Window window;              // conv and pool
  PoolMode pool_mode = PoolMode::max;
  int64_t lrn_size = 0;
  // The update: learnable parameters, optimizer-state elements, and weighted
  // layers (one update kernel each).
  int64_t parameters = 0;
  int64_t state_elements = 0;
  int64_t tensors = 0;
  // The parameters cast into a 16-bit copy (ops/precision.h): by the update,
  // which remakes the resident copies; by a 16-bit op's FP or BP1 where the
  // model makes its copies where they are used (weights_cast_by_task).
  int64_t copied_parameters = 0;
  // The storage type of the layer's output (tdfg/tdfg.h Block::dtype): what
  // its element-wise traffic moves. In the signature only when not float32.
  DataType dtype = DataType::float32;
  // The storage types of the other blocks the task's kernels touch, in a
  // 16-bit model (empty at fp32 and tf32: all float32): each input's, each
  // input's gradient's (float32 where it has none), and the gradient's
  // arriving at the output. The casts around the kernels follow them
  // (ops/sixteen_bit_casts.h). In the signature only where one is not `dtype`.
  std::vector<DataType> input_dtypes, input_gradient_dtypes;
  DataType gradient_dtype = DataType::float32;
};

// The task's layer as the op table reads it: TaskShape::layer with the
// common fields above (which a TaskShape made by hand may set alone).
Layer task_layer(const TaskShape& shape);

// The shape of task t of a TDFG (reads the TDFG's model).
TaskShape describe_task(const Tdfg& tdfg, TaskId t);

// "conv in=[64, 56, 56] out=[256, 56, 56] kernel=1x1 stride=1x1 pad=0x0 groups=1 bias=0":
// everything of the shape but the task kind, so that a layer's FP, BP1 and BP2
// share one key (profile.json groups them under it).
std::string layer_signature(const TaskShape& shape);
// layer_signature + " " + kind: one key per task.
std::string task_signature(const TaskShape& shape);

// A conv task's cuDNN direction and shape.
ConvDirection conv_direction(TaskKind kind);
ConvShape conv_shape(const TaskShape& shape);

// Interns task signatures: key(tdfg, t) is a small integer, equal for tasks
// with equal signatures. A query hashes the task's shape fields in place (no
// allocation) and looks the hash up; only a new shape builds its signature
// string. Thread-safe.
class TaskKeyCache {
 public:
  int32_t key(const Tdfg& tdfg, TaskId t) const;
  const TaskShape& shape(int32_t key) const;
  const std::string& layer_signature_of(int32_t key) const;

 private:
  struct Entry {
    TaskShape shape;
    std::string layer_signature;
  };
  mutable std::mutex mutex_;
  mutable std::unordered_map<std::string, int32_t> index_;       // task signature -> key
  mutable std::unordered_map<uint64_t, int32_t> by_fingerprint_;  // shape hash -> key
  mutable std::deque<Entry> entries_;  // deque: references stay valid as it grows
};

// A 64-bit hash of every field describe_task reads for task t (two tasks
// with equal hashes have equal signatures, up to a 2^-64 collision).
uint64_t task_fingerprint(const Tdfg& tdfg, TaskId t);

}  // namespace mplan
