// Reference kernels for convolution (forward, and its two gradients) and pooling. One, two or
// three spatial dims are all treated as three (leading size-1 dims), and every conv kernel is the
// same walk over (batch, output channel, input channel of its group, output position, kernel
// offset) that visits each valid product once: the forward adds x * w into y, the input gradient
// dy * w into dx, the weight gradient x * dy into dw. Sums are taken in double.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/interp/kernels_impl.h"

namespace lz::interp {
namespace {

constexpr int kDims = 3;

// Spatial sizes and window parameters padded to three dims.
struct Window {
  int64_t in[kDims], k[kDims], out[kDims], stride[kDims], pad[kDims], dil[kDims];
};

Window window(const Shape& in_sp, const Shape& k_sp, const Shape& out_sp,
              const std::vector<int64_t>& stride, const std::vector<int64_t>& pad,
              const std::vector<int64_t>& dil) {
  Window w;
  const size_t sp = stride.size(), lead = kDims - sp;
  for (size_t i = 0; i < kDims; ++i) {
    bool real = i >= lead;
    size_t j = i - lead;
    w.in[i] = real ? in_sp[j] : 1;
    w.k[i] = real ? k_sp[j] : 1;
    w.out[i] = real ? out_sp[j] : 1;
    w.stride[i] = real ? stride[j] : 1;
    w.pad[i] = real ? pad[j] : 0;
    w.dil[i] = real ? dil[j] : 1;
  }
  return w;
}

Shape tail(const Shape& s, size_t n) { return Shape(s.end() - static_cast<int64_t>(n), s.end()); }

template <class T>
std::vector<double> as_doubles(const ConstArray& a) {
  const T* p = data_of<T>(a);
  return std::vector<double>(p, p + numel(*a.shape));
}

// Calls f(x index, w index, y index) for every product of the convolution y = conv(x, w).
template <class F>
void conv_walk(const Shape& xs, const Shape& ws, const Shape& ys, const ir::ConvAttrs& a, F&& f) {
  const size_t sp = a.stride.size();
  const Window w =
      window(tail(xs, sp), tail(ws, sp), tail(ys, sp), a.stride, a.padding, a.dilation);
  const int64_t N = xs[0], C = xs[1], O = ws[0], G = a.groups, Cg = C / G, Og = O / G;
  const int64_t in_plane = w.in[0] * w.in[1] * w.in[2];
  const int64_t out_plane = w.out[0] * w.out[1] * w.out[2];
  const int64_t k_plane = w.k[0] * w.k[1] * w.k[2];
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t o = 0; o < O; ++o) {
      const int64_t g = o / Og;
      for (int64_t ic = 0; ic < Cg; ++ic) {
        const int64_t xc = (n * C + g * Cg + ic) * in_plane;
        const int64_t wc = (o * Cg + ic) * k_plane;
        const int64_t yc = (n * O + o) * out_plane;
        for (int64_t od = 0; od < w.out[0]; ++od)
          for (int64_t oh = 0; oh < w.out[1]; ++oh)
            for (int64_t ow = 0; ow < w.out[2]; ++ow)
              for (int64_t kd = 0; kd < w.k[0]; ++kd) {
                int64_t id = od * w.stride[0] - w.pad[0] + kd * w.dil[0];
                if (id < 0 || id >= w.in[0]) continue;
                for (int64_t kh = 0; kh < w.k[1]; ++kh) {
                  int64_t ih = oh * w.stride[1] - w.pad[1] + kh * w.dil[1];
                  if (ih < 0 || ih >= w.in[1]) continue;
                  for (int64_t kw = 0; kw < w.k[2]; ++kw) {
                    int64_t iw = ow * w.stride[2] - w.pad[2] + kw * w.dil[2];
                    if (iw < 0 || iw >= w.in[2]) continue;
                    f(xc + (id * w.in[1] + ih) * w.in[2] + iw,
                      wc + (kd * w.k[1] + kh) * w.k[2] + kw,
                      yc + (od * w.out[1] + oh) * w.out[2] + ow);
                  }
                }
              }
      }
    }
  }
}

