// Table entries: reductions, softmax, normalization and matrix products (aten/table.h).
//
// ATen's reductions take `dim` as None, an int or a list, where an empty list means every dim
// (sum, amax); a 0-d tensor accepts dim 0 or -1. reduce_dims() maps all of these onto Lazuli's
// (an empty list = every dim).
#include <cmath>
#include <limits>

#include "aten/entries.h"
#include "lazuli/nn.h"
#include "ops/nn_normalization.h"

namespace lz::aten {
namespace {

Tensor with_dtype(const Arg& x, const Arg& dtype) {
  const Tensor& t = x.tensor();
  return dtype.is_none() ? t : cast(Operand(t), dtype.dtype()).tensor();
}

// sum and prod with a dtype argument give that dtype: Lazuli's sum an int32 input in int64, and
// the cast back wraps as eager's int32 accumulation does.
Tensor in_dtype(const Tensor& result, const Arg& dtype) {
  return dtype.is_none() || result.dtype() == dtype.dtype() ? result : result.to(dtype.dtype());
}

template <Tensor (*F)(const Tensor&, const IntList&, bool)>
Arg reduce_to(const Args& a, Call&) {  // (self, *, dtype)
  return in_dtype(F(with_dtype(a[0], a[1]), {}, false), a[1]);
}

template <Tensor (*F)(const Tensor&, const IntList&, bool)>
Arg reduce_dims_to(const Args& a, Call&) {  // (self, dim, keepdim, *, dtype)
  const Tensor& x = a[0].tensor();
  return in_dtype(F(with_dtype(a[0], a[3]), reduce_dims(a[1], x.dim()), a[2].to_bool()), a[3]);
}

std::optional<std::string> dtype_when(const Arg& dtype) { return dtype_arg_refused(dtype); }

// mean takes a floating input or dtype.
std::optional<std::string> mean_when(const Arg& x, const Arg& dtype) {
  if (auto r = dtype_arg_refused(dtype)) return r;
  DType dt = dtype.is_none() ? dtype_of(x) : dtype.dtype();
  if (!is_floating(dt)) return "mean in " + std::string(dtype_name(dt));
  return std::nullopt;
}

std::optional<std::string> var_when(const Args& a) {
  const Arg& correction = a[2];
  if (!correction.is_none() && correction.kind() == Arg::Kind::Double &&
      correction.to_double() != static_cast<double>(static_cast<int64_t>(correction.to_double()))) {
    return "a fractional correction (" + correction.describe() + ")";
  }
  return std::nullopt;
}

// var / std (self, dim, *, correction, keepdim), an integer correction (None: 1).
template <Tensor (*F)(const Tensor&, const IntList&, int64_t, bool)>
Tensor spread(const Args& a) {
  const Tensor& x = a[0].tensor();
  int64_t c = a[2].is_none() ? 1 : static_cast<int64_t>(a[2].to_double());
  return F(x, reduce_dims(a[1], x.dim()), c, a[3].to_bool());
}
Tensor var_of(const Args& a) { return spread<var>(a); }

// linalg_vector_norm(self, ord, dim, keepdim, *, dtype): eager raises for a dtype narrower than
// the input's, a repeated dim, and ord inf or negative over an empty dim (no identity).
std::optional<std::string> vector_norm_when(const Args& a) {
  if (auto r = dtype_arg_refused(a[4])) return r;
  DType in = dtype_of(a[0]);
  if (!a[4].is_none()) {
    DType want = a[4].dtype();
    if (!is_floating(want)) return "dtype " + std::string(dtype_name(want));
    if (promote_types(in, want) != want) {
      return "dtype " + std::string(dtype_name(want)) + " narrower than the " +
             std::string(dtype_name(in)) + " input";
    }
  }
  const Shape& shape = a[0].tensor_shape();
  const int64_t rank = a[0].tensor_dim();
  IntList dims = reduce_dims(a[2], rank);
  if (a[2].is_list() && rank == 0) dims = a[2].ints();  // [0, -1] on a 0-d tensor repeats
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(rank, 1)), false);
  for (int64_t d : dims) {
    int64_t w = wrap(d, rank);
    if (w < 0 || w >= static_cast<int64_t>(seen.size())) {
      return "dim " + std::to_string(d) + " out of range";
    }
    if (seen[w]) return "dim " + std::to_string(w) + " repeated";
    seen[w] = true;
  }
  double ord = a[1].to_double();
  if (a[0].tensor_numel() == 0 && (ord < 0 || std::isinf(ord))) {
    for (int64_t d = 0; d < rank; ++d) {
      if ((dims.empty() || seen[d]) && shape[d] == 0) {
        return "ord " + a[1].describe() + " over an empty dim";
      }
    }
  }
  return std::nullopt;
}

