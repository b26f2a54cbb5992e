// Test rows of the ATen table's indexing entries (src/aten/entries_indexing.cpp): what eager
// PyTorch 2.15 gives for each call (aten_rows.h says how rows run), and the reasons the entries'
// conditions give.
#include <limits>

#include "aten_rows.h"

namespace {

using namespace lz_test::aten::rows;  // dtypes, T, L, Arg(s), kNone, kInf, kNaN

// x of this shape holding 1, 2, 3, ...
Arg iota(std::vector<int64_t> shape, lz::DType dtype = kFloat32) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v;
  for (int64_t i = 1; i <= n; ++i) v.push_back(static_cast<double>(i));
  return T(v, shape, dtype);
}

}  // namespace

// The rows keep one layout (call, then expectation) that clang-format would spread over 5 lines.
// clang-format off
LZ_ATEN_ROWS(Indexing) {
  return {
      {"aten.index_select.default", [] { return Args{iota({2, 3}), -1, T({2, 0}, {2}, kInt32)}; },
       {{kFloat32, {2, 2}, {3, 1, 6, 4}}}},
      // A 0-d tensor, and a 0-d index (a 1-element result).
      {"aten.index_select.default", [] { return Args{T({5}, {}), 0, T({0}, {}, kInt64)}; },
       {{kFloat32, {}, {5}}}},
      {"aten.index_select.default", [] { return Args{iota({3}, kInt64), 0, T({1}, {}, kInt64)}; },
       {{kInt64, {1}, {2}}}},
      // The index may be smaller than the tensor in the other dims.
      {"aten.gather.default",
       [] { return Args{iota({2, 3}), 1, T({2, 0}, {1, 2}, kInt64), false}; },
       {{kFloat32, {1, 2}, {3, 1}}}},
      {"aten.gather.default",
       [] { return Args{iota({2, 2}), -2, T({1, 0}, {1, 2}, kInt32), false}; },
       {{kFloat32, {1, 2}, {3, 2}}}},
      {"aten.gather.default", [] { return Args{T({5}, {}), 0, T({0, 0}, {2}, kInt64), false}; },
       {{kFloat32, {2}, {5, 5}}}},
      {"aten.scatter.value",
       [] { return Args{T({0, 0, 0, 0, 0, 0}, {2, 3}), -1, T({0, 2}, {2, 1}, kInt64), 5}; },
       {{kFloat32, {2, 3}, {5, 0, 0, 0, 0, 5}}}},
      {"aten.scatter.value",
       [] { return Args{T({1, 5, 3}, {3}, kInt64), 0, T({0, 2}, {2}, kInt64), 2.7}; },
       {{kInt64, {3}, {2, 5, 2}}}},
      {"aten.scatter.value", [] { return Args{T({1}, {}), 0, T({0}, {}, kInt64), 9}; },
       {{kFloat32, {}, {9}}}},
      {"aten.scatter.value",
       [] { return Args{T({0, 0}, {2}, kBool), 0, T({1}, {1}, kInt64), true}; },
       {{kBool, {2}, {0, 1}}}},
      // Repeated indices add; src is cut to the index's shape.
      {"aten.scatter_add.default",
       [] { return Args{T({0, 0, 0}, {3}), 0, T({0, 0, 2}, {3}, kInt64), T({1, 2, 3, 4}, {4})}; },
       {{kFloat32, {3}, {3, 0, 3}}}},
      {"aten.scatter_add.default",
       [] { return Args{iota({2}, kInt32), 0, T({}, {0}, kInt64), T({}, {0}, kInt32)}; },
       {{kInt32, {2}, {1, 2}}}},
      // scatter.src: the index may be smaller than self and src in any dim (src is cut to it);
      // repeated indices along dim: the last write, as eager CPU; 0-d self, index or src; no index.
      {"aten.scatter.src",
       [] {
         return Args{T({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {3, 4}), 0,
                     T({2, 0, 0, 1}, {2, 2}, kInt64), T({1, 2, 3, 4, 5, 6}, {2, 3})};
       },
       {{kFloat32, {3, 4}, {4, 2, 0, 0, 0, 5, 0, 0, 1, 0, 0, 0}}}},
      {"aten.scatter.src",
       [] {
         return Args{T({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {3, 4}), -1,
                     T({3, 0, 1}, {1, 3}, kInt64), T({1, 2, 3, 4, 5, 6}, {2, 3})};
       },
       {{kFloat32, {3, 4}, {2, 3, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}}}},
      {"aten.scatter.src",
       [] {
         return Args{T({0, 0, 0, 0, 0, 0}, {3, 2}), 0, T({0, 0, 0, 0, 0, 0}, {3, 2}, kInt64),
                     T({1, 2, 3, 4, 5, 6}, {3, 2})};
       },
       {{kFloat32, {3, 2}, {5, 6, 0, 0, 0, 0}}}},
      {"aten.scatter.src",
       [] {
         return Args{T({1, 2, 3}, {3}, kInt32), 0, T({2, 0}, {2}, kInt32), T({7, 8}, {2}, kInt32)};
       },
       {{kInt32, {3}, {8, 2, 7}}}},
      {"aten.scatter.src",
       [] { return Args{T({0, 0, 0}, {3}, kBool), 0, T({1}, {1}, kInt64), T({1}, {1}, kBool)}; },
       {{kBool, {3}, {0, 1, 0}}}},
      {"aten.scatter.src",
       [] { return Args{T({1}, {}, kFloat64), 0, T({0}, {}, kInt64), T({5}, {}, kFloat64)}; },
       {{kFloat64, {}, {5}}}},
      {"aten.scatter.src", [] { return Args{T({1}, {1}), 0, T({0}, {}, kInt64), T({5}, {})}; },
       {{kFloat32, {1}, {5}}}},
      {"aten.scatter.src", [] { return Args{T({1, 2}, {2}), 0, T({}, {0}, kInt64), T({5}, {1})}; },
       {{kFloat32, {2}, {1, 2}}}},
      // One index tensor (negative values count from the end), several, None for a whole dim.
      {"aten.index.Tensor",
       [] { return Args{iota({2, 3}), L({Arg(), T({-1, 0}, {2}, kInt64)})}; },
       {{kFloat32, {2, 2}, {3, 1, 6, 4}}}},
      {"aten.index.Tensor", [] { return Args{iota({2, 3}), L({T({1, 0}, {2, 1}, kInt32)})}; },
       {{kFloat32, {2, 1, 3}, {4, 5, 6, 1, 2, 3}}}},
      {"aten.index.Tensor",
       [] { return Args{iota({2, 3}), L({T({0, 1}, {2}, kInt64), T({2, -3}, {2}, kInt64)})}; },
       {{kFloat32, {2}, {3, 4}}}},
      {"aten.index_put.default",
       [] { return Args{T({0, 0, 0, 0}, {4}), L({T({0, 0, -1}, {3}, kInt64)}),
                        T({1, 2, 3}, {3}), true}; },
       {{kFloat32, {4}, {3, 0, 0, 3}}}},
      {"aten.index_put.default",
       [] { return Args{T({1, 1}, {2}, kInt32), L({T({1}, {1}, kInt64)}), T({2}, {}, kInt32),
                        true}; },
       {{kInt32, {2}, {1, 3}}}},
      // On bool, accumulating is "or".
      {"aten.index_put.default",
       [] { return Args{T({0, 0, 0}, {3}, kBool), L({T({1, 1}, {2}, kInt64)}),
                        T({1, 0}, {2}, kBool), true}; },
       {{kBool, {3}, {0, 1, 0}}}},
      {"aten.index_put.default",
       [] { return Args{T({0, 0, 0, 0}, {2, 2}, kBool),
                        L({T({0, 1}, {2}, kInt64), T({1, 1}, {2}, kInt64)}), T({1}, {1}, kBool),
                        true}; },
       {{kBool, {2, 2}, {0, 1, 0, 1}}}},
      {"aten.index_put.default",
       [] { return Args{T({0, 0, 0, 0}, {2, 2}),
                        L({T({0, 0}, {2}, kInt64), T({1, 1}, {2}, kInt64)}), T({1, 2}, {2}),
                        true}; },
       {{kFloat32, {2, 2}, {0, 3, 0, 0}}}},
      {"aten.index_put.default",
       [] { return Args{T({0, 0, 0, 0}, {2, 2}), L({Arg(), T({1, 1}, {2}, kInt64)}), T({1}, {1}),
                        true}; },
       {{kFloat32, {2, 2}, {0, 2, 0, 2}}}},
      // index_add: repeated indices accumulate; alpha in self's dtype (2.5 on integers is 2);
      // alpha 0 still multiplies (NaN); bool is "or" (alpha False adds nothing); 0-d self; no
      // index.
      {"aten.index_add.default",
       [] {
         return Args{T({0, 0, 0, 0, 0, 0}, {3, 2}), 0, T({0, 0, 2}, {3}, kInt64),
                     T({1, 2, 3, 4, 5, 6}, {3, 2}), 2};
       },
       {{kFloat32, {3, 2}, {8, 12, 0, 0, 10, 12}}}},
      {"aten.index_add.default",
       [] {
         return Args{T({0, 0, 0, 0, 0, 0}, {3, 2}), -1, T({1}, {1}, kInt32), T({1, 2, 3}, {3, 1}),
                     1};
       },
       {{kFloat32, {3, 2}, {0, 1, 0, 2, 0, 3}}}},
      {"aten.index_add.default",
       [] {
         return Args{T({1, 2, 3, 4}, {2, 2}, kInt64), 1, T({0, 0}, {2}, kInt64),
                     T({3, 3, 3, 3}, {2, 2}, kInt64), 2.5};
       },
       {{kInt64, {2, 2}, {13, 2, 15, 4}}}},
      {"aten.index_add.default",
       [] { return Args{T({1, 2}, {2}), 0, T({1}, {1}, kInt64), T({kNaN}, {1}), 0}; },
       {{kFloat32, {2}, {1, kNaN}}}},
      {"aten.index_add.default",
       [] {
         return Args{T({0, 0, 1}, {3}, kBool), 0, T({0, 0}, {2}, kInt64), T({1, 0}, {2}, kBool),
                     true};
       },
       {{kBool, {3}, {1, 0, 1}}}},
      {"aten.index_add.default",
       [] {
         return Args{T({0, 0, 1}, {3}, kBool), 0, T({0}, {1}, kInt64), T({1}, {1}, kBool), false};
       },
       {{kBool, {3}, {0, 0, 1}}}},
      {"aten.index_add.default",
       [] { return Args{T({1}, {}, kFloat64), 0, T({0}, {}, kInt64), T({2}, {}, kFloat64), -1.5}; },
       {{kFloat64, {}, {-2}}}},
      {"aten.index_add.default",
       [] { return Args{T({1, 2}, {2}, kInt32), 0, T({}, {0}, kInt64), T({}, {0}, kInt32), 1}; },
       {{kInt32, {2}, {1, 2}}}},
      {"aten.embedding.default",
       [] { return Args{iota({3, 2}), T({2, 0}, {2, 1}, kInt32), -1, false, false}; },
       {{kFloat32, {2, 1, 2}, {5, 6, 1, 2}}}},
  };
}
// clang-format on

namespace {

using lz::aten::TensorMeta;
using lz::aten::why_not;

TEST(AtenIndexing, ConditionsNameTheirReasons) {
  Arg x = meta(kFloat32, {4});
  Arg i = meta(kInt64, {2});
  // A mask's selection has a data-dependent size; there must be an index tensor.
  EXPECT_EQ(why_not("aten.index.Tensor", {x, L({meta(kBool, {4})})}),
            "a bool index (data-dependent shape)");
  EXPECT_EQ(why_not("aten.index.Tensor", {x, L({Arg()})}), "no index tensor");
  EXPECT_EQ(why_not("aten.index.Tensor", {x, L({i})}), std::nullopt);
  EXPECT_EQ(why_not("aten.index_put.default", {x, L({i}), meta(kFloat32, {2}), false}),
            "accumulate=False (duplicate indices are unordered in eager)");
  EXPECT_EQ(why_not("aten.gather.default", {x, 0, i, true}), "sparse_grad");
  // scatter.src and index_add: a source of self's dtype, an integer index (eager raises).
  EXPECT_EQ(why_not("aten.scatter.src", {x, 0, i, meta(lz::kFloat64, {2})}),
            "source dtype float64, self float32");
  EXPECT_EQ(why_not("aten.scatter.src", {x, 0, meta(kFloat32, {2}), x}), "index dtype float32");
  EXPECT_EQ(why_not("aten.scatter.src", {x, 0, meta(kInt64, {1, 2}), x}), "index of 2 dims for 1");
  EXPECT_EQ(why_not("aten.scatter.src", {x, 0, meta(kInt64, {}), meta(kFloat32, {})}),
            std::nullopt);
  EXPECT_EQ(why_not("aten.index_add.default", {x, 0, i, meta(kInt32, {2}), 1}),
            "source dtype int32, self float32");
  EXPECT_EQ(why_not("aten.index_add.default",
                    {meta(kFloat32, {2, 2}), 0, meta(kInt64, {1, 1}), meta(kFloat32, {1, 2}), 1}),
            "a 2-d index");
}

}  // namespace
