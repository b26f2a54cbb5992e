// x[key] and x[key] = value with PyTorch's rules, built from views (select, slice, unsqueeze),
// index_select, index_copy, scatter_add and where (the rules: <lazuli/indexing.h>).
//
// A key is applied in two steps. `parse` applies its ints, slices, None and bools as views and
// leaves the advanced indices: (dim in the view, integer index or bool mask). One integer index
// is an index_select (or index_copy) along its dim; one mask a flat index_select over its dims
// at its true positions; several broadcast together into one linear index over their dims moved
// first and flattened (`AdvancedIndex`), whose result dims go where PyTorch puts them.
#include "ops/subscript.h"

#include <algorithm>
#include <optional>
#include <string>

#include "ir/origin.h"
#include "ops/frontend.h"

namespace lz::indexing {

TensorIndex::TensorIndex(const char* ellipsis) : kind_(Kind::Ellipsis) {
  if (!ellipsis || std::string(ellipsis) != "...") {
    throw ValueError(std::string("TensorIndex: the only string index is \"...\", got \"") +
                     (ellipsis ? ellipsis : "") + "\"");
  }
}

TensorIndex::TensorIndex(const std::vector<int64_t>& values) : TensorIndex(lz::tensor(values)) {
  list_ = true;
}

TensorIndex TensorIndex::list(Tensor values) {
  TensorIndex t(std::move(values));
  t.list_ = true;
  return t;
}

namespace {

using Advanced = std::vector<std::pair<int64_t, Tensor>>;

// The key's own messages: bare (Python) or naming the op and the indexed tensor (C++).
struct Messages {
  const KeyContext& ctx;
  const Tensor& self;
  std::string operator()(const std::string& text) const {
    return ctx.op ? frontend::desc(ctx.op, self) + ": " + text : text;
  }
};

bool is_mask(const Tensor& t) { return t.dtype() == DType::Bool; }
bool is_integer_index(DType d) { return d == DType::Int64 || d == DType::Int32; }

// As Python's t.to(dtype) and t.contiguous(): the tensor itself when nothing changes.
Tensor to_dtype(const Tensor& t, DType d) { return t.dtype() == d ? t : lz::cast(t, d); }
Tensor contiguous_or_self(const Tensor& t) { return t.is_contiguous() ? t : lz::contiguous(t); }

int64_t product(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Shape part(const Shape& s, size_t begin, size_t end) {
  begin = std::min(begin, s.size());
  end = std::min(std::max(end, begin), s.size());
  return Shape(s.begin() + static_cast<std::ptrdiff_t>(begin),
               s.begin() + static_cast<std::ptrdiff_t>(end));
}

Shape concat(std::initializer_list<Shape> parts) {
  Shape out;
  for (const Shape& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// numpy broadcasting of two shapes, or nothing when they do not broadcast.
std::optional<Shape> broadcast(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Dims of the indexed tensor the key's items consume (None, ... and bools consume none).
int64_t specified_dims(const std::vector<TensorIndex>& key) {
  int64_t n = 0;
  for (const TensorIndex& k : key) {
    if (k.is_none() || k.is_ellipsis() || k.is_boolean()) continue;
    n += k.is_tensor() && is_mask(k.tensor()) ? k.tensor().dim() : 1;
  }
  return n;
}

// A tensor item as an index or a mask. A list's values are known now and checked against `size`
// here, as PyTorch checks a list's; a tensor's when the program runs (or, on the host, by
// `wrapped`).
const Tensor& index_tensor(const TensorIndex& k, std::optional<int64_t> size, int64_t dim,
                           const Messages& msg) {
  const Tensor& t = k.tensor();
  if (!is_integer_index(t.dtype()) && !is_mask(t)) {
    throw IndexError(msg("tensors used as indices must be long, int or bool tensors, got " +
                         std::string(dtype_name(t.dtype()))));
  }
  std::shared_ptr<Storage> host = k.is_list() ? t.impl()->host_storage() : nullptr;
  if (host && size && !is_mask(t)) {
    for (int64_t i = 0, n = t.numel(); i < n; ++i) {
      int64_t v = t.dtype() == DType::Int64 ? static_cast<const int64_t*>(host->data())[i]
                                            : static_cast<const int32_t*>(host->data())[i];
      if (v < -*size || v >= *size) {
        throw IndexError(msg("index " + std::to_string(v) + " is out of bounds for dimension " +
                             std::to_string(dim) + " with size " + std::to_string(*size)));
      }
    }
  }
  return t;
}

struct Parsed {
  Tensor view;
  Advanced advanced;
};

// Applies ints, slices, None and bools as views; returns the view and the advanced indices left.
Parsed parse(const Tensor& self, const std::vector<TensorIndex>& key, const Messages& msg) {
  for (const TensorIndex& k : key) {
    if (k.is_tensor() && !k.tensor().defined())
      throw ValueError(msg("got an undefined index tensor"));
  }
  const int64_t specified = specified_dims(key);
  if (specified > self.dim()) {
    throw IndexError(msg("too many indices for tensor of dimension " + std::to_string(self.dim())));
  }
  const int64_t slack = self.dim() - specified;
  Parsed p{self, {}};
  Tensor& view = p.view;
  int64_t dim = 0;
  bool seen_ellipsis = false;
  for (size_t i = 0; i < key.size(); ++i) {
    const TensorIndex& k = key[i];
    switch (k.kind()) {
      case TensorIndex::Kind::Ellipsis:
        // PyTorch moves past `slack` dims at every ellipsis: a later one is a no-op when nothing
        // but ellipses follow it (x[..., ...]), else it would index past the last dim.
        if (seen_ellipsis && slack &&
            std::any_of(key.begin() + static_cast<std::ptrdiff_t>(i) + 1, key.end(),
                        [](const TensorIndex& r) { return !r.is_ellipsis(); })) {
          throw IndexError(
              msg("an index can only have a single ellipsis ('...') when more "
                  "indices follow it"));
        }
        if (!seen_ellipsis) dim += slack;
        seen_ellipsis = true;
        break;
      case TensorIndex::Kind::None:
        view = lz::unsqueeze(view, dim++);
        break;
      case TensorIndex::Kind::Boolean:
        // A new dim of size 1, indexed by [0] (true: kept) or [] (false: emptied).
        view = lz::unsqueeze(view, dim);
        p.advanced.emplace_back(dim++, k.boolean() ? lz::tensor<int64_t>({0})
                                                   : lz::tensor<int64_t>(std::vector<int64_t>{}));
        break;
      case TensorIndex::Kind::Integer:
        view = lz::select(view, dim, k.integer());
        break;
      case TensorIndex::Kind::Slice: {
        const Slice& s = k.slice();
        if (s.step() <= 0) throw ValueError(msg("step must be greater than zero"));
        view = lz::slice(view, dim++, s.start(), s.stop(), s.step());
        break;
      }
      case TensorIndex::Kind::Tensor: {
        std::optional<int64_t> size;
        if (dim < view.dim()) size = view.shape()[static_cast<size_t>(dim)];
        Tensor idx = index_tensor(k, size, dim, msg);
        if (is_mask(idx) && idx.dim() == 0) {
          view = lz::unsqueeze(view, dim);  // as PyTorch: a 0-d mask is a new dim, kept or emptied
          idx = lz::reshape(idx, {1});
        }
        int64_t consumed = is_mask(idx) ? idx.dim() : 1;
        p.advanced.emplace_back(dim, std::move(idx));
        dim += consumed;
        break;
      }
    }
  }
  return p;
}

void check_mask(const Tensor& view, int64_t dim, const Tensor& mask, const Messages& msg) {
  const Shape& vs = view.shape();
  Shape indexed = part(vs, static_cast<size_t>(dim), static_cast<size_t>(dim + mask.dim()));
  if (indexed == mask.shape()) return;
  int64_t bad = 0;
  for (int64_t j = 0; j < mask.dim(); ++j) {
    if (j >= static_cast<int64_t>(indexed.size()) ||
        indexed[static_cast<size_t>(j)] != mask.shape()[static_cast<size_t>(j)]) {
      bad = j;
      break;
    }
  }
  throw IndexError(msg("The shape of the mask " + shape_str(mask.shape()) + " at index " +
                       std::to_string(bad) + " does not match the shape of the indexed tensor " +
                       shape_str(vs) + " at index " + std::to_string(dim + bad)));
}

// The flat positions of a mask's true elements: reads the mask (a cut).
Tensor positions(const Tensor& mask, const KeyContext& ctx) {
  Tensor flat = lz::reshape(mask, {-1});
  return ctx.read_positions ? ctx.read_positions(flat) : true_positions(flat);
}

// idx with negative entries counted from the end of view's dim `dim`. The values of an index on
// the host are checked here (IndexError naming the user op), others when the program runs.
Tensor wrapped(const Tensor& view, int64_t dim, const Tensor& idx, const Messages& msg) {
  if (dim >= view.dim()) {
    throw IndexError(msg("too many indices for tensor of dimension " + std::to_string(view.dim())));
  }
  int64_t size = view.shape()[static_cast<size_t>(dim)];
  frontend::check_index_values(idx, size, /*allow_negative=*/true, "index");
  return lz::where(lz::lt(idx, 0), lz::add(idx, size), idx);
}

// value (cast to dtype) broadcast to `shape`, as PyTorch's index_put_: leading dims of size 1 are
// dropped first; anything else that does not broadcast raises, naming both shapes.
Tensor broadcast_value(const Tensor& value, const Shape& shape, DType dtype, const Messages& msg) {
  Shape vshape = value.shape();
  while (vshape.size() > shape.size() && vshape[0] == 1) vshape.erase(vshape.begin());
  std::optional<Shape> b = broadcast(vshape, shape);
  if (vshape.size() > shape.size() || !b || *b != shape) {
    throw ValueError(msg("shape mismatch: value tensor of shape " + shape_str(value.shape()) +
                         " cannot be broadcast to indexing result of shape " + shape_str(shape)));
  }
  return lz::broadcast_to(lz::reshape(to_dtype(value, dtype), vshape), shape);
}

std::vector<int64_t> inverse(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  return inv;
}

// Several advanced indices as one: the view's indexed dims moved first and flattened (`flat_`),
// and one linear index into them (`linear_`, of the broadcast shape `shape_`).
class AdvancedIndex {
 public:
  AdvancedIndex(const Tensor& view, const Advanced& advanced, const KeyContext& ctx,
                const Messages& msg) {
    struct Group {
      std::vector<int64_t> dims;  // of the view, covered by this index
      Shape sizes;                // their sizes
      Tensor idx;                 // a linear index into them
    };
    std::vector<Group> groups;
    for (const auto& [dim, idx] : advanced) {
      if (is_mask(idx)) {
        check_mask(view, dim, idx, msg);
        std::vector<int64_t> dims;
        for (int64_t d = dim; d < dim + idx.dim(); ++d) dims.push_back(d);
        groups.push_back({dims, idx.shape(), positions(idx, ctx)});
        continue;
      }
      bool on_host = idx.impl()->state() == internal::TensorState::Host;  // checked by wrapped
      Tensor w = wrapped(view, dim, idx, msg);
      int64_t size = view.shape()[static_cast<size_t>(dim)];
      if (w.numel() && !on_host) {
        // Entries out of range could still make an in-range linear index: pass them through an
        // index_select, which checks them when the program runs.
        w = lz::reshape(
            lz::index_select(lz::arange(0, size, 1, std::nullopt), 0, lz::reshape(w, {-1})),
            w.shape());
      }
      groups.push_back({{dim}, {size}, w});
    }
    std::optional<Shape> shape = groups[0].idx.shape();
    for (size_t g = 1; g < groups.size() && shape; ++g)
      shape = broadcast(*shape, groups[g].idx.shape());
    if (!shape) {
      std::string shapes;
      for (const Group& g : groups)
        shapes += (shapes.empty() ? "" : ", ") + shape_str(g.idx.shape());
      throw IndexError(
          msg("shape mismatch: indexing tensors could not be broadcast together "
              "with shapes " +
              shapes));
    }
    shape_ = *shape;
    for (const Group& g : groups) {
      dims_.insert(dims_.end(), g.dims.begin(), g.dims.end());
      sizes_.insert(sizes_.end(), g.sizes.begin(), g.sizes.end());
    }
    for (int64_t d = 0; d < view.dim(); ++d) {
      if (std::find(dims_.begin(), dims_.end(), d) != dims_.end()) continue;
      rest_.push_back(d);
      rest_sizes_.push_back(view.shape()[static_cast<size_t>(d)]);
    }
    perm_ = dims_;
    perm_.insert(perm_.end(), rest_.begin(), rest_.end());
    Tensor linear;
    int64_t mult = 1;
    for (auto g = groups.rbegin(); g != groups.rend(); ++g) {
      Tensor term = lz::mul(lz::broadcast_to(to_dtype(g->idx, DType::Int64), shape_), mult);
      linear = linear.defined() ? lz::add(linear, term) : term;
      mult *= product(g->sizes);
    }
    linear_ = lz::reshape(linear, {-1});
    flat_ = lz::reshape(lz::permute(view, perm_), concat({{product(sizes_)}, rest_sizes_}));
    // PyTorch puts the result dims where the first index was when the indices are adjacent. A
    // 0-d integer index is a select there (it reads the value): it removes its dim and takes no
    // part in that placement.
    std::vector<int64_t> selected;
    for (const Group& g : groups) {
      if (g.idx.dim() == 0 && g.dims.size() == 1) selected.push_back(g.dims[0]);
    }
    auto is_selected = [&](int64_t d) {
      return std::find(selected.begin(), selected.end(), d) != selected.end();
    };
    std::vector<int64_t> placed;
    for (int64_t d : dims_) {
      if (is_selected(d)) continue;
      placed.push_back(
          d - std::count_if(selected.begin(), selected.end(), [d](int64_t s) { return s < d; }));
    }
    bool adjacent = !placed.empty();
    for (size_t i = 1; i < placed.size() && adjacent; ++i)
      adjacent = placed[i] == placed[0] + static_cast<int64_t>(i);
    if (adjacent) {
      int64_t first =
          *std::find_if(dims_.begin(), dims_.end(), [&](int64_t d) { return !is_selected(d); });
      at_ = std::count_if(rest_.begin(), rest_.end(), [first](int64_t d) { return d < first; });
    }
    result_shape_ = concat({part(rest_sizes_, 0, static_cast<size_t>(at_)), shape_,
                            part(rest_sizes_, static_cast<size_t>(at_), rest_sizes_.size())});
  }

  const Shape& result_shape() const { return result_shape_; }

  Tensor get() const {
    const int64_t nb = static_cast<int64_t>(shape_.size());
    Tensor picked = lz::reshape(lz::index_select(flat_, 0, linear_), concat({shape_, rest_sizes_}));
    if (!at_) return picked;
    std::vector<int64_t> order;  // the index dims (first nb) move to at_
    for (int64_t d = nb; d < nb + at_; ++d) order.push_back(d);
    for (int64_t d = 0; d < nb; ++d) order.push_back(d);
    for (int64_t d = nb + at_; d < picked.dim(); ++d) order.push_back(d);
    return contiguous_or_self(lz::permute(picked, order));
  }

  // The view with src (of result_shape) written at the indexed places.
  Tensor put(const Tensor& src) const {
    return unflatten(lz::index_copy(flat_, 0, linear_, index_dims_first(src)));
  }

  // The view with src (of result_shape) added at the indexed places; an index that appears
  // several times adds each of its values (index_put with accumulate).
  Tensor add(const Tensor& src) const {
    Tensor s = index_dims_first(src);
    Shape lin_shape{-1};
    lin_shape.resize(1 + rest_sizes_.size(), 1);
    Tensor index = lz::expand(lz::reshape(linear_, lin_shape), s.shape());
    return unflatten(lz::scatter_add(flat_, 0, index, s));
  }

 private:
  // src (of result_shape) with the index dims first, flattened as linear_ is.
  Tensor index_dims_first(Tensor src) const {
    const int64_t nb = static_cast<int64_t>(shape_.size());
    if (at_) {
      std::vector<int64_t> order;
      for (int64_t d = at_; d < at_ + nb; ++d) order.push_back(d);
      for (int64_t d = 0; d < at_; ++d) order.push_back(d);
      for (int64_t d = at_ + nb; d < src.dim(); ++d) order.push_back(d);
      src = lz::permute(src, order);
    }
    return lz::reshape(src, concat({{linear_.numel()}, rest_sizes_}));
  }

  Tensor unflatten(const Tensor& flat) const {
    return lz::permute(lz::reshape(flat, concat({sizes_, rest_sizes_})), inverse(perm_));
  }

  Shape shape_, sizes_, rest_sizes_, result_shape_;
  std::vector<int64_t> dims_, rest_, perm_;
  Tensor linear_, flat_;
  int64_t at_ = 0;
};

// view[..., mask, ...] = value for one mask at `dim`.
void put_masked(Tensor view, int64_t dim, const Tensor& mask, const Tensor& value,
                const KeyContext& ctx, const Messages& msg) {
  check_mask(view, dim, mask, msg);
  const Shape& vs = view.shape();
  Shape lead = part(vs, 0, static_cast<size_t>(dim));
  Shape rest = part(vs, static_cast<size_t>(dim + mask.dim()), vs.size());
  Shape vshape = value.shape();
  while (vshape.size() > rest.size() && vshape[0] == 1) vshape.erase(vshape.begin());
  std::optional<Shape> b = broadcast(vshape, rest);
  if (vshape.size() <= rest.size() && b && *b == rest) {
    // The value does not depend on how many elements are selected: where(), no cut.
    Shape mshape = mask.shape();
    mshape.resize(mshape.size() + rest.size(), 1);
    Tensor src = lz::reshape(to_dtype(value, view.dtype()), vshape);
    view.copy_(lz::where(lz::reshape(mask, mshape), src, view));
    return;
  }
  Tensor pos = positions(mask, ctx);  // the value is laid out in mask order: read the mask
  Tensor src = broadcast_value(value, concat({lead, {pos.numel()}, rest}), view.dtype(), msg);
  Tensor flat = lz::reshape(view, concat({lead, {product(mask.shape())}, rest}));
  view.copy_(lz::reshape(lz::index_copy(flat, dim, pos, src), vs));
}

}  // namespace

Tensor get(const Tensor& self, const std::vector<TensorIndex>& key, const KeyContext& ctx) {
  if (!self.defined())
    throw ValueError(std::string(ctx.op ? ctx.op : "x[index]") + ": got an undefined tensor");
  Messages msg{ctx, self};
  Parsed p = parse(self, key, msg);
  const Tensor& view = p.view;
  if (p.advanced.empty()) return view;
  if (p.advanced.size() > 1) return AdvancedIndex(view, p.advanced, ctx, msg).get();
  const auto& [dim, idx] = p.advanced[0];
  const Shape& vs = view.shape();
  if (is_mask(idx)) {
    // A bool mask: the result's size depends on the values (a cut).
    check_mask(view, dim, idx, msg);
    Shape flat = concat({part(vs, 0, static_cast<size_t>(dim)),
                         {product(idx.shape())},
                         part(vs, static_cast<size_t>(dim + idx.dim()), vs.size())});
    return lz::index_select(lz::reshape(view, flat), dim, positions(idx, ctx));
  }
  Tensor w = wrapped(view, dim, idx, msg);
  Tensor picked = lz::index_select(view, dim, lz::reshape(w, {-1}));
  if (w.dim() == 1) return picked;
  return lz::reshape(picked, concat({part(vs, 0, static_cast<size_t>(dim)), w.shape(),
                                     part(vs, static_cast<size_t>(dim) + 1, vs.size())}));
}

void put(const Tensor& self, const std::vector<TensorIndex>& key, const Tensor& value,
         bool accumulate, const KeyContext& ctx) {
  if (!self.defined() || !value.defined()) {
    throw ValueError(std::string(ctx.op ? ctx.op : "x[index] = value") +
                     ": got an undefined tensor");
  }
  Messages msg{ctx, self};
  Parsed p = parse(self, key, msg);
  Tensor view = p.view;
  if (p.advanced.empty()) {
    if (accumulate) {
      view.copy_(lz::add(view, broadcast_value(value, view.shape(), view.dtype(), msg)));
    } else {
      view.copy_(value);
    }
    return;
  }
  if (accumulate || p.advanced.size() > 1) {
    AdvancedIndex adv(view, p.advanced, ctx, msg);
    Tensor src = broadcast_value(value, adv.result_shape(), view.dtype(), msg);
    view.copy_(accumulate ? adv.add(src) : adv.put(src));
    return;
  }
  const auto& [dim, idx] = p.advanced[0];
  if (is_mask(idx)) {
    put_masked(view, dim, idx, value, ctx, msg);
    return;
  }
  Tensor w = wrapped(view, dim, idx, msg);
  const Shape& vs = view.shape();
  Shape lead = part(vs, 0, static_cast<size_t>(dim));
  Shape rest = part(vs, static_cast<size_t>(dim) + 1, vs.size());
  Tensor src = broadcast_value(value, concat({lead, w.shape(), rest}), view.dtype(), msg);
  src = lz::reshape(src, concat({lead, {w.numel()}, rest}));
  view.copy_(lz::index_copy(view, dim, lz::reshape(w, {-1}), src));
}

Tensor true_positions(const Tensor& mask) {
  if (mask.dtype() != DType::Bool) {
    throw TypeError(frontend::desc("index", mask) + ": a mask must be a bool tensor");
  }
  BufferPtr b = frontend::schedule_read(mask, CutReason::DataDependentShape);
  frontend::finish_read(b);
  std::vector<int64_t> idx;
  if (mask.numel()) {
    std::vector<uint8_t> bytes = frontend::host_bytes(b);
    for (int64_t i = 0; i < mask.numel(); ++i) {
      if (bytes[static_cast<size_t>(i)]) idx.push_back(i);
    }
  }
  return lz::tensor<int64_t>(idx);
}

}  // namespace lz::indexing

namespace lz {

namespace {
const indexing::KeyContext kIndex{"index", nullptr};
const indexing::KeyContext kIndexPut{"index_put_", nullptr};
}  // namespace

Tensor Tensor::index(std::initializer_list<indexing::TensorIndex> key) const {
  return index(std::vector<indexing::TensorIndex>(key));
}

Tensor Tensor::index(const std::vector<indexing::TensorIndex>& key) const {
  ir::UserOpScope scope("index");  // a bad index value found when the program runs names index
  return indexing::get(*this, key, kIndex);
}

Tensor& Tensor::index_put_(std::initializer_list<indexing::TensorIndex> key, const Tensor& value,
                           bool accumulate) {
  return index_put_(std::vector<indexing::TensorIndex>(key), value, accumulate);
}

Tensor& Tensor::index_put_(const std::vector<indexing::TensorIndex>& key, const Tensor& value,
                           bool accumulate) {
  ir::UserOpScope scope("index_put_");
  indexing::put(*this, key, value, accumulate, kIndexPut);
  return *this;
}

Tensor& Tensor::index_put_(std::initializer_list<indexing::TensorIndex> key, const Scalar& value) {
  return index_put_(std::vector<indexing::TensorIndex>(key), value);
}

Tensor& Tensor::index_put_(const std::vector<indexing::TensorIndex>& key, const Scalar& value) {
  check_defined("index_put_");
  return index_put_(key, scalar_tensor(value, dtype()));
}

Tensor& Tensor::index_put_(const Tensor& index, const Tensor& values) {
  return index_put_(std::vector<indexing::TensorIndex>{index}, values);
}

}  // namespace lz
