// Running one program on the reference backend and on the cpu backend and comparing: the helpers
// of the cpu kernel tests (cpu_random_kernels_test.cpp, cpu_copy_kernels_test.cpp).
#pragma once
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/plan.h"
#include "exec/graph_executor.h"
#include "lazuli/lazuli.h"
#include "test_util.h"

namespace lz::cpu_agreement {

// A RuntimeTest that puts the configured backend back after a test switched it.
class BackendAgreementTest : public testing::RuntimeTest {
 protected:
  void TearDown() override {
    try {
      lz::wait();
    } catch (const lz::Error&) {
    }
    set_active_backend(config().backend);
    RuntimeTest::TearDown();
  }
};

// An output read back: floats as double, integers and bools as int64.
struct Out {
  Shape shape;
  std::vector<double> f;
  std::vector<int64_t> i;
};

inline Out read(const Tensor& t) {
  Out o;
  o.shape = t.shape();
  switch (t.dtype()) {
    case DType::Float16:
    case DType::BFloat16:
      for (float v : lz::cast(t, DType::Float32).to_vector<float>()) o.f.push_back(v);
      break;
    case DType::Float32:
      for (float v : t.to_vector<float>()) o.f.push_back(v);
      break;
    case DType::Float64:
      o.f = t.to_vector<double>();
      break;
    case DType::Int32:
      for (int32_t v : t.to_vector<int32_t>()) o.i.push_back(v);
      break;
    case DType::Int64:
      o.i = t.to_vector<int64_t>();
      break;
    case DType::Bool:
      for (bool v : t.to_vector<bool>()) o.i.push_back(v);
      break;
  }
  return o;
}

// Runs `program` on `backend` as one synced program.
inline std::vector<Out> run_on(const std::string& backend,
                               const std::function<std::vector<Tensor>()>& program) {
  lz::wait();
  set_active_backend(backend);
  std::vector<Out> out;
  try {
    std::vector<Tensor> ts = program();
    sync_tensors(ts);
    for (const Tensor& t : ts) out.push_back(read(t));
    lz::wait();
  } catch (...) {
    set_active_backend(config().backend);
    throw;
  }
  set_active_backend(config().backend);
  return out;
}

// The cpu plan of the program's outputs (built, not compiled or run).
inline cpu::Plan plan_of(const std::vector<Tensor>& ts) {
  std::vector<internal::TensorImplPtr> impls;
  for (const Tensor& t : ts) impls.push_back(t.impl());
  Roots roots = collect(impls, /*include_views=*/false);
  PostOrder po = post_order(roots.values);
  return cpu::build_plan(lowering_graph(roots, po), /*explain=*/false);
}

inline int count_steps(const cpu::Plan& p, cpu::PlanStep::Kind kind) {
  int n = 0;
  for (const cpu::PlanStep& s : p.steps) n += s.kind == kind;
  return n;
}
inline int fallbacks(const cpu::Plan& p) { return count_steps(p, cpu::PlanStep::Fallback); }

// Both backends give the same outputs, bit for bit (integers, bools and floats; NaN equals NaN).
inline void expect_identical(const std::function<std::vector<Tensor>()>& program,
                             const std::string& what) {
  std::vector<Out> ref = run_on("interp", program), got = run_on("cpu", program);
  ASSERT_EQ(ref.size(), got.size()) << what;
  for (size_t k = 0; k < ref.size(); ++k) {
    ASSERT_EQ(ref[k].shape, got[k].shape) << what << " output " << k;
    EXPECT_EQ(ref[k].i, got[k].i) << what << " output " << k;
    ASSERT_EQ(ref[k].f.size(), got[k].f.size()) << what << " output " << k;
    for (size_t e = 0; e < ref[k].f.size(); ++e) {
      if (std::isnan(ref[k].f[e]) && std::isnan(got[k].f[e])) continue;
      ASSERT_EQ(ref[k].f[e], got[k].f[e]) << what << " output " << k << " at " << e;
    }
  }
}

}  // namespace lz::cpu_agreement
