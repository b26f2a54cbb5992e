// Shape and movement ops. view, squeeze, unsqueeze, transpose, permute, expand, slice and select
// make views (DESIGN.md section 2): they share the base's data, and in-place updates through them
// write through. reshape and flatten make views where PyTorch's strides allow one and copies
// elsewhere (tensor/view_layout.h); view refuses those shapes. cat, stack and contiguous make new
// tensors.
#include <algorithm>

#include "lazuli/autocast.h"
#include "ops/frontend.h"

namespace lz {
using frontend::desc;
using frontend::node;
using frontend::wrap;
using ir::OpKind;

namespace {

// Records the view op once against the base's current value (this validates it and gives the
// shape), then makes a view tensor over x.
Tensor make_view(const Tensor& x, OpKind op, ir::Attrs attrs, const char* name) {
  ir::Value in = frontend::value_of(x, name);
  ir::Value out = node(op, {in}, attrs);
  return Tensor(internal::TensorImpl::make_view(x.impl(), {op, std::move(attrs), x.shape()},
                                                out.dtype(), out.shape()));
}

}  // namespace

namespace {

// The shape `shape` (one -1 inferred) names for x's elements; errors name `op`.
Shape target_shape(const Tensor& x, const IntList& shape, const char* op) {
  if (!x.defined()) throw ValueError(std::string(op) + ": got an undefined tensor");
  Shape out = shape;
  int64_t infer = -1, known = 1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      if (infer >= 0) throw ValueError(desc(op, x) + ": only one dimension can be -1, got " + shape_str(shape));
      infer = static_cast<int64_t>(i);
    } else if (out[i] < 0) {
      throw ValueError(desc(op, x) + ": invalid size in " + shape_str(shape));
    } else if (known >= 0 && __builtin_mul_overflow(known, out[i], &known)) {
      known = -1;  // the sizes multiply past int64: no tensor has that many elements
    }
  }
  if (known < 0) {
    throw ValueError(desc(op, x) + ": cannot reshape " + std::to_string(x.numel()) +
                     " elements to " + shape_str(shape) + " (its sizes multiply past int64)");
  }
  if (infer >= 0) {
    if (known == 0 || x.numel() % known != 0) {
      throw ValueError(desc(op, x) + ": cannot reshape to " + shape_str(shape));
    }
    out[infer] = x.numel() / known;
  }
  if (numel_or_overflow(out) != x.numel()) {
    throw ValueError(desc(op, x) + ": cannot reshape " + std::to_string(x.numel()) +
                     " elements to " + shape_str(shape));
  }
  return out;
}

// Whether x's strides can express `out` (always, for a tensor that is not a view).
bool viewable_as(const Tensor& x, const Shape& out) {
  return !x.impl()->is_view() ||
         internal::reshape_strides(x.shape(), x.impl()->strides(), out).has_value();
}

}  // namespace

Tensor reshape(const Tensor& x, const IntList& shape) {
  Shape out = target_shape(x, shape, "reshape");
  ir::ShapeAttrs a{out};
  if (viewable_as(x, out)) return make_view(x, OpKind::Reshape, a, "reshape");
  // As PyTorch: where no view can express the shape (a transpose flattened), a copy, so writes
  // to it never reach x (and writes to x never reach it).
  return wrap(node(OpKind::Reshape, {frontend::value_of(x, "reshape")}, a));
}

Tensor view(const Tensor& x, const IntList& shape) {
  Shape out = target_shape(x, shape, "view");
  if (!viewable_as(x, out)) {
    throw Error(desc("view", x) + " as " + shape_str(out) + ": view size is not compatible with "
                "input tensor's size and stride (at least one dimension spans across two "
                "contiguous subspaces); use .reshape(...) instead, which copies here");
  }
  return make_view(x, OpKind::Reshape, ir::ShapeAttrs{out}, "view");
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  if (!x.defined()) throw ValueError("flatten: got an undefined tensor");
  if (x.dim() == 0) return reshape(x, {1});
  int64_t s = wrap_dim(start_dim, x.dim(), "flatten"), e = wrap_dim(end_dim, x.dim(), "flatten");
  if (s > e) throw ValueError(desc("flatten", x) + ": start_dim must not come after end_dim");
  Shape out(x.shape().begin(), x.shape().begin() + s);
  int64_t n = 1;
  for (int64_t i = s; i <= e; ++i) n *= x.shape()[i];
  out.push_back(n);
  out.insert(out.end(), x.shape().begin() + e + 1, x.shape().end());
  return reshape(x, out);
}

