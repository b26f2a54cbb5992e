// Pooling (max_pool, avg_pool and avg_pool's gradient) on the cpu backend, split by planes (the
// leading dims, batch x channels, which pool independently) across the runtime pool.
//
// avg_pool of float32 and float64 runs the loop below: each window clipped to the input once per
// call (per dim and output position), then summed in the reference's order and in double and
// divided by the reference's divisor, so the results are the reference's bit for bit; it is ~2x
// the reference's walk per thread, which lists each window's offsets first. Everything else runs
// the reference's own code over the part's planes (interp::run_pool_planes): for max_pool it is
// as fast as the branch-free loops tried (its compare-and-break is well predicted on real data;
// bench/RESULTS.md section 14). Spatial dims: one, two or three, all handled as three.
#include <algorithm>
#include <vector>

#include "backend/cpu/library_calls.h"
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

// avg_pool's loop above for dtype x.dtype, on planes [p0, p1); false where it does not apply.
bool fast_planes(ir::OpKind op, const ir::PoolAttrs& a, const Geometry& g,
                 const interp::ConstArray& x, const interp::MutArray& y, int64_t p0, int64_t p1) {
  if (op != ir::OpKind::AvgPool) return false;
  switch (x.dtype) {
    case DType::Float32:
      avg_pool_planes(a, g, static_cast<const float*>(x.data), static_cast<float*>(y.data), p0, p1);
      return true;
    case DType::Float64:
      avg_pool_planes(a, g, static_cast<const double*>(x.data), static_cast<double*>(y.data), p0,
                      p1);
      return true;
    default:
      return false;
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
    if (fast_planes(op, a, g, in[0], outs[0], p0, p1)) return;
    interp::run_pool_planes(op, a, in[0], outs, p0, p1);
  });
  return true;
}

}  // namespace lz::cpu
