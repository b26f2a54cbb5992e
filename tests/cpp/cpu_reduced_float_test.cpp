// The cpu backend's float16/bfloat16 kernels (lower/fusion.cpp rule 10, jit/emit_expr.cpp
// widen/narrow) against the reference backend ("interp"), bit for bit:
//  - every 16-bit pattern of both formats cast to every dtype (NaN payloads, signaling NaNs,
//    infinities, signed zeros, float16 subnormals);
//  - float32, float64, integer and bool values cast to both formats: ties, the float16
//    subnormal range, overflow past 65504 (65520 is a tie that goes to infinity), float64 values
//    that round twice on the way through float32 as the reference does, random bit patterns;
//  - leaves, movement and index ops (constants, arange, transpose/reshape, gather, index_select,
//    index_copy) on 16-bit data;
// and the plans: 16-bit casts, loads and stores are compiled kernels, not reference fallbacks.
#include <stdlib.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_target.h"
#include "backend/cpu/kernel_cache.h"
#include "core/metrics.h"
#include "core/reduced_float.h"
#include "exec/graph_executor.h"
#include "lower/plan.h"
#include "cpu_compiler_util.h"
#include "test_util.h"

namespace lz {
namespace {

// The fixture of the cpu backend tests: a per-process kernel cache directory, so kernels are
// compiled here and the tests never write the user's cache; the backend put back afterwards.
using CpuReducedFloat = cpu_test::CpuCompilerTest;

// An output's elements as bit patterns: a 16-bit float widened to float32 (exact and injective,
// NaN payloads kept: reduced_float.h), so equal patterns mean equal 16-bit values.
std::vector<uint64_t> bits_of(const Tensor& t) {
  std::vector<uint64_t> out;
  switch (t.dtype()) {
    case DType::Float16:
    case DType::BFloat16:
    case DType::Float32:
      for (float v : t.to_vector<float>()) out.push_back(float_bits(v));
      break;
    case DType::Float64:
      for (double v : t.to_vector<double>()) {
        uint64_t u;
        std::memcpy(&u, &v, sizeof u);
        out.push_back(u);
      }
      break;
    case DType::Int32:
      for (int32_t v : t.to_vector<int32_t>()) out.push_back(static_cast<uint32_t>(v));
      break;
    case DType::Int64:
      for (int64_t v : t.to_vector<int64_t>()) out.push_back(static_cast<uint64_t>(v));
      break;
    case DType::Bool:
      for (bool v : t.to_vector<bool>()) out.push_back(v);
      break;
  }
  return out;
}

std::vector<std::vector<uint64_t>> run_on(const std::string& backend,
                                          const std::function<std::vector<Tensor>()>& program) {
  lz::wait();
  set_active_backend(backend);
  std::vector<Tensor> ts = program();
  sync_tensors(ts);
  std::vector<std::vector<uint64_t>> out;
  for (const Tensor& t : ts) out.push_back(bits_of(t));
  lz::wait();
  set_active_backend(config().backend);
  return out;
}

lower::Plan plan_of(const std::vector<Tensor>& ts) {
  std::vector<internal::TensorImplPtr> impls;
  for (const Tensor& t : ts) impls.push_back(t.impl());
  Roots roots = collect(impls, /*include_views=*/false);
  PostOrder po = post_order(roots.values);
  return lower::build_plan(lowering_graph(roots, po), cpu::cpu_target(), /*explain=*/false);
}

// Reference kernels the plan runs, by op name.
std::vector<std::string> fallbacks(const std::vector<Tensor>& ts) {
  std::vector<std::string> names;
  for (const lower::PlanStep& s : plan_of(ts).steps) {
    if (s.kind == lower::PlanStep::Fallback) names.push_back(s.counter);
  }
  return names;
}

// The program gives the same bits on both backends.
void expect_same_bits(const std::function<std::vector<Tensor>()>& program) {
  const auto ref = run_on("interp", program), got = run_on("cpu", program);
  ASSERT_EQ(ref.size(), got.size());
  for (size_t k = 0; k < ref.size(); ++k) {
    ASSERT_EQ(ref[k].size(), got[k].size()) << "output " << k;
    for (size_t e = 0; e < ref[k].size(); ++e) {
      ASSERT_EQ(ref[k][e], got[k][e]) << "output " << k << " element " << e << std::hex
                                      << ": reference 0x" << ref[k][e] << ", cpu 0x" << got[k][e];
    }
  }
}

const DType kAll[] = {DType::Bool,    DType::Int32,   DType::Int64,   DType::Float32,
                      DType::Float64, DType::Float16, DType::BFloat16};

// Every 16-bit pattern as a tensor of `dt`.
Tensor every_pattern(DType dt) {
  std::vector<uint16_t> h(65536);
  for (uint32_t i = 0; i < 65536; ++i) h[i] = static_cast<uint16_t>(i);
  return from_data(h.data(), dt, {256, 256});
}

TEST_F(CpuReducedFloat, EveryFloat16AndBFloat16PatternCastsToEveryDTypeAsTheReference) {
  for (DType from : {DType::Float16, DType::BFloat16}) {
    auto program = [&] {
      Tensor x = every_pattern(from);
      std::vector<Tensor> outs;
      for (DType to : kAll) {
        if (to != from) outs.push_back(cast(x, to));
      }
      // Round trips: a NaN comes back quieted, everything else unchanged.
      outs.push_back(cast(cast(x, DType::Float32), from));
      outs.push_back(cast(cast(x, DType::Float64), from));
      return outs;
    };
    SCOPED_TRACE(std::string(dtype_name(from)));
    expect_same_bits(program);
    EXPECT_TRUE(fallbacks(program()).empty());
  }
}

// float32 values around every rounding boundary of both formats.
std::vector<float> special_floats() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {
      0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
      bits_float(0x7f800001u), bits_float(0xff800001u), bits_float(0x7fc00001u),  // NaN payloads
      bits_float(0x7fa02000u), bits_float(0xffffffffu), bits_float(0x7f802001u),
      1.0f, -1.0f, 1.0f + 0x1p-8f, 1.0f + 0x1p-8f * 3, 1.0f + 0x1p-8f + 0x1p-20f,  // bf16 ties
      1.0f + 0x1p-11f, 1.0f + 0x1p-11f * 3, -(1.0f + 0x1p-11f),                   // f16 ties
      0x1p-24f, 0x1p-25f, 0x1p-25f * 3, 0x1p-26f, 0x1p-25f + 0x1p-40f, -0x1p-25f,  // subnormals
      0x1p-14f, 0x1p-14f - 0x1p-25f, 0x1p-14f - 0x1p-26f, 0x1.ffcp-15f, 0x1.ffep-15f,
      65504.0f, 65519.0f, 65519.996f, 65520.0f, -65520.0f, 65536.0f, 1e10f, 3.4e38f,
      0x1.fefffep127f, 0x1.ff0000p127f, std::numeric_limits<float>::max(),  // bf16 overflow
      std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min(),
      std::numeric_limits<float>::min(), 0.1f, 1.0f / 3.0f, 2048.0f, 2049.0f, 2051.0f, 16777217.0f};
  std::mt19937 gen(11);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 100000; ++i) v.push_back(bits_float(bits(gen)));
  // Every float16 boundary region densely: float32 values near each float16 subnormal/normal.
  for (uint32_t u = 0x33000000u; u < 0x39000000u; u += 0x1fff) v.push_back(bits_float(u));
  return v;
}

