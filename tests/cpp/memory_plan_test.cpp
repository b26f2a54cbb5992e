// The planner's arena placement (lower/plan.h place_scratch): values alive at the same step never
// share bytes, blocks of dead values are reused, and both placements agree on that for random
// lifetimes; a sum past 64 bits is an OutOfMemoryError, not a wrapped offset.
#include <gtest/gtest.h>

#include <random>

#include "lazuli/error.h"
#include "lower/plan.h"

namespace lz::lower {
namespace {

// Every pair alive at a common step occupies disjoint bytes, and every block lies in the arena.
void expect_valid(const std::vector<ScratchInterval>& v, const std::vector<int64_t>& off, int64_t arena) {
  ASSERT_EQ(off.size(), v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const int64_t end_i = off[i] + (v[i].nbytes + 63) / 64 * 64;
    EXPECT_EQ(off[i] % 64, 0);
    EXPECT_LE(end_i, arena);
    for (size_t j = i + 1; j < v.size(); ++j) {
      const int64_t end_j = off[j] + (v[j].nbytes + 63) / 64 * 64;
      const bool same_time = v[i].def <= v[j].last && v[j].def <= v[i].last;
      const bool same_bytes = off[i] < end_j && off[j] < end_i;
      ASSERT_FALSE(same_time && same_bytes) << "values " << i << " and " << j << " overlap";
    }
  }
}

std::vector<ScratchInterval> random_lifetimes(uint32_t seed, int n) {
  std::mt19937 rng(seed);
  std::vector<ScratchInterval> v;
  for (int i = 0; i < n; ++i) {
    const int def = static_cast<int>(rng() % 200);
    v.push_back({static_cast<int64_t>(1 + rng() % 5000), def, def + static_cast<int>(rng() % 40)});
  }
  return v;
}

TEST(MemoryPlan, ValuesAliveTogetherNeverShareBytesInEitherPlacement) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    const auto v = random_lifetimes(seed, 300);
    for (Placement how : {Placement::LargestFirst, Placement::Sweep}) {
      int64_t arena = -1;
      const auto off = place_scratch(v, &arena, how);
      expect_valid(v, off, arena);
    }
  }
}

TEST(MemoryPlan, DeadValuesBlocksAreReused) {
  // A chain: each value dies at the step that defines the next but one.
  std::vector<ScratchInterval> chain;
  for (int i = 0; i < 100; ++i) chain.push_back({1024, i, i + 1});
  for (Placement how : {Placement::LargestFirst, Placement::Sweep}) {
    int64_t arena = -1;
    const auto off = place_scratch(chain, &arena, how);
    expect_valid(chain, off, arena);
    EXPECT_EQ(arena, 2 * 1024) << "two blocks alternate";
  }
}

TEST(MemoryPlan, SweepMergesFreedNeighboursForALargerValue) {
  // Two 1 KiB values die at step 1; a 2 KiB value defined at step 2 takes their merged bytes.
  const std::vector<ScratchInterval> v = {{1024, 0, 1}, {1024, 0, 1}, {4096, 0, 5}, {2048, 2, 3}};
  int64_t arena = -1;
  const auto off = place_scratch(v, &arena, Placement::Sweep);
  expect_valid(v, off, arena);
  EXPECT_EQ(arena, 2048 + 4096);
}

TEST(MemoryPlan, DeepBackwardSizedPlanIsValid) {
  // The shape of a backward over a chain: forward values all live until their gradient step.
  const int n = 20000;
  std::vector<ScratchInterval> v;
  for (int i = 0; i < n; ++i) v.push_back({8, i, 2 * n - i});          // activations
  for (int i = 0; i < n; ++i) v.push_back({8, n + i, n + i + 1});      // gradient chain
  int64_t arena = -1;
  const auto off = place_scratch(v, &arena, Placement::Sweep);
  EXPECT_LE(arena, static_cast<int64_t>(n + 2) * 64);
  // Spot-check the gradient values against the activations alive with them.
  for (int i = 0; i < n; i += 997) {
    for (int j = n; j < 2 * n; j += 991) {
      const bool same_time = v[i].def <= v[j].last && v[j].def <= v[i].last;
      if (same_time) {
        EXPECT_NE(off[i], off[j]);
      }
    }
  }
}

TEST(MemoryPlan, ScratchPastSixtyFourBitsIsOutOfMemory) {
  const std::vector<ScratchInterval> v = {{INT64_MAX / 2, 0, 1}, {INT64_MAX / 2, 0, 1}, {INT64_MAX / 2, 0, 1}};
  for (Placement how : {Placement::LargestFirst, Placement::Sweep}) {
    int64_t arena = -1;
    EXPECT_THROW(place_scratch(v, &arena, how), OutOfMemoryError);
  }
}

}  // namespace
}  // namespace lz::lower
