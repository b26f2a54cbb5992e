// The LLVM cpu backend ("cpu", src/backend/cpu/) proved against the reference backend ("interp"):
//
//  - CpuCompilerRandomGraphs: random programs (op chains with broadcasting, casts, compares and
//    where, reductions, movement, cat, matmul, arange/full/rand/eye, reference fallbacks, now and
//    then a tensor large enough to be split over the thread pool, several outputs) built by a
//    seeded generator through the public API, run on both backends with the same inputs, compared
//    element by element. The generator tracks, for
//    every float value, a bound on its magnitude and on how far the two backends may drift apart
//    (libmvec vs libm transcendentals, float32 vs double accumulation); a value computed with
//    correctly rounded operations only (add, mul, div, sqrt, max, casts, movement, ...) must match
//    exactly, and only such values feed discontinuous ops (floor, round, sign, compares, casts to
//    integers). Integers and bools always match exactly.
//    A fixed list of 200 seeds (1..200, four tests) runs in CI; a further test checks that they
//    reach every op category and every planner path (LAZULI_RANDOM_GRAPH_STATS=1 prints counts).
//    To run more:
//        LAZULI_RANDOM_GRAPHS=N       N more seeds (1000, 1001, ...) in ExtraSeedsFromTheEnvironment
//        LAZULI_RANDOM_GRAPHS_FIRST=S start those at seed S instead of 1000
//        LAZULI_RANDOM_GRAPH_SEED=S   run only seed S there, printing its graph and plan
//    e.g. LAZULI_RANDOM_GRAPHS=5000 lazuli_tests --gtest_filter='CpuCompilerRandomGraphs.Extra*'
//    A mismatch prints the seed, the generator's op log, the pending graph (dump_graph) and the
//    cpu plan (dump_kernels), so it reproduces with LAZULI_RANDOM_GRAPH_SEED.
//  - CpuCompilerFusion: the plans really fuse (kernels counted in lz::cpu::build_plan's plan).
//  - CpuCompilerKernelReuse: a new batch size compiles no kernel; a new process-level start (memory
//    cache dropped) loads kernels from the disk cache.
//  - CpuCompilerOpTable: every elementwise op x dtype, over special values (NaN, +-inf, -0.0,
//    ties for rounding, integer extremes), bit for bit against the reference (a few ulps for
//    transcendental functions), and lowered to a kernel where the planner says it compiles.
//  - CpuCompilerDonation: in-place updates whose output storage is the donated input's.
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
#include "backend/cpu/kernel_cache.h"
#include "backend/cpu/plan.h"
#include "core/shape.h"
#include "exec/graph_executor.h"
#include "lazuli/autograd.h"
#include "lazuli/nn.h"
#include "test_util.h"

