// Table entries: indexing with tensors (index, gather, scatter, embedding) (aten/table.h).
//
// Lazuli's index ops take int64 indices; negative ones count from the end only where eager's
// op allows them (index, index_put).
#include <algorithm>

#include "aten/entries.h"
#include "lazuli/indexing.h"
#include "lazuli/nn.h"

namespace lz::aten {
namespace {

using indexing::TensorIndex;

// An index tensor as int64; with `size`, negative indices counted from the end of a dim of it.
Tensor as_index(const Tensor& idx, std::optional<int64_t> size = std::nullopt) {
  Tensor i = idx.dtype() == DType::Int64 ? idx : idx.to(DType::Int64);
  if (size) i = where(lt(i, 0), add(i, *size), i);
  return i;
}

// x cut to `shape` on every dim but `dim` where `shape` is shorter: the part of x that gather
// and scatter_add read (eager's index may be smaller than its tensor in any dim).
Tensor cut_to(Tensor x, const Shape& shape, std::optional<int64_t> dim = std::nullopt) {
  int64_t rank = std::min(x.dim(), static_cast<int64_t>(shape.size()));
  for (int64_t d = 0; d < rank; ++d) {
    if (d != dim && shape[d] < x.shape()[d]) x = slice(x, d, 0, shape[d]);
  }
  return x;
}

// ---- gather and scatter -------------------------------------------------------------------------

// An index of a dtype eager refuses (a float index: eager takes int32 and int64) is refused too,
// so the fallback raises eager's error instead of the lowering truncating the index.
std::optional<std::string> index_dtype_when(const Arg& index) {
  DType it = dtype_of(index);
  if (!kInts.has(it)) return "index dtype " + std::string(dtype_name(it));
  return std::nullopt;
}

// index_select, gather, scatter and scatter_add: the index is argument 2.
std::optional<std::string> int_index_when(const Args& a) { return index_dtype_when(a[2]); }

std::optional<std::string> gather_when(const Args& a) {
  if (a[3].to_bool()) return "sparse_grad";
  return int_index_when(a);
}

Arg gather_entry(const Args& a, Call&) {
  const Tensor& x = a[0].tensor();
  const Tensor& index = a[2].tensor();
  if (x.dim() == 0) return broadcast_to(x, index.shape()).clone();
  int64_t dim = wrap(a[1].to_int(), x.dim());
  return gather(cut_to(x, index.shape(), dim), dim, as_index(index));
}

// Where scatter writes: true at every element some index names.
Tensor scatter_mask(const Tensor& x, int64_t dim, const Tensor& index) {
  if (index.numel() == 0) return zeros(x.shape(), DType::Bool);
  Tensor hits = scatter_add(zeros(x.shape(), DType::Int64), dim, as_index(index),
                            ones(index.shape(), DType::Int64));
  return gt(hits, 0);
}

Arg scatter_value_entry(const Args& a, Call&) {
  const Tensor& x = a[0].tensor();
  const Tensor& index = a[2].tensor();
  Operand value = cast(operand(a[3]), x.dtype());
  if (x.dim() == 0) {
    Tensor mask = reshape(scatter_mask(reshape(x, {1}), 0, reshape(index, {-1})), {});
    return where(mask, value, x);
  }
  return where(scatter_mask(x, wrap(a[1].to_int(), x.dim()), index), value, x);
}

Arg scatter_add_entry(const Args& a, Call&) {
  const Tensor& x = a[0].tensor();
  const Tensor& index = a[2].tensor();
  if (index.numel() == 0) return x.clone();
  if (x.dim() == 0) {  // a 0-d self takes a 1-element index and source (gather's gradient)
    Tensor one = scatter_add(reshape(x, {1}), 0, as_index(reshape(index, {-1})),
                             reshape(a[3].tensor(), {-1}).slice(0, 0, 1));
    return reshape(one, {});
  }
  int64_t dim = wrap(a[1].to_int(), x.dim());
  return scatter_add(x, dim, as_index(index), cut_to(a[3].tensor(), index.shape()));
}

// scatter.src and index_add take only a source of self's dtype and an integer index (eager raises
// otherwise).
std::optional<std::string> source_when(const Arg& self, const Arg& index, const Arg& source) {
  DType dt = dtype_of(self), st = dtype_of(source), it = dtype_of(index);
  if (!kInts.has(it)) return "index dtype " + std::string(dtype_name(it));
  if (st != dt) {
    return "source dtype " + std::string(dtype_name(st)) + ", self " + std::string(dtype_name(dt));
  }
  return std::nullopt;
}

// scatter's index and src have self's rank, a 0-d one counting as 1-d (eager raises otherwise).
std::optional<std::string> scatter_src_when(const Args& a) {
    if (auto r = source_when(a[0], a[2], a[3])) return r;
  auto rank = [](const Arg& t) { return std::max<int64_t>(t.tensor_dim(), 1); };
  for (const Arg* t : {&a[2], &a[3]}) {
    if (rank(*t) != rank(a[0])) {
      return std::string(t == &a[2] ? "index" : "src") + " of " + std::to_string(rank(*t)) +
             " dims for " + std::to_string(rank(a[0]));
    }
  }
  return std::nullopt;
}

// scatter.src as an index_copy into the flattened tensor: each index element's position in x
// (its own coordinates, the index value at `dim`) as a flat offset. Elements an index names twice
// get the last write along `dim`, as eager's CPU kernel (eager leaves which one unspecified). The
// mask's scatter_add checks the index values against x's dim (the flat offsets cannot).
Tensor scatter_src(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  const Shape& shape = index.shape();
  const int64_t rank = x.dim();
  Tensor offset;
  int64_t stride = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    Tensor term;
    if (d == dim) {
      term = as_index(index);
    } else {
      IntList at(static_cast<size_t>(rank), 1);
      at[d] = shape[d];
      term = reshape(arange(0, shape[d], 1, DType::Int64), at);
    }
    if (stride != 1) term = mul(term, stride);
    offset = offset.defined() ? add(offset, term) : term;
    stride *= x.shape()[d];
  }
  Tensor values = reshape(cut_to(src, shape), {-1});
  Tensor copied = index_copy(reshape(x, {-1}), 0, reshape(offset, {-1}), values);
  return where(scatter_mask(x, dim, index), reshape(copied, x.shape()), x);
}

Arg scatter_src_entry(const Args& a, Call&) {
  const Tensor& x = a[0].tensor();
  const Tensor& index = a[2].tensor();
  const Tensor& src = a[3].tensor();
  if (index.numel() == 0) return x.clone();
  auto one_d = [](const Tensor& t) { return t.dim() == 0 ? reshape(t, {1}) : t; };
  Tensor out = scatter_src(one_d(x), wrap(a[1].to_int(), x.dim()), one_d(index), one_d(src));
  return x.dim() == 0 ? reshape(out, {}) : out;
}

// ---- index and index_put ------------------------------------------------------------------------

std::optional<std::string> index_when(const Args& a) {
  bool any = false;
  for (const Arg& t : a[1].list()) {
    if (t.is_none()) continue;
    any = true;
    DType dt = dtype_of(t);
    if (!kInts.has(dt)) {
      return "a " + std::string(dtype_name(dt)) + " index (data-dependent shape)";
    }
  }
  if (!any) return "no index tensor";
  return std::nullopt;
}

std::optional<std::string> index_put_when(const Args& a) {
  if (std::optional<std::string> r = index_when(a)) return r;
  if (!a[3].to_bool()) return "accumulate=False (duplicate indices are unordered in eager)";
  return std::nullopt;
}

// aten's indices (None: a whole dim) as an indexing key, whose rules are PyTorch's: several
// index tensors broadcast together, their result dims in place when adjacent, else first.
std::vector<TensorIndex> key_of(const std::vector<Tensor>& indices) {
  std::vector<TensorIndex> key;
  for (const Tensor& t : indices) {
    if (t.defined()) {
      key.emplace_back(t);
    } else {
      key.emplace_back(indexing::Slice());
    }
  }
  return key;
}

// The position of the one index tensor, or -1 where there are several.
int64_t single_index(const std::vector<Tensor>& indices) {
  int64_t pos = -1;
  for (size_t i = 0; i < indices.size(); ++i) {
    if (!indices[i].defined()) continue;
    if (pos >= 0) return -1;
    pos = static_cast<int64_t>(i);
  }
  return pos;
}

// x's shape with dim `pos` replaced by `dims`.
IntList replaced(const Shape& x, int64_t pos, const Shape& dims) {
  IntList out(x.begin(), x.begin() + pos);
  out.insert(out.end(), dims.begin(), dims.end());
  out.insert(out.end(), x.begin() + pos + 1, x.end());
  return out;
}

// One index tensor is an index_select along its dim (no broadcasting of several to work out).
Arg index_entry(const Args& a, Call&) {
  const Tensor& x = a[0].tensor();
  std::vector<Tensor> indices = a[1].optional_tensors();
  int64_t pos = single_index(indices);
  if (pos < 0) return x.index(key_of(indices));
  const Tensor& idx = indices[pos];
  Tensor flat = reshape(as_index(idx, x.shape()[pos]), {-1});
  return reshape(index_select(x, pos, flat), replaced(x.shape(), pos, idx.shape()));
}

// x[indices] += values on a copy of x (accumulate on bool is "or": through int64 hit counts).
Tensor index_added(const Tensor& x, const std::vector<Tensor>& indices, const Tensor& values) {
  if (x.dtype() == DType::Bool) {
    Tensor hits = zeros(x.shape(), DType::Int64);
    hits.index_put_(key_of(indices), values.to(DType::Int64), /*accumulate=*/true);
    return logical_or(x, gt(hits, 0));
  }
  Tensor out = x.clone();
  out.index_put_(key_of(indices), cast(Operand(values), x.dtype()).tensor(), /*accumulate=*/true);
  return out;
}

// One index tensor is a scatter_add along its dim.
Arg index_put_entry(const Args& a, Call&) {
  const Tensor& x = a[0].tensor();
  std::vector<Tensor> indices = a[1].optional_tensors();
  const Tensor& values = a[2].tensor();
  int64_t pos = single_index(indices);
  if (pos < 0) return index_added(x, indices, values);
  const Tensor& idx = indices[pos];
  Tensor flat = reshape(as_index(idx, x.shape()[pos]), {-1});
  int64_t n = flat.numel();
  Tensor vals = broadcast_to(cast(Operand(values), x.dtype()).tensor(),
                             replaced(x.shape(), pos, idx.shape()));
  vals = reshape(vals, replaced(x.shape(), pos, {n}));
  if (n == 0) return x.clone();
  IntList shape(static_cast<size_t>(x.dim()), 1);
  shape[pos] = n;
  Tensor full_index = broadcast_to(reshape(flat, shape), vals.shape());
  if (x.dtype() == DType::Bool) {
    Tensor hits =
        scatter_add(zeros(x.shape(), DType::Int64), pos, full_index, vals.to(DType::Int64));
    return logical_or(x, gt(hits, 0));
  }
  return scatter_add(x, pos, full_index, vals);
}

// ---- index_add ---------------------------------------------------------------------------------

// index_add(self, dim, index, source, *, alpha): source's slices along dim added at the index's
// positions (repeated ones accumulate), as a scatter_add; alpha in self's dtype (2.5 adds twice on
// integers, as eager); on bool, "or".
std::optional<std::string> index_add_when(const Args& a) {
  if (auto r = source_when(a[0], a[2], a[3])) return r;
  if (a[2].tensor_dim() > 1) return "a " + std::to_string(a[2].tensor_dim()) + "-d index";
  return std::nullopt;
}

Arg index_add_entry(const Args& a, Call&) {
  const Tensor& self = a[0].tensor();
  Tensor index = reshape(as_index(a[2].tensor()), {-1});
  const int64_t n = index.numel();
  if (n == 0) return self.clone();
  Tensor x = self.dim() == 0 ? reshape(self, {1}) : self;
  const int64_t dim = wrap(a[1].to_int(), self.dim());
  Tensor source = reshape(a[3].tensor(), replaced(x.shape(), dim, {n}));
  IntList at(static_cast<size_t>(x.dim()), 1);
  at[dim] = n;
  Tensor full_index = broadcast_to(reshape(index, at), source.shape());
  const Operand alpha = cast(operand(a[4]), x.dtype());
  Tensor out;
  if (x.dtype() == DType::Bool) {
    if (alpha.scalar().to_double() == 0) return self.clone();
    Tensor hits =
        scatter_add(zeros(x.shape(), DType::Int64), dim, full_index, source.to(DType::Int64));
    out = logical_or(x, gt(hits, 0));
  } else {
    // alpha == 0 still multiplies: NaN sources give NaN, as eager.
    if (alpha.scalar().to_double() != 1.0) source = mul(source, alpha);
    out = scatter_add(x, dim, full_index, source);
  }
  return self.dim() == 0 ? reshape(out, {}) : out;
}

}  // namespace

