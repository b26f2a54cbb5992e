// CpuCompilerRowFusion: fusion rule 5b (lower/fusion.cpp). A reduction over the trailing dims whose
// uses all end in one elementwise kernel over its input's space becomes a stage of that kernel
// (Scheme::RowFused): softmax, log_softmax, layer_norm and rms_norm are one kernel reading their
// input once. Every plan is checked against the reference backend, and against the plan without
// the rule (LAZULI_FUSE_ROWS=0), whose values the rule must not change.
#include "cpu_compiler_util.h"

namespace lz {
namespace {

using namespace cpu_test;  // NOLINT(build/namespaces): the shared helpers of these test files

class CpuCompilerRowFusion : public CpuCompilerTest {
 protected:
  void TearDown() override {
    mutable_config().fuse_rows = true;
    CpuCompilerTest::TearDown();
  }
};

int row_kernels(const lower::Plan& p) {
  int n = 0;
  for (const lower::PlanStep& s : p.steps) {
    n += s.kind == lower::PlanStep::Kernel && p.kernels[s.kernel].spec.scheme == lower::Scheme::RowFused;
  }
  return n;
}

// The cpu backend's results with rule 5b on and off are the same bits: a stage folds its row in
// the order a row reduction kernel does.
void expect_rule_changes_no_bits(const std::function<std::vector<Tensor>()>& program) {
  mutable_config().fuse_rows = true;
  std::vector<Result> on = run_on("cpu", program);
  mutable_config().fuse_rows = false;
  clear_compile_cache();
  std::vector<Result> off = run_on("cpu", program);
  mutable_config().fuse_rows = true;
  clear_compile_cache();
  ASSERT_EQ(on.size(), off.size());
  for (size_t k = 0; k < on.size(); ++k) {
    EXPECT_EQ(on[k].i, off[k].i);
    ASSERT_EQ(on[k].f.size(), off[k].f.size());
    for (size_t e = 0; e < on[k].f.size(); ++e) {
      if (std::isnan(on[k].f[e]) && std::isnan(off[k].f[e])) continue;
      ASSERT_EQ(on[k].f[e], off[k].f[e]) << "output " << k << " at " << e;
    }
  }
}

Tensor layer_norm_of(const Tensor& x, const Tensor& w, const Tensor& b) {
  Tensor centered = x - mean(x, {-1}, true);
  Tensor var = mean(centered * centered, {-1}, true);
  return centered * rsqrt(var + 1e-5f) * w + b;
}

TEST_F(CpuCompilerRowFusion, SoftmaxOverTheLastDimIsOneKernelReadingItsInputOnce) {
  auto program = [] { return std::vector<Tensor>{nn::softmax(tensor<float>(ramp(32 * 50, 0.1f), {32, 50}), 1)}; };
  std::vector<Tensor> ts = program();
  lower::Plan p = plan_of(ts);
  EXPECT_EQ(count_steps(p).kernels, 1) << lower::describe_plan(p);
  EXPECT_EQ(row_kernels(p), 1);
  EXPECT_EQ(p.arena_bytes, 0) << "no intermediate buffer";
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_EQ(p.kernels[0].spec.inputs.size(), 1u) << p.kernels[0].spec.pseudo_c("k");
  expect_agree(program, 1e-6);
  expect_rule_changes_no_bits(program);
}

TEST_F(CpuCompilerRowFusion, LogSoftmaxAndLayerNormAndRmsNormAreOneKernelEach) {
  const Shape s = {24, 7, 40};
  const int64_t n = 24 * 7 * 40;
  std::vector<std::function<Tensor()>> cases = {
      [&] { return nn::log_softmax(tensor<float>(ramp(n, 0.05f), s), -1); },
      [&] {
        return layer_norm_of(tensor<float>(ramp(n, 0.03f), s), tensor<float>(ramp(40, 0.1f), {40}),
                             tensor<float>(ramp(40, 0.2f, 0.5f), {40}));
      },
      [&] { return nn::rms_norm(tensor<float>(ramp(n, 0.02f), s), {40}, tensor<float>(ramp(40), {40})); },
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    auto program = [&] { return std::vector<Tensor>{cases[c]()}; };
    std::vector<Tensor> ts = program();
    lower::Plan p = plan_of(ts);
    EXPECT_EQ(count_steps(p).kernels, 1) << "case " << c << "\n" << lower::describe_plan(p);
    EXPECT_EQ(row_kernels(p), 1) << "case " << c;
    expect_agree(program, 1e-5, "case " + std::to_string(c));
    expect_rule_changes_no_bits(program);
  }
}

TEST_F(CpuCompilerRowFusion, ALayerNormOverTwoTrailingDimsFoldsBoth) {
  auto program = [] {
    Tensor x = tensor<float>(ramp(6 * 5 * 33, 0.07f), {6, 5, 33});
    Tensor centered = x - mean(x, {1, 2}, true);
    return std::vector<Tensor>{centered * rsqrt(mean(centered * centered, {1, 2}, true) + 1e-5f)};
  };
  std::vector<Tensor> ts = program();
  lower::Plan p = plan_of(ts);
  EXPECT_EQ(count_steps(p).kernels, 1) << lower::describe_plan(p);
  EXPECT_EQ(row_kernels(p), 1);
  expect_agree(program, 1e-5);
  expect_rule_changes_no_bits(program);
}

TEST_F(CpuCompilerRowFusion, AReductionWithoutKeepdimBroadcastThroughViewsFolds) {
  auto program = [] {
    Tensor x = tensor<float>(ramp(16 * 30, 0.1f), {16, 30});
    Tensor m = reshape(amax(x, {1}), {16, 1});  // [16] -> [16, 1] -> broadcast over the row
    return std::vector<Tensor>{x - expand(m, {16, 30})};
  };
  std::vector<Tensor> ts = program();
  lower::Plan p = plan_of(ts);
  EXPECT_EQ(count_steps(p).kernels, 1) << lower::describe_plan(p);
  EXPECT_EQ(row_kernels(p), 1);
  expect_agree(program, 0);
}

TEST_F(CpuCompilerRowFusion, AReductionAlsoReadElsewhereStaysMaterialized) {
  // The max is a graph root too: it is computed once by its own kernel, and the softmax's
  // kernel reads it; the sum still folds.
  auto program = [] {
    Tensor x = tensor<float>(ramp(32 * 50, 0.1f), {32, 50});
    Tensor m = amax(x, {1}, true);
    Tensor e = exp(x - m);
    return std::vector<Tensor>{e / sum(e, {1}, true), m};
  };
  std::vector<Tensor> ts = program();
  lower::Plan p = plan_of(ts);
  EXPECT_EQ(count_steps(p).kernels, 2) << lower::describe_plan(p);
  EXPECT_EQ(row_kernels(p), 1);
  expect_agree(program, 1e-6);
  expect_rule_changes_no_bits(program);
}

// A gathered value with several users is materialized once (rule 9): its index checks would
// otherwise be recomputed in every user's kernel, and a kernel holding checks takes no row
// stages. T5's relative position bias, gathered and added to the attention scores, is read by
// the softmax's max, its sum and its output.
TEST_F(CpuCompilerRowFusion, AGatheredBiasReadBySoftmaxIsGatheredOnceAndTheSoftmaxFolds) {
  auto program = [] {
    Tensor scores = tensor<float>(ramp(2 * 16 * 16, 0.05f), {2, 16, 16});
    Tensor table = tensor<float>(ramp(8, 0.3f), {8});
    std::vector<int64_t> buckets(16 * 16);
    for (size_t i = 0; i < buckets.size(); ++i) buckets[i] = static_cast<int64_t>(i * 5 % 8);
    Tensor index = tensor<int64_t>(buckets, {256});
    Tensor bias = index_select(table, 0, index).reshape({1, 16, 16});
    return std::vector<Tensor>{nn::softmax(scores + bias, -1)};
  };
  std::vector<Tensor> ts = program();
  lower::Plan p = plan_of(ts);
  int checked_steps = 0;
  for (const lower::PlanStep& s : p.steps) checked_steps += !s.checks.empty();
  EXPECT_EQ(checked_steps, 1) << lower::describe_plan(p);
  EXPECT_EQ(row_kernels(p), 1) << lower::describe_plan(p);
  EXPECT_EQ(count_steps(p).kernels, 2) << lower::describe_plan(p);
  expect_agree(program, 1e-6);
}

TEST_F(CpuCompilerRowFusion, AReductionOverALeadingDimIsNotFolded) {
  auto program = [] { return std::vector<Tensor>{nn::softmax(tensor<float>(ramp(40 * 24, 0.1f), {40, 24}), 0)}; };
  std::vector<Tensor> ts = program();
  lower::Plan p = plan_of(ts);
  EXPECT_EQ(row_kernels(p), 0) << lower::describe_plan(p);
  expect_agree(program, 1e-6);
}

TEST_F(CpuCompilerRowFusion, RowsLongerThanTheLimitAreNotFolded) {
  // x - mean(x) over one row of 70000: one long row would run the outputs on one thread.
  auto program = [] {
    Tensor x = tensor<float>(ramp(70000, 2e-5f), {70000});
    return std::vector<Tensor>{x - mean(x)};
  };
  std::vector<Tensor> ts = program();
  lower::Plan p = plan_of(ts);
  EXPECT_EQ(row_kernels(p), 0) << lower::describe_plan(p);
  EXPECT_EQ(count_steps(p).kernels, 2);
  expect_agree(program, 1e-6);
}

TEST_F(CpuCompilerRowFusion, AReducedValueReadAcrossTheRowFallsBackToItsOwnKernel) {
  // s[j] is added to x[i, j]: the reduced value is indexed by the row's own dim, not broadcast
  // over it, so the stage cannot be computed per row; the plan gives it its own kernel again.
  auto program = [] {
    Tensor x = tensor<float>(ramp(8 * 8, 0.1f), {8, 8});
    return std::vector<Tensor>{x + sum(x, {1})};
  };
  std::vector<Tensor> ts = program();
  lower::Plan p = plan_of(ts);
  EXPECT_EQ(row_kernels(p), 0) << lower::describe_plan(p);
  EXPECT_EQ(count_steps(p).kernels, 2) << lower::describe_plan(p);
  EXPECT_NE(lower::describe_plan(p).find("does not fit"), std::string::npos) << lower::describe_plan(p);
  expect_agree(program, 1e-6);
}

TEST_F(CpuCompilerRowFusion, RowsOfOnePointAndASingleRowAgree) {
  std::vector<std::function<Tensor()>> cases = {
      [] { return nn::softmax(tensor<float>(ramp(16, 0.3f), {16, 1}), 1); },    // rows of one point
      [] { return nn::softmax(tensor<float>(ramp(300, 0.05f), {300}), 0); },    // one row, no row index
      [] { return nn::log_softmax(tensor<float>(ramp(2 * 3 * 1, 0.5f), {2, 3, 1}), -1); },
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    auto program = [&] { return std::vector<Tensor>{cases[c]()}; };
    std::vector<Tensor> ts = program();
    lower::Plan p = plan_of(ts);
    EXPECT_EQ(row_kernels(p), 1) << "case " << c << "\n" << lower::describe_plan(p);
    expect_agree(program, 1e-6, "case " + std::to_string(c));
  }
}

TEST_F(CpuCompilerRowFusion, IntegerAndFloat64StagesAgreeExactlyOrClosely) {
  auto ints = [] {
    std::vector<int64_t> v(12 * 9);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>((i * 37) % 23) - 11;
    Tensor x = tensor<int64_t>(v, {12, 9});
    return std::vector<Tensor>{x - amax(x, {1}, true) + sum(x, {1}, true)};
  };
  std::vector<Tensor> ts = ints();
  EXPECT_EQ(row_kernels(plan_of(ts)), 1) << lower::describe_plan(plan_of(ts));
  expect_agree(ints, 0);
  auto f64 = [] {
    return std::vector<Tensor>{nn::softmax(cast(tensor<float>(ramp(10 * 70, 0.2f), {10, 70}), DType::Float64), 1)};
  };
  expect_agree(f64, 1e-12);
}

TEST_F(CpuCompilerRowFusion, TheRuleSwitchedOffGivesTheMaterializedPlan) {
  auto program = [] { return std::vector<Tensor>{nn::softmax(tensor<float>(ramp(32 * 50, 0.1f), {32, 50}), 1)}; };
  mutable_config().fuse_rows = false;
  std::vector<Tensor> ts = program();
  lower::Plan p = plan_of(ts);
  EXPECT_EQ(row_kernels(p), 0) << lower::describe_plan(p);
  EXPECT_EQ(count_steps(p).kernels, 3) << lower::describe_plan(p);
}

TEST_F(CpuCompilerRowFusion, ALayerNormTrainingStepAgreesWithTheReference) {
  // Forward and backward in one program: the statistics are read by both passes (not folded
  // there), the backward's own row reductions may fold; every gradient agrees.
  auto program = [] {
    Tensor x = tensor<float>(ramp(12 * 48, 0.04f), {12, 48});
    Tensor w = tensor<float>(ramp(48, 0.05f, 0.2f), {48});
    Tensor b = tensor<float>(ramp(48, 0.01f), {48});
    set_requires_grad(x);
    set_requires_grad(w);
    set_requires_grad(b);
    Tensor y = layer_norm_of(x, w, b);
    Tensor loss = sum(nn::softmax(y, -1) * tensor<float>(ramp(12 * 48, 0.3f), {12, 48}));
    backward(loss);
    return std::vector<Tensor>{loss, grad(x), grad(w), grad(b)};
  };
  expect_agree(program, 1e-4);
}

// Layer norm with its mean and rstd returned (a training forward saves them for the backward):
// per-row values that are graph roots, stored once per row by the output's row kernel.
TEST_F(CpuCompilerRowFusion, LayerNormsSavedMeanAndRstdAreStoredByItsRowKernel) {
  auto program = [] {
    Tensor x = tensor<float>(ramp(2 * 32 * 64, 0.013f), {2, 32, 64});
    Tensor w = tensor<float>(ramp(64, 0.05f, 0.5f), {64});
    Tensor mean = sum(x, {-1}, true) / tensor<float>({64.0f}, {});  // a divisor uploaded as data
    Tensor d = x - mean;
    Tensor rstd = rsqrt(sum(d * d, {-1}, true) / 64.0 + 1e-5);
    return std::vector<Tensor>{d * rstd * w, mean, rstd};
  };
  std::vector<Tensor> ts = program();
  lower::Plan p = plan_of(ts);
  EXPECT_EQ(count_steps(p).kernels, 1) << lower::describe_plan(p);
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_EQ(p.kernels[0].spec.scheme, lower::Scheme::RowFused);
  EXPECT_EQ(p.kernels[0].spec.row_outs.size(), 2u) << p.kernels[0].spec.pseudo_c("k");
  EXPECT_EQ(p.steps[0].more_outputs.size(), 2u);
  expect_agree(program, 1e-5);
  expect_rule_changes_no_bits(program);  // the stored stats are the reductions' own values
}

TEST_F(CpuCompilerRowFusion, APerRowRootTheOutputDoesNotReadIsStoredToo) {
  // Softmax with its logsumexp beside it (attention's saved statistic): the weights' kernel
  // stores log(sum) + max per row although the weights never read it.
  auto program = [] {
    Tensor s = tensor<float>(ramp(24 * 40, 0.05f), {24, 40});
    Tensor m = amax(s, {-1}, true);
    Tensor e = exp(s - m);
    Tensor t = sum(e, {-1}, true);
    return std::vector<Tensor>{e / t, log(t) + m};
  };
  std::vector<Tensor> ts = program();
  lower::Plan p = plan_of(ts);
  EXPECT_EQ(count_steps(p).kernels, 1) << lower::describe_plan(p);
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_EQ(p.kernels[0].spec.row_outs.size(), 1u) << lower::describe_plan(p);
  expect_agree(program, 1e-5);
  expect_rule_changes_no_bits(program);
}

TEST_F(CpuCompilerRowFusion, APerRowRootAlsoReadByAnotherKernelKeepsItsOwnKernel) {
  // The mean is read by a kernel over another space too: its reduction's uses do not end in
  // one kernel, so nothing folds.
  auto program = [] {
    Tensor x = tensor<float>(ramp(16 * 24, 0.02f), {16, 24});
    Tensor mean = sum(x, {-1}, true) / 24.0;
    return std::vector<Tensor>{x - mean, mean, transpose(mean, 0, 1) * 2.0};
  };
  std::vector<Tensor> ts = program();
  lower::Plan p = plan_of(ts);
  EXPECT_EQ(row_kernels(p), 0) << lower::describe_plan(p);
  for (const lower::PlanKernel& k : p.kernels) EXPECT_TRUE(k.spec.row_outs.empty());
  expect_agree(program, 1e-5);
}

TEST_F(CpuCompilerRowFusion, StoredPerRowRootsWithoutKeepdimAndOverSize1DimsAgree) {
  // The statistics kept without their reduced dim ([B, T], read back through unsqueeze), and
  // spaces with size-1 dims (a batch of one, a row of one), which the loop nest drops or pads.
  for (Shape shape : {Shape{3, 5, 16}, Shape{1, 7, 16}, Shape{4, 1, 16}, Shape{6, 8, 1}}) {
    auto program = [shape] {
      Tensor x = tensor<float>(ramp(numel(shape), 0.07f), shape);
      const double n = static_cast<double>(shape.back());
      Tensor mean = sum(x, {-1}) / n;
      Tensor d = x - unsqueeze(mean, -1);
      Tensor rstd = rsqrt(sum(d * d, {-1}) / n + 1e-5);
      return std::vector<Tensor>{d * unsqueeze(rstd, -1), mean, rstd};
    };
    std::vector<Tensor> ts = program();
    lower::Plan p = plan_of(ts);
    SCOPED_TRACE(shape_text(shape) + "\n" + lower::describe_plan(p));
    if (shape.back() > 1) {
      EXPECT_EQ(count_steps(p).kernels, 1);
    }
    expect_agree(program, 1e-5);
    expect_rule_changes_no_bits(program);
  }
}

TEST_F(CpuCompilerRowFusion, APerRowRootOverAnotherMaterializedRootIsComputedByItsOwnKernel) {
  // m reads r2, a reduction that is a root of its own (materialized); o reads only m. Neither
  // can be computed from the row kernel's stages, so both get their own kernels and every root
  // is written (a stored root with no kernel to store it would read back garbage).
  auto program = [] {
    Tensor x = tensor<float>(ramp(8 * 16, 0.03f), {8, 16});
    Tensor r2 = amax(x, {-1}, true);
    Tensor m = sum(x, {-1}, true) / 16.0 + r2;
    Tensor o = m * 2.0;
    return std::vector<Tensor>{x - m, r2, m, o};
  };
  std::vector<Tensor> ts = program();
  lower::Plan p = plan_of(ts);
  for (const lower::PlanKernel& k : p.kernels)
    EXPECT_TRUE(k.spec.row_outs.empty()) << lower::describe_plan(p);
  expect_agree(program, 1e-5);
  expect_rule_changes_no_bits(program);
}

TEST_F(CpuCompilerRowFusion, ARowKernelThatDoesNotFitBuildsEachStoredRootOnce) {
  // The mean is also read transposed inside the row kernel (not as the row's broadcast): its
  // trial build fails, the stage and the stored roots get their own kernels back, each once,
  // the one after the kernel in order too (mean * 3).
  auto program = [] {
    Tensor x = tensor<float>(ramp(12 * 12, 0.02f), {12, 12});
    Tensor mean = sum(x, {-1}, true) / 12.0;
    Tensor y = x - mean + transpose(mean, 0, 1);
    return std::vector<Tensor>{y, mean, mean * 3.0};
  };
  std::vector<Tensor> ts = program();
  lower::Plan p = plan_of(ts);
  EXPECT_EQ(count_steps(p).kernels, 4) << lower::describe_plan(p);  // sum, mean, y, mean * 3
  std::vector<int> writes(p.values.size(), 0);
  for (const lower::PlanStep& s : p.steps) {
    ++writes[s.output];
    for (int v : s.more_outputs) ++writes[v];
  }
  for (size_t v = 0; v < writes.size(); ++v) {
    EXPECT_LE(writes[v], 1) << "value " << v << "\n" << lower::describe_plan(p);
  }
  expect_agree(program, 1e-5);
}

}  // namespace
}  // namespace lz

