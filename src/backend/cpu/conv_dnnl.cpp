// Convolutions (forward and both gradients) of float32 as oneDNN primitives, for the cpu backend.
//
// Layouts: the tensors stay in Lazuli's dense row-major layout (NC[D]HW activations, O[I]HW
// weights, grouped weights viewed as G x O/G x I/G x ...). oneDNN's primitives on its own blocked
// layouts (nChw16c, OIhw16i16o...) are 1.1-2x faster than on plain ones (bench/conv_bench,
// RESULTS.md section 11), so a convolution runs blocked where it has enough output positions to
// pay for the weights' reorder (prefer_blocked): each part reorders its activations in and its
// output out, per call, into per-thread scratch; the weights' blocked copy is made once per call
// for all its parts, and kept across calls while the weights' storage is unchanged
// (conv_weights.h); below that it runs on the plain layouts directly.
// Threads: as library_calls.cpp, oneDNN never runs its own OpenMP team here. The batch is cut into
// one part per pool thread, each part runs the primitive single-threaded (the weight gradient sums
// its parts' partial gradients at the end). With fewer batch entries than threads (batch-1
// inference), the channels are cut instead (output channels, or the input channels of the input
// gradient), each part a strided slice of the operands. Primitives are cached per thread, keyed
// by op and geometry; oneDNN's own primitive cache makes a new thread's first creation cheap.
// A geometry oneDNN has no implementation for returns false, and the caller runs the reference
// kernel instead.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/cpu/conv_weights.h"
#include "backend/cpu/library_calls.h"
#include "backend/interp/kernels.h"
#include "core/thread_pool.h"
#include "ir/node.h"

