// Table entries: views, joins, creation, copies (aten/table.h).
//
// Functionalized graphs (aot_autograd, make_fx of a functionalized function) have no in-place or
// out= variants but copy_ of an updated input; views stay as view ops (view, permute, slice...)
// and become Lazuli's views or reshapes, which record no data movement until something reads them.
#include <algorithm>

#include "aten/entries.h"
#include "lazuli/nn.h"

namespace lz::aten {
namespace {

// A number argument converted to `dtype` (2.7 into int64 is 2), as full() takes it.
Scalar scalar_as(const Arg& value, DType dtype) { return cast(operand(value), dtype).scalar(); }

// A tensor converted to `dtype` (itself when it has it).
Tensor tensor_as(const Tensor& x, DType dtype) { return x.dtype() == dtype ? x : x.to(dtype); }

// ---- creation -----------------------------------------------------------------------------------

// The conditions shared by the creation ops and _to_copy: a Lazuli dtype, strided, on a device
// Lazuli computes for, not pinned. `at` is the position of dtype; layout, device and pin_memory
// follow it in every one of their schemas.
std::optional<std::string> factory_refused(const Args& a, size_t at) {
  if (std::optional<std::string> r = dtype_arg_refused(a[at])) return r;
  const Arg& layout = a[at + 1];
  if (!layout.is_none() && layout.text() != "torch.strided") return "layout " + layout.text();
  const Arg& device = a[at + 2];
  if (!device.is_none()) {
    const std::string& name = device.text();  // "cpu", "meta", "lazuli:0", "cuda:1"
    std::string type = name.substr(0, name.find(':'));
    if (type != "cpu" && type != "meta" && type != "lazuli") return "device " + name;
  }
  const Arg& pin = a[at + 3];
  if (!pin.is_none() && pin.to_bool()) return "pin_memory";
  return std::nullopt;
}

Condition factory_when(size_t at) {
  return [at](const Args& a) { return factory_refused(a, at); };
}

// full's dtype when none is given: the fill value's kind decides, as in eager.
DType fill_dtype(const Arg& value, const Arg& dtype) {
  if (!dtype.is_none()) return dtype.dtype();
  if (value.kind() == Arg::Kind::Bool) return DType::Bool;
  if (value.kind() == Arg::Kind::Int) return DType::Int64;
  return default_float_dtype();
}

Arg full_entry(const Args& a, Call&) {
  DType dt = fill_dtype(a[1], a[2]);
  return full(a[0].ints(), scalar_as(a[1], dt), dt);
}

// new_empty_strided(x, size, stride, dtype, layout, device, pin_memory): a fresh tensor whose
// values are unspecified; zeros (Lazuli's tensors have no strides of their own to give it).
Arg new_empty_strided_entry(const Args& a, Call&) {
  return zeros(a[1].ints(), dtype_or(a[3], a[0].tensor().dtype()));
}

Arg full_like_entry(const Args& a, Call&) {
  const Tensor& x = a[0].tensor();
  DType dt = dtype_or(a[2], x.dtype());
  return full(x.shape(), scalar_as(a[1], dt), dt);
}

// arange's dtype: the one given, else int64 when every bound is an integer (a bool counts as
// one, as in Python), else the default float dtype. `n` bounds start at position 0.
DType arange_dtype(const Args& a, size_t n) {
  const Arg& dtype = a[n];
  if (!dtype.is_none()) return dtype.dtype();
  for (size_t i = 0; i < n; ++i) {
    if (a[i].kind() == Arg::Kind::Double) return default_float_dtype();
  }
  return DType::Int64;
}

Condition arange_when(size_t n) {
  return [n](const Args& a) -> std::optional<std::string> {
    if (std::optional<std::string> r = factory_refused(a, n)) return r;
    if (arange_dtype(a, n) == DType::Bool) return "bool arange";
    return std::nullopt;
  };
}

// ---- views and reshapes -------------------------------------------------------------------------

// A view's shape with its -1 resolved (0 where the other sizes multiply to 0, as eager allows
// for an empty tensor, where a reshape's -1 would be ambiguous).
IntList resolve_shape(const Tensor& x, IntList shape) {
  auto minus = std::find(shape.begin(), shape.end(), -1);
  if (minus == shape.end()) return shape;
  int64_t known = 1;
  for (int64_t s : shape) {
    if (s != -1) known *= s;
  }
  *minus = known ? x.numel() / known : 0;
  return shape;
}

Arg view_entry(const Args& a, Call&) {
  const Tensor& x = a[0].tensor();
  return reshape(x, resolve_shape(x, a[1].ints()));
}

Arg expand_entry(const Args& a, Call&) {
  const Tensor& x = a[0].tensor();
  IntList size = a[1].ints();
  int64_t lead = static_cast<int64_t>(size.size()) - x.dim();
  for (int64_t i = std::max<int64_t>(lead, 0); i < static_cast<int64_t>(size.size()); ++i) {
    if (size[i] == -1) size[i] = x.shape()[i - lead];
  }
  return broadcast_to(x, size);
}

// x's shape without the dims of size 1 among `dims` (negative ones count from the end).
IntList squeezed(const Tensor& x, const IntList& dims) {
  IntList out;
  for (int64_t i = 0; i < x.dim(); ++i) {
    bool named =
        std::any_of(dims.begin(), dims.end(), [&](int64_t d) { return wrap(d, x.dim()) == i; });
    if (!(named && x.shape()[i] == 1)) out.push_back(x.shape()[i]);
  }
  return out;
}

// ---- copies -------------------------------------------------------------------------------------

std::optional<std::string> to_copy_when(const Args& a) {
  if (!a[1].complex_dtype()) return factory_refused(a, 1);
  Args rest = a;  // to a complex dtype (entries_complex.cpp): the other conditions as usual
  rest[1] = Arg();
  return factory_refused(rest, 1);
}

// x in `dtype`, always a new tensor: to() of x's own dtype may give x itself.
Tensor copy_as(const Tensor& x, DType dtype) {
  return dtype == x.dtype() ? x.clone() : x.to(dtype);
}

Arg to_copy_entry(const Args& a, Call&) {
  if (a[0].is_complex() || a[1].complex_dtype()) return complex_to_copy(a);
  const Tensor& x = a[0].tensor();
  return copy_as(x, a[1].is_none() ? x.dtype() : a[1].dtype());
}

// src cast to x's dtype and broadcast to its shape.
Tensor copied_from(const Tensor& x, const Tensor& src) {
  return broadcast_to(tensor_as(src, x.dtype()), x.shape());
}

// ---- slices -------------------------------------------------------------------------------------

struct Bounds {
  int64_t start, end;
};

// Python's slice(start, end, step).indices(size) for a positive step, with end >= start.
Bounds slice_bounds(const Tensor& x, int64_t dim, const Arg& start, const Arg& end) {
  int64_t size = x.shape()[wrap(dim, x.dim())];
  auto resolve = [size](const Arg& v, int64_t open) {
    if (v.is_none()) return open;
    int64_t i = v.to_int();
    if (i < 0) i = std::max<int64_t>(i + size, 0);
    return std::min(i, size);
  };
  int64_t s = resolve(start, 0), e = resolve(end, size);
  return {s, std::max(s, e)};
}

Condition step_when(size_t at) {
  return [at](const Args& a) -> std::optional<std::string> {
    int64_t step = a[at].to_int();
    if (step > 0) return std::nullopt;
    return "step " + std::to_string(step);
  };
}

Arg slice_entry(const Args& a, Call&) {
  const Tensor& x = a[0].tensor();
  int64_t dim = a[1].to_int();
  Bounds b = slice_bounds(x, dim, a[2], a[3]);
  return slice(x, dim, b.start, b.end, a[4].to_int());
}

int64_t select_index(const Tensor& x, int64_t dim, int64_t index) {
  return index < 0 ? index + x.shape()[wrap(dim, x.dim())] : index;
}

Arg slice_scatter_entry(const Args& a, Call&) {
  const Tensor& x = a[0].tensor();
  int64_t dim = a[2].to_int();
  Bounds b = slice_bounds(x, dim, a[3], a[4]);
  Tensor out = x.clone();
  Tensor part = out.slice(dim, b.start, b.end, a[5].to_int());
  part.copy_(tensor_as(a[1].tensor(), x.dtype()));
  return out;
}

Arg select_scatter_entry(const Args& a, Call&) {
  const Tensor& x = a[0].tensor();
  int64_t dim = a[2].to_int();
  Tensor out = x.clone();
  Tensor part = out.select(dim, select_index(x, dim, a[3].to_int()));
  part.copy_(tensor_as(a[1].tensor(), x.dtype()));
  return out;
}

// roll(self, shifts, dims): eager raises where shifts and dims do not pair up, and for a dim of a
// 0-d tensor.
std::optional<std::string> roll_when(const Args& a) {
  size_t shifts = a[1].ints().size(), dims = a[2].ints().size();
  if (dims == 0 ? shifts != 1 : shifts != dims) {
    return std::to_string(shifts) + " shifts for " + std::to_string(dims) + " dims";
  }
  if (dims > 0 && a[0].tensor_dim() == 0) return "dims of a 0-d tensor";
  return std::nullopt;
}

// ---- joins --------------------------------------------------------------------------------------

Arg cat_entry(const Args& a, Call&) {
  std::vector<Tensor> ts = a[0].tensors();
  // Eager promotes over every dimensioned tensor, legacy 1-D empty ones included, then leaves
  // those out of the join (their shape need not match the others').
  std::optional<DType> dt;
  for (const Tensor& t : ts) {
    if (t.dim() > 0) dt = dt ? promote_types(*dt, t.dtype()) : t.dtype();
  }
  if (!dt) dt = ts.at(0).dtype();
  std::vector<Tensor> keep;
  for (const Tensor& t : ts) {
    if (!(t.dim() == 1 && t.shape()[0] == 0)) keep.push_back(tensor_as(t, *dt));
  }
  if (keep.empty()) return tensor_as(ts[0], *dt).clone();
  if (keep.size() == 1) return keep[0].clone();
  return cat(keep, wrap(a[1].to_int(), keep[0].dim()));
}

// ---- memory-layout views ----------------------------------------------------------------------

// The flat positions (row-major in x) of the elements as_strided(x, sizes, stride, offset) names,
// in the result's row-major order.
Tensor strided_index(const IntList& sizes, const IntList& stride, int64_t offset) {
  const size_t n = sizes.size();
  Tensor index = full({}, offset, DType::Int64);
  for (size_t d = 0; d < n; ++d) {
    IntList shape(n, 1);
    shape[d] = sizes[d];
    index = index + reshape(arange(0, sizes[d], 1, DType::Int64) * stride[d], shape);
  }
  return reshape(index, {-1});
}

// as_strided(x, size, stride, offset) over an x eager holds row-major from its storage's start
// (the condition below): element i of the result is x's flat element offset + sum(i_d *
// stride_d). Where the strides, sorted, are a dense row-major layout of the sizes (a transpose
// written by hand, a bucket view), a view of x (a flat slice, a view, a permute); otherwise the
// elements gathered, a copy.
Tensor as_strided_of(const Tensor& x, const IntList& sizes, const IntList& stride, int64_t offset) {
  const size_t n = sizes.size();
  std::vector<size_t> order(n);  // dims from the largest stride to the smallest
  for (size_t d = 0; d < n; ++d) order[d] = d;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return stride[a] > stride[b]; });
  int64_t count = 1, expected = 1;
  bool dense = true;
  for (size_t i = n; i-- > 0;) {
    const size_t d = order[i];
    if (sizes[d] != 1 && stride[d] != expected) dense = false;
    expected *= sizes[d];
    count *= sizes[d];
  }
  if (dense) {
    IntList shape(n), inverse(n);
    for (size_t i = 0; i < n; ++i) {
      shape[i] = sizes[order[i]];
      inverse[order[i]] = static_cast<int64_t>(i);
    }
    Tensor flat = reshape(x, {-1}).slice(0, offset, offset + count);
    return permute(reshape(flat, shape), inverse);
  }
  // contiguous(): a tensor of its own, not a view of a temporary (a front end whose tensors alias
  // tells a copy from a view by is_view()).
  return reshape(index_select(reshape(x, {-1}), 0, strided_index(sizes, stride, offset)), sizes)
      .contiguous();
}

