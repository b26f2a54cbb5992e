// Reference kernels for data movement (reshape, permute, expand, slice, cat, slice_scatter) and
// indexing with tensors (index_select, gather, scatter_add, index_copy). Movement is a strided
// byte copy, independent of the dtype; indexing checks every index value before writing.
#include <cstring>
#include <string>

#include "backend/interp/kernels_impl.h"

namespace lz::interp {
namespace {

using ir::OpKind;

const char* bytes_of(const ConstArray& a) { return static_cast<const char*>(a.data); }
char* bytes_of(MutArray a) { return static_cast<char*>(a.data); }

// Copies the elements of a `shape`-sized view: src and dst are read and written at their own
// element strides, starting from the given element offsets.
void copy_strided(size_t elem, const Shape& shape, const char* src,
                  std::vector<int64_t> src_strides, int64_t src_start, char* dst,
                  std::vector<int64_t> dst_strides, int64_t dst_start) {
  StridedWalk<2> walk(shape, {std::move(src_strides), std::move(dst_strides)},
                      {src_start, dst_start});
  int64_t n = numel(shape);
  for (int64_t i = 0; i < n; ++i, walk.next()) {
    std::memcpy(dst + walk.offset(1) * static_cast<int64_t>(elem),
                src + walk.offset(0) * static_cast<int64_t>(elem), elem);
  }
}

void copy_all(const ConstArray& x, MutArray out) {
  size_t bytes = static_cast<size_t>(numel(*x.shape)) * dtype_size(x.dtype);
  if (bytes) std::memcpy(out.data, x.data, bytes);
}

// Writes src (shaped like the slice) into out at slice ints=[dim, start, end, step].
void write_slice(const ir::SliceAttrs& s, const ConstArray& src, MutArray out) {
  size_t dim = static_cast<size_t>(s.dim);
  std::vector<int64_t> dst = contiguous_strides(*out.shape);
  int64_t start = s.start * dst[dim];
  dst[dim] *= s.step;
  copy_strided(dtype_size(src.dtype), *src.shape, bytes_of(src), contiguous_strides(*src.shape), 0,
               bytes_of(out), std::move(dst), start);
}

// ---- indexing ----

// A rank-0 operand of an index op behaves as shape [1], as in PyTorch.
Shape as_rank1(const Shape& s) { return s.empty() ? Shape{1} : s; }

int64_t index_at(const ConstArray& index, int64_t i) {
  if (index.dtype == DType::Int32) return data_of<int32_t>(index)[i];
  return data_of<int64_t>(index)[i];
}

// Every value of `index` must lie in [0, size); PyTorch's index ops take no negative indices.
void check_indices(OpKind op, const ConstArray& index, int64_t dim, int64_t size) {
  int64_t n = numel(*index.shape);
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = index_at(index, i);
    if (v < 0 || v >= size) {
      throw IndexError(std::string(ir::op_name(op)) + ": index " + std::to_string(v) +
                       " is out of range for dim " + std::to_string(dim) + " of size " +
                       std::to_string(size));
    }
  }
}

// Sizes of the dims before `dim`, at `dim`, and after it.
struct Split {
  int64_t outer = 1, size = 1, inner = 1;
};
Split split_at(const Shape& s, size_t dim) {
  Split r;
  for (size_t d = 0; d < s.size(); ++d) {
    if (d < dim)
      r.outer *= s[d];
    else if (d == dim)
      r.size = s[d];
    else
      r.inner *= s[d];
  }
  return r;
}

// out[o, j, i] = x[o, index[j], i]
void index_select(const ConstArray& x, const ConstArray& index, size_t dim, MutArray out) {
  Split s = split_at(as_rank1(*x.shape), dim);
  int64_t n = numel(*index.shape);
  size_t elem = dtype_size(x.dtype);
  size_t row = static_cast<size_t>(s.inner) * elem;
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t j = 0; j < n; ++j) {
      const char* from = bytes_of(x) + ((o * s.size + index_at(index, j)) * s.inner) * elem;
      if (row) std::memcpy(bytes_of(out) + ((o * n + j) * s.inner) * elem, from, row);
    }
  }
}

// out = base; out[o, index[j], i] = src[o, j, i]. Repeated indices: the last write wins.
void index_copy(const ConstArray& base, const ConstArray& index, const ConstArray& src, size_t dim,
                MutArray out) {
  copy_all(base, out);
  Split s = split_at(as_rank1(*base.shape), dim);
  int64_t n = numel(*index.shape);
  size_t elem = dtype_size(base.dtype);
  size_t row = static_cast<size_t>(s.inner) * elem;
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t j = 0; j < n; ++j) {
      char* to = bytes_of(out) + ((o * s.size + index_at(index, j)) * s.inner) * elem;
      if (row) std::memcpy(to, bytes_of(src) + ((o * n + j) * s.inner) * elem, row);
    }
  }
}

