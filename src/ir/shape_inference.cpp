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

OutputType infer_reduction(OpKind op, const std::vector<Value>& v, const ReduceAttrs& a) {
  const Shape& in = v[0].shape();
  std::vector<bool> reduced(in.size(), false);
  for (int64_t d : a.dims) {
    if (d < 0 || d >= static_cast<int64_t>(in.size())) fail_value(op, v, "reduction dim out of range");
    reduced[d] = true;
  }
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!reduced[i]) out.push_back(in[i]);
    else if (a.keepdim) out.push_back(1);
  }
  bool arg = op == OpKind::ArgMax || op == OpKind::ArgMin;
  if (arg && a.dims.size() != 1) fail_value(op, v, "reduces exactly one dim");
  if ((arg || op == OpKind::ReduceMax || op == OpKind::ReduceMin)) {
    for (int64_t d : a.dims) {
      if (in[d] == 0) fail_value(op, v, "cannot reduce over a zero-size dim (no identity)");
    }
    // An empty input reduced over a non-empty dim gives an empty result.
  }
  return {v[0].dtype(), out};  // infer_output applies the table's result dtype
}

OutputType infer_matmul(const std::vector<Value>& v) {
  const Shape& a = v[0].shape();
  const Shape& b = v[1].shape();
  if (a.size() < 2 || b.size() < 2) fail_value(OpKind::MatMul, v, "operands must have rank >= 2");
  if (v[0].dtype() != v[1].dtype()) fail_type(OpKind::MatMul, v, "operand dtypes differ");
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

void check_slice_attrs(OpKind op, const std::vector<Value>& v, const SliceAttrs& a,
                       const Shape& in) {
  if (a.dim < 0 || a.dim >= static_cast<int64_t>(in.size())) fail_value(op, v, "dim out of range");
  if (a.step <= 0) fail_value(op, v, "step must be positive");
  if (a.start < 0 || a.end < a.start || a.end > in[a.dim]) fail_value(op, v, "bounds out of range");
}

int64_t slice_len(const SliceAttrs& a) { return (a.end - a.start + a.step - 1) / a.step; }

OutputType infer_movement(OpKind op, const std::vector<Value>& v, const Attrs& attrs) {
  if (v.empty()) fail_value(op, v, "needs at least one operand");
  const Shape& in = v[0].shape();
  DType dt = v[0].dtype();
  switch (op) {
    case OpKind::Reshape: {
      const Shape& to = std::get<ShapeAttrs>(attrs).sizes;
      if (numel(to) != numel(in)) {
        fail_value(op, v, "cannot reshape to " + shape_str(to) + " (element counts differ)");
      }
      return {dt, to};
    }
    case OpKind::Permute: {
      const std::vector<int64_t>& perm = std::get<PermuteAttrs>(attrs).perm;
      if (perm.size() != in.size()) fail_value(op, v, "permutation rank differs from input rank");
      std::vector<bool> seen(in.size(), false);
      Shape out(in.size());
      for (size_t i = 0; i < in.size(); ++i) {
        int64_t p = perm[i];
        if (p < 0 || p >= static_cast<int64_t>(in.size()) || seen[p]) {
          fail_value(op, v, "invalid permutation " + shape_str(perm));
        }
        seen[p] = true;
        out[i] = in[p];
      }
      return {dt, out};
    }
    case OpKind::Expand: {
      const Shape& to = std::get<ShapeAttrs>(attrs).sizes;
      if (to.size() != in.size()) fail_value(op, v, "expand rank differs from input rank");
      for (size_t i = 0; i < in.size(); ++i) {
        if (in[i] != 1 && in[i] != to[i]) fail_value(op, v, "cannot expand to " + shape_str(to));
      }
      return {dt, to};
    }
    case OpKind::Slice: {
      const auto& a = std::get<SliceAttrs>(attrs);
      check_slice_attrs(op, v, a, in);
      Shape out = in;
      out[a.dim] = slice_len(a);
      return {dt, out};
    }
    case OpKind::SliceScatter: {
      const auto& a = std::get<SliceAttrs>(attrs);
      check_slice_attrs(op, v, a, in);
      Shape expect = in;
      expect[a.dim] = slice_len(a);
      if (v[1].shape() != expect) fail_value(op, v, "source shape must be " + shape_str(expect));
      require_same_dtype(op, v, 0);
      return {dt, in};
    }
    case OpKind::Cat: {
      int64_t dim = std::get<DimAttrs>(attrs).dim;
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

OutputType infer_index(OpKind op, const std::vector<Value>& v, const DimAttrs& a) {
  const Shape& in = v[0].shape();
  int64_t dim = a.dim;
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

namespace {

// The table's dtype policy: operands of a dtype the op is not defined for are refused.
void check_operand_dtypes(OpKind op, const std::vector<Value>& v) {
  const OpInfo& info = op_info(op);
  if (info.accepts == dtype_sets::Any) return;
  // Where's condition is bool by its own rule; its value operands follow the policy.
  size_t from = info.cls == OpClass::Ternary ? 1 : 0;
  // Index ops and random ops: only their first operand (the data, the key) follows the policy.
  size_t to = info.cls == OpClass::Index || info.cls == OpClass::Random ? 1 : v.size();
  for (size_t i = from; i < to && i < v.size(); ++i) {
    if (!accepts_dtype(info.accepts, v[i].dtype())) {
      fail_type(op, v, std::string("needs ") + dtype_set_str(info.accepts) + " operands");
    }
  }
}

// Sort: values (the input's dtype) and int64 indices, both of the input's shape.
NodeType infer_sort(OpKind op, const std::vector<Value>& v, const SortAttrs& a) {
  const Shape& in = v[0].shape();
  if (a.dim < 0 || a.dim >= static_cast<int64_t>(std::max<size_t>(in.size(), 1))) {
    fail_value(op, v, "dim out of range");
  }
  return {{v[0].dtype(), in}, {{DType::Int64, in}}};
}

// ---- convolution and pooling ----

std::string ints_str(const std::vector<int64_t>& v) { return shape_str(v); }

// Output size of a window of `k` (dilated by `d`) sliding by `s` over `in` padded by `p` on each
// side; ceil_mode rounds up but never starts a window in the right padding (PyTorch's rule).
int64_t window_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  const int64_t span = in + 2 * p - d * (k - 1) - 1;
  if (span < 0) return 0;
  int64_t out = (ceil_mode ? span + s - 1 : span) / s + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

void check_window_attrs(OpKind op, const std::vector<Value>& v, size_t sp,
                        const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                        const std::vector<int64_t>& dilation) {
  if (sp < 1 || sp > 3) fail_value(op, v, "needs 1 to 3 spatial dims");
  if (stride.size() != sp || padding.size() != sp || dilation.size() != sp) {
    fail_value(op, v, "stride, padding and dilation need one value per spatial dim");
  }
  for (size_t i = 0; i < sp; ++i) {
    if (stride[i] <= 0) fail_value(op, v, "stride must be positive, got " + ints_str(stride));
    if (dilation[i] <= 0) fail_value(op, v, "dilation must be positive, got " + ints_str(dilation));
    if (padding[i] < 0) fail_value(op, v, "padding must be non-negative, got " + ints_str(padding));
  }
}

// The forward conv's output shape for input `x` and weight `w` (both validated).
Shape conv_out_shape(OpKind op, const std::vector<Value>& v, const ConvAttrs& a, const Shape& x,
                     const Shape& w) {
  const size_t sp = a.stride.size();
  check_window_attrs(op, v, sp, a.stride, a.padding, a.dilation);
  if (x.size() != sp + 2 || w.size() != sp + 2) {
    fail_value(op, v, "input and weight need rank " + std::to_string(sp + 2) + " ([N, C, " +
                          (sp == 1 ? "L" : sp == 2 ? "H, W" : "D, H, W") + "] and [O, C / groups, " +
                          (sp == 1 ? "k" : "kh, kw") + "])");
  }
  if (a.groups < 1) fail_value(op, v, "groups must be positive");
  if (x[1] % a.groups != 0 || w[0] % a.groups != 0) {
    fail_value(op, v, "input channels " + std::to_string(x[1]) + " and output channels " +
                          std::to_string(w[0]) + " must be divisible by groups=" +
                          std::to_string(a.groups));
  }
  if (w[1] * a.groups != x[1]) {
    fail_value(op, v, "expected input with " + std::to_string(w[1] * a.groups) +
                          " channels (weight " + shape_str(w) + ", groups=" +
                          std::to_string(a.groups) + "), got " + std::to_string(x[1]));
  }
  Shape out{x[0], w[0]};
  for (size_t i = 0; i < sp; ++i) {
    int64_t o = window_out(x[2 + i], w[2 + i], a.stride[i], a.padding[i], a.dilation[i], false);
    if (o < 1) {
      fail_value(op, v, "the kernel " + shape_str(Shape(w.begin() + 2, w.end())) + " (dilation " +
                            ints_str(a.dilation) + ") is larger than the padded input " +
                            shape_str(Shape(x.begin() + 2, x.end())));
    }
    out.push_back(o);
  }
  return out;
}

// Collectives: the group's size and the source rank were checked by the frontend against the
// group; these are the shape rules, which hold for any group.
OutputType infer_collective(OpKind op, const std::vector<Value>& v, const CollectiveAttrs& a) {
  const Shape& x = v[0].shape();
  if (a.world_size < 1) fail_value(op, v, "the group's size must be positive");
  if (a.root < 0 || a.root >= a.world_size) {
    fail_value(op, v, "rank " + std::to_string(a.root) + " is not in a group of " +
                          std::to_string(a.world_size));
  }
  if (a.reduce < CollectiveAttrs::Sum || a.reduce > CollectiveAttrs::Min) fail_value(op, v, "unknown reduction");
  if (op == OpKind::AllReduce || op == OpKind::Broadcast) return {v[0].dtype(), x};
  if (x.empty()) fail_value(op, v, "needs a tensor of at least one dim (it works along dim 0)");
  Shape out = x;
  if (op == OpKind::AllGather) {
    out[0] = x[0] * a.world_size;
  } else {
    if (x[0] % a.world_size != 0) {
      fail_value(op, v, "dim 0 (" + std::to_string(x[0]) + ") must divide evenly among the " +
                            std::to_string(a.world_size) + " ranks");
    }
    out[0] = x[0] / a.world_size;
  }
  return {v[0].dtype(), out};
}

OutputType infer_conv(OpKind op, const std::vector<Value>& v, const ConvAttrs& a) {
  require_same_dtype(op, v, 0);
  DType dt = v[0].dtype();
  switch (op) {
    case OpKind::Conv:
      return {dt, conv_out_shape(op, v, a, v[0].shape(), v[1].shape())};
    case OpKind::ConvBackwardInput:  // (dy, w) -> x
      if (conv_out_shape(op, v, a, a.shape, v[1].shape()) != v[0].shape()) {
        fail_value(op, v, "the gradient's shape does not match an input of " + shape_str(a.shape));
      }
      return {dt, a.shape};
    case OpKind::ConvBackwardWeight:  // (x, dy) -> w
      if (conv_out_shape(op, v, a, v[0].shape(), a.shape) != v[1].shape()) {
        fail_value(op, v, "the gradient's shape does not match a weight of " + shape_str(a.shape));
      }
      return {dt, a.shape};
    default: break;
  }
  fail_value(op, v, "not a convolution op");
}

// The pooled shape of `x`: its leading dims kept, each spatial dim windowed.
Shape pool_out_shape(OpKind op, const std::vector<Value>& v, const PoolAttrs& a, const Shape& x) {
  const size_t sp = a.kernel.size();
  check_window_attrs(op, v, sp, a.stride, a.padding, a.dilation);
  if (x.size() < sp + 1 || x.size() > sp + 2) {
    fail_value(op, v, "expects an input of rank " + std::to_string(sp + 1) + " or " +
                          std::to_string(sp + 2) + ", got " + shape_str(x));
  }
  Shape out(x.begin(), x.end() - static_cast<int64_t>(sp));
  for (size_t i = 0; i < sp; ++i) {
    if (a.kernel[i] <= 0) fail_value(op, v, "kernel size must be positive, got " + ints_str(a.kernel));
    if (a.padding[i] * 2 > a.kernel[i]) {
      fail_value(op, v, "pad should be at most half of the kernel size, got padding " +
                            ints_str(a.padding) + " and kernel " + ints_str(a.kernel));
    }
    int64_t in = x[x.size() - sp + i];
    int64_t o = window_out(in, a.kernel[i], a.stride[i], a.padding[i], a.dilation[i], a.ceil_mode);
    if (o < 1) {
      fail_value(op, v, "the output would be empty: input " + shape_str(x) + ", kernel " +
                            ints_str(a.kernel));
    }
    out.push_back(o);
  }
  return out;
}

NodeType infer_pool(OpKind op, const std::vector<Value>& v, const PoolAttrs& a) {
  DType dt = v[0].dtype();
  switch (op) {
    case OpKind::MaxPool: {
      Shape out = pool_out_shape(op, v, a, v[0].shape());
      return {{dt, out}, {{DType::Int64, out}}};
    }
    case OpKind::AvgPool: return {{dt, pool_out_shape(op, v, a, v[0].shape())}, {}};
    case OpKind::AvgPoolBackward:
      if (pool_out_shape(op, v, a, a.shape) != v[0].shape()) {
        fail_value(op, v, "the gradient's shape does not match an input of " + shape_str(a.shape));
      }
      return {{dt, a.shape}, {}};
    default: break;
  }
  fail_value(op, v, "not a pooling op");
}

OutputType infer_by_class(OpKind op, const std::vector<Value>& v, const Attrs& a) {
  switch (op_info(op).cls) {
    case OpClass::Leaf: break;
    case OpClass::Random:
      if (v[0].dtype() != DType::Int64 || !v[0].shape().empty()) fail_type(op, v, "key must be int64 []");
      if (op == OpKind::RngAdvance) return {DType::Int64, {}};
      {
        const auto& r = std::get<RandomAttrs>(a);
        if (!is_floating(r.dtype)) fail_type(op, v, "random values need a floating dtype");
        return {r.dtype, r.shape};
      }
    case OpClass::Unary: return {v[0].dtype(), v[0].shape()};
    case OpClass::Binary:
    case OpClass::Compare:
      require_same_dtype(op, v, 0);
      return {v[0].dtype(), broadcast_all(op, v)};
    case OpClass::Ternary:
      if (v[0].dtype() != DType::Bool) fail_type(op, v, "condition must be bool");
      require_same_dtype(op, v, 1);
      return {v[1].dtype(), broadcast_all(op, v)};
    case OpClass::Reduction: return infer_reduction(op, v, std::get<ReduceAttrs>(a));
    case OpClass::Library: return infer_matmul(v);
    case OpClass::Movement: return infer_movement(op, v, a);
    case OpClass::Index: return infer_index(op, v, std::get<DimAttrs>(a));
    case OpClass::Conv: return infer_conv(op, v, std::get<ConvAttrs>(a));
    case OpClass::Scan: {  // the input's shape; a 0-d input scans as one element along dim 0
      const int64_t dim = std::get<ScanAttrs>(a).dim;
      const int64_t rank = static_cast<int64_t>(v[0].shape().size());
      if (dim < 0 || dim >= std::max<int64_t>(rank, 1)) fail_value(op, v, "scan dim out of range");
      return {v[0].dtype(), v[0].shape()};
    }
    case OpClass::Collective: return infer_collective(op, v, std::get<CollectiveAttrs>(a));
    case OpClass::Sort:
    case OpClass::Pool: break;  // may have several outputs: infer_output
  }
  fail_value(op, v, "has no shape rule");
}

}  // namespace

NodeType infer_output(OpKind op, const std::vector<Value>& v, const Attrs& a) {
  require_arity(op, v);
  check_operand_dtypes(op, v);
  if (op_info(op).cls == OpClass::Sort) return infer_sort(op, v, std::get<SortAttrs>(a));
  if (op_info(op).cls == OpClass::Pool) return infer_pool(op, v, std::get<PoolAttrs>(a));
  NodeType type{infer_by_class(op, v, a), {}};
  OutputType& out = type.out;
  switch (op_info(op).result) {
    case ResultDType::Same: break;
    case ResultDType::Bool: out.dtype = DType::Bool; break;
    case ResultDType::Int64: out.dtype = DType::Int64; break;
    case ResultDType::Attr:
      if (const auto* c = std::get_if<DTypeAttrs>(&a)) out.dtype = c->dtype;
      break;  // random ops set theirs above
  }
  return type;
}

namespace {
LruCache<Hash128, NodeType, Hash128Hasher>& shape_cache() {
  static auto* c = new LruCache<Hash128, NodeType, Hash128Hasher>(
      static_cast<size_t>(config().ir_shape_cache_size));
  return *c;
}
}  // namespace

NodeType cached_infer_output(const Hash128& dag_hash, OpKind op, const std::vector<Value>& v,
                             const Attrs& a) {
  auto& cache = shape_cache();
  NodeType hit;
  if (cache.get_copy(dag_hash, &hit)) return hit;
  auto type = std::make_shared<NodeType>(infer_output(op, v, a));
  // Every IR value fits the size limit (core/shape.h), whichever op grew it.
  const std::string what = std::string(op_name(op)) + " (operands: " + describe(v) + ")";
  check_tensor_size(what, type->out.shape, type->out.dtype);
  for (const OutputType& o : type->extra) check_tensor_size(what, o.shape, o.dtype);
  cache.add(dag_hash, type);
  return *type;
}

void resize_shape_cache(size_t n) { shape_cache().resize(n); }
size_t shape_cache_size() { return shape_cache().size(); }

}  // namespace lz::ir
