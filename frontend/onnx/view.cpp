// The view algebra of view.h.

#include "frontend/onnx/view.h"

#include <fmt/format.h>

#include <algorithm>

namespace mplan::onnx_import {

std::string Dim::to_string() const {
  if (!batch) return std::to_string(coef);
  return coef == 1 ? "N" : fmt::format("{}*N", coef);
}

std::optional<Dim> multiply(Dim a, Dim b) {
  if (a.batch && b.batch) return std::nullopt;
  int64_t c = 0;
  if (__builtin_mul_overflow(a.coef, b.coef, &c)) return std::nullopt;
  return Dim{c, a.batch || b.batch};
}

std::optional<Dim> divide_exact(Dim a, Dim b) {
  if (b.coef == 0 || (b.batch && !a.batch) || a.coef % b.coef != 0) return std::nullopt;
  return Dim{a.coef / b.coef, a.batch && !b.batch};
}

View View::plain(const std::vector<int64_t>& base_dims) {
  View v;
  v.atoms_.push_back({0, 1});
  v.axis_atoms_.push_back({0});
  v.groups_.push_back({0});
  for (size_t k = 0; k < base_dims.size(); ++k) {
    std::vector<int> atoms;
    if (base_dims[k] != 1) {
      v.atoms_.push_back({static_cast<int>(k) + 1, base_dims[k]});
      atoms.push_back(static_cast<int>(v.atoms_.size()) - 1);
    }
    v.axis_atoms_.push_back(atoms);
    v.groups_.push_back(atoms);
  }
  return v;
}

std::vector<Dim> View::dims() const {
  std::vector<Dim> out;
  for (const auto& g : groups_) {
    Dim d{1, false};
    for (int id : g) {
      if (atoms_[id].axis == 0)
        d.batch = true;
      else
        d.coef *= atoms_[id].size;
    }
    out.push_back(d);
  }
  return out;
}

bool View::transpose(const std::vector<int64_t>& perm) {
  if (perm.size() != groups_.size()) return false;
  std::vector<bool> seen(perm.size(), false);
  std::vector<std::vector<int>> out;
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(groups_.size()) || seen[static_cast<size_t>(p)]) return false;
    seen[static_cast<size_t>(p)] = true;
    out.push_back(groups_[static_cast<size_t>(p)]);
  }
  groups_ = std::move(out);
  return true;
}

int View::split_atom(int id, int64_t outer) {
  const Atom old = atoms_[id];
  atoms_[id].size = outer;  // id keeps the outer part
  atoms_.push_back({old.axis, old.size / outer});
  const int inner = static_cast<int>(atoms_.size()) - 1;
  auto insert_after = [&](std::vector<int>& list) {
    auto it = std::find(list.begin(), list.end(), id);
    if (it != list.end()) list.insert(it + 1, inner);
  };
  insert_after(axis_atoms_[static_cast<size_t>(old.axis)]);
  for (auto& g : groups_) insert_after(g);
  return id;
}

bool View::reshape(const std::vector<Dim>& target, int64_t literal_batch) {
  // The ONNX tensor's atoms in its row-major order, regrouped by the target's sizes.
  const View before = *this;
  std::vector<int> sequence;
  for (const auto& g : groups_) sequence.insert(sequence.end(), g.begin(), g.end());
  std::vector<std::vector<int>> out;
  size_t at = 0;
  for (Dim t : target) {
    if (t.coef < 1) {
      *this = before;
      return false;
    }
    std::vector<int> group;
    Dim have{1, false};
    while (!(have == t)) {
      const auto need = divide_exact(t, have);
      if (!need || at >= sequence.size()) {
        *this = before;
        return false;
      }
      const int id = sequence[at];
      const Atom a = atoms_[static_cast<size_t>(id)];
      if (a.axis == 0) {  // the batch: whole, and only where the target has it
        if (!need->batch && !(literal_batch > 1 && !t.batch && need->coef % literal_batch == 0)) {
          *this = before;
          return false;
        }
        if (!need->batch) t = Dim{t.coef / literal_batch, true};  // the literal held the traced batch
        have.batch = true;
      } else if (need->coef % a.size == 0 && need->coef >= a.size) {
        have.coef *= a.size;
      } else if (a.size % need->coef == 0 && need->coef > 1) {
        split_atom(id, need->coef);  // the outer part completes this axis; the inner one starts the next
        sequence.insert(sequence.begin() + static_cast<std::ptrdiff_t>(at) + 1,
                        static_cast<int>(atoms_.size()) - 1);
        have.coef *= need->coef;
      } else {
        *this = before;
        return false;
      }
      group.push_back(id);
      ++at;
    }
    out.push_back(group);
  }
  if (at != sequence.size()) {
    *this = before;
    return false;
  }
  groups_ = std::move(out);
  return true;
}

