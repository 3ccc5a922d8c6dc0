// The importer's shape nodes: constants and their arithmetic (PyTorch writes
// its reshape targets with Shape, Gather, Concat, ...), the view changes
// (Reshape, Flatten, Transpose, Unsqueeze, Squeeze), and the nodes that take
// parts of tensors or put them together (Slice, Split, Gather, Concat, Expand).

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>

#include "frontend/onnx/translator.h"

namespace mplan::onnx_import {
namespace {

int64_t attribute_int(const Node& node, const std::string& key, int64_t fallback) {
  const Attribute* a = node.attribute(key);
  return a != nullptr && a->kind == Attribute::Kind::integer ? a->integer : fallback;
}

std::optional<std::vector<int64_t>> attribute_ints(const Node& node, const std::string& key) {
  const Attribute* a = node.attribute(key);
  if (a == nullptr || a->kind != Attribute::Kind::integers) return std::nullopt;
  return a->integers;
}

// The element count, saturating (hostile shapes must not overflow): -1 for a
// negative size, INT64_MAX past it.
int64_t product(const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t d : dims) {
    if (d < 0) return -1;
    if (__builtin_mul_overflow(p, d, &p)) return INT64_MAX;
  }
  return p;
}

// An axis in [-rank, rank) made non-negative; -1 when out of range.
int64_t normal_axis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) return -1;
  return axis < 0 ? axis + rank : axis;
}

// Element i of a constant of `dims` broadcast to `out_dims` (numpy rules).
int64_t broadcast_index(const std::vector<int64_t>& dims, const std::vector<int64_t>& out_dims, int64_t i) {
  int64_t index = 0, stride = 1;
  for (int64_t k = static_cast<int64_t>(out_dims.size()) - 1, j = static_cast<int64_t>(dims.size()) - 1; k >= 0;
       --k, --j) {
    const int64_t coordinate = i % out_dims[k];
    i /= out_dims[k];
    if (j >= 0) {
      if (dims[j] != 1) index += coordinate * stride;
      stride *= dims[j];
    }
  }
  return index;
}

std::optional<std::vector<int64_t>> broadcast_dims(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int64_t> out(std::max(a.size(), b.size()), 1);
  for (size_t k = 0; k < out.size(); ++k) {
    const int64_t x = k < out.size() - a.size() ? 1 : a[k - (out.size() - a.size())];
    const int64_t y = k < out.size() - b.size() ? 1 : b[k - (out.size() - b.size())];
    if (x != y && x != 1 && y != 1) return std::nullopt;
    out[k] = std::max(x, y);
  }
  return out;
}

}  // namespace

// ---- constants -------------------------------------------------------------------------------------

bool Translator::fold_constant_node(const Node& node) {
  const std::string out = node.outputs.empty() ? "" : node.outputs[0];
  for (const auto& [key, a] : node.attributes) {
    if (key == "value" && a.kind == Attribute::Kind::tensor) {
      const Tensor& t = a.tensor;
      if (!t.has_values) {
        refuse(node, "a constant whose values the importer cannot read (too large, or of another type)");
        return true;
      }
      if (t.type == ElementType::float32 || t.type == ElementType::float64 || t.type == ElementType::float16) {
        define(out, constant_reals(t.values, t.dims));
      } else {
        std::vector<Dim> ints;
        for (double v : t.values) ints.push_back(Dim{static_cast<int64_t>(v), false});
        define(out, constant_ints(ints, t.dims));
      }
      return true;
    }
    if (key == "value_float") return define(out, constant_reals({a.real}, {})), true;
    if (key == "value_floats") return define(out, constant_reals(a.reals, {static_cast<int64_t>(a.reals.size())})), true;
    if (key == "value_int") return define(out, constant_ints({Dim{a.integer, false}}, {})), true;
    if (key == "value_ints") {
      std::vector<Dim> ints;
      for (int64_t v : a.integers) ints.push_back(Dim{v, false});
      define(out, constant_ints(ints, {static_cast<int64_t>(ints.size())}));
      return true;
    }
  }
  refuse(node, "a constant of a kind the importer does not read (a sparse tensor or a string)");
  return true;
}

bool Translator::fold_shape_of(const Node& node) {
  const std::string out = node.outputs.empty() ? "" : node.outputs[0];
  const Value& x = value(node.inputs.at(0));
  std::vector<Dim> dims;
  if (x.kind == Value::Kind::tensor) {
    dims = x.tensor.view.dims();
  } else if (x.kind == Value::Kind::param || x.kind == Value::Kind::constant) {
    for (int64_t d : x.dims) dims.push_back(Dim{d, false});
  } else {
    auto t = tensor(node.inputs.at(0), node);
    if (!t) return true;
    dims = t->view.dims();
  }
  const int64_t rank = static_cast<int64_t>(dims.size());
  int64_t start = attribute_int(node, "start", 0), end = attribute_int(node, "end", rank);
  start = std::clamp(start < 0 ? start + rank : start, int64_t{0}, rank);
  end = std::clamp(end < 0 ? end + rank : end, int64_t{0}, rank);
  std::vector<Dim> part(dims.begin() + start, dims.begin() + std::max(start, end));
  define(out, constant_ints(part, {static_cast<int64_t>(part.size())}));
  return true;
}