namespace lz {
namespace {

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

TempDirs& temp_dirs() {
  static TempDirs dirs;
  return dirs;
}

// One cache directory per test process, so the tests never write the user's ~/.cache/lazuli.
const std::string& process_cache_dir() {
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

Result read(const Tensor& t) {
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
std::vector<Result> run_on(const std::string& backend, const std::function<std::vector<Tensor>()>& program,
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

// The cpu plan of these tensors' pending graph, built as dump_kernels builds it.
cpu::Plan plan_of(const std::vector<Tensor>& ts) {
  std::vector<internal::TensorImplPtr> impls;
  for (const Tensor& t : ts) impls.push_back(t.impl());
  Roots roots = collect(impls, /*include_views=*/false);
  PostOrder po = post_order(roots.values);
  return cpu::build_plan(lowering_graph(roots, po), /*explain=*/true);
}

struct StepCounts {
  int kernels = 0, library = 0, fallbacks = 0;
};
StepCounts count_steps(const cpu::Plan& p) {
  StepCounts c;
  for (const cpu::PlanStep& s : p.steps) {
    (s.kind == cpu::PlanStep::Kernel ? c.kernels : s.kind == cpu::PlanStep::MatMul ? c.library : c.fallbacks)++;
  }
  return c;
}

std::string shape_text(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

std::string dn(DType t) { return std::string(dtype_name(t)); }

std::string num(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

constexpr double kU32 = 5.9604644775390625e-08;   // 2^-24: float32 unit roundoff
constexpr double kU64 = 1.1102230246251565e-16;   // 2^-53
double unit(DType t) { return t == DType::Float64 ? kU64 : kU32; }
// A libm function against its libmvec variant: a few ulps each (glibc documents <= 4).
double transcendental(DType t) { return 16 * unit(t); }

// ---------------------------------------------------------------------------------------------
// The random graph generator
// ---------------------------------------------------------------------------------------------

struct Val {
  Tensor t;
  double mag = 1;   // bound on |value| (integers: on |value| as a double)
  double err = 0;   // bound on |cpu - interp|; 0: both compute it bit for bit
  bool input = false;
  std::string name;
};

class RandomGraph {
 public:
  explicit RandomGraph(uint32_t seed) : g_(seed) {}

  // Records the program; returns its outputs (1 to 3 tensors).
  std::vector<Tensor> build() {
    manual_seed(static_cast<int64_t>(g_()));  // rand/randn draw the same values on both backends
    const int inputs = rint(1, 2);
    for (int i = 0; i < inputs; ++i) add_input(random_shape(), random_dtype());
    const int ops = rint(5, 16);
    for (int i = 0; i < ops; ++i) {
      for (int attempt = 0; attempt < 8 && !step(); ++attempt) {
      }
    }
    std::vector<size_t> computed;
    for (size_t i = 0; i < pool_.size(); ++i) {
      if (!pool_[i].input) computed.push_back(i);
    }
    if (computed.empty()) {  // every attempt failed: at least one op
      const Val a = pool_[0];
      push(is_floating(a.t.dtype()) || a.t.dtype() == DType::Bool ? cast(a.t, DType::Int64) : a.t + 1,
           a.mag + 1, 0, "cast_or_add1(" + a.name + ")");
      computed.push_back(pool_.size() - 1);
    }
    // Outputs: the sinks (computed values no later op reads, newest first, at most 4), so the
    // whole graph is live, and sometimes an intermediate value too (a root others also read).
    outs_.clear();
    for (size_t k = computed.size(); k-- > 0 && outs_.size() < 4;) {
      if (!used_[computed[k]]) outs_.push_back(pool_[computed[k]]);
    }
    if (chance(0.3)) {
      const Val& v = pool_[computed[static_cast<size_t>(rint(0, static_cast<int64_t>(computed.size()) - 1))]];
      if (std::none_of(outs_.begin(), outs_.end(), [&](const Val& o) { return o.name == v.name; })) outs_.push_back(v);
    }
    std::vector<Tensor> ts;
    log_ << "outputs:";
    for (const Val& v : outs_) {
      ts.push_back(v.t);
      log_ << " " << v.name;
    }
    log_ << "\n";
    return ts;
  }
  const std::vector<Val>& outputs() const { return outs_; }
  std::string history() const { return log_.str(); }

 private:
  static constexpr int64_t kMaxNumel = 4096;
  // Values may grow to kMaxNumel elements, or stay as large as a large input.
  static int64_t limit(const Shape& s) { return std::max(kMaxNumel, numel(s)); }

  // ---- randomness (mt19937's output is specified; the distributions here are ours) ----
  int64_t rint(int64_t lo, int64_t hi) {  // inclusive
    return lo + static_cast<int64_t>(g_() % static_cast<uint64_t>(hi - lo + 1));
  }
  bool chance(double p) { return g_() < p * 4294967296.0; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * (g_() / 4294967296.0); }

  // Mostly small shapes; sometimes a large one, so kernels run split over the thread pool (with
  // chunk boundaries inside rows).
  Shape random_shape() {
    if (chance(0.04)) {
      switch (rint(0, 2)) {
        case 0: return {rint(40000, 80000)};
        case 1: return {rint(40, 80), chance(0.5) ? 1001 : 1};
        default: return {rint(2, 5), rint(8, 16), chance(0.5) ? 1001 : 129};
      }
    }
    static const int64_t kSizes[] = {1, 1, 2, 3, 4, 5, 7, 8, 16, 17, 33};
    Shape s(static_cast<size_t>(rint(0, 4)));
    for (auto& d : s) d = kSizes[rint(0, 10)];
    if (!s.empty() && chance(0.03)) s[static_cast<size_t>(rint(0, static_cast<int64_t>(s.size()) - 1))] = 0;
    while (numel(s) > 2048) {
      auto it = std::max_element(s.begin(), s.end());
      *it = std::max<int64_t>(1, *it / 2);
    }
    return s;
  }
  DType random_dtype() {
    int64_t r = rint(0, 99);
    return r < 55 ? DType::Float32 : r < 75 ? DType::Float64 : r < 83 ? DType::Int32 : r < 93 ? DType::Int64 : DType::Bool;
  }

  // ---- the pool of values ----
  const Val& push(const Tensor& t, double mag, double err, const std::string& what, bool input = false) {
    Val v;
    v.t = t;
    v.mag = std::min(mag, 1e300);
    v.err = err;
    v.input = input;
    v.name = "v" + std::to_string(pool_.size());
    for (size_t i = 0; i < what.size(); ++i) {  // the operands, by name
      if (what[i] != 'v' || (i > 0 && std::isalnum(static_cast<unsigned char>(what[i - 1]))) || i + 1 >= what.size() ||
          !std::isdigit(static_cast<unsigned char>(what[i + 1]))) {
        continue;
      }
      size_t j = i + 1, id = 0;
      while (j < what.size() && std::isdigit(static_cast<unsigned char>(what[j]))) id = id * 10 + static_cast<size_t>(what[j++] - '0');
      if (id < used_.size()) used_[id] = true;
    }
    used_.push_back(false);
    log_ << v.name << " = " << what << "  : " << dtype_name(t.dtype()) << shape_text(t.shape());
    if (is_floating(t.dtype())) log_ << " mag " << v.mag << " err " << v.err;
    log_ << "\n";
    pool_.push_back(v);
    return pool_.back();
  }

  Tensor host_tensor(const Shape& s, DType dt, double* mag) {
    const auto n = static_cast<size_t>(numel(s));
    *mag = 0;
    switch (dt) {
      case DType::Float16:
      case DType::BFloat16: break;  // not among kDTypes
      case DType::Float32:
      case DType::Float64: {
        std::vector<double> v(n);
        for (double& x : v) {
          int64_t r = rint(0, 15);
          x = r == 0 ? 0.0 : r == 1 ? -0.0 : r == 2 ? 0.5 * static_cast<double>(rint(-6, 6)) : uniform(-2, 2);
          if (dt == DType::Float32) x = static_cast<float>(x);
          *mag = std::max(*mag, std::fabs(x));
        }
        if (dt == DType::Float64) return tensor<double>(v, s);
        std::vector<float> f(v.begin(), v.end());
        return tensor<float>(f, s);
      }
      case DType::Int32:
      case DType::Int64: {
        std::vector<int64_t> v(n);
        const int64_t lo = dt == DType::Int32 ? INT32_MIN : INT64_MIN, hi = dt == DType::Int32 ? INT32_MAX : INT64_MAX;
        for (int64_t& x : v) {
          x = chance(0.03) ? (chance(0.5) ? lo : hi) : rint(-20, 20);
          *mag = std::max(*mag, std::fabs(static_cast<double>(x)));
        }
        if (dt == DType::Int64) return tensor<int64_t>(v, s);
        std::vector<int32_t> w(v.begin(), v.end());
        return tensor<int32_t>(w, s);
      }
      case DType::Bool: {
        std::vector<bool> v(n);
        for (size_t i = 0; i < n; ++i) v[i] = chance(0.5);
        *mag = 1;
        return tensor<bool>(v, s);
      }
    }
    return Tensor();
  }

  const Val& add_input(const Shape& s, DType dt) {
    double mag = 0;
    Tensor t = host_tensor(s, dt, &mag);
    return push(t, mag, 0, "input(" + dn(dt) + shape_text(s) + ")", true);
  }

  size_t pick() {
    if (chance(0.6)) return pool_.size() - 1;
    return static_cast<size_t>(rint(0, static_cast<int64_t>(pool_.size()) - 1));
  }
  std::vector<size_t> candidates(const std::function<bool(const Val&)>& ok) {
    std::vector<size_t> c;
    for (size_t i = 0; i < pool_.size(); ++i) {
      if (ok(pool_[i])) c.push_back(i);
    }
    return c;
  }
  std::optional<size_t> pick_where(const std::function<bool(const Val&)>& ok) {
    if (ok(pool_.back()) && chance(0.6)) return pool_.size() - 1;
    auto c = candidates(ok);
    if (c.empty()) return std::nullopt;
    return c[static_cast<size_t>(rint(0, static_cast<int64_t>(c.size()) - 1))];
  }

  static bool broadcastable(const Shape& a, const Shape& b, Shape* out) {
    Shape r(std::max(a.size(), b.size()));
    for (size_t i = 0; i < r.size(); ++i) {
      int64_t x = i < a.size() ? a[a.size() - 1 - i] : 1, y = i < b.size() ? b[b.size() - 1 - i] : 1;
      if (x != y && x != 1 && y != 1) return false;
      r[r.size() - 1 - i] = x == 1 ? y : x;
    }
    if (out) *out = r;
    return true;
  }

  // A shape that broadcasts against s: leading dims dropped, some dims set to 1.
  Shape partner_shape(const Shape& s) {
    Shape p(s.begin() + rint(0, static_cast<int64_t>(s.size())), s.end());
    for (auto& d : p) {
      if (chance(0.3)) d = 1;
    }
    if (chance(0.1) && numel(s) * 3 <= limit(s)) p.insert(p.begin(), rint(1, 3));
    return p;
  }

  // A float value with magnitude at most `limit`: squashed with tanh when it may be larger.
  Val bounded(const Val& a, double limit) {
    if (!is_floating(a.t.dtype()) || a.mag <= limit) return a;
    DType dt = a.t.dtype();
    return push(tanh(a.t), 1, a.err + transcendental(dt), "tanh(" + a.name + ")");
  }

  // A second operand for a binary op on `a`: the same value, a pool value that broadcasts, a new
  // input, or a number. `exact`: only values both backends compute bit for bit.
  struct Other {
    Operand op;
    double mag = 0, err = 0;
    std::string name;
  };
  Other other_operand(const Val& a, bool exact, bool allow_scalar = true) {
    int64_t r = rint(0, 9);
    if (r <= 1) return {a.t, a.mag, a.err, a.name};
    if (r <= 4) {
      auto c = candidates([&](const Val& v) {
        Shape out;
        return (!exact || v.err == 0) && broadcastable(a.t.shape(), v.t.shape(), &out) && numel(out) <= limit(a.t.shape());
      });
      if (!c.empty()) {
        const Val& v = pool_[c[static_cast<size_t>(rint(0, static_cast<int64_t>(c.size()) - 1))]];
        return {v.t, v.mag, v.err, v.name};
      }
    }
    if (r <= 7 || !allow_scalar) {
      DType dt = chance(0.6) ? a.t.dtype() : random_dtype();
      const Val& v = add_input(partner_shape(a.t.shape()), dt);
      return {v.t, v.mag, 0, v.name};
    }
    static const double kFloats[] = {0.0, 1.0, 2.5, -1.5, 0.25, 3.0};
    static const int kInts[] = {0, 1, 2, -3, 7};
    if (chance(0.5)) {
      double s = kFloats[rint(0, 5)];
      return {Scalar(s), std::fabs(s), 0, num(s)};
    }
    int s = kInts[rint(0, 4)];
    return {Scalar(s), std::fabs(static_cast<double>(s)), 0, std::to_string(s)};
  }

  // ---- the op categories; each returns false when it does not apply ----
  bool step() {
    int64_t r = rint(0, 99);
    try {
      if (r < 24) return unary();
      if (r < 48) return binary();
      if (r < 56) return compare_where();
      if (r < 64) return cast_op();
      if (r < 77) return reduction();
      if (r < 92) return movement();
      if (r < 96) return creation();
      return matmul_op();
    } catch (const lz::Error& e) {
      // Deterministic, so both builds take the same path; logged for the reader.
      log_ << "  (rejected by the frontend: " << e.what() << ")\n";
      return false;
    }
  }

  bool unary() {
    Val a = pool_[pick()];
    const DType dt = a.t.dtype();
    if (dt == DType::Bool) {
      bool lnot = chance(0.5);
      push(lnot ? logical_not(a.t) : bitwise_not(a.t), 1, 0, (lnot ? "logical_not(" : "bitwise_not(") + a.name + ")");
      return true;
    }
    if (!is_floating(dt) && chance(0.6)) {
      const double big = dt == DType::Int32 ? 2147483648.0 : 9.3e18;
      switch (rint(0, 5)) {
        case 0: push(abs(a.t), big, 0, "abs(" + a.name + ")"); break;
        case 1: push(neg(a.t), big, 0, "neg(" + a.name + ")"); break;
        case 2: push(relu(a.t), a.mag, 0, "relu(" + a.name + ")"); break;
        case 3: push(sign(a.t), 1, 0, "sign(" + a.name + ")"); break;
        case 4: push(bitwise_not(a.t), a.mag + 1, 0, "bitwise_not(" + a.name + ")"); break;
        default: push(floor(a.t), a.mag, 0, "floor(" + a.name + ")"); break;
      }
      return true;
    }
    // Float ops (integer operands are cast to float32 by the frontend).
    a = bounded(a, 1e4);
    const double m = a.mag, e = a.err;
    const bool exact = e == 0;
    const int64_t k = rint(0, 14);
    Tensor t;
    auto U = [&](const Tensor& x) { return unit(x.dtype()); };
    auto T = [&](const Tensor& x) { return transcendental(x.dtype()); };
    switch (k) {
      case 0: {
        Tensor th = tanh(a.t);
        t = exp(th);
        push(t, 2.72, 2.72 * (e + T(th)) + 2.72 * T(t), "exp(tanh(" + a.name + "))");
        return true;
      }
      case 1: t = tanh(a.t); push(t, std::min(m, 1.0), e + T(t), "tanh(" + a.name + ")"); return true;
      case 2: t = sigmoid(a.t); push(t, 1, 0.25 * e + 2 * T(t), "sigmoid(" + a.name + ")"); return true;
      case 3: push(relu(a.t), m, e, "relu(" + a.name + ")"); return true;
      case 4: push(abs(a.t), m, e, "abs(" + a.name + ")"); return true;
      case 5: push(neg(a.t), m, e, "neg(" + a.name + ")"); return true;
      case 6:
        t = sqrt(abs(a.t));
        push(t, std::sqrt(m), exact ? 0 : std::sqrt(e) + 2 * U(t) * std::sqrt(m), "sqrt(abs(" + a.name + "))");
        return true;
      case 7: {
        t = log(abs(a.t) + 1);
        double lm = std::log1p(m);
        push(t, lm, e + 2 * U(t) * (m + 1) + T(t) * std::max(1.0, lm), "log(abs(" + a.name + ") + 1)");
        return true;
      }
      case 8: t = gelu(a.t); push(t, m, 1.2 * e + (T(t) + 2 * U(t)) * (m + 1), "gelu(" + a.name + ")"); return true;
      case 9: t = erf(a.t); push(t, 1, 1.2 * e + T(t), "erf(" + a.name + ")"); return true;
      case 10: t = chance(0.5) ? sin(a.t) : cos(a.t); push(t, 1, e + T(t) * std::max(1.0, m), "sin_or_cos(" + a.name + ")"); return true;
      case 11:
        if (!exact) return false;
        push(floor(a.t), m + 1, 0, "floor(" + a.name + ")");
        return true;
      case 12:
        if (!exact) return false;
        push(round(a.t), m + 1, 0, "round(" + a.name + ")");
        return true;
      case 13:
        if (!exact) return false;
        push(sign(a.t), 1, 0, "sign(" + a.name + ")");
        return true;
      default:
        if (!exact) return false;
        push(ceil(a.t), m + 1, 0, "ceil(" + a.name + ")");
        return true;
    }
  }

  bool binary() {
    Val a = pool_[pick()];
    const DType dt = a.t.dtype();
    if (dt == DType::Bool) {
      Other b = other_operand(a, false);
      static const char* kNames[] = {"logical_and", "logical_or", "logical_xor"};
      int64_t k = rint(0, 2);
      Tensor t = k == 0 ? logical_and(a.t, b.op) : k == 1 ? logical_or(a.t, b.op) : logical_xor(a.t, b.op);
      push(t, 1, 0, std::string(kNames[k]) + "(" + a.name + ", " + b.name + ")");
      return true;
    }
    if (!is_floating(dt)) {
      Other b = other_operand(a, true);
      if (b.op.is_tensor() && is_floating(b.op.tensor().dtype())) return false;
      if (!b.op.is_tensor() && b.op.scalar().kind() == Scalar::Kind::Float) return false;
      const double big = 9.3e18;
      const std::string args = "(" + a.name + ", " + b.name + ")";
      switch (rint(0, 8)) {
        case 0: push(a.t + b.op, std::min(big, a.mag + b.mag), 0, "add" + args); break;
        case 1: push(a.t - b.op, std::min(big, a.mag + b.mag), 0, "sub" + args); break;
        case 2: push(a.t * b.op, std::min(big, a.mag * b.mag), 0, "mul" + args); break;
        case 3: push(maximum(a.t, b.op), std::max(a.mag, b.mag), 0, "maximum" + args); break;
        case 4: push(minimum(a.t, b.op), std::max(a.mag, b.mag), 0, "minimum" + args); break;
        case 5: push(bitwise_and(a.t, b.op), big, 0, "bitwise_and" + args); break;
        case 6: push(bitwise_xor(a.t, b.op), big, 0, "bitwise_xor" + args); break;
        case 7: {  // reference fallbacks in the middle of fused code
          if (!b.op.is_tensor()) return false;
          Tensor d = abs(b.op.tensor()) + 1;  // never 0 (abs(INT_MIN) + 1 wraps to INT_MIN + 1)
          bool fd = chance(0.5);
          push(fd ? floor_divide(a.t, d) : remainder(a.t, d), a.mag + 1, 0,
               (fd ? "floor_divide(" : "remainder(") + a.name + ", abs(" + b.name + ") + 1)");
          break;
        }
        default: {
          int p = static_cast<int>(rint(0, 3));
          push(pow(a.t, p), big, 0, "pow(" + a.name + ", " + std::to_string(p) + ")");
          break;
        }
      }
      return true;
    }
    a = bounded(a, 1e3);
    Other b = other_operand(a, false);
    if (b.op.is_tensor() && b.mag > 1e3 && is_floating(b.op.tensor().dtype())) {
      Val bv = bounded(Val{b.op.tensor(), b.mag, b.err, false, b.name}, 1e3);
      b = {bv.t, bv.mag, bv.err, bv.name};
    }
    if (b.op.is_tensor() && !is_floating(b.op.tensor().dtype()) && b.mag > 1e6) return false;
    const double ma = a.mag, ea = a.err, mb = b.mag, eb = b.err;
    const bool exact = ea == 0 && eb == 0;
    const std::string args = "(" + a.name + ", " + b.name + ")";
    Tensor t;
    switch (rint(0, 6)) {
      case 0:
        t = a.t + b.op;
        push(t, ma + mb, exact ? 0 : ea + eb + 2 * unit(t.dtype()) * (ma + mb), "add" + args);
        return true;
      case 1:
        t = a.t - b.op;
        push(t, ma + mb, exact ? 0 : ea + eb + 2 * unit(t.dtype()) * (ma + mb), "sub" + args);
        return true;
      case 2:
        t = a.t * b.op;
        push(t, ma * mb, exact ? 0 : ea * mb + eb * ma + ea * eb + 2 * unit(t.dtype()) * ma * mb, "mul" + args);
        return true;
      case 3: {
        if (!b.op.is_tensor()) return false;
        t = a.t / (abs(b.op.tensor()) + 1);
        const double ed = eb == 0 ? 0 : eb + 2 * unit(t.dtype()) * (mb + 1);
        push(t, ma, exact ? 0 : ea + ma * ed + 4 * unit(t.dtype()) * ma, "div(" + a.name + ", abs(" + b.name + ") + 1)");
        return true;
      }
      case 4: push(maximum(a.t, b.op), std::max(ma, mb), std::max(ea, eb), "maximum" + args); return true;
      case 5: push(minimum(a.t, b.op), std::max(ma, mb), std::max(ea, eb), "minimum" + args); return true;
      default: {
        static const double kExps[] = {0.5, 1.5, 2.0, 3.0};
        const double p = kExps[rint(0, 3)];
        const double mp = std::pow(ma, p);
        if (mp > 1e6) return false;
        t = pow(abs(a.t), p);
        const double tr = transcendental(t.dtype());
        const double prop = p < 1 ? (ea == 0 ? 0 : std::sqrt(ea)) : p * std::pow(std::max(ma, 1.0), p - 1) * ea;
        push(t, mp, prop + tr * std::max(mp, 1e-30) + tr, "pow(abs(" + a.name + "), " + num(p) + ")");
        return true;
      }
    }
  }

  bool compare_where() {
    auto ia = pick_where([](const Val& v) { return v.err == 0; });
    if (!ia) return false;
    Val a = pool_[*ia];
    Other b = other_operand(a, true);
    static const char* kNames[] = {"eq", "ne", "lt", "le", "gt", "ge"};
    const int64_t k = rint(0, 5);
    Tensor c;
    switch (k) {
      case 0: c = eq(a.t, b.op); break;
      case 1: c = ne(a.t, b.op); break;
      case 2: c = lt(a.t, b.op); break;
      case 3: c = le(a.t, b.op); break;
      case 4: c = gt(a.t, b.op); break;
      default: c = ge(a.t, b.op); break;
    }
    const Val cv = push(c, 1, 0, std::string(kNames[k]) + "(" + a.name + ", " + b.name + ")");
    if (chance(0.3)) return true;
    // where(c, x, y): x a value that broadcasts with c, y another operand.
    auto ix = pick_where([&](const Val& v) {
      Shape out;
      return broadcastable(cv.t.shape(), v.t.shape(), &out) && numel(out) <= limit(cv.t.shape()) && v.t.dtype() != DType::Bool;
    });
    if (!ix) return true;
    const Val x = pool_[*ix];
    Other y = other_operand(cv, false);
    if (y.op.is_tensor() && y.op.tensor().dtype() == DType::Bool) y = {Scalar(2.5), 2.5, 0, "2.5"};
    Tensor w = where(cv.t, x.t, y.op);
    push(w, std::max(x.mag, y.mag), std::max(x.err, y.err), "where(" + cv.name + ", " + x.name + ", " + y.name + ")");
    return true;
  }

  bool cast_op() {
    const Val a = pool_[pick()];
    const DType from = a.t.dtype();
    static const DType kAll[] = {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::Bool};
    DType to = kAll[rint(0, 4)];
    if (is_floating(from) && a.err > 0 && !is_floating(to)) to = from == DType::Float32 ? DType::Float64 : DType::Float32;
    double mag = a.mag, err = a.err;
    if (to == DType::Bool) {
      mag = 1;
    } else if (to == DType::Int32) {
      mag = std::min(mag + 1, 2147483648.0);
    } else if (to == DType::Int64) {
      mag = std::min(mag + 1, 9.3e18);
    } else if (to == DType::Float32 && from == DType::Float64 && err > 0) {
      err += kU32 * mag;
    }
    push(cast(a.t, to), mag, err, "cast(" + a.name + ", " + dn(to) + ")");
    return true;
  }

  bool reduction() {
    const Val a = pool_[pick()];
    const Shape& s = a.t.shape();
    const DType dt = a.t.dtype();
    IntList dims;
    for (size_t d = 0; d < s.size(); ++d) {
      if (chance(0.5)) dims.push_back(static_cast<int64_t>(d));
    }
    const bool keep = chance(0.5);
    int64_t n = 1;
    if (dims.empty()) {
      n = numel(s);
    } else {
      for (int64_t d : dims) n *= s[static_cast<size_t>(d)];
    }
    const bool empty_dim = n == 0;
    const std::string args = "(" + a.name + ", " + shape_text(dims) + (keep ? ", keepdim" : "") + ")";
    if (dt == DType::Bool) {
      int64_t k = rint(0, 2);
      if (k == 0) push(any(a.t, dims, keep), 1, 0, "any" + args);
      else if (k == 1) push(all(a.t, dims, keep), 1, 0, "all" + args);
      else push(sum(a.t, dims, keep), static_cast<double>(n), 0, "sum" + args);
      return true;
    }
    if (!is_floating(dt)) {
      switch (rint(0, 3)) {
        case 0: push(sum(a.t, dims, keep), 9.3e18, 0, "sum" + args); return true;
        case 1:
          if (empty_dim) return false;
          push(amax(a.t, dims, keep), a.mag, 0, "amax" + args);
          return true;
        case 2:
          if (empty_dim) return false;
          push(amin(a.t, dims, keep), a.mag, 0, "amin" + args);
          return true;
        default: push(prod(a.t, dims, keep), 9.3e18, 0, "prod" + args); return true;
      }
    }
    const double nd = static_cast<double>(n), m = a.mag, e = a.err, u = unit(dt);
    const double sum_err = nd * e + (n > 1 ? (nd + 2) * u * nd * m : 0);
    switch (rint(0, 5)) {
      case 0:
      case 1: push(sum(a.t, dims, keep), nd * m, sum_err, "sum" + args); return true;
      case 2:
        if (n == 0) return false;
        push(mean(a.t, dims, keep), m, sum_err / nd + 2 * u * m, "mean" + args);
        return true;
      case 3:
        if (empty_dim) return false;
        push(amax(a.t, dims, keep), m, e, "amax" + args);
        return true;
      case 4:
        if (empty_dim) return false;
        push(amin(a.t, dims, keep), m, e, "amin" + args);
        return true;
      default: {
        if (m > 1.25 || n > 12) return false;
        const double mp = std::pow(std::max(m, 1.0), nd);
        push(prod(a.t, dims, keep), mp, nd * mp * e + 2 * (nd + 1) * u * mp, "prod" + args);
        return true;
      }
    }
  }

  bool movement() {
    const Val a = pool_[pick()];
    const Shape s = a.t.shape();
    const auto rank = static_cast<int64_t>(s.size());
    auto same = [&](const Tensor& t, const std::string& what) { push(t, a.mag, a.err, what); };
    auto dim = [&]() { return rint(0, rank - 1); };
    switch (rint(0, 11)) {
      case 0: {  // permute
        if (rank < 2) return false;
        IntList p(static_cast<size_t>(rank));
        std::iota(p.begin(), p.end(), 0);
        for (size_t i = p.size(); i > 1; --i) std::swap(p[i - 1], p[static_cast<size_t>(rint(0, static_cast<int64_t>(i) - 1))]);
        same(permute(a.t, p), "permute(" + a.name + ", " + shape_text(p) + ")");
        return true;
      }
      case 1: {
        if (rank < 2) return false;
        int64_t d0 = dim(), d1 = dim();
        same(transpose(a.t, d0, d1), "transpose(" + a.name + ", " + std::to_string(d0) + ", " + std::to_string(d1) + ")");
        return true;
      }
      case 2: {  // expand size-1 dims, maybe with a new leading dim
        IntList sizes(s.begin(), s.end());
        bool any = false;
        for (auto& d : sizes) {
          if (d == 1 && chance(0.7)) {
            d = rint(2, 5);
            any = true;
          }
        }
        if (chance(0.3) || !any) sizes.insert(sizes.begin(), rint(2, 3));
        if (numel(sizes) > limit(s)) return false;
        same(expand(a.t, sizes), "expand(" + a.name + ", " + shape_text(sizes) + ")");
        return true;
      }
      case 3:
      case 4: {  // slice with a step
        if (rank < 1) return false;
        int64_t d = dim(), n = s[static_cast<size_t>(d)];
        if (n == 0) return false;
        int64_t start = rint(0, n - 1), end = rint(start + 1, n), step = rint(1, 3);
        if (chance(0.05)) end = start;  // empty
        if (chance(0.3)) start -= n;    // from the end
        same(slice(a.t, d, start, end, step), "slice(" + a.name + ", " + std::to_string(d) + ", " + std::to_string(start) +
                                                  ", " + std::to_string(end) + ", " + std::to_string(step) + ")");
        return true;
      }
      case 5: {  // reshape that merges dims
        if (rank < 2) return false;
        int64_t d0 = rint(0, rank - 2), d1 = rint(d0 + 1, rank - 1);
        same(flatten(a.t, d0, d1), "flatten(" + a.name + ", " + std::to_string(d0) + ", " + std::to_string(d1) + ")");
        return true;
      }
      case 6: {  // reshape that splits a dim
        std::vector<std::pair<int64_t, int64_t>> splits;
        for (int64_t d = 0; d < rank; ++d) {
          for (int64_t f = 2; f < s[static_cast<size_t>(d)]; ++f) {
            if (s[static_cast<size_t>(d)] % f == 0) splits.push_back({d, f});
          }
        }
        if (splits.empty()) return false;
        auto [d, f] = splits[static_cast<size_t>(rint(0, static_cast<int64_t>(splits.size()) - 1))];
        IntList ns(s.begin(), s.end());
        ns[static_cast<size_t>(d)] = f;
        ns.insert(ns.begin() + d + 1, s[static_cast<size_t>(d)] / f);
        same(reshape(a.t, ns), "reshape(" + a.name + ", " + shape_text(ns) + ")");
        return true;
      }
      case 7: {
        if (rank >= 5) return false;
        int64_t d = rint(0, rank);
        same(unsqueeze(a.t, d), "unsqueeze(" + a.name + ", " + std::to_string(d) + ")");
        return true;
      }
      case 8: {
        std::vector<int64_t> ones;
        for (int64_t d = 0; d < rank; ++d) {
          if (s[static_cast<size_t>(d)] == 1) ones.push_back(d);
        }
        if (ones.empty()) {
          same(reshape(a.t, {-1}), "reshape(" + a.name + ", [-1])");
          return true;
        }
        int64_t d = ones[static_cast<size_t>(rint(0, static_cast<int64_t>(ones.size()) - 1))];
        same(squeeze(a.t, d), "squeeze(" + a.name + ", " + std::to_string(d) + ")");
        return true;
      }
      case 9: {
        if (rank < 1) return false;
        int64_t d = dim(), n = s[static_cast<size_t>(d)];
        if (n == 0) return false;
        int64_t i = rint(-n, n - 1);
        same(select(a.t, d, i), "select(" + a.name + ", " + std::to_string(d) + ", " + std::to_string(i) + ")");
        return true;
      }
      case 10: {  // cat with a partner of the same shape but along `d`
        if (rank < 1) return false;
        int64_t d = dim();
        Shape ps = s;
        ps[static_cast<size_t>(d)] = rint(1, 4);
        if (numel(s) + numel(ps) > 2 * limit(s)) return false;
        if (chance(0.4)) {
          same(cat({a.t, neg(a.t)}, d), "cat([" + a.name + ", neg(" + a.name + ")], " + std::to_string(d) + ")");
          return true;
        }
        const Val& b = add_input(ps, a.t.dtype());
        push(cat({a.t, b.t}, d), std::max(a.mag, b.mag), a.err, "cat([" + a.name + ", " + b.name + "], " + std::to_string(d) + ")");
        return true;
      }
      default:
        same(contiguous(a.t), "contiguous(" + a.name + ")");
        return true;
    }
  }

  // Values made on the device: iota (arange) seen through views, filled constants, random
  // numbers (reference fallbacks), eye.
  bool creation() {
    const Shape s = random_shape();
    const int64_t n = numel(s);
    switch (rint(0, 3)) {
      case 0: {
        static const DType kTypes[] = {DType::Int64, DType::Int32, DType::Float32, DType::Float64};
        const DType dt = kTypes[rint(0, 3)];
        Tensor t = reshape(cast(arange(Scalar(static_cast<int64_t>(n))), dt), s);
        std::string what = "reshape(arange(" + std::to_string(n) + ", " + dn(dt) + "), " + shape_text(s) + ")";
        if (s.size() >= 2 && chance(0.5)) {
          t = transpose(t, 0, static_cast<int64_t>(s.size()) - 1);
          what = "transpose(" + what + ")";
        }
        push(t, static_cast<double>(n), 0, what);
        return true;
      }
      case 1: {
        static const double kValues[] = {2.5, -1.0, 0.0, 1.0, 7.0};
        const double v = kValues[rint(0, 4)];
        const DType dt = random_dtype();
        push(full(s, Scalar(v), dt), std::fabs(v), 0, "full(" + shape_text(s) + ", " + num(v) + ", " + dn(dt) + ")");
        return true;
      }
      case 2: {
        const bool normal = chance(0.5);
        const DType dt = chance(0.7) ? DType::Float32 : DType::Float64;
        push(normal ? randn(s, dt) : rand(s, dt), normal ? 8 : 1, 0, (normal ? "randn(" : "rand(") + shape_text(s) + ")");
        return true;
      }
      default: {
        const int64_t r = rint(1, 9), c = rint(1, 9);
        push(eye(r, c, chance(0.5) ? DType::Float32 : DType::Int64), 1, 0,
             "eye(" + std::to_string(r) + ", " + std::to_string(c) + ")");
        return true;
      }
    }
  }

  bool matmul_op() {
    auto ia = pick_where([](const Val& v) { return is_floating(v.t.dtype()) && !v.t.shape().empty(); });
    if (!ia) return false;
    const Val a = bounded(pool_[*ia], 100);
    const int64_t k = a.t.shape().back();
    static const int64_t kN[] = {1, 3, 8, 17};
    const int64_t n = kN[rint(0, 3)];
    if (numel(a.t.shape()) / std::max<int64_t>(k, 1) * n > kMaxNumel) return false;
    Tensor w;
    double mw = 0;
    std::string wname;
    if (chance(0.3)) {
      const Val& wt = add_input({n, k}, a.t.dtype());
      w = transpose(wt.t, 0, 1);
      mw = wt.mag;
      wname = "transpose(" + wt.name + ")";
    } else {
      const Val& wv = add_input({k, n}, a.t.dtype());
      w = wv.t;
      mw = wv.mag;
      wname = wv.name;
    }
    Tensor t = matmul(a.t, w);
    const double kd = static_cast<double>(k), u = unit(t.dtype());
    push(t, kd * a.mag * mw, kd * a.err * mw + 2 * (kd + 2) * u * kd * a.mag * mw, "matmul(" + a.name + ", " + wname + ")");
    return true;
  }

  std::mt19937 g_;
  std::vector<Val> pool_;
  std::vector<bool> used_;  // per pool value: read by a later op
  std::vector<Val> outs_;
  std::ostringstream log_;
};

// Element-by-element comparison of one output; empty when they agree.
std::string compare_output(const Result& ref, const Result& got, const Val& v) {
  std::ostringstream os;
  if (ref.dtype != got.dtype || ref.shape != got.shape) {
    os << "dtype/shape " << dtype_name(got.dtype) << shape_text(got.shape) << " vs reference " << dtype_name(ref.dtype)
       << shape_text(ref.shape);
    return os.str();
  }
  int bad = 0;
  if (is_floating(ref.dtype)) {
    const double tol = v.err == 0 ? 0 : 4 * v.err;
    for (size_t i = 0; i < ref.f.size(); ++i) {
      const double r = ref.f[i], c = got.f[i];
      bool ok = (std::isnan(r) && std::isnan(c)) || r == c || (std::isfinite(r) && std::fabs(c - r) <= tol);
      if (!ok && bad++ < 8) os << "  [" << i << "] cpu " << num(c) << " reference " << num(r) << " (tolerance " << tol << ")\n";
    }
  } else {
    for (size_t i = 0; i < ref.i.size(); ++i) {
      if (ref.i[i] != got.i[i] && bad++ < 8) os << "  [" << i << "] cpu " << got.i[i] << " reference " << ref.i[i] << "\n";
    }
  }
  if (bad) os << "  " << bad << " of " << std::max(ref.f.size(), ref.i.size()) << " elements differ\n";
  return os.str();
}

// Runs seed on both backends; empty when they agree, else a report that reproduces it.
std::string check_seed(uint32_t seed, bool verbose = false) {
  RandomGraph ref_graph(seed), cpu_graph(seed);
  std::string ref_error, cpu_error;
  std::vector<Result> ref = run_on("interp", [&] { return ref_graph.build(); }, &ref_error);
  std::vector<Result> got = run_on("cpu", [&] { return cpu_graph.build(); }, &cpu_error);
  std::string problem;
  if (ref_error != cpu_error) {
    problem = "errors differ: cpu '" + cpu_error + "' reference '" + ref_error + "'\n";
  } else if (ref.size() != got.size()) {
    problem = "output counts differ\n";
  } else {
    for (size_t k = 0; k < ref.size(); ++k) {
      std::string d = compare_output(ref[k], got[k], ref_graph.outputs()[k]);
      if (!d.empty()) problem += "output " + std::to_string(k) + " (" + ref_graph.outputs()[k].name + "):\n" + d;
    }
  }
  if (problem.empty() && !verbose) return "";
  // The graph and plan, from a fresh build of the same seed (nothing run).
  RandomGraph again(seed);
  std::string graph, plan;
  lz::wait();
  set_active_backend("cpu");
  try {
    std::vector<Tensor> ts = again.build();
    graph = debug::dump_graph(ts);
    plan = debug::dump_kernels(ts);
  } catch (const lz::Error& e) {
    graph = std::string("(could not dump: ") + e.what() + ")";
  }
  set_active_backend(config().backend);
  std::ostringstream os;
  os << "random graph seed " << seed << " (rerun: LAZULI_RANDOM_GRAPH_SEED=" << seed
     << " lazuli_tests --gtest_filter='CpuCompilerRandomGraphs.Extra*')\n"
     << (problem.empty() ? "agrees\n" : problem) << "-- generator log:\n"
     << ref_graph.history() << "-- dump_graph:\n" << graph << "-- dump_kernels:\n" << plan;
  return os.str();
}

using CpuCompilerRandomGraphs = CpuCompilerTest;

void check_seeds(uint32_t first, uint32_t last) {
  int failures = 0;
  for (uint32_t seed = first; seed <= last; ++seed) {
    std::string report = check_seed(seed);
    if (!report.empty()) {
      ADD_FAILURE() << report;
      if (++failures >= 5) {
        ADD_FAILURE() << "stopping after 5 failing seeds";
        return;
      }
    }
  }
}

// The CI list: seeds 1..200, in four tests so ctest can spread them over cores.
TEST_F(CpuCompilerRandomGraphs, Seeds1To50AgreeWithTheReference) { check_seeds(1, 50); }
TEST_F(CpuCompilerRandomGraphs, Seeds51To100AgreeWithTheReference) { check_seeds(51, 100); }
TEST_F(CpuCompilerRandomGraphs, Seeds101To150AgreeWithTheReference) { check_seeds(101, 150); }
TEST_F(CpuCompilerRandomGraphs, Seeds151To200AgreeWithTheReference) { check_seeds(151, 200); }

TEST_F(CpuCompilerRandomGraphs, ExtraSeedsFromTheEnvironment) {
  if (const char* one = std::getenv("LAZULI_RANDOM_GRAPH_SEED"); one && *one) {
    const auto seed = static_cast<uint32_t>(std::stoul(one));
    std::string report = check_seed(seed, /*verbose=*/true);
    std::cout << report;
    EXPECT_NE(report.find("\nagrees\n"), std::string::npos);
    return;
  }
  const char* n = std::getenv("LAZULI_RANDOM_GRAPHS");
  if (!n || !*n) GTEST_SKIP() << "set LAZULI_RANDOM_GRAPHS=N to run N more random graphs";
  const char* f = std::getenv("LAZULI_RANDOM_GRAPHS_FIRST");
  const auto first = static_cast<uint32_t>(f && *f ? std::stoul(f) : 1000);
  check_seeds(first, first + static_cast<uint32_t>(std::stoul(n)) - 1);
}

// The generator itself: the same seed records the same graph (the comparison relies on it), and
// the CI seeds cover every op category.
TEST_F(CpuCompilerRandomGraphs, TheGeneratorIsDeterministicAndCoversEveryCategory) {
  set_active_backend("interp");
  std::string all_logs, all_plans;
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    RandomGraph a(seed), b(seed);
    std::vector<Tensor> ta = a.build(), tb = b.build();
    ASSERT_EQ(a.history(), b.history()) << "seed " << seed;
    ASSERT_EQ(debug::graph_hash(ta), debug::graph_hash(tb)) << "seed " << seed;
    all_logs += a.history();
    all_plans += debug::dump_kernels(ta);
  }
  // ... and their plans every planner path.
  for (const char* what : {"elementwise", "row reduction", "column reduction", "(rule 3)", "(rule 4)",
                           "merges dims", "fallback (reference kernel)", "library call matmul", "end: copy"}) {
    size_t n = 0;
    for (size_t p = all_plans.find(what); p != std::string::npos; p = all_plans.find(what, p + 1)) ++n;
    EXPECT_GT(n, 0u) << "no plan of the CI seeds has '" << what << "'";
    if (std::getenv("LAZULI_RANDOM_GRAPH_STATS")) std::cout << what << ": " << n << "\n";
  }
  for (const char* op : {"exp(tanh", "sigmoid(", "gelu(", "erf(", "round(", "floor(", "sign(", "sqrt(abs(",
                         "log(abs(", "pow(abs(", "div(", "maximum(", "minimum(", "where(", "cast(", "sum(",
                         "mean(", "amax(", "amin(", "prod(", "permute(", "transpose(", "expand(", "slice(",
                         "flatten(", "reshape(", "unsqueeze(", "squeeze(", "select(", "cat(", "matmul(",
                         "floor_divide(", "remainder(", "logical_not(", "any(", "arange(", "full(", "rand", "eye(",
                         ": bool[", ": int32[",
                         ": int64[", ": float64[", "keepdim"}) {
    EXPECT_NE(all_logs.find(op), std::string::npos) << op << " never generated";
  }
}

// ---------------------------------------------------------------------------------------------
// Fusion: kernels counted in the plan
// ---------------------------------------------------------------------------------------------

using CpuCompilerFusion = CpuCompilerTest;

std::vector<float> ramp(int64_t n, float scale = 0.01f, float offset = -1.0f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = offset + scale * static_cast<float>((i * 37) % 211);
  return v;
}

// Both backends agree on the program; returns the cpu values of its first output.
void expect_agrees(const std::function<std::vector<Tensor>()>& program, double rtol = 1e-5) {
  std::vector<Result> ref = run_on("interp", program), got = run_on("cpu", program);
  ASSERT_EQ(ref.size(), got.size());
  for (size_t k = 0; k < ref.size(); ++k) {
    ASSERT_EQ(ref[k].shape, got[k].shape);
    for (size_t i = 0; i < ref[k].f.size(); ++i) {
      EXPECT_NEAR(got[k].f[i], ref[k].f[i], rtol * std::max(1.0, std::fabs(ref[k].f[i]))) << "output " << k << " at " << i;
    }
    EXPECT_EQ(ref[k].i, got[k].i);
  }
}

TEST_F(CpuCompilerFusion, ASixOpElementwiseChainIsOneKernel) {
  auto program = [] {
    Tensor x = tensor<float>(ramp(64 * 33), {64, 33});
    return std::vector<Tensor>{sigmoid(relu(exp(x) * 2.5f - x) + 1.5f)};  // exp mul sub relu add sigmoid
  };
  std::vector<Tensor> ts = program();
  cpu::Plan p = plan_of(ts);
  StepCounts c = count_steps(p);
  EXPECT_EQ(c.kernels, 1) << cpu::describe_plan(p);
  EXPECT_EQ(c.fallbacks + c.library, 0);
  ASSERT_EQ(p.kernels.size(), 1u);
  int ops = 0;
  for (const cpu::KExpr& e : p.kernels[0].spec.exprs) {
    if (e.op != ir::OpKind::DeviceData && e.op != ir::OpKind::Constant) ++ops;
  }
  EXPECT_GE(ops, 6) << p.kernels[0].spec.pseudo_c("k");
  EXPECT_EQ(p.arena_bytes, 0) << "no intermediate buffer";
  expect_agrees(program);
}

TEST_F(CpuCompilerFusion, SoftmaxIsAtMostThreeKernels) {
  auto program = [] { return std::vector<Tensor>{nn::softmax(tensor<float>(ramp(32 * 50, 0.1f), {32, 50}), 1)}; };
  std::vector<Tensor> ts = program();
  cpu::Plan p = plan_of(ts);
  StepCounts c = count_steps(p);
  EXPECT_LE(c.kernels, 3) << cpu::describe_plan(p);
  EXPECT_EQ(c.fallbacks + c.library, 0) << cpu::describe_plan(p);
  expect_agrees(program);
}

TEST_F(CpuCompilerFusion, SoftmaxOverTheLeadingDimIsAtMostThreeKernels) {
  auto program = [] { return std::vector<Tensor>{nn::softmax(tensor<float>(ramp(40 * 24, 0.1f), {40, 24}), 0)}; };
  std::vector<Tensor> ts = program();
  cpu::Plan p = plan_of(ts);
  EXPECT_LE(count_steps(p).kernels, 3) << cpu::describe_plan(p);
  EXPECT_EQ(count_steps(p).fallbacks, 0);
  expect_agrees(program);
}

TEST_F(CpuCompilerFusion, AReductionFusesItsElementwiseProducer) {
  for (IntList dims : {IntList{}, IntList{1}, IntList{0}}) {
    auto program = [&] {
      Tensor x = tensor<float>(ramp(48 * 40), {48, 40});
      return std::vector<Tensor>{sum(x * x + 1, dims)};
    };
    std::vector<Tensor> ts = program();
    cpu::Plan p = plan_of(ts);
    EXPECT_EQ(p.steps.size(), 1u) << "dims " << shape_text(dims) << "\n" << cpu::describe_plan(p);
    EXPECT_EQ(count_steps(p).kernels, 1);
    EXPECT_EQ(p.arena_bytes, 0);
    expect_agrees(program, 1e-4);
  }
}

TEST_F(CpuCompilerFusion, ATransposeFeedingAnAddIsNotCopied) {
  auto program = [] {
    Tensor x = tensor<float>(ramp(16 * 24), {16, 24});
    Tensor y = tensor<float>(ramp(24 * 16, 0.02f), {24, 16});
    return std::vector<Tensor>{transpose(x, 0, 1) + y};
  };
  std::vector<Tensor> ts = program();
  cpu::Plan p = plan_of(ts);
  EXPECT_EQ(p.steps.size(), 1u) << cpu::describe_plan(p);
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_EQ(p.kernels[0].spec.inputs.size(), 2u) << "x read in place through strides";
  EXPECT_EQ(p.arena_bytes, 0);
  expect_agrees(program);
}

TEST_F(CpuCompilerFusion, SlicesExpandsAndSplitsAreIndexArithmetic) {
  auto program = [] {
    Tensor x = tensor<float>(ramp(12 * 20), {12, 20});
    Tensor b = tensor<float>(ramp(5, 0.5f), {5, 1});
    Tensor s = slice(slice(x, 0, 1, 11, 2), 1, -17, 19, 3);         // [5, 6]
    Tensor e = expand(b, {5, 6});
    Tensor r = reshape(s * e, {5, 2, 3});                            // a split: affine
    return std::vector<Tensor>{permute(r, {2, 0, 1}) + 1};
  };
  std::vector<Tensor> ts = program();
  cpu::Plan p = plan_of(ts);
  EXPECT_EQ(p.steps.size(), 1u) << cpu::describe_plan(p);
  expect_agrees(program);
}

TEST_F(CpuCompilerFusion, AMatmulIsALibraryCallStep) {
  auto program = [] {
    Tensor a = tensor<float>(ramp(8 * 16), {8, 16});
    Tensor w = tensor<float>(ramp(16 * 4, 0.02f), {16, 4});
    Tensor b = tensor<float>(ramp(4), {4});
    return std::vector<Tensor>{relu(matmul(a, w) + b)};
  };
  std::vector<Tensor> ts = program();
  cpu::Plan p = plan_of(ts);
  StepCounts c = count_steps(p);
  EXPECT_EQ(c.library, 1) << cpu::describe_plan(p);
  EXPECT_EQ(c.kernels, 1);
  EXPECT_EQ(c.fallbacks, 0);
  bool found = false;
  for (const cpu::PlanStep& s : p.steps) found = found || (s.kind == cpu::PlanStep::MatMul && s.op == ir::OpKind::MatMul);
  EXPECT_TRUE(found);
  expect_agrees(program, 1e-4);
}

TEST_F(CpuCompilerFusion, AValueWithManyOpsAndTwoUsersIsMaterializedOnce) {
  auto program = [] {
    Tensor x = tensor<float>(ramp(30 * 30), {30, 30});
    Tensor h = x;
    for (int i = 0; i < 12; ++i) h = tanh(h * 1.5f + 0.25f);  // 36 ops
    return std::vector<Tensor>{sum(h, {1}), h * h};
  };
  std::vector<Tensor> ts = program();
  cpu::Plan p = plan_of(ts);
  // h is computed once (as the root h*h reads it or as a scratch value), not once per user.
  int tanh_count = 0;
  for (const cpu::PlanKernel& k : p.kernels) {
    for (const cpu::KExpr& e : k.spec.exprs) tanh_count += e.op == ir::OpKind::Tanh;
  }
  EXPECT_EQ(tanh_count, 12) << cpu::describe_plan(p);
  expect_agrees(program, 1e-4);
}

TEST_F(CpuCompilerFusion, DumpKernelsReportsDecisionsAndPseudoC) {
  set_active_backend("cpu");
  Tensor x = tensor<float>(ramp(64), {8, 8});
  Tensor y = nn::softmax(x, 1);
  std::string text = debug::dump_kernels({y});
  EXPECT_EQ(text.rfind("plan: ", 0), 0u) << text;
  EXPECT_NE(text.find("decision: "), std::string::npos) << text;
  EXPECT_NE(text.find("void lzk_"), std::string::npos) << text;
  std::string ir = debug::dump_kernels({y}, /*llvm_ir=*/true);
  EXPECT_NE(ir.find("define "), std::string::npos);
  EXPECT_EQ(debug::tensor_state(y), "ir") << "dump_kernels runs nothing";
}

// ---------------------------------------------------------------------------------------------
// Kernel reuse
// ---------------------------------------------------------------------------------------------

class CpuCompilerKernelReuse : public CpuCompilerTest {
 protected:
  void SetUp() override {
    CpuCompilerTest::SetUp();
    mutable_config().cache_dir = temp_dirs().make();  // empty: the first run must compile
    cpu::clear_kernel_memory_cache();
  }
};

std::vector<Tensor> mlp_step(int64_t batch) {
  Tensor x = tensor<float>(ramp(batch * 32), {batch, 32});
  Tensor w = tensor<float>(ramp(32 * 16, 0.003f), {32, 16});
  Tensor b = tensor<float>(ramp(16, 0.1f), {16});
  Tensor t = tensor<int64_t>(std::vector<int64_t>(static_cast<size_t>(batch), 3), {batch});
  Tensor h = relu(matmul(x, w) + b);
  Tensor loss = nn::cross_entropy(h, t);
  Tensor norm = sqrt(sum(x * x, {1}, true));
  return {loss, x / (norm + 1e-6f), nn::softmax(h, 1)};
}

TEST_F(CpuCompilerKernelReuse, ANewBatchSizeCompilesNoKernel) {
  run_on("cpu", [] { return mlp_step(8); });
  const int64_t first = counter("KernelCompile");
  EXPECT_GT(first, 0) << "the first run compiles its kernels";
  for (int64_t batch : {24, 40, 5}) {
    const int64_t programs = counter("UncachedCompile");
    std::vector<Result> got = run_on("cpu", [&] { return mlp_step(batch); });
    EXPECT_EQ(counter("UncachedCompile"), programs + 1) << "a new program for batch " << batch;
    EXPECT_EQ(counter("KernelCompile"), first) << "batch " << batch << " compiled kernels";
    std::vector<Result> ref = run_on("interp", [&] { return mlp_step(batch); });
    for (size_t k = 0; k < ref.size(); ++k) {
      for (size_t i = 0; i < ref[k].f.size(); ++i) EXPECT_NEAR(got[k].f[i], ref[k].f[i], 1e-4) << batch;
    }
  }
}

TEST_F(CpuCompilerKernelReuse, AFreshStartLoadsKernelsFromTheDiskCache) {
  std::vector<Result> first = run_on("cpu", [] { return mlp_step(12); });
  EXPECT_GT(counter("KernelCompile"), 0);
  EXPECT_GT(counter("PersistentCacheMiss"), 0);
  // As a new process would: no program and no kernel in memory.
  lz::wait();
  clear_compile_cache();
  cpu::clear_kernel_memory_cache();
  debug::clear_counters();
  std::vector<Result> second = run_on("cpu", [] { return mlp_step(12); });
  EXPECT_EQ(counter("KernelCompile"), 0);
  EXPECT_GT(counter("PersistentCacheHit"), 0);
  EXPECT_EQ(counter("PersistentCacheRejected"), 0);
  ASSERT_EQ(first.size(), second.size());
  for (size_t k = 0; k < first.size(); ++k) EXPECT_EQ(first[k].f, second[k].f);
}

TEST_F(CpuCompilerKernelReuse, AReadOnlyCacheWritesNothing) {
  mutable_config().persistent_cache_read_only = true;
  run_on("cpu", [] { return mlp_step(6); });
  EXPECT_GT(counter("KernelCompile"), 0);
  std::error_code ec;
  size_t entries = 0;
  for (const auto& e : fs::recursive_directory_iterator(config().cache_dir, ec)) entries += e.is_regular_file();
  EXPECT_EQ(entries, 0u);
}

// ---------------------------------------------------------------------------------------------
// The op table: every elementwise op x dtype over special values
// ---------------------------------------------------------------------------------------------

using CpuCompilerOpTable = CpuCompilerTest;

const DType kDTypes[] = {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::Bool};

std::vector<double> special_values(DType dt) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  switch (dt) {
    case DType::Float16:
    case DType::BFloat16: break;  // not among kDTypes
    case DType::Float32:
    case DType::Float64: {
      std::vector<double> v = {0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.5, 0.49999997, -7.25, nan, -nan,
                               inf, -inf, 1e-40, -1e-45, 1.17549435e-38, 3.4028235e38, -3.4028235e38, 88.8, -104.0,
                               2147483647.0, 2147483648.0, -2147483648.0, -2147483904.0, 3e9, 9.3e18, -9.3e18,
                               1e30, 1e-8, 100.0, 7.0};
      if (dt == DType::Float64) {
        v.insert(v.end(), {1e308, -1e-310, 710.0, -745.5, 4.9e-324, 9223372036854775807.0, -9223372036854775808.0});
      }
      return v;
    }
    case DType::Int32:
      return {0, 1, -1, 2, -2, 3, 7, -7, 100, -100, 46341, -46341, INT32_MAX, INT32_MIN, INT32_MIN + 1, INT32_MAX - 1};
    case DType::Int64:
      return {0, 1, -1, 2, -2, 3, 7, -7, 100, -100, 3037000500.0, 2147483648.0, -2147483649.0, 9.2233720368547748e18,
              -9223372036854775808.0};
    case DType::Bool: return {0, 1};
  }
  return {};
}

// `values` padded with moderate values to n elements (so the vectorized loop body runs too), as
// the dtype stores them.
std::vector<double> padded(const std::vector<double>& values, DType dt, size_t n) {
  std::vector<double> v = values;
  for (size_t i = v.size(); i < n; ++i) {
    v.push_back(dt == DType::Bool ? (i % 3 == 0) : static_cast<double>(static_cast<int64_t>(i % 19) - 9) * 0.75);
  }
  v.resize(n);
  for (double& x : v) {
    switch (dt) {
      case DType::Float16:
      case DType::BFloat16: break;  // not among kDTypes
      case DType::Float32: x = static_cast<float>(x); break;
      case DType::Float64: break;
      case DType::Int32: x = static_cast<double>(static_cast<int32_t>(std::trunc(x))); break;
      case DType::Int64:
        x = x >= 9.2233720368547748e18 ? 9.2233720368547748e18 : static_cast<double>(static_cast<int64_t>(std::trunc(x)));
        break;
      case DType::Bool: x = x != 0; break;
    }
  }
  return v;
}

Tensor host_tensor(const std::vector<double>& values, DType dt, const Shape& shape) {
  const std::vector<double> v = padded(values, dt, static_cast<size_t>(numel(shape)));
  switch (dt) {
    case DType::Float16:
    case DType::BFloat16: break;  // not among kDTypes
    case DType::Float32: {
      std::vector<float> f;
      for (double x : v) f.push_back(static_cast<float>(x));
      return tensor<float>(f, shape);
    }
    case DType::Float64: return tensor<double>(v, shape);
    case DType::Int32: {
      std::vector<int32_t> f;
      for (double x : v) f.push_back(static_cast<int32_t>(x));
      return tensor<int32_t>(f, shape);
    }
    case DType::Int64: {
      std::vector<int64_t> f;
      for (double x : v) f.push_back(x >= 9.2233720368547748e18 ? INT64_MAX : static_cast<int64_t>(x));
      return tensor<int64_t>(f, shape);
    }
    case DType::Bool: {
      std::vector<bool> f;
      for (double x : v) f.push_back(x != 0);
      return tensor<bool>(f, shape);
    }
  }
  return Tensor();
}

int64_t ulp_distance(double a, double b, DType dt) {
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
std::string compare_exact(const Result& ref, const Result& got, bool approx, const std::vector<double>& scale) {
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

struct OpCase {
  std::string name;
  std::function<Tensor(const Tensor&, const Tensor&)> f;  // unary ops ignore the second operand
  bool approx = false;                                     // a transcendental function
  bool binary = false;
};

std::vector<OpCase> op_cases() {
  std::vector<OpCase> c;
  auto u = [&](const char* n, Tensor (*f)(const Tensor&), bool approx = false) {
    c.push_back({n, [f](const Tensor& a, const Tensor&) { return f(a); }, approx, false});
  };
  u("neg", neg); u("abs", abs); u("relu", relu); u("floor", floor); u("ceil", ceil); u("round", round);
  u("sign", sign); u("sqrt", sqrt); u("rsqrt", rsqrt); u("reciprocal", reciprocal);
  u("logical_not", logical_not); u("bitwise_not", bitwise_not); u("detach", detach);
  u("exp", exp, true); u("log", log, true); u("log1p", log1p, true); u("expm1", expm1, true);
  u("sin", sin, true); u("cos", cos, true); u("tanh", tanh, true); u("sigmoid", sigmoid, true);
  u("gelu", gelu, true); u("erf", erf, true);
  for (DType to : kDTypes) {
    c.push_back({"cast_to_" + dn(to), [to](const Tensor& a, const Tensor&) { return cast(a, to); }});
  }
  auto b = [&](const char* n, Tensor (*f)(const Operand&, const Operand&), bool approx = false) {
    c.push_back({n, [f](const Tensor& x, const Tensor& y) { return f(x, y); }, approx, true});
  };
  b("add", add); b("sub", sub); b("mul", mul); b("div", div); b("maximum", maximum); b("minimum", minimum);
  b("eq", eq); b("ne", ne); b("lt", lt); b("le", le); b("gt", gt); b("ge", ge);
  b("logical_and", logical_and); b("logical_or", logical_or); b("logical_xor", logical_xor);
  b("bitwise_and", bitwise_and); b("bitwise_or", bitwise_or); b("bitwise_xor", bitwise_xor);
  b("pow", pow, true); b("floor_divide", floor_divide); b("remainder", remainder);
  c.push_back({"where", [](const Tensor& x, const Tensor& y) { return where(gt(x, y), x, y); }, false, true});
  return c;
}

// One op over special values: unary ops see every special value contiguous and through a
// transpose; binary ops every pair (x [S, 1] against y [1, S], so one side is broadcast) plus a
// contiguous same-shape pass.
struct OpProgram {
  std::function<std::vector<Tensor>()> build;
  std::vector<std::vector<double>> scales;  // per output, per element: the operands' magnitude
};

OpProgram op_program(const OpCase& op, DType dt) {
  std::vector<double> sv = special_values(dt);
  const auto s = static_cast<int64_t>(sv.size());
  // Integer division and pow need nonzero / nonnegative right operands (the reference throws).
  std::vector<double> rhs = sv;
  auto sanitize = [&](std::vector<double>& v) {
    if (is_floating(dt)) return;
    for (double& x : v) {
      if ((op.name == "floor_divide" || op.name == "remainder") && x == 0) x = 3;
      if (op.name == "pow") x = static_cast<double>(static_cast<int64_t>(std::fabs(x)) % 64);
    }
  };
  sanitize(rhs);
  const auto sr = static_cast<int64_t>(rhs.size());
  std::vector<double> rot = padded(rhs, dt, 67);
  std::rotate(rot.begin(), rot.begin() + 1, rot.end());
  sanitize(rot);
  OpProgram prog;
  prog.build = [=]() -> std::vector<Tensor> {
    if (op.binary) {
      Tensor x = host_tensor(sv, dt, {s, 1});
      Tensor y = host_tensor(rhs, dt, {1, sr});
      return {op.f(x, y), op.f(host_tensor(sv, dt, {67}), host_tensor(rot, dt, {67}))};
    }
    Tensor x = host_tensor(sv, dt, {67});
    Tensor m = host_tensor(sv, dt, {s, 3});
    return {op.f(x, x), op.f(transpose(m, 0, 1), Tensor())};
  };
  // The absolute error allowance of an approximate op scales with its operands (gelu, sin and pow
  // cancel or reduce their arguments).
  auto mag = [](double x) { return std::isfinite(x) ? std::fabs(x) : 1.0; };
  if (op.binary) {
    std::vector<double> s0, s1;
    for (double x : sv) {
      for (double y : rhs) s0.push_back(std::max(mag(x), mag(y)));
    }
    std::vector<double> px = padded(sv, dt, 67), py = padded(rot, dt, 67);
    for (size_t i = 0; i < 67; ++i) s1.push_back(std::max(mag(px[i]), mag(py[i])));
    prog.scales = {s0, s1};
  } else {
    std::vector<double> s0, s1;
    for (double x : padded(sv, dt, 67)) s0.push_back(mag(x));
    std::vector<double> pm = padded(sv, dt, static_cast<size_t>(3 * s));
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t j = 0; j < s; ++j) s1.push_back(mag(pm[static_cast<size_t>(j * 3 + i)]));
    }
    prog.scales = {s0, s1};
  }
  return prog;
}

// Which (op, dtype) pairs the planner lowers into kernels (the rest run reference fallbacks).
bool planner_compiles(const std::string& op, DType dt) {
  if (op == "floor_divide" || op == "remainder") return false;
  const bool flt = is_floating(dt), boolean = dt == DType::Bool;
  if (op == "pow") return flt;
  if (boolean && (op == "neg" || op == "abs" || op == "relu" || op == "add" || op == "sub" || op == "mul" ||
                  op == "maximum" || op == "minimum")) {
    return false;
  }
  return true;
}

TEST_F(CpuCompilerOpTable, EveryElementwiseOpAndDtypeMatchesTheReferenceOnSpecialValues) {
  int checked = 0;
  for (DType dt : kDTypes) {
    // Every op that takes this dtype, all in one program (its kernels compile in parallel).
    std::vector<OpCase> ops;
    std::vector<OpProgram> progs;
    set_active_backend("interp");
    for (const OpCase& op : op_cases()) {
      OpProgram prog = op_program(op, dt);
      try {
        prog.build();  // records only: the frontend rejects dtypes the op does not take
      } catch (const lz::Error&) {
        continue;
      }
      // The planner lowers it to kernels where it says it compiles it.
      set_active_backend("cpu");
      cpu::Plan p = plan_of(prog.build());
      set_active_backend("interp");
      if (planner_compiles(op.name, dt)) {
        EXPECT_EQ(count_steps(p).fallbacks, 0) << op.name << " on " << dtype_name(dt) << " runs a fallback\n"
                                               << cpu::describe_plan(p);
      }
      ops.push_back(op);
      progs.push_back(std::move(prog));
    }
    set_active_backend(config().backend);
    auto program = [&] {
      std::vector<Tensor> all;
      for (const OpProgram& p : progs) {
        for (const Tensor& t : p.build()) all.push_back(t);
      }
      return all;
    };
    std::string ref_error, cpu_error;
    std::vector<Result> ref = run_on("interp", program, &ref_error), got = run_on("cpu", program, &cpu_error);
    ASSERT_EQ(ref_error, "") << dtype_name(dt);
    ASSERT_EQ(cpu_error, "") << dtype_name(dt);
    ASSERT_EQ(ref.size(), got.size());
    size_t k = 0;
    for (size_t i = 0; i < ops.size(); ++i, ++checked) {
      for (size_t j = 0; j < progs[i].scales.size(); ++j, ++k) {
        EXPECT_EQ(compare_exact(ref[k], got[k], ops[i].approx, progs[i].scales[j]), "")
            << ops[i].name << " on " << dtype_name(dt) << ", output " << j;
      }
    }
  }
  EXPECT_GT(checked, 120);
}

TEST_F(CpuCompilerOpTable, MaximumAndMinimumKeepTheReferencesSignedZeroOnTies) {
  // The reference returns the first operand on ties (max_values: b > a ? b : a).
  auto program = [] {
    Tensor a = tensor<float>({-0.0f, 0.0f, -0.0f, 0.0f}, {4});
    Tensor b = tensor<float>({0.0f, -0.0f, -0.0f, 0.0f}, {4});
    return std::vector<Tensor>{maximum(a, b), minimum(a, b)};
  };
  std::vector<Result> ref = run_on("interp", program), got = run_on("cpu", program);
  for (size_t k = 0; k < 2; ++k) {
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_EQ(std::signbit(got[k].f[i]), std::signbit(ref[k].f[i]))
          << (k ? "minimum" : "maximum") << " at " << i << ": cpu " << got[k].f[i] << " reference " << ref[k].f[i];
    }
  }
}

TEST_F(CpuCompilerOpTable, RoundingIsHalfToEvenAndCastsOfSpecialFloatsGiveTheIntegerMinimum) {
  auto program = [] {
    Tensor x = tensor<float>({0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 0.49999997f, 8388609.0f}, {8});
    Tensor f = tensor<float>({NAN, INFINITY, -INFINITY, 3e9f, -3e9f, 2147483648.0f, -2147483648.0f, 1e20f}, {8});
    return std::vector<Tensor>{round(x), cast(f, DType::Int32), cast(f, DType::Int64), cast(f, DType::Bool)};
  };
  std::vector<Result> got = run_on("cpu", program), ref = run_on("interp", program);
  EXPECT_EQ(got[0].f, (std::vector<double>{0, 2, 2, -0.0, -2, -2, 0, 8388609.0}));
  EXPECT_EQ(got[1].i, (std::vector<int64_t>{INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN}));
  EXPECT_EQ(got[2].i, ref[2].i);
  EXPECT_EQ(got[3].i, (std::vector<int64_t>{1, 1, 1, 1, 1, 1, 1, 1}));
  for (size_t k = 0; k < got.size(); ++k) EXPECT_EQ(compare_exact(ref[k], got[k], false, {}), "") << k;
}

TEST_F(CpuCompilerOpTable, ConstantsOfEveryDtypeMatchTheReference) {
  // Baked constants (lz::constant) reach the kernel as immediates, NaN and out-of-range ones too.
  const double values[] = {0.0, -0.0, 1.0, 2.5, -2.5, NAN, INFINITY, -INFINITY, 3e9, -3e9, 1e20};
  for (DType dt : kDTypes) {
    auto program = [&] {
      std::vector<Tensor> out;
      Tensor x = tensor<float>({1.0f, 2.0f, 3.0f}, {3});
      for (double v : values) out.push_back(cast(x, dt) + constant(v, dt) * cast(x, dt));
      return out;
    };
    std::string e1, e2;
    std::vector<Result> ref = run_on("interp", program, &e1), got = run_on("cpu", program, &e2);
    ASSERT_EQ(e1, e2) << dtype_name(dt);
    for (size_t k = 0; k < ref.size(); ++k) {
      EXPECT_EQ(compare_exact(ref[k], got[k], false, {}), "") << dtype_name(dt) << " constant " << values[k];
    }
  }
}

TEST_F(CpuCompilerOpTable, ReductionsOfSpecialValuesMatchTheReference) {
  struct Case {
    DType dt;
    std::vector<double> v;
  };
  const double inf = INFINITY;
  const std::vector<Case> cases = {
      {DType::Float32, {1, NAN, 2, 3, 4, 5, 6, 7}},          {DType::Float32, {-inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf}},
      {DType::Float32, {-0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0}}, {DType::Float32, {inf, 1, -inf, 2, 3, 4, 5, 6}},
      {DType::Float64, {1e308, 1e308, -1, 2, NAN, 4, 5, 6}},  {DType::Float32, {-0.0, 0.0, -0.0, 0.0, 0.0, -0.0, 0.0, -0.0}},
      {DType::Int32, {INT32_MAX, 1, INT32_MIN, -1, 5, 7, INT32_MAX, 2}},
      {DType::Int64, {9.2233720368547748e18, 1, -9223372036854775808.0, -1, 5, 7, 3, 2}}};
  for (const Case& c : cases) {
    for (const Shape& shape : {Shape{8}, Shape{2, 4}, Shape{4, 2}, Shape{2, 2, 2}}) {
      for (IntList dims : {IntList{}, IntList{0}, IntList{static_cast<int64_t>(shape.size()) - 1}}) {
        auto program = [&] {
          Tensor x = host_tensor(c.v, c.dt, shape);
          return std::vector<Tensor>{amax(x, dims), amin(x, dims), sum(x, dims), prod(x, dims)};
        };
        std::vector<Result> ref = run_on("interp", program), got = run_on("cpu", program);
        for (size_t k = 0; k < ref.size(); ++k) {
          // Sums and products of floats may round differently (float32 accumulation); signs, NaN
          // and infinities must agree, and max/min bit for bit.
          EXPECT_EQ(compare_exact(ref[k], got[k], k >= 2 && is_floating(c.dt), std::vector<double>(8, 1e-300)), "")
              << dtype_name(c.dt) << shape_text(shape) << " dims " << shape_text(dims) << " reduction " << k;
        }
      }
    }
  }
}

TEST_F(CpuCompilerOpTable, EmptyAndScalarShapesMatchTheReference) {
  auto program = [] {
    Tensor e = tensor<float>(std::vector<float>{}, {3, 0, 2});
    Tensor s = tensor<float>({2.5f}, {});
    Tensor one = tensor<float>({1.5f, -2.0f}, {1, 2, 1});
    return std::vector<Tensor>{sum(e, {1}), prod(e, {1}, true), exp(e) + 1, sum(e), s * s + 1, sum(s),
                               amax(one, {0, 2}), sum(one, {0}, true), mean(one, {2}), slice(e, 0, 1, 1)};
  };
  std::vector<Result> ref = run_on("interp", program), got = run_on("cpu", program);
  ASSERT_EQ(ref.size(), got.size());
  for (size_t k = 0; k < ref.size(); ++k) EXPECT_EQ(compare_exact(ref[k], got[k], false, {}), "") << k;
}

// ---------------------------------------------------------------------------------------------
// Donation: an in-place update written into its own input's storage
// ---------------------------------------------------------------------------------------------

using CpuCompilerDonation = CpuCompilerTest;

std::vector<float> square_values(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n * n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f - 3.0f;
  return v;
}

// Runs `update` on x (already on the device) under a barrier on both backends; the results agree
// and the buffer was donated on cpu.
void expect_in_place_update_agrees(const std::function<void(Tensor&)>& update, int64_t n = 9) {
  std::vector<Result> results[2];
  int64_t donated[2] = {0, 0};
  const char* backends[2] = {"interp", "cpu"};
  for (int b = 0; b < 2; ++b) {
    lz::wait();
    set_active_backend(backends[b]);
    {
      Tensor x = tensor<float>(square_values(n), {n, n});
      x = x + 0;  // a device buffer owned by x alone
      sync();
      lz::wait();
      const int64_t before = debug::counter_value("InputOutputAliasCount");
      update(x);
      sync();
      lz::wait();
      donated[b] = debug::counter_value("InputOutputAliasCount") - before;
      results[b].push_back(read(x));
    }
    lz::wait();
    set_active_backend(config().backend);
  }
  EXPECT_GT(donated[1], 0) << "the update did not donate x's buffer: the test proves nothing";
  EXPECT_EQ(compare_exact(results[0][0], results[1][0], false, {}), "");
}

TEST_F(CpuCompilerDonation, AddingItsOwnTransposeReadsTheOldValues) {
  expect_in_place_update_agrees([](Tensor& x) { x += transpose(x, 0, 1); });
}

TEST_F(CpuCompilerDonation, CopyingItsOwnTransposeReadsTheOldValues) {
  expect_in_place_update_agrees([](Tensor& x) { x.copy_(transpose(x, 0, 1)); });
}

TEST_F(CpuCompilerDonation, AddingAShiftedSliceOfItselfReadsTheOldValues) {
  expect_in_place_update_agrees([](Tensor& x) {
    x.mul_(2);
    x.add_(slice(x, 0, 1, 2));  // row 1 broadcast over every row
  });
}

TEST_F(CpuCompilerDonation, SubtractingItsOwnColumnSumsReadsTheOldValues) {
  expect_in_place_update_agrees([](Tensor& x) { x -= sum(x, {0}, true); });
}

TEST_F(CpuCompilerDonation, AnElementwiseUpdateAgrees) {
  expect_in_place_update_agrees([](Tensor& x) {
    x.mul_(0.5f);
    x.add_(1.0f);
    x.clamp_(-2.0f, 2.0f);
  });
}

// Two tensors swapped through a clone, at a barrier that donates both buffers: the program's
// last step copies one parameter into the other's output storage, which must not happen before
// that parameter's own copy has read it. (The runtime decides donations; both backends run the
// copies at the end.)
TEST_F(CpuCompilerDonation, SwappingTwoTensorsThroughACloneKeepsBothValues) {
  for (const char* backend : {"cpu", "interp"}) {
    SCOPED_TRACE(backend);
    lz::wait();
    set_active_backend(backend);
    {
      Tensor y = tensor<float>({0, 1, 2, 3}, {4}) + 0;  // y's id is smaller than x's
      Tensor x = tensor<float>({10, 11, 12, 13}, {4}) + 0;
      sync();
      lz::wait();
      const int64_t before = debug::counter_value("InputOutputAliasCount");
      Tensor t = x.clone();
      x.copy_(y);
      y.copy_(t);
      sync();
      lz::wait();
      EXPECT_GT(debug::counter_value("InputOutputAliasCount"), before) << "nothing donated: the test proves nothing";
      EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{0, 1, 2, 3}));
      EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{10, 11, 12, 13}));
      EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{10, 11, 12, 13}));
    }
    lz::wait();
    set_active_backend(config().backend);
  }
}

