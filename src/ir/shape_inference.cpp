#include "ir/shape_inference.h"

#include <algorithm>

#include "core/config.h"
#include "core/lru_cache.h"
#include "lazuli/error.h"

namespace lz::ir {
namespace {

std::string describe(const std::vector<Value>& ops) {
  std::string s;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (i) s += ", ";
    s += shape_str(ops[i].shape()) + " " + std::string(dtype_name(ops[i].dtype()));
  }
  return s;
}

[[noreturn]] void fail_value(OpKind op, const std::vector<Value>& operands, const std::string& why) {
  throw ValueError(std::string(op_name(op)) + ": " + why + " (operands: " + describe(operands) +
                   ")");
}
[[noreturn]] void fail_type(OpKind op, const std::vector<Value>& operands, const std::string& why) {
  throw TypeError(std::string(op_name(op)) + ": " + why + " (operands: " + describe(operands) + ")");
}

void require_arity(OpKind op, const std::vector<Value>& operands) {
  int a = op_info(op).arity;
  if (a >= 0 && static_cast<int>(operands.size()) != a) {
    fail_value(op, operands, "expects " + std::to_string(a) + " operands");
  }
}

void require_same_dtype(OpKind op, const std::vector<Value>& v, size_t from) {
  for (size_t i = from + 1; i < v.size(); ++i) {
    if (v[i].dtype() != v[from].dtype()) fail_type(op, v, "operand dtypes differ");
  }
}

Shape broadcast_all(OpKind op, const std::vector<Value>& v) {
  Shape s = v[0].shape();
  std::string name(op_name(op));
  for (size_t i = 1; i < v.size(); ++i) s = broadcast_shapes(s, v[i].shape(), name.c_str());
  return s;
}

OutputType infer_reduction(OpKind op, const std::vector<Value>& v, const Attrs& a) {
  const Shape& in = v[0].shape();
  std::vector<bool> reduced(in.size(), false);
  for (int64_t d : a.ints) {
    if (d < 0 || d >= static_cast<int64_t>(in.size())) fail_value(op, v, "reduction dim out of range");
    reduced[d] = true;
  }
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!reduced[i]) out.push_back(in[i]);
    else if (a.flag) out.push_back(1);
  }
  bool arg = op == OpKind::ArgMax || op == OpKind::ArgMin;
  if ((arg || op == OpKind::ReduceMax || op == OpKind::ReduceMin)) {
    for (int64_t d : a.ints) {
      if (in[d] == 0) fail_value(op, v, "cannot reduce over a zero-size dim (no identity)");
    }
    if (arg && numel(in) == 0) fail_value(op, v, "empty input");
  }
  DType dt = arg ? DType::Int64 : v[0].dtype();
  return {dt, out};
}

OutputType infer_matmul(const std::vector<Value>& v) {
  const Shape& a = v[0].shape();
  const Shape& b = v[1].shape();
  if (a.size() < 2 || b.size() < 2) fail_value(OpKind::MatMul, v, "operands must have rank >= 2");
  if (v[0].dtype() != v[1].dtype()) fail_type(OpKind::MatMul, v, "operand dtypes differ");
  if (v[0].dtype() == DType::Bool) fail_type(OpKind::MatMul, v, "bool is not supported");
  int64_t k1 = a[a.size() - 1], k2 = b[b.size() - 2];
  if (k1 != k2) {
    fail_value(OpKind::MatMul, v, "inner dims differ (" + std::to_string(k1) + " vs " +
                                      std::to_string(k2) + ")");
  }
  Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  Shape out = broadcast_shapes(ba, bb, "matmul");
  out.push_back(a[a.size() - 2]);
  out.push_back(b[b.size() - 1]);
  return {v[0].dtype(), out};
}

void check_slice_attrs(OpKind op, const std::vector<Value>& v, const Attrs& a, const Shape& in) {
  if (a.ints.size() != 4) fail_value(op, v, "slice attributes must be [dim, start, end, step]");
  int64_t dim = a.ints[0], start = a.ints[1], end = a.ints[2], step = a.ints[3];
  if (dim < 0 || dim >= static_cast<int64_t>(in.size())) fail_value(op, v, "dim out of range");
  if (step <= 0) fail_value(op, v, "step must be positive");
  if (start < 0 || end < start || end > in[dim]) fail_value(op, v, "bounds out of range");
}

