// How the cpu backend cuts a float32 product into blocks for its thread pool (gemm_cut), and
// that the cut products and the small batched stacks compute what a plain loop computes.
#include <cmath>

#include "backend/cpu/library_calls.h"
#include "core/thread_pool.h"
#include "test_util.h"

namespace lz {
namespace {

using cpu::gemm_cut;
using cpu::GemmCut;
using cpu::kMinBlockMultiplyAdds;

bool splits(const GemmCut& c) { return c.extent >= 2 * c.grain; }

TEST(MatmulBlocks, ASmallProductStaysOnOneThread) {
  EXPECT_FALSE(splits(gemm_cut(64, 64, 64)));
  EXPECT_FALSE(splits(gemm_cut(32, 32, 32)));
  EXPECT_FALSE(splits(gemm_cut(8, 1000, 8)));
}

TEST(MatmulBlocks, ALongInnerDimensionCutsEvenASquareOutputIntoRowBlocks) {
  // A logits gradient: [64, 1000] x [1000, 64]. Blocks of 64 rows left it on one thread.
  GemmCut c = gemm_cut(64, 64, 1000);
  EXPECT_TRUE(c.rows);
  EXPECT_TRUE(splits(c));
}

TEST(MatmulBlocks, AShortWideOutputIsCutIntoColumnsATallOneIntoRows) {
  GemmCut wide = gemm_cut(34, 768, 192);  // a ViT's MLP: every row block would pack all of B
  EXPECT_FALSE(wide.rows);
  EXPECT_EQ(wide.extent, 768);
  EXPECT_TRUE(splits(wide));
  GemmCut tall = gemm_cut(1000, 64, 64);  // 8 MFLOP: just under two blocks of the old rule
  EXPECT_TRUE(tall.rows);
  EXPECT_EQ(tall.extent, 1000);
  EXPECT_TRUE(splits(tall));
}

TEST(MatmulBlocks, EveryBlockHoldsTheLeastWorkWorthABlock) {
  for (int64_t m : {1, 17, 34, 64, 200, 1000}) {
    for (int64_t n : {1, 16, 64, 768, 3000}) {
      for (int64_t k : {1, 64, 1000}) {
        GemmCut c = gemm_cut(m, n, k);
        const int64_t per_unit = (c.rows ? n : m) * k;
        EXPECT_GE(c.grain * per_unit, std::min(kMinBlockMultiplyAdds, per_unit * c.extent))
            << m << "x" << n << "x" << k;
        EXPECT_GE(c.grain, 32) << m << "x" << n << "x" << k;
      }
    }
  }
}

using MatmulBlocksRun = testing::RuntimeTest;

// out[i, j] = sum_p a[i, p] b[p, j] in double, over row-major a [m, k] and b [k, n].
std::vector<double> reference(const std::vector<float>& a, const std::vector<float>& b, int64_t m,
                              int64_t n, int64_t k) {
  std::vector<double> out(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j) out[i * n + j] += double(a[i * k + p]) * double(b[p * n + j]);
  return out;
}

using testing::random_values;

TEST_F(MatmulBlocksRun, CutProductsMatchAPlainLoop) {
  struct Case {
    int64_t m, n, k;
    bool transpose_b;  // b stored [n, k] and read transposed (a linear layer's weight)
  };
  for (const Case& c : {Case{64, 64, 1000, false}, Case{34, 768, 192, true},
                        Case{1000, 64, 64, false}, Case{64, 1000, 64, true}}) {
    std::vector<float> a = random_values(c.m * c.k, 1), b = random_values(c.k * c.n, 2);
    std::vector<float> stored = b;
    if (c.transpose_b) {
      for (int64_t p = 0; p < c.k; ++p)
        for (int64_t j = 0; j < c.n; ++j) stored[j * c.k + p] = b[p * c.n + j];
    }
    Tensor tb = c.transpose_b ? lz::transpose(tensor<float>(stored, {c.n, c.k}), 0, 1)
                              : tensor<float>(stored, {c.k, c.n});
    const int64_t jobs = counter("PoolSplitJobs");
    std::vector<float> got = lz::matmul(tensor<float>(a, {c.m, c.k}), tb).to_vector<float>();
    // The product ran on the pool as gemm_cut says (one split job), and nothing else split.
    const bool split = runtime_pool().num_threads() > 1 && splits(gemm_cut(c.m, c.n, c.k));
    EXPECT_EQ(counter("PoolSplitJobs") - jobs, split ? 1 : 0) << c.m << "x" << c.n << "x" << c.k;
    std::vector<double> want = reference(a, b, c.m, c.n, c.k);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-4 * std::sqrt(double(c.k)))
          << c.m << "x" << c.n << "x" << c.k << " element " << i;
    }
  }
}

TEST_F(MatmulBlocksRun, ASmallBatchedStackMatchesAPlainLoop) {
  // Attention's per-head products in a tiny model: one primitive over the whole stack.
  const int64_t batches = 4, m = 32, n = 32, k = 32;
  std::vector<float> a = random_values(batches * m * k, 3), b = random_values(batches * k * n, 4);
  const int64_t jobs = counter("PoolSplitJobs");
  std::vector<float> got =
      lz::matmul(tensor<float>(a, {2, 2, m, k}), tensor<float>(b, {2, 2, k, n})).to_vector<float>();
  EXPECT_EQ(counter("PoolSplitJobs"), jobs);  // 131k multiply-adds: not worth a second thread
  for (int64_t e = 0; e < batches; ++e) {
    std::vector<float> ae(a.begin() + e * m * k, a.begin() + (e + 1) * m * k);
    std::vector<float> be(b.begin() + e * k * n, b.begin() + (e + 1) * k * n);
    std::vector<double> want = reference(ae, be, m, n, k);
    for (int64_t i = 0; i < m * n; ++i) {
      ASSERT_NEAR(got[e * m * n + i], want[i], 1e-4 * std::sqrt(double(k)))
          << "entry " << e << " element " << i;
    }
  }
}

}  // namespace
}  // namespace lz
