// Lazuli's float32 convolution against oneDNN called directly, on resnet18's convolution shapes
// (goal >= 90% of oneDNN direct). Standalone program (not Google Benchmark): it
// alternates the candidates round by round and prints per-round ratios, which a noisy shared
// machine needs (MACHINE.md).
//
// For every shape and op (forward, backward data, backward weights), candidates:
//   lazuli      lz::nn::conv2d / conv_input_grad / conv_weight_grad on the cpu backend, inputs
//               device data over the same buffers (the weights a Lazuli-owned copy, as a model's
//               parameters), each call a cache-hit sync that waits (so tracing, hashing and
//               scheduling are included: what a user pays per call).
//   dnnl_plain  one oneDNN primitive on the whole batch, plain nchw / oihw layouts (those Lazuli
//               keeps), an OpenMP team of --threads threads.
//   dnnl_any    the same with format_tag::any: oneDNN picks its layouts (blocked, e.g. nChw16c /
//               OIhw16i16o); the inputs are reordered once outside the timed region, so this is
//               the primitive alone, what a framework that keeps blocked layouts everywhere pays.
//   dnnl_any_r  dnnl_any plus the per-call reorders of the activations between plain and
//               blocked (inputs in, output out; weights reordered once, outside): what a framework
//               with plain tensors would pay for blocked primitives with weight layouts chosen
//               once.
// Every candidate uses the same number of threads (--threads, default LAZULI_NUM_THREADS or 2).
// OMP_WAIT_POLICY=PASSIVE is set (the program re-executes itself with it) so that oneDNN's idle
// OpenMP team does not spin beside Lazuli's pool (MACHINE.md).
//
//   build/bench/conv_bench [--batch 8] [--size 112] [--rounds 5] [--iters 3]
//                          [--only conv1,l1,...] [--ops fwd,bwd_data,bwd_weights]
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <string>
#include <vector>

#include "lazuli/lazuli.h"

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using Clock = std::chrono::steady_clock;

struct Shape {
  std::string name;
  int count;                                // how many convolutions of this shape resnet18 has
  int64_t c_in, c_out, k, stride, pad, in;  // square input `in` x `in`
  int64_t out() const { return (in + 2 * pad - k) / stride + 1; }
};

// resnet18's convolutions for an input of size s (the stem, then each stage's first conv, its
// 1x1 downsample, and the 3x3 convs that keep the size).
std::vector<Shape> resnet18_shapes(int64_t s) {
  auto o = [](int64_t in, int64_t k, int64_t st, int64_t p) { return (in + 2 * p - k) / st + 1; };
  int64_t s1 = o(s, 7, 2, 3);   // stem output
  int64_t s2 = o(s1, 3, 2, 1);  // after the max-pool
  int64_t s3 = o(s2, 3, 2, 1), s4 = o(s3, 3, 2, 1), s5 = o(s4, 3, 2, 1);
  return {
      {"conv1", 1, 3, 64, 7, 2, 3, s},    {"l1", 4, 64, 64, 3, 1, 1, s2},
      {"l2a", 1, 64, 128, 3, 2, 1, s2},   {"l2ds", 1, 64, 128, 1, 2, 0, s2},
      {"l2b", 3, 128, 128, 3, 1, 1, s3},  {"l3a", 1, 128, 256, 3, 2, 1, s3},
      {"l3ds", 1, 128, 256, 1, 2, 0, s3}, {"l3b", 3, 256, 256, 3, 1, 1, s4},
      {"l4a", 1, 256, 512, 3, 2, 1, s4},  {"l4ds", 1, 256, 512, 1, 2, 0, s4},
      {"l4b", 3, 512, 512, 3, 1, 1, s5},
  };
}

enum class Op { Fwd, BwdData, BwdWeights };
const char* op_name(Op op) {
  return op == Op::Fwd ? "fwd" : op == Op::BwdData ? "bwd_data" : "bwd_weights";
}