// lz::linalg::vector_norm (its gradient at a zero norm is 0). Two cases it refuses have an answer
// in eager that needs no norm: ord inf or negative on an empty tensor whose reduced dims are not
// empty (an empty result), and ord NaN (NaN; 0 for an empty tensor); ord 1 gives their shapes.
// A 16-bit dtype (then the input's own) is computed in float32 and rounded once, as eager.
Arg vector_norm_entry(const Args& a, Call&) {
  const Tensor& x = a[0].tensor();
  double ord = a[1].to_double();
  bool nan_ord = std::isnan(ord);
  if (nan_ord || (x.numel() == 0 && (ord < 0 || std::isinf(ord)))) ord = 1;
  std::optional<DType> dtype;
  if (!a[4].is_none()) dtype = a[4].dtype();
  bool sixteen_bit = dtype && is_reduced_float(*dtype);
  Tensor n = linalg::vector_norm(x, ord, reduce_dims(a[2], x.dim()), a[3].to_bool(),
                                 sixteen_bit ? std::optional<DType>(DType::Float32) : dtype);
  if (nan_ord && x.numel() > 0) n = mul(n, std::numeric_limits<double>::quiet_NaN());
  return sixteen_bit ? n.to(*dtype) : n;
}

// max.dim / min.dim: (values, indices); a 0-d input is its own value at index 0.
template <std::pair<Tensor, Tensor> (*F)(const Tensor&, int64_t, bool)>
Arg extreme_dim(const Args& a, Call&) {
  const Tensor& x = a[0].tensor();
  if (x.dim() == 0) return std::vector<Arg>{x.clone(), zeros({}, DType::Int64)};
  auto [values, indices] = F(x, a[1].to_int(), a[2].to_bool());
  return std::vector<Arg>{values, indices};
}

template <Tensor (*F)(const Tensor&, std::optional<int64_t>, bool)>
Arg arg_extreme(const Args& a, Call&) {
  const Tensor& x = a[0].tensor();
  bool keepdim = a[2].to_bool();
  if (x.dim() == 0) return zeros({}, DType::Int64);
  if (a[1].is_none() && keepdim) {
    return F(reshape(x, {-1}), 0, false).reshape(IntList(static_cast<size_t>(x.dim()), 1));
  }
  return F(x, a[1].is_none() ? std::nullopt : std::optional<int64_t>(a[1].to_int()), keepdim);
}

template <Tensor (*F)(const Tensor&, const IntList&, bool)>
Arg reduce(const Args& a, Call&) {
  const Tensor& x = a[0].tensor();
  return F(x, reduce_dims(a[1], x.dim()), a[2].to_bool());
}

// all.dims / any.dims: dim None is every dim, but an empty list is none (a bool copy).
template <Tensor (*F)(const Tensor&, const IntList&, bool)>
Arg reduce_listed_dims(const Args& a, Call& call) {
  if (a[1].is_list() && a[1].list().empty()) return ne(a[0].tensor(), 0);
  return reduce<F>(a, call);
}

std::optional<std::string> softmax_when(const Args& a) {
  if (a[2].to_bool()) return "half_to_float";
  return std::nullopt;
}

Arg native_layer_norm(const Args& a, Call&) {
  const Tensor& x = a[0].tensor();
  IntList shape = a[1].ints();
  Tensor weight = a[2].is_none() ? Tensor() : a[2].tensor();
  Tensor bias = a[3].is_none() ? Tensor() : a[3].tensor();
  double eps = a[4].to_double();
  if (shape.empty()) {  // normalizing over no dims: each element is its own mean
    Tensor mean = add(x, 0.0);
    Tensor rstd = rsqrt(add(mul(sub(x, mean), 0.0), eps));
    Tensor out = mul(sub(x, mean), rstd);
    if (weight.defined()) out = mul(out, weight);
    if (bias.defined()) out = add(out, bias);
    return std::vector<Arg>{out, mean, rstd};
  }
  internal::LayerNormStats s = internal::layer_norm_with_stats(x, shape, weight, bias, eps);
  return std::vector<Arg>{s.out, s.mean, s.rstd};
}