// Calls f(plane, output index in plane, list of in-plane input indices of the window, divisor
// size of the window with padding) for every pooling window of planes [p0, p1).
template <class F>
void pool_walk(const Shape& xs, const Shape& ys, const ir::PoolAttrs& a, int64_t p0, int64_t p1,
               F&& f) {
  const size_t sp = a.kernel.size();
  const Window w = window(tail(xs, sp), Shape(a.kernel.begin(), a.kernel.end()), tail(ys, sp),
                          a.stride, a.padding, a.dilation);
  std::vector<int64_t> idx;
  for (int64_t p = p0; p < p1; ++p) {
    int64_t o = 0;
    for (int64_t od = 0; od < w.out[0]; ++od)
      for (int64_t oh = 0; oh < w.out[1]; ++oh)
        for (int64_t ow = 0; ow < w.out[2]; ++ow, ++o) {
          idx.clear();
          int64_t padded = 1;  // the window clipped to the padded input, as PyTorch's avg_pool
          const int64_t pos[kDims] = {od, oh, ow};
          for (int d = 0; d < kDims; ++d) {
            int64_t start = pos[d] * w.stride[d] - w.pad[d];
            int64_t end = std::min(start + (w.k[d] - 1) * w.dil[d] + 1, w.in[d] + w.pad[d]);
            padded *= end - start;
          }
          for (int64_t kd = 0; kd < w.k[0]; ++kd) {
            int64_t id = od * w.stride[0] - w.pad[0] + kd * w.dil[0];
            if (id < 0 || id >= w.in[0]) continue;
            for (int64_t kh = 0; kh < w.k[1]; ++kh) {
              int64_t ih = oh * w.stride[1] - w.pad[1] + kh * w.dil[1];
              if (ih < 0 || ih >= w.in[1]) continue;
              for (int64_t kw = 0; kw < w.k[2]; ++kw) {
                int64_t iw = ow * w.stride[2] - w.pad[2] + kw * w.dil[2];
                if (iw < 0 || iw >= w.in[2]) continue;
                idx.push_back((id * w.in[1] + ih) * w.in[2] + iw);
              }
            }
          }
          f(p, o, idx, padded);
        }
  }
}

int64_t plane_size(const Shape& s, size_t sp) {
  int64_t n = 1;
  for (size_t i = s.size() - sp; i < s.size(); ++i) n *= s[i];
  return n;
}

double avg_divisor(const ir::PoolAttrs& a, size_t valid, int64_t padded) {
  if (a.divisor != 0) return static_cast<double>(a.divisor);
  return a.count_include_pad ? static_cast<double>(padded) : static_cast<double>(valid);
}

}  // namespace

void run_conv(ir::OpKind op, const ir::ConvAttrs& a, const ConstArray& p, const ConstArray& q,
              MutArray out) {
  dispatch(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      std::vector<double> x = as_doubles<T>(p), y = as_doubles<T>(q);
      std::vector<double> r(static_cast<size_t>(numel(*out.shape)), 0.0);
      switch (op) {
        case ir::OpKind::Conv:  // (x, w)
          conv_walk(*p.shape, *q.shape, *out.shape, a,
                    [&](int64_t xi, int64_t wi, int64_t yi) { r[yi] += x[xi] * y[wi]; });
          break;
        case ir::OpKind::ConvBackwardInput:  // (dy, w) -> dx
          conv_walk(*out.shape, *q.shape, *p.shape, a,
                    [&](int64_t xi, int64_t wi, int64_t yi) { r[xi] += x[yi] * y[wi]; });
          break;
        case ir::OpKind::ConvBackwardWeight:  // (x, dy) -> dw
          conv_walk(*p.shape, *out.shape, *q.shape, a,
                    [&](int64_t xi, int64_t wi, int64_t yi) { r[wi] += x[xi] * y[yi]; });
          break;
        default:
          throw Error("interp: not a convolution op");
      }
      T* o = data_of<T>(out);
      for (size_t i = 0; i < r.size(); ++i) o[i] = static_cast<T>(r[i]);
    } else {
      throw TypeError("conv: needs floating operands");
    }
  });
}