TEST_F(CpuReducedFloat, Float32ValuesRoundToFloat16AndBFloat16AsTheReference) {
  const std::vector<float> v = special_floats();
  auto program = [&] {
    Tensor x = tensor<float>(v);
    return std::vector<Tensor>{cast(x, DType::Float16), cast(x, DType::BFloat16),
                               cast(cast(x, DType::Float16), DType::BFloat16),
                               cast(cast(x, DType::BFloat16), DType::Float16)};
  };
  expect_same_bits(program);
  EXPECT_TRUE(fallbacks(program()).empty());
  // The reference itself is reduced_float.h: spot-check the values that decide the rounding.
  set_active_backend("cpu");
  Tensor h = cast(tensor<float>({65520.0f, 65519.0f, 0x1p-25f, 0x1p-25f * 3, 1.0f + 0x1p-11f}),
                  DType::Float16);
  EXPECT_EQ(h.to_vector<float>(),
            (std::vector<float>{std::numeric_limits<float>::infinity(), 65504.0f, 0.0f, 0x1p-23f,
                                1.0f}));
}

TEST_F(CpuReducedFloat, Float64ValuesRoundTwiceThroughFloat32AsTheReference) {
  // 1 + 2^-11 + 2^-30 is above float16's tie, but float32 rounds it to the tie first, which then
  // goes to the even 1.0: the reference's float32 path, kept by the code generator.
  std::vector<double> v = {1.0 + 0x1p-11 + 0x1p-30, 1.0 + 0x1p-8 + 0x1p-30, 0x1p-25 + 0x1p-60,
                           65519.999999, 65520.0, 1e300, -1e300, 1e-300, -0.0,
                           std::numeric_limits<double>::quiet_NaN(),
                           std::numeric_limits<double>::infinity(), 0x1.fefffffffp127};
  std::mt19937_64 gen(5);
  std::normal_distribution<double> n(0.0, 1000.0);
  for (int i = 0; i < 20000; ++i) v.push_back(n(gen));
  auto program = [&] {
    Tensor x = tensor<double>(v);
    return std::vector<Tensor>{cast(x, DType::Float16), cast(x, DType::BFloat16)};
  };
  expect_same_bits(program);
  set_active_backend("cpu");
  EXPECT_EQ(cast(tensor<double>({1.0 + 0x1p-11 + 0x1p-30}), DType::Float16).item<float>(), 1.0f);
}

