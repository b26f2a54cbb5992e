// CpuCompilerOpTable: every elementwise op x dtype, over special values (NaN, +-inf, -0.0, ties
// for rounding, integer extremes), bit for bit against the reference backend (a few ulps for
// transcendental functions), and lowered to a kernel where the planner says it compiles.
#include "cpu_compiler_util.h"

namespace lz {
namespace {

using namespace cpu_test;  // NOLINT(build/namespaces): the shared helpers of these test files

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
      std::vector<double> v = {0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.5, 0.49999997,
                               -7.25, nan, -nan, inf, -inf, 1e-40, -1e-45, 1.17549435e-38,
                               3.4028235e38, -3.4028235e38, 88.8, -104.0, 2147483647.0,
                               2147483648.0, -2147483648.0, -2147483904.0, 3e9, 9.3e18, -9.3e18,
                               1e30, 1e-8, 100.0, 7.0,
                               // exp's limits (the codegen's selects, emit_expr.cpp Emitter::exp)
                               // and libmvec's fast range: on both sides of each.
                               -104.5, -103.98, -88.5, -87.5, 87.5, 88.72, 89.5, -100.0};
      if (dt == DType::Float64) {
        v.insert(v.end(), {1e308, -1e-310, 710.0, -745.5, 4.9e-324, 9223372036854775807.0,
                           -9223372036854775808.0, -746.5, -709.5, 709.5, 710.5, -708.0});
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
      lower::Plan p = plan_of(prog.build());
      set_active_backend("interp");
      if (planner_compiles(op.name, dt)) {
        EXPECT_EQ(count_steps(p).fallbacks, 0) << op.name << " on " << dtype_name(dt) << " runs a fallback\n"
                                               << lower::describe_plan(p);
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

// exp and sigmoid around the limits where the generated code selects 0 or +inf instead of calling
// libmvec (emit_expr.cpp Emitter::exp), and around libmvec's own fast range: each result is libm's
// (within a few ulp where libmvec's vector code computes it), zeros and infinities exactly, and a
// denormal result stays a denormal. The op-table test above allows an absolute error that cannot
// tell a denormal from 0.
template <typename T>
void expect_libm_exp(const std::vector<T>& xs, const std::vector<T>& got, bool sigmoid) {
  ASSERT_EQ(xs.size(), got.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    const T x = xs[i];
    const T want = sigmoid ? T(1) / (T(1) + std::exp(-x)) : std::exp(x);
    const std::string where = std::string(sigmoid ? "sigmoid(" : "exp(") + std::to_string(x) + ")";
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got[i])) << where << " = " << got[i];
    } else if (want == 0 || std::isinf(want)) {
      EXPECT_EQ(got[i], want) << where;
      EXPECT_EQ(std::signbit(got[i]), std::signbit(want)) << where;
    } else if (std::fabs(want) < std::numeric_limits<T>::min()) {
      EXPECT_GT(got[i], 0) << where << ": a denormal became 0";
      EXPECT_NEAR(got[i], want, 4 * std::numeric_limits<T>::denorm_min()) << where;
    } else {
      EXPECT_NEAR(got[i], want, 8 * std::numeric_limits<T>::epsilon() * std::fabs(want)) << where;
    }
  }
}

TEST_F(CpuCompilerOpTable, ExpAndSigmoidAtTheEdgesOfTheirRangeAreLibmsResults) {
  const float fi = std::numeric_limits<float>::infinity(),
              fn = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> f = {-3.4e38f, -1e4f,  -104.5f, -104.0f, -103.98f, -103.9f, -100.0f,
                          -90.0f,   -88.5f, -88.0f,  -87.5f,  -87.3f,   -20.0f,  0.0f,
                          20.0f,    87.3f,  87.5f,   88.5f,   88.72f,   88.73f,  89.0f,
                          89.5f,    1e4f,   3.4e38f, fn,      -fi,      fi};
  // Padded to several vectors' worth, so the vector code (not only a scalar tail) sees each value.
  std::vector<float> fx;
  for (int r = 0; r < 4; ++r) fx.insert(fx.end(), f.begin(), f.end());
  const auto nf = static_cast<int64_t>(fx.size());
  expect_libm_exp(fx, lz::exp(tensor<float>(fx, {nf})).to_vector<float>(), false);
  expect_libm_exp(fx, tensor<float>(fx, {nf}).sigmoid().to_vector<float>(), true);

  const double di = std::numeric_limits<double>::infinity();
  std::vector<double> d = {-1e300, -746.5, -746.0, -745.2, -745.0, -740.0, -709.5, -709.0,
                           -708.5, -708.0, -50.0,  0.0,    50.0,   708.0,  708.5,  709.5,
                           709.78, 709.79, 710.0,  710.5,  1e300,  -di,    di};
  std::vector<double> dx;
  for (int r = 0; r < 4; ++r) dx.insert(dx.end(), d.begin(), d.end());
  const auto nd = static_cast<int64_t>(dx.size());
  expect_libm_exp(dx, lz::exp(tensor<double>(dx, {nd})).to_vector<double>(), false);
  expect_libm_exp(dx, tensor<double>(dx, {nd}).sigmoid().to_vector<double>(), true);
}

TEST_F(CpuCompilerOpTable, LogOfZeroAndOfTheOtherSpecialInputsIsLibmsResult) {
  // Zeros amid ordinary values, several vectors' worth, so the vector code sees mixed lanes.
  const float fi = std::numeric_limits<float>::infinity();
  const float fn = std::numeric_limits<float>::quiet_NaN();
  const float fd = std::numeric_limits<float>::denorm_min();
  std::vector<float> f = {0.0f, -0.0f, 1.0f, 0.5f, 1e-30f, 3.0e38f, -1.0f, fd, fi, fn, 0.0f, 2.0f};
  std::vector<float> fx;
  for (int r = 0; r < 4; ++r) fx.insert(fx.end(), f.begin(), f.end());
  const std::vector<float> fgot =
      lz::log(tensor<float>(fx, {static_cast<int64_t>(fx.size())})).to_vector<float>();
  const std::vector<double> d = {
      0.0, -0.0, 1.0, 1e-300, 4.9e-324, -2.0, std::numeric_limits<double>::infinity(), 7.0};
  std::vector<double> dx;
  for (int r = 0; r < 4; ++r) dx.insert(dx.end(), d.begin(), d.end());
  const std::vector<double> dgot =
      lz::log(tensor<double>(dx, {static_cast<int64_t>(dx.size())})).to_vector<double>();
  auto check = [](auto x, auto got) {
    const auto want = std::log(x);
    const std::string where = "log(" + std::to_string(x) + ")";
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << where << " = " << got;
    } else if (std::isinf(want)) {
      EXPECT_EQ(got, want) << where;
    } else {
      using T = decltype(want);
      EXPECT_NEAR(got, want, 4 * std::numeric_limits<T>::epsilon() * std::fabs(want)) << where;
    }
  };
  for (size_t i = 0; i < fx.size(); ++i) check(fx[i], fgot[i]);
  for (size_t i = 0; i < dx.size(); ++i) check(dx[i], dgot[i]);
}

}  // namespace
}  // namespace lz
