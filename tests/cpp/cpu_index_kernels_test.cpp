// The cpu backend's index kernels (gather, index_select, scatter_add, index_copy) and its float32
// sums, against the reference backend:
//  - CpuIndexKernels: values on random shapes (ranks 1-4, int32 and int64 indices, repeated
//    indices, fused producers and consumers), plans without reference fallbacks, out-of-range
//    indices reported with the reference's message, kernels reused across batch sizes.
//  - CpuFloat32Sums: sums whose float32 accumulation would lose counts are exact.
#include <stdlib.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/kernel_cache.h"
#include "lazuli/autograd.h"
#include "lazuli/nn.h"
#include "lower/plan.h"
#include "cpu_compiler_util.h"
#include "test_util.h"

namespace lz {
namespace {

using namespace cpu_test;  // NOLINT(build/namespaces): the shared helpers of the cpu backend tests

using CpuIndexKernels = CpuCompilerTest;
using CpuFloat32Sums = CpuIndexKernels;

class Gen {
 public:
  explicit Gen(uint32_t seed) : g_(seed) {}
  int64_t in(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(g_); }
  Shape shape(int rank, int64_t max = 6) {
    Shape s;
    for (int d = 0; d < rank; ++d) s.push_back(in(1, max));
    return s;
  }
  Tensor floats(const Shape& s) {
    std::normal_distribution<float> n;
    std::vector<float> v(static_cast<size_t>(numel(s)));
    for (float& x : v) x = n(g_);
    return tensor<float>(v, IntList(s.begin(), s.end()));
  }
  // Index values in [0, bound), of dtype `dt`.
  Tensor index(const Shape& s, int64_t bound, DType dt) {
    std::vector<int64_t> v(static_cast<size_t>(numel(s)));
    for (int64_t& x : v) x = in(0, bound - 1);
    return values(v, s, dt);
  }
  static Tensor values(const std::vector<int64_t>& v, const Shape& s, DType dt) {
    IntList shape(s.begin(), s.end());
    if (dt == DType::Int64) return tensor<int64_t>(v, shape);
    return tensor<int32_t>(std::vector<int32_t>(v.begin(), v.end()), shape);
  }
  DType index_dtype() { return in(0, 1) ? DType::Int64 : DType::Int32; }

 private:
  std::mt19937 g_;
};

std::string shape_text(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

// ---------------------------------------------------------------------------------------------
// Values against the reference
// ---------------------------------------------------------------------------------------------

TEST_F(CpuIndexKernels, GatherAgreesWithTheReferenceOnRandomShapes) {
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    Gen g(seed);
    const int rank = static_cast<int>(g.in(1, 4));
    const Shape xs = g.shape(rank);
    const int64_t dim = g.in(0, rank - 1);
    Shape is = xs;  // the index may be smaller than x outside dim, any length along it
    for (int d = 0; d < rank; ++d) is[d] = d == dim ? g.in(1, 7) : g.in(1, xs[d]);
    const DType dt = g.index_dtype();
    Tensor x = g.floats(xs), idx = g.index(is, xs[dim], dt);
    auto program = [&] {
      Tensor plain = gather(x, dim, idx);
      Tensor fused =
          gather(exp(x) * 0.5f, dim, idx + 0) * 3.0f - 1.0f;  // producer and consumer fused
      return std::vector<Tensor>{plain, fused, sum(gather(x, dim, idx))};
    };
    const std::string what = "seed " + std::to_string(seed) + " x" + shape_text(xs) + " index" +
                             shape_text(is) + " " + std::string(dtype_name(dt)) + " dim " +
                             std::to_string(dim);
    EXPECT_EQ(fallbacks(plan_of(program())), 0) << what;
    expect_agree(program, 1e-6, what);
  }
}

TEST_F(CpuIndexKernels, IndexSelectAgreesWithTheReferenceOnRandomShapes) {
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    Gen g(seed);
    const int rank = static_cast<int>(g.in(1, 4));
    const Shape xs = g.shape(rank);
    const int64_t dim = g.in(0, rank - 1);
    const DType dt = g.index_dtype();
    Tensor x = g.floats(xs), idx = g.index({g.in(1, 9)}, xs[dim], dt);  // repeats likely
    Tensor xi = cast(g.index(xs, 1000, DType::Int64), DType::Int32);
    auto program = [&] {
      Tensor sel = index_select(x, dim, idx);
      Tensor through_transpose =
          index_select(x * 2.0f + 1.0f, dim, idx).transpose(0, rank - 1) + 0.5f;
      return std::vector<Tensor>{sel, through_transpose, index_select(xi, dim, idx)};
    };
    const std::string what = "seed " + std::to_string(seed) + " x" + shape_text(xs) + " " +
                             std::string(dtype_name(dt)) + " dim " + std::to_string(dim);
    EXPECT_EQ(fallbacks(plan_of(program())), 0) << what;
    expect_agree(program, 0, what);
  }
}

TEST_F(CpuIndexKernels, ScatterAddAgreesBitForBitWithRepeatedIndices) {
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    Gen g(seed);
    const int rank = static_cast<int>(g.in(1, 4));
    const Shape bs = g.shape(rank);
    const int64_t dim = g.in(0, rank - 1);
    Shape ss = bs, is = bs;
    for (int d = 0; d < rank; ++d) {
      ss[d] = d == dim ? g.in(1, 12) : bs[d];
      is[d] = g.in(1, ss[d]);  // the index may be smaller than src
    }
    const DType dt = g.index_dtype();
    Tensor base = g.floats(bs), src = g.floats(ss);
    Tensor idx = g.index(is, std::min<int64_t>(bs[dim], 3), dt);  // few targets: many collisions
    Tensor ibase = cast(g.index(bs, 100, DType::Int64), DType::Int64);
    auto program = [&] {
      Tensor plain = scatter_add(base, dim, idx, src);
      Tensor fused = scatter_add(base * 2.0f, dim, idx, src - 1.0f) + 1.0f;
      Tensor ints = scatter_add(ibase, dim, idx, cast(src * 10.0f, DType::Int64));
      return std::vector<Tensor>{plain, fused, ints};
    };
    const std::string what = "seed " + std::to_string(seed) + " base" + shape_text(bs) + " src" +
                             shape_text(ss) + " index" + shape_text(is) + " dim " +
                             std::to_string(dim);
    EXPECT_EQ(fallbacks(plan_of(program())), 0) << what;
    expect_agree(program, 0, what);  // each target sums in the reference's order
  }
}