TEST_F(CpuReducedFloat, IntegersAndBoolsConvertToAndFrom16BitFloatsAsTheReference) {
  std::vector<int64_t> i64 = {0, 1, -1, 2049, 2051, 65504, 65519, 65520, 70000, -70000,
                              16777217, (int64_t{1} << 40) + 1, std::numeric_limits<int64_t>::max(),
                              std::numeric_limits<int64_t>::min()};
  for (int64_t k = -3000; k < 3000; k += 7) i64.push_back(k * 37);
  std::vector<int32_t> i32(i64.size());
  for (size_t k = 0; k < i64.size(); ++k) i32[k] = static_cast<int32_t>(i64[k]);
  auto program = [&] {
    Tensor a = tensor<int64_t>(i64), b = tensor<int32_t>(i32);
    Tensor c = tensor<bool>({true, false, true});
    std::vector<Tensor> outs;
    for (DType t : {DType::Float16, DType::BFloat16}) {
      outs.push_back(cast(a, t));
      outs.push_back(cast(b, t));
      outs.push_back(cast(c, t));
      outs.push_back(cast(cast(a, t), DType::Int64));  // 16-bit -> integer: range-checked
      outs.push_back(cast(cast(b, t), DType::Int32));
      outs.push_back(cast(cast(a, t), DType::Bool));
    }
    return outs;
  };
  expect_same_bits(program);
  EXPECT_TRUE(fallbacks(program()).empty());
}

TEST_F(CpuReducedFloat, ConstantsAndArangeOf16BitDTypesAreCompiledAsTheReference) {
  auto program = [] {
    std::vector<Tensor> outs;
    for (DType t : {DType::Float16, DType::BFloat16}) {
      outs.push_back(zeros({5, 3}, t));
      outs.push_back(ones({7}, t));
      outs.push_back(arange(0, 5000, 1, t));  // past 2048 (float16) and 256 (bfloat16): rounded
      outs.push_back(add(full({4}, 1.0 / 3.0, t), ones({4}, t)));
    }
    return outs;
  };
  expect_same_bits(program);
}

TEST_F(CpuReducedFloat, AHalfElementwiseChainRunsAsCompiledKernelsWithoutFallbacks) {
  std::mt19937 gen(3);
  std::normal_distribution<float> n(0.0f, 100.0f);
  std::vector<float> v(4096);
  for (float& x : v) x = n(gen);
  v[0] = 65520.0f / 2;  // * 2 overflows float16 to infinity
  v[1] = 0x1p-25f;      // a float16 subnormal tie
  auto program = [&] {
    Tensor x = tensor<float>(v, {64, 64});
    Tensor h = cast(x, DType::Float16);
    Tensor bf = cast(x, DType::BFloat16);
    return std::vector<Tensor>{cast(add(mul(h, Scalar(2.0)), Scalar(1.0)), DType::Float32),
                               cast(add(mul(bf, Scalar(2.0)), Scalar(1.0)), DType::Float32),
                               add(mul(h, Scalar(0.5)), Scalar(1.0))};  // stays float16
  };
  expect_same_bits(program);
  set_active_backend("cpu");
  std::vector<Tensor> outs = program();
  EXPECT_TRUE(fallbacks(outs).empty());
  lz::debug::clear_counters();
  sync_tensors(outs);
  lz::wait();
  EXPECT_EQ(counter("fallback::cast"), 0);
  EXPECT_EQ(counter("fallback::mul"), 0);
}

