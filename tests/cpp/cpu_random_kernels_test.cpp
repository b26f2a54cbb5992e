// The cpu backend's compiled random ops: rng_uniform and rng_normal are fused elementwise leaves
// whose values are bit for bit the reference generator's (interp/kernels.h), whatever view reads
// them; rng_advance is a kernel of its own, so a draw's kernel never depends on its key's chain.
// No reference kernel in the plans.
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "backend/cpu/kernel_cache.h"
#include "cpu_compiler_util.h"
#include "lazuli/autograd.h"

namespace lz {
namespace {

using namespace cpu_test;  // NOLINT(build/namespaces): the shared helpers of the cpu backend tests
using CpuRandomKernels = CpuCompilerTest;

const std::vector<Shape> kShapes = {{},        {1},      {7},          {3, 5}, {2, 3, 4},
                                    {1, 1000}, {33, 17}, {2, 1, 3, 5}, {0, 4}};

TEST_F(CpuRandomKernels, UniformAndNormalDrawsAreBitForBitTheReferences) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (const Shape& shape : kShapes) {
      for (int64_t seed : {int64_t{0}, int64_t{1234567}, int64_t{-5}}) {
        auto program = [&] {
          manual_seed(seed);
          // Three draws: the second and third keys are compiled rng_advance steps.
          return std::vector<Tensor>{rand(shape, dt), randn(shape, dt), rand(shape, dt)};
        };
        const std::string what =
            std::string(dtype_name(dt)) + " " + shape_str(shape) + " seed " + std::to_string(seed);
        expect_agree(program, 0, what);
        EXPECT_EQ(fallbacks(plan_of(program())), 0) << what;
      }
    }
  }
}

TEST_F(CpuRandomKernels, LargeDrawsSplitOverThreadsAreBitForBitTheReferences) {
  // More than one grain (32768 elements): several threads, vectorized bodies and remainders.
  for (DType dt : {DType::Float32, DType::Float64}) {
    expect_agree(
        [&] {
          manual_seed(99);
          return std::vector<Tensor>{rand({100003}, dt), randn({300, 257}, dt)};
        },
        0, std::string(dtype_name(dt)));
  }
}

TEST_F(CpuRandomKernels, ViewsOfADrawReadItsValuesAtTheirPositions) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    auto program = [&] {
      manual_seed(7);
      Tensor index = tensor(std::vector<int64_t>{3, 0, 0, 2, 1, 3}, {2, 3});
      return std::vector<Tensor>{
          transpose(rand({4, 6}, dt), 0, 1) * 2.0,
          expand(rand({3, 1, 5}, dt), {3, 4, 5}) + 1.0,
          slice(randn({8, 6}, dt), 0, 1, 7, 2) - 1.0,
          permute(rand({2, 3, 4}, dt), {2, 0, 1}) * rand({4, 2, 3}, dt),
          reshape(rand({4, 6}, dt), {2, 2, 6}) * 3.0,
          gather(rand({2, 4}, dt), 1, index) + 0.5,
          index_select(randn({5, 3}, dt), 0, tensor(std::vector<int64_t>{4, 4, 0})) * 2.0,
      };
    };
    expect_agree(program, 0, std::string(dtype_name(dt)));
    EXPECT_EQ(fallbacks(plan_of(program())), 0);
  }
}

TEST_F(CpuRandomKernels, AFusedDropoutIsOneKernelAndBitForBitTheReferences) {
  const double p = 0.3;
  auto program = [&] {
    manual_seed(2024);
    Tensor x = reshape(cast(arange(0, 60), DType::Float32), {6, 10}) * 0.1;
    Tensor keep = cast(rand({6, 10}) >= p, DType::Float32);
    return std::vector<Tensor>{x * keep * (1.0 / (1.0 - p))};
  };
  expect_agree(program, 0, "dropout");
  const lower::Plan plan = plan_of(program());
  EXPECT_EQ(fallbacks(plan), 0);
  EXPECT_EQ(count_steps(plan, lower::PlanStep::Kernel), 1);  // mask, product, scale
}

TEST_F(CpuRandomKernels, ADropoutTrainingStepRunsNoReferenceRandomKernel) {
  // Two steps of a small model with dropout, the key advanced by the barrier each step.
  set_active_backend("cpu");
  manual_seed(3);
  Tensor w = reshape(cast(arange(0, 12), DType::Float32), {4, 3}) * 0.05;
  sync();
  set_requires_grad(w);
  for (int step = 0; step < 2; ++step) {
    Tensor x = reshape(cast(arange(0, 8), DType::Float32), {2, 4});
    Tensor h = matmul(x, w);
    Tensor keep = cast(rand({2, 3}) >= 0.25, DType::Float32);
    backward(sum(h * keep * (1.0 / 0.75)));
    {
      NoGradGuard no_grad;
      detach(w).sub_(grad(w) * 0.01);
    }
    set_grad(w, Tensor());
    sync();
  }
  EXPECT_EQ(counter("fallback::rng_uniform"), 0);
  EXPECT_EQ(counter("fallback::rng_advance"), 0);
  EXPECT_GT(counter("ExecutedNode::rng_uniform"), 0);
}

TEST_F(CpuRandomKernels, DrawsFromALongerKeyChainCompileNoNewKernel) {
  // Syncing only the draws leaves the device's key pending: each step's key is one advance
  // further from the last barrier. The advances are kernels of their own, so the draw's kernel
  // is the same at every length. A private kernel cache: a warm one would hide the compiles.
  char tmpl[] = "/tmp/lazuli-random-kernels-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  mutable_config().cache_dir = tmpl;
  cpu::clear_kernel_memory_cache();
  set_active_backend("cpu");
  manual_seed(1);
  int64_t compiled = 0;
  for (int step = 0; step < 5; ++step) {
    Tensor b = rand({64}) * 2.0;
    sync_tensors({b});
    lz::wait();
    if (step == 2) compiled = counter("KernelCompile");
  }
  EXPECT_GT(compiled, 0);
  EXPECT_EQ(counter("KernelCompile"), compiled);
  std::error_code ec;
  std::filesystem::remove_all(tmpl, ec);
}

TEST_F(CpuRandomKernels, NormalDrawsInFloat64MatchTheReferenceLibmOverManyValues) {
  // glibc's scalar log and cos, as the reference calls them (libmvec's may differ by an ulp).
  expect_agree(
      [] {
        manual_seed(-77);
        return std::vector<Tensor>{randn({1 << 16}, DType::Float64)};
      },
      0, "randn float64");
}

}  // namespace
}  // namespace lz
