// CpuCompilerFusion: the cpu backend's plans really fuse (kernels counted in lz::lower::build_plan's
// plan), and fused programs agree with the reference backend.
#include "cpu_compiler_util.h"

namespace lz {
namespace {

using namespace cpu_test;  // NOLINT(build/namespaces): the shared helpers of these test files

// ---------------------------------------------------------------------------------------------
// Fusion: kernels counted in the plan
// ---------------------------------------------------------------------------------------------

using CpuCompilerFusion = CpuCompilerTest;

TEST_F(CpuCompilerFusion, ASixOpElementwiseChainIsOneKernel) {
  auto program = [] {
    Tensor x = tensor<float>(ramp(64 * 33), {64, 33});
    return std::vector<Tensor>{sigmoid(relu(exp(x) * 2.5f - x) + 1.5f)};  // exp mul sub relu add sigmoid
  };
  std::vector<Tensor> ts = program();
  lower::Plan p = plan_of(ts);
  StepCounts c = count_steps(p);
  EXPECT_EQ(c.kernels, 1) << lower::describe_plan(p);
  EXPECT_EQ(c.fallbacks + c.library, 0);
  ASSERT_EQ(p.kernels.size(), 1u);
  int ops = 0;
  for (const lower::KExpr& e : p.kernels[0].spec.exprs) {
    if (e.op != ir::OpKind::DeviceData && e.op != ir::OpKind::Constant) ++ops;
  }
  EXPECT_GE(ops, 6) << p.kernels[0].spec.pseudo_c("k");
  EXPECT_EQ(p.arena_bytes, 0) << "no intermediate buffer";
  expect_agree(program);
}

TEST_F(CpuCompilerFusion, SoftmaxIsAtMostThreeKernels) {
  auto program = [] { return std::vector<Tensor>{nn::softmax(tensor<float>(ramp(32 * 50, 0.1f), {32, 50}), 1)}; };
  std::vector<Tensor> ts = program();
  lower::Plan p = plan_of(ts);
  StepCounts c = count_steps(p);
  EXPECT_LE(c.kernels, 3) << lower::describe_plan(p);
  EXPECT_EQ(c.fallbacks + c.library, 0) << lower::describe_plan(p);
  expect_agree(program);
}

TEST_F(CpuCompilerFusion, SoftmaxOverTheLeadingDimIsAtMostThreeKernels) {
  auto program = [] { return std::vector<Tensor>{nn::softmax(tensor<float>(ramp(40 * 24, 0.1f), {40, 24}), 0)}; };
  std::vector<Tensor> ts = program();
  lower::Plan p = plan_of(ts);
  EXPECT_LE(count_steps(p).kernels, 3) << lower::describe_plan(p);
  EXPECT_EQ(count_steps(p).fallbacks, 0);
  expect_agree(program);
}

TEST_F(CpuCompilerFusion, AReductionFusesItsElementwiseProducer) {
  for (IntList dims : {IntList{}, IntList{1}, IntList{0}}) {
    auto program = [&] {
      Tensor x = tensor<float>(ramp(48 * 40), {48, 40});
      return std::vector<Tensor>{sum(x * x + 1, dims)};
    };
    std::vector<Tensor> ts = program();
    lower::Plan p = plan_of(ts);
    EXPECT_EQ(p.steps.size(), 1u) << "dims " << shape_text(dims) << "\n" << lower::describe_plan(p);
    EXPECT_EQ(count_steps(p).kernels, 1);
    EXPECT_EQ(p.arena_bytes, 0);
    expect_agree(program, 1e-4);
  }
}

TEST_F(CpuCompilerFusion, ATransposeFeedingAnAddIsNotCopied) {
  auto program = [] {
    Tensor x = tensor<float>(ramp(16 * 24), {16, 24});
    Tensor y = tensor<float>(ramp(24 * 16, 0.02f), {24, 16});
    return std::vector<Tensor>{transpose(x, 0, 1) + y};
  };
  std::vector<Tensor> ts = program();
  lower::Plan p = plan_of(ts);
  EXPECT_EQ(p.steps.size(), 1u) << lower::describe_plan(p);
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_EQ(p.kernels[0].spec.inputs.size(), 2u) << "x read in place through strides";
  EXPECT_EQ(p.arena_bytes, 0);
  expect_agree(program);
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
  lower::Plan p = plan_of(ts);
  EXPECT_EQ(p.steps.size(), 1u) << lower::describe_plan(p);
  expect_agree(program);
}

TEST_F(CpuCompilerFusion, AMatmulIsALibraryCallStep) {
  auto program = [] {
    Tensor a = tensor<float>(ramp(8 * 16), {8, 16});
    Tensor w = tensor<float>(ramp(16 * 4, 0.02f), {16, 4});
    Tensor b = tensor<float>(ramp(4), {4});
    return std::vector<Tensor>{relu(matmul(a, w) + b)};
  };
  std::vector<Tensor> ts = program();
  lower::Plan p = plan_of(ts);
  StepCounts c = count_steps(p);
  EXPECT_EQ(c.library, 1) << lower::describe_plan(p);
  EXPECT_EQ(c.kernels, 1);
  EXPECT_EQ(c.fallbacks, 0);
  bool found = false;
  for (const lower::PlanStep& s : p.steps) found = found || (s.kind == lower::PlanStep::MatMul && s.op == ir::OpKind::MatMul);
  EXPECT_TRUE(found);
  expect_agree(program, 1e-4);
}

// A library call is counted as one, not as a fallback: "no fallbacks" means no reference kernel.
TEST_F(CpuCompilerFusion, ConvolutionAndPoolingAreLibraryStepsNotFallbacks) {
  Tensor x = tensor<float>(ramp(1 * 2 * 6 * 6), {1, 2, 6, 6});
  Tensor w = tensor<float>(ramp(3 * 2 * 3 * 3), {3, 2, 3, 3});
  std::vector<Tensor> ts{nn::max_pool2d(relu(nn::conv2d(x, w)), {2, 2})};
  const lower::Plan p = plan_of(ts);
  const StepCounts c = count_steps(p);
  EXPECT_EQ(c.library, 2) << lower::describe_plan(p);
  EXPECT_EQ(c.fallbacks, 0) << lower::describe_plan(p);
  EXPECT_EQ(c.library + c.fallbacks + c.kernels, static_cast<int>(p.steps.size()));
}

TEST_F(CpuCompilerFusion, AValueWithManyOpsAndTwoUsersIsMaterializedOnce) {
  auto program = [] {
    Tensor x = tensor<float>(ramp(30 * 30), {30, 30});
    Tensor h = x;
    for (int i = 0; i < 12; ++i) h = tanh(h * 1.5f + 0.25f);  // 36 ops
    return std::vector<Tensor>{sum(h, {1}), h * h};
  };
  std::vector<Tensor> ts = program();
  lower::Plan p = plan_of(ts);
  // h is computed once (as the root h*h reads it or as a scratch value), not once per user.
  int tanh_count = 0;
  for (const lower::PlanKernel& k : p.kernels) {
    for (const lower::KExpr& e : k.spec.exprs) tanh_count += e.op == ir::OpKind::Tanh;
  }
  EXPECT_EQ(tanh_count, 12) << lower::describe_plan(p);
  expect_agree(program, 1e-4);
}

// The ATen table records a view chain once per use: two products reading one value through
// their own reshapes (split, then merged) must not compute it twice (rule 2). GPT-2's logits
// gradient and ALBERT's Q, K and V inputs did.
TEST_F(CpuCompilerFusion, AValueReshapedByTwoChainsForTwoProductsIsComputedOnce) {
  auto program = [] {
    Tensor x = tensor<float>(ramp(32 * 16, 0.01f), {32, 16});
    Tensor w1 = tensor<float>(ramp(16 * 8, 0.02f), {16, 8});
    Tensor w2 = tensor<float>(ramp(16 * 4, 0.03f), {16, 4});
    Tensor v = exp(x) + 0.5f;
    Tensor a = v.reshape({4, 8, 16}).reshape({32, 16});
    Tensor b = v.reshape({4, 8, 16}).reshape({32, 16});
    return std::vector<Tensor>{matmul(a, w1), matmul(b, w2)};
  };
  std::vector<Tensor> ts = program();
  lower::Plan p = plan_of(ts);
  EXPECT_EQ(ops_computed(p, ir::OpKind::Exp), 1) << lower::describe_plan(p);
  EXPECT_EQ(count_steps(p).kernels, 1) << lower::describe_plan(p);
  expect_agree(program, 1e-4);
}

// The merging reshape of such a chain is an alias of the value's buffer, whatever the value
// cost to compute: with two users it is not materialized as a kernel of its own (which cannot
// express a merge of dims).
TEST_F(CpuCompilerFusion, AMergingReshapeOfAnExpensiveValueWithTwoUsersIsAnAlias) {
  auto program = [] {
    Tensor x = tensor<float>(ramp(32 * 16, 0.01f), {32, 16});
    Tensor w = tensor<float>(ramp(16 * 8, 0.02f), {16, 8});
    Tensor v = x;
    for (int i = 0; i < 4; ++i) v = tanh(v * 1.5f + 0.25f);  // 12 ops: past rule 3's limit
    Tensor a = v.reshape({4, 8, 16}).reshape({32, 16});
    return std::vector<Tensor>{matmul(a, w), a * 2.0f};
  };
  std::vector<Tensor> ts = program();
  lower::Plan p = plan_of(ts);
  EXPECT_EQ(ops_computed(p, ir::OpKind::Tanh), 4) << lower::describe_plan(p);
  expect_agree(program, 1e-4);
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

// A fold whose expression calls a math function keeps one vector accumulator (interleaving
// spilled each around the call, RESULTS.md 33); other folds stay interleaved. Values: the op
// tests against the reference backend.
TEST_F(CpuCompilerFusion, AFoldOverAMathCallIsNotInterleavedAndOtherFoldsAre) {
  set_active_backend("cpu");
  Tensor x = tensor<float>(ramp(64 * 100), {64, 100});
  const std::string marker = "llvm.loop.interleave.count";
  const std::string math = debug::dump_kernels({sum(lz::exp(x), {1})}, /*llvm_ir=*/true);
  EXPECT_NE(math.find(marker), std::string::npos) << math;
  const std::string plain = debug::dump_kernels({sum(x * x, {1})}, /*llvm_ir=*/true);
  EXPECT_EQ(plain.find(marker), std::string::npos) << plain;
  // A row kernel whose second stage folds x * x after a stage over exp: only the first is marked.
  const std::string rows =
      debug::dump_kernels({x * sum(lz::exp(x), {1}, true) + sum(x * x, {1}, true)}, true);
  size_t n = 0;
  for (size_t at = rows.find(marker); at != std::string::npos; at = rows.find(marker, at + 1)) ++n;
  EXPECT_EQ(n, 1u) << rows;
}

TEST_F(CpuCompilerFusion, AChainPastTheKernelSizeLimitSplitsAndStillAgrees) {
  auto program = [] {
    Tensor x = tensor<float>(ramp(40 * 24), {40, 24});
    Tensor h = x;
    for (int i = 0; i < 40; ++i) h = relu(h * 0.75f + 0.125f) - 0.0625f;  // 160 ops
    return std::vector<Tensor>{h};
  };
  std::vector<Tensor> ts = program();
  lower::Plan p = plan_of(ts);
  EXPECT_GE(count_steps(p).kernels, 2) << lower::describe_plan(p);
  EXPECT_NE(lower::describe_plan(p).find("(rule 6)"), std::string::npos);
  for (const lower::PlanKernel& k : p.kernels) {
    int ops = 0;
    for (const lower::KExpr& e : k.spec.exprs) ops += e.op != ir::OpKind::DeviceData && e.op != ir::OpKind::Constant;
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
        lower::Plan p = plan_of(ts);
        EXPECT_EQ(p.steps.size(), 1u) << "a transposed operand was copied\n" << lower::describe_plan(p);
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

// A product transposed and transposed back (a Linear's weight gradient on the lazy device: the
// product computes x^T g, and the gradient is its transpose's transpose) is the product itself:
// neither computed transposed, nor copied back when it is flattened (as DDP's bucket reads it).
TEST_F(CpuCompilerFusion, AProductTransposedBackIsTheProductWithoutACopy) {
  auto program = [] {
    Tensor x = tensor<float>(ramp(32 * 12, 0.01f), {32, 12});
    Tensor g = tensor<float>(ramp(32 * 8, 0.02f), {32, 8});
    Tensor p = matmul(transpose(x, 0, 1), g);  // [12, 8]
    Tensor back = transpose(transpose(p, 0, 1), 0, 1);
    return std::vector<Tensor>{reshape(back, {-1}) * 2};
  };
  expect_agree(program, 1e-5, "transposed back");
  const lower::Plan p = plan_of(program());
  EXPECT_EQ(p.steps.size(), 2u) << lower::describe_plan(p);  // the product, then the kernel
  EXPECT_EQ(lower::describe_plan(p).find("computes its transpose"), std::string::npos)
      << lower::describe_plan(p);
}

// Rule 7b: a linear layer's bias, and a residual, are added by the product's call (sgemm's
// beta = 1 over C filled with them), where the sum is materialized: one step, not a product and
// an add. The sum may be over a reshape of the product (a [2, 3, 5] activation of a [6, 5]
// product).
TEST_F(CpuCompilerFusion, ALinearLayersBiasIsAddedByTheProductsCall) {
  auto x = [] { return tensor<float>(ramp(6 * 4, 0.05f), {6, 4}); };
  auto w = [] { return tensor<float>(ramp(4 * 5, 0.03f, -0.2f), {4, 5}); };
  auto b = [] { return tensor<float>(ramp(5, 0.5f, -1.0f), {5}); };
  // [m, k] x [k, n] + bias + residual.
  auto blocks = [](int64_t m, int64_t k, int64_t n) {
    Tensor a = tensor<float>(ramp(m * k, 0.2f / static_cast<float>(m * k)), {m, k});
    Tensor v = tensor<float>(ramp(k * n, 1.0f / static_cast<float>(k * n), -0.5f), {k, n});
    Tensor r = tensor<float>(ramp(m * n, 0.1f / static_cast<float>(m * n)), {m, n});
    return std::vector<Tensor>{matmul(a, v) + tensor<float>(ramp(n, 0.01f), {n}) + r};
  };
  std::vector<std::pair<std::string, std::function<std::vector<Tensor>()>>> cases = {
      {"2-D", [&] { return std::vector<Tensor>{matmul(x(), w()) + b()}; }},
      {"bias first, reshaped",
       [&] {
         return std::vector<Tensor>{b() + reshape(matmul(x(), w()), {2, 3, 5})};
       }},
      {"transposed weight",
       [&] {
         Tensor wt = tensor<float>(ramp(5 * 4, 0.03f, -0.2f), {5, 4});
         return std::vector<Tensor>{matmul(x(), transpose(wt, 0, 1)) + b()};
       }},
      {"no rows",
       [&] {
         return std::vector<Tensor>{matmul(tensor<float>({}, {0, 4}), w()) + b()};
       }},
      // A residual: a dense value of the sum's shape (a transformer's output projection).
      {"bias and residual",
       [&] {
         Tensor r = tensor<float>(ramp(30, 0.1f), {2, 3, 5});
         return std::vector<Tensor>{reshape(matmul(x(), w()), {2, 3, 5}) + b() + r};
       }},
      {"residual only",
       [&] {
         return std::vector<Tensor>{matmul(x(), w()) + tensor<float>(ramp(30, 0.1f), {6, 5})};
       }},
      {"another product as the residual",
       [&] { return std::vector<Tensor>{matmul(x(), w()) + matmul(x(), w() * 2.0f) + b()}; }},
      // Big enough for the pool to cut C: in blocks of rows, and (a short wide C) of columns,
      // each block filled with its part of the bias and residual.
      {"row blocks, bias and residual", [&] { return blocks(256, 64, 128); }},
      {"column blocks, bias and residual", [&] { return blocks(8, 1024, 256); }},
  };
  for (auto& [name, program] : cases) {
    SCOPED_TRACE(name);
    expect_agree(program, 1e-5, name);
    const lower::Plan p = plan_of(program());
    ASSERT_FALSE(p.steps.empty());
    const lower::PlanStep& last = p.steps.back();  // the product computing the sum
    EXPECT_TRUE(last.kind == lower::PlanStep::MatMul && (last.bias || last.residual))
        << lower::describe_plan(p);
    EXPECT_EQ(last.residual, name.find("residual") != std::string::npos);
    EXPECT_EQ(ops_computed(p, lz::ir::OpKind::Add), 0) << lower::describe_plan(p);
  }
  // k = 0: the bias alone.
  auto k0 = [&] {
    return std::vector<Tensor>{matmul(tensor<float>({}, {3, 0}), tensor<float>({}, {0, 5})) + b()};
  };
  expect_agree(k0, 1e-6, "k = 0");
  EXPECT_TRUE(plan_of(k0()).steps.back().bias);
}

// Not where the product is read elsewhere, the add fuses into its reader, or an addend is neither
// a row broadcast over the rows nor a materialized value of the sum's shape.
TEST_F(CpuCompilerFusion, ABiasIsAddedByTheProductsCallOnlyWhereTheAddIsItsOnlyReader) {
  auto x = [] { return tensor<float>(ramp(6 * 4, 0.05f), {6, 4}); };
  auto w = [] { return tensor<float>(ramp(4 * 5, 0.03f, -0.2f), {4, 5}); };
  auto b = [] { return tensor<float>(ramp(5, 0.5f, -1.0f), {5}); };
  std::vector<std::pair<std::string, std::function<std::vector<Tensor>()>>> cases = {
      {"product also returned",
       [&] {
         Tensor p = matmul(x(), w());
         return std::vector<Tensor>{p + b(), p};
       }},
      {"add fused into its reader",
       [&] { return std::vector<Tensor>{lz::tanh(matmul(x(), w()) + b())}; }},
      {"a column, not a row",
       [&] {
         Tensor c = tensor<float>(ramp(6, 0.5f), {6, 1});
         return std::vector<Tensor>{matmul(x(), w()) + c};
       }},
      {"a computed addend",
       [&] {
         Tensor r = tensor<float>(ramp(30, 0.1f), {6, 5});
         return std::vector<Tensor>{matmul(x(), w()) + r * 2.0f};
       }},
  };
  for (auto& [name, program] : cases) {
    SCOPED_TRACE(name);
    expect_agree(program, 1e-5, name);
    const lower::Plan p = plan_of(program());
    for (const lower::PlanStep& s : p.steps) {
      EXPECT_FALSE(s.bias || s.residual) << lower::describe_plan(p);
    }
  }
}

// Rule 7: math (a libm call) that a batched product reads transposed is computed in order, then
// copied transposed: the kernel writing it transposed could not vectorize exp (attention's
// backward recomputing a causal softmax, 7x slower). Cheap arithmetic stays fused into the copy.
TEST_F(CpuCompilerFusion, MathABatchedProductReadsTransposedIsComputedInOrderThenMoved) {
  for (bool math : {true, false}) {
    SCOPED_TRACE(math ? "exp" : "arithmetic");
    auto program = [math] {
      Tensor s = tensor<float>(ramp(2 * 3 * 8 * 8, 0.01f, -1.0f), {2, 3, 8, 8});
      Tensor g = tensor<float>(ramp(2 * 3 * 8 * 5, 0.02f), {2, 3, 8, 5});
      Tensor p = math ? lz::exp(s * 0.5f - 1.0f) : s * 0.5f - 1.0f;
      return std::vector<Tensor>{matmul(permute(p, {0, 1, 3, 2}), g)};
    };
    expect_agree(program, 1e-5, "transposed math");
    const lower::Plan p = plan_of(program());
    const std::string plan = lower::describe_plan(p);
    // exp in order, its transposed copy, the product; or the arithmetic fused into the copy.
    EXPECT_EQ(p.steps.size(), math ? 3u : 2u) << plan;
    EXPECT_EQ(plan.find("its math runs in order") != std::string::npos, math) << plan;
  }
}

// Not where the read is in order after all: permutes composing to the identity, a permute
// moving only a size-1 dim, or a broadcast of the math between (rule 4 recomputes it).
TEST_F(CpuCompilerFusion, MathReadInOrderThroughPermutesStaysInOneKernel) {
  auto g = [] { return tensor<float>(ramp(2 * 8 * 5, 0.02f), {2, 8, 5}); };
  auto e = [] { return lz::exp(tensor<float>(ramp(2 * 8 * 8, 0.01f, -1.0f), {2, 8, 8}) * 0.5f); };
  std::vector<std::pair<std::string, std::function<std::vector<Tensor>()>>> cases = {
      {"transposed back",
       [&] {
         return std::vector<Tensor>{matmul(permute(permute(e(), {0, 2, 1}), {0, 2, 1}), g())};
       }},
      {"a size-1 dim moved",
       [&] {
         Tensor v = lz::exp(tensor<float>(ramp(2 * 8, 0.01f), {2, 8, 1}));
         return std::vector<Tensor>{
             matmul(permute(v, {0, 2, 1}), tensor<float>(ramp(2 * 8 * 3, 0.1f), {2, 8, 3}))};
       }},
      {"broadcast between",
       [&] {
         Tensor v = lz::exp(tensor<float>(ramp(2 * 8, 0.01f), {2, 1, 8}));
         return std::vector<Tensor>{matmul(permute(expand(v, {2, 8, 8}), {0, 2, 1}), g())};
       }},
  };
  for (auto& [name, program] : cases) {
    SCOPED_TRACE(name);
    expect_agree(program, 1e-5, name.c_str());
    const std::string plan = lower::describe_plan(plan_of(program()));
    EXPECT_EQ(plan.find("its math runs in order"), std::string::npos) << plan;
  }
}

// An elementwise kernel whose innermost dim is tiny under a longer one (a complex value's
// (real, imaginary) pair as [..., 2], broadcast over that pair) loops the longer dim innermost:
// with the pair innermost, a [2, 32, 64, 2] kernel took 20 us, 2.4 ns a value.
TEST_F(CpuCompilerFusion, ATinyInnermostDimLoopsOutsideALongerOne) {
  // The output; its operand is the same with a last dim of 1, broadcast over the last dim.
  const Shape cases[] = {{2, 32, 64, 2}, {3, 40, 3}, {50, 7}, {2, 5, 2}, {40, 8}, {3, 2}};
  for (const Shape& big : cases) {
    SCOPED_TRACE(shape_str(big));
    Shape small = big;
    small.back() = 1;
    auto program = [&] {
      Tensor x = tensor<float>(ramp(numel(small), 0.01f, -0.3f), small);
      Tensor pair = lz::arange(0, big.back(), 1, DType::Float32);
      return std::vector<Tensor>{x * pair + 1.0f, where(pair == 0.0f, x, zeros({1}))};
    };
    expect_agree(program, 1e-6, "tiny inner dim");
    const lower::Plan p = plan_of(program());
    ASSERT_FALSE(p.steps.empty());
    const lower::PlanStep& step = p.steps[0];
    const int rank = p.kernels[static_cast<size_t>(step.kernel)].spec.rank;
    ASSERT_GE(rank, 1);
    // The leading dims collapse into one loop; it goes inside a tiny last dim 4x shorter.
    const int64_t inner = step.args[static_cast<size_t>(rank - 1)];
    const int64_t lead = numel(big) / big.back();
    const bool swapped = big.back() < 8 && lead >= 4 * big.back();
    EXPECT_EQ(inner, swapped ? lead : big.back()) << lower::describe_plan(p);
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

}  // namespace
}  // namespace lz
