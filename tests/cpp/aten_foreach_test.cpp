// Test rows of the ATen table's _foreach_* entries and lerp / addcmul / addcdiv
// (src/aten/entries_foreach.cpp): what eager PyTorch 2.15 gives for each call, computed with eager
// on the CPU (aten_rows.h says how rows run). A foreach result has one expectation per item.
#include <limits>

#include "aten_rows.h"

namespace {

using namespace lz_test::aten::rows;  // dtypes, T, L, Arg(s), kNone, kInf, kNaN

}  // namespace

// The rows keep one layout (call, then expectation) that clang-format would spread over 5 lines.
// clang-format off
LZ_ATEN_ROWS(Foreach) {
  return {
      // lerp: eager's two branches (weight below 0.5 from self, from 0.5 up from end).
      {"aten.lerp.Scalar", [] { return Args{T({1, -2, 3}, {3}), T({2, 4, 10}, {3}), 0.25}; },
       {{kFloat32, {3}, {1.25, -0.5, 4.75}}}},
      {"aten.lerp.Scalar", [] { return Args{T({1, -2, 3}, {3}), T({2, 4, 10}, {3}), 0.75}; },
       {{kFloat32, {3}, {1.75, 2.5, 8.25}}}},
      {"aten.lerp.Scalar",
       [] { return Args{T({1, -2, 3}, {3}, kFloat64), T({2, 4, 10}, {3}, kFloat64), 0.5}; },
       {{kFloat64, {3}, {1.5, 1, 6.5}}}},
      {"aten.lerp.Scalar", [] { return Args{T({1, -2, 3}, {3}), T({2, 4, 10}, {3}), -1.5}; },
       {{kFloat32, {3}, {-0.5, -11, -7.5}}}},
      {"aten.lerp.Scalar", [] { return Args{T({1, -2, 3}, {3}), T({2, 4, 10}, {3}), 2}; },
       {{kFloat32, {3}, {3, 10, 17}}}},
      {"aten.lerp.Tensor",
       [] {
         return Args{T({1, -2, 3, 0}, {4}), T({2, 4, 10, 1}, {4}), T({0.25, 0.5, 0.75, -1}, {4})};
       },
       {{kFloat32, {4}, {1.25, 1, 8.25, -1}}}},
      {"aten.lerp.Tensor",
       [] {
         return Args{T({1, -2, 3, 0}, {2, 2}, kFloat64), T({2, 4, 10, 1}, {2, 2}, kFloat64),
                     T({0.1, 0.9}, {2}, kFloat64)};
       },
       {{kFloat64, {2, 2}, {1.1, 3.4000000000000004, 3.7, 0.9}}}},
      {"aten.lerp.Tensor", [] { return Args{T({1, -2}, {2}), T({2, 4}, {2}), T({0.75}, {})}; },
       {{kFloat32, {2}, {1.75, 2.5}}}},
      // addcmul is self + (value * t1) * t2, addcdiv self + (value * t1) / t2.
      {"aten.addcmul.default",
       [] { return Args{T({1, 2, 3}, {3}), T({2, -4, 0.5}, {3}), T({3, 0.25, 8}, {3}), 1}; },
       {{kFloat32, {3}, {7, 1, 7}}}},
      {"aten.addcmul.default",
       [] { return Args{T({1, 2, 3}, {3}), T({2, -4, 0.5}, {3}), T({3, 0.25, 8}, {3}), 0.5}; },
       {{kFloat32, {3}, {4, 1.5, 5}}}},
      {"aten.addcmul.default",
       [] {
         return Args{T({1, 2}, {2, 1}, kFloat64), T({2, -4}, {2}, kFloat64), T({3}, {}, kFloat64),
                     -2};
       },
       {{kFloat64, {2, 2}, {-11, 25, -10, 26}}}},
      {"aten.addcdiv.default",
       [] { return Args{T({1, 2, 3}, {3}), T({2, -4, 0.5}, {3}), T({3, 0.25, 8}, {3}), 1}; },
       {{kFloat32, {3}, {1.66666675, -14, 3.0625}}}},
      {"aten.addcdiv.default",
       [] { return Args{T({1, 2, 3}, {3}), T({2, -4, 1}, {3}), T({4, 0.5, 0}, {3}), -0.5}; },
       {{kFloat32, {3}, {0.75, 6, -kInf}}}},
      {"aten.addcdiv.default",
       [] {
         return Args{T({1, 2}, {2, 1}, kFloat64), T({2, -4}, {2}, kFloat64), T({3}, {}, kFloat64),
                     2};
       },
       {{kFloat64, {2, 2}, {2.333333333333333, -1.6666666666666665, 3.333333333333333,
                            -0.6666666666666665}}}},
      // _foreach_add / _foreach_sub: lists, a shared 0-d tensor, a scalar, a scalar per item.
      {"aten._foreach_add.List",
       [] {
         return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}),
                     L({T({2, 4, -1}, {3}), T({-1, 0.25}, {2, 1})}), 1};
       },
       {{kFloat32, {3}, {3, 2, 2}}, {kFloat32, {2, 1}, {-0.5, 4.25}}}},
      {"aten._foreach_add.List",
       [] {
         return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}),
                     L({T({2, 4, -1}, {3}), T({-1, 0.25}, {2, 1})}), 2};
       },
       {{kFloat32, {3}, {5, 6, 1}}, {kFloat32, {2, 1}, {-1.5, 4.5}}}},
      {"aten._foreach_add.List",
       [] {
         return Args{L({T({1, -2}, {2}), T({0.5, 4, -3}, {3}, kFloat64)}),
                     L({T({3, 5}, {2}), T({2, 0.5, 1}, {3}, kFloat64)}), -0.5};
       },
       {{kFloat32, {2}, {-0.5, -4.5}}, {kFloat64, {3}, {-0.5, 3.75, -3.5}}}},
      {"aten._foreach_add.Tensor",
       [] { return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}), T({2.5}, {}), 1}; },
       {{kFloat32, {3}, {3.5, 0.5, 5.5}}, {kFloat32, {2, 1}, {3, 6.5}}}},
      {"aten._foreach_add.Tensor",
       [] { return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}), T({2.5}, {}), -2}; },
       {{kFloat32, {3}, {-4, -7, -2}}, {kFloat32, {2, 1}, {-4.5, -1}}}},
      {"aten._foreach_add.Tensor",
       [] {
         return Args{L({T({1, -2}, {2}), T({0.5, 4, -3}, {3}, kFloat64)}), T({0.1}, {}, kFloat64),
                     1};
       },
       {{kFloat32, {2}, {1.10000002, -1.89999998}}, {kFloat64, {3}, {0.6, 4.1, -2.9}}}},
      {"aten._foreach_add.Scalar",
       [] { return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}), 2}; },
       {{kFloat32, {3}, {3, 0, 5}}, {kFloat32, {2, 1}, {2.5, 6}}}},
      {"aten._foreach_add.Scalar",
       [] { return Args{L({T({1, -2}, {2}), T({0.5, 4, -3}, {3}, kFloat64)}), 0.5}; },
       {{kFloat32, {2}, {1.5, -1.5}}, {kFloat64, {3}, {1, 4.5, -2.5}}}},
      {"aten._foreach_add.ScalarList",
       [] { return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}), L({1, 0.5})}; },
       {{kFloat32, {3}, {2, -1, 4}}, {kFloat32, {2, 1}, {1, 4.5}}}},
      {"aten._foreach_sub.List",
       [] {
         return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}),
                     L({T({2, 4, -1}, {3}), T({-1, 0.25}, {2, 1})}), 1};
       },
       {{kFloat32, {3}, {-1, -6, 4}}, {kFloat32, {2, 1}, {1.5, 3.75}}}},
      {"aten._foreach_sub.List",
       [] {
         return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}),
                     L({T({2, 4, -1}, {3}), T({-1, 0.25}, {2, 1})}), 0.5};
       },
       {{kFloat32, {3}, {0, -4, 3.5}}, {kFloat32, {2, 1}, {1, 3.875}}}},
      {"aten._foreach_sub.Scalar",
       [] { return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}), 2}; },
       {{kFloat32, {3}, {-1, -4, 1}}, {kFloat32, {2, 1}, {-1.5, 2}}}},
      {"aten._foreach_sub.Scalar",
       [] { return Args{L({T({1, -2}, {2}), T({0.5, 4, -3}, {3}, kFloat64)}), -0.5}; },
       {{kFloat32, {2}, {1.5, -1.5}}, {kFloat64, {3}, {1, 4.5, -2.5}}}},
      {"aten._foreach_sub.ScalarList",
       [] { return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}), L({1, 0.5})}; },
       {{kFloat32, {3}, {0, -3, 2}}, {kFloat32, {2, 1}, {0, 3.5}}}},
      // _foreach_mul / _foreach_div.
      {"aten._foreach_mul.Scalar",
       [] { return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}), 3}; },
       {{kFloat32, {3}, {3, -6, 9}}, {kFloat32, {2, 1}, {1.5, 12}}}},
      {"aten._foreach_mul.Scalar",
       [] { return Args{L({T({1, -2}, {2}), T({0.5, 4, -3}, {3}, kFloat64)}), 0.5}; },
       {{kFloat32, {2}, {0.5, -1}}, {kFloat64, {3}, {0.25, 2, -1.5}}}},
      {"aten._foreach_mul.List",
       [] {
         return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}),
                     L({T({2, 4, -1}, {3}), T({-1, 0.25}, {2, 1})})};
       },
       {{kFloat32, {3}, {2, -8, -3}}, {kFloat32, {2, 1}, {-0.5, 1}}}},
      {"aten._foreach_mul.ScalarList",
       [] { return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}), L({2, -0.5})}; },
       {{kFloat32, {3}, {2, -4, 6}}, {kFloat32, {2, 1}, {-0.25, -2}}}},
      {"aten._foreach_mul.Tensor",
       [] { return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}), T({-2}, {})}; },
       {{kFloat32, {3}, {-2, 4, -6}}, {kFloat32, {2, 1}, {-1, -8}}}},
      {"aten._foreach_div.Scalar",
       [] { return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}), 4}; },
       {{kFloat32, {3}, {0.25, -0.5, 0.75}}, {kFloat32, {2, 1}, {0.125, 1}}}},
      {"aten._foreach_div.Scalar",
       [] { return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}), 0}; },
       {{kFloat32, {3}, {kInf, -kInf, kInf}}, {kFloat32, {2, 1}, {kInf, kInf}}}},
      {"aten._foreach_div.List",
       [] {
         return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}),
                     L({T({2, 4, -1}, {3}), T({-1, 0.25}, {2, 1})})};
       },
       {{kFloat32, {3}, {0.5, -0.5, -3}}, {kFloat32, {2, 1}, {-0.5, 16}}}},
      {"aten._foreach_div.List",
       [] {
         return Args{L({T({1, -1, 0}, {3}), T({3}, {1})}), L({T({0, 0, 0}, {3}), T({7}, {1})})};
       },
       {{kFloat32, {3}, {kInf, -kInf, kNaN}}, {kFloat32, {1}, {0.428571433}}}},
      {"aten._foreach_div.ScalarList",
       [] { return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}), L({2, -0.5})}; },
       {{kFloat32, {3}, {0.5, -1, 1.5}}, {kFloat32, {2, 1}, {-1, -8}}}},
      {"aten._foreach_div.Tensor",
       [] { return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}), T({4}, {})}; },
       {{kFloat32, {3}, {0.25, -0.5, 0.75}}, {kFloat32, {2, 1}, {0.125, 1}}}},
      // _foreach_pow: tensor, scalar and per-item exponents, a number base.
      {"aten._foreach_pow.List",
       [] {
         return Args{L({T({4, 0.25, 9}, {3}), T({2, 0.001}, {2, 1})}),
                     L({T({2, 0.5, -1}, {3}), T({3, 0}, {2, 1})})};
       },
       {{kFloat32, {3}, {16, 0.5, 0.111111112}}, {kFloat32, {2, 1}, {8, 1}}}},
      {"aten._foreach_pow.Scalar",
       [] { return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}), 2}; },
       {{kFloat32, {3}, {1, 4, 9}}, {kFloat32, {2, 1}, {0.25, 16}}}},
      {"aten._foreach_pow.Scalar",
       [] { return Args{L({T({4, 0.25, 9}, {3}), T({2, 0.001}, {2, 1})}), 0.5}; },
       {{kFloat32, {3}, {2, 0.5, 3}}, {kFloat32, {2, 1}, {1.41421354, 0.0316227786}}}},
      {"aten._foreach_pow.Scalar",
       [] { return Args{L({T({1, -2}, {2}), T({0.5, 4, -3}, {3}, kFloat64)}), 3}; },
       {{kFloat32, {2}, {1, -8}}, {kFloat64, {3}, {0.125, 64, -27}}}},
      {"aten._foreach_pow.ScalarList",
       [] { return Args{L({T({4, 0.25, 9}, {3}), T({2, 0.001}, {2, 1})}), L({2, -0.5})}; },
       {{kFloat32, {3}, {16, 0.0625, 81}}, {kFloat32, {2, 1}, {0.707106769, 31.6227741}}}},
      {"aten._foreach_pow.ScalarAndTensor",
       [] { return Args{2, L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})})}; },
       {{kFloat32, {3}, {2, 0.25, 8}}, {kFloat32, {2, 1}, {1.41421354, 16}}}},
      {"aten._foreach_pow.ScalarAndTensor",
       [] { return Args{0.5, L({T({1, -2}, {2}), T({0.5, 4, -3}, {3}, kFloat64)})}; },
       {{kFloat32, {2}, {0.5, 4}}, {kFloat64, {3}, {0.7071067811865476, 0.0625, 8}}}},
      // _foreach_maximum / _foreach_clamp_min: NaN propagates from either side of maximum.
      {"aten._foreach_maximum.Scalar",
       [] { return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}), 1}; },
       {{kFloat32, {3}, {1, 1, 3}}, {kFloat32, {2, 1}, {1, 4}}}},
      {"aten._foreach_maximum.Scalar",
       [] { return Args{L({T({kNaN, 0}, {2}), T({2}, {1})}), 0.5}; },
       {{kFloat32, {2}, {kNaN, 0.5}}, {kFloat32, {1}, {2}}}},
      {"aten._foreach_maximum.Scalar",
       [] { return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}), kNaN}; },
       {{kFloat32, {3}, {kNaN, kNaN, kNaN}}, {kFloat32, {2, 1}, {kNaN, kNaN}}}},
      {"aten._foreach_maximum.List",
       [] {
         return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}),
                     L({T({2, 4, -1}, {3}), T({-1, 0.25}, {2, 1})})};
       },
       {{kFloat32, {3}, {2, 4, 3}}, {kFloat32, {2, 1}, {0.5, 4}}}},
      {"aten._foreach_maximum.List",
       [] {
         return Args{L({T({kNaN, 0}, {2}), T({2}, {1})}), L({T({1, kNaN}, {2}), T({-3}, {1})})};
       },
       {{kFloat32, {2}, {kNaN, kNaN}}, {kFloat32, {1}, {2}}}},
      {"aten._foreach_maximum.ScalarList",
       [] { return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}), L({0, 1.5})}; },
       {{kFloat32, {3}, {1, 0, 3}}, {kFloat32, {2, 1}, {1.5, 4}}}},
      {"aten._foreach_clamp_min.Scalar",
       [] { return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}), 1}; },
       {{kFloat32, {3}, {1, 1, 3}}, {kFloat32, {2, 1}, {1, 4}}}},
      {"aten._foreach_clamp_min.Scalar",
       [] { return Args{L({T({kNaN, 0}, {2}), T({2}, {1}, kFloat64)}), 0.5}; },
       {{kFloat32, {2}, {kNaN, 0.5}}, {kFloat64, {1}, {2}}}},
      {"aten._foreach_clamp_min.Scalar",
       [] { return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}), kNaN}; },
       {{kFloat32, {3}, {kNaN, kNaN, kNaN}}, {kFloat32, {2, 1}, {kNaN, kNaN}}}},
      {"aten._foreach_clamp_min.List",
       [] {
         return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}),
                     L({T({2, 4, -1}, {3}), T({-1, 0.25}, {2, 1})})};
       },
       {{kFloat32, {3}, {2, 4, 3}}, {kFloat32, {2, 1}, {0.5, 4}}}},
      {"aten._foreach_clamp_min.List",
       [] {
         return Args{L({T({kNaN, 0}, {2}), T({2}, {1})}), L({T({1, kNaN}, {2}), T({-3}, {1})})};
       },
       {{kFloat32, {2}, {kNaN, kNaN}}, {kFloat32, {1}, {2}}}},
      {"aten._foreach_clamp_min.ScalarList",
       [] { return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}), L({0, 1.5})}; },
       {{kFloat32, {3}, {1, 0, 3}}, {kFloat32, {2, 1}, {1.5, 4}}}},
      // _foreach_lerp: weights on both sides of 0.5.
      {"aten._foreach_lerp.List",
       [] {
         return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}),
                     L({T({0.5, 2, 4}, {3}), T({3, -8}, {2, 1})}),
                     L({T({0.25, 0.5, 0.75}, {3}), T({-1, 2}, {2, 1})})};
       },
       {{kFloat32, {3}, {0.875, 0, 3.75}}, {kFloat32, {2, 1}, {-2, -20}}}},
      {"aten._foreach_lerp.Scalar",
       [] {
         return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}),
                     L({T({0.5, 2, 4}, {3}), T({3, -8}, {2, 1})}), 0.25};
       },
       {{kFloat32, {3}, {0.875, -1, 3.25}}, {kFloat32, {2, 1}, {1.125, 1}}}},
      {"aten._foreach_lerp.Scalar",
       [] {
         return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}),
                     L({T({0.5, 2, 4}, {3}), T({3, -8}, {2, 1})}), 0.75};
       },
       {{kFloat32, {3}, {0.625, 1, 3.75}}, {kFloat32, {2, 1}, {2.375, -5}}}},
      {"aten._foreach_lerp.ScalarList",
       [] {
         return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}),
                     L({T({0.5, 2, 4}, {3}), T({3, -8}, {2, 1})}), L({0.25, 0.75})};
       },
       {{kFloat32, {3}, {0.875, -1, 3.25}}, {kFloat32, {2, 1}, {2.375, -5}}}},
      {"aten._foreach_lerp.List",
       [] {
         return Args{L({T({1, -2}, {2}), T({0.5, 4, -3}, {3}, kFloat64)}),
                     L({T({3, 5}, {2}), T({2, 0.5, 1}, {3}, kFloat64)}),
                     L({T({0.75, 0.25}, {2}), T({0.5, 0.1, 0.9}, {3}, kFloat64)})};
       },
       {{kFloat32, {2}, {2.5, -0.25}}, {kFloat64, {3}, {1.25, 3.65, 0.6000000000000001}}}},
      // _foreach_addcmul / _foreach_addcdiv: one value, one per item, a 1-D tensor of them.
      {"aten._foreach_addcmul.Scalar",
       [] {
         return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}),
                     L({T({2, 4, -1}, {3}), T({-1, 0.25}, {2, 1})}),
                     L({T({0.5, 2, 4}, {3}), T({3, -8}, {2, 1})}), 1};
       },
       {{kFloat32, {3}, {2, 6, -1}}, {kFloat32, {2, 1}, {-2.5, 2}}}},
      {"aten._foreach_addcmul.Scalar",
       [] {
         return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}),
                     L({T({2, 4, -1}, {3}), T({-1, 0.25}, {2, 1})}),
                     L({T({0.5, 2, 4}, {3}), T({3, -8}, {2, 1})}), -0.5};
       },
       {{kFloat32, {3}, {0.5, -6, 5}}, {kFloat32, {2, 1}, {2, 5}}}},
      {"aten._foreach_addcmul.ScalarList",
       [] {
         return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}),
                     L({T({2, 4, -1}, {3}), T({-1, 0.25}, {2, 1})}),
                     L({T({0.5, 2, 4}, {3}), T({3, -8}, {2, 1})}), L({2, 0.25})};
       },
       {{kFloat32, {3}, {3, 14, -5}}, {kFloat32, {2, 1}, {-0.25, 3.5}}}},
      {"aten._foreach_addcmul.Tensor",
       [] {
         return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}),
                     L({T({2, 4, -1}, {3}), T({-1, 0.25}, {2, 1})}),
                     L({T({0.5, 2, 4}, {3}), T({3, -8}, {2, 1})}), T({2, 0.25}, {2})};
       },
       {{kFloat32, {3}, {3, 14, -5}}, {kFloat32, {2, 1}, {-0.25, 3.5}}}},
      {"aten._foreach_addcdiv.Scalar",
       [] {
         return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}),
                     L({T({2, 4, -1}, {3}), T({-1, 0.25}, {2, 1})}),
                     L({T({0.5, 2, 4}, {3}), T({3, -8}, {2, 1})}), 1};
       },
       {{kFloat32, {3}, {5, 0, 2.75}}, {kFloat32, {2, 1}, {0.166666657, 3.96875}}}},
      {"aten._foreach_addcdiv.Scalar",
       [] {
         return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}),
                     L({T({2, 4, -1}, {3}), T({-1, 0.25}, {2, 1})}),
                     L({T({4, 0.25, 9}, {3}), T({2, 0.001}, {2, 1})}), 0.5};
       },
       {{kFloat32, {3}, {1.25, 6, 2.94444442}}, {kFloat32, {2, 1}, {0.25, 129}}}},
      {"aten._foreach_addcdiv.ScalarList",
       [] {
         return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}),
                     L({T({2, 4, -1}, {3}), T({-1, 0.25}, {2, 1})}),
                     L({T({0.5, 2, 4}, {3}), T({3, -8}, {2, 1})}), L({2, -0.25})};
       },
       {{kFloat32, {3}, {9, 2, 2.5}}, {kFloat32, {2, 1}, {0.583333313, 4.0078125}}}},
      {"aten._foreach_addcdiv.Tensor",
       [] {
         return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}),
                     L({T({2, 4, -1}, {3}), T({-1, 0.25}, {2, 1})}),
                     L({T({0.5, 2, 4}, {3}), T({3, -8}, {2, 1})}), T({2, -0.25}, {2}, kFloat64)};
       },
       {{kFloat32, {3}, {9, 2, 2.5}}, {kFloat32, {2, 1}, {0.583333313, 4.0078125}}}},
      // _foreach_copy: each item takes src's values in its own dtype.
      {"aten._foreach_copy.default",
       [] {
         return Args{L({T({1, -2, 3}, {3}), T({0.5, 4}, {2, 1})}),
                     L({T({2, 4, -1}, {3}), T({-1, 0.25}, {2, 1})}), false};
       },
       {{kFloat32, {3}, {2, 4, -1}}, {kFloat32, {2, 1}, {-1, 0.25}}}},
      {"aten._foreach_copy.default",
       [] {
         return Args{L({T({1, 2}, {2}), T({3}, {1}, kFloat64)}),
                     L({T({0.1, 2.5}, {2}, kFloat64), T({0.1}, {1})}), false};
       },
       {{kFloat32, {2}, {0.100000001, 2.5}}, {kFloat64, {1}, {0.10000000149011612}}}},
      // Unary foreach ops.
      {"aten._foreach_neg.default",
       [] { return Args{L({T({1, -2, 0}, {3}), T({0.5, -4}, {2}, kFloat64)})}; },
       {{kFloat32, {3}, {-1, 2, 0}}, {kFloat64, {2}, {-0.5, 4}}}},
      {"aten._foreach_sqrt.default",
       [] { return Args{L({T({4, 2, -1}, {3}), T({0, 0.25}, {2}, kFloat64)})}; },
       {{kFloat32, {3}, {2, 1.41421354, kNaN}}, {kFloat64, {2}, {0, 0.5}}}},
      {"aten._foreach_reciprocal.default",
       [] { return Args{L({T({4, -0.5, 0}, {3}), T({-0.0, 3}, {2}, kFloat64)})}; },
       {{kFloat32, {3}, {0.25, -2, kInf}}, {kFloat64, {2}, {-kInf, 0.3333333333333333}}}},
      {"aten._foreach_abs.default",
       [] { return Args{L({T({1, -2, -0.0}, {3}), T({-kInf, 4}, {2}, kFloat64)})}; },
       {{kFloat32, {3}, {1, 2, 0}}, {kFloat64, {2}, {kInf, 4}}}},
      {"aten._foreach_exp.default",
       [] { return Args{L({T({0, 1, -kInf}, {3}), T({-1, 2}, {2}, kFloat64)})}; },
       {{kFloat32, {3}, {1, 2.71828175, 0}},
        {kFloat64, {2}, {0.36787944117144233, 7.38905609893065}}}},
      {"aten._foreach_sign.default",
       [] { return Args{L({T({3, -0.5, 0, kNaN}, {4}), T({-kInf, 2}, {2}, kFloat64)})}; },
       {{kFloat32, {4}, {1, -1, 0, 0}}, {kFloat64, {2}, {-1, 1}}}},
  };
}
// clang-format on
