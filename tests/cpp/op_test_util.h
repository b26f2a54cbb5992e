// The one helper every op test uses: make a tensor from plain numbers, and check a result's
// dtype, shape and values against hand-computed expectations (NaN equals NaN, infinities must
// match exactly). Tests use only the public API (<lazuli/lazuli.h>).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <source_location>
#include <sstream>
#include <string>
#include <vector>

#include "lazuli/lazuli.h"

namespace lz_test {

// A host tensor of `dtype` and `shape` holding `values` (converted from double).
inline lz::Tensor make(const std::vector<double>& values, const std::vector<int64_t>& shape,
                       lz::DType dtype = lz::kFloat32) {
  auto convert = [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> v;
    for (double d : values) v.push_back(static_cast<T>(d));
    return lz::tensor<T>(v, shape);
  };
  switch (dtype) {
    case lz::DType::Bool: return convert(false);
    case lz::DType::Int32: return convert(int32_t{0});
    case lz::DType::Int64: return convert(int64_t{0});
    case lz::DType::Float32: return convert(0.0f);
    case lz::DType::Float64: return convert(0.0);
    case lz::DType::Float16:
    case lz::DType::BFloat16: return lz::cast(convert(0.0f), dtype);  // rounded to nearest even
  }
  return {};
}

// Checks dtype, shape and values of `t` (a value read: it runs the program). Integer and bool
// results must match exactly; floating ones within rtol * max(1, |expected|).
inline void expect_values(const lz::Tensor& t, lz::DType dtype, const std::vector<int64_t>& shape,
                          const std::vector<double>& expected, double rtol = 1e-6,
                          std::source_location loc = std::source_location::current()) {
  auto fail = [&](const std::string& msg) {
    ADD_FAILURE_AT(loc.file_name(), static_cast<int>(loc.line())) << msg;
  };
  if (!t.defined()) return fail("the tensor is undefined");
  if (t.dtype() != dtype) {
    return fail("dtype: expected " + std::string(lz::dtype_name(dtype)) + ", got " +
                std::string(lz::dtype_name(t.dtype())));
  }
  auto shape_text = [](const std::vector<int64_t>& s) {
    std::ostringstream o;
    o << "[";
    for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
    return o.str() + "]";
  };
  if (t.shape() != shape) {
    return fail("shape: expected " + shape_text(shape) + ", got " + shape_text(t.shape()));
  }
  std::vector<double> got;
  try {
    got = t.to_vector<double>();
  } catch (const std::exception& e) {
    return fail(std::string("reading the values threw: ") + e.what());
  }
  if (got.size() != expected.size()) {
    return fail("element count: expected " + std::to_string(expected.size()) + ", got " +
                std::to_string(got.size()));
  }
  bool exact = !lz::is_floating(dtype);
  std::ostringstream bad;
  int nbad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double g = got[i], e = expected[i];
    bool ok;
    if (std::isnan(e) || std::isnan(g)) ok = std::isnan(e) && std::isnan(g);
    else if (std::isinf(e) || std::isinf(g) || exact) ok = g == e;
    else ok = std::fabs(g - e) <= rtol * std::max(1.0, std::fabs(e));
    if (!ok && nbad++ < 8) bad << "\n  [" << i << "] expected " << e << ", got " << g;
  }
  if (nbad) {
    std::ostringstream all;
    all.precision(9);
    for (size_t i = 0; i < got.size() && i < 32; ++i) all << (i ? ", " : "") << got[i];
    fail(std::to_string(nbad) + " value(s) differ:" + bad.str() + "\n  got: [" + all.str() + "]");
  }
}

// The runtime still records, reads and syncs (after a failed op or program).
inline void expect_runtime_works() {
  expect_values(make({1, 2}, {2}) * 3 + 1, lz::kFloat32, {2}, {4, 7});
  lz::Tensor pending = lz::exp(make({0}, {1}));
  lz::sync(true);
  expect_values(pending, lz::kFloat32, {1}, {1});
}

// Runs `bad`, which must throw E; returns its message ("" if it did not throw E). Checks that
// the failed op left no new live tensor behind, and that the runtime still records, reads and
// syncs afterwards.
template <class E>
std::string expect_throw_and_recover(const std::function<void()>& bad) {
  int64_t live_before = lz::debug::live_tensor_count();
  std::string msg;
  bool thrown = false;
  try {
    bad();
  } catch (const E& e) {
    thrown = true;
    msg = e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw the wrong exception type: " << e.what();
  }
  EXPECT_TRUE(thrown) << "expected an exception";
  EXPECT_EQ(lz::debug::live_tensor_count(), live_before) << "the failed op left tensors behind";
  expect_runtime_works();
  EXPECT_EQ(lz::debug::live_tensor_count(), live_before);
  return msg;
}

// All of `parts` appear in `msg`.
inline void expect_mentions(const std::string& msg, const std::vector<std::string>& parts) {
  for (const std::string& p : parts) {
    EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in message: " << msg;
  }
}

}  // namespace lz_test