// Each root asks whether its donated parameter may be overwritten once, at run time: a table of
// every root's candidate parameters (roots x parameters entries) made this sync take minutes.
TEST_F(CpuCompilerDonation, FiftyThousandDonatedUpdatesInOneSyncAreEachWrittenInPlace) {
  constexpr int kTensors = 50000;
  std::vector<Tensor> ws;
  ws.reserve(kTensors);
  for (int i = 0; i < kTensors; ++i) ws.push_back(tensor<float>({1, 2}, {2}) + 0);  // owned buffers
  Tensor g = tensor<float>({1, 2}, {2});
  sync();
  lz::wait();
  const int64_t before = debug::counter_value("InputOutputAliasCount");
  for (Tensor& w : ws) w -= g;  // one node each: no graph-too-large cut inside the loop
  sync();
  lz::wait();
  EXPECT_EQ(debug::counter_value("InputOutputAliasCount") - before, kTensors);
  EXPECT_EQ(ws.front().to_vector<float>(), (std::vector<float>{0, 0}));
  EXPECT_EQ(ws.back().to_vector<float>(), (std::vector<float>{0, 0}));
}

TEST_F(CpuCompilerFusion, AChainPastTheKernelSizeLimitSplitsAndStillAgrees) {
  auto program = [] {
    Tensor x = tensor<float>(ramp(40 * 24), {40, 24});
    Tensor h = x;
    for (int i = 0; i < 40; ++i) h = relu(h * 0.75f + 0.125f) - 0.0625f;  // 160 ops
    return std::vector<Tensor>{h};
  };
  std::vector<Tensor> ts = program();
  cpu::Plan p = plan_of(ts);
  EXPECT_GE(count_steps(p).kernels, 2) << cpu::describe_plan(p);
  EXPECT_NE(cpu::describe_plan(p).find("(rule 6)"), std::string::npos);
  for (const cpu::PlanKernel& k : p.kernels) {
    int ops = 0;
    for (const cpu::KExpr& e : k.spec.exprs) ops += e.op != ir::OpKind::DeviceData && e.op != ir::OpKind::Constant;
    EXPECT_LE(ops, 64) << "a kernel over the limit";
  }
  std::vector<Result> ref = run_on("interp", program), got = run_on("cpu", program);
  EXPECT_EQ(compare_exact(ref[0], got[0], false, {}), "") << "correctly rounded ops only: bit for bit";
}

