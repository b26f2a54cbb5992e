// The Backend interface's shared pieces (backend/backend.h): the end-of-program root copies keep
// every value when destinations overlap other copies' sources, and dumps describe a graph through
// a backend named explicitly.
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "backend/backend.h"
#include "lazuli/debug.h"
#include "lazuli/error.h"
#include "lazuli/lazuli.h"

namespace lz {
namespace {

TEST(RootCopies, TwoValuesSwappedThroughEachOthersBuffersKeepBoth) {
  std::vector<float> a = {1, 2}, b = {3, 4};
  run_root_copies({{a.data(), b.data(), 8}, {b.data(), a.data(), 8}});
  EXPECT_EQ(a, (std::vector<float>{3, 4}));
  EXPECT_EQ(b, (std::vector<float>{1, 2}));
}

TEST(RootCopies, RandomCopiesAgreeWithCopyingFromASnapshot) {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::vector<uint8_t> mem(256);
    std::iota(mem.begin(), mem.end(), 0);
    const std::vector<uint8_t> snapshot = mem;
    std::vector<uint8_t> expected = mem;
    std::vector<RootCopy> copies;
    std::vector<std::pair<size_t, size_t>> dsts;
    const int n = 1 + static_cast<int>(rng() % 6);
    for (int i = 0; i < n; ++i) {
      size_t len = 1 + rng() % 16, s = rng() % (256 - len), d;
      bool clash;
      do {  // destinations never overlap each other (two roots are two buffers)
        d = rng() % (256 - len);
        clash = false;
        for (auto [b, e] : dsts) clash |= d < e && b < d + len;
      } while (clash);
      dsts.push_back({d, d + len});
      copies.push_back({mem.data() + d, mem.data() + s, len});
      std::copy_n(snapshot.begin() + s, len, expected.begin() + d);
    }
    run_root_copies(copies);
    ASSERT_EQ(mem, expected) << "round " << round;
  }
}

TEST(BackendNamed, DescribesWithTheNamedBackendWhicheverIsActive) {
  Tensor x = full({4}, 2.0f);
  Tensor y = exp(x) * 3.0f;
  const std::string cpu = debug::dump_kernels({y});
  EXPECT_NE(cpu.find("kernel"), std::string::npos) << cpu;
  EXPECT_NE(backend_named("interp").name(), backend_named("cpu").name());
  EXPECT_EQ(&backend_named("cpu"), &backend_named("cpu")) << "made once";
  EXPECT_THROW(backend_named("tpu"), ValueError);
}

}  // namespace
}  // namespace lz