TEST_F(CpuIndexKernels, IndexCopyAgreesWithTheReferenceAndTheLastRepeatWins) {
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    Gen g(seed);
    const int rank = static_cast<int>(g.in(1, 4));
    const Shape bs = g.shape(rank);
    const int64_t dim = g.in(0, rank - 1);
    Shape ss = bs;
    ss[dim] = g.in(1, 8);
    const DType dt = g.index_dtype();
    Tensor base = g.floats(bs), src = g.floats(ss), idx = g.index({ss[dim]}, bs[dim], dt);
    auto program = [&] {
      return std::vector<Tensor>{index_copy(base, dim, idx, src),
                                 index_copy(base + 1.0f, dim, idx, src * src)};
    };
    const std::string what =
        "seed " + std::to_string(seed) + " base" + shape_text(bs) + " dim " + std::to_string(dim);
    EXPECT_EQ(fallbacks(plan_of(program())), 0) << what;
    expect_agree(program, 0, what);
  }
}

TEST_F(CpuIndexKernels, ALargeScatterSplitOverThreadsAgreesBitForBit) {
  Gen g(7);
  Tensor src = g.floats({4096, 64}), idx = g.index({4096}, 50, DType::Int64);
  auto program = [&] {
    // An embedding's backward: rows of src added into 50 rows, 64 columns split over threads.
    Tensor i2 = idx.reshape({4096, 1}).expand({4096, 64});
    return std::vector<Tensor>{scatter_add(zeros({50, 64}), 0, i2, src), index_select(src, 0, idx)};
  };
  EXPECT_EQ(fallbacks(plan_of(program())), 0);
  expect_agree(program, 0, "embedding-like scatter");
}

// ---------------------------------------------------------------------------------------------
// Bounds
// ---------------------------------------------------------------------------------------------

// "<op>: index V is out of range for dim D of size S" from an error message.
std::string index_error(const std::string& message) {
  std::smatch m;
  static const std::regex re(
      "[a-z_]+: index -?[0-9]+ is out of range for dim [0-9]+ of size [0-9]+");
  return std::regex_search(message, m, re) ? m.str() : "";
}

TEST_F(CpuIndexKernels, AnOutOfRangeIndexIsReportedAsTheReferenceReportsIt) {
  // Several bad values: both name the first in the index's row-major order. `+ 0` keeps the
  // values from the frontend's check of a host index: they are known only when the program runs.
  const std::vector<int64_t> bad = {1, 0, 2, 9, 3, -4, 7, 1};
  for (DType dt : {DType::Int32, DType::Int64}) {
    const std::vector<std::pair<std::string, std::function<std::vector<Tensor>()>>> programs = {
        {"gather",
         [&] {
           return std::vector<Tensor>{
               gather(ones({2, 4}) * 2.0f, 1, Gen::values(bad, {2, 4}, dt) + 0)};
         }},
        {"gather in a sum",
         [&] {
           return std::vector<Tensor>{
               sum(gather(ones({2, 4}), 1, Gen::values(bad, {2, 4}, dt) + 0))};
         }},
        {"index_select",
         [&] {
           return std::vector<Tensor>{index_select(ones({4, 3}), 0, Gen::values(bad, {8}, dt) + 0)};
         }},
        {"scatter_add",
         [&] {
           return std::vector<Tensor>{
               scatter_add(zeros({2, 4}), 1, Gen::values(bad, {2, 4}, dt) + 0, ones({2, 4}))};
         }},
        {"index_copy",
         [&] {
           return std::vector<Tensor>{
               index_copy(zeros({4, 2}), 0, Gen::values(bad, {8}, dt) + 0, ones({8, 2}))};
         }},
    };
    for (const auto& [name, program] : programs) {
      std::string ref_error, cpu_error;
      run_on("interp", program, &ref_error);
      run_on("cpu", program, &cpu_error);
      const std::string expected = index_error(ref_error);
      ASSERT_FALSE(expected.empty()) << name << ": " << ref_error;
      EXPECT_EQ(index_error(cpu_error), expected) << name << ": " << cpu_error;
      EXPECT_NE(cpu_error.find("failed when its program ran"), std::string::npos) << cpu_error;
      EXPECT_EQ(counter((std::string("fallback::") + name.substr(0, name.find(' '))).c_str()), 0)
          << name;
    }
  }
}