// _softmax_backward_data / _log_softmax_backward_data(grad_output, output, dim, input_dtype): eager
// computes in the gradient's dtype; another input_dtype is the half_to_float case.
std::optional<std::string> softmax_backward_when(const Args& a) {
  if (auto r = dtype_arg_refused(a[3])) return r;
  if (a[3].dtype() != dtype_of(a[0])) {
    return "input_dtype " + std::string(dtype_name(a[3].dtype())) + " with a " +
           std::string(dtype_name(dtype_of(a[0]))) + " gradient";
  }
  return std::nullopt;
}

// The sum over the softmax's dim, kept (a 0-d tensor's dim is every dim).
Tensor sum_over(const Tensor& x, const Arg& dim) { return sum(x, reduce_dims(dim, x.dim()), true); }

std::optional<std::string> safe_softmax_when(const Args& a) {
  if (auto r = dtype_arg_refused(a[2])) return r;
  if (!a[2].is_none() && !is_floating(a[2].dtype())) {
    return "dtype " + std::string(dtype_name(a[2].dtype()));
  }
  return std::nullopt;
}

// _safe_softmax(self, dim, dtype): softmax, 0 on a row of -inf only (eager's attention masks).
Arg safe_softmax(const Args& a, Call&) {
  Tensor x = with_dtype(a[0], a[2]);
  Tensor out = nn::softmax(x, a[1].to_int());
  Tensor masked =
      all(eq(x, -std::numeric_limits<double>::infinity()), reduce_dims(a[1], x.dim()), true);
  return where(masked, zeros({}, out.dtype()), out);
}

// native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias,
// output_mask), as PyTorch's decomposition: with x_hat = (x - mean) * rstd and g = grad * weight,
// dx = rstd / N * (N g - sum(g) - x_hat sum(g x_hat)) over the normalized dims; dweight and
// dbias sum over the others. A gradient the mask leaves out (or of a missing weight or bias) is
// None.
Arg native_layer_norm_backward(const Args& a, Call&) {
  const Tensor& grad = a[0].tensor();
  const Tensor& x = a[1].tensor();
  const int64_t k = static_cast<int64_t>(a[2].ints().size());
  const int64_t axis = x.dim() - k;
  IntList inner, outer;
  for (int64_t d = 0; d < x.dim(); ++d) (d < axis ? outer : inner).push_back(d);
  // mean and rstd as native_layer_norm gives them: the outer dims, then k dims of size 1.
  IntList stat_shape(x.shape().begin(), x.shape().begin() + axis);
  stat_shape.resize(static_cast<size_t>(x.dim()), 1);
  Tensor mean = reshape(a[3].tensor(), stat_shape);
  Tensor rstd = reshape(a[4].tensor(), stat_shape);
  Tensor weight = a[5].is_none() ? Tensor() : a[5].tensor();
  const std::vector<Arg>& mask = a[7].list();
  // Sums over no dims (an empty normalized_shape, or no outer dims) are the tensor itself.
  auto sum_of = [](const Tensor& t, const IntList& dims, bool keep) {
    return dims.empty() ? t : sum(t, dims, keep);
  };
  int64_t n = 1;
  for (int64_t d : inner) n *= x.shape()[static_cast<size_t>(d)];
  Tensor x_hat = mul(sub(x, mean), rstd);
  Tensor grad_input, grad_weight, grad_bias;
  if (mask[0].to_bool()) {
    Tensor g = weight.defined() ? mul(grad, weight) : grad;
    Tensor inner_sum = sub(sub(mul(g, static_cast<double>(n)), sum_of(g, inner, true)),
                           mul(x_hat, sum_of(mul(g, x_hat), inner, true)));
    grad_input = mul(div(rstd, static_cast<double>(n)), inner_sum);
  }
  if (mask[1].to_bool() && weight.defined()) grad_weight = sum_of(mul(grad, x_hat), outer, false);
  if (mask[2].to_bool() && !a[6].is_none()) {
    grad_bias = outer.empty() ? grad.clone() : sum(grad, outer, false);
  }
  return std::vector<Arg>{grad_input, grad_weight, grad_bias};
}