// out[p] = x[p with p[dim] replaced by index[p]], over the positions p of the index.
void gather(const ConstArray& x, const ConstArray& index, size_t dim, MutArray out) {
  Shape idx_shape = as_rank1(*index.shape);
  std::vector<int64_t> xs = contiguous_strides(as_rank1(*x.shape));
  int64_t dim_stride = xs[dim];
  xs[dim] = 0;
  StridedWalk<1> walk(idx_shape, {std::move(xs)});
  size_t elem = dtype_size(x.dtype);
  int64_t n = numel(idx_shape);
  for (int64_t i = 0; i < n; ++i, walk.next()) {
    int64_t from = walk.offset(0) + index_at(index, i) * dim_stride;
    std::memcpy(bytes_of(out) + i * static_cast<int64_t>(elem),
                bytes_of(x) + from * static_cast<int64_t>(elem), elem);
  }
}

// out = base; out[p with p[dim] replaced by index[p]] += src[p], over the positions p of the
// index, in row-major order (deterministic for repeated indices).
void scatter_add(const ConstArray& base, const ConstArray& index, const ConstArray& src, size_t dim,
                 MutArray out) {
  copy_all(base, out);
  Shape idx_shape = as_rank1(*index.shape);
  std::vector<int64_t> bs = contiguous_strides(as_rank1(*base.shape));
  int64_t dim_stride = bs[dim];
  bs[dim] = 0;
  StridedWalk<2> walk(idx_shape, {contiguous_strides(as_rank1(*src.shape)), std::move(bs)});
  int64_t n = numel(idx_shape);
  dispatch(base.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* ps = data_of<T>(src);
    T* o = data_of<T>(out);
    for (int64_t i = 0; i < n; ++i, walk.next()) {
      T& target = o[walk.offset(1) + index_at(index, i) * dim_stride];
      target = add_values(target, ps[walk.offset(0)]);
    }
  });
}

}  // namespace

void run_movement(OpKind op, const ir::Attrs& attrs, const std::vector<ConstArray>& inputs,
                  MutArray out) {
  const ConstArray& x = inputs[0];
  const Shape& in = *x.shape;
  size_t elem = dtype_size(x.dtype);
  switch (op) {
    case OpKind::Reshape: return copy_all(x, out);  // row-major order is unchanged
    case OpKind::Permute: {
      std::vector<int64_t> in_strides = contiguous_strides(in);
      std::vector<int64_t> src(in.size());
      const std::vector<int64_t>& perm = std::get<ir::PermuteAttrs>(attrs).perm;
      for (size_t i = 0; i < in.size(); ++i) src[i] = in_strides[static_cast<size_t>(perm[i])];
      return copy_strided(elem, *out.shape, bytes_of(x), std::move(src), 0, bytes_of(out),
                          contiguous_strides(*out.shape), 0);
    }
    case OpKind::Expand:
      return copy_strided(elem, *out.shape, bytes_of(x), broadcast_strides(in, *out.shape), 0,
                          bytes_of(out), contiguous_strides(*out.shape), 0);
    case OpKind::Slice: {
      const auto& sl = std::get<ir::SliceAttrs>(attrs);
      size_t dim = static_cast<size_t>(sl.dim);
      std::vector<int64_t> src = contiguous_strides(in);
      int64_t start = sl.start * src[dim];
      src[dim] *= sl.step;
      return copy_strided(elem, *out.shape, bytes_of(x), std::move(src), start, bytes_of(out),
                          contiguous_strides(*out.shape), 0);
    }
    case OpKind::Cat: {
      // Each input lands in the output's strides, shifted along dim by the sizes before it.
      size_t dim = static_cast<size_t>(std::get<ir::DimAttrs>(attrs).dim);
      std::vector<int64_t> dst = contiguous_strides(*out.shape);
      int64_t at = 0;
      for (const ConstArray& part : inputs) {
        copy_strided(elem, *part.shape, bytes_of(part), contiguous_strides(*part.shape), 0,
                     bytes_of(out), dst, at * dst[dim]);
        at += (*part.shape)[dim];
      }
      return;
    }
    case OpKind::SliceScatter: {
      copy_all(x, out);
      return write_slice(std::get<ir::SliceAttrs>(attrs), inputs[1], out);
    }
    default: break;
  }
  throw Error("interp: " + std::string(ir::op_name(op)) + " is not a movement op");
}

void run_index(OpKind op, const ir::Attrs& attrs, const std::vector<ConstArray>& inputs,
               MutArray out) {
  const ConstArray& x = inputs[0];
  const ConstArray& index = inputs[1];
  const int64_t d = std::get<ir::DimAttrs>(attrs).dim;
  size_t dim = static_cast<size_t>(d);
  check_indices(op, index, d, as_rank1(*x.shape)[dim]);
  // A rank-0 operand has one slot, so a 1-D index must name exactly one (as PyTorch requires);
  // shape inference cannot see this, as the output shape ignores the index length there.
  bool one_d = op == OpKind::IndexSelect || op == OpKind::IndexCopy;
  if (one_d && x.shape->empty() && numel(*index.shape) != 1) {
    throw IndexError(std::string(ir::op_name(op)) + ": index of a scalar must have 1 value, got " +
                     std::to_string(numel(*index.shape)));
  }
  switch (op) {
    case OpKind::IndexSelect: return index_select(x, index, dim, out);
    case OpKind::Gather: return gather(x, index, dim, out);
    case OpKind::ScatterAdd: return scatter_add(x, index, inputs[2], dim, out);
    case OpKind::IndexCopy: return index_copy(x, index, inputs[2], dim, out);
    default: break;
  }
  throw Error("interp: " + std::string(ir::op_name(op)) + " is not an index op");
}

}  // namespace lz::interp