TEST_F(CpuIndexKernels, AnIndexHiddenByASliceIsStillChecked) {
  // The slice reads column 0 only; the reference checks every index, so must the kernel.
  auto program = [] {
    Tensor idx = tensor<int64_t>({0, 9, 1, 2}, {2, 2}) + 0;
    return std::vector<Tensor>{gather(ones({2, 3}), 1, idx).slice(1, 0, 1)};
  };
  std::string error;
  run_on("cpu", program, &error);
  EXPECT_EQ(index_error(error), "gather: index 9 is out of range for dim 1 of size 3") << error;
}

// ---------------------------------------------------------------------------------------------
// Training steps: no reference kernel, kernels reused across batch sizes
// ---------------------------------------------------------------------------------------------

// An embedding + linear + cross-entropy step's loss and gradients.
std::vector<Tensor> embedding_step(int64_t batch) {
  Gen g(static_cast<uint32_t>(batch));
  Tensor emb = g.floats({20, 8}), w = g.floats({8, 5});
  set_requires_grad(emb);
  set_requires_grad(w);
  Tensor tokens = g.index({batch, 3}, 20, DType::Int64), target = g.index({batch}, 5, DType::Int64);
  Tensor h = index_select(emb, 0, tokens.reshape({batch * 3})).reshape({batch, 3, 8}).sum({1});
  Tensor loss = nn::cross_entropy(matmul(h, w), target);
  backward(loss);
  return {loss, grad(emb), grad(w)};
}

TEST_F(CpuIndexKernels, AnEmbeddingAndCrossEntropyTrainingStepRunsNoReferenceKernel) {
  EXPECT_EQ(fallbacks(plan_of(embedding_step(6))), 0);
  run_on("cpu", [] { return embedding_step(6); });
  for (const char* op : {"gather", "scatter_add", "index_select", "index_copy"}) {
    EXPECT_EQ(counter((std::string("fallback::") + op).c_str()), 0) << op;
  }
  expect_agree([] { return embedding_step(6); }, 1e-5, "embedding step");
}

TEST_F(CpuIndexKernels, ANewBatchSizeOfAnEmbeddingStepCompilesNoKernel) {
  // A private kernel cache: a warm one would hide the first compile.
  char tmpl[] = "/tmp/lazuli-index-kernels-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  mutable_config().cache_dir = tmpl;
  cpu::clear_kernel_memory_cache();
  run_on("cpu", [] { return embedding_step(6); });
  const int64_t first = counter("KernelCompile");
  EXPECT_GT(first, 0);
  for (int64_t batch : {9, 31}) {
    run_on("cpu", [&] { return embedding_step(batch); });
    EXPECT_EQ(counter("KernelCompile"), first) << "batch " << batch;
  }
  std::error_code ec;
  std::filesystem::remove_all(tmpl, ec);
}

// ---------------------------------------------------------------------------------------------
// Float32 sums
// ---------------------------------------------------------------------------------------------

TEST_F(CpuFloat32Sums, AColumnSumOfMoreThanTwoToThe24OnesIsExact) {
  // A float32 accumulator stops at 2^24 (2^24 + 1 rounds back to it).
  const int64_t n = (int64_t{1} << 24) + 2;
  std::vector<Result> got = run_on("cpu", [&] {
    return std::vector<Tensor>{sum(ones({n, 2}) * 1.0f, {0})};
  });
  EXPECT_EQ(got[0].f, (std::vector<double>{static_cast<double>(n), static_cast<double>(n)}));
}

TEST_F(CpuFloat32Sums, ARowSumOverAShortInnerDimOfMoreThanTwoToThe24OnesIsExact) {
  // The reduced dims (0, 2) do not merge: the innermost loop is 3 long, the count 3 * 2^23.
  const int64_t n = int64_t{1} << 23;
  std::vector<Result> got = run_on("cpu", [&] {
    return std::vector<Tensor>{sum(ones({n, 2, 3}) * 1.0f, {0, 2})};
  });
  EXPECT_EQ(got[0].f, (std::vector<double>{3.0 * n, 3.0 * n}));
}

TEST_F(CpuFloat32Sums, AFullSumOfManyOnesIsExact) {
  const int64_t n = (int64_t{1} << 25) + 4;
  std::vector<Result> got = run_on("cpu", [&] { return std::vector<Tensor>{sum(ones({n}) * 1.0f)}; });
  EXPECT_EQ(got[0].f, std::vector<double>{static_cast<double>(n)});
}

}  // namespace
}  // namespace lz
