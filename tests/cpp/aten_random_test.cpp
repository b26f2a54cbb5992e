// Test rows of the ATen table's random entries (src/aten/entries_random.cpp), where the result
// is determined (no draw decides it): what eager PyTorch 2.15 gives, computed with eager on the
// CPU (aten_rows.h says how rows run). Then the draws of lz::aten::Call (src/aten/table.h): from
// a key, and from the device's RNG without one.
#include <algorithm>
#include <limits>
#include <vector>

#include "aten_rows.h"

namespace {

using namespace lz_test::aten::rows;  // dtypes, T, L, Arg(s), kNone, kInf, kNaN

}  // namespace

// The rows keep one layout (call, then expectation) that clang-format would spread over 5 lines.
// clang-format off
LZ_ATEN_ROWS(Random) {
  return {
      // native_dropout: (output, keep mask); train=False and p=0 keep everything, p=1 drops all
      // (x * 0, so NaN and inf stay NaN as in eager).
      {"aten.native_dropout.default", [] { return Args{T({1, -2, 3, 4}, {2, 2}), 0.5, false}; },
       {{kFloat32, {2, 2}, {1, -2, 3, 4}}, {kBool, {2, 2}, {1, 1, 1, 1}}}},
      {"aten.native_dropout.default",
       [] { return Args{T({1, kNaN, -kInf}, {3}, kFloat64), 1.0, false}; },
       {{kFloat64, {3}, {1, kNaN, -kInf}}, {kBool, {3}, {1, 1, 1}}}},
      {"aten.native_dropout.default", [] { return Args{T({1, -2, 3, 4}, {2, 2}), 0.0, true}; },
       {{kFloat32, {2, 2}, {1, -2, 3, 4}}, {kBool, {2, 2}, {1, 1, 1, 1}}}},
      {"aten.native_dropout.default", [] { return Args{T({1.5, -2}, {2}, kFloat64), 0.0, Arg()}; },
       {{kFloat64, {2}, {1.5, -2}}, {kBool, {2}, {1, 1}}}},
      {"aten.native_dropout.default", [] { return Args{T({1, -2, 3, 4}, {2, 2}), 1.0, true}; },
       {{kFloat32, {2, 2}, {0, 0, 0, 0}}, {kBool, {2, 2}, {0, 0, 0, 0}}}},
      {"aten.native_dropout.default",
       [] { return Args{T({1, kNaN, -kInf}, {3}, kFloat64), 1.0, Arg()}; },
       {{kFloat64, {3}, {0, kNaN, kNaN}}, {kBool, {3}, {0, 0, 0}}}},
      {"aten.native_dropout.default", [] { return Args{T({5}, {}), 1.0, true}; },
       {{kFloat32, {}, {0}}, {kBool, {}, {0}}}},
      // bernoulli.p: 1 with probability p, in the input's dtype.
      {"aten.bernoulli.p", [] { return Args{T({0.5, 2, -1}, {3}), 0.0, Arg()}; },
       {{kFloat32, {3}, {0, 0, 0}}}},
      {"aten.bernoulli.p", [] { return Args{T({0.5, 2, -1, 0}, {2, 2}), 1.0, Arg()}; },
       {{kFloat32, {2, 2}, {1, 1, 1, 1}}}},
      {"aten.bernoulli.p", [] { return Args{T({7, 8, 9}, {3}, kInt64), 0.0, Arg()}; },
       {{kInt64, {3}, {0, 0, 0}}}},
      {"aten.bernoulli.p", [] { return Args{T({7, 8, 9}, {3}, kInt64), 1.0, Arg()}; },
       {{kInt64, {3}, {1, 1, 1}}}},
      {"aten.bernoulli.p", [] { return Args{T({7, 8}, {2}, kInt32), 1.0, Arg()}; },
       {{kInt32, {2}, {1, 1}}}},
      {"aten.bernoulli.p", [] { return Args{T({0.5, 2}, {2}, kFloat64), 1.0, Arg()}; },
       {{kFloat64, {2}, {1, 1}}}},
      {"aten.bernoulli.p", [] { return Args{T({0, 1}, {2}, kBool), 1.0, Arg()}; },
       {{kBool, {2}, {1, 1}}}},
      {"aten.bernoulli.p", [] { return Args{T({3}, {}), 0.0, Arg()}; },
       {{kFloat32, {}, {0}}}},
      // rand_like of an empty tensor (the only result that is determined).
      {"aten.rand_like.default", [] { return Args{T({}, {0}), Arg(), Arg(), Arg(), Arg(), Arg()}; },
       {{kFloat32, {0}, {}}}},
      {"aten.rand_like.default",
       [] { return Args{T({}, {2, 0}), kFloat64, Arg(), Arg(), Arg(), Arg()}; },
       {{kFloat64, {2, 0}, {}}}},
      {"aten.rand_like.default",
       [] { return Args{T({}, {0, 3}, kFloat64), Arg(), Arg(), Arg(), Arg(), Arg()}; },
       {{kFloat64, {0, 3}, {}}}},
  };
}
// clang-format on