bool Translator::fold_cast(const Node& node) {
  const std::string& op = node.op_type;
  const std::string out = node.outputs.empty() ? "" : node.outputs[0];
  const Value& a = value(node.inputs.empty() ? "" : node.inputs[0]);
  Value v = a;
  if (op == "Cast") {
    const int64_t to = attribute_int(node, "to", 1);
    const bool to_real = to == 1 || to == 10 || to == 11;  // FLOAT, FLOAT16, DOUBLE
    if (to_real && !v.real) {
      std::vector<double> reals;
      for (const Dim& d : v.ints) {
        if (d.batch) return refuse(node, "the batch size used as a real number"), true;
        reals.push_back(static_cast<double>(d.coef));
      }
      v = constant_reals(reals, v.dims);
    } else if (!to_real && v.real) {
      std::vector<Dim> ints;
      for (double r : v.reals) ints.push_back(Dim{static_cast<int64_t>(std::trunc(r)), false});
      v = constant_ints(ints, v.dims);
    }
  }
  define(out, v);
  return true;
}

bool Translator::fold_arithmetic(const Node& node) {
  const std::string& op = node.op_type;
  const std::string out = node.outputs.empty() ? "" : node.outputs[0];
  const Value& a = value(node.inputs.empty() ? "" : node.inputs[0]);
  const Value& b = value(node.inputs.at(1));
  auto dims = broadcast_dims(a.dims, b.dims);
  if (!dims) return refuse(node, "constants of shapes that do not broadcast"), true;
  const int64_t count = product(*dims);
  if (count < 0 || count > kSmallTensorElements) return refuse(node, "arithmetic on constants too large"), true;
  if (a.real || b.real || op == "Pow") {
    auto real_at = [&](const Value& v, int64_t i) -> std::optional<double> {
      const int64_t k = broadcast_index(v.dims, *dims, i);
      if (v.real) return v.reals.at(static_cast<size_t>(k));
      if (v.ints.at(static_cast<size_t>(k)).batch) return std::nullopt;
      return static_cast<double>(v.ints[static_cast<size_t>(k)].coef);
    };
    std::vector<double> r;
    for (int64_t i = 0; i < count; ++i) {
      auto x = real_at(a, i), y = real_at(b, i);
      if (!x || !y) return refuse(node, "arithmetic with the batch size as a real number"), true;
      r.push_back(op == "Add" ? *x + *y
                  : op == "Sub" ? *x - *y
                  : op == "Mul" ? *x * *y
                  : op == "Div" ? *x / *y
                  : op == "Pow" ? std::pow(*x, *y)
                                : (*x == *y ? 1.0 : 0.0));
    }
    define(out, constant_reals(r, *dims));
    return true;
  }
  std::vector<Dim> r;
  for (int64_t i = 0; i < count; ++i) {
    const Dim x = a.ints.at(static_cast<size_t>(broadcast_index(a.dims, *dims, i)));
    const Dim y = b.ints.at(static_cast<size_t>(broadcast_index(b.dims, *dims, i)));
    std::optional<Dim> z;
    if (op == "Add" || op == "Sub") {
      const int64_t sign = op == "Add" ? 1 : -1;
      if (x.batch == y.batch) {  // a*N + b*N = (a+b)*N
        const int64_t c = x.coef + sign * y.coef;
        z = Dim{c, x.batch && c != 0};
      } else if (!y.batch && y.coef == 0) {
        z = x;
      } else if (!x.batch && x.coef == 0) {
        z = Dim{sign * y.coef, true};
      }
    } else if (op == "Mul") {
      z = multiply(x, y);
    } else if (op == "Div") {
      if (y.coef == 0) return refuse(node, "a division by zero in the graph's shape arithmetic"), true;
      z = divide_exact(x, y);
      if (!z && !x.batch && !y.batch) {  // integer division rounds down (PyTorch's floor division)
        const int64_t q = x.coef / y.coef;
        z = Dim{(x.coef % y.coef != 0 && ((x.coef < 0) != (y.coef < 0))) ? q - 1 : q, false};
      }
    } else {  // Equal: the batch equals no literal (it is at least 1, literals here are -1 or sizes)
      z = Dim{x == y ? 1 : 0, false};
    }
    if (!z) return refuse(node, "shape arithmetic on the batch size that is not a multiple of it"), true;
    r.push_back(*z);
  }
  define(out, constant_ints(r, *dims));
  return true;
}

bool Translator::fold_negation(const Node& node) {
  const std::string out = node.outputs.empty() ? "" : node.outputs[0];
  const Value& a = value(node.inputs.empty() ? "" : node.inputs[0]);
  auto same_shape_ints = [&](std::vector<Dim> ints) { define(out, constant_ints(std::move(ints), a.dims)); };
  if (a.real) {
    std::vector<double> r;
    for (double v : a.reals) r.push_back(-v);
    define(out, constant_reals(r, a.dims));
    return true;
  }
  std::vector<Dim> r;
  for (const Dim& d : a.ints) r.push_back(Dim{-d.coef, d.batch});
  same_shape_ints(r);
  return true;
}

