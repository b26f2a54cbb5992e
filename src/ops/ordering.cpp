// Ordering: sort (one multi-output primitive: values and indices), and argsort,
// msort and topk written over it.
#include "ops/frontend.h"

namespace lz {
using frontend::desc;
using frontend::node;
using frontend::wrap;
using ir::OpKind;

std::pair<Tensor, Tensor> sort(const Tensor &x, int64_t dim, bool descending, bool stable) {
  ir::Value v = frontend::value_of(x, "sort");
  const int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), "sort");
  std::vector<ir::Value> out =
      frontend::node_outputs(OpKind::Sort, {v}, ir::SortAttrs{d, descending, stable});
  return {wrap(out[0]), wrap(out[1])};
}

Tensor argsort(const Tensor &x, int64_t dim, bool descending, bool stable) {
  return sort(x, dim, descending, stable).second;
}

Tensor msort(const Tensor &x) { return sort(x, 0).first; }

std::pair<Tensor, Tensor> topk(const Tensor &x, int64_t k, int64_t dim, bool largest, bool sorted) {
  if (!x.defined()) throw ValueError("topk: got an undefined tensor");
  const int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), "topk");
  const int64_t size = x.dim() == 0 ? 1 : x.shape()[static_cast<size_t>(d)];
  if (k < 0 || k > size) {
    throw IndexError(desc("topk", x) + ": k=" + std::to_string(k) + " is out of range for dim " +
                     std::to_string(d) + " of size " + std::to_string(size));
  }
  // The k first of a full sort, in order (PyTorch's sorted=True; with
  // sorted=False any order is allowed, and this one is too). Ties keep input
  // order.
  (void)sorted;
  auto [values, indices] = sort(x, d, /*descending=*/largest, /*stable=*/true);
  if (x.dim() == 0) return {values, indices};
  return {slice(values, d, 0, k), slice(indices, d, 0, k)};
}

}  // namespace lz
