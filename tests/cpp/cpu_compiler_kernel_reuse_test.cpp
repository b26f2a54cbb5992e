// CpuCompilerKernelReuse: a new batch size compiles no kernel; a new process-level start (memory
// cache dropped) loads kernels from the disk cache.
#include "cpu_compiler_util.h"

namespace lz {
namespace {

using namespace cpu_test;  // NOLINT(build/namespaces): the shared helpers of these test files

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
