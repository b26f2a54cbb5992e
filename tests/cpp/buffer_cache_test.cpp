// The block cache behind Storage (core/buffer.cpp): freed blocks of 64 KiB and more are reused by
// size, up to LAZULI_BUFFER_CACHE_BYTES, observed through the BufferReuse / BufferFresh counters.
#include <gtest/gtest.h>

#include <memory>

#include "core/buffer.h"
#include "core/config.h"
#include "core/metrics.h"
#include "test_util.h"

namespace lz {
namespace {

class BufferCache : public testing::RuntimeTest {
 protected:
  void SetUp() override {
    RuntimeTest::SetUp();
    release_buffer_cache();  // blocks other tests freed would count against the bound
  }
  void TearDown() override {
    mutable_config().buffer_cache_bytes = -1;
    RuntimeTest::TearDown();
  }
  static int64_t reuse() { return counter_value("BufferReuse"); }
  static int64_t fresh() { return counter_value("BufferFresh"); }
};

// A size no other test allocates, so blocks other tests freed cannot answer.
constexpr size_t kOdd = (size_t{3} << 20) + 4096 * 7;

TEST_F(BufferCache, AFreedBlockIsReusedForTheSameSize) {
  void* first;
  {
    Storage s(kOdd);
    first = s.data();
  }
  const int64_t r = reuse(), f = fresh();
  Storage again(kOdd);
  EXPECT_EQ(reuse(), r + 1);
  EXPECT_EQ(fresh(), f);
  EXPECT_EQ(again.data(), first);
}

TEST_F(BufferCache, ABoundOfZeroKeepsNothing) {
  mutable_config().buffer_cache_bytes = 0;
  { Storage s(kOdd + 4096); }
  const int64_t r = reuse(), f = fresh();
  Storage again(kOdd + 4096);
  EXPECT_EQ(reuse(), r);
  EXPECT_EQ(fresh(), f + 1);
}

TEST_F(BufferCache, TheBoundLimitsWhatIsKept) {
  const size_t size = kOdd + 8192;  // rounds to 4 MiB
  mutable_config().buffer_cache_bytes = 9 << 20;  // room for two such blocks
  {
    std::unique_ptr<Storage> a = std::make_unique<Storage>(size), b = std::make_unique<Storage>(size),
                             c = std::make_unique<Storage>(size);
  }
  const int64_t r = reuse(), f = fresh();
  Storage x(size), y(size), z(size);
  EXPECT_EQ(reuse(), r + 2);
  EXPECT_EQ(fresh(), f + 1);
}

TEST_F(BufferCache, SmallBlocksAreLeftToMalloc) {
  const int64_t r = reuse(), f = fresh();
  { Storage s(4096); }
  Storage again(4096);
  EXPECT_EQ(reuse(), r);
  EXPECT_EQ(fresh(), f);
}

}  // namespace
}  // namespace lz
