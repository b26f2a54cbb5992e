// Reference kernels for reductions (sum, prod, max, min over a set of dims), argmax/argmin and
// batched matmul. Floating accumulations run in double, in input order, so the reference is
// stable and deterministic; integer accumulations wrap in the operand's type.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "backend/interp/kernels_impl.h"
#include "core/reduced_float.h"

namespace lz::interp {
namespace {

// A 16-bit float array's values as float32 (exact).
std::vector<float> widen(const ConstArray& x) {
  std::vector<float> w(static_cast<size_t>(numel(*x.shape)));
  const auto* p = static_cast<const uint16_t*>(x.data);
  for (size_t i = 0; i < w.size(); ++i) w[i] = from_reduced(x.dtype, p[i]);
  return w;
}

using ir::OpKind;

// Strides that map an input position to its output element: the reduced dims get stride 0, the
// kept dims the contiguous strides of the output with those dims removed (keepdim only inserts
// size-1 dims, which does not change the layout).
std::vector<int64_t> reduce_map_strides(const Shape& in, const std::vector<int64_t>& dims) {
  std::vector<bool> reduced(in.size(), false);
  for (int64_t d : dims) reduced[static_cast<size_t>(d)] = true;
  std::vector<int64_t> st(in.size(), 0);
  int64_t acc = 1;
  for (size_t d = in.size(); d-- > 0;) {
    if (reduced[d]) continue;
    st[d] = acc;
    acc *= in[d];
  }
  return st;
}

// Folds every input element into its output accumulator with `fold`, starting from `init`.
template <class T, class Acc, class F>
void reduce_into(const ConstArray& x, const std::vector<int64_t>& dims, MutArray out, Acc init,
                 F fold) {
  const Shape& in = *x.shape;
  // A plain array, not std::vector, whose bool specialisation has no element references.
  size_t n_out = static_cast<size_t>(numel(*out.shape));
  std::unique_ptr<Acc[]> acc = std::make_unique<Acc[]>(n_out);
  std::fill(acc.get(), acc.get() + n_out, init);
  StridedWalk<1> walk(in, {reduce_map_strides(in, dims)});
  const T* px = data_of<T>(x);
  int64_t n = numel(in);
  for (int64_t i = 0; i < n; ++i, walk.next()) {
    Acc& a = acc[static_cast<size_t>(walk.offset(0))];
    a = fold(a, static_cast<Acc>(px[i]));
  }
  T* o = data_of<T>(out);
  for (size_t i = 0; i < n_out; ++i) o[i] = convert<T>(acc[i]);
}

template <class T>
T lowest_value() {
  if constexpr (std::is_floating_point_v<T>) return -std::numeric_limits<T>::infinity();
  return std::numeric_limits<T>::lowest();
}
template <class T>
T highest_value() {
  if constexpr (std::is_floating_point_v<T>) return std::numeric_limits<T>::infinity();
  return std::numeric_limits<T>::max();
}

template <class T>
void reduce_typed(OpKind op, const std::vector<int64_t>& dims, const ConstArray& x, MutArray out) {
  // Floating sums and products accumulate in double; integers in their own type (wrapping).
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
  switch (op) {
    case OpKind::ReduceSum:
      return reduce_into<T, Acc>(x, dims, out, Acc(0),
                                 [](Acc a, Acc v) { return add_values(a, v); });
    case OpKind::ReduceProd:
      return reduce_into<T, Acc>(x, dims, out, Acc(1),
                                 [](Acc a, Acc v) { return mul_values(a, v); });
    // The identities are -inf/+inf (lowest/max for integers; false/true, i.e. any/all, on bool),
    // so a reduced dim holding only -inf still yields -inf.
    case OpKind::ReduceMax:
      return reduce_into<T, T>(x, dims, out, lowest_value<T>(),
                               [](T a, T v) { return max_values(a, v); });
    case OpKind::ReduceMin:
      return reduce_into<T, T>(x, dims, out, highest_value<T>(),
                               [](T a, T v) { return min_values(a, v); });
    default: break;
  }
  throw Error("interp: " + std::string(ir::op_name(op)) + " is not a reduction");
}

// First index of the extreme along one dim (or over the flattened input when `dims` is empty).
// A NaN is more extreme than any number and the first NaN wins, as in PyTorch.
template <class T>
void arg_extreme(bool is_max, const std::vector<int64_t>& dims, const ConstArray& x, MutArray out) {
  const Shape& in = *x.shape;
  int64_t outer = 1, size = numel(in), inner = 1;
  if (!dims.empty()) {
    size_t dim = static_cast<size_t>(dims[0]);
    outer = 1;
    for (size_t d = 0; d < dim; ++d) outer *= in[d];
    size = in[dim];
    inner = 1;
    for (size_t d = dim + 1; d < in.size(); ++d) inner *= in[d];
  }
  const T* px = data_of<T>(x);
  int64_t* o = data_of<int64_t>(out);
  for (int64_t a = 0; a < outer; ++a) {
    for (int64_t c = 0; c < inner; ++c) {
      const T* line = px + a * size * inner + c;
      int64_t best = 0;
      for (int64_t j = 1; j < size && !is_nan(line[best * inner]); ++j) {
        T v = line[j * inner], b = line[best * inner];
        if (is_nan(v) || (is_max ? v > b : v < b)) best = j;
      }
      o[a * inner + c] = best;
    }
  }
}

}  // namespace

void run_reduction(OpKind op, const ir::Attrs& attrs, const ConstArray& x, MutArray out) {
  dispatch(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (op == OpKind::ArgMax || op == OpKind::ArgMin) {
      arg_extreme<T>(op == OpKind::ArgMax, std::get<ir::ReduceAttrs>(attrs).dims, x, out);
    } else {
      reduce_typed<T>(op, std::get<ir::ReduceAttrs>(attrs).dims, x, out);
    }
  });
}

