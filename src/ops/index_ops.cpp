// Indexing with integer tensors. Index values are data: they are checked when the program runs
// (an out-of-range value raises at the wait point, naming the user's op and line: ir/origin.h);
// shapes and dtypes are checked here, and so are the values of an index still on the host
// (lz.tensor([...]), from_numpy), which are known without running anything.
#include "ir/origin.h"
#include "ops/frontend.h"

namespace lz {
using frontend::node;
using frontend::wrap;
using ir::OpKind;

namespace {
void check_index(const char* op, const Tensor& x, const Tensor& index, int64_t rank_required) {
  if (!x.defined() || !index.defined())
    throw ValueError(std::string(op) + ": got an undefined tensor");
  if (index.dtype() != DType::Int64 && index.dtype() != DType::Int32) {
    throw TypeError(std::string(op) + "(" + std::string(dtype_name(x.dtype())) +
                    shape_str(x.shape()) + ", index " + std::string(dtype_name(index.dtype())) +
                    shape_str(index.shape()) + "): the index must be an int32 or int64 tensor");
  }
  if (rank_required >= 0 && index.dim() != rank_required) {
    throw ValueError(std::string(op) + "(" + std::string(dtype_name(x.dtype())) +
                     shape_str(x.shape()) + ", index " + std::string(dtype_name(index.dtype())) +
                     shape_str(index.shape()) + "): the index must be " +
                     std::to_string(rank_required) + "-D");
  }
}

// Host index values checked at the line, as PyTorch would: nothing is recorded.
void check_host_values(const char* op, const Tensor& x, int64_t dim, const Tensor& index) {
  int64_t size = x.dim() == 0 ? 1 : x.shape()[static_cast<size_t>(dim)];
  frontend::check_index_values(index, size, /*allow_negative=*/false, op);
}

ir::DimAttrs dim_attr(int64_t d) { return {d}; }
}  // namespace

namespace frontend {
void check_index_values(const Tensor& index, int64_t size, bool allow_negative, const char* op,
                        std::optional<int64_t> ignore) {
  if (!index.defined()) return;
  std::shared_ptr<Storage> host = index.impl()->host_storage();
  if (!host || (index.dtype() != DType::Int64 && index.dtype() != DType::Int32)) return;
  int64_t n = index.numel();
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = index.dtype() == DType::Int64 ? static_cast<const int64_t*>(host->data())[i]
                                              : static_cast<const int32_t*>(host->data())[i];
    if ((v >= size || v < (allow_negative ? -size : 0)) && v != ignore) {
      throw IndexError(std::string(ir::current_user_op(op)) + ": index " + std::to_string(v) +
                       " is out of range for size " + std::to_string(size) +
                       (allow_negative ? " (valid: " + std::to_string(-size) + " to " +
                                             std::to_string(size - 1) + ")"
                                       : ""));
    }
  }
}
}  // namespace frontend

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index_arg) {
  check_index("index_select", x, index_arg, -1);
  // As PyTorch: a 0-d index is one index; an index of more dims is an IndexError.
  if (index_arg.dim() > 1) {
    throw IndexError("index_select(" + std::string(dtype_name(x.dtype())) + shape_str(x.shape()) +
                     ", index " + std::string(dtype_name(index_arg.dtype())) +
                     shape_str(index_arg.shape()) +
                     "): the index must be a vector (1-D) or a scalar");
  }
  const Tensor index = index_arg.dim() == 0 ? reshape(index_arg, {1}) : index_arg;
  int64_t d = x.dim() == 0 ? (wrap_dim(dim, 0, "index_select") * 0)
                           : wrap_dim(dim, x.dim(), "index_select");
  check_host_values("index_select", x, d, index);
  return wrap(
      node(OpKind::IndexSelect,
           {frontend::value_of(x, "index_select"), frontend::value_of(index, "index_select")},
           dim_attr(d)));
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  check_index("gather", x, index, x.defined() ? x.dim() : -1);
  int64_t d = wrap_dim(dim, x.dim(), "gather");
  check_host_values("gather", x, d, index);
  return wrap(node(OpKind::Gather,
                   {frontend::value_of(x, "gather"), frontend::value_of(index, "gather")},
                   dim_attr(d)));
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  check_index("scatter_add", x, index, x.defined() ? x.dim() : -1);
  if (!src.defined()) throw ValueError("scatter_add: got an undefined tensor");
  int64_t d = wrap_dim(dim, x.dim(), "scatter_add");
  check_host_values("scatter_add", x, d, index);
  ir::Value s = frontend::cast(frontend::value_of(src, "scatter_add"), x.dtype());
  return wrap(
      node(OpKind::ScatterAdd,
           {frontend::value_of(x, "scatter_add"), frontend::value_of(index, "scatter_add"), s},
           dim_attr(d)));
}

Tensor index_copy(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  check_index("index_copy", x, index, 1);
  if (!src.defined()) throw ValueError("index_copy: got an undefined tensor");
  int64_t d = wrap_dim(dim, x.dim(), "index_copy");
  check_host_values("index_copy", x, d, index);
  ir::Value s = frontend::cast(frontend::value_of(src, "index_copy"), x.dtype());
  return wrap(
      node(OpKind::IndexCopy,
           {frontend::value_of(x, "index_copy"), frontend::value_of(index, "index_copy"), s},
           dim_attr(d)));
}

}  // namespace lz