// The conditions of as_strided (`at`: the position of size; stride and offset follow it) and
// as_strided_scatter: over an input eager holds row-major from its storage's start, inside its
// elements.
std::optional<std::string> strided_window_refused(const Args& a, size_t at) {
  if (!a[0].dense_from_storage_start()) {
    return "its input's memory layout is not known to be row-major from its storage's start";
  }
  const IntList sizes = a[at].ints(), stride = a[at + 1].ints();
  const int64_t offset = a[at + 2].is_none() ? 0 : a[at + 2].to_int();
  if (sizes.size() != stride.size()) return "size and stride differ in length";
  int64_t last = offset;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 0 || stride[d] < 0) return "a negative size or stride";
    if (sizes[d] == 0) return std::nullopt;  // empty: reads nothing
    last += (sizes[d] - 1) * stride[d];
  }
  if (offset < 0 || last >= a[0].tensor_numel()) return "it reads past its input's elements";
  return std::nullopt;
}

std::optional<std::string> as_strided_refused(const Args& a) {
  return strided_window_refused(a, 1);
}

// as_strided_scatter (as_strided's gradient): also no element named twice, where eager's result
// would depend on the order of its writes. Dims sorted by stride, each stride must pass every
// element the smaller strides reach.
std::optional<std::string> as_strided_scatter_refused(const Args& a) {
  if (std::optional<std::string> r = strided_window_refused(a, 2)) return r;
  const IntList sizes = a[2].ints(), stride = a[3].ints();
  std::vector<size_t> order(sizes.size());
  for (size_t d = 0; d < order.size(); ++d) order[d] = d;
  std::sort(order.begin(), order.end(), [&](size_t p, size_t q) { return stride[p] < stride[q]; });
  int64_t reach = 0;  // the largest offset the dims of smaller strides reach
  for (size_t d : order) {
    if (sizes[d] <= 1) continue;
    if (stride[d] <= reach) return "its window names an element twice";
    reach += (sizes[d] - 1) * stride[d];
  }
  return std::nullopt;
}

