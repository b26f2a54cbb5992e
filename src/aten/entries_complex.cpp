// ATen table: complex values, as far as the FFT layers of real models need them (FNet's
// fftn(x).real and its gradient). Lazuli's tensors have no complex dtype: inside one front-end
// call sequence a complex tensor of shape S is an Arg::complex over a real tensor of shape
// S + [2] (view_as_real's layout), so view_as_real and view_as_complex are the identity on the
// pairs and an FFT is real arithmetic on them. A front end that cannot hold complex values (the
// lazy device) leaves every call involves_complex() names to PyTorch.
#include <cmath>
#include <numbers>

#include "aten/entries.h"

namespace lz::aten {
namespace {

Tensor real_part(const Tensor& pairs) { return select(pairs, -1, 0); }
Tensor imag_part(const Tensor& pairs) { return select(pairs, -1, 1); }
Tensor pairs_of(const Tensor& re, const Tensor& im) { return stack({re, im}, -1); }

// The DFT matrices of size n: cos and sin of 2 pi j k / n, computed in float64 (j k < n^2 is
// exact there, and the angle's rounding, about n 1e-16, stays far below float32's; an integer
// remainder would run on the reference kernel) and rounded once to `dtype`.
struct Dft {
  Tensor cos, sin;
};
Dft dft_matrices(int64_t n, DType dtype) {
  Tensor k = arange(Scalar(n)).to(DType::Float64);
  Tensor angle =
      mul(mul(unsqueeze(k, 1), unsqueeze(k, 0)), 2.0 * std::numbers::pi / static_cast<double>(n));
  return {lz::cos(angle).to(dtype), lz::sin(angle).to(dtype)};
}

// One complex DFT along `dim` of (re, im), sign -1 forward, +1 backward (inverse, unscaled):
// X[j] = sum_k x[k] (cos - sign i sin)... written out: with W = C + sign i S,
// re' = re C - sign im S and im' = im C + sign re S (C and S are symmetric).
void dft_along(Tensor& re, Tensor& im, int64_t dim, bool forward) {
  const int64_t n = re.shape()[static_cast<size_t>(dim)];
  if (n == 1) return;
  Dft w = dft_matrices(n, re.dtype());
  const int64_t last = re.dim() - 1;
  Tensor r = transpose(re, dim, last), i = transpose(im, dim, last);
  Tensor rc = matmul(r, w.cos), rs = matmul(r, w.sin);
  Tensor ic = matmul(i, w.cos), is = matmul(i, w.sin);
  Tensor new_re = forward ? add(rc, is) : sub(rc, is);
  Tensor new_im = forward ? sub(ic, rs) : add(ic, rs);
  re = transpose(new_re, dim, last);
  im = transpose(new_im, dim, last);
}

// The DFT of (re, im) over `dims`, scaled by _fft_c2c's and _fft_r2c's normalization: 0 none,
// 1 1/sqrt(n), 2 1/n (n: the transformed elements).
void dft(Tensor& re, Tensor& im, const IntList& dims, bool forward, int64_t normalization) {
  double n = 1;
  for (int64_t d : dims) {
    n *= static_cast<double>(re.shape()[static_cast<size_t>(d)]);
    dft_along(re, im, d, forward);
  }
  const double scale = normalization == 1 ? 1.0 / std::sqrt(n) : normalization == 2 ? 1.0 / n : 1.0;
  if (scale != 1.0) {
    re = mul(re, scale);
    im = mul(im, scale);
  }
}

IntList fft_dims(const Arg& dims, int64_t rank) {
  IntList out;
  for (int64_t d : dims.ints()) out.push_back(wrap(d, rank));
  return out;
}

std::optional<std::string> fft_refused(const Args& a, bool complex_input) {
  if (a[0].is_complex() != complex_input) {
    return complex_input ? "a real input" : "a complex input";
  }
  const int64_t rank = a[0].tensor_dim();
  IntList dims = a[1].ints();
  if (dims.empty()) return "no dims";
  for (int64_t d : dims) {
    if (d < -rank || d >= rank) return "dim " + std::to_string(d) + " out of range";
  }
  const int64_t normalization = a[2].to_int();
  if (normalization < 0 || normalization > 2) {
    return "normalization " + std::to_string(normalization);
  }
  return std::nullopt;
}

// _fft_c2c(self, dim, normalization, forward): one matrix product per dim and component, O(n^2)
// per transformed line where an FFT is O(n log n): exact to float rounding and fast at the
// sizes of a model's sequence and hidden dims, slower than PyTorch's pocketfft for long lines.
Arg fft_c2c_entry(const Args& a, Call&) {
  const Tensor& pairs = a[0].tensor();
  const int64_t rank = pairs.dim() - 1;
  IntList dims = fft_dims(a[1], rank);
  Tensor re = real_part(pairs), im = imag_part(pairs);
  dft(re, im, dims, a[3].to_bool(), a[2].to_int());
  return Arg::complex(pairs_of(re, im));
}

// _fft_r2c(self, dim, normalization, onesided): the forward transform of a real input; onesided
// keeps the first n / 2 + 1 entries of the last transformed dim (the rest are conjugates).
Arg fft_r2c_entry(const Args& a, Call&) {
  const Tensor& x = a[0].tensor();
  IntList dims = fft_dims(a[1], x.dim());
  Tensor re = x, im = zeros_like(x);
  dft(re, im, dims, true, a[2].to_int());
  if (a[3].to_bool()) {
    const int64_t last = dims.back();
    const int64_t keep = x.shape()[static_cast<size_t>(last)] / 2 + 1;
    re = slice(re, last, 0, keep);
    im = slice(im, last, 0, keep);
  }
  return Arg::complex(pairs_of(re, im));
}

}  // namespace

// A real tensor to a complex dtype gets a zero imaginary part; a complex one to a real dtype
// keeps its real part, as eager (which warns that it discards the imaginary part).
Arg complex_to_copy(const Args& a) {
  const Tensor& x = a[0].tensor();
  if (std::optional<DType> parts = a[1].complex_dtype()) {
    if (a[0].is_complex()) return Arg::complex(x.dtype() == *parts ? x.clone() : x.to(*parts));
    Tensor re = x.to(*parts);
    return Arg::complex(pairs_of(re, zeros_like(re)));
  }
  if (a[1].is_none()) return Arg::complex(x.clone());
  return real_part(x).to(a[1].dtype());
}

void add_complex(TableBuilder& b) {
  const DTypeSet kReal = {DType::Float32, DType::Float64};
  b.add({"aten.view_as_real.default"}, kReal,
        [](const Args& a, Call&) -> Arg { return a[0].tensor(); },
        {.when = [](const Args& a) -> std::optional<std::string> {
           if (!a[0].is_complex()) return "a real input";
           return std::nullopt;
         },
         .note = "complex values as (real, imaginary) pairs; inside a torch.compile partition",
         .flags = kView | kComplex | kComplexOnly});
  b.add({"aten.view_as_complex.default"}, kReal,
        [](const Args& a, Call&) -> Arg { return Arg::complex(a[0].tensor()); },
        {.when = [](const Args& a) -> std::optional<std::string> {
           if (a[0].is_complex()) return "a complex input";
           const Shape& s = a[0].tensor_shape();
           if (s.empty() || s.back() != 2) return "a last dim other than 2";
           return std::nullopt;
         },
         .note = "inside a torch.compile partition",
         .flags = kView | kComplex | kComplexOnly});
  b.add({"aten._fft_c2c.default"}, kReal, fft_c2c_entry,
        {.when = [](const Args& a) { return fft_refused(a, true); },
         .note = "a DFT by matrix products per dim (O(n^2) per line); inside a torch.compile "
                 "partition",
         .flags = kComplex | kComplexOnly});
  b.add({"aten._fft_r2c.default"}, kReal, fft_r2c_entry,
        {.when = [](const Args& a) { return fft_refused(a, false); },
         .note = "as _fft_c2c; onesided keeps n / 2 + 1 of the last dim",
         .flags = kComplex | kComplexOnly});
}

}  // namespace lz::aten
