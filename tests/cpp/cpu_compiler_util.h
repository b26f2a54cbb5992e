// Shared by the cpu_compiler_*_test.cpp files: the LLVM cpu backend ("cpu", src/backend/cpu/)
// proved against the reference backend ("interp"). The fixture (a per-process kernel cache
// directory, so tests never write ~/.cache/lazuli), running a program on a backend and reading
// its outputs, the cpu plan of pending tensors, and exact / few-ulp comparison of results.
#pragma once
#include <stdlib.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <iostream>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_target.h"
#include "backend/cpu/kernel_cache.h"
#include "core/shape.h"
#include "exec/graph_executor.h"
#include "lazuli/autograd.h"
#include "lazuli/nn.h"
#include "lower/plan.h"
#include "test_util.h"

namespace lz::cpu_test {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------

// Temporary directories for the kernel cache, removed when the test binary exits.
class TempDirs {
 public:
  ~TempDirs() {
    for (const std::string& d : dirs_) {
      std::error_code ec;
      fs::remove_all(d, ec);
    }
  }
  std::string make() {
    char tmpl[] = "/tmp/lazuli-cpu-compiler-test-XXXXXX";
    const char* d = ::mkdtemp(tmpl);
    if (!d) throw std::runtime_error("mkdtemp failed");
    dirs_.push_back(d);
    return d;
  }