bool Translator::fold_square_root(const Node& node) {
  const std::string out = node.outputs.empty() ? "" : node.outputs[0];
  const Value& a = value(node.inputs.empty() ? "" : node.inputs[0]);
  std::vector<double> r;
  for (double v : a.reals) r.push_back(std::sqrt(v));
  define(out, constant_reals(r, a.dims));
  return true;
}

bool Translator::fold_squeeze(const Node& node) {
  const std::string& op = node.op_type;
  const std::string out = node.outputs.empty() ? "" : node.outputs[0];
  const Value& a = value(node.inputs.empty() ? "" : node.inputs[0]);
  std::vector<int64_t> axes;
  if (auto attr = attribute_ints(node, "axes")) axes = *attr;
  if (node.inputs.size() > 1 && !node.inputs[1].empty()) {
    auto given = numbers_of(node.inputs[1]);
    if (!given) return refuse(node, "axes that are not constant numbers"), true;
    axes = *given;
  }
  Value v = a;
  if (op == "Unsqueeze") {
    const int64_t rank = static_cast<int64_t>(v.dims.size() + axes.size());
    std::vector<int64_t> normal;
    for (int64_t x : axes) normal.push_back(normal_axis(x, rank));
    std::sort(normal.begin(), normal.end());
    for (int64_t x : normal) {
      if (x < 0) return refuse(node, "an axis out of range"), true;
      v.dims.insert(v.dims.begin() + x, 1);
    }
  } else {
    std::vector<int64_t> kept;
    for (size_t k = 0; k < v.dims.size(); ++k) {
      const bool listed = axes.empty() ? v.dims[k] == 1
                                       : std::any_of(axes.begin(), axes.end(), [&](int64_t x) {
                                           return normal_axis(x, static_cast<int64_t>(v.dims.size())) ==
                                                  static_cast<int64_t>(k);
                                         });
      if (!listed) kept.push_back(v.dims[k]);
    }
    v.dims = kept;
  }
  define(out, v);
  return true;
}

bool Translator::fold_concat(const Node& node) {
  const std::string out = node.outputs.empty() ? "" : node.outputs[0];
  const Value& a = value(node.inputs.empty() ? "" : node.inputs[0]);
  // Integer vectors (reshape targets) and small real ones, along axis 0 of 1-D constants.
  Value v = a;
  v.dims = {0};
  for (const std::string& in : node.inputs) {
    const Value& c = value(in);
    if (c.dims.size() > 1 || c.real != a.real)
      return refuse(node, "a concat of constants other than vectors of one type"), true;
    v.ints.insert(v.ints.end(), c.ints.begin(), c.ints.end());
    v.reals.insert(v.reals.end(), c.reals.begin(), c.reals.end());
  }
  if (v.real) {
    v.ints.clear();
    v.reals.erase(v.reals.begin(), v.reals.begin() + static_cast<std::ptrdiff_t>(a.reals.size()));
  } else {
    v.ints.erase(v.ints.begin(), v.ints.begin() + static_cast<std::ptrdiff_t>(a.ints.size()));
  }
  v.dims = {static_cast<int64_t>(v.real ? v.reals.size() : v.ints.size())};
  define(out, v);
  return true;
}

bool Translator::fold_gather(const Node& node) {
  const std::string out = node.outputs.empty() ? "" : node.outputs[0];
  const Value& a = value(node.inputs.empty() ? "" : node.inputs[0]);
  const Value& index = value(node.inputs.at(1));
  if (a.dims.size() != 1 || index.real || attribute_int(node, "axis", 0) != 0)
    return refuse(node, "a gather from a constant other than a vector"), true;
  const int64_t size = a.dims[0];
  std::vector<Dim> ints;
  std::vector<double> reals;
  for (const Dim& i : index.ints) {
    const int64_t k = normal_axis(i.coef, size);
    if (i.batch || k < 0) return refuse(node, "an index out of range"), true;
    if (a.real)
      reals.push_back(a.reals[static_cast<size_t>(k)]);
    else
      ints.push_back(a.ints[static_cast<size_t>(k)]);
  }
  if (a.real)
    define(out, constant_reals(reals, index.dims));
  else
    define(out, constant_ints(ints, index.dims));
  return true;
}

