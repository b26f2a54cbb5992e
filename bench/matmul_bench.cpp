// Lazuli's bfloat16 matrix products against oneDNN's bf16 matmul called directly, on GPT-2-small's
// shapes, with the float32 products of both beside them for scale. Standalone program
// (not Google Benchmark): it alternates the candidates round by round and prints per-round
// ratios, which a noisy shared machine needs (MACHINE.md).
//
// Candidates, for each shape [batch x] m x k times k x n:
//   lazuli_bf16  lz::matmul on bfloat16 device data over the same buffers, each call a cache-hit
//                sync that waits (tracing, hashing and scheduling included: what a user pays).
//   dnnl_bf16    one oneDNN matmul primitive (bf16 in and out, float32 sums) on the whole
//                problem, plain row-major layouts, an OpenMP team of --threads threads.
//   lazuli_f32 / dnnl_f32   the same in float32 (Lazuli calls oneDNN's sgemm).
// OMP_WAIT_POLICY=PASSIVE is set (the program re-executes itself with it) so that oneDNN's idle
// OpenMP team does not spin beside Lazuli's pool (MACHINE.md).
//
//   build/bench/matmul_bench [--tokens 512] [--rounds 5] [--iters 5] [--threads N]
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
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
using Clock = std::chrono::steady_clock;

struct Problem {
  std::string name;
  int64_t batch, m, k, n;
};

// GPT-2 small (width 768, 12 heads of 64, MLP 3072) on `t` tokens (batch x sequence) of 128-token
// sequences: the attention's q/k/v projection, its output projection, the MLP's two products,
// and the per-head score and value products.
std::vector<Problem> gpt2_small(int64_t t) {
  const int64_t heads = 12 * (t / 128);
  return {{"qkv", 1, t, 768, 2304},          {"attn_out", 1, t, 768, 768},
          {"mlp_up", 1, t, 768, 3072},       {"mlp_down", 1, t, 3072, 768},
          {"scores", heads, 128, 64, 128},   {"values", heads, 128, 128, 64}};
}

uint16_t to_bf16(float f) {  // round to nearest even (finite inputs)
  uint32_t x;
  std::memcpy(&x, &f, 4);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}
float from_bf16(uint16_t h) {
  uint32_t x = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

struct Case {
  Problem p;
  std::vector<float> a32, b32, c32;
  std::vector<uint16_t> a16, b16, c16;
  std::map<std::string, std::function<void()>> run;
  double max_rel_bf16 = 0;  // Lazuli's bf16 result against oneDNN's, relative to the largest value
};

void setup(Case& c, dnnl::engine& eng, dnnl::stream& s) {
  const Problem& p = c.p;
  std::mt19937 g(7);
  std::normal_distribution<float> d;
  c.a32.resize(static_cast<size_t>(p.batch * p.m * p.k));
  c.b32.resize(static_cast<size_t>(p.batch * p.k * p.n));
  c.c32.resize(static_cast<size_t>(p.batch * p.m * p.n));
  for (float& x : c.a32) x = from_bf16(to_bf16(d(g)));  // values exact in both dtypes
  for (float& x : c.b32) x = from_bf16(to_bf16(0.05f * d(g)));
  for (float x : c.a32) c.a16.push_back(to_bf16(x));
  for (float x : c.b32) c.b16.push_back(to_bf16(x));
  c.c16.resize(c.c32.size());
  memory::dims da{p.batch, p.m, p.k}, db{p.batch, p.k, p.n}, dc{p.batch, p.m, p.n};
  for (auto [dt, name] : {std::pair{memory::data_type::bf16, "dnnl_bf16"},
                          std::pair{memory::data_type::f32, "dnnl_f32"}}) {
    const bool half = dt == memory::data_type::bf16;
    memory::desc ma(da, dt, memory::format_tag::abc), mb(db, dt, memory::format_tag::abc),
        mc(dc, dt, memory::format_tag::abc);
    dnnl::matmul prim(dnnl::matmul::primitive_desc(dnnl::matmul::desc(ma, mb, mc), eng));
    memory xa(ma, eng, half ? static_cast<void*>(c.a16.data()) : c.a32.data());
    memory xb(mb, eng, half ? static_cast<void*>(c.b16.data()) : c.b32.data());
    memory xc(mc, eng, half ? static_cast<void*>(c.c16.data()) : c.c32.data());
    c.run[name] = [=, &s]() mutable {
      prim.execute(s, {{DNNL_ARG_SRC, xa}, {DNNL_ARG_WEIGHTS, xb}, {DNNL_ARG_DST, xc}});
      s.wait();
    };
  }
  for (auto [dt, name] : {std::pair{lz::DType::BFloat16, "lazuli_bf16"},
                          std::pair{lz::DType::Float32, "lazuli_f32"}}) {
    const bool half = dt == lz::DType::BFloat16;
    lz::Tensor a = lz::from_blob(half ? static_cast<void*>(c.a16.data()) : c.a32.data(), dt,
                                 {p.batch, p.m, p.k});
    lz::Tensor b = lz::from_blob(half ? static_cast<void*>(c.b16.data()) : c.b32.data(), dt,
                                 {p.batch, p.k, p.n});
    lz::sync_tensors({a, b}, true);
    c.run[name] = [a, b]() {
      lz::Tensor y = lz::matmul(a, b);
      lz::sync_tensors({y}, true);
    };
  }
  // Check: Lazuli's bf16 product against oneDNN's (both round float32 sums once).
  c.run["dnnl_bf16"]();
  std::vector<float> got = lz::matmul(lz::from_blob(c.a16.data(), lz::DType::BFloat16, {p.batch, p.m, p.k}),
                                      lz::from_blob(c.b16.data(), lz::DType::BFloat16, {p.batch, p.k, p.n}))
                               .to(lz::DType::Float32)
                               .to_vector<float>();
  double max_abs = 0, max_diff = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double ref = from_bf16(c.c16[i]);
    max_abs = std::max(max_abs, std::fabs(ref));
    max_diff = std::max(max_diff, std::fabs(got[i] - ref));
  }
  c.max_rel_bf16 = max_abs > 0 ? max_diff / max_abs : max_diff;
}

}  // namespace