int64_t slice_len(const Attrs& a) {
  return (a.ints[2] - a.ints[1] + a.ints[3] - 1) / a.ints[3];
}

OutputType infer_movement(OpKind op, const std::vector<Value>& v, const Attrs& a) {
  const Shape& in = v[0].shape();
  DType dt = v[0].dtype();
  switch (op) {
    case OpKind::Reshape:
      if (numel(a.ints) != numel(in)) {
        fail_value(op, v, "cannot reshape to " + shape_str(a.ints) + " (element counts differ)");
      }
      return {dt, a.ints};
    case OpKind::Permute: {
      if (a.ints.size() != in.size()) fail_value(op, v, "permutation rank differs from input rank");
      std::vector<bool> seen(in.size(), false);
      Shape out(in.size());
      for (size_t i = 0; i < in.size(); ++i) {
        int64_t p = a.ints[i];
        if (p < 0 || p >= static_cast<int64_t>(in.size()) || seen[p]) {
          fail_value(op, v, "invalid permutation " + shape_str(a.ints));
        }
        seen[p] = true;
        out[i] = in[p];
      }
      return {dt, out};
    }
    case OpKind::Expand: {
      if (a.ints.size() != in.size()) fail_value(op, v, "expand rank differs from input rank");
      for (size_t i = 0; i < in.size(); ++i) {
        if (in[i] != 1 && in[i] != a.ints[i]) {
          fail_value(op, v, "cannot expand to " + shape_str(a.ints));
        }
      }
      return {dt, a.ints};
    }
    case OpKind::Slice: {
      check_slice_attrs(op, v, a, in);
      Shape out = in;
      out[a.ints[0]] = slice_len(a);
      return {dt, out};
    }
    case OpKind::SliceScatter: {
      check_slice_attrs(op, v, a, in);
      Shape expect = in;
      expect[a.ints[0]] = slice_len(a);
      if (v[1].shape() != expect) fail_value(op, v, "source shape must be " + shape_str(expect));
      require_same_dtype(op, v, 0);
      return {dt, in};
    }
    case OpKind::Cat: {
      if (v.empty()) fail_value(op, v, "needs at least one operand");
      if (a.ints.size() != 1) fail_value(op, v, "attributes must be [dim]");
      int64_t dim = a.ints[0];
      if (dim < 0 || dim >= static_cast<int64_t>(in.size())) fail_value(op, v, "dim out of range");
      Shape out = in;
      out[dim] = 0;
      for (const Value& x : v) {
        const Shape& s = x.shape();
        if (x.dtype() != dt) fail_type(op, v, "operand dtypes differ");
        bool ok = s.size() == in.size();
        for (size_t i = 0; ok && i < s.size(); ++i) ok = static_cast<int64_t>(i) == dim || s[i] == in[i];
        if (!ok) fail_value(op, v, "shapes differ outside dim " + std::to_string(dim));
        out[dim] += s[dim];
      }
      return {dt, out};
    }
    default: break;
  }
  fail_value(op, v, "not a movement op");
}

OutputType infer_index(OpKind op, const std::vector<Value>& v, const Attrs& a) {
  const Shape& in = v[0].shape();
  if (a.ints.size() != 1) fail_value(op, v, "attributes must be [dim]");
  int64_t dim = a.ints[0];
  if (dim < 0 || dim >= static_cast<int64_t>(std::max<size_t>(in.size(), 1))) {
    fail_value(op, v, "dim out of range");
  }
  if (v[1].dtype() != DType::Int64 && v[1].dtype() != DType::Int32) {
    fail_type(op, v, "index must be an integer tensor");
  }
  const Shape& idx = v[1].shape();
  switch (op) {
    case OpKind::IndexSelect: {
      if (idx.size() != 1) fail_value(op, v, "index must be 1-D");
      Shape out = in;
      if (!out.empty()) out[dim] = idx[0];
      return {v[0].dtype(), out};
    }
    case OpKind::Gather:
      if (idx.size() != in.size()) fail_value(op, v, "index rank must equal input rank");
      for (size_t i = 0; i < in.size(); ++i) {
        if (static_cast<int64_t>(i) != dim && idx[i] > in[i]) {
          fail_value(op, v, "index is larger than the input outside dim");
        }
      }
      return {v[0].dtype(), idx};
    case OpKind::ScatterAdd: {
      const Shape& src = v[2].shape();
      if (idx.size() != in.size() || src.size() != in.size()) {
        fail_value(op, v, "base, index and src must have equal ranks");
      }
      for (size_t i = 0; i < in.size(); ++i) {
        if (idx[i] > src[i] || (static_cast<int64_t>(i) != dim && idx[i] > in[i])) {
          fail_value(op, v, "index is larger than src or base");
        }
      }
      if (v[2].dtype() != v[0].dtype()) fail_type(op, v, "src dtype differs from base dtype");
      return {v[0].dtype(), in};
    }
    case OpKind::IndexCopy: {
      if (idx.size() != 1) fail_value(op, v, "index must be 1-D");
      Shape expect = in;
      if (!expect.empty()) expect[dim] = idx[0];
      if (v[2].shape() != expect) fail_value(op, v, "source shape must be " + shape_str(expect));
      if (v[2].dtype() != v[0].dtype()) fail_type(op, v, "src dtype differs from base dtype");
      return {v[0].dtype(), in};
    }
    default: break;
  }
  fail_value(op, v, "not an index op");
}

}  // namespace