bool Translator::fold_slice(const Node& node) {
  const std::string out = node.outputs.empty() ? "" : node.outputs[0];
  const Value& a = value(node.inputs.empty() ? "" : node.inputs[0]);
  auto starts = numbers_of(node.inputs.at(1)), ends = numbers_of(node.inputs.at(2));
  if (a.dims.size() != 1 || !starts || !ends || starts->size() != 1)
    return refuse(node, "a slice of a constant other than one range of a vector"), true;
  const int64_t size = a.dims[0];
  int64_t begin = (*starts)[0] < 0 ? (*starts)[0] + size : (*starts)[0];
  int64_t end = (*ends)[0] < 0 ? (*ends)[0] + size : (*ends)[0];
  begin = std::clamp<int64_t>(begin, 0, size);
  end = std::clamp<int64_t>(end, begin, size);
  Value v = a;
  if (a.real)
    v.reals.assign(a.reals.begin() + begin, a.reals.begin() + end);
  else
    v.ints.assign(a.ints.begin() + begin, a.ints.begin() + end);
  v.dims = {end - begin};
  define(out, v);
  return true;
}

bool Translator::fold_constant_of_shape(const Node& node) {
  const std::string out = node.outputs.empty() ? "" : node.outputs[0];
  auto shape = numbers_of(node.inputs.at(0));
  if (!shape) return refuse(node, "a constant whose shape holds the batch"), true;
  double fill = 0;
  bool real = true;
  if (const Attribute* v = node.attribute("value"); v != nullptr && v->tensor.has_values && !v->tensor.values.empty()) {
    fill = v->tensor.values[0];
    real = v->tensor.type == ElementType::float32 || v->tensor.type == ElementType::float64;
  }
  const int64_t count = product(*shape);
  if (count < 0 || count > kSmallTensorElements) return refuse(node, "a constant too large to fold"), true;
  if (real)
    define(out, constant_reals(std::vector<double>(static_cast<size_t>(count), fill), *shape));
  else
    define(out, constant_ints(std::vector<Dim>(static_cast<size_t>(count), Dim{static_cast<int64_t>(fill), false}),
                              *shape));
  return true;
}

bool Translator::fold_where(const Node& node) {
  const std::string out = node.outputs.empty() ? "" : node.outputs[0];
  const Value& a = value(node.inputs.empty() ? "" : node.inputs[0]);
  auto same_shape_ints = [&](std::vector<Dim> ints) { define(out, constant_ints(std::move(ints), a.dims)); };
  const Value& x = value(node.inputs.at(1));
  const Value& y = value(node.inputs.at(2));
  if (a.real || x.real != y.real || x.real || a.dims != x.dims || x.dims != y.dims)
    return refuse(node, "a where over constants other than integer vectors of one shape"), true;
  std::vector<Dim> r;
  for (size_t i = 0; i < a.ints.size(); ++i) r.push_back(a.ints[i].coef != 0 ? x.ints[i] : y.ints[i]);
  same_shape_ints(r);
  return true;
}

bool Translator::fold_reshape(const Node& node) {
  const std::string out = node.outputs.empty() ? "" : node.outputs[0];
  const Value& a = value(node.inputs.empty() ? "" : node.inputs[0]);
  auto shape = numbers_of(node.inputs.at(1));
  if (!shape) return refuse(node, "a reshape of a constant to a shape holding the batch"), true;
  Value v = a;
  const int64_t count = a.elements();
  int64_t known = 1, free_axis = -1;
  std::vector<int64_t> dims = *shape;
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] == 0) dims[k] = k < a.dims.size() ? a.dims[k] : 1;
    if (dims[k] == -1)
      free_axis = static_cast<int64_t>(k);
    else
      known *= dims[k];
  }
  if (free_axis >= 0 && known > 0) dims[static_cast<size_t>(free_axis)] = count / known;
  if (product(dims) != count) return refuse(node, "a reshape of a constant to another number of elements"), true;
  v.dims = dims;
  define(out, v);
  return true;
}

bool Translator::fold_expand(const Node& node) {
  const std::string out = node.outputs.empty() ? "" : node.outputs[0];
  const Value& a = value(node.inputs.empty() ? "" : node.inputs[0]);
  auto shape = numbers_of(node.inputs.at(1));
  if (!shape) return false;  // a constant expanded over the batch: not shape arithmetic
  auto dims = broadcast_dims(a.dims, *shape);
  if (!dims || product(*dims) > kSmallTensorElements) return refuse(node, "an expand of a constant too large"), true;
  const int64_t count = product(*dims);
  Value v = a;
  v.dims = *dims;
  v.ints.clear();
  v.reals.clear();
  for (int64_t i = 0; i < count; ++i) {
    const int64_t k = broadcast_index(a.dims, *dims, i);
    if (a.real)
      v.reals.push_back(a.reals[static_cast<size_t>(k)]);
    else
      v.ints.push_back(a.ints[static_cast<size_t>(k)]);
  }
  define(out, v);
  return true;
}