TEST_F(CpuCompilerFusion, LargeTensorsSplitOverTheThreadPoolAgree) {
  // Far over one parallel chunk (32768 elements); rows of 1001 so chunks start mid-row.
  auto program = [] {
    Tensor x = tensor<float>(ramp(301 * 1001, 0.001f), {301, 1001});
    Tensor y = tensor<float>(ramp(1001, 0.01f), {1001});
    return std::vector<Tensor>{transpose(x, 0, 1) * 2 + 1,      // elementwise, strided
                               sum(x * y, {0}),                  // column reduction
                               amax(x - y, {1}),                 // row reduction
                               sum(reshape(x, {7, 43, 1001}), {0, 2}, true),
                               round(x * 3) + cast(gt(x, y), DType::Float32)};
  };
  std::vector<Result> ref = run_on("interp", program), got = run_on("cpu", program);
  ASSERT_EQ(ref.size(), got.size());
  EXPECT_EQ(compare_exact(ref[0], got[0], false, {}), "");
  EXPECT_EQ(compare_exact(ref[2], got[2], false, {}), "");
  EXPECT_EQ(compare_exact(ref[4], got[4], false, {}), "");
  for (size_t k : {size_t{1}, size_t{3}}) {
    for (size_t i = 0; i < ref[k].f.size(); ++i) {
      ASSERT_NEAR(got[k].f[i], ref[k].f[i], 1e-4 * std::max(1.0, std::fabs(ref[k].f[i])) * 30) << k << " at " << i;
    }
  }
}

