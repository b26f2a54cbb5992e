// Test rows of the ATen table's sort, topk and scan entries (src/aten/entries_ordering.cpp): what
// eager PyTorch 2.15 gives for each call, computed with eager and written as literals (aten_rows.h
// says how rows run).
#include <cmath>
#include <limits>

#include "aten_rows.h"

namespace {

using namespace lz_test::aten::rows;  // dtypes, T, L, Arg(s), kNone, kInf, kNaN

}  // namespace

LZ_ATEN_ROWS(Ordering) {
  return {
      // ties keep input order; NaN last
      {"aten.sort.default",
       [] {
         return Args{T({3, kNaN, 1, 3, 0, 0, 1, 2, 2, -kInf, kNaN, kNaN, 5, 2}, {2, 7}), -1, false};
       },
       {{kFloat32, {2, 7}, {0, 0, 1, 1, 3, 3, kNaN, -kInf, 2, 2, 2, 5, kNaN, kNaN}},
        {kInt64, {2, 7}, {4, 5, 2, 6, 0, 3, 1, 2, 0, 1, 6, 5, 3, 4}}}},
      // descending: NaN first, ties still in input order
      {"aten.sort.default",
       [] {
         return Args{T({3, kNaN, 1, 3, 0, 0, 1, 2, 2, -kInf, kNaN, kNaN, 5, 2}, {2, 7}), 1, true};
       },
       {{kFloat32, {2, 7}, {kNaN, 3, 3, 1, 1, 0, 0, kNaN, kNaN, 5, 2, 2, 2, -kInf}},
        {kInt64, {2, 7}, {1, 0, 3, 2, 6, 4, 5, 3, 4, 5, 0, 1, 6, 2}}}},
      // bool
      {"aten.sort.default",
       [] {
         return Args{T({1, 0, 1, 0}, {4}, kBool), 0, false};
       },
       {{kBool, {4}, {0, 0, 1, 1}}, {kInt64, {4}, {1, 3, 0, 2}}}},
      // 0-d
      {"aten.sort.default",
       [] {
         return Args{T({7}, {}, kInt64), -1, false};
       },
       {{kInt64, {}, {7}}, {kInt64, {}, {0}}}},
      // stable=True, dim 0, descending, int32
      {"aten.sort.stable",
       [] {
         return Args{T({5, 1, 1, 1, 5, 0}, {3, 2}, kInt32), true, 0, true};
       },
       {{kInt32, {3, 2}, {5, 1, 5, 1, 1, 0}}, {kInt64, {3, 2}, {0, 0, 2, 1, 1, 2}}}},
      // stable=None
      {"aten.sort.stable",
       [] {
         return Args{T({2, kNaN, 2, -1}, {4}), Arg(), -1, false};
       },
       {{kFloat32, {4}, {-1, 2, 2, kNaN}}, {kInt64, {4}, {3, 0, 2, 1}}}},
      // largest; NaN is the largest
      {"aten.topk.default",
       [] {
         return Args{T({1, 4, 3, 2, 5, 0, -1, 3, 2, kNaN}, {2, 5}), 2, -1, true, true};
       },
       {{kFloat32, {2, 2}, {5, 4, kNaN, 3}}, {kInt64, {2, 2}, {4, 1, 4, 2}}}},
      // smallest along dim 0, int64; a tie in input order
      {"aten.topk.default",
       [] {
         return Args{T({3, 1, 1, 2, 1, 0}, {3, 2}, kInt64), 2, 0, false, true};
       },
       {{kInt64, {2, 2}, {1, 0, 1, 1}}, {kInt64, {2, 2}, {1, 2, 2, 0}}}},
      // bool sums in int64
      {"aten.cumsum.default",
       [] {
         return Args{T({1, 0, 1, 1, 1, 0}, {2, 3}, kBool), 1, Arg()};
       },
       {{kInt64, {2, 3}, {1, 1, 2, 1, 2, 2}}}},
      // int32 gives int64; negative dim
      {"aten.cumsum.default",
       [] {
         return Args{T({1, 2, 3, 4}, {2, 2}, kInt32), -2, Arg()};
       },
       {{kInt64, {2, 2}, {1, 2, 4, 6}}}},
      // dtype float64 casts first
      {"aten.cumsum.default",
       [] {
         return Args{T({0.5, 0.25, 9.99999994e-09}, {3}), 0, kFloat64};
       },
       {{kFloat64, {3}, {0.5, 0.75, 0.7500000099999999}}}},
      // int32 multiplies in int64
      {"aten.cumprod.default",
       [] {
         return Args{T({2, -3, 4, 1, 0, 5}, {2, 3}, kInt32), 1, Arg()};
       },
       {{kInt64, {2, 3}, {2, -6, -24, 1, 0, 0}}}},
      // a zero
      {"aten.cumprod.default",
       [] {
         return Args{T({1.5, 0, 2, -1}, {4}), -1, Arg()};
       },
       {{kFloat32, {4}, {1.5, 0, 0, 0}}}},
      // bool with dtype float32
      {"aten.cumprod.default",
       [] {
         return Args{T({1, 1, 0}, {3}, kBool), 0, kFloat32};
       },
       {{kFloat32, {3}, {1, 1, 0}}}},
  };
}
