// LowerTarget: the planner asks the target (lower/target.h) what it compiles and which library
// calls it has, instead of assuming the cpu backend's answers.
#include "cpu_compiler_util.h"

namespace lz {
namespace {

using namespace cpu_test;  // NOLINT(build/namespaces): the shared helpers of these test files

using LowerTarget = CpuCompilerTest;

TEST_F(LowerTarget, AnElementwiseOpTheCodeGeneratorDoesNotCompileIsAFallback) {
  lower::Target t = cpu::cpu_target();
  t.compiles_elementwise = [](const ir::Node& n) { return n.op != ir::OpKind::Exp; };
  Tensor x = tensor<float>(ramp(6 * 7), {6, 7});
  std::vector<Tensor> ts{exp(x * 2.0f) + 1.0f};
  EXPECT_EQ(fallbacks(plan_of(ts)), 0) << lower::describe_plan(plan_of(ts));
  const lower::Plan p = plan_of(ts, t);
  EXPECT_EQ(fallbacks(p), 1) << lower::describe_plan(p);
  EXPECT_EQ(count_steps(p, lower::PlanStep::Kernel), 2) << lower::describe_plan(p);
}

TEST_F(LowerTarget, TransposesFoldIntoMatrixProductsOnlyOfTheTargetsDtype) {
  Tensor a = transpose(tensor<float>(ramp(5 * 4), {5, 4}), 0, 1);
  Tensor b = tensor<float>(ramp(5 * 3), {5, 3});
  std::vector<Tensor> ts{matmul(a, b)};
  EXPECT_EQ(plan_of(ts).steps.size(), 1u) << lower::describe_plan(plan_of(ts));
  lower::Target t = cpu::cpu_target();
  t.matmul_transpose_dtype.reset();
  const lower::Plan p = plan_of(ts, t);
  EXPECT_EQ(count_steps(p, lower::PlanStep::MatMul), 1) << lower::describe_plan(p);
  EXPECT_EQ(count_steps(p, lower::PlanStep::Kernel), 1) << "the transpose is copied\n"
                                                      << lower::describe_plan(p);
}

TEST_F(LowerTarget, ConvolutionsAreLibraryCallsOnlyWhereTheTargetHasALibrary) {
  Tensor x = tensor<float>(ramp(1 * 2 * 5 * 5), {1, 2, 5, 5});
  Tensor w = tensor<float>(ramp(3 * 2 * 3 * 3), {3, 2, 3, 3});
  std::vector<Tensor> ts{nn::conv2d(x, w)};
  const lower::Plan cpu = plan_of(ts);
  EXPECT_EQ(count_steps(cpu, lower::PlanStep::Library), 1) << lower::describe_plan(cpu);
  EXPECT_NE(lower::describe_plan(cpu).find("oneDNN"), std::string::npos);
  lower::Target t = cpu::cpu_target();
  t.convolution_library.clear();
  const lower::Plan p = plan_of(ts, t);
  EXPECT_EQ(count_steps(p, lower::PlanStep::Library), 0) << lower::describe_plan(p);
  EXPECT_EQ(fallbacks(p), 1) << lower::describe_plan(p);
}

TEST_F(LowerTarget, PoolingIsALibraryCallOnlyWhereTheTargetHasOne) {
  Tensor x = tensor<float>(ramp(2 * 3 * 6 * 6), {2, 3, 6, 6});
  std::vector<Tensor> ts{nn::max_pool2d(x, {2, 2}), nn::avg_pool2d(x, {3, 3})};
  const lower::Plan cpu = plan_of(ts);
  EXPECT_EQ(count_steps(cpu, lower::PlanStep::Library), 2) << lower::describe_plan(cpu);
  lower::Target t = cpu::cpu_target();
  t.pooling_library.clear();
  const lower::Plan p = plan_of(ts, t);
  EXPECT_EQ(count_steps(p, lower::PlanStep::Library), 0) << lower::describe_plan(p);
  EXPECT_EQ(fallbacks(p), 2) << lower::describe_plan(p);
}

TEST_F(LowerTarget, RowsFuseWithTheirReductionsUpToTheTargetsRowLength) {
  Tensor x = tensor<float>(ramp(4 * 100), {4, 100});
  std::vector<Tensor> ts{nn::softmax(x, 1)};
  const lower::Plan cpu = plan_of(ts);
  EXPECT_EQ(count_steps(cpu, lower::PlanStep::Kernel), 1) << lower::describe_plan(cpu);
  lower::Target t = cpu::cpu_target();
  t.row_fusion_max_elements = 99;
  const lower::Plan p = plan_of(ts, t);
  EXPECT_GT(count_steps(p, lower::PlanStep::Kernel), 1) << "the reductions get kernels\n"
                                                       << lower::describe_plan(p);
}

TEST_F(LowerTarget, AGraphNeedingAFallbackIsRefusedWhereReferenceKernelsCannotRun) {
  lower::Target t = cpu::cpu_target();
  t.name = "device";
  t.host_fallbacks = false;
  Tensor x = tensor<float>(ramp(4 * 4), {4, 4});
  std::vector<Tensor> fused{x * 3.0f + 1.0f};
  EXPECT_EQ(fallbacks(plan_of(fused, t)), 0);
  std::vector<Tensor> ts{remainder(x, 3.0f)};
  try {
    plan_of(ts, t);
    FAIL() << "planned a fallback for a target without host reference kernels";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("device backend: no kernel for"), std::string::npos)
        << e.what();
  }
}

TEST_F(LowerTarget, EachKernelStepCarriesTheLaunchItsTargetChose) {
  Tensor x = tensor<float>(ramp(64 * 1000), {64, 1000});
  std::vector<Tensor> ts{x * 2.0f, sum(x, {1})};
  lower::Target t = cpu::cpu_target();
  // A target that records what the planner told it, to see every fact arrive.
  t.launch = [](const lower::KernelExtent& k) {
    return lower::Launch{
        {k.points, k.folded, k.whole_rows ? 1 : 0, static_cast<int64_t>(dtype_size(k.out_dtype))}};
  };
  const lower::Plan cpu = plan_of(ts), p = plan_of(ts, t);
  ASSERT_EQ(count_steps(p, lower::PlanStep::Kernel), 2) << lower::describe_plan(p);
  ASSERT_EQ(p.steps.size(), cpu.steps.size());
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const lower::PlanStep& s = p.steps[i];
    const bool reduces = s.launch.v[1] != 1;
    EXPECT_EQ(s.launch, (lower::Launch{{s.range, reduces ? 1000 : 1, reduces ? 1 : 0, 4}}))
        << lower::describe_plan(p);
    EXPECT_EQ(s.range, reduces ? 64 : 64000);
    EXPECT_EQ(p.kernels[s.kernel].name, cpu.kernels[cpu.steps[i].kernel].name)
        << "the launch is not the kernel's structure";
  }
}

