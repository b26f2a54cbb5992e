// Reference kernel for sort: a stable sort of every line along `dim`, giving
// the sorted values and the index each came from. NaN sorts as the largest
// value (last ascending, first descending), as torch.sort does; equal elements
// keep their input order.
#include <algorithm>
#include <numeric>

#include "backend/interp/kernels_impl.h"

namespace lz::interp {

void run_sort(const ir::SortAttrs &a, const ConstArray &x, MutArray values, MutArray indices) {
  const Shape in = x.shape->empty() ? Shape{1} : *x.shape;
  const size_t dim = static_cast<size_t>(a.dim);
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < dim; ++i) outer *= in[i];
  for (size_t i = dim + 1; i < in.size(); ++i) inner *= in[i];
  const int64_t len = in[dim];
  dispatch(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = data_of<T>(x);
    T *pv = data_of<T>(values);
    int64_t *pi = data_of<int64_t>(indices);
    // Ascending order with NaN last; descending is its mirror with NaN first.
    auto less = [](T p, T q) {
      if (is_nan(q)) return !is_nan(p);
      return !is_nan(p) && p < q;
    };
    std::vector<int64_t> order(static_cast<size_t>(len));
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t c = 0; c < inner; ++c) {
        const int64_t base = o * len * inner + c;
        auto at = [&](int64_t j) { return px[base + j * inner]; };
        std::iota(order.begin(), order.end(), int64_t{0});
        if (a.descending) {
          std::stable_sort(order.begin(), order.end(),
                           [&](int64_t p, int64_t q) { return less(at(q), at(p)); });
        } else {
          std::stable_sort(order.begin(), order.end(),
                           [&](int64_t p, int64_t q) { return less(at(p), at(q)); });
        }
        for (int64_t j = 0; j < len; ++j) {
          pv[base + j * inner] = at(order[j]);
          pi[base + j * inner] = order[j];
        }
      }
    }
  });
}

}  // namespace lz::interp