// addmm / baddbmm: beta * bias + alpha * (a @ b); beta == 0 ignores the bias (NaN included).
Arg addmm(const Args& a, Call&) {
  const Tensor& bias = a[0].tensor();
  Tensor p = matmul(a[1].tensor(), a[2].tensor());
  // beta and alpha in the product's dtype, as eager converts them (0.6 on integers is 0).
  const Scalar beta = cast(operand(a[3]), p.dtype()).scalar();
  const Scalar alpha = cast(operand(a[4]), p.dtype()).scalar();
  Shape shape = broadcast_shapes(p.shape(), bias.shape(), "addmm");
  // A zero factor drops its term whatever it holds (NaN included), as eager's BLAS call does.
  if (alpha.to_double() == 0.0) {
    if (beta.to_double() == 0.0) return zeros(shape, p.dtype());
    return broadcast_to(beta.to_double() == 1.0 ? bias.clone() : mul(bias, beta), shape);
  }
  if (alpha.to_double() != 1.0) p = mul(p, alpha);
  if (beta.to_double() == 0.0) return broadcast_to(p, shape);
  return add(p, beta.to_double() == 1.0 ? Operand(bias) : Operand(mul(bias, beta)));
}

// softmax / log_softmax over a dim of size 0: nothing to normalize (amax would refuse).
template <Tensor (*F)(const Tensor&, int64_t)>
Arg softmax_entry(const Args& a, Call&) {
  const Tensor& x = a[0].tensor();
  if (x.numel() == 0) return x.clone();
  return F(x, a[1].to_int());
}

Arg matmul_entry(const Args& a, Call&) { return matmul(a[0].tensor(), a[1].tensor()); }

}  // namespace