// The vectorizer widens a float16 loop to 16 lanes, and calls glibc's 16-lane math variants only
// where the host has AVX-512 (on an AVX2 host they were offered anyway, and such a kernel died of
// SIGILL). The compiled kernels call libmvec, the reference libm: equal within a float16 unit.
TEST_F(CpuReducedFloat, TranscendentalsOf16BitDataRunOnWhateverVectorWidthTheHostHas) {
  std::mt19937 gen(5);
  std::uniform_real_distribution<float> u(0.1f, 1.5f);
  std::vector<float> v(4096);
  for (float& x : v) x = u(gen);
  auto program = [&] {
    std::vector<Tensor> outs;
    for (DType dt : {DType::Float16, DType::BFloat16}) {
      Tensor x = cast(tensor<float>(v, {64, 64}), dt);
      outs.push_back(x.exp());
      outs.push_back(x.log());
      outs.push_back(x.tanh());
    }
    return outs;
  };
  const auto ref = run_on("interp", program), got = run_on("cpu", program);
  ASSERT_EQ(ref.size(), got.size());
  for (size_t k = 0; k < ref.size(); ++k) {
    ASSERT_EQ(ref[k].size(), got[k].size());
    const float unit = k < 3 ? 0x1p-10f : 0x1p-7f;  // float16's, then bfloat16's
    for (size_t e = 0; e < ref[k].size(); ++e) {
      const float r = bits_float(static_cast<uint32_t>(ref[k][e]));
      const float g = bits_float(static_cast<uint32_t>(got[k][e]));
      ASSERT_LE(std::fabs(g - r), unit * std::fabs(r)) << "output " << k << " element " << e;
    }
  }
}

TEST_F(CpuReducedFloat, MovementAndIndexOpsOn16BitDataAreCompiledAsTheReference) {
  std::mt19937 gen(9);
  std::normal_distribution<float> n;
  std::vector<float> v(6 * 8 * 5);
  for (float& x : v) x = n(gen);
  std::vector<int64_t> rows = {5, 0, 0, 3, 2};
  std::vector<int64_t> gidx(6 * 3 * 5);
  for (size_t k = 0; k < gidx.size(); ++k) gidx[k] = static_cast<int64_t>((k * 7) % 8);
  for (DType t : {DType::Float16, DType::BFloat16}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    auto program = [&] {
      Tensor x = cast(tensor<float>(v, {6, 8, 5}), t);
      Tensor moved = reshape(transpose(x, 0, 2), {5, 48});          // a view chain, copied
      Tensor sel = index_select(x, 0, tensor<int64_t>(rows, {5}));  // an indirect load
      Tensor g = gather(x, 1, tensor<int64_t>(gidx, {6, 3, 5}));
      Tensor base = zeros({6, 8, 5}, t);
      Tensor copied = index_copy(base, 0, tensor<int64_t>({4, 1}, {2}), slice(x, 0, 0, 2, 1));
      return std::vector<Tensor>{contiguous(moved), sel, g, copied,
                                 cast(transpose(sel, 0, 1), DType::Float32)};
    };
    expect_same_bits(program);
    set_active_backend("cpu");
    EXPECT_TRUE(fallbacks(program()).empty());
    set_active_backend(config().backend);
  }
}

TEST_F(CpuReducedFloat, ACatOf16BitTensorsIsOneKernelPerPartWithTheCastsFused) {
  // cat's part kernels (lower/kernel_build.cpp) load and store 16-bit values like any other dtype.
  for (DType t : {DType::BFloat16, DType::Float16}) {
    auto program = [t] {
      Tensor a = cast(arange(0, 10, 1, DType::Float32), t);
      Tensor b = cast(mul(arange(0, 6, 1, DType::Float32), Scalar(0.1)), t);
      return std::vector<Tensor>{cast(cat({a, b}), DType::Float32), cat({b, a})};
    };
    expect_same_bits(program);
    set_active_backend("cpu");
    EXPECT_TRUE(fallbacks(program()).empty()) << dtype_name(t);
    set_active_backend(config().backend);
  }
}

TEST_F(CpuReducedFloat, TheIntegerFloat16PathForHostsWithoutF16CMatchesTheReference) {
  // LAZULI_JIT_NO_F16C makes the code generator convert float16 as on a host without F16C;
  // kernels come from a fresh cache so they are compiled that way.
  struct NoF16C {
    NoF16C() {
      ::setenv("LAZULI_JIT_NO_F16C", "1", 1);
      cpu::clear_kernel_memory_cache();
    }
    ~NoF16C() {
      ::unsetenv("LAZULI_JIT_NO_F16C");
      cpu::clear_kernel_memory_cache();
    }
  } no_f16c;
  mutable_config().cache_dir = cpu_test::temp_dirs().make();
  const std::vector<float> v = special_floats();
  auto program = [&] {
    Tensor x = every_pattern(DType::Float16);
    Tensor f = tensor<float>(v);
    return std::vector<Tensor>{cast(x, DType::Float32), cast(x, DType::Float64),
                               cast(cast(x, DType::Float32), DType::Float16),
                               cast(x, DType::BFloat16), cast(f, DType::Float16),
                               cast(tensor<double>({1.0 + 0x1p-11 + 0x1p-30}), DType::Float16)};
  };
  expect_same_bits(program);
}

}  // namespace
}  // namespace lz
