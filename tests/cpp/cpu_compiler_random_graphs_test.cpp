// CpuCompilerRandomGraphs: the LLVM cpu backend ("cpu", src/backend/cpu/) proved against the
// reference backend ("interp") on random programs (op chains with broadcasting, casts, compares and
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
// The other cpu_compiler_*_test.cpp files: fusion, kernel reuse, the op table, donation.
#include "cpu_compiler_util.h"

namespace lz {
namespace {

using namespace cpu_test;  // NOLINT(build/namespaces): the shared helpers of these test files

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

}  // namespace
}  // namespace lz
