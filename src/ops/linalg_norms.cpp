// Norms (include/lazuli/ops.h): torch.norm, torch.linalg.vector_norm / matrix_norm / norm, in
// public ops. Where a norm is zero its gradient is 0, as PyTorch's (the plain derivative of
// sqrt(sum(x^2)) there is 0/0).
#include <cmath>
#include <limits>
#include <set>

#include "core/shape.h"
#include "lazuli/ops.h"
#include "ops/frontend.h"

namespace lz {
using frontend::desc;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::string ord_str(double ord) {
  if (std::isinf(ord)) return ord > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", ord);
  return buf;
}

// x as the dtype the norm is computed in: `dtype` when given, else x's own (floating) dtype.
Tensor norm_input(const char* op, const Tensor& x, std::optional<DType> dtype) {
  if (!x.defined()) throw ValueError(std::string(op) + ": the input is an undefined tensor");
  if (!is_floating(x.dtype())) {
    throw TypeError(desc(op, x) + ": expects a floating-point tensor (convert with .float())");
  }
  if (dtype && !is_floating(*dtype)) {
    throw TypeError(desc(op, x) + ": dtype must be floating point, got " +
                    std::string(dtype_name(*dtype)));
  }
  return dtype ? x.to(*dtype) : x;
}

IntList checked_dims(const char* op, const Tensor& x, const IntList& dims) {
  std::set<int64_t> seen;
  IntList out;
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, x.dim(), op);
    if (!seen.insert(w).second) {
      throw ValueError(desc(op, x) + ": dim " + std::to_string(w) + " appears more than once");
    }
    out.push_back(w);
  }
  return out;
}

// f(v) where v != 0 and 0 where v == 0, with no gradient through f at 0 (where f' is infinite).
template <typename F>
Tensor zero_safe(const Tensor& v, F f) {
  Tensor zero = eq(v, 0);
  return where(zero, zeros({}, v.dtype()), f(where(zero, ones({}, v.dtype()), v)));
}

Tensor vector_norm_impl(const Tensor& x, double ord, const IntList& dims, bool keepdim) {
  if (std::isnan(ord)) throw ValueError(desc("linalg.vector_norm", x) + ": ord is nan");
  if (ord == kInf) return amax(abs(x), dims, keepdim);
  if (ord == -kInf) return amin(abs(x), dims, keepdim);
  if (ord == 0) return sum(ne(x, 0).to(x.dtype()), dims, keepdim);
  if (ord == 1) return sum(abs(x), dims, keepdim);
  if (ord == 2)
    return zero_safe(sum(x * x, dims, keepdim), [](const Tensor& s) { return sqrt(s); });
  Tensor a = abs(x);
  // A negative ord needs |0|^ord = inf (the norm is then 0); a positive one masks 0 to keep the
  // gradient finite.
  Tensor powered =
      ord < 0 ? pow(a, ord) : zero_safe(a, [ord](const Tensor& v) { return pow(v, ord); });
  return zero_safe(sum(powered, dims, keepdim),
                   [ord](const Tensor& s) { return pow(s, 1.0 / ord); });
}

// Removes the (sorted, distinct) dims a keepdim reduction kept.
Tensor drop_dims(const Tensor& y, int64_t d0, int64_t d1) {
  IntList shape;
  for (int64_t i = 0; i < y.dim(); ++i) {
    if (i != d0 && i != d1) shape.push_back(y.shape()[i]);
  }
  return reshape(y, shape);
}

Tensor matrix_norm_impl(const char* op, const Tensor& x, double ord, const std::string& name,
                        const IntList& dims, bool keepdim, std::optional<DType> dtype) {
  Tensor v = norm_input(op, x, dtype);
  if (x.dim() < 2) {
    throw ValueError(desc(op, x) + ": expects a tensor with at least 2 dims");
  }
  if (dims.size() != 2) {
    throw ValueError(desc(op, x) + ": dim must be a pair of dims, got " + shape_str(dims));
  }
  IntList ds = checked_dims(op, x, dims);
  if (name == "fro") return vector_norm_impl(v, 2.0, ds, keepdim);
  if (!name.empty() || !(std::fabs(ord) == 1 || std::isinf(ord))) {
    std::string o = name.empty() ? ord_str(ord) : "'" + name + "'";
    if (name == "nuc" || (name.empty() && std::fabs(ord) == 2)) {
      throw ValueError(desc(op, x) + ": ord " + o +
                       " needs singular values, which Lazuli does "
                       "not compute; ord may be 'fro', 1, -1, inf or -inf");
    }
    throw ValueError(desc(op, x) + ": ord " + o +
                     " is not a matrix norm; ord may be 'fro', "
                     "'nuc', 1, -1, 2, -2, inf or -inf");
  }
  // ord +-1: the max/min over columns (dims[1]) of the sums over rows (dims[0]); +-inf swaps them.
  int64_t summed = std::isinf(ord) ? ds[1] : ds[0], extreme = std::isinf(ord) ? ds[0] : ds[1];
  Tensor sums = sum(abs(v), {summed}, true);
  Tensor y = ord > 0 ? amax(sums, {extreme}, true) : amin(sums, {extreme}, true);
  return keepdim ? y : drop_dims(y, std::min(ds[0], ds[1]), std::max(ds[0], ds[1]));
}

}  // namespace