bool Translator::translate_constant(const Node& node) {
  const std::string& op = node.op_type;
  if (op == "Constant") return fold_constant_node(node);
  if (op == "Shape") return fold_shape_of(node);
  // The rest only when every input is a constant.
  for (const std::string& in : node.inputs)
    if (!in.empty() && value(in).kind != Value::Kind::constant) return false;
  if (op == "Identity" || op == "Cast") return fold_cast(node);
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Equal" || op == "Pow")
    return fold_arithmetic(node);
  if (op == "Neg") return fold_negation(node);
  if (op == "Sqrt" && value(node.inputs.empty() ? "" : node.inputs[0]).real) return fold_square_root(node);
  if (op == "Unsqueeze" || op == "Squeeze") return fold_squeeze(node);
  if (op == "Concat") return fold_concat(node);
  if (op == "Gather") return fold_gather(node);
  if (op == "Slice") return fold_slice(node);
  if (op == "ConstantOfShape") return fold_constant_of_shape(node);
  if (op == "Where") return fold_where(node);
  if (op == "Reshape") return fold_reshape(node);
  if (op == "Expand") return fold_expand(node);
  return false;
}

// ---- views -----------------------------------------------------------------------------------------

void Translator::translate_view_op(const Node& node) {
  const std::string& op = node.op_type;
  const std::string& in = node.inputs.at(0);
  const std::string& out = node.outputs.at(0);
  Value v = value(in);
  if (v.kind == Value::Kind::param) {  // W^T of a MatMul: the parameter, used transposed
    const auto perm = attribute_ints(node, "perm");
    if (op == "Transpose" && v.dims.size() == 2 && (!perm || *perm == std::vector<int64_t>{1, 0})) {
      v.transposed = !v.transposed;
      std::swap(v.dims[0], v.dims[1]);
      define(out, v);
      return;
    }
    return refuse(node, "a rearrangement of a parameter other than the transpose of a matrix");
  }
  auto t = tensor(in, node);
  if (!t) return;
  View view = t->view;
  const int64_t rank = static_cast<int64_t>(view.rank());
  bool ok = true;
  if (op == "Transpose") {
    std::vector<int64_t> perm;
    if (auto given = attribute_ints(node, "perm")) {
      perm = *given;
    } else {
      for (int64_t k = rank - 1; k >= 0; --k) perm.push_back(k);
    }
    ok = view.transpose(perm);
  } else if (op == "Flatten") {
    const int64_t axis = normal_axis(attribute_int(node, "axis", 1), rank + 1);
    const std::vector<Dim> dims = view.dims();
    Dim outer{1, false}, inner{1, false};
    for (int64_t k = 0; k < rank; ++k) {
      auto next = multiply(k < axis ? outer : inner, dims[static_cast<size_t>(k)]);
      if (!next) ok = false;
      (k < axis ? outer : inner) = next.value_or(Dim{});
    }
    ok = ok && axis >= 0 && view.reshape({outer, inner});
  } else if (op == "Reshape") {
    auto target = ints_of(node.inputs.at(1));
    if (!target) return refuse(node, "a reshape to a shape that is not a constant of the graph");
    const std::vector<Dim> dims = view.dims();
    // 0 copies the input's size (allowzero = 0); -1 is what remains.
    int64_t free_axis = -1;
    Dim known{1, false};
    for (size_t k = 0; k < target->size(); ++k) {
      Dim& d = (*target)[k];
      if (d.coef == 0 && !d.batch && attribute_int(node, "allowzero", 0) == 0) {
        if (k >= dims.size()) return refuse(node, "a 0 in the shape past the input's rank");
        d = dims[k];
      }
      if (d.coef == -1 && !d.batch) {
        free_axis = static_cast<int64_t>(k);
        continue;
      }
      auto next = multiply(known, d);
      if (!next) return refuse(node, "a reshape whose sizes multiply the batch by itself");
      known = *next;
    }
    if (free_axis < 0) {
      ok = view.reshape(*target, graph_batch_);
    } else {
      Dim total{1, false};
      for (const Dim& d : dims) total = multiply(total, d).value_or(Dim{0, false});
      // -1 is what remains; where the known sizes lack the batch, PyTorch wrote
      // the traced batch as a number in one of them: each such reading is tried.
      std::vector<std::vector<Dim>> readings;
      if (known.batch == total.batch) readings.push_back(*target);
      if (total.batch && !known.batch && graph_batch_ > 1)
        for (size_t k = 0; k < target->size(); ++k) {
          const Dim& d = (*target)[k];
          if (static_cast<int64_t>(k) == free_axis || d.batch || d.coef % graph_batch_ != 0) continue;
          std::vector<Dim> reading = *target;
          reading[k] = Dim{d.coef / graph_batch_, true};
          readings.push_back(reading);
        }
      ok = false;
      for (std::vector<Dim>& reading : readings) {
        Dim reading_known{1, false};
        for (size_t k = 0; k < reading.size(); ++k)
          if (static_cast<int64_t>(k) != free_axis) reading_known = multiply(reading_known, reading[k]).value_or(Dim{0, true});
        auto rest = divide_exact(total, reading_known);
        if (!rest) continue;
        reading[static_cast<size_t>(free_axis)] = *rest;
        View attempt = view;
        if (attempt.reshape(reading, graph_batch_)) {
          view = attempt;
          ok = true;
          break;
        }
      }
    }
  } else if (op == "Unsqueeze" || op == "Squeeze") {
    std::vector<int64_t> axes;
    if (auto attr = attribute_ints(node, "axes")) axes = *attr;
    if (node.inputs.size() > 1 && !node.inputs[1].empty()) {
      auto given = numbers_of(node.inputs[1]);
      if (!given) return refuse(node, "axes that are not constant numbers");
      axes = *given;
    }
    if (op == "Unsqueeze") {
      const int64_t new_rank = rank + static_cast<int64_t>(axes.size());
      std::vector<int64_t> normal;
      for (int64_t x : axes) normal.push_back(normal_axis(x, new_rank));
      std::sort(normal.begin(), normal.end());
      for (int64_t x : normal) ok = ok && x >= 0 && view.unsqueeze(x);
    } else {
      std::vector<int64_t> normal;
      if (axes.empty()) {
        const std::vector<Dim> dims = view.dims();
        for (int64_t k = 0; k < rank; ++k)
          if (dims[static_cast<size_t>(k)] == Dim{1, false}) normal.push_back(k);
      }
      for (int64_t x : axes) normal.push_back(normal_axis(x, rank));
      std::sort(normal.rbegin(), normal.rend());
      for (int64_t x : normal) ok = ok && x >= 0 && view.squeeze(x);
    }
  }
  if (!ok)
    return refuse(node, fmt::format("a {} that mplan cannot follow on its input {} (it would split the batch or "
                                    "mix it with sizes of another axis)",
                                    op, t->view.to_string()));
  define(out, tensor_value(TensorRef{t->base, view}));
}