// Rule 7: a chain of permutes under a float32 2-D matmul operand is read by sgemm as is or
// transposed ('T'), without a copy.
TEST_F(CpuCompilerFusion, TransposedMatmulOperandsAreFoldedIntoTheLibraryCallAndAgree) {
  struct Dims {
    int64_t m, k, n;
  };
  // Small, tall, wide, degenerate and empty products, and two large enough for sgemm to be cut
  // into blocks of rows (300 x 512 x 256) or of columns (8 x 512 x 300) over the thread pool.
  const Dims dims[] = {{3, 4, 5},   {130, 33, 7}, {7, 33, 150}, {200, 65, 129}, {1, 5, 1},
                       {0, 3, 2},   {4, 0, 3},    {300, 512, 256}, {8, 512, 300}};
  for (const Dims& d : dims) {
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        SCOPED_TRACE("m " + std::to_string(d.m) + " k " + std::to_string(d.k) + " n " + std::to_string(d.n) +
                     " ta " + std::to_string(ta) + " tb " + std::to_string(tb));
        auto program = [&] {
          Tensor a = ta ? transpose(tensor<float>(ramp(d.k * d.m, 0.01f), {d.k, d.m}), 0, 1)
                        : tensor<float>(ramp(d.m * d.k, 0.01f), {d.m, d.k});
          Tensor b = tb ? transpose(tensor<float>(ramp(d.n * d.k, 0.013f, -0.7f), {d.n, d.k}), 0, 1)
                        : tensor<float>(ramp(d.k * d.n, 0.013f, -0.7f), {d.k, d.n});
          return std::vector<Tensor>{matmul(a, b)};
        };
        std::vector<Tensor> ts = program();
        cpu::Plan p = plan_of(ts);
        EXPECT_EQ(p.steps.size(), 1u) << "a transposed operand was copied\n" << cpu::describe_plan(p);
        std::vector<Result> ref = run_on("interp", program), got = run_on("cpu", program);
        ASSERT_EQ(ref[0].f.size(), got[0].f.size());
        for (size_t i = 0; i < ref[0].f.size(); ++i) {
          ASSERT_NEAR(got[0].f[i], ref[0].f[i], 1e-5 * static_cast<double>(d.k + 1) * std::max(1.0, std::fabs(ref[0].f[i])))
              << "at " << i;
        }
      }
    }
  }
}