namespace linalg {

Tensor vector_norm(const Tensor& x, double ord, const IntList& dims, bool keepdim,
                   std::optional<DType> dtype) {
  Tensor v = norm_input("linalg.vector_norm", x, dtype);
  IntList ds = checked_dims("linalg.vector_norm", x, dims);
  if (x.numel() == 0 && (ord < 0 || std::isinf(ord))) {
    throw ValueError(desc("linalg.vector_norm", x) + ": ord " + ord_str(ord) +
                     " of an empty tensor is not defined");
  }
  return vector_norm_impl(v, ord, ds, keepdim);
}

Tensor matrix_norm(const Tensor& x, const std::string& ord, const IntList& dims, bool keepdim,
                   std::optional<DType> dtype) {
  if (ord != "fro" && ord != "nuc") {
    throw ValueError("linalg.matrix_norm: ord must be 'fro' or 'nuc' (or a number), got '" + ord +
                     "'");
  }
  return matrix_norm_impl("linalg.matrix_norm", x, 0, ord, dims, keepdim, dtype);
}

Tensor matrix_norm(const Tensor& x, double ord, const IntList& dims, bool keepdim,
                   std::optional<DType> dtype) {
  return matrix_norm_impl("linalg.matrix_norm", x, ord, "", dims, keepdim, dtype);
}

Tensor norm(const Tensor& x, std::optional<double> ord, const IntList& dims, bool keepdim,
            std::optional<DType> dtype) {
  const char* op = "linalg.norm";
  if (!x.defined()) throw ValueError(std::string(op) + ": the input is an undefined tensor");
  if (dims.size() > 2) {
    throw ValueError(desc(op, x) + ": dim must be one dim or a pair, got " + shape_str(dims));
  }
  if (!ord) return vector_norm(x, 2.0, dims, keepdim, dtype);
  if (dims.size() == 1 || (dims.empty() && x.dim() == 1)) {
    return vector_norm(x, *ord, dims, keepdim, dtype);
  }
  if (dims.empty() && x.dim() != 2) {
    throw ValueError(desc(op, x) + ": with ord and no dim, the input must be 1-D or 2-D");
  }
  return matrix_norm_impl(op, x, *ord, "", dims.empty() ? IntList{-2, -1} : dims, keepdim, dtype);
}

Tensor norm(const Tensor& x, double ord, const IntList& dims, bool keepdim,
            std::optional<DType> dtype) {
  return norm(x, std::optional<double>(ord), dims, keepdim, dtype);
}

Tensor norm(const Tensor& x, const std::string& ord, const IntList& dims, bool keepdim,
            std::optional<DType> dtype) {
  const char* op = "linalg.norm";
  if (!x.defined()) throw ValueError(std::string(op) + ": the input is an undefined tensor");
  if (ord != "fro" && ord != "nuc") {
    throw ValueError(desc(op, x) + ": ord must be 'fro' or 'nuc' (or a number), got '" + ord + "'");
  }
  if (dims.size() == 1 || (dims.empty() && x.dim() != 2)) {
    throw ValueError(desc(op, x) + ": ord '" + ord +
                     "' is a matrix norm: it needs a 2-D input or "
                     "a pair of dims");
  }
  return matrix_norm_impl(op, x, 0, ord, dims.empty() ? IntList{-2, -1} : dims, keepdim, dtype);
}

}  // namespace linalg

Tensor norm(const Tensor& x, double p, const IntList& dims, bool keepdim,
            std::optional<DType> dtype) {
  return linalg::vector_norm(x, p, dims, keepdim, dtype);
}

Tensor norm(const Tensor& x, const std::string& p, const IntList& dims, bool keepdim,
            std::optional<DType> dtype) {
  if (!x.defined()) throw ValueError("norm: the input is an undefined tensor");
  if (p == "fro" && dims.size() <= 2) return linalg::vector_norm(x, 2.0, dims, keepdim, dtype);
  if (p == "fro" || p == "nuc") {
    IntList ds = dims;
    if (ds.empty()) {
      for (int64_t i = 0; i < x.dim(); ++i) ds.push_back(i);
    }
    return matrix_norm_impl("norm", x, 0, p, ds, keepdim, dtype);
  }
  throw ValueError(desc("norm", x) + ": p must be a number, 'fro' or 'nuc', got '" + p + "'");
}

}  // namespace lz
