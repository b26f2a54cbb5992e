// Shared fixture for runtime-behaviour tests: every test starts from an empty compile cache and
// counters at zero, with the default configuration, so cache counters mean what they say.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "core/config.h"
#include "core/metrics.h"
#include "exec/cut_record.h"
#include "exec/explain.h"
#include "exec/graph_executor.h"
#include "lazuli/lazuli.h"

namespace lz::testing {

class RuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    lz::wait();
    saved_ = lz::config();
    lz::clear_compile_cache();
    lz::clear_recompile_history();
    lz::cut_log().clear();
    lz::debug::clear_counters();
  }
  void TearDown() override {
    try {
      lz::wait();
    } catch (const lz::Error&) {
    }
    lz::mutable_config() = saved_;
    lz::resize_compile_cache(static_cast<size_t>(saved_.compilation_cache_size));
  }
  static int64_t counter(const char* name) { return lz::debug::counter_value(name); }

 private:
  lz::Config saved_;
};

// n floats drawn uniformly from [-1, 1) by a generator seeded with `seed`.
inline std::vector<float> random_values(int64_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(g);
  return v;
}

}  // namespace lz::testing