Tensor squeeze(const Tensor& x, std::optional<int64_t> dim) {
  if (!x.defined()) throw ValueError("squeeze: got an undefined tensor");
  Shape out;
  if (dim) {
    int64_t d = wrap_dim(*dim, x.dim(), "squeeze");
    for (int64_t i = 0; i < x.dim(); ++i) {
      if (i != d || x.shape()[i] != 1) out.push_back(x.shape()[i]);
    }
  } else {
    for (int64_t s : x.shape()) if (s != 1) out.push_back(s);
  }
  return reshape(x, out);
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  if (!x.defined()) throw ValueError("unsqueeze: got an undefined tensor");
  int64_t d = wrap_dim(dim, x.dim() + 1, "unsqueeze");
  Shape out = x.shape();
  out.insert(out.begin() + d, 1);
  return reshape(x, out);
}

Tensor permute(const Tensor& x, const IntList& dims) {
  if (!x.defined()) throw ValueError("permute: got an undefined tensor");
  if (static_cast<int64_t>(dims.size()) != x.dim()) {
    throw ValueError(desc("permute", x) + ": needs " + std::to_string(x.dim()) + " dims, got " + shape_str(dims));
  }
  ir::PermuteAttrs a;
  for (int64_t d : dims) a.perm.push_back(wrap_dim(d, x.dim(), "permute"));
  std::vector<int64_t> sorted = a.perm;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] != static_cast<int64_t>(i)) throw ValueError(desc("permute", x) + ": " + shape_str(dims) + " is not a permutation");
  }
  return make_view(x, OpKind::Permute, a, "permute");
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  if (!x.defined()) throw ValueError("transpose: got an undefined tensor");
  if (x.dim() == 0) {
    wrap_dim(dim0, 0, "transpose");
    wrap_dim(dim1, 0, "transpose");
    return reshape(x, {});
  }
  IntList p(x.dim());
  for (int64_t i = 0; i < x.dim(); ++i) p[i] = i;
  std::swap(p[wrap_dim(dim0, x.dim(), "transpose")], p[wrap_dim(dim1, x.dim(), "transpose")]);
  return permute(x, p);
}

Tensor expand(const Tensor& x, const IntList& sizes) {
  if (!x.defined()) throw ValueError("expand: got an undefined tensor");
  if (sizes.size() < x.shape().size()) {
    throw ValueError(desc("expand", x) + ": cannot expand to fewer dims " + shape_str(sizes));
  }
  size_t lead = sizes.size() - x.shape().size();
  Shape in(lead, 1), out(sizes.size());
  in.insert(in.end(), x.shape().begin(), x.shape().end());
  for (size_t i = 0; i < sizes.size(); ++i) {
    out[i] = sizes[i] == -1 ? (i < lead ? -1 : in[i]) : sizes[i];
    if (out[i] < 0 || (in[i] != 1 && in[i] != out[i])) {
      throw ValueError(desc("expand", x) + ": cannot expand to " + shape_str(sizes));
    }
  }
  // A view, but still a value of that size: it must fit the size limit (core/shape.h).
  check_tensor_size(desc("expand", x) + " to " + shape_str(out), out, x.dtype());
  Tensor base = lead ? reshape(x, in) : x;
  return make_view(base, OpKind::Expand, ir::ShapeAttrs{out}, "expand");
}