void add_indexing(TableBuilder& b) {
  b.add({"aten.index_select.default"}, kAll, [](const Args& a, Call&) -> Arg {
    const Tensor& x = a[0].tensor();
    Tensor index = reshape(as_index(a[2].tensor()), {-1});
    if (x.dim() == 0) return reshape(index_select(reshape(x, {1}), 0, index), {});
    return index_select(x, a[1].to_int(), index);
  }, {.when = int_index_when});
  b.add({"aten.gather.default"}, kAll, gather_entry, {.when = gather_when});
  b.add({"aten.scatter.value"}, kAll, scatter_value_entry,
        {.when = int_index_when, .note = "every indexed element takes the value"});
  b.add({"aten.scatter.src"}, kAll, scatter_src_entry,
        {.when = scatter_src_when,
         .note = "an index repeated along dim: the last write (eager's is unspecified)"});
  b.add({"aten.scatter_add.default"}, kAll, scatter_add_entry, {.when = int_index_when});
  b.add({"aten.index_add.default"}, kAll, index_add_entry,
        {.when = index_add_when, .note = "repeated indices accumulate; on bool, logical or"});
  b.add({"aten.index.Tensor"}, kAll, index_entry,
        {.when = index_when, .note = "integer index tensors"});
  b.add({"aten.index_put.default"}, kAll, index_put_entry,
        {.when = index_put_when, .note = "integer index tensors, accumulate=True"});
  b.add({"aten.embedding.default"}, kAll,
        [](const Args& a, Call&) -> Arg { return nn::embedding(a[1].tensor(), a[0].tensor()); },
        {.when = [](const Args& a) { return index_dtype_when(a[1]); }});
}

}  // namespace lz::aten