int main(int argc, char** argv) {
  if (!getenv("OMP_WAIT_POLICY")) {  // libgomp reads it at load: set it and start again
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    execv("/proc/self/exe", argv);
  }
  int64_t tokens = 512;
  int rounds = 5, iters = 5;
  const char* env_threads = getenv("LAZULI_NUM_THREADS");
  int threads = env_threads ? atoi(env_threads) : 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--tokens") {
      tokens = atoll(argv[i + 1]);
    } else if (a == "--rounds") {
      rounds = atoi(argv[i + 1]);
    } else if (a == "--iters") {
      iters = atoi(argv[i + 1]);
    } else if (a == "--threads") {
      threads = atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (tokens < 128 || tokens % 128) {
    std::fprintf(stderr, "--tokens must be a multiple of 128\n");
    return 2;
  }
  omp_set_num_threads(threads);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  const std::vector<std::string> names{"lazuli_bf16", "dnnl_bf16", "lazuli_f32", "dnnl_f32"};
  std::printf("GPT-2-small matrix products, %lld tokens, %d threads, %d rounds x %d calls (median ms per call)\n",
              static_cast<long long>(tokens), threads, rounds, iters);
  std::printf("%-9s %-22s %11s %11s %11s %11s  %-26s %s\n", "shape", "[batch x] m x k x n",
              "lazuli_bf16", "dnnl_bf16", "lazuli_f32", "dnnl_f32", "lazuli/dnnl bf16 [range]",
              "max rel diff");
  for (const Problem& p : gpt2_small(tokens)) {
    Case c{p, {}, {}, {}, {}, {}, {}, {}, 0};
    setup(c, eng, s);
    std::map<std::string, std::vector<double>> ms;
    std::vector<double> ratio;
    for (const std::string& n : names) c.run[n]();  // warm-up: compiles, primitive creation
    for (int r = 0; r < rounds; ++r) {
      std::map<std::string, double> round;
      for (const std::string& n : names) {
        auto t0 = Clock::now();
        for (int i = 0; i < iters; ++i) c.run[n]();
        round[n] = 1e3 * seconds_since(t0) / iters;
        ms[n].push_back(round[n]);
      }
      ratio.push_back(round["dnnl_bf16"] / round["lazuli_bf16"]);  // Lazuli's share of oneDNN's speed
    }
    char dims[64];
    std::snprintf(dims, sizeof dims, "%lldx%lldx%lldx%lld", static_cast<long long>(p.batch),
                  static_cast<long long>(p.m), static_cast<long long>(p.k), static_cast<long long>(p.n));
    char share[64];
    std::snprintf(share, sizeof share, "%.0f%% [%.0f-%.0f]", 100 * median(ratio),
                  100 * *std::min_element(ratio.begin(), ratio.end()),
                  100 * *std::max_element(ratio.begin(), ratio.end()));
    std::printf("%-9s %-22s %11.3f %11.3f %11.3f %11.3f  %-26s %.2g\n", p.name.c_str(), dims,
                median(ms["lazuli_bf16"]), median(ms["dnnl_bf16"]), median(ms["lazuli_f32"]),
                median(ms["dnnl_f32"]), share, c.max_rel_bf16);
  }
  return 0;
}