Tensor broadcast_to(const Tensor& x, const IntList& shape) { return expand(x, shape); }

Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
             int64_t step) {
  if (!x.defined()) throw ValueError("slice: got an undefined tensor");
  if (x.dim() == 0) throw IndexError(desc("slice", x) + ": cannot slice a 0-d tensor");
  int64_t d = wrap_dim(dim, x.dim(), "slice");
  if (step <= 0) throw ValueError(desc("slice", x) + ": step must be positive, got " + std::to_string(step));
  int64_t n = x.shape()[d];
  auto norm = [n](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + n : v, 0, n); };
  int64_t s = start ? norm(*start) : 0;
  int64_t e = end ? norm(*end) : n;
  if (e < s) e = s;
  // A step past the dim picks one element, like a step of n, and keeps the length's rounding
  // (end - start + step - 1) from overflowing.
  step = std::min(step, std::max<int64_t>(n, 1));
  return make_view(x, OpKind::Slice, ir::SliceAttrs{d, s, e, step}, "slice");
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  if (!x.defined()) throw ValueError("select: got an undefined tensor");
  if (x.dim() == 0) throw IndexError(desc("select", x) + ": cannot index a 0-d tensor");
  int64_t d = wrap_dim(dim, x.dim(), "select");
  int64_t n = x.shape()[d];
  if (index < -n || index >= n) {
    throw IndexError(desc("select", x) + ": index " + std::to_string(index) +
                     " is out of bounds for dim " + std::to_string(d) + " with size " + std::to_string(n));
  }
  int64_t i = index < 0 ? index + n : index;
  Tensor s = slice(x, d, i, i + 1, 1);
  Shape out = x.shape();
  out.erase(out.begin() + d);
  return reshape(s, out);
}

Tensor contiguous(const Tensor& x) {
  // A new tensor holding the same value: not a view, so in-place updates do not write through.
  return wrap(frontend::value_of(x, "contiguous"));
}

Tensor cat(const std::vector<Tensor>& ts, int64_t dim) {
  if (ts.empty()) throw ValueError("cat: expects a non-empty list of tensors");
  std::vector<Operand> ops(ts.begin(), ts.end());
  for (const Tensor& t : ts) if (!t.defined()) throw ValueError("cat: got an undefined tensor");
  DType dt = result_type(ops);
  // As PyTorch: a 1-D empty tensor among tensors of another shape is skipped (it still counts for
  // the result's dtype), a legacy rule code that starts from torch.empty(0) relies on.
  auto legacy_empty = [](const Tensor& t) { return t.dim() == 1 && t.shape()[0] == 0; };
  std::vector<Tensor> kept;
  for (const Tensor& t : ts) {
    if (!legacy_empty(t)) kept.push_back(t);
  }
  if (kept.empty()) kept.push_back(ts[0]);
  const Tensor& first = kept[0];
  int64_t rank = first.dim();
  if (rank == 0) throw ValueError("cat: zero-dimensional tensors cannot be concatenated");
  int64_t d = wrap_dim(dim, rank, "cat");
  std::vector<ir::Value> vals;
  Shape out = first.shape();
  out[d] = 0;
  for (const Tensor& t : kept) {
    if (t.dim() != rank) {
      throw ValueError(frontend::describe("cat", ops) + ": all tensors must have the same rank");
    }
    for (int64_t i = 0; i < rank; ++i) {
      if (i != d && t.shape()[i] != first.shape()[i]) {
        throw ValueError(frontend::describe("cat", ops) + ": sizes must match except in dim " + std::to_string(d));
      }
    }
    if (__builtin_add_overflow(out[d], t.shape()[d], &out[d])) {
      throw OutOfMemoryError(frontend::describe("cat", ops) + ": the sizes in dim " +
                             std::to_string(d) + " add up past int64");
    }
  }
  check_tensor_size(frontend::describe("cat", ops), out, dt);
  for (const Tensor& t : kept) vals.push_back(frontend::cast(frontend::value_of(t, "cat"), dt));
  if (vals.size() == 1) return wrap(vals[0]);
  return wrap(node(OpKind::Cat, std::move(vals), ir::DimAttrs{d}));
}

Tensor stack(const std::vector<Tensor>& ts, int64_t dim) {
  if (ts.empty()) throw ValueError("stack: expects a non-empty list of tensors");
  for (const Tensor& t : ts) {
    if (!t.defined()) throw ValueError("stack: got an undefined tensor");
    if (t.shape() != ts[0].shape()) {
      std::vector<Operand> ops(ts.begin(), ts.end());
      throw ValueError(frontend::describe("stack", ops) + ": all tensors must have the same shape");
    }
  }
  int64_t d = wrap_dim(dim, ts[0].dim() + 1, "stack");
  std::vector<Tensor> u;
  for (const Tensor& t : ts) u.push_back(unsqueeze(t, d));
  return cat(u, d);
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  if (!x.defined()) throw ValueError("split: got an undefined tensor");
  int64_t d = wrap_dim(dim, x.dim(), "split");
  if (split_size <= 0) throw ValueError(desc("split", x) + ": split_size must be positive");
  int64_t n = x.shape()[d];
  std::vector<Tensor> out;
  for (int64_t s = 0; s < n || (n == 0 && out.empty()); s += split_size) {
    out.push_back(slice(x, d, s, std::min(n, s + split_size)));
    if (n == 0) break;
  }
  return out;
}