void add_reductions(TableBuilder& b) {
  const char* in_int64 = "bool and integers sum in int64";
  b.add({"aten.sum.default"}, kAll, reduce_to<sum>,
        {.when = [](const Args& a) { return dtype_when(a[1]); }, .note = in_int64});
  b.add({"aten.sum.dim_IntList"}, kAll, reduce_dims_to<sum>,
        {.when = [](const Args& a) { return dtype_when(a[3]); }, .note = in_int64});
  b.add(
      {"aten.mean.default"}, kAll, reduce_to<mean>,
      {.when = [](const Args& a) { return mean_when(a[0], a[1]); }, .note = "float result dtype"});
  b.add(
      {"aten.mean.dim"}, kAll, reduce_dims_to<mean>,
      {.when = [](const Args& a) { return mean_when(a[0], a[3]); }, .note = "float result dtype"});
  b.add({"aten.prod.default"}, kAll, reduce_to<prod>,
        {.when = [](const Args& a) { return dtype_when(a[1]); }});
  b.add({"aten.prod.dim_int"}, kAll, reduce_dims_to<prod>,
        {.when = [](const Args& a) { return dtype_when(a[3]); }});
  b.add({"aten.amax.default"}, kAll, reduce<amax>, {.note = "NaN propagates"});
  b.add({"aten.amin.default"}, kAll, reduce<amin>, {.note = "NaN propagates"});
  b.add({"aten.max.default"}, kAll, [](const Args& a, Call&) -> Arg { return amax(a[0].tensor()); },
        {.note = "NaN propagates"});
  b.add({"aten.min.default"}, kAll, [](const Args& a, Call&) -> Arg { return amin(a[0].tensor()); },
        {.note = "NaN propagates"});
  b.add({"aten.max.dim"}, kAll, extreme_dim<max>,
        {.note = "(values, indices); the first index of the maximum"});
  b.add({"aten.min.dim"}, kAll, extreme_dim<min>,
        {.note = "(values, indices); the first index of the minimum"});
  b.add({"aten.argmax.default"}, kNumbers, arg_extreme<argmax>,
        {.note = "the first index of the maximum"});
  b.add({"aten.argmin.default"}, kNumbers, arg_extreme<argmin>,
        {.note = "the first index of the minimum"});
  b.add({"aten.var.correction"}, kFloats, [](const Args& a, Call&) -> Arg { return var_of(a); },
        {.when = var_when, .note = "integer corrections"});
  b.add({"aten.var_mean.correction"}, kFloats,
        [](const Args& a, Call&) -> Arg {
          const Tensor& x = a[0].tensor();
          return std::vector<Arg>{var_of(a), mean(x, reduce_dims(a[1], x.dim()), a[3].to_bool())};
        },
        {.when = var_when, .note = "integer corrections"});
  b.add({"aten.std.correction"}, kFloats,
        [](const Args& a, Call&) -> Arg { return spread<lz::std>(a); },
        {.when = var_when, .note = "integer corrections (lz::std)"});
  b.add({"aten.linalg_vector_norm.default"}, kFloats, vector_norm_entry,
        {.when = vector_norm_when,
         .note = "any ord (lz::linalg::vector_norm: gradient 0 at a zero norm); a dtype no "
                 "narrower than the input's"});
  b.add({"aten.all.default"}, kAll, [](const Args& a, Call&) -> Arg { return all(a[0].tensor()); });
  b.add({"aten.all.dim"}, kAll, reduce<all>);
  b.add({"aten.all.dims"}, kAll, reduce_listed_dims<all>);
  b.add({"aten.any.default"}, kAll, [](const Args& a, Call&) -> Arg { return any(a[0].tensor()); });
  b.add({"aten.any.dim"}, kAll, reduce<any>);
  b.add({"aten.any.dims"}, kAll, reduce_listed_dims<any>);

  b.add({"aten._softmax.default"}, kFloats, softmax_entry<nn::softmax>,
        {.when = softmax_when, .note = "exp(x - max) / sum (lz::nn::softmax)"});
  b.add({"aten._log_softmax.default"}, kFloats, softmax_entry<nn::log_softmax>,
        {.when = softmax_when, .note = "(x - max) - log(sum(exp(x - max))) (lz::nn::log_softmax)"});
  b.add({"aten.logsumexp.default"}, kFloats, reduce<logsumexp>,
        {.note = "max + log(sum(exp(x - max))); all -inf gives -inf"});
  b.add({"aten.native_layer_norm.default"}, kFloats, native_layer_norm,
        {.note = "(out, mean, rstd); biased variance (lz::nn::layer_norm)"});
  b.add({"aten._safe_softmax.default"}, kFloats, safe_softmax,
        {.when = safe_softmax_when, .note = "softmax; a row of -inf only gives 0"});

  // The backward ops eager's autograd calls (a graph decomposed with the core decompositions has
  // their formulas instead).
  b.add({"aten._softmax_backward_data.default"}, kFloats,
        [](const Args& a, Call&) -> Arg {
          const Tensor& grad = a[0].tensor();
          const Tensor& y = a[1].tensor();
          return mul(y, sub(grad, sum_over(mul(grad, y), a[2])));
        },
        {.when = softmax_backward_when, .note = "y * (grad - sum(grad * y)); no half_to_float"});
  b.add({"aten._log_softmax_backward_data.default"}, kFloats,
        [](const Args& a, Call&) -> Arg {
          const Tensor& grad = a[0].tensor();
          return sub(grad, mul(exp(a[1].tensor()), sum_over(grad, a[2])));
        },
        {.when = softmax_backward_when, .note = "grad - exp(y) * sum(grad); no half_to_float"});
  b.add({"aten.native_layer_norm_backward.default"}, kFloats, native_layer_norm_backward,
        {.note = "(grad_input, grad_weight, grad_bias); the masked-out gradients are None"});

  b.add({"aten.mm.default", "aten.bmm.default"}, kNumbers, matmul_entry,
        {.flags = kBFloat16Native});
  b.add({"aten.addmm.default"}, kNumbers, addmm,
        {.note = "beta == 0 ignores the bias (NaN included), as eager", .flags = kBFloat16Native});
  b.add({"aten.baddbmm.default"}, kNumbers, addmm,
        {.note = "beta == 0 ignores the input (NaN included), as eager", .flags = kBFloat16Native});
  b.add({"aten.dot.default"}, kFloats,
        [](const Args& a, Call&) -> Arg { return sum(mul(a[0].tensor(), a[1].tensor())); });
  b.add({"aten.mv.default"}, kFloats, matmul_entry);
}

}  // namespace lz::aten