// ---- parts and joins ------------------------------------------------------------------------------

std::optional<Value> Translator::slice(const Node& node, const std::string& x_name, int64_t onnx_axis, int64_t begin,
                                       int64_t end, const std::string& name) {
  auto t = tensor(x_name, node);
  if (!t) return std::nullopt;
  if (t->view.whole_base_axis(onnx_axis) == 0 || t->view.group(onnx_axis).size() != 1) {
    t = plain(x_name, node);  // a rearranged input (a channel shuffle) gets its layer first
    if (!t) return std::nullopt;
  }
  const TensorRef& x = *t;
  const int axis = x.view.whole_base_axis(onnx_axis);
  if (axis == 0 || x.view.group(onnx_axis).size() != 1) {
    refuse(node, fmt::format("a slice of axis {} of {}, which is not one axis of a layer's output", onnx_axis,
                             x.view.to_string()));
    return std::nullopt;
  }
  std::vector<int64_t> dims = base_dims(x.base);
  const int64_t size = dims[static_cast<size_t>(axis - 1)];
  if (begin == 0 && end == size) return tensor_value(x);
  const int layer = emit(name, "slice", {x.base},
                         {{"axis", std::to_string(axis - 1)}, {"begin", std::to_string(begin)},
                          {"end", std::to_string(end)}});
  dims[static_cast<size_t>(axis - 1)] = end - begin;
  bases_.push_back(Base{layer, dims});
  Value out;
  out.kind = Value::Kind::tensor;
  out.tensor.base = static_cast<int>(bases_.size()) - 1;
  out.tensor.view = x.view;
  out.tensor.view.resize_base_axis(axis, end - begin);
  return out;
}

void Translator::translate_slice(const Node& node) {
  // Opset 10+: starts, ends, axes, steps as inputs; before: attributes.
  auto input_or_attribute = [&](size_t index, const char* key) -> std::optional<std::vector<int64_t>> {
    if (node.inputs.size() > index && !node.inputs[index].empty()) return numbers_of(node.inputs[index]);
    return attribute_ints(node, key);
  };
  auto starts = input_or_attribute(1, "starts"), ends = input_or_attribute(2, "ends");
  auto axes = input_or_attribute(3, "axes"), steps = input_or_attribute(4, "steps");
  if (!starts || !ends || starts->size() != 1 || ends->size() != 1 || (axes && axes->size() != 1))
    return refuse(node, "a slice other than one constant range of one axis");
  if (steps && (steps->size() != 1 || (*steps)[0] != 1)) return refuse(node, "a slice with a step other than 1");
  auto x = tensor(node.inputs.at(0), node);
  if (!x) return;
  const std::vector<Dim> dims = x->view.dims();
  const int64_t axis = normal_axis(axes ? (*axes)[0] : 0, static_cast<int64_t>(dims.size()));
  if (axis < 0 || dims[static_cast<size_t>(axis)].batch)
    return refuse(node, "a slice of the batch (or of an axis out of range)");
  const int64_t size = dims[static_cast<size_t>(axis)].coef;
  int64_t begin = (*starts)[0] < 0 ? (*starts)[0] + size : (*starts)[0];
  int64_t end = (*ends)[0] < 0 ? (*ends)[0] + size : (*ends)[0];
  begin = std::clamp<int64_t>(begin, 0, size);
  end = std::clamp<int64_t>(end, 0, size);
  if (begin >= end) return refuse(node, "an empty slice");
  if (auto out = slice(node, node.inputs.at(0), axis, begin, end, node.name)) define(node.outputs.at(0), *out);
}

