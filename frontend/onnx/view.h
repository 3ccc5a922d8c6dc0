#pragma once
// How an ONNX tensor of the graph lies over an mplan layer's output (its
// "base", per-sample shape S, so N x S with the batch N in front): the ONNX
// tensor is the base reshaped and transposed, without a copy. Reshape,
// Transpose, Flatten, Unsqueeze and Squeeze only change this view; an op that
// needs its input laid out otherwise than the view says gets a layer that
// moves the data (reshape, channel_shuffle, patch_embed), or is refused.
//
// The base is cut into *atoms*: each base axis is the row-major product of its
// atoms (an axis split by a reshape has two or more), the batch is one atom of
// its own, axes of size 1 have none. The view lists, per ONNX axis, the atoms
// it is the row-major product of. So ShuffleNet's view (N, g, C/g, H, W),
// transpose of axes 1 and 2, view (N, C, H, W) is the base [C, H, W] with C
// cut into atoms (g, C/g) and ONNX axis 1 = atoms (C/g, g): a channel shuffle.
// A size of the graph may be the batch times a number (Dim): the batch atom
// may be merged with others ((T, N*heads, d) in PyTorch's attention) but never split.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mplan::onnx_import {

// An integer of the graph's shape arithmetic: coef, or coef times the batch.
struct Dim {
  int64_t coef = 1;
  bool batch = false;
  bool operator==(const Dim&) const = default;
  std::string to_string() const;  // "64", "N", "8*N"
};
// a*b, or nullopt when both hold the batch (N^2 is no size of this graph).
std::optional<Dim> multiply(Dim a, Dim b);
// a/b when exact (b divides a; the batch divides only the batch).
std::optional<Dim> divide_exact(Dim a, Dim b);

struct Atom {
  int axis = 0;  // 0: the batch; k >= 1: per-sample axis k-1 of the base
  int64_t size = 1;
};

class View {
 public:
  // The base as it is: ONNX dims (N, S...).
  static View plain(const std::vector<int64_t>& base_dims);

  // The ONNX tensor's dims.
  std::vector<Dim> dims() const;
  size_t rank() const { return groups_.size(); }

  // Each returns false (view unchanged) when the graph asks for what a view
  // cannot be: a reshape that splits the batch, an axis out of range.
  bool transpose(const std::vector<int64_t>& perm);
  // `literal_batch` (> 0): the batch the graph was traced with, so that a size
  // written as a number (PyTorch's attention reshapes to (T, 2*heads, d)
  // with the traced batch 2 in it) may hold the batch where the batch atom
  // comes next. A traced batch of 1 is no help (1 divides everything), which
  // is why docs/import.md asks for a batch of at least 2 when exporting.
  bool reshape(const std::vector<Dim>& target, int64_t literal_batch = 0);
  bool unsqueeze(int64_t axis);  // a new axis of size 1 at `axis` (0 .. rank)
  bool squeeze(int64_t axis);    // drops an axis of size 1

  // Whether the ONNX tensor is the base itself, (N, S...) unmoved.
  bool is_plain() const;
  // Whether it is the base in its own order, only grouped otherwise: batch
  // alone first, the other atoms in base order (a per-sample reshape, a copy).
  bool is_reshaped_plain() const;
  // The base axis (1-based) that ONNX axis `axis` is exactly, all its atoms in
  // order; 0 when it is not one whole base axis.
  int whole_base_axis(int64_t axis) const;
  // The ONNX axis holding the batch atom.
  int64_t batch_axis() const;
  // The atoms of ONNX axis `axis`, and of base axis `axis` (1-based).
  const std::vector<int>& group(int64_t axis) const { return groups_.at(static_cast<size_t>(axis)); }
  const std::vector<int>& base_axis_atoms(int axis) const { return axis_atoms_.at(static_cast<size_t>(axis)); }
  const Atom& atom(int id) const { return atoms_.at(static_cast<size_t>(id)); }
  int base_rank() const { return static_cast<int>(axis_atoms_.size()) - 1; }  // per sample

  // The same arrangement over a base whose axis `axis` (1-based) has another
  // size (a linear layer's features, a slice): the axis's atoms must lie
  // together, in order, in one ONNX axis; they become one atom of `size`.
  bool resize_base_axis(int axis, int64_t size);

  // Whether the two views arrange bases of the same shape alike (an
  // element-wise op of the two is then element-wise on the bases).
  bool same_arrangement(const View& other) const;
  // "(N, 8, 3) over [24, 3]": for messages.
  std::string to_string() const;

 private:
  int split_atom(int id, int64_t outer);  // cuts atom id into (outer, size/outer); returns the outer's id
  std::vector<Atom> atoms_;
  std::vector<std::vector<int>> axis_atoms_;  // per base axis (0: batch), its atoms in order
  std::vector<std::vector<int>> groups_;      // per ONNX axis, its atoms in order
};

}  // namespace mplan::onnx_import