Arg as_strided_entry(const Args& a, Call&) {
  const Tensor& x = a[0].tensor();
  const IntList sizes = a[1].ints(), stride = a[2].ints();
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  if (numel == 0) return zeros(sizes, x.dtype());
  return as_strided_of(x, sizes, stride, a[3].is_none() ? 0 : a[3].to_int());
}

// x with the elements as_strided(x, ...) names replaced by src's, row-major: an index_copy into x
// flattened.
Arg as_strided_scatter_entry(const Args& a, Call&) {
  const Tensor& x = a[0].tensor();
  const IntList sizes = a[2].ints(), stride = a[3].ints();
  const Tensor src = copied_from(zeros(sizes, x.dtype()), a[1].tensor());
  const Tensor index = strided_index(sizes, stride, a[4].is_none() ? 0 : a[4].to_int());
  return reshape(index_copy(reshape(x, {-1}), 0, index, reshape(src, {-1})), x.shape());
}

// unfold(x, dim, size, step): every window of `size` elements along dim, `step` apart, as a new
// last dim; dim keeps the windows' count. The windows gathered (index_select), so a copy.
Arg unfold_entry(const Args& a, Call&) {
  const Tensor& x = a[0].tensor();
  const int64_t size = a[2].to_int(), step = a[3].to_int();
  if (x.dim() == 0) {  // eager: a 0-d tensor is one element
    if (size > 1)
      throw ValueError("unfold: maximum size for tensor at dimension 0 is 1 but size is " +
                       std::to_string(size));
    if (step <= 0) throw ValueError("unfold: step is " + std::to_string(step) + " but must be > 0");
    return reshape(x, {size});
  }
  const int64_t dim = wrap(a[1].to_int(), x.dim());
  const int64_t length = x.shape()[dim];
  if (size > length || size < 0) {
    throw ValueError("unfold: maximum size for tensor at dimension " + std::to_string(dim) +
                     " is " + std::to_string(length) + " but size is " + std::to_string(size));
  }
  if (step <= 0) throw ValueError("unfold: step is " + std::to_string(step) + " but must be > 0");
  const int64_t count = (length - size) / step + 1;
  Tensor index = reshape(arange(0, count, 1, DType::Int64) * step, {count, 1}) +
                 reshape(arange(0, size, 1, DType::Int64), {1, size});
  Tensor g = index_select(x, dim, reshape(index, {-1}));
  IntList shape(x.shape().begin(), x.shape().end());
  shape[dim] = count;
  shape.insert(shape.begin() + dim + 1, size);
  IntList perm;
  for (int64_t d = 0; d <= x.dim(); ++d) {
    if (d != dim + 1) perm.push_back(d);
  }
  perm.push_back(dim + 1);
  // contiguous(): a tensor of its own, not a view of a temporary (a front end whose tensors alias
  // tells a copy from a view by is_view()).
  return permute(reshape(g, shape), perm).contiguous();
}

}  // namespace