void Translator::translate_split(const Node& node) {
  auto x = tensor(node.inputs.at(0), node);
  if (!x) return;
  const std::vector<Dim> dims = x->view.dims();
  const int64_t axis = normal_axis(attribute_int(node, "axis", 0), static_cast<int64_t>(dims.size()));
  if (axis < 0 || dims[static_cast<size_t>(axis)].batch) return refuse(node, "a split of the batch");
  const int64_t size = dims[static_cast<size_t>(axis)].coef, parts = static_cast<int64_t>(node.outputs.size());
  std::vector<int64_t> sizes;
  if (node.inputs.size() > 1 && !node.inputs[1].empty()) {
    auto given = numbers_of(node.inputs[1]);
    if (!given) return refuse(node, "split sizes that are not constant");
    sizes = *given;
  } else if (auto attr = attribute_ints(node, "split")) {
    sizes = *attr;
  } else {
    if (size % parts != 0) return refuse(node, "an even split of an axis its parts do not divide");
    sizes.assign(static_cast<size_t>(parts), size / parts);
  }
  if (static_cast<int64_t>(sizes.size()) != parts) return refuse(node, "split sizes that do not match its outputs");
  int64_t begin = 0;
  for (int64_t k = 0; k < parts; ++k) {
    if (sizes[static_cast<size_t>(k)] < 1 || sizes[static_cast<size_t>(k)] > size - begin)
      return refuse(node, "split sizes beyond the axis");
    const int64_t end = begin + sizes[static_cast<size_t>(k)];
    if (consumers(node.outputs[static_cast<size_t>(k)]) > 0) {  // unused parts get no layer
      auto out = slice(node, node.inputs.at(0), axis, begin, end, fmt::format("{}/{}", node.name, k));
      if (!out) return;
      define(node.outputs[static_cast<size_t>(k)], *out);
    }
    begin = end;
  }
}

void Translator::translate_gather(const Node& node) {
  // x[:, i]: one index of one axis, which then goes (ViT's class token).
  auto index = numbers_of(node.inputs.at(1));
  if (!index || index->size() != 1 || !value(node.inputs.at(1)).dims.empty())
    return refuse(node, "a gather of a tensor other than one constant index");
  auto x = tensor(node.inputs.at(0), node);
  if (!x) return;
  const std::vector<Dim> dims = x->view.dims();
  const int64_t axis = normal_axis(attribute_int(node, "axis", 0), static_cast<int64_t>(dims.size()));
  if (axis < 0 || dims[static_cast<size_t>(axis)].batch) return refuse(node, "a gather along the batch");
  const int64_t i = normal_axis((*index)[0], dims[static_cast<size_t>(axis)].coef);
  if (i < 0) return refuse(node, "an index out of range");
  auto out = slice(node, node.inputs.at(0), axis, i, i + 1, node.name);
  if (!out) return;
  if (!out->tensor.view.squeeze(axis)) return refuse(node, "a gather mplan cannot follow");
  define(node.outputs.at(0), *out);
}

void Translator::translate_concat(const Node& node) {
  const std::string& out = node.outputs.at(0);
  std::vector<std::string> inputs;
  for (const std::string& in : node.inputs)
    if (!in.empty()) inputs.push_back(in);
  if (inputs.size() == 1) return define(out, value(inputs[0]));  // DenseNet's torch.cat([x]): the same tensor
  // ViT's class token: cat([token expanded over the batch, patches], dim=1).
  if (inputs.size() == 2 && value(inputs[0]).kind == Value::Kind::pending &&
      value(inputs[0]).pending.kind == Pending::Kind::expanded) {
    const Value token = value(value(inputs[0]).pending.x);
    auto x = plain(inputs[1], node, 3);
    if (!x) return;
    const auto& dims = base_dims(x->base);
    const int64_t axis = normal_axis(attribute_int(node, "axis", 0), 3);
    if (axis != 1 || dims.size() != 2 || token.dims != std::vector<int64_t>{1, 1, dims[1]})
      return refuse(node, "a concat of a broadcast parameter other than a class token (1, 1, D) before a "
                          "sequence (N, T, D)");
    const int layer = emit(node.name, "class_token", {x->base}, {}, "the parameter's expansion and the concat");
    layers_[static_cast<size_t>(layer)].params.push_back(token.param);
    define(out, new_tensor(layer, {dims[0] + 1, dims[1]}));
    return;
  }
  std::vector<TensorRef> parts;
  for (const std::string& in : inputs) {
    auto t = plain(in, node);
    if (!t) return;
    parts.push_back(*t);
  }
  const int64_t rank = static_cast<int64_t>(parts[0].view.rank());
  const int64_t axis = normal_axis(attribute_int(node, "axis", 0), rank);
  if (axis != 1)
    return refuse(node, "a concat along another axis than the first after the batch (channels, tokens)");
  std::vector<int> bases;
  std::vector<int64_t> dims = base_dims(parts[0].base);
  dims[0] = 0;
  for (const TensorRef& t : parts) {
    bases.push_back(t.base);
    const auto& d = base_dims(t.base);
    if (d.size() != dims.size() || !std::equal(d.begin() + 1, d.end(), dims.begin() + 1))
      return refuse(node, "a concat of tensors that differ in more than the joined axis");
    dims[0] += d[0];
  }
  define(out, new_tensor(emit(node.name, "concat", bases), dims));
}