namespace lz {
namespace {

using namespace cpu_test;  // NOLINT(build/namespaces)

using CpuCompilerExtremes = CpuCompilerTest;

// max and min keep what the reference keeps: the first NaN of a row or column (here told apart
// by its sign) and the first of two equal zeros (-0 before +0), in row reductions (the integer
// key fold and its in-order redo), column reductions and rule 5b's stages.
TEST_F(CpuCompilerExtremes, MaxAndMinKeepTheFirstNaNAndTheFirstZeroAsTheReference) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // 4 rows x 6: a -NaN before a +NaN; -0 before +0 (max 0); +0 before -0; plain numbers.
  const std::vector<float> v = {1.f,  -nan, 3.f,  nan,  2.f,  0.5f,  //
                                -0.f, -1.f, 0.f,  -2.f, -3.f, -0.f,  //
                                0.f,  -0.f, -4.f, -0.f, 0.f,  -5.f,  //
                                7.f,  -7.f, 8.f,  2.5f, -8.f, 1.f};
  for (bool rows : {true, false}) {
    auto program = [&] {
      Tensor x = tensor<float>(v, {4, 6});
      // Columns: the same groups of 6 as the columns of a [6, 4] value (a column reduction).
      Tensor t = rows ? x : transpose(x, 0, 1) * 1.0f;
      const int64_t dim = rows ? 1 : 0;
      return std::vector<Tensor>{amax(t, {dim}), amin(t, {dim}), t - amax(t, {dim}, true)};
    };
    std::vector<Result> ref = run_on("interp", program), got = run_on("cpu", program);
    ASSERT_EQ(ref.size(), got.size());
    for (size_t k = 0; k < ref.size(); ++k) {
      ASSERT_EQ(ref[k].f.size(), got[k].f.size());
      for (size_t e = 0; e < ref[k].f.size(); ++e) {
        const double r = ref[k].f[e], g = got[k].f[e];
        EXPECT_EQ(std::isnan(r), std::isnan(g)) << (rows ? "rows" : "columns") << " output " << k << " at " << e;
        // Which NaN max/min keep shows in its sign (outputs 0 and 1); the sign of a NaN that
        // went through arithmetic (output 2's subtraction) is the hardware's and the compiler's
        // choice (a Debug build's reference kernel gives +NaN where the Release one gives -NaN).
        if (k < 2 || !std::isnan(r)) {
          EXPECT_EQ(std::signbit(r), std::signbit(g)) << (rows ? "rows" : "columns") << " output " << k << " at " << e;
        }
        if (!std::isnan(r)) {
          EXPECT_EQ(r, g);
        }
      }
    }
  }
}

}  // namespace
}  // namespace lz