void add_shape(TableBuilder& b) {
  // ---- views and reshapes
  b.add({"aten.view.default", "aten.reshape.default"}, kAll, view_entry, {.flags = kView});
  b.add({"aten._unsafe_view.default"}, kAll, view_entry);
  b.add({"aten.t.default"}, kAll,
        [](const Args& a, Call&) -> Arg {
          const Tensor& x = a[0].tensor();
          return x.dim() < 2 ? x : transpose(x, 0, 1);
        },
        {.flags = kView});
  b.add({"aten.transpose.int"}, kAll,
        [](const Args& a, Call&) -> Arg {
          const Tensor& x = a[0].tensor();
          return x.dim() < 2 ? x : transpose(x, a[1].to_int(), a[2].to_int());
        },
        {.flags = kView});
  b.add({"aten.permute.default"}, kAll,
        [](const Args& a, Call&) -> Arg {
          const Tensor& x = a[0].tensor();
          return x.dim() == 0 ? x : permute(x, a[1].ints());
        },
        {.flags = kView});
  b.add({"aten.expand.default"}, kAll, expand_entry, {.flags = kView});
  b.add({"aten.squeeze.default"}, kAll,
        [](const Args& a, Call&) -> Arg {
          const Tensor& x = a[0].tensor();
          IntList shape;
          for (int64_t s : x.shape()) {
            if (s != 1) shape.push_back(s);
          }
          return reshape(x, shape);
        },
        {.flags = kView});
  b.add({"aten.squeeze.dim"}, kAll,
        [](const Args& a, Call&) -> Arg {
          const Tensor& x = a[0].tensor();
          return reshape(x, squeezed(x, {a[1].to_int()}));
        },
        {.flags = kView});
  b.add({"aten.squeeze.dims"}, kAll,
        [](const Args& a, Call&) -> Arg {
          const Tensor& x = a[0].tensor();
          return reshape(x, squeezed(x, a[1].ints()));
        },
        {.flags = kView});
  b.add({"aten.unsqueeze.default"}, kAll,
        [](const Args& a, Call&) -> Arg {
          const Tensor& x = a[0].tensor();
          int64_t dim = a[1].to_int();
          return unsqueeze(x, dim < 0 ? dim + x.dim() + 1 : dim);
        },
        {.flags = kView});
  b.add({"aten.alias.default"}, kAll, [](const Args& a, Call&) -> Arg { return a[0]; },
        {.flags = kView});
  // Views of memory, lowered as views where Lazuli has one and as copies otherwise: a front end
  // whose tensors alias marks a copy read-only (kCopiedView).
  b.add({"aten.as_strided.default"}, kAll, as_strided_entry,
        {.when = as_strided_refused,
         .note = "over an input whose memory is known row-major from its storage's start (computed "
                 "in the graph, not an input or a view of one); a view where the strides are a "
                 "dense layout, else a gather",
         .flags = kCopiedView});
  b.add({"aten.as_strided_scatter.default"}, kAll, as_strided_scatter_entry,
        {.when = as_strided_scatter_refused,
         .note = "as as_strided; a window naming no element twice"});
  b.add({"aten.unfold.default"}, kAll, unfold_entry,
        {.note = "the windows gathered (a copy)", .flags = kCopiedView});

  // ---- copies
  b.add({"aten.clone.default", "aten.lift_fresh_copy.default"}, kAll,
        [](const Args& a, Call&) -> Arg { return a[0].tensor().clone(); });
  b.add({"aten._to_copy.default"}, kAll, to_copy_entry,
        {.when = to_copy_when,
         .note = "to a Lazuli dtype on the CPU; float to int truncates; complex64/128 inside a "
                 "torch.compile partition",
         .flags = kComplex});
  // Decompositions make it where a Python number reaches a graph as a 0-d float64 tensor (an
  // optimizer's learning rate under dynamic=True): a cast, never a view.
  b.add({"prims.convert_element_type.default"}, kAll,
        [](const Args& a, Call&) -> Arg { return copy_as(a[0].tensor(), a[1].dtype()); },
        {.when = [](const Args& a) { return dtype_arg_refused(a[1]); },
         .note = "to a Lazuli dtype: a cast"});
  b.add(
      {"aten.copy.default"}, kAll,
      [](const Args& a, Call&) -> Arg { return copied_from(a[0].tensor(), a[1].tensor()).clone(); },
      {.note = "src cast to self's dtype and broadcast to its shape"});
  // The bridge makes the updated value a program output donated into the input's memory.
  b.add({"aten.copy_.default"}, kAll,
        [](const Args& a, Call&) -> Arg {
          Tensor x = a[0].tensor();
          x.copy_(copied_from(x, a[1].tensor()));
          return x;
        },
        {.note = "an input updated in place (aot_autograd's keep_inference_input_mutations): the "
                 "partition writes its new value into the input's memory; joins a partition only "
                 "where the whole graph lowers",
         .flags = kMutates});

  // ---- slices
  b.add({"aten.slice.Tensor"}, kAll, slice_entry, {.when = step_when(4), .flags = kView});
  b.add({"aten.select.int"}, kAll,
        [](const Args& a, Call&) -> Arg {
          const Tensor& x = a[0].tensor();
          int64_t dim = a[1].to_int();
          return select(x, dim, select_index(x, dim, a[2].to_int()));
        },
        {.flags = kView});
  b.add({"aten.slice_scatter.default"}, kAll, slice_scatter_entry, {.when = step_when(5)});
  b.add({"aten.select_scatter.default"}, kAll, select_scatter_entry);
  // The backward ops eager's autograd calls for slice and select: the gradient scattered into
  // zeros of the input's sizes.
  b.add({"aten.slice_backward.default"}, kAll,
        [](const Args& a, Call& call) -> Arg {
          const Tensor& grad = a[0].tensor();
          Args scatter = {zeros(a[1].ints(), grad.dtype()), a[0], a[2], a[3], a[4], a[5]};
          return slice_scatter_entry(scatter, call);
        },
        {.when = step_when(5)});
  b.add({"aten.select_backward.default"}, kAll, [](const Args& a, Call& call) -> Arg {
    const Tensor& grad = a[0].tensor();
    return select_scatter_entry({zeros(a[1].ints(), grad.dtype()), a[0], a[2], a[3]}, call);
  });

  // ---- joins and splits
  b.add({"aten.cat.default"}, kAll, cat_entry,
        {.note = "dtypes promote; legacy 1-D empty tensors are skipped"});
  b.add(
      {"aten.split_with_sizes.default"}, kAll,
      [](const Args& a, Call&) -> Arg { return split(a[0].tensor(), a[1].ints(), a[2].to_int()); },
      {.flags = kView});
  b.add({"aten.split.Tensor"}, kAll,
        [](const Args& a, Call&) -> Arg {
          return split(a[0].tensor(), a[1].to_int(), a[2].to_int());
        },
        {.flags = kView});
  b.add({"aten.repeat.default"}, kAll,
        [](const Args& a, Call&) -> Arg { return repeat(a[0].tensor(), a[1].ints()); });
  b.add({"aten.tril.default"}, kAll,
        [](const Args& a, Call&) -> Arg { return tril(a[0].tensor(), a[1].to_int()); });
  b.add({"aten.triu.default"}, kAll,
        [](const Args& a, Call&) -> Arg { return triu(a[0].tensor(), a[1].to_int()); });
  b.add({"aten.flip.default"}, kAll,
        [](const Args& a, Call&) -> Arg { return flip(a[0].tensor(), a[1].ints()); });
  b.add({"aten.roll.default"}, kAll,
        [](const Args& a, Call&) -> Arg { return roll(a[0].tensor(), a[1].ints(), a[2].ints()); },
        {.when = roll_when, .note = "one shift per dim (a single shift without dims)"});
  b.add({"aten.constant_pad_nd.default"}, kAll, [](const Args& a, Call&) -> Arg {
    return nn::pad(a[0].tensor(), a[1].ints(), "constant", a[2].scalar());
  });

  // ---- creation
  b.add({"aten.full.default"}, kAll, full_entry, {.when = factory_when(2)});
  b.add({"aten.full_like.default"}, kAll, full_like_entry, {.when = factory_when(2)});
  b.add({"aten.zeros.default"}, kAll,
        [](const Args& a, Call&) -> Arg {
          return zeros(a[0].ints(), dtype_or(a[1], default_float_dtype()));
        },
        {.when = factory_when(1)});
  b.add({"aten.ones.default"}, kAll,
        [](const Args& a, Call&) -> Arg {
          return ones(a[0].ints(), dtype_or(a[1], default_float_dtype()));
        },
        {.when = factory_when(1)});
  // zero_'s functional form (the lazy device maps x.zero_() onto it).
  b.add({"aten.zero.default"}, kAll, [](const Args& a, Call&) -> Arg {
    const Tensor& x = a[0].tensor();
    return zeros(x.shape(), x.dtype());
  });
  b.add({"aten.zeros_like.default"}, kAll,
        [](const Args& a, Call&) -> Arg {
          const Tensor& x = a[0].tensor();
          return zeros(x.shape(), dtype_or(a[1], x.dtype()));
        },
        {.when = factory_when(1)});
  b.add({"aten.ones_like.default"}, kAll,
        [](const Args& a, Call&) -> Arg {
          const Tensor& x = a[0].tensor();
          return ones(x.shape(), dtype_or(a[1], x.dtype()));
        },
        {.when = factory_when(1)});
  b.add({"aten.empty.memory_format"}, kAll,
        [](const Args& a, Call&) -> Arg {
          return zeros(a[0].ints(), dtype_or(a[1], default_float_dtype()));
        },
        {.when = factory_when(1), .note = "zero-filled"});
  b.add({"aten.empty_permuted.default"}, kAll,
        [](const Args& a, Call&) -> Arg {
          return zeros(a[0].ints(), dtype_or(a[2], default_float_dtype()));
        },
        {.when = factory_when(2), .note = "zero-filled"});
  b.add({"aten.new_empty_strided.default"}, kAll, new_empty_strided_entry,
        {.when = factory_when(3), .note = "zero-filled"});
  b.add({"aten.empty_like.default"}, kAll,
        [](const Args& a, Call&) -> Arg {
          const Tensor& x = a[0].tensor();
          return zeros(x.shape(), dtype_or(a[1], x.dtype()));
        },
        {.when = factory_when(1), .note = "zero-filled"});
  b.add({"aten.scalar_tensor.default"}, kAll,
        [](const Args& a, Call&) -> Arg {
          DType dt = dtype_or(a[1], default_float_dtype());
          return full({}, scalar_as(a[0], dt), dt);
        },
        {.when = factory_when(1)});
  b.add({"aten.arange.start_step"}, kAll,
        [](const Args& a, Call&) -> Arg {
          return arange(a[0].scalar(), a[1].scalar(), a[2].scalar(), arange_dtype(a, 3));
        },
        {.when = arange_when(3)});
  b.add({"aten.arange.start"}, kAll,
        [](const Args& a, Call&) -> Arg {
          return arange(a[0].scalar(), a[1].scalar(), 1, arange_dtype(a, 2));
        },
        {.when = arange_when(2)});
  b.add({"aten.arange.default"}, kAll,
        [](const Args& a, Call&) -> Arg { return arange(0, a[0].scalar(), 1, arange_dtype(a, 1)); },
        {.when = arange_when(1)});
  b.add({"aten.fill.Scalar"}, kAll, [](const Args& a, Call&) -> Arg {
    const Tensor& x = a[0].tensor();
    return full(x.shape(), scalar_as(a[1], x.dtype()), x.dtype());
  });
  b.add({"aten.fill.Tensor"}, kAll, [](const Args& a, Call&) -> Arg {
    const Tensor& x = a[0].tensor();
    return copied_from(x, a[1].tensor()).clone();
  });

  b.add({"aten.sym_size.int"}, kAll, [](const Args& a, Call&) -> Arg {
    const Shape& shape = a[0].tensor_shape();
    return shape.at(static_cast<size_t>(wrap(a[1].to_int(), static_cast<int64_t>(shape.size()))));
  });
}

}  // namespace lz::aten