int64_t pool_planes(const ir::PoolAttrs& a, const std::vector<MutArray>& outs) {
  const Shape& s = *outs[0].shape;
  int64_t planes = 1;
  for (size_t i = 0; i + a.kernel.size() < s.size(); ++i) planes *= s[i];
  return planes;
}

void run_pool(ir::OpKind op, const ir::PoolAttrs& a, const ConstArray& x,
              const std::vector<MutArray>& outs) {
  run_pool_planes(op, a, x, outs, 0, pool_planes(a, outs));
}

void run_pool_planes(ir::OpKind op, const ir::PoolAttrs& a, const ConstArray& x,
                     const std::vector<MutArray>& outs, int64_t p0, int64_t p1) {
  const size_t sp = a.kernel.size();
  const MutArray& out = outs[0];
  dispatch(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      throw TypeError("pooling: bool is not supported");
    } else {
      const T* px = data_of<T>(x);
      T* po = data_of<T>(out);
      switch (op) {
        case ir::OpKind::MaxPool: {
          int64_t* pi = data_of<int64_t>(outs[1]);
          const int64_t in_plane = plane_size(*x.shape, sp), out_plane = plane_size(*out.shape, sp);
          pool_walk(*x.shape, *out.shape, a, p0, p1,
                    [&](int64_t p, int64_t o, const std::vector<int64_t>& idx, int64_t) {
                      const T* plane = px + p * in_plane;
                      int64_t best = idx.empty() ? -1 : idx[0];
                      for (int64_t i : idx) {  // NaN wins, then the first maximum
                        if (is_nan(plane[best])) break;
                        if (is_nan(plane[i]) || plane[i] > plane[best]) best = i;
                      }
                      po[p * out_plane + o] =
                          best < 0 ? -std::numeric_limits<T>::infinity() : plane[best];
                      pi[p * out_plane + o] = best;
                    });
          return;
        }
        case ir::OpKind::AvgPool: {
          const int64_t in_plane = plane_size(*x.shape, sp), out_plane = plane_size(*out.shape, sp);
          pool_walk(*x.shape, *out.shape, a, p0, p1,
                    [&](int64_t p, int64_t o, const std::vector<int64_t>& idx, int64_t padded) {
                      double s = 0;
                      for (int64_t i : idx) s += static_cast<double>(px[p * in_plane + i]);
                      po[p * out_plane + o] =
                          static_cast<T>(s / avg_divisor(a, idx.size(), padded));
                    });
          return;
        }
        case ir::OpKind::AvgPoolBackward: {  // x is dy, out is dx of attrs.shape
          const int64_t in_plane = plane_size(*out.shape, sp), out_plane = plane_size(*x.shape, sp);
          // Planes [p0, p1) of dx, summed in double (r[0] is plane p0's first element).
          std::vector<double> r(static_cast<size_t>((p1 - p0) * in_plane), 0.0);
          pool_walk(*out.shape, *x.shape, a, p0, p1,
                    [&](int64_t p, int64_t o, const std::vector<int64_t>& idx, int64_t padded) {
                      double g = static_cast<double>(px[p * out_plane + o]) /
                                 avg_divisor(a, idx.size(), padded);
                      for (int64_t i : idx) r[(p - p0) * in_plane + i] += g;
                    });
          for (size_t i = 0; i < r.size(); ++i) po[p0 * in_plane + static_cast<int64_t>(i)] = static_cast<T>(r[i]);
          return;
        }
        default:
          throw Error("interp: not a pooling op");
      }
    }
  });
}

}  // namespace lz::interp