 private:
  std::vector<std::string> dirs_;
};

inline TempDirs& temp_dirs() {
  static TempDirs dirs;
  return dirs;
}

// One cache directory per test process, so the tests never write the user's ~/.cache/lazuli.
inline const std::string& process_cache_dir() {
  static const std::string dir = temp_dirs().make();
  return dir;
}

class CpuCompilerTest : public testing::RuntimeTest {
 protected:
  void SetUp() override {
    RuntimeTest::SetUp();
    mutable_config().cache_dir = process_cache_dir();
    mutable_config().persistent_cache_read_only = false;
  }
  void TearDown() override {
    try {
      lz::wait();
    } catch (const lz::Error&) {
    }
    set_active_backend(config().backend);
    RuntimeTest::TearDown();
  }
};

// The host copy of one output.
struct Result {
  DType dtype = DType::Float32;
  Shape shape;
  std::vector<double> f;   // float32 / float64 values
  std::vector<int64_t> i;  // integer and bool values
};

inline Result read(const Tensor& t) {
  Result r;
  r.dtype = t.dtype();
  r.shape = t.shape();
  switch (r.dtype) {
    case DType::Float16:
    case DType::BFloat16:  // not among kDTypes: read as float32
      for (float v : lz::cast(t, DType::Float32).to_vector<float>()) r.f.push_back(v);
      break;
    case DType::Float32:
      for (float v : t.to_vector<float>()) r.f.push_back(v);
      break;
    case DType::Float64: r.f = t.to_vector<double>(); break;
    case DType::Int32:
      for (int32_t v : t.to_vector<int32_t>()) r.i.push_back(v);
      break;
    case DType::Int64: r.i = t.to_vector<int64_t>(); break;
    case DType::Bool:
      for (bool v : t.to_vector<bool>()) r.i.push_back(v ? 1 : 0);
      break;
  }
  return r;
}

// Runs `program` on `backend`: its outputs are synced as one program, then read. An error (from
// the frontend or the run) is returned in *error instead of thrown.
inline std::vector<Result> run_on(const std::string& backend, const std::function<std::vector<Tensor>()>& program,
                           std::string* error = nullptr) {
  lz::wait();
  set_active_backend(backend);
  std::vector<Result> out;
  try {
    std::vector<Tensor> ts = program();
    sync_tensors(ts);
    for (const Tensor& t : ts) out.push_back(read(t));
    lz::wait();
  } catch (const lz::Error& e) {
    if (!error) {
      set_active_backend(config().backend);
      throw;
    }
    *error = e.what();
    try {
      lz::wait();
    } catch (const lz::Error&) {
    }
  }
  set_active_backend(config().backend);
  return out;
}

// The plan of these tensors' pending graph for `target` (the cpu backend's by default), built as
// dump_kernels builds it.
inline lower::Plan plan_of(const std::vector<Tensor>& ts,
                           const lower::Target& target = cpu::cpu_target()) {
  std::vector<internal::TensorImplPtr> impls;
  for (const Tensor& t : ts) impls.push_back(t.impl());
  Roots roots = collect(impls, /*include_views=*/false);
  PostOrder po = post_order(roots.values);
  return lower::build_plan(lowering_graph(roots, po), target, /*explain=*/true);
}

// A plan's steps by what runs them: compiled kernels; library calls (matrix products, and the
// convolutions and pooling the target has a library for); fallbacks (reference kernels only).
struct StepCounts {
  int kernels = 0, library = 0, fallbacks = 0;
};
inline StepCounts count_steps(const lower::Plan& p) {
  StepCounts c;
  for (const lower::PlanStep& s : p.steps) {
    switch (s.kind) {
      case lower::PlanStep::Kernel: ++c.kernels; break;
      case lower::PlanStep::MatMul:
      case lower::PlanStep::Library: ++c.library; break;
      case lower::PlanStep::Fallback: ++c.fallbacks; break;
    }
  }
  return c;
}

// How many times a run of the plan computes `op`: its occurrences in the kernel of each kernel
// step (a kernel launched twice computes its ops twice).
inline int ops_computed(const lower::Plan& p, ir::OpKind op) {
  int n = 0;
  for (const lower::PlanStep& s : p.steps) {
    if (s.kind != lower::PlanStep::Kernel) continue;
    for (const lower::KExpr& e : p.kernels[s.kernel].spec.exprs) n += e.op == op;
  }
  return n;
}

inline std::string shape_text(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

inline std::string dn(DType t) { return std::string(dtype_name(t)); }

inline std::string num(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

inline constexpr double kU32 = 5.9604644775390625e-08;   // 2^-24: float32 unit roundoff
inline constexpr double kU64 = 1.1102230246251565e-16;   // 2^-53
inline double unit(DType t) { return t == DType::Float64 ? kU64 : kU32; }
// A libm function against its libmvec variant: a few ulps each (glibc documents <= 4).
inline double transcendental(DType t) { return 16 * unit(t); }


inline int64_t ulp_distance(double a, double b, DType dt) {
  if (dt == DType::Float32) {
    auto key = [](float x) {
      auto i = std::bit_cast<int32_t>(x);
      return i < 0 ? static_cast<int64_t>(INT32_MIN) - i : static_cast<int64_t>(i);
    };
    return std::llabs(key(static_cast<float>(a)) - key(static_cast<float>(b)));
  }
  auto key = [](double x) {
    auto i = std::bit_cast<int64_t>(x);
    return i < 0 ? INT64_MIN - i : i;
  };
  int64_t ka = key(a), kb = key(b);
  return ka > kb ? ka - kb : kb - ka;
}

// Compares bit for bit (any NaN equals any NaN; the sign of zero counts), or within a few ulps
// (and an absolute 8 eps * scale, for results that cancel) when `approx`. Returns the mismatches.
inline std::string compare_exact(const Result& ref, const Result& got, bool approx, const std::vector<double>& scale) {
  std::ostringstream os;
  if (ref.dtype != got.dtype || ref.shape != got.shape) return "dtype/shape differ";
  int bad = 0;
  for (size_t i = 0; i < ref.f.size(); ++i) {
    const double r = ref.f[i], c = got.f[i];
    bool ok;
    if (std::isnan(r) || std::isnan(c)) {
      ok = std::isnan(r) && std::isnan(c);
    } else if (!approx || std::isinf(r) || std::isinf(c)) {
      ok = r == c && std::signbit(r) == std::signbit(c);
    } else {
      ok = ulp_distance(r, c, ref.dtype) <= 8 ||
           std::fabs(r - c) <= 8 * 2 * unit(ref.dtype) * std::max(1.0, i < scale.size() ? scale[i] : 1.0);
    }
    if (!ok && bad++ < 6) os << "[" << i << "] cpu " << num(c) << " reference " << num(r) << "; ";
  }
  for (size_t i = 0; i < ref.i.size(); ++i) {
    if (ref.i[i] != got.i[i] && bad++ < 6) os << "[" << i << "] cpu " << got.i[i] << " reference " << ref.i[i] << "; ";
  }
  if (bad) os << bad << " differ";
  return os.str();
}

// A deterministic ramp of n floats in [offset, offset + 2.1 scale).
inline std::vector<float> ramp(int64_t n, float scale = 0.01f, float offset = -1.0f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = offset + scale * static_cast<float>((i * 37) % 211);
  return v;
}

// Steps of one kind in a plan; fallbacks: steps that run a reference kernel.
inline int count_steps(const lower::Plan& p, lower::PlanStep::Kind kind) {
  int n = 0;
  for (const lower::PlanStep& s : p.steps) n += s.kind == kind;
  return n;
}
inline int fallbacks(const lower::Plan& p) { return count_steps(p, lower::PlanStep::Fallback); }

// Both backends give the same outputs: integers and bools exactly, floats within rtol of the
// reference's magnitude (at least 1), or with rtol 0 bit for bit (NaN equals NaN).
inline void expect_agree(const std::function<std::vector<Tensor>()>& program, double rtol = 1e-5,
                         const std::string& what = "") {
  std::vector<Result> ref = run_on("interp", program), got = run_on("cpu", program);
  ASSERT_EQ(ref.size(), got.size()) << what;
  for (size_t k = 0; k < ref.size(); ++k) {
    ASSERT_EQ(ref[k].shape, got[k].shape) << what << " output " << k;
    EXPECT_EQ(ref[k].i, got[k].i) << what << " output " << k;
    ASSERT_EQ(ref[k].f.size(), got[k].f.size()) << what << " output " << k;
    for (size_t e = 0; e < ref[k].f.size(); ++e) {
      const double r = ref[k].f[e], g = got[k].f[e];
      if (rtol == 0) {
        if (std::isnan(r) && std::isnan(g)) continue;
        ASSERT_EQ(r, g) << what << " output " << k << " at " << e;
      } else {
        ASSERT_NEAR(r, g, rtol * std::max(1.0, std::fabs(r))) << what << " output " << k << " at " << e;
      }
    }
  }
}

}  // namespace lz::cpu_test