TEST_F(LowerTarget, TheCpuTargetCutsKernelsAtWholeCacheLinesAndRowsWhole) {
  cpu::CpuLaunch elementwise =
      cpu::cpu_launch_of(cpu::cpu_launch({64000, 1, false, DType::Float32}));
  EXPECT_EQ(elementwise.grain, cpu::kGrainElements);
  EXPECT_EQ(elementwise.align, 16);  // 64-byte lines of float32
  EXPECT_EQ(cpu::cpu_launch_of(cpu::cpu_launch({64000, 1, false, DType::Bool})).align, 64);
  EXPECT_EQ(cpu::cpu_launch_of(cpu::cpu_launch({64000, 1, false, DType::Float64})).align, 16)
      << "at least 16 elements";
  cpu::CpuLaunch rows = cpu::cpu_launch_of(cpu::cpu_launch({64, 1000, true, DType::Float32}));
  EXPECT_EQ(rows.grain, cpu::kGrainElements / 1000) << "a piece folds as many points";
  EXPECT_EQ(rows.align, 1);
  EXPECT_EQ(cpu::cpu_launch_of(cpu::cpu_launch({1, 1 << 20, true, DType::Float32})).grain, 1);
}

TEST_F(LowerTarget, TheCpuTargetCutsKernelsThatCallMathIntoFewerPointsPerPiece) {
  const int64_t w = 1 + cpu::kMathCallWeight;
  EXPECT_EQ(cpu::cpu_launch_of(cpu::cpu_launch({64000, 1, false, DType::Float32, 1})).grain,
            cpu::kGrainElements / w);
  EXPECT_EQ(cpu::cpu_launch_of(cpu::cpu_launch({64000, 1, false, DType::Float32, 2})).grain,
            cpu::kGrainElements / (1 + 2 * cpu::kMathCallWeight));
  EXPECT_EQ(cpu::cpu_launch_of(cpu::cpu_launch({64, 1000, true, DType::Float32, 1})).grain,
            cpu::kGrainElements / (1000 * w));
  // The planner counts a kernel's math calls: exp's kernel is cut finer than a multiply's, and
  // tanh(exp(x)) finer still; the kernels themselves do not change (the launch is an argument).
  Tensor x = tensor<float>(ramp(64 * 1000), {64, 1000});
  const std::vector<Tensor> ts{x * 2.0f, lz::exp(x), lz::tanh(lz::exp(x * 0.5f))};
  const lower::Plan p = plan_of(ts);
  std::vector<int64_t> grains;
  for (const lower::PlanStep& s : p.steps) {
    if (s.kind == lower::PlanStep::Kernel) grains.push_back(cpu::cpu_launch_of(s.launch).grain);
  }
  EXPECT_EQ(grains, (std::vector<int64_t>{cpu::kGrainElements, cpu::kGrainElements / w,
                                          cpu::kGrainElements / (1 + 2 * cpu::kMathCallWeight)}))
      << lower::describe_plan(p);
}

}  // namespace
}  // namespace lz
