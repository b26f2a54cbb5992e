// Pooling (max_pool, avg_pool and avg_pool's gradient) on the cpu backend, split by planes (the
// leading dims, batch x channels, which pool independently) across the runtime pool.
//
// max_pool and avg_pool of float32, float64, int32 and int64 (max only for the integers) run the
// loops below: each window clipped to the input once, then visited in the reference's order
// (depth, rows, columns, increasing), with the reference's rules, so the results are the
// reference's bit for bit (interp/kernels_conv.cpp: the first NaN wins, else the first maximum;
// averages summed in double and divided by the same divisor). They are ~10x faster per thread
// than the reference's walk, which lists each window's offsets first. Every other case (16-bit
// floats, the gradient) runs the reference's own code over the part's planes
// (interp::run_pool_planes). Spatial dims: one, two or three, all handled as three.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/blas.h"
#include "core/thread_pool.h"

namespace lz::cpu {
namespace {

constexpr int kDims = 3;

// Per dim and output position: where its window starts in the input, and its taps [lo, hi)
// that fall inside the input (the window clipped), with its size clipped to the padded input
// (what avg_pool's count_include_pad divides by).
struct Taps {
  std::vector<int64_t> start, lo, hi, padded;
};

struct Geometry {
  int64_t in[kDims], out[kDims], k[kDims], dil[kDims];
  int64_t in_plane = 1, out_plane = 1;
  Taps taps[kDims];
};

Geometry geometry(const ir::PoolAttrs& a, const Shape& x, const Shape& y) {
  Geometry g;
  const size_t sp = a.kernel.size(), lead = kDims - sp;
  for (size_t i = 0; i < kDims; ++i) {
    const bool real = i >= lead;
    const size_t j = i - lead;
    g.in[i] = real ? x[x.size() - sp + j] : 1;
    g.out[i] = real ? y[y.size() - sp + j] : 1;
    g.k[i] = real ? a.kernel[j] : 1;
    g.dil[i] = real ? a.dilation[j] : 1;
    const int64_t stride = real ? a.stride[j] : 1, pad = real ? a.padding[j] : 0;
    g.in_plane *= g.in[i];
    g.out_plane *= g.out[i];
    Taps& t = g.taps[i];
    for (int64_t o = 0; o < g.out[i]; ++o) {
      const int64_t start = o * stride - pad, n = g.in[i], d = g.dil[i];
      const int64_t lo = start < 0 ? (-start + d - 1) / d : 0;
      const int64_t hi = start < n ? std::min(g.k[i], (n - 1 - start) / d + 1) : 0;
      t.start.push_back(start);
      t.lo.push_back(lo);
      t.hi.push_back(std::max(lo, hi));
      t.padded.push_back(std::min(start + (g.k[i] - 1) * d + 1, n + pad) - start);
    }
  }
  return g;
}

// Calls f(output index in the plane, the window's taps per dim [lo, hi), the window's starts,
// its size with padding) for every output of one plane.
template <class F>
void windows(const Geometry& g, F&& f) {
  int64_t o = 0;
  for (int64_t od = 0; od < g.out[0]; ++od)
    for (int64_t oh = 0; oh < g.out[1]; ++oh)
      for (int64_t ow = 0; ow < g.out[2]; ++ow, ++o) {
        const int64_t pos[kDims] = {od, oh, ow};
        int64_t start[kDims], lo[kDims], hi[kDims];
        int64_t padded = 1;
        for (int d = 0; d < kDims; ++d) {
          const Taps& t = g.taps[d];
          start[d] = t.start[pos[d]];
          lo[d] = t.lo[pos[d]];
          hi[d] = t.hi[pos[d]];
          padded *= t.padded[pos[d]];
        }
        f(o, start, lo, hi, padded);
      }
}

template <class T>
bool nan(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(v);
  } else {
    return false;
  }
}

// Below every value of T (the maximum's start): -infinity, or an integer's lowest.
template <class T>
constexpr T kLowest = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                           : std::numeric_limits<T>::lowest();

template <class T>
void max_pool_planes(const Geometry& g, const T* x, T* y, int64_t* yi, int64_t p0, int64_t p1) {
  for (int64_t p = p0; p < p1; ++p) {
    const T* plane = x + p * g.in_plane;
    T* out = y + p * g.out_plane;
    int64_t* idx = yi + p * g.out_plane;
    windows(g, [&](int64_t o, const int64_t* start, const int64_t* lo, const int64_t* hi,
                   int64_t) {
      // One pass of selects, no data-dependent branch (random data would mispredict every
      // other one): the first strictly larger value, and apart the first NaN (which wins).
      T bv = kLowest<T>;
      int64_t best = -1, first_nan = -1;
      for (int64_t kd = lo[0]; kd < hi[0]; ++kd) {
        const int64_t id = start[0] + kd * g.dil[0];
        for (int64_t kh = lo[1]; kh < hi[1]; ++kh) {
          const int64_t row = (id * g.in[1] + start[1] + kh * g.dil[1]) * g.in[2] + start[2];
          for (int64_t kw = lo[2]; kw < hi[2]; ++kw) {
            const int64_t i = row + kw * g.dil[2];
            const T v = plane[i];
            // Masks, not `?:`: GCC 12 turns the index's select into a branch.
            const int64_t take = -static_cast<int64_t>((v > bv) | (best < 0));  // no NaN is larger
            best = (i & take) | (best & ~take);
            bv = bv > v ? bv : v;  // maxss; a NaN here is overruled by first_nan below
            const int64_t is_nan = -static_cast<int64_t>((first_nan < 0) & nan(v));
            first_nan = (i & is_nan) | (first_nan & ~is_nan);
          }
        }
      }
      best = first_nan >= 0 ? first_nan : best;
      // An empty window (all padding) is the reference's -infinity (0 for an integer).
      bv = best >= 0 ? plane[best] : -std::numeric_limits<T>::infinity();
      out[o] = bv;
      idx[o] = best;
    });
  }
}

template <class T>
void avg_pool_planes(const ir::PoolAttrs& a, const Geometry& g, const T* x, T* y, int64_t p0,
                     int64_t p1) {
  for (int64_t p = p0; p < p1; ++p) {
    const T* plane = x + p * g.in_plane;
    T* out = y + p * g.out_plane;
    windows(g, [&](int64_t o, const int64_t* start, const int64_t* lo, const int64_t* hi,
                   int64_t padded) {
      double s = 0;
      for (int64_t kd = lo[0]; kd < hi[0]; ++kd) {
        const int64_t id = start[0] + kd * g.dil[0];
        for (int64_t kh = lo[1]; kh < hi[1]; ++kh) {
          const int64_t row = (id * g.in[1] + start[1] + kh * g.dil[1]) * g.in[2] + start[2];
          for (int64_t kw = lo[2]; kw < hi[2]; ++kw) s += static_cast<double>(plane[row + kw * g.dil[2]]);
        }
      }
      const int64_t valid = (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]);
      const double divisor = a.divisor != 0           ? static_cast<double>(a.divisor)
                             : a.count_include_pad ? static_cast<double>(padded)
                                                   : static_cast<double>(valid);
      out[o] = static_cast<T>(s / divisor);
    });
  }
}

