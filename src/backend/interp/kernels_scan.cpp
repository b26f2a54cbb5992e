// Reference kernels for the scans (cumsum, cumprod) along one dim: each line is walked once, in
// order (or backwards for a reverse scan). Floating inputs accumulate in double, as PyTorch's CPU
// kernels accumulate in their accumulation type, so a float32 running sum does not drift with
// the line's length; integers wrap (two's complement), as everywhere else.
#include <type_traits>

#include "backend/interp/kernels_impl.h"

namespace lz::interp {

void run_scan(ir::OpKind op, const ir::ScanAttrs &a, const ConstArray &x, MutArray out) {
  const Shape in = x.shape->empty() ? Shape{1} : *x.shape;
  const size_t dim = static_cast<size_t>(a.dim);
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < dim; ++i) outer *= in[i];
  for (size_t i = dim + 1; i < in.size(); ++i) inner *= in[i];
  const int64_t len = in[dim];
  const bool product = op == ir::OpKind::CumProd;
  if (op != ir::OpKind::CumSum && !product) throw Error("interp: not a scan op");
  dispatch(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
    const T *px = data_of<T>(x);
    T *po = data_of<T>(out);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t c = 0; c < inner; ++c) {
        const int64_t base = o * len * inner + c;
        Acc acc = product ? Acc(1) : Acc(0);
        for (int64_t j = 0; j < len; ++j) {
          const int64_t at = base + (a.reverse ? len - 1 - j : j) * inner;
          acc = product ? mul_values<Acc>(acc, static_cast<Acc>(px[at]))
                        : add_values<Acc>(acc, static_cast<Acc>(px[at]));
          po[at] = static_cast<T>(acc);
        }
      }
    }
  });
}

}  // namespace lz::interp