namespace lz::cpu {
namespace {

using dnnl::memory;
using Dims = memory::dims;

struct Geometry {
  Dims src, wei, dst, strides, dilates, pad_l, pad_r;
  // Element strides of each operand's plain layout where it is a channel slice of a larger
  // tensor (a part of a channel split); empty: dense.
  Dims src_str, wei_str, dst_str;
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
  for (const Dims* d : {&g.src, &g.wei, &g.dst, &g.strides, &g.dilates, &g.pad_l, &g.pad_r,
                        &g.src_str, &g.wei_str, &g.dst_str}) {
    k += '|';
    for (int64_t v : *d) k += std::to_string(v) + ",";
  }
  return k;
}

// The three operands of a convolution op, in the order conv_library_call passes them: for Conv
// (x, w -> y), ConvBackwardInput (dy, w -> dx), ConvBackwardWeight (x, dy -> dw).
constexpr int kOperands = 3;

struct Cached {
  dnnl::primitive prim;
  // Blocked: the layouts the primitive reads and writes (operand order as above) and the
  // reorders from the plain layouts (inputs) and to them (the output); absent where equal.
  bool blocked = false;
  memory::desc md[kOperands];
  memory::desc plain[kOperands];
  std::shared_ptr<dnnl::reorder> reorder[kOperands];
};

struct ThreadState {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::unordered_map<std::string, std::shared_ptr<Cached>> cache;
  std::vector<float> scratch[kOperands];  // blocked copies of the operands
};

// Blocked layouts pay a reorder of every operand per call. The activations' reorders scale with
// the work; the weights' does not: its cost against the convolution's is one over the output
// positions per part (N x OH x OW), so below kBlockedMinPositions positions the plain layouts win
// (bench/conv_bench on resnet18's shapes at batch 1, one part: layer4's 16 positions run 1.8x
// slower blocked, layer3's 49 1.6x faster; at batch 8 in two parts every layer is faster blocked).
constexpr int64_t kBlockedMinPositions = 32;

bool prefer_blocked(const Geometry& g) {
  int64_t positions = g.dst[0];
  for (size_t i = 2; i < g.dst.size(); ++i) positions *= g.dst[i];
  return positions >= kBlockedMinPositions;
}

ThreadState& thread_state() {
  single_threaded_onednn();
  thread_local ThreadState s;
  return s;
}

// The primitive for `op` over geometry `g`, on plain layouts or (blocked) oneDNN's choice.
std::shared_ptr<Cached> make_primitive(ThreadState& ts, ir::OpKind op, const Geometry& g,
                                       bool blocked) {
  const auto f32 = memory::data_type::f32;
  const bool grouped = g.wei.size() == g.src.size() + 1;
  const auto any = memory::format_tag::any;
  auto plain = [&](const Dims& dims, const Dims& str, memory::format_tag tag) {
    return str.empty() ? memory::desc(dims, f32, tag) : memory::desc(dims, f32, str);
  };
  memory::desc src_p = plain(g.src, g.src_str, act_tag(g.src.size()));
  memory::desc dst_p = plain(g.dst, g.dst_str, act_tag(g.dst.size()));
  memory::desc wei_p = plain(g.wei, g.wei_str, wei_tag(g.src.size(), grouped));
  memory::desc src = blocked ? memory::desc(g.src, f32, any) : src_p;
  memory::desc dst = blocked ? memory::desc(g.dst, f32, any) : dst_p;
  memory::desc wei = blocked ? memory::desc(g.wei, f32, any) : wei_p;
  auto c = std::make_shared<Cached>();
  c->blocked = blocked;
  dnnl::convolution_forward::desc fd(dnnl::prop_kind::forward_training,
                                     dnnl::algorithm::convolution_direct, src, wei, dst, g.strides,
                                     g.dilates, g.pad_l, g.pad_r);
  dnnl::convolution_forward::primitive_desc fpd(fd, ts.engine);
  switch (op) {
    case ir::OpKind::Conv:
      c->prim = dnnl::convolution_forward(fpd);
      c->md[0] = fpd.src_desc(), c->md[1] = fpd.weights_desc(), c->md[2] = fpd.dst_desc();
      c->plain[0] = src_p, c->plain[1] = wei_p, c->plain[2] = dst_p;
      break;
    case ir::OpKind::ConvBackwardInput: {
      dnnl::convolution_backward_data::desc bd(dnnl::algorithm::convolution_direct, src, wei, dst,
                                               g.strides, g.dilates, g.pad_l, g.pad_r);
      dnnl::convolution_backward_data::primitive_desc bpd(bd, ts.engine, fpd);
      c->prim = dnnl::convolution_backward_data(bpd);
      c->md[0] = bpd.diff_dst_desc(), c->md[1] = bpd.weights_desc(), c->md[2] = bpd.diff_src_desc();
      c->plain[0] = dst_p, c->plain[1] = wei_p, c->plain[2] = src_p;
      break;
    }
    case ir::OpKind::ConvBackwardWeight: {
      dnnl::convolution_backward_weights::desc wd(dnnl::algorithm::convolution_direct, src, wei,
                                                  dst, g.strides, g.dilates, g.pad_l, g.pad_r);
      dnnl::convolution_backward_weights::primitive_desc wpd(wd, ts.engine, fpd);
      c->prim = dnnl::convolution_backward_weights(wpd);
      c->md[0] = wpd.src_desc(), c->md[1] = wpd.diff_dst_desc(),
      c->md[2] = wpd.diff_weights_desc();
      c->plain[0] = src_p, c->plain[1] = dst_p, c->plain[2] = wei_p;
      break;
    }
    default:
      return nullptr;
  }
  if (blocked) {
    for (int i = 0; i < kOperands; ++i) {
      if (c->md[i] == c->plain[i]) continue;
      c->reorder[i] = std::make_shared<dnnl::reorder>(
          i < 2 ? dnnl::reorder(memory(c->plain[i], ts.engine), memory(c->md[i], ts.engine))
                : dnnl::reorder(memory(c->md[i], ts.engine), memory(c->plain[i], ts.engine)));
    }
  }
  return c;
}

// The primitive for `op` over geometry `g`, made on first use by this thread; null when oneDNN
// has no implementation for it. Blocked where prefer_blocked says so and oneDNN has it.
std::shared_ptr<Cached> primitive_for(ThreadState& ts, ir::OpKind op, const Geometry& g) {
  std::string key = key_of(op, g);
  auto it = ts.cache.find(key);
  if (it != ts.cache.end()) return it->second;
  if (ts.cache.size() > 256) ts.cache.clear();
  std::shared_ptr<Cached> c;
  // A channel slice (strided plain layouts) runs blocked only: on strided plain layouts oneDNN
  // 2.6 has only its reference implementation, hundreds of times slower (bench/conv_bench at
  // batch 1); without a blocked primitive the caller cuts the batch instead.
  const bool sliced = !g.src_str.empty() || !g.wei_str.empty() || !g.dst_str.empty();
  for (bool blocked : {prefer_blocked(g) || sliced, false}) {
    if (!blocked && sliced) break;
    try {
      c = make_primitive(ts, op, g, blocked);
      break;
    } catch (const dnnl::error&) {
      c = nullptr;  // unimplemented here: plain, then the reference kernel
    }
    if (!blocked) break;
  }
  ts.cache[key] = c;
  return c;
}

// Runs c's primitive over the three operands (plain buffers, in Cached's operand order):
// blocked operands go through this thread's scratch, except operand 1 where `blocked_1` is its
// blocked copy already (the weights, conv_weights.h).
void execute(ThreadState& ts, const Cached& c, const int args[kOperands],
             const void* const data[kOperands], const void* blocked_1) {
  std::unordered_map<int, memory> bound;
  memory plain_out;
  for (int i = 0; i < kOperands; ++i) {
    if (i == 1 && blocked_1) {
      bound[args[i]] = memory(c.md[i], ts.engine, const_cast<void*>(blocked_1));
      continue;
    }
    memory plain(c.plain[i], ts.engine, const_cast<void*>(data[i]));
    if (!c.reorder[i]) {
      bound[args[i]] = plain;
      continue;
    }
    std::vector<float>& buf = ts.scratch[i];
    const size_t need = c.md[i].get_size() / sizeof(float) + 1;
    if (buf.size() < need) buf.resize(need);
    memory blk(c.md[i], ts.engine, buf.data());
    if (i < 2) c.reorder[i]->execute(ts.stream, plain, blk);
    bound[args[i]] = blk;
    if (i == 2) plain_out = plain;
  }
  c.prim.execute(ts.stream, bound);
  if (c.reorder[2]) c.reorder[2]->execute(ts.stream, bound[args[2]], plain_out);
  ts.stream.wait();
}

// Row-major element strides of a dense tensor of shape s.
Dims dense_strides(const Shape& s) {
  Dims str(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) str[i - 1] = str[i] * s[i];
  return str;
}

int64_t plane(const Shape& s) {
  int64_t n = 1;
  for (size_t i = 1; i < s.size(); ++i) n *= s[i];
  return n;
}

// conv_library_call's work on `parts` parts: batch ranges, or (by_channel) channel ranges.
bool run_parts(ir::OpKind op, const ir::ConvAttrs& a, const std::vector<interp::ConstArray>& in,
               interp::MutArray out, const Shape& xs, const Shape& ws, const Shape& ys,
               int64_t threads, bool by_channel) {
  const Shape *x = &xs, *w = &ws, *y = &ys;
  const int64_t n = (*x)[0];
  const int64_t xp = plane(*x), yp = plane(*y), wn = numel(*w);
  const int64_t split_extent = op == ir::OpKind::ConvBackwardInput ? (*x)[1] : (*w)[0];
  const int parts = static_cast<int>(
      by_channel ? std::min<int64_t>(threads, split_extent / 16)
                 : std::clamp<int64_t>(threads, 1, std::max<int64_t>(n, 1)));
  // Partial weight gradients of the batch parts after the first (the first writes the output).
  const bool partial_dw = op == ir::OpKind::ConvBackwardWeight && !by_channel;
  std::vector<std::vector<float>> partial(partial_dw ? parts - 1 : 0);
  // The weights' blocked copies, made once for all parts (and kept across calls where in[1] is
  // a parameter's storage that this program does not overwrite).
  const bool weights_in = op == ir::OpKind::Conv || op == ir::OpKind::ConvBackwardInput;
  CallWeights weights(weights_in ? in[1].storage : nullptr);
  std::atomic<bool> ok{true};
  runtime_pool().parallel_for(parts, 1, 1, [&](int64_t p0, int64_t p1) {
    ThreadState& ts = thread_state();
    for (int64_t p = p0; p < p1 && ok; ++p) {
      Geometry g;
      int64_t xo = 0, wo = 0, yo = 0;  // element offsets of the part's x, w and y
      if (by_channel) {
        const int64_t c0 = split_extent * p / parts / 16 * 16;
        const int64_t c1 = p + 1 == parts ? split_extent : split_extent * (p + 1) / parts / 16 * 16;
        if (c1 == c0) continue;
        g = geometry(a, *x, *w, *y, n);
        const int64_t kernel = wn / ((*w)[0] * (*w)[1]);  // taps per (out, in) channel pair
        if (op == ir::OpKind::ConvBackwardInput) {  // input channels [c0, c1) of x and of w
          g.src[1] = g.wei[1] = c1 - c0;
          g.src_str = dense_strides(*x);
          g.wei_str = dense_strides(*w);
          xo = c0 * (xp / (*x)[1]);
          wo = c0 * kernel;
        } else {  // output channels [c0, c1) of w and of y
          g.wei[0] = g.dst[1] = c1 - c0;
          g.dst_str = dense_strides(*y);
          wo = c0 * (wn / (*w)[0]);
          yo = c0 * (yp / (*y)[1]);
        }
      } else {
        const int64_t b0 = n * p / parts, b1 = n * (p + 1) / parts;
        if (b1 == b0) continue;
        g = geometry(a, *x, *w, *y, b1 - b0);
        xo = b0 * xp;
        yo = b0 * yp;
      }
      std::shared_ptr<Cached> c = primitive_for(ts, op, g);
      if (!c) {
        ok = false;
        return;
      }
      const void* data[kOperands];
      int args[kOperands];
      switch (op) {
        case ir::OpKind::Conv:
          data[0] = static_cast<const float*>(in[0].data) + xo;
          data[1] = static_cast<const float*>(in[1].data) + wo;
          data[2] = static_cast<float*>(out.data) + yo;
          args[0] = DNNL_ARG_SRC, args[1] = DNNL_ARG_WEIGHTS, args[2] = DNNL_ARG_DST;
          break;
        case ir::OpKind::ConvBackwardInput:
          data[0] = static_cast<const float*>(in[0].data) + yo;
          data[1] = static_cast<const float*>(in[1].data) + wo;
          data[2] = static_cast<float*>(out.data) + xo;
          args[0] = DNNL_ARG_DIFF_DST, args[1] = DNNL_ARG_WEIGHTS, args[2] = DNNL_ARG_DIFF_SRC;
          break;
        case ir::OpKind::ConvBackwardWeight: {
          data[0] = static_cast<const float*>(in[0].data) + xo;
          data[1] = static_cast<const float*>(in[1].data) + yo;
          float* dw = static_cast<float*>(out.data) + wo;
          if (partial_dw && p > 0) {
            partial[p - 1].resize(static_cast<size_t>(wn));
            dw = partial[p - 1].data();
          }
          data[2] = dw;
          args[0] = DNNL_ARG_SRC, args[1] = DNNL_ARG_DIFF_DST, args[2] = DNNL_ARG_DIFF_WEIGHTS;
          break;
        }
        default:
          ok = false;
          return;
      }
      const void* blocked_w = nullptr;
      if (weights_in && c->reorder[1]) {
        const Cached& cc = *c;
        auto reorder = [&](void* dst) {
          memory plain(cc.plain[1], ts.engine, const_cast<void*>(data[1]));
          memory blocked(cc.md[1], ts.engine, dst);
          cc.reorder[1]->execute(ts.stream, plain, blocked);
          ts.stream.wait();
        };
        blocked_w =
            weights.get(wo * static_cast<int64_t>(sizeof(float)), cc.plain[1], cc.md[1], reorder);
      }
      execute(ts, *c, args, data, blocked_w);
    }
  });
  if (!ok) return false;
  if (!partial.empty()) {
    float* dw = static_cast<float*>(out.data);
    runtime_pool().parallel_for(wn, 1 << 14, 16, [&](int64_t i0, int64_t i1) {
      for (const std::vector<float>& part : partial) {
        for (int64_t i = i0; i < i1; ++i) dw[i] += part[static_cast<size_t>(i)];
      }
    });
  }
  return true;
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
  const int64_t threads = runtime_pool().num_threads();
  // Channel split: with fewer batch entries than threads (batch-1 inference), each part computes
  // a range of channels for the whole batch instead: output channels for the forward conv and
  // the weight gradient, input channels for the input gradient, in multiples of 16 (oneDNN's
  // channel blocks). The slices are strided views, so no part writes another's elements.
  // The weight gradient is cut by channels also where the weights outnumber the input: cut by
  // batch, every part after the first makes a whole partial gradient that is reordered out and
  // summed; cut by channels, each part reorders the whole input instead (resnet18's layer3 and
  // layer4 at batch 8: bench/conv_bench, RESULTS.md section 11).
  const int64_t split_extent = op == ir::OpKind::ConvBackwardInput ? (*x)[1] : (*w)[0];
  const bool dw_by_channel = op == ir::OpKind::ConvBackwardWeight && numel(*w) > numel(*x);
  const bool channel_split = (n < threads || dw_by_channel) && a.groups == 1 &&
                             split_extent >= 32 && prefer_blocked(geometry(a, *x, *w, *y, n));
  for (bool by_channel : {channel_split, false}) {
    if (run_parts(op, a, in, out, *x, *w, *y, threads, by_channel)) return true;
    if (!by_channel) return false;
  }
  return false;
}

}  // namespace lz::cpu