namespace {

lz::Tensor key(int64_t k) { return lz::scalar_tensor(k, kInt64); }

std::vector<double> values(const lz::Tensor& t) { return t.to_vector<double>(); }

const lz::aten::Entry& entry(const char* name) {
  const lz::aten::Entry* e = lz::aten::find(name);
  if (!e) throw std::runtime_error(std::string("no entry ") + name);
  return *e;
}

TEST(AtenRandom, KeyedDrawsRepeatForAKeyAndAdvanceWithinACall) {
  lz::aten::Call a(key(1234)), b(key(1234)), other(key(1235));
  std::vector<double> a1 = values(a.uniform({4096}, kFloat32));
  std::vector<double> a2 = values(a.uniform({4096}, kFloat32));
  // The same key gives the same draws, each further draw of a Call comes from the next key.
  EXPECT_EQ(values(b.uniform({4096}, kFloat32)), a1);
  EXPECT_EQ(values(b.uniform({4096}, kFloat32)), a2);
  EXPECT_NE(a1, a2);
  EXPECT_NE(values(other.uniform({4096}, kFloat32)), a1);
  // U[0, 1): every draw in range, the mean near 0.5 (its standard error is 0.0045 here).
  for (const std::vector<double>* d : {&a1, &a2}) {
    EXPECT_GE(*std::min_element(d->begin(), d->end()), 0.0);
    EXPECT_LT(*std::max_element(d->begin(), d->end()), 1.0);
    double mean = 0;
    for (double v : *d) mean += v / static_cast<double>(d->size());
    EXPECT_NEAR(mean, 0.5, 0.05);
  }
  lz::Tensor d = lz::aten::Call(key(7)).uniform({2, 3}, kFloat64);
  EXPECT_EQ(d.dtype(), kFloat64);
  EXPECT_EQ(d.shape(), (lz::Shape{2, 3}));
}

TEST(AtenRandom, EntriesDrawFromTheCallsKey) {
  // The same key through a random entry gives the same draws; dropout's output is its mask
  // scaled by 1 / (1 - p).
  const lz::aten::Entry& rand_like = entry("aten.rand_like.default");
  Args like{T(std::vector<double>(1000, 0.0), {1000}), Arg(), Arg(), Arg(), Arg(), Arg()};
  lz::aten::Call c1(key(99)), c2(key(99));
  std::vector<double> r1 = values(lz::aten::lower(rand_like, like, c1).tensor());
  EXPECT_EQ(values(lz::aten::lower(rand_like, like, c2).tensor()), r1);

  const lz::aten::Entry& dropout = entry("aten.native_dropout.default");
  lz::aten::Call c3(key(5));
  Arg out = lz::aten::lower(dropout, {T(std::vector<double>(4096, 3.0), {4096}), 0.25, true}, c3);
  ASSERT_TRUE(out.is_list());
  std::vector<double> y = values(out.list()[0].tensor());
  std::vector<double> mask = values(out.list()[1].tensor());
  EXPECT_EQ(out.list()[1].tensor().dtype(), kBool);
  int64_t kept = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    EXPECT_EQ(y[i], mask[i] ? 4.0 : 0.0) << i;
    kept += mask[i] != 0;
  }
  EXPECT_GT(kept, 2900);  // 3072 expected, standard deviation 28
  EXPECT_LT(kept, 3250);
}

TEST(AtenRandom, WithoutAKeyDrawsFromTheDeviceRng) {
  lz::manual_seed(7);
  std::vector<double> first = values(lz::aten::Call().uniform({64}, kFloat32));
  lz::manual_seed(7);
  lz::aten::Call call;
  EXPECT_EQ(values(call.uniform({64}, kFloat32)), first);
  // The device's RNG advances: a second draw differs.
  EXPECT_NE(values(call.uniform({64}, kFloat32)), first);
}

}  // namespace
