// Convolutions (forward and both gradients) of float32 as oneDNN primitives, for the cpu backend.
//
// Layouts: the tensors stay in Lazuli's dense row-major layout (NC[D]HW activations, O[I]HW
// weights, grouped weights viewed as G x O/G x I/G x ...), which oneDNN reads directly: no
// reorder per call. Threads: as blas.cpp, oneDNN never runs its own OpenMP team here. The batch is
// cut into one part per pool thread, each part runs the primitive single-threaded (the weight
// gradient sums its parts' partial gradients at the end). Primitives are cached per thread, keyed
// by op and geometry; oneDNN's own primitive cache makes a new thread's first creation cheap.
// A geometry oneDNN has no implementation for returns false, and the caller runs the reference
// kernel instead.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/interp/kernels.h"
#include "core/thread_pool.h"
#include "ir/node.h"

namespace lz::cpu {
namespace {

using dnnl::memory;
using Dims = memory::dims;

struct Geometry {
  Dims src, wei, dst, strides, dilates, pad_l, pad_r;
};

memory::format_tag act_tag(size_t rank) {
  return rank == 3   ? memory::format_tag::ncw
         : rank == 4 ? memory::format_tag::nchw
                     : memory::format_tag::ncdhw;
}
memory::format_tag wei_tag(size_t rank, bool grouped) {
  if (grouped) {
    return rank == 3   ? memory::format_tag::goiw
           : rank == 4 ? memory::format_tag::goihw
                       : memory::format_tag::goidhw;
  }
  return rank == 3   ? memory::format_tag::oiw
         : rank == 4 ? memory::format_tag::oihw
                     : memory::format_tag::oidhw;
}

// The conv y = conv(x, w) for a batch of `batch`, in oneDNN's terms. Right padding is what makes
// the output size come out exactly (it is smaller than the left one where the division rounded
// down).
Geometry geometry(const ir::ConvAttrs& a, const Shape& x, const Shape& w, const Shape& y,
                  int64_t batch) {
  Geometry g;
  const size_t sp = a.stride.size();
  g.src = Dims(x.begin(), x.end());
  g.dst = Dims(y.begin(), y.end());
  g.src[0] = g.dst[0] = batch;
  if (a.groups > 1) {
    g.wei = {a.groups, w[0] / a.groups};
    g.wei.insert(g.wei.end(), w.begin() + 1, w.end());
  } else {
    g.wei = Dims(w.begin(), w.end());
  }
  for (size_t i = 0; i < sp; ++i) {
    const int64_t k_eff = a.dilation[i] * (w[2 + i] - 1) + 1;
    g.strides.push_back(a.stride[i]);
    g.dilates.push_back(a.dilation[i] - 1);
    g.pad_l.push_back(a.padding[i]);
    g.pad_r.push_back((y[2 + i] - 1) * a.stride[i] + k_eff - x[2 + i] - a.padding[i]);
  }
  return g;
}

std::string key_of(ir::OpKind op, const Geometry& g) {
  std::string k = std::to_string(static_cast<int>(op));
  for (const Dims* d : {&g.src, &g.wei, &g.dst, &g.strides, &g.dilates, &g.pad_l, &g.pad_r}) {
    k += '|';
    for (int64_t v : *d) k += std::to_string(v) + ",";
  }
  return k;
}

struct Cached {
  dnnl::primitive prim;
};

struct ThreadState {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::unordered_map<std::string, std::shared_ptr<Cached>> cache;
};

ThreadState& thread_state() {
  thread_local ThreadState s;
  thread_local bool single = false;
  if (!single) {
    omp_set_num_threads(1);  // this thread's OpenMP team: itself (blas.cpp says why)
    single = true;
  }
  return s;
}

// The primitive for `op` over geometry `g`, made on first use by this thread; null when oneDNN
// has no implementation for it.
std::shared_ptr<Cached> primitive_for(ThreadState& ts, ir::OpKind op, const Geometry& g) {
  std::string key = key_of(op, g);
  auto it = ts.cache.find(key);
  if (it != ts.cache.end()) return it->second;
  if (ts.cache.size() > 256) ts.cache.clear();
  const auto f32 = memory::data_type::f32;
  const bool grouped = g.wei.size() == g.src.size() + 1;
  memory::desc src(g.src, f32, act_tag(g.src.size()));
  memory::desc dst(g.dst, f32, act_tag(g.dst.size()));
  memory::desc wei(g.wei, f32, wei_tag(g.src.size(), grouped));
  std::shared_ptr<Cached> c;
  try {
    dnnl::convolution_forward::desc fd(dnnl::prop_kind::forward_training,
                                       dnnl::algorithm::convolution_direct, src, wei, dst,
                                       g.strides, g.dilates, g.pad_l, g.pad_r);
    dnnl::convolution_forward::primitive_desc fpd(fd, ts.engine);
    switch (op) {
      case ir::OpKind::Conv:
        c = std::make_shared<Cached>(Cached{dnnl::convolution_forward(fpd)});
        break;
      case ir::OpKind::ConvBackwardInput: {
        dnnl::convolution_backward_data::desc bd(dnnl::algorithm::convolution_direct, src, wei, dst,
                                                 g.strides, g.dilates, g.pad_l, g.pad_r);
        dnnl::convolution_backward_data::primitive_desc bpd(bd, ts.engine, fpd);
        c = std::make_shared<Cached>(Cached{dnnl::convolution_backward_data(bpd)});
        break;
      }
      case ir::OpKind::ConvBackwardWeight: {
        dnnl::convolution_backward_weights::desc wd(dnnl::algorithm::convolution_direct, src, wei,
                                                    dst, g.strides, g.dilates, g.pad_l, g.pad_r);
        dnnl::convolution_backward_weights::primitive_desc wpd(wd, ts.engine, fpd);
        c = std::make_shared<Cached>(Cached{dnnl::convolution_backward_weights(wpd)});
        break;
      }
      default:
        break;
    }
  } catch (const dnnl::error&) {
    c = nullptr;  // unimplemented here: the reference kernel runs instead
  }
  ts.cache[key] = c;
  return c;
}

memory wrap(const ThreadState& ts, const Dims& dims, size_t rank, bool weights, bool grouped,
            const void* p) {
  memory::desc d(dims, memory::data_type::f32, weights ? wei_tag(rank, grouped) : act_tag(rank));
  return memory(d, ts.engine, const_cast<void*>(p));
}

int64_t plane(const Shape& s) {
  int64_t n = 1;
  for (size_t i = 1; i < s.size(); ++i) n *= s[i];
  return n;
}

}  // namespace

// y = conv(x, w); dx = ConvBackwardInput(dy, w); dw = ConvBackwardWeight(x, dy). Float32 only.
bool conv_library_call(ir::OpKind op, const ir::ConvAttrs& a,
                       const std::vector<interp::ConstArray>& in, interp::MutArray out) {
  if (out.dtype != DType::Float32) return false;
  // The forward conv's x, w and y shapes, whichever op this is.
  const Shape *x, *w, *y;
  switch (op) {
    case ir::OpKind::Conv:
      x = in[0].shape, w = in[1].shape, y = out.shape;
      break;
    case ir::OpKind::ConvBackwardInput:
      x = out.shape, w = in[1].shape, y = in[0].shape;
      break;
    case ir::OpKind::ConvBackwardWeight:
      x = in[0].shape, w = out.shape, y = in[1].shape;
      break;
    default:
      return false;
  }
  const int64_t n = (*x)[0];
  if (numel(*out.shape) == 0) return true;
  const int parts = static_cast<int>(
      std::clamp<int64_t>(runtime_pool().num_threads(), 1, std::max<int64_t>(n, 1)));
  const int64_t xp = plane(*x), yp = plane(*y), wn = numel(*w);
  const size_t rank = x->size();
  const bool grouped = a.groups > 1;
  // Partial weight gradients of the parts after the first (the first writes the output).
  std::vector<std::vector<float>> partial(op == ir::OpKind::ConvBackwardWeight ? parts - 1 : 0);
  std::atomic<bool> ok{true};
  runtime_pool().parallel_for(parts, 1, 1, [&](int64_t p0, int64_t p1) {
    ThreadState& ts = thread_state();
    for (int64_t p = p0; p < p1 && ok; ++p) {
      const int64_t b0 = n * p / parts, b1 = n * (p + 1) / parts;
      if (b1 == b0) continue;
      Geometry g = geometry(a, *x, *w, *y, b1 - b0);
      std::shared_ptr<Cached> c = primitive_for(ts, op, g);
      if (!c) {
        ok = false;
        return;
      }
      switch (op) {
        case ir::OpKind::Conv: {
          const float* xs = static_cast<const float*>(in[0].data) + b0 * xp;
          float* ys = static_cast<float*>(out.data) + b0 * yp;
          c->prim.execute(ts.stream,
                          {{DNNL_ARG_SRC, wrap(ts, g.src, rank, false, grouped, xs)},
                           {DNNL_ARG_WEIGHTS, wrap(ts, g.wei, rank, true, grouped, in[1].data)},
                           {DNNL_ARG_DST, wrap(ts, g.dst, rank, false, grouped, ys)}});
          break;
        }
        case ir::OpKind::ConvBackwardInput: {
          const float* dys = static_cast<const float*>(in[0].data) + b0 * yp;
          float* dxs = static_cast<float*>(out.data) + b0 * xp;
          c->prim.execute(ts.stream,
                          {{DNNL_ARG_DIFF_DST, wrap(ts, g.dst, rank, false, grouped, dys)},
                           {DNNL_ARG_WEIGHTS, wrap(ts, g.wei, rank, true, grouped, in[1].data)},
                           {DNNL_ARG_DIFF_SRC, wrap(ts, g.src, rank, false, grouped, dxs)}});
          break;
        }
        case ir::OpKind::ConvBackwardWeight: {
          const float* xs = static_cast<const float*>(in[0].data) + b0 * xp;
          const float* dys = static_cast<const float*>(in[1].data) + b0 * yp;
          float* dw = static_cast<float*>(out.data);
          if (p > 0) {
            partial[p - 1].resize(static_cast<size_t>(wn));
            dw = partial[p - 1].data();
          }
          c->prim.execute(ts.stream,
                          {{DNNL_ARG_SRC, wrap(ts, g.src, rank, false, grouped, xs)},
                           {DNNL_ARG_DIFF_DST, wrap(ts, g.dst, rank, false, grouped, dys)},
                           {DNNL_ARG_DIFF_WEIGHTS, wrap(ts, g.wei, rank, true, grouped, dw)}});
          break;
        }
        default:
          ok = false;
      }
      ts.stream.wait();
    }
  });
  if (!ok) return false;
  float* dw = static_cast<float*>(out.data);
  for (const std::vector<float>& part : partial) {
    for (int64_t i = 0; i < static_cast<int64_t>(part.size()); ++i) dw[i] += part[i];
  }
  return true;
}

}  // namespace lz::cpu