// The loops above for op over dtype T, on planes [p0, p1); false where they do not apply.
template <class T>
bool run_planes(ir::OpKind op, const ir::PoolAttrs& a, const Geometry& g,
                const interp::ConstArray& x, const std::vector<interp::MutArray>& outs,
                int64_t p0, int64_t p1) {
  const T* px = static_cast<const T*>(x.data);
  T* py = static_cast<T*>(outs[0].data);
  if (op == ir::OpKind::MaxPool) {
    max_pool_planes(g, px, py, static_cast<int64_t*>(outs[1].data), p0, p1);
    return true;
  }
  if (op == ir::OpKind::AvgPool && std::is_floating_point_v<T>) {
    avg_pool_planes(a, g, px, py, p0, p1);
    return true;
  }
  return false;
}

bool fast_planes(ir::OpKind op, const ir::PoolAttrs& a, const Geometry& g,
                 const interp::ConstArray& x, const std::vector<interp::MutArray>& outs,
                 int64_t p0, int64_t p1) {
  switch (x.dtype) {
    case DType::Float32: return run_planes<float>(op, a, g, x, outs, p0, p1);
    case DType::Float64: return run_planes<double>(op, a, g, x, outs, p0, p1);
    case DType::Int32: return run_planes<int32_t>(op, a, g, x, outs, p0, p1);
    case DType::Int64: return run_planes<int64_t>(op, a, g, x, outs, p0, p1);
    default: return false;
  }
}

}  // namespace

bool pool_library_call(ir::OpKind op, const ir::PoolAttrs& a,
                       const std::vector<interp::ConstArray>& in,
                       const std::vector<interp::MutArray>& outs) {
  if (in[0].dtype == DType::Bool) return false;  // the reference kernel raises its error
  const int64_t planes = interp::pool_planes(a, outs);
  // The larger side's positions, each visiting every tap: the work of one plane.
  const bool backward = op == ir::OpKind::AvgPoolBackward;
  const Geometry g = backward ? geometry(a, *outs[0].shape, *in[0].shape)
                              : geometry(a, *in[0].shape, *outs[0].shape);
  int64_t work = g.out_plane;
  for (int64_t k : a.kernel) work *= k;
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(work, 1));
  runtime_pool().parallel_for(planes, grain, 1, [&](int64_t p0, int64_t p1) {
    if (!backward && fast_planes(op, a, g, in[0], outs, p0, p1)) return;
    interp::run_pool_planes(op, a, in[0], outs, p0, p1);
  });
  return true;
}

}  // namespace lz::cpu