OutputType infer_output(OpKind op, const std::vector<Value>& v, const Attrs& a) {
  require_arity(op, v);
  switch (op_info(op).cls) {
    case OpClass::Leaf: break;
    case OpClass::Random:
      if (v[0].dtype() != DType::Int64 || !v[0].shape().empty()) fail_type(op, v, "key must be int64 []");
      if (op == OpKind::RngAdvance) return {DType::Int64, {}};
      if (!is_floating(a.dtype)) fail_type(op, v, "random values need a floating dtype");
      return {a.dtype, a.ints};
    case OpClass::Unary:
      if (op == OpKind::Cast) return {a.dtype, v[0].shape()};
      // Autograd identities: the operand's value, unchanged.
      if (op == OpKind::GradLeaf || op == OpKind::StopGradient) return {v[0].dtype(), v[0].shape()};
      if (op == OpKind::BitwiseNot && is_floating(v[0].dtype())) {
        fail_type(op, v, "needs a bool or integer operand");
      }
      if (op == OpKind::Neg && v[0].dtype() == DType::Bool) fail_type(op, v, "bool is not supported");
      return {v[0].dtype(), v[0].shape()};
    case OpClass::Binary:
      require_same_dtype(op, v, 0);
      if ((op == OpKind::BitwiseAnd || op == OpKind::BitwiseOr || op == OpKind::BitwiseXor) &&
          is_floating(v[0].dtype())) {
        fail_type(op, v, "needs bool or integer operands");
      }
      if (op == OpKind::Div && !is_floating(v[0].dtype())) fail_type(op, v, "needs floating operands");
      return {v[0].dtype(), broadcast_all(op, v)};
    case OpClass::Compare:
      require_same_dtype(op, v, 0);
      return {DType::Bool, broadcast_all(op, v)};
    case OpClass::Ternary:
      if (v[0].dtype() != DType::Bool) fail_type(op, v, "condition must be bool");
      require_same_dtype(op, v, 1);
      return {v[1].dtype(), broadcast_all(op, v)};
    case OpClass::Reduction: return infer_reduction(op, v, a);
    case OpClass::Library: return infer_matmul(v);
    case OpClass::Movement: return infer_movement(op, v, a);
    case OpClass::Index: return infer_index(op, v, a);
  }
  fail_value(op, v, "has no shape rule");
}

namespace {
LruCache<Hash128, OutputType, Hash128Hasher>& shape_cache() {
  static auto* c = new LruCache<Hash128, OutputType, Hash128Hasher>(
      static_cast<size_t>(config().ir_shape_cache_size));
  return *c;
}
}  // namespace

OutputType cached_infer_output(const Hash128& dag_hash, OpKind op, const std::vector<Value>& v,
                               const Attrs& a) {
  auto& cache = shape_cache();
  OutputType hit;
  if (cache.get_copy(dag_hash, &hit)) return hit;
  auto out = std::make_shared<OutputType>(infer_output(op, v, a));
  // Every IR value fits the size limit (core/shape.h), whichever op grew it.
  check_tensor_size(std::string(op_name(op)) + " (operands: " + describe(v) + ")", out->shape,
                    out->dtype);
  cache.add(dag_hash, out);
  return *out;
}

void resize_shape_cache(size_t n) { shape_cache().resize(n); }
size_t shape_cache_size() { return shape_cache().size(); }

}  // namespace lz::ir