bool View::unsqueeze(int64_t axis) {
  if (axis < 0 || axis > static_cast<int64_t>(groups_.size())) return false;
  groups_.insert(groups_.begin() + axis, std::vector<int>{});
  return true;
}

bool View::squeeze(int64_t axis) {
  if (axis < 0 || axis >= static_cast<int64_t>(groups_.size()) || !groups_[static_cast<size_t>(axis)].empty())
    return false;
  groups_.erase(groups_.begin() + axis);
  return true;
}

bool View::is_plain() const {
  if (groups_.size() != axis_atoms_.size()) return false;
  for (size_t k = 0; k < groups_.size(); ++k)
    if (groups_[k] != axis_atoms_[k]) return false;
  return true;
}

bool View::is_reshaped_plain() const {
  if (groups_.empty() || groups_[0] != std::vector<int>{0}) return false;
  std::vector<int> sequence, base;
  for (size_t k = 1; k < groups_.size(); ++k) sequence.insert(sequence.end(), groups_[k].begin(), groups_[k].end());
  for (size_t k = 1; k < axis_atoms_.size(); ++k) base.insert(base.end(), axis_atoms_[k].begin(), axis_atoms_[k].end());
  return sequence == base;
}

int View::whole_base_axis(int64_t axis) const {
  const auto& g = groups_.at(static_cast<size_t>(axis));
  if (g.empty()) return 0;
  for (size_t k = 1; k < axis_atoms_.size(); ++k)
    if (axis_atoms_[k] == g) return static_cast<int>(k);
  return 0;
}

int64_t View::batch_axis() const {
  for (size_t k = 0; k < groups_.size(); ++k)
    if (std::find(groups_[k].begin(), groups_[k].end(), 0) != groups_[k].end()) return static_cast<int64_t>(k);
  return -1;
}

bool View::resize_base_axis(int axis, int64_t size) {
  if (axis < 1 || axis >= static_cast<int>(axis_atoms_.size()) || size < 1) return false;
  std::vector<int>& atoms = axis_atoms_[static_cast<size_t>(axis)];
  if (atoms.empty()) {  // a size-1 axis: it has no atom; one goes where an empty ONNX axis would hold it
    if (size == 1) return true;
    return false;  // (no caller resizes an axis of size 1 upwards)
  }
  for (auto& g : groups_) {
    auto first = std::find(g.begin(), g.end(), atoms.front());
    if (first == g.end()) continue;
    if (static_cast<size_t>(g.end() - first) < atoms.size() || !std::equal(atoms.begin(), atoms.end(), first))
      return false;
    const int keep = atoms.front();
    const std::ptrdiff_t at = first - g.begin();
    g.erase(first, first + static_cast<std::ptrdiff_t>(atoms.size()));
    if (size == 1) {
      atoms.clear();
    } else {
      atoms_[static_cast<size_t>(keep)].size = size;
      g.insert(g.begin() + at, keep);
      atoms = {keep};
    }
    return true;
  }
  return false;
}

bool View::same_arrangement(const View& other) const {
  // Atoms are named by (base axis, position in it): equal names, sizes and groups.
  auto name = [](const View& v, int id) {
    const auto& list = v.axis_atoms_[static_cast<size_t>(v.atoms_[static_cast<size_t>(id)].axis)];
    const int64_t position = std::find(list.begin(), list.end(), id) - list.begin();
    return std::pair<int, int64_t>{v.atoms_[static_cast<size_t>(id)].axis, position};
  };
  if (axis_atoms_.size() != other.axis_atoms_.size() || groups_.size() != other.groups_.size()) return false;
  for (size_t k = 0; k < axis_atoms_.size(); ++k) {
    if (axis_atoms_[k].size() != other.axis_atoms_[k].size()) return false;
    for (size_t i = 0; i < axis_atoms_[k].size(); ++i)
      if (atoms_[static_cast<size_t>(axis_atoms_[k][i])].size !=
          other.atoms_[static_cast<size_t>(other.axis_atoms_[k][i])].size)
        return false;
  }
  for (size_t k = 0; k < groups_.size(); ++k) {
    if (groups_[k].size() != other.groups_[k].size()) return false;
    for (size_t i = 0; i < groups_[k].size(); ++i)
      if (name(*this, groups_[k][i]) != name(other, other.groups_[k][i])) return false;
  }
  return true;
}

std::string View::to_string() const {
  std::string dims_text, base_text;
  for (const Dim& d : dims()) dims_text += (dims_text.empty() ? "" : ", ") + d.to_string();
  for (size_t k = 1; k < axis_atoms_.size(); ++k) {
    int64_t size = 1;
    for (int id : axis_atoms_[k]) size *= atoms_[static_cast<size_t>(id)].size;
    base_text += (base_text.empty() ? "" : ", ") + std::to_string(size);
  }
  return fmt::format("({}) over [{}]", dims_text, base_text);
}

}  // namespace mplan::onnx_import