// out[b, i, j] = sum_p a[b, i, p] * b[b, p, j], with the batch dims of a and b broadcast to the
// output's. Floating products accumulate in double, integers wrap in their own type.
void run_matmul(const ConstArray& a, const ConstArray& b, MutArray out) {
  if (is_reduced_float(out.dtype)) {
    // bfloat16 products (the frontend widens float16 ones): the sums in double as for float32.
    matmul_through_float32(a, b, out, [](const ConstArray& fa, const ConstArray& fb, MutArray fo) {
      run_matmul(fa, fb, fo);
      return true;
    });
    return;
  }
  const Shape& sa = *a.shape;
  const Shape& sb = *b.shape;
  const Shape& so = *out.shape;
  int64_t m = sa[sa.size() - 2], k = sa[sa.size() - 1], n = sb[sb.size() - 1];
  Shape batch(so.begin(), so.end() - 2);
  std::vector<int64_t> stride_a = broadcast_strides(Shape(sa.begin(), sa.end() - 2), batch);
  std::vector<int64_t> stride_b = broadcast_strides(Shape(sb.begin(), sb.end() - 2), batch);
  for (int64_t& s : stride_a) s *= m * k;
  for (int64_t& s : stride_b) s *= k * n;
  int64_t batches = numel(batch);
  dispatch(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
    const T* pa = data_of<T>(a);
    const T* pb = data_of<T>(b);
    T* o = data_of<T>(out);
    StridedWalk<2> walk(batch, {stride_a, stride_b});
    for (int64_t bi = 0; bi < batches; ++bi, walk.next()) {
      const T* ma = pa + walk.offset(0);
      const T* mb = pb + walk.offset(1);
      T* mo = o + bi * m * n;
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          Acc acc = 0;
          for (int64_t p = 0; p < k; ++p) {
            acc = add_values(
                acc, mul_values(static_cast<Acc>(ma[i * k + p]), static_cast<Acc>(mb[p * n + j])));
          }
          mo[i * n + j] = convert<T>(acc);
        }
      }
    }
  });
}

bool matmul_through_float32(
    const ConstArray& a, const ConstArray& b, MutArray out,
    const std::function<bool(const ConstArray&, const ConstArray&, MutArray)>& f32) {
  std::vector<float> wa = widen(a), wb = widen(b), wo(static_cast<size_t>(numel(*out.shape)));
  if (!f32({DType::Float32, a.shape, wa.data()}, {DType::Float32, b.shape, wb.data()},
           {DType::Float32, out.shape, wo.data()})) {
    return false;
  }
  auto* o = static_cast<uint16_t*>(out.data);
  for (size_t i = 0; i < wo.size(); ++i) o[i] = to_reduced(out.dtype, wo[i]);
  return true;
}

}  // namespace lz::interp