std::vector<Tensor> split(const Tensor& x, const IntList& sizes, int64_t dim) {
  if (!x.defined()) throw ValueError("split: got an undefined tensor");
  int64_t d = wrap_dim(dim, x.dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) throw ValueError(desc("split", x) + ": sizes must be non-negative");
    if (__builtin_add_overflow(total, s, &total)) total = -1;  // never equals the dim
    if (total < 0) break;
  }
  if (total != x.shape()[d]) {
    throw ValueError(desc("split", x) + ": sizes " + shape_str(sizes) + " do not sum to " +
                     std::to_string(x.shape()[d]));
  }
  std::vector<Tensor> out;
  int64_t at = 0;
  for (int64_t s : sizes) {
    out.push_back(slice(x, d, at, at + s));
    at += s;
  }
  return out;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  if (!x.defined()) throw ValueError("chunk: got an undefined tensor");
  if (chunks <= 0) throw ValueError(desc("chunk", x) + ": chunks must be positive");
  int64_t d = wrap_dim(dim, x.dim(), "chunk");
  int64_t n = x.shape()[d];
  return split(x, std::max<int64_t>(1, n / chunks + (n % chunks != 0)), d);  // ceil, no overflow
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) throw ValueError("matmul: got an undefined tensor");
  std::vector<Operand> ops{a, b};
  if (a.dim() == 0 || b.dim() == 0) {
    throw ValueError(frontend::describe("matmul", ops) + ": both arguments need at least 1 dimension");
  }
  // In an autocast region float32 operands become the region's dtype (frontend.cpp), so a float32
  // input meets bfloat16 weights there, as in PyTorch.
  auto amp = [](DType t) {
    const AutocastState s = autocast_state();
    return s.enabled && t == DType::Float32 ? s.dtype : t;
  };
  if (amp(a.dtype()) != amp(b.dtype())) {
    throw TypeError(frontend::describe("matmul", ops) + ": expected both operands to have the same dtype");
  }
  if (a.dtype() == DType::Bool) throw TypeError(frontend::describe("matmul", ops) + ": bool is not supported");
  int64_t ka = a.shape().back(), kb = b.dim() == 1 ? b.shape()[0] : b.shape()[b.dim() - 2];
  if (ka != kb) {
    throw ValueError(frontend::describe("matmul", ops) + ": inner dimensions differ (" +
                     std::to_string(ka) + " vs " + std::to_string(kb) + ")");
  }
  ir::Value va = frontend::value_of(a, "matmul"), vb = frontend::value_of(b, "matmul");
  auto reshape_v = [](ir::Value v, Shape s) {
    return node(OpKind::Reshape, {v}, ir::ShapeAttrs{std::move(s)});
  };
  if (a.dim() == 1) va = reshape_v(va, {1, a.shape()[0]});
  if (b.dim() == 1) vb = reshape_v(vb, {b.shape()[0], 1});
  Shape batch;
  try {
    batch = broadcast_shapes(Shape(va.shape().begin(), va.shape().end() - 2),
                             Shape(vb.shape().begin(), vb.shape().end() - 2), "matmul");
  } catch (const ValueError& e) {
    throw ValueError(frontend::describe("matmul", ops) + ": batch dimensions are not broadcastable");
  }
  batch.push_back(va.shape()[va.shape().size() - 2]);
  batch.push_back(vb.shape().back());
  check_tensor_size(frontend::describe("matmul", ops), batch, a.dtype());
  ir::Value out = node(OpKind::MatMul, {va, vb});
  if (a.dim() == 1 || b.dim() == 1) {
    Shape s = out.shape();
    if (b.dim() == 1) s.erase(s.end() - 1);
    if (a.dim() == 1) s.erase(s.end() - (b.dim() == 1 ? 1 : 2));
    out = reshape_v(out, s);
  }
  return wrap(out);
}

}  // namespace lz