std::vector<float> random_vector(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// One convolution problem: buffers and the candidates' callables.
struct Problem {
  Shape sh;
  int64_t n;
  Op op;
  std::vector<float> x, w, dy;  // inputs (plain layouts)
  std::vector<float> out_dnnl;  // dnnl_plain's result, for the correctness check
  std::map<std::string, std::function<void()>> run;
  std::string impl_plain, impl_any, layouts_any;
  double max_diff = 0, max_abs = 0;
};

struct Dnnl {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream s{eng};
};

Dnnl& dnnl_ctx() {
  static Dnnl d;
  return d;
}

// oneDNN 2.x has no tag query: the blocking's inner blocks in oneDNN's own letters (dims a, b, c,
// d), as its verbose mode prints them: "16b" is nChw16c (aBcd16b), "16b16a" is OIhw16i16o
// (ABcd16b16a); "plain" when there are none.
std::string tag_of(const memory::desc& d) {
  const auto& b = d.data.format_desc.blocking;
  std::string s;
  for (int i = 0; i < b.inner_nblks; ++i)
    s += std::to_string(b.inner_blks[i]) + static_cast<char>('a' + b.inner_idxs[i]);
  return s.empty() ? "plain" : s;
}

// Builds the primitives of one problem and its candidates.
void setup(Problem& p) {
  Dnnl& d = dnnl_ctx();
  const auto f32 = memory::data_type::f32;
  const Shape& sh = p.sh;
  const int64_t oh = sh.out();
  memory::dims src{p.n, sh.c_in, sh.in, sh.in}, wei{sh.c_out, sh.c_in, sh.k, sh.k},
      dst{p.n, sh.c_out, oh, oh}, strides{sh.stride, sh.stride}, dil{0, 0}, pad_l{sh.pad, sh.pad};
  const int64_t pr = (oh - 1) * sh.stride + sh.k - sh.in - sh.pad;
  memory::dims pad_r{pr, pr};
  p.x = random_vector(static_cast<size_t>(p.n * sh.c_in * sh.in * sh.in), 1);
  p.w = random_vector(static_cast<size_t>(sh.c_out * sh.c_in * sh.k * sh.k), 2);
  p.dy = random_vector(static_cast<size_t>(p.n * sh.c_out * oh * oh), 3);
  for (float& v : p.w) v *= 0.05f;
  const size_t out_n = p.op == Op::Fwd       ? p.dy.size()
                       : p.op == Op::BwdData ? p.x.size()
                                             : p.w.size();
  p.out_dnnl.assign(out_n, 0.f);

  auto make = [&](Tag act, Tag wt) {
    memory::desc s_md(src, f32, act), w_md(wei, f32, wt), d_md(dst, f32, act);
    dnnl::convolution_forward::desc fd(dnnl::prop_kind::forward_training,
                                       dnnl::algorithm::convolution_direct, s_md, w_md, d_md,
                                       strides, dil, pad_l, pad_r);
    dnnl::convolution_forward::primitive_desc fpd(fd, d.eng);
    return std::make_pair(fpd, std::make_tuple(s_md, w_md, d_md));
  };

  // Plain: one primitive over the caller's buffers.
  {
    auto [fpd, mds] = make(Tag::nchw, Tag::oihw);
    auto [s_md, w_md, d_md] = mds;
    memory ms(s_md, d.eng, p.x.data()), mw(w_md, d.eng, p.w.data()), mdst(d_md, d.eng, p.dy.data());
    auto out = std::make_shared<std::vector<float>>(out_n);
    std::vector<float>* res = &p.out_dnnl;
    if (p.op == Op::Fwd) {
      dnnl::convolution_forward prim(fpd);
      p.impl_plain = fpd.impl_info_str();
      memory mo(d_md, d.eng, out->data());
      p.run["dnnl_plain"] = [=, &d, keep = out]() mutable {
        prim.execute(d.s, {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_DST, mo}});
        d.s.wait();
      };
    } else if (p.op == Op::BwdData) {
      dnnl::convolution_backward_data::desc bd(dnnl::algorithm::convolution_direct, s_md, w_md,
                                               d_md, strides, dil, pad_l, pad_r);
      dnnl::convolution_backward_data::primitive_desc bpd(bd, d.eng, fpd);
      p.impl_plain = bpd.impl_info_str();
      dnnl::convolution_backward_data prim(bpd);
      memory mo(s_md, d.eng, out->data());
      p.run["dnnl_plain"] = [=, &d, keep = out]() mutable {
        prim.execute(d.s,
                     {{DNNL_ARG_DIFF_DST, mdst}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_DIFF_SRC, mo}});
        d.s.wait();
      };
    } else {
      dnnl::convolution_backward_weights::desc wd(dnnl::algorithm::convolution_direct, s_md, w_md,
                                                  d_md, strides, dil, pad_l, pad_r);
      dnnl::convolution_backward_weights::primitive_desc wpd(wd, d.eng, fpd);
      p.impl_plain = wpd.impl_info_str();
      dnnl::convolution_backward_weights prim(wpd);
      memory mo(w_md, d.eng, out->data());
      p.run["dnnl_plain"] = [=, &d, keep = out]() mutable {
        prim.execute(d.s,
                     {{DNNL_ARG_SRC, ms}, {DNNL_ARG_DIFF_DST, mdst}, {DNNL_ARG_DIFF_WEIGHTS, mo}});
        d.s.wait();
      };
    }
    p.run["dnnl_plain_check"] = [plain = p.run["dnnl_plain"], out, res]() {
      plain();
      std::copy(out->begin(), out->end(), res->begin());
    };
  }

  // format_tag::any: oneDNN's own layouts; inputs reordered once here.
  {
    auto [fpd, mds] = make(Tag::any, Tag::any);
    auto [s_plain, w_plain, d_plain] =
        std::make_tuple(memory::desc(src, f32, Tag::nchw), memory::desc(wei, f32, Tag::oihw),
                        memory::desc(dst, f32, Tag::nchw));
    memory ps(s_plain, d.eng, p.x.data()), pw(w_plain, d.eng, p.w.data()),
        pdst(d_plain, d.eng, p.dy.data());
    memory::desc s_md, w_md, d_md, out_md;
    dnnl::primitive prim;
    int in_a, in_b, out_arg;
    memory a_plain, b_plain;
    memory::desc a_md, b_md;
    if (p.op == Op::Fwd) {
      prim = dnnl::convolution_forward(fpd);
      p.impl_any = fpd.impl_info_str();
      a_md = fpd.src_desc(), b_md = fpd.weights_desc(), out_md = fpd.dst_desc();
      a_plain = ps, b_plain = pw;
      in_a = DNNL_ARG_SRC, in_b = DNNL_ARG_WEIGHTS, out_arg = DNNL_ARG_DST;
    } else if (p.op == Op::BwdData) {
      memory::desc sa(src, f32, Tag::any), wa(wei, f32, Tag::any), da(dst, f32, Tag::any);
      dnnl::convolution_backward_data::desc bd(dnnl::algorithm::convolution_direct, sa, wa, da,
                                               strides, dil, pad_l, pad_r);
      dnnl::convolution_backward_data::primitive_desc bpd(bd, d.eng, fpd);
      prim = dnnl::convolution_backward_data(bpd);
      p.impl_any = bpd.impl_info_str();
      a_md = bpd.diff_dst_desc(), b_md = bpd.weights_desc(), out_md = bpd.diff_src_desc();
      a_plain = pdst, b_plain = pw;
      in_a = DNNL_ARG_DIFF_DST, in_b = DNNL_ARG_WEIGHTS, out_arg = DNNL_ARG_DIFF_SRC;
    } else {
      memory::desc sa(src, f32, Tag::any), wa(wei, f32, Tag::any), da(dst, f32, Tag::any);
      dnnl::convolution_backward_weights::desc wd(dnnl::algorithm::convolution_direct, sa, wa, da,
                                                  strides, dil, pad_l, pad_r);
      dnnl::convolution_backward_weights::primitive_desc wpd(wd, d.eng, fpd);
      prim = dnnl::convolution_backward_weights(wpd);
      p.impl_any = wpd.impl_info_str();
      a_md = wpd.src_desc(), b_md = wpd.diff_dst_desc(), out_md = wpd.diff_weights_desc();
      a_plain = ps, b_plain = pdst;
      in_a = DNNL_ARG_SRC, in_b = DNNL_ARG_DIFF_DST, out_arg = DNNL_ARG_DIFF_WEIGHTS;
    }
    p.layouts_any = tag_of(a_md) + "," + tag_of(b_md) + "->" + tag_of(out_md);
    memory a(a_md, d.eng), b(b_md, d.eng), o(out_md, d.eng);
    dnnl::reorder(a_plain, a).execute(d.s, a_plain, a);
    dnnl::reorder(b_plain, b).execute(d.s, b_plain, b);
    d.s.wait();
    p.run["dnnl_any"] = [=, &d]() mutable {
      prim.execute(d.s, {{in_a, a}, {in_b, b}, {out_arg, o}});
      d.s.wait();
    };
    // Per call: the activation inputs reordered in, the output out (weights stay reordered:
    // for the weight gradient both inputs are activations).
    const memory::desc out_plain = p.op == Op::Fwd       ? d_plain
                                   : p.op == Op::BwdData ? s_plain
                                                         : w_plain;
    auto out_buf = std::make_shared<std::vector<float>>(out_n);
    memory op_plain(out_plain, d.eng, out_buf->data());
    dnnl::reorder ra(a_plain, a), rb(b_plain, b), ro(o, op_plain);
    const bool b_is_activation = p.op == Op::BwdWeights;
    p.run["dnnl_any_r"] = [=, &d, keep = out_buf]() mutable {
      ra.execute(d.s, a_plain, a);
      if (b_is_activation) rb.execute(d.s, b_plain, b);
      prim.execute(d.s, {{in_a, a}, {in_b, b}, {out_arg, o}});
      ro.execute(d.s, o, op_plain);
      d.s.wait();
    };
  }

  // Lazuli: the same buffers as device data (no copy), one op, a waiting sync per call; the
  // weights in Lazuli's own memory, as a model's parameters are (memory from_blob lends may be
  // written behind Lazuli's back, so nothing derived from it is kept across calls).
  lz::Tensor x = lz::from_blob(p.x.data(), lz::DType::Float32, {p.n, sh.c_in, sh.in, sh.in});
  lz::Tensor w = lz::from_data(p.w.data(), lz::DType::Float32, {sh.c_out, sh.c_in, sh.k, sh.k});
  lz::Tensor dy = lz::from_blob(p.dy.data(), lz::DType::Float32, {p.n, sh.c_out, oh, oh});
  lz::sync_tensors({x, w, dy}, true);
  const Op op = p.op;
  const Shape s = sh;
  const int64_t n = p.n;
  auto lazuli_call = [=]() {
    if (op == Op::Fwd) return lz::nn::conv2d(x, w, lz::Tensor(), {s.stride}, {s.pad});
    if (op == Op::BwdData)
      return lz::nn::conv_input_grad({n, s.c_in, s.in, s.in}, w, dy, {s.stride}, {s.pad});
    return lz::nn::conv_weight_grad(x, {s.c_out, s.c_in, s.k, s.k}, dy, {s.stride}, {s.pad});
  };
  p.run["lazuli"] = [=]() {
    lz::Tensor y = lazuli_call();
    lz::sync_tensors({y}, true);
  };
  // Check: Lazuli against oneDNN plain.
  p.run["dnnl_plain_check"]();
  std::vector<float> got = lazuli_call().to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) {
    p.max_diff = std::max(p.max_diff, std::fabs(double(got[i]) - double(p.out_dnnl[i])));
    p.max_abs = std::max(p.max_abs, std::fabs(double(p.out_dnnl[i])));
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (!getenv("OMP_WAIT_POLICY")) {  // libgomp reads it at load: set it and start again
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    execv("/proc/self/exe", argv);
  }
  int64_t batch = 8, size = 112;
  int rounds = 5, iters = 3;
  const char* env_threads = getenv("LAZULI_NUM_THREADS");
  int threads = env_threads ? atoi(env_threads) : 2;
  std::string only, ops = "fwd,bwd_data,bwd_weights";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--batch")
      batch = atoll(argv[i + 1]);
    else if (a == "--size")
      size = atoll(argv[i + 1]);
    else if (a == "--rounds")
      rounds = atoi(argv[i + 1]);
    else if (a == "--iters")
      iters = atoi(argv[i + 1]);
    else if (a == "--threads")
      threads = atoi(argv[i + 1]);
    else if (a == "--only")
      only = argv[i + 1];
    else if (a == "--ops")
      ops = argv[i + 1];
    else {
      fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (!env_threads) setenv("LAZULI_NUM_THREADS", std::to_string(threads).c_str(), 1);
  omp_set_num_threads(threads);  // oneDNN direct: an OpenMP team of `threads`
  printf(
      "conv_bench: batch %lld, input %lldx%lld, %d threads for every candidate, %d rounds x "
      "%d calls, OMP_WAIT_POLICY=%s, oneDNN %d.%d.%d, lazuli backend %s\n",
      (long long)batch, (long long)size, (long long)size, threads, rounds, iters,
      getenv("OMP_WAIT_POLICY"), dnnl_version()->major, dnnl_version()->minor,
      dnnl_version()->patch, lz::backend().c_str());
  const std::vector<std::string> cands = {"lazuli", "dnnl_plain", "dnnl_any", "dnnl_any_r"};
  std::vector<std::string> want_shapes = split(only);
  std::map<std::string, std::map<std::string, double>> net;  // op -> candidate -> weighted ms
  for (const std::string& opn : split(ops)) {
    Op op = opn == "fwd" ? Op::Fwd : opn == "bwd_data" ? Op::BwdData : Op::BwdWeights;
    printf("\n== %s\n%-6s %-22s %9s %9s %9s %9s  %-22s %-22s %s\n", op_name(op), "shape",
           "geometry", "lazuli", "plain", "any", "any+r", "lazuli/plain [range]",
           "lazuli/any [range]", "impl plain | impl any (layouts) | max diff");
    for (const Shape& sh : resnet18_shapes(size)) {
      if (!want_shapes.empty() &&
          std::find(want_shapes.begin(), want_shapes.end(), sh.name) == want_shapes.end())
        continue;
      if (op == Op::BwdData && sh.name == "conv1") continue;  // no input gradient in a model
      Problem p{sh, batch, op, {}, {}, {}, {}, {}, {}, {}, {}, 0, 0};
      setup(p);
      for (const auto& c : cands) p.run[c]();  // warm up: primitive creation, first touches
      std::map<std::string, std::vector<double>> per_round;
      std::vector<double> r_plain, r_any;
      for (int r = 0; r < rounds; ++r) {
        std::map<std::string, double> t;
        for (size_t k = 0; k < cands.size(); ++k) {
          const std::string& c = cands[(k + r) % cands.size()];  // rotate the order
          std::vector<double> calls;
          for (int i = 0; i < iters; ++i) {
            auto t0 = Clock::now();
            p.run[c]();
            calls.push_back(seconds_since(t0));
          }
          t[c] = median(calls);
          per_round[c].push_back(t[c]);
        }
        r_plain.push_back(t["dnnl_plain"] / t["lazuli"]);
        r_any.push_back(t["dnnl_any"] / t["lazuli"]);
      }
      char geo[64];
      snprintf(geo, sizeof geo, "%lldx%lld->%lld k%lld s%lld %lld", (long long)sh.c_in,
               (long long)sh.in, (long long)sh.c_out, (long long)sh.k, (long long)sh.stride,
               (long long)sh.out());
      auto mm = [](const std::vector<double>& v) {
        return std::make_pair(*std::min_element(v.begin(), v.end()),
                              *std::max_element(v.begin(), v.end()));
      };
      auto [p0, p1] = mm(r_plain);
      auto [a0, a1] = mm(r_any);
      printf(
          "%-6s %-22s %8.3fms %8.3fms %8.3fms %8.3fms  %5.0f%% [%3.0f-%3.0f%%]      %5.0f%% "
          "[%3.0f-%3.0f%%]       %s | %s (%s) | %.2g of %.2g\n",
          sh.name.c_str(), geo, 1e3 * median(per_round["lazuli"]),
          1e3 * median(per_round["dnnl_plain"]), 1e3 * median(per_round["dnnl_any"]),
          1e3 * median(per_round["dnnl_any_r"]), 100 * median(r_plain), 100 * p0, 100 * p1,
          100 * median(r_any), 100 * a0, 100 * a1, p.impl_plain.c_str(), p.impl_any.c_str(),
          p.layouts_any.c_str(), p.max_diff, p.max_abs);
      fflush(stdout);
      for (const auto& c : cands) net[opn][c] += sh.count * median(per_round[c]);
    }
    printf(
        "resnet18 total (each shape x its count): lazuli %.2f ms, plain %.2f ms (lazuli at "
        "%.0f%%), any %.2f ms (%.0f%%), any+reorders %.2f ms (%.0f%%)\n",
        1e3 * net[opn]["lazuli"], 1e3 * net[opn]["dnnl_plain"],
        100 * net[opn]["dnnl_plain"] / net[opn]["lazuli"], 1e3 * net[opn]["dnnl_any"],
        100 * net[opn]["dnnl_any"] / net[opn]["lazuli"], 1e3 * net[opn]["dnnl_any_r"],
        100 * net[opn]["dnnl_any_r"] / net[opn]["lazuli"]);
  }
  // Blocked weight copies made / reused (backend/cpu/conv_weights.h): steady calls reuse.
  printf("ConvWeightReorder %lld, ConvWeightReuse %lld\n",
         (long long)lz::debug::counter_value("ConvWeightReorder"),
         (long long)lz::debug::counter_value("ConvWeightReuse"));
  return 0;
}