TEST_F(CpuCompilerFusion, PermutedMatmulOperandsOfEveryKindAgree) {
  auto program = [] {
    Tensor x = tensor<float>(ramp(96 * 40, 0.01f), {96, 40});
    Tensor w = tensor<float>(ramp(40 * 24, 0.02f), {40, 24});
    Tensor x3 = tensor<float>(ramp(2 * 40 * 24, 0.01f), {2, 40, 24});
    Tensor wd = tensor<double>(std::vector<double>(40 * 24, 0.5), {24, 40});
    Tensor xd = tensor<double>(std::vector<double>(96 * 40, 0.25), {96, 40});
    Tensor xt = transpose(x, 0, 1);
    return std::vector<Tensor>{
        matmul(transpose(xt, 0, 1), w),                            // two transposes: the identity
        matmul(transpose(x * 2 + 1, 0, 1), x),                     // a transposed computed value
        matmul(transpose(slice(x, 0, 1, 81, 2), 0, 1), slice(x, 0, 0, 40)),  // transposed strided views
        matmul(x, transpose(reshape(w, {24, 40}), 0, 1)),          // transposed reshape alias
        matmul(permute(x3, {0, 2, 1}), w),                         // batched: not folded
        matmul(xd, transpose(wd, 0, 1)),                           // float64: the reference kernel
        xt};                                                       // the permute is a root as well
  };
  std::vector<Result> ref = run_on("interp", program), got = run_on("cpu", program);
  ASSERT_EQ(ref.size(), got.size());
  for (size_t k = 0; k < ref.size(); ++k) {
    ASSERT_EQ(ref[k].shape, got[k].shape) << k;
    for (size_t i = 0; i < ref[k].f.size(); ++i) {
      ASSERT_NEAR(got[k].f[i], ref[k].f[i], 1e-4 * std::max(1.0, std::fabs(ref[k].f[i]))) << "output " << k << " at " << i;
    }
  }
}