void Translator::translate_expand(const Node& node) {
  // A class token expanded over the batch (PyTorch's token.expand(n, -1, -1)).
  const Value& x = value(node.inputs.at(0));
  auto shape = ints_of(node.inputs.at(1));
  std::string shape_text = "?";
  if (shape) {
    shape_text.clear();
    for (const Dim& d : *shape) shape_text += (shape_text.empty() ? "" : ", ") + d.to_string();
  }
  if (shape && !shape->empty() && !(*shape)[0].batch && graph_batch_ > 1 && (*shape)[0].coef == graph_batch_)
    (*shape)[0] = Dim{1, true};  // the traced batch written as a number
  if (x.kind != Value::Kind::param || !shape || shape->empty() || !(*shape)[0].batch || (*shape)[0].coef != 1)
    return refuse(node, fmt::format("an expand to ({}) other than a parameter's over the batch (a class token)",
                                    shape_text));
  if (x.dims.empty() || x.dims[0] != 1) return refuse(node, "an expand of a parameter whose first size is not 1");
  for (size_t k = 1; k < shape->size(); ++k)
    if ((*shape)[k].batch || ((*shape)[k].coef != 1 && (k >= x.dims.size() || (*shape)[k].coef != x.dims[k])))
      return refuse(node, "an expand of a parameter along another axis than the batch");
  Value v;
  v.kind = Value::Kind::pending;
  v.pending.kind = Pending::Kind::expanded;
  v.pending.x = node.inputs.at(0);
  v.pending.node = node.name;
  define(node.outputs.at(0), v);
}

void Translator::translate_pad(const Node& node) {
  // Zero padding of the spatial axes, before a conv or an average pool (PyTorch
  // writes count_include_pad average pools so), symmetric.
  std::vector<int64_t> pads;
  if (node.inputs.size() > 1 && !node.inputs[1].empty()) {
    auto given = numbers_of(node.inputs[1]);
    if (!given) return refuse(node, "pads that are not constant");
    pads = *given;
  } else if (auto attr = attribute_ints(node, "pads")) {
    pads = *attr;
  }
  const Attribute* mode = node.attribute("mode");
  if (mode != nullptr && mode->text != "constant") return refuse(node, "a padding other than with zeros");
  if (node.inputs.size() > 2 && !node.inputs[2].empty()) {
    auto fill = scalar_of(node.inputs[2]);
    if (!fill || *fill != 0.0) return refuse(node, "a padding with a value other than 0");
  }
  if (pads.size() != 8 || pads[0] || pads[1] || pads[4] || pads[5] || pads[2] != pads[6] || pads[3] != pads[7] ||
      pads[2] < 0 || pads[3] < 0)
    return refuse(node, "a padding other than the same zeros on both sides of H and W of [N, C, H, W]");
  if (pads[2] == 0 && pads[3] == 0) return define(node.outputs.at(0), value(node.inputs.at(0)));
  if (!tensor(node.inputs.at(0), node)) return;
  Value v;
  v.kind = Value::Kind::pending;
  v.pending.kind = Pending::Kind::padded;
  v.pending.x = node.inputs.at(0);
  v.pending.pad_h = pads[2];
  v.pending.pad_w = pads[3];
  v.pending.node = node.name;
  define(node.outputs.at(0), v);
}

void Translator::translate_dropout(const Node& node) {
  // Dropout in eval mode (no training_mode, or false) is the identity; in a
  // training-mode export it is mplan's dropout, whose masks differ from PyTorch's.
  const std::string& out = node.outputs.at(0);
  bool training = false;
  if (node.inputs.size() > 2 && !node.inputs[2].empty()) {
    auto flag = scalar_of(node.inputs[2]);
    if (!flag) return refuse(node, "a training_mode that is not a constant");
    training = *flag != 0.0;
  }
  double ratio = 0.5;
  if (const Attribute* a = node.attribute("ratio"); a != nullptr) ratio = a->real;
  if (node.inputs.size() > 1 && !node.inputs[1].empty()) {
    auto given = scalar_of(node.inputs[1]);
    if (!given) return refuse(node, "a ratio that is not a constant");
    ratio = *given;
  }
  if (!training || ratio == 0.0) return define(out, value(node.inputs.at(0)));
  if (!(ratio > 0 && ratio < 1)) return refuse(node, "a ratio outside [0, 1)");
  auto x = tensor(node.inputs.at(0), node);
  if (!x) return;
  define(out, tensor_like(emit(node.name, "dropout", {x->base}, {{"p", fmt::format("{}", ratio)}}), *x));
}

}  // namespace mplan::onnx_import