// mean() divides by the element count, a baked constant that changes with the batch size: its
// value must reach the kernel as an argument, not be compiled into it.
TEST_F(CpuCompilerKernelReuse, ANewBatchSizeOfAMeanCompilesNoKernel) {
  auto program = [](int64_t batch) {
    return std::vector<Tensor>{mean(tensor<float>(ramp(batch * 16), {batch, 16}), {0})};
  };
  run_on("cpu", [&] { return program(8); });
  const int64_t first = counter("KernelCompile");
  EXPECT_GT(first, 0);
  run_on("cpu", [&] { return program(24); });
  EXPECT_EQ(counter("KernelCompile"), first);
}

TEST_F(CpuCompilerKernelReuse, ANewBatchSizeOfAProgramWithoutMeansCompilesNoKernel) {
  auto program = [](int64_t batch) {
    Tensor x = tensor<float>(ramp(batch * 32), {batch, 32});
    Tensor w = tensor<float>(ramp(32 * 16, 0.003f), {32, 16});
    Tensor h = relu(matmul(x, w) + 0.5f);
    return std::vector<Tensor>{nn::softmax(h, 1), sum(h * h, {0}), x / (sqrt(sum(x * x, {1}, true)) + 1e-6f)};
  };
  run_on("cpu", [&] { return program(8); });
  const int64_t first = counter("KernelCompile");
  EXPECT_GT(first, 0);
  for (int64_t batch : {24, 40, 5}) {
    run_on("cpu", [&] { return program(batch); });
    EXPECT_EQ(counter("KernelCompile"), first) << "batch " << batch;
  }
}

}  // namespace
}  // namespace lz
