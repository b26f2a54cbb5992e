// Test rows of the ATen table's convolution, pooling, loss, batch norm, embedding and attention
// entries (src/aten/entries_nn.cpp): what eager PyTorch 2.15 gives for each call, computed with
// eager and written as literals (aten_rows.h says how rows run).
#include <cmath>
#include <limits>

#include "aten_rows.h"

namespace {

using namespace lz_test::aten::rows;  // dtypes, T, L, Arg(s), kNone, kInf, kNaN

}  // namespace

LZ_ATEN_ROWS(Nn) {
  return {
      // 1-D, stride 2, padding 1, bias
      {"aten.convolution.default",
       [] {
         return Args{T({-3, 0, 1, 0, 0, 3, -3, 2, -3, 0}, {1, 2, 5}),
                     T({-1, 0, 1, -1, 1, -3, 3, 2, 1, 1, -1, 0}, {3, 2, 2}),
                     T({2, 0, 0}, {3}),
                     L({2}),
                     L({1}),
                     L({1}),
                     false,
                     L({0}),
                     1};
       },
       {{kFloat32, {1, 3, 3}, {-1, -3, -1, 15, -8, -9, -3, 4, 3}}}},
      // 2-D, groups 2, per-dim padding and dilation, no bias
      {"aten.convolution.default",
       [] {
         return Args{
             T({0, 3, 2, 0, -2, -3, -1, 1, 2, -3, -3, 2, 2, -1, 1, -3, 2, -3, 1, -3, -3, 3, -1, -1},
               {1, 2, 3, 4}),
             T({-2, 2, -1, 0, 3, -2, -2, 0}, {2, 1, 2, 2}),
             Arg(),
             L({1, 1}),
             L({1, 0}),
             L({1, 2}),
             false,
             L({0, 0}),
             2};
       },
       {{kFloat32, {1, 2, 4, 2}, {0, -3, 6, -3, 0, 11, -10, 10, -4, 2, 0, 9, 10, -9, -7, 11}}}},
      // transposed 2-D in float64, output padding 1
      {"aten.convolution.default",
       [] {
         return Args{T({-1, -3, 3, 1, 1, -3, 3, 1, 2, 3, -2, -1}, {1, 3, 2, 2}, kFloat64),
                     T({2, 3, 3, -2, -2, 1, 3, -2, 0, 0, 0, 3}, {3, 1, 2, 2}, kFloat64),
                     T({-2}, {1}, kFloat64),
                     L({2, 2}),
                     L({0, 0}),
                     L({1, 1}),
                     true,
                     L({1, 1}),
                     1};
       },
       {{kFloat64, {1, 1, 5, 5}, {-6, -4, -2, -14, -2, -2, 4,  -20, 19, -2, -2, 10, -2,
                                  2,  -2, 16, -20, 4,  -9, -2, -2,  -2, -2, -2, -2}}}},
      // transposed 1-D, groups 2
      {"aten.convolution.default",
       [] {
         return Args{T({1, 2, 2, 1, 1, 0}, {1, 2, 3}),
                     T({-1, -3, 1, -2, -1, 1}, {2, 1, 3}),
                     Arg(),
                     L({2}),
                     L({1}),
                     L({1}),
                     true,
                     L({1}),
                     2};
       },
       {{kFloat32, {1, 2, 6}, {-3, -1, -6, 0, -6, 2, -1, -1, -1, 1, 0, 0}}}},
      // 2-D; the weight gradient masked out (None)
      {"aten.convolution_backward.default",
       [] {
         return Args{
             T({0, -1, 0, 0, 1, 0, -2, 0, -2, -1, -3, -3, 1, 1, 3, 2, -1, 2, 1, -1, 2, 1, 1, 0},
               {2, 3, 2, 2}),
             T({1,  -1, -3, 1, 0,  0,  -1, 0, 0, -2, 2,  3, 2, -1, 3, -2, 1,  3,
                -2, 2,  2,  1, -1, -1, -1, 1, 1, 1,  -3, 3, 2, -3, 3, -2, -1, 1},
               {2, 2, 3, 3}),
             T({2, -3, 3, -1, 3, -3, 1, 3, 1, -2, 3, 2, -2, 3, 0, 0, 0, -3, 2, -2, 3, -2, -1, 3},
               {3, 2, 2, 2}),
             L({3}),
             L({1, 1}),
             L({0, 0}),
             L({1, 1}),
             false,
             L({0, 0}),
             1,
             L({true, false, true})};
       },
       {{kFloat32, {2, 2, 3, 3}, {1,  2,   6,  -3, 14, 12, -12, -4, 6,   -8, 1,  5,
                                  -3, -15, 0,  3,  -6, -9, 1,   -3, -10, 11, -7, -3,
                                  14, 0,   -4, 11, -8, 1,  9,   9,  -3,  2,  14, 6}},
        kNone,
        {kFloat32, {3}, {6, 0, -5}}}},
      // 1-D, stride 2, groups 2; no bias gradient
      {"aten.convolution_backward.default",
       [] {
         return Args{T({-3, 2, 3, 2, -1, 0}, {1, 2, 3}),
                     T({3, 3, -3, -2, -1, -1, -1, -3, -1, -3}, {1, 2, 5}),
                     T({3, 0, 0, 1}, {2, 1, 2}),
                     Arg(),
                     L({2}),
                     L({1}),
                     L({1}),
                     false,
                     L({0}),
                     2,
                     L({true, true, false})};
       },
       {{kFloat32, {1, 2, 5}, {0, 6, 0, 9, 0, 2, 0, -1, 0, 0}},
        {kFloat32, {2, 1, 2}, {0, -18, 1, 1}},
        kNone}},
      // transposed 1-D whose output padding (1) reaches the stride (1): dilation 2
      {"aten.convolution_backward.default",
       [] {
         return Args{T({3, -3, 2, -1, -2, 3}, {1, 1, 6}),
                     T({-1, 3, -3}, {1, 1, 3}),
                     T({-2, 0}, {1, 1, 2}),
                     L({1}),
                     L({1}),
                     L({0}),
                     L({2}),
                     true,
                     L({1}),
                     1,
                     L({true, true, true})};
       },
       {{kFloat32, {1, 1, 3}, {-6, 6, -4}}, {kFloat32, {1, 1, 2}, {-18, 1}}, {kFloat32, {1}, {2}}}},
      // transposed 2-D, stride 2: the weight gradient only
      {"aten.convolution_backward.default",
       [] {
         return Args{T({1,  -3, -2, -3, -3, 1, 2,  1, -1, 2, 1,  0, -2,
                        -2, -3, -1, -2, 1,  3, -3, 0, 3,  2, -1, -1},
                       {1, 1, 5, 5}),
                     T({0, 0, -2, -1, 2, 3, -1, 3}, {1, 2, 2, 2}),
                     T({2, -3, 1, -1, -2, 3, 0, 3}, {2, 1, 2, 2}),
                     L({1}),
                     L({2, 2}),
                     L({0, 0}),
                     L({1, 1}),
                     true,
                     L({1, 1}),
                     1,
                     L({false, true, false})};
       },
       {kNone, {kFloat32, {2, 1, 2, 2}, {0, 2, 1, 1, -11, -21, 9, 12}}, kNone}},
      // padding 1, ceil_mode
      {"aten.max_pool2d_with_indices.default",
       [] {
         return Args{
             T({-1, 9, 5, 3, -4, 6, -4, 4, 0, 8, -7, 7, -6, 6, 5, -7, -9, 4, -7, 8}, {1, 1, 4, 5}),
             L({2, 2}),
             L({2, 2}),
             L({1, 1}),
             L({1, 1}),
             true};
       },
       {{kFloat32, {1, 1, 3, 3}, {-1, 9, 3, 6, 7, 8, -7, 4, 8}},
        {kInt64, {1, 1, 3, 3}, {0, 1, 3, 5, 11, 9, 15, 17, 19}}}},
      // unbatched, one kernel size, stride [] (the kernel's), padding 0 as an int
      {"aten.max_pool2d_with_indices.default",
       [] {
         return Args{T({9, -5, 2, 0, -8, 6, 7, 2, -8, 7, -5, -4, -7, 1, 7, 5, -4, 4}, {2, 3, 3}),
                     L({2}),
                     L({}),
                     0,
                     1,
                     false};
       },
       {{kFloat32, {2, 1, 1}, {9, 7}}, {kInt64, {2, 1, 1}, {0, 0}}}},
      // overlapping windows sharing a maximum: gradients add
      {"aten.max_pool2d_with_indices_backward.default",
       [] {
         return Args{T({2, 2, -1, -2}, {1, 1, 2, 2}),
                     T({1, 5, 5, 0, 2, 5, 3, 4, 0, 1, 9, 9, 8, 1, 9, 0}, {1, 1, 4, 4}),
                     L({3, 3}),
                     L({1, 1}),
                     L({0, 0}),
                     L({1, 1}),
                     false,
                     T({10, 10, 10, 10}, {1, 1, 2, 2}, kInt64)};
       },
       {{kFloat32, {1, 1, 4, 4}, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0}}}},
      // ceil_mode, padding, count_include_pad False
      {"aten.avg_pool2d.default",
       [] {
         return Args{T({3, -1, 3,  0, 3,  -3, 1,  1, -1, -2, -1, -1, 3, -3, -2, -3, -1, 2,  -1, 2,
                        1, -3, -2, 3, -1, 0,  -3, 0, 1,  -2, 2,  -2, 1, 3,  2,  3,  0,  -2, 0,  -3},
                       {1, 2, 4, 5}),
                     L({3, 2}),
                     L({2, 2}),
                     L({1, 1}),
                     true,
                     false,
                     Arg()};
       },
       {{kFloat32,
         {1, 2, 3, 3},
         {0, 1, 0, -2.33333325, 0.833333313, -1.16666663, -3, 0.5, 0.5, 0.5, -2, 0.25, 1.66666663,
          -1, 0.166666672, 3, -1, -1.5}}}},
      // divisor_override 3, float64
      {"aten.avg_pool2d.default",
       [] {
         return Args{T({1, 1, 1, -3, 0, 3, -3, -2, 1}, {1, 1, 3, 3}, kFloat64),
                     L({2, 2}),
                     L({1, 1}),
                     L({0, 0}),
                     false,
                     true,
                     3};
       },
       {{kFloat64,
         {1, 1, 2, 2},
         {-0.3333333333333333, 1.6666666666666667, -2.6666666666666665, 0.6666666666666666}}}},
      // batch of 3, ceil_mode, padding, count_include_pad False
      {"aten.avg_pool2d_backward.default",
       [] {
         return Args{T({-2, -1, -2, 1, -1, 3, 2,  2, 2, 2, 1,  0, 2, 0,
                        -3, 2,  -2, 1, 0,  0, -3, 1, 2, 1, -2, 3, -2},
                       {3, 1, 3, 3}),
                     T({2, 2,  3,  -1, 0, -3, 2,  3,  -1, -1, -3, -3, 3, -1, -3, 2,  -2, 0, 0,  1,
                        0, -1, 2,  -3, 2, -1, -2, 2,  3,  -3, 2,  -3, 0, 0,  1,  -3, 2,  3, -2, 0,
                        1, -1, -3, -1, 0, 1,  3,  -3, 1,  -3, 0,  1,  3, -1, -2, 3,  -1, 3, -3, -3},
                       {3, 1, 4, 5}),
                     L({3, 2}),
                     L({2, 2}),
                     L({1, 1}),
                     true,
                     false,
                     Arg()};
       },
       {{kFloat32,
         {3, 1, 4, 5},
         {-1,
          -0.25,
          -0.25,
          -0.5,
          -0.5,
          -0.666666627,
          -0.416666687,
          -0.416666687,
          0,
          0,
          0.333333343,
          -0.166666672,
          -0.166666672,
          0.5,
          0.5,
          2.33333325,
          0.833333313,
          0.833333313,
          1.5,
          1.5,
          1,
          0.25,
          0.25,
          0,
          0,
          1.66666675,
          0.25,
          0.25,
          -0.5,
          -0.5,
          0.666666687,
          0,
          0,
          -0.5,
          -0.5,
          2.66666675,
          -1,
          -1,
          0,
          0,
          0,
          0,
          0,
          -0.75,
          -0.75,
          0.333333343,
          0.333333343,
          0.333333343,
          -0.583333313,
          -0.583333313,
          0.333333343,
          0.333333343,
          0.333333343,
          0.166666672,
          0.166666672,
          -1.66666663,
          1.83333337,
          1.83333337,
          -0.833333313,
          -0.833333313}}}},
      // divisor_override 3
      {"aten.avg_pool2d_backward.default",
       [] {
         return Args{T({-3, -2, 2, 1}, {1, 1, 2, 2}),
                     T({2, -1, 2, -3, 2, 3, 1, 2, 3}, {1, 1, 3, 3}),
                     L({2, 2}),
                     L({1, 1}),
                     L({0, 0}),
                     false,
                     true,
                     3};
       },
       {{kFloat32,
         {1, 1, 3, 3},
         {-1, -1.66666675, -0.666666687, -0.333333313, -0.666666627, -0.333333343, 0.666666687, 1,
          0.333333343}}}},
      // causal
      {"aten._scaled_dot_product_flash_attention_for_cpu.default",
       [] {
         return Args{
             T({-1.5, -0.75, -0.25, 0.75, -1.75, 0.5, -0.25, -0.5, -0.5, -3.25, 0.5, 0.25},
               {1, 2, 3, 2}),
             T({1, 0.25, 1.25, -0.5, 0, 2, -0.75, 0, 0.5, 0, 1.5, -0.75}, {1, 2, 3, 2}),
             T({1.75, -0.5, 2.5, 1.75, -1.75, -0.25, 0.75, -1, 1, 0, 0.25, -0.75}, {1, 2, 3, 2}),
             0.0,
             true,
             Arg(),
             Arg()};
       },
       {{kFloat32,
         {1, 2, 3, 2},
         {1.75, -0.5, 2.0434587, 0.380376399, -1.0099107, -0.139985099, 0.75, -1, 0.847819626,
          -0.608721614, 0.620714903, -0.54609412},
         1e-05},
        {kFloat32,
         {1, 2, 3},
         {-1.19324267, 0.452200085, 0.925639153, 0.132582515, 0.761559248, 1.23805881},
         1e-05}}},
      // a float mask with a fully masked row (output 0, logsumexp 0), scale 0.5
      {"aten._scaled_dot_product_flash_attention_for_cpu.default",
       [] {
         return Args{T({1.25, -0.5, 0, -0.75}, {1, 1, 2, 2}),
                     T({-0.25, 0, 1, -0.25, 1, 0}, {1, 1, 3, 2}),
                     T({-1, -0.25, -0.5, -1.5, 0.5, 0}, {1, 1, 3, 2}),
                     0.0,
                     false,
                     T({0.5, 0, -1, -kInf, -kInf, -kInf}, {2, 3}),
                     0.5};
       },
       {{kFloat32, {1, 1, 2, 2}, {-0.504361808, -0.816313326, 0, 0}, 1e-05},
        {kFloat32, {1, 1, 2}, {1.40762842, 0}, 1e-05}}},
      // causal and a float mask together (both apply)
      {"aten._scaled_dot_product_flash_attention_for_cpu.default",
       [] {
         return Args{T({0.25, 1.75, 0.5, -0.75}, {1, 1, 2, 2}),
                     T({-1, 0.5, 1, 0.25, -0.5, 0.25}, {1, 1, 3, 2}),
                     T({-0.25, 1, 0.75, 0.75, 1.25, 1}, {1, 1, 3, 2}),
                     0.0,
                     true,
                     T({0.25, -2, 0, 1, 0, 0}, {2, 3}),
                     Arg()};
       },
       {{kFloat32, {1, 1, 2, 2}, {-0.25, 1, 0.210007921, 0.884997964}, 1e-05},
        {kFloat32, {1, 1, 2}, {0.691941738, 0.997482419}, 1e-05}}},
      // float16: the output in float16, the logsumexp in float32 as eager's
      {"aten._scaled_dot_product_flash_attention_for_cpu.default",
       [] {
         return Args{T({0.25, 1.75, 0.5, -0.75}, {1, 1, 2, 2}, kFloat16),
                     T({-1, 0.5, 1, 0.25, -0.5, 0.25}, {1, 1, 3, 2}, kFloat16),
                     T({-0.25, 1, 0.75, 0.75, 1.25, 1}, {1, 1, 3, 2}, kFloat16),
                     0.0,
                     false,
                     Arg(),
                     Arg()};
       },
       {{kFloat16, {1, 1, 2, 2}, {0.539550781, 0.908203125, 0.681640625, 0.876464844}, 0.002},
        {kFloat32, {1, 1, 2}, {1.48818135, 0.924194872}, 0.002}}},
      // causal with a float mask, a fully masked row (no gradient), scale 0.75
      {"aten._scaled_dot_product_flash_attention_for_cpu_backward.default",
       [] {
         return Args{T({0.5, -0.75, 1, -2.25, -1, 0, 0, 0.5, 0, 0.5, 1.75, -0.75}, {1, 2, 3, 2}),
                     T({-0.5, -1, 0.75, 2.75, -1.25, -0.75, 0.25, -0.25, -1.25, 0, -1.75, -0.5},
                       {1, 2, 3, 2}),
                     T({-1.25, -0.25, 0.25, -0.75, 0, -0.25, -2, 0.75, -1, -2.25, 0.75, 0, -1.5,
                        1.25, -1, 0.25},
                       {1, 2, 4, 2}),
                     T({0.25, 0.5, 1, -0.25, 0.75, 0.75, -0.5, 2.75, 0, -0.25, 2, -1, 0.25, 1.25,
                        0.75, -0.5},
                       {1, 2, 4, 2}),
                     T({0.25, 0.5, 0, 0, 0.520778656, 0.363782197, 0, -0.25, 0, 0, 0.152941614,
                        0.217838034},
                       {1, 2, 3, 2}),
                     T({1.15625, 0, 1.85868168, 0.734375, 0, 2.61008263}, {1, 2, 3}),
                     0.0,
                     true,
                     T({0.5, 0, -1, 0, -kInf, -kInf, -kInf, -kInf, 0, 0.25, 0, -kInf}, {3, 4}),
                     0.75};
       },
       {{kFloat32,
         {1, 2, 3, 2},
         {0, 0, 0, 0, -0.168715209, 0.0433866493, 0, 0, 0, 0, 0.266636729, -0.275893986},
         1e-05},
        {kFloat32,
         {1, 2, 4, 2},
         {-0.14702189, -0.0882131383, 0.10846661, 0.0650799721, 0.0385552794, 0.0231331661, 0, 0,
          -0.0693882331, -0.0198252089, -0.191964477, -0.0548469946, 0.261352777, 0.0746722221, 0,
          0},
         1e-05},
        {kFloat32,
         {1, 2, 4, 2},
         {-0.0791569948, -0.75, -0.241428554, 0, -0.179414481, 0, 0, 0, 1.11158085, 0.0236082077,
          0.0617388524, -0.0264595076, 0.576680541, -0.247148797, 0, 0},
         1e-05}}},
      // float64, no mask
      {"aten._scaled_dot_product_flash_attention_for_cpu_backward.default",
       [] {
         return Args{
             T({-0.25, 0, 0.5, 0, 1, -1.75}, {1, 1, 3, 2}, kFloat64),
             T({-0.75, -0.25, 0.25, 0.75, 0, -0.25}, {1, 1, 3, 2}, kFloat64),
             T({-0.75, -0.5, 0, 0.75, -0.25, -0.75}, {1, 1, 3, 2}, kFloat64),
             T({-0.25, 0.5, 1, -1.25, 1, 0.75}, {1, 1, 3, 2}, kFloat64),
             T({0.46589740543675195, 0.1828819252548941, 0.7004054732922264, -0.37193965605708,
                0.5609298241755182, 0.09895374358198446},
               {1, 1, 3, 2}, kFloat64),
             T({1.3364467972052032, 1.030721283068365, 1.1346279238304442}, {1, 1, 3}, kFloat64),
             0.0,
             false,
             Arg(),
             Arg()};
       },
       {{kFloat64,
         {1, 1, 3, 2},
         {-0.03246960615002294, -0.01907633678269817, 0.05432929855491002, 0.06423515244337445,
          0.3272463125125992, 0.7423460699839414},
         1e-12},
        {kFloat64,
         {1, 1, 3, 2},
         {-0.06068957994141569, 0.02001296833199674, 0.030358957122147437, -0.0917628740338528,
          0.030330622819268252, 0.07174990570185599},
         1e-12},
        {kFloat64,
         {1, 1, 3, 2},
         {0.36427343243004534, -0.6146982461542745, 0.4895841038263838, -0.4928281935964792,
          0.3961424637435707, -0.6424735602492461},
         1e-12}}},
      // _adaptive_avg_pool2d: windows [floor(i * in / out), ceil((i + 1) * in / out)).
      {"aten._adaptive_avg_pool2d.default",
       [] {
         return Args{T({0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12,
                        13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24},
                       {1, 5, 5}),
                     L({3, 2})};
       },
       {{kFloat32, {1, 3, 2}, {3.5, 5.5, 11, 13, 18.5, 20.5}}}},
      {"aten._adaptive_avg_pool2d.default",
       [] {
         return Args{T({0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15,
                        16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31},
                       {1, 2, 4, 4}),
                     L({2, 2})};
       },
       {{kFloat32, {1, 2, 2, 2}, {2.5, 4.5, 10.5, 12.5, 18.5, 20.5, 26.5, 28.5}}}},
      {"aten._adaptive_avg_pool2d.default",
       [] {
         return Args{T({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}, {2, 1, 3, 3},
                       kFloat64),
                     L({1, 1})};
       },
       {{kFloat64, {2, 1, 1, 1}, {4, 13}}}},
      {"aten._adaptive_avg_pool2d_backward.default",
       [] {
         return Args{T({1, 2, 3, 4, 5, 6}, {1, 3, 2}),
                     T({0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12,
                        13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24},
                       {1, 5, 5})};
       },
       {{kFloat32, {1, 5, 5}, {0.166666672, 0.166666672, 0.5,         0.333333343, 0.333333343,
                               0.5,         0.5,         1.27777779,  0.777777791, 0.777777791,
                               0.333333343, 0.333333343, 0.777777791, 0.444444448, 0.444444448,
                               1.16666663,  1.16666663,  2.61111116,  1.44444442,  1.44444442,
                               0.833333313, 0.833333313, 1.83333325,  1,           1}}}},
      {"aten._adaptive_avg_pool2d_backward.default",
       [] {
         return Args{T({1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 2, 2}),
                     T({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
                       {1, 2, 4, 4})};
       },
       {{kFloat32, {1, 2, 4, 4}, {0.25, 0.25, 0.5,  0.5,  0.25, 0.25, 0.5,  0.5,  0.75, 0.75, 1,
                                  1,    0.75, 0.75, 1,    1,    1.25, 1.25, 1.5,  1.5,  1.25, 1.25,
                                  1.5,  1.5,  1.75, 1.75, 2,    2,    1.75, 1.75, 2,    2}}}},
      {"aten._adaptive_avg_pool2d_backward.default",
       [] {
         return Args{
             T({2, 6}, {2, 1, 1, 1}, kFloat64),
             T({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {2, 1, 3, 3}, kFloat64)};
       },
       {{kFloat64,
         {2, 1, 3, 3},
         {0.2222222222222222, 0.2222222222222222, 0.2222222222222222, 0.2222222222222222,
          0.2222222222222222, 0.2222222222222222, 0.2222222222222222, 0.2222222222222222,
          0.2222222222222222, 0.6666666666666666, 0.6666666666666666, 0.6666666666666666,
          0.6666666666666666, 0.6666666666666666, 0.6666666666666666, 0.6666666666666666,
          0.6666666666666666, 0.6666666666666666}}}},
      // nll_loss_forward: (output, total_weight); reduction 0 none, 1 mean, 2 sum; ignore_index.
      {"aten.nll_loss_forward.default",
       [] {
         return Args{T({-1.5, -0.5, -2, -0.25, -3, -1, -0.75, -1.25, -2.5}, {3, 3}),
                     T({2, -100, 0}, {3}, kInt64), Arg(), 0, -100};
       },
       {{kFloat32, {3}, {2, 0, 0.75}}, {kFloat32, {}, {0}}}},
      {"aten.nll_loss_forward.default",
       [] {
         return Args{T({-1.5, -0.5, -2, -0.25, -3, -1, -0.75, -1.25, -2.5}, {3, 3}),
                     T({2, -100, 0}, {3}, kInt64), Arg(), 1, -100};
       },
       {{kFloat32, {}, {1.375}}, {kFloat32, {}, {2}}}},
      {"aten.nll_loss_forward.default",
       [] {
         return Args{T({-1.5, -0.5, -2, -0.25, -3, -1, -0.75, -1.25, -2.5}, {3, 3}),
                     T({2, -100, 0}, {3}, kInt64), Arg(), 2, -100};
       },
       {{kFloat32, {}, {2.75}}, {kFloat32, {}, {2}}}},
      {"aten.nll_loss_forward.default",
       [] {
         return Args{T({-1.5, -0.5, -2, -0.25, -3, -1, -0.75, -1.25, -2.5}, {3, 3}),
                     T({2, -100, 0}, {3}, kInt64), T({0.5, 2, 1.5}, {3}), 0, -100};
       },
       {{kFloat32, {3}, {3, 0, 0.375}}, {kFloat32, {}, {0}}}},
      {"aten.nll_loss_forward.default",
       [] {
         return Args{T({-1.5, -0.5, -2, -0.25, -3, -1, -0.75, -1.25, -2.5}, {3, 3}),
                     T({2, -100, 0}, {3}, kInt64), T({0.5, 2, 1.5}, {3}), 1, -100};
       },
       {{kFloat32, {}, {1.6875}}, {kFloat32, {}, {2}}}},
      {"aten.nll_loss_forward.default",
       [] {
         return Args{T({-1.5, -0.5, -2, -0.25, -3, -1, -0.75, -1.25, -2.5}, {3, 3}),
                     T({2, -100, 0}, {3}, kInt64), T({0.5, 2, 1.5}, {3}), 2, -100};
       },
       {{kFloat32, {}, {3.375}}, {kFloat32, {}, {2}}}},
      {"aten.nll_loss_forward.default",
       [] {
         return Args{T({-1.5, -0.5, -2, -0.25, -3, -1, -0.75, -1.25, -2.5}, {3, 3}),
                     T({1, 1, 2}, {3}, kInt64), T({0.5, 2, 1.5}, {3}), 1, 1};
       },
       {{kFloat32, {}, {2.5}}, {kFloat32, {}, {1.5}}}},
      {"aten.nll_loss_forward.default",
       [] {
         return Args{T({-1.5, -0.5, -2, -0.25, -3, -1, -0.75, -1.25, -2.5}, {3, 3}),
                     T({-100, -100, -100}, {3}, kInt64), Arg(), 1, -100};
       },
       {{kFloat32, {}, {kNaN}}, {kFloat32, {}, {0}}}},
      {"aten.nll_loss_forward.default",
       [] {
         return Args{T({-0.5, -2, -1}, {3}, kFloat64), T({1}, {}, kInt64),
                     T({1, 3, 2}, {3}, kFloat64), 0, -100};
       },
       {{kFloat64, {}, {6}}, {kFloat64, {}, {3}}}},
      {"aten.nll_loss_forward.default",
       [] {
         return Args{T({-0.5, -2, -1}, {3}, kFloat64), T({2}, {}, kInt64), Arg(), 1, -100};
       },
       {{kFloat64, {}, {1}}, {kFloat64, {}, {1}}}},
      // nll_loss_backward: -weight[target] * grad (/ total_weight for mean) at the target class.
      {"aten.nll_loss_backward.default",
       [] {
         return Args{T({2}, {}),
                     T({-1.5, -0.5, -2, -0.25, -3, -1, -0.75, -1.25, -2.5}, {3, 3}),
                     T({2, -100, 0}, {3}, kInt64),
                     Arg(),
                     1,
                     -100,
                     T({2}, {})};
       },
       {{kFloat32, {3, 3}, {0, 0, -1, 0, 0, 0, -1, 0, 0}}}},
      {"aten.nll_loss_backward.default",
       [] {
         return Args{T({2}, {}),
                     T({-1.5, -0.5, -2, -0.25, -3, -1, -0.75, -1.25, -2.5}, {3, 3}),
                     T({2, -100, 0}, {3}, kInt64),
                     T({0.5, 2, 1.5}, {3}),
                     1,
                     -100,
                     T({2}, {})};
       },
       {{kFloat32, {3, 3}, {0, 0, -1.5, 0, 0, 0, -0.5, 0, 0}}}},
      {"aten.nll_loss_backward.default",
       [] {
         return Args{T({0.5}, {}),
                     T({-1.5, -0.5, -2, -0.25, -3, -1, -0.75, -1.25, -2.5}, {3, 3}),
                     T({2, -100, 0}, {3}, kInt64),
                     T({0.5, 2, 1.5}, {3}),
                     2,
                     -100,
                     T({2}, {})};
       },
       {{kFloat32, {3, 3}, {0, 0, -0.75, 0, 0, 0, -0.25, 0, 0}}}},
      {"aten.nll_loss_backward.default",
       [] {
         return Args{T({1, 2, 3}, {3}),
                     T({-1.5, -0.5, -2, -0.25, -3, -1, -0.75, -1.25, -2.5}, {3, 3}),
                     T({2, -100, 0}, {3}, kInt64),
                     T({0.5, 2, 1.5}, {3}),
                     0,
                     -100,
                     T({0}, {})};
       },
       {{kFloat32, {3, 3}, {0, 0, -1.5, 0, 0, 0, -1.5, 0, 0}}}},
      {"aten.nll_loss_backward.default",
       [] {
         return Args{T({1}, {}),
                     T({-1.5, -0.5, -2, -0.25, -3, -1, -0.75, -1.25, -2.5}, {3, 3}),
                     T({-100, -100, -100}, {3}, kInt64),
                     Arg(),
                     1,
                     -100,
                     T({0}, {})};
       },
       {{kFloat32, {3, 3}, {0, 0, 0, 0, 0, 0, 0, 0, 0}}}},
      {"aten.nll_loss_backward.default",
       [] {
         return Args{T({1.5}, {}, kFloat64),
                     T({-0.5, -2, -1}, {3}, kFloat64),
                     T({1}, {}, kInt64),
                     T({1, 3, 2}, {3}, kFloat64),
                     1,
                     -100,
                     T({3}, {}, kFloat64)};
       },
       {{kFloat64, {3}, {0, -1.5, 0}}}},
      {"aten.nll_loss_backward.default",
       [] {
         return Args{T({1.5}, {}, kFloat64),
                     T({-0.5, -2, -1}, {3}, kFloat64),
                     T({1}, {}, kInt64),
                     Arg(),
                     0,
                     1,
                     T({0}, {}, kFloat64)};
       },
       {{kFloat64, {3}, {0, 0, 0}}}},
      // mse_loss and its backward: norm 2 / numel(self) for mean, 2 otherwise.
      {"aten.mse_loss.default",
       [] {
         return Args{T({1, 2.5, -1, 0}, {2, 2}), T({0.5, 2, 1, -1.5}, {2, 2}), 0};
       },
       {{kFloat32, {2, 2}, {0.25, 0.25, 4, 2.25}}}},
      {"aten.mse_loss.default",
       [] {
         return Args{T({1, 2.5, -1, 0}, {2, 2}), T({0.5, 2, 1, -1.5}, {2, 2}), 1};
       },
       {{kFloat32, {}, {1.6875}}}},
      {"aten.mse_loss.default",
       [] {
         return Args{T({1, 2.5, -1, 0}, {2, 2}), T({0.5, 2, 1, -1.5}, {2, 2}), 2};
       },
       {{kFloat32, {}, {6.75}}}},
      {"aten.mse_loss.default",
       [] {
         return Args{T({1, 2}, {2}), T({1.5, 0}, {2}, kFloat64), 1};
       },
       {{kFloat64, {}, {2.125}}}},
      {"aten.mse_loss_backward.default",
       [] {
         return Args{T({0.5}, {}), T({1, 2.5, -1, 0}, {2, 2}), T({0.5, 2, 1, -1.5}, {2, 2}), 1};
       },
       {{kFloat32, {2, 2}, {0.125, 0.125, -0.5, 0.375}}}},
      {"aten.mse_loss_backward.default",
       [] {
         return Args{T({0.5}, {}), T({1, 2.5, -1, 0}, {2, 2}), T({0.5, 2, 1, -1.5}, {2, 2}), 2};
       },
       {{kFloat32, {2, 2}, {0.5, 0.5, -2, 1.5}}}},
      {"aten.mse_loss_backward.default",
       [] {
         return Args{T({1, 2, 3, 4}, {2, 2}), T({1, 2.5, -1, 0}, {2, 2}),
                     T({0.5, 2, 1, -1.5}, {2, 2}), 0};
       },
       {{kFloat32, {2, 2}, {1, 2, -12, 12}}}},
      {"aten.mse_loss_backward.default",
       [] {
         return Args{T({2}, {}, kFloat64), T({1, 3}, {2}, kFloat64), T({0.5, 0.5}, {2}, kFloat64),
                     1};
       },
       {{kFloat64, {2}, {1, 5}}}},
      // native_batch_norm: (out, save_mean, save_invstd); inference gives empty statistics.
      {"aten.native_batch_norm.default",
       [] {
         return Args{T({0.5, -1, 2, 1.5, 0.25, -0.75, 1, 3, -2, 0.5, 1.25, -0.5}, {2, 3, 2}),
                     T({1.5, -1, 0.5}, {3}),
                     T({0.1, 0.2, 0.3}, {3}),
                     T({0.2, -0.1, 0.5}, {3}),
                     T({1.5, 0.5, 2}, {3}),
                     true,
                     0.1,
                     1e-05};
       },
       {{kFloat32,
         {2, 3, 2},
         {-0.293165863, -1.86582947, -0.773326457, -0.448884308, 0.42048192, -0.222088218,
          0.231055319, 2.32793999, 1.82221079, 0.199999988, 1.06305206, -0.0614456832}},
        {kFloat32, {3}, {0.875, 0.5, 0.0625}},
        {kFloat32, {3}, {0.698961556, 0.648884296, 1.28514028}}}},
      {"aten.native_batch_norm.default",
       [] {
         return Args{T({0.5, -1, 2, 1.5, 0.25, -0.75, 1, 3, -2, 0.5, 1.25, -0.5}, {2, 3, 2}),
                     Arg(),
                     Arg(),
                     Arg(),
                     Arg(),
                     true,
                     0.1,
                     1e-05};
       },
       {{kFloat32,
         {2, 3, 2},
         {-0.262110561, -1.31055284, 0.973326445, 0.648884296, 0.240963802, -1.04417646,
          0.0873702168, 1.48529339, -1.62221074, 0, 1.52610409, -0.72289139}},
        {kFloat32, {3}, {0.875, 0.5, 0.0625}},
        {kFloat32, {3}, {0.698961556, 0.648884296, 1.28514028}}}},
      {"aten.native_batch_norm.default",
       [] {
         return Args{T({0.5, -1, 2, 1.5, 0.25, -0.75, 1, 3, -2, 0.5, 1.25, -0.5}, {2, 3, 2}),
                     T({1.5, -1, 0.5}, {3}),
                     T({0.1, 0.2, 0.3}, {3}),
                     T({0.2, -0.1, 0.5}, {3}),
                     T({1.5, 0.5, 2}, {3}),
                     false,
                     0.1,
                     1e-05};
       },
       {{kFloat32,
         {2, 3, 2},
         {0.467422217, -1.36968887, -2.76981854, -2.06271887, 0.211611897, -0.141940594, 1.07979262,
          3.52927399, 2.88697886, -0.648519635, 0.565164387, -0.0535524786}},
        {kFloat32, {0}, {}},
        {kFloat32, {0}, {}}}},
      {"aten.native_batch_norm.default",
       [] {
         return Args{T({1, 2, 4, 3}, {2, 2}, kFloat64), Arg(), Arg(), T({0, 1}, {2}, kFloat64),
                     T({1, 2}, {2}, kFloat64),          true,  0.3,   0.001};
       },
       {{kFloat64,
         {2, 2},
         {-0.9997778518244277, -0.9980059800697494, 0.9997778518244278, 0.9980059800697487}},
        {kFloat64, {2}, {2.5, 2.5}},
        {kFloat64, {2}, {0.6665185678829518, 1.996011960139498}}}},
      // native_batch_norm_backward(grad, input, weight, running_mean, running_var, save_mean,
      // save_invstd, train, eps, output_mask).
      {"aten.native_batch_norm_backward.default",
       [] {
         return Args{T({1, -2, 0.5, 3, 0, 1, 2, -1, 0.5, 0.25, -1.5, 1}, {2, 3, 2}),
                     T({0.5, -1, 2, 1.5, 0.25, -0.75, 1, 3, -2, 0.5, 1.25, -0.5}, {2, 3, 2}),
                     T({1.5, -1, 0.5}, {3}),
                     T({0.2, -0.1, 0.5}, {3}),
                     T({1.5, 0.5, 2}, {3}),
                     T({0.375, 0.375, 0.8125}, {3}),
                     T({1.1, 0.9, 0.6}, {3}),
                     true,
                     1e-05,
                     L({true, true, true})};
       },
       {{kFloat32,
         {2, 3, 2},
         {1.55641401, -2.27055454, 1.40397346, -1.12224913, -0.0911308676, 0.113525376, 2.83207035,
          -3.61530519, -0.805807471, 0.800305665, -0.445787132, 0.137361318}},
        {kFloat32, {3}, {1.6500001, 2.72812486, -2.1187501}},
        {kFloat32, {3}, {0, 4.25, 0.5}}}},
      {"aten.native_batch_norm_backward.default",
       [] {
         return Args{T({1, -2, 0.5, 3, 0, 1, 2, -1, 0.5, 0.25, -1.5, 1}, {2, 3, 2}),
                     T({0.5, -1, 2, 1.5, 0.25, -0.75, 1, 3, -2, 0.5, 1.25, -0.5}, {2, 3, 2}),
                     Arg(),
                     Arg(),
                     Arg(),
                     T({0.375, 0.375, 0.8125}, {3}),
                     T({1.1, 0.9, 0.6}, {3}),
                     true,
                     1e-05,
                     L({true, false, false})};
       },
       {{kFloat32,
         {2, 3, 2},
         {1.03760934, -1.51370311, -1.40397346, 1.12224913, -0.182261735, 0.227050751, 1.88804686,
          -2.41020346, 0.805807471, -0.800305665, -0.891574264, 0.274722636}},
        kNone,
        kNone}},
      {"aten.native_batch_norm_backward.default",
       [] {
         return Args{T({1, -2, 0.5, 3, 0, 1, 2, -1, 0.5, 0.25, -1.5, 1}, {2, 3, 2}),
                     T({0.5, -1, 2, 1.5, 0.25, -0.75, 1, 3, -2, 0.5, 1.25, -0.5}, {2, 3, 2}),
                     T({1.5, -1, 0.5}, {3}),
                     T({0.2, -0.1, 0.5}, {3}),
                     T({1.5, 0.5, 2}, {3}),
                     T({0.375, 0.375, 0.8125}, {3}),
                     T({1.1, 0.9, 0.6}, {3}),
                     true,
                     1e-05,
                     L({false, true, true})};
       },
       {kNone,
        {kFloat32, {3}, {1.6500001, 2.72812486, -2.1187501}},
        {kFloat32, {3}, {0, 4.25, 0.5}}}},
      {"aten.native_batch_norm_backward.default",
       [] {
         return Args{T({1, -2, 0.5, 3, 0, 1, 2, -1, 0.5, 0.25, -1.5, 1}, {2, 3, 2}),
                     T({0.5, -1, 2, 1.5, 0.25, -0.75, 1, 3, -2, 0.5, 1.25, -0.5}, {2, 3, 2}),
                     T({1.5, -1, 0.5}, {3}),
                     T({0.2, -0.1, 0.5}, {3}),
                     T({1.5, 0.5, 2}, {3}),
                     Arg(),
                     Arg(),
                     false,
                     1e-05,
                     L({true, true, true})};
       },
       {{kFloat32,
         {2, 3, 2},
         {1.22474074, -2.44948149, -0.707099736, -4.24259853, 0, 0.35355252, 2.44948149,
          -1.22474074, -0.707099736, -0.353549868, -0.530328751, 0.35355252}},
        {kFloat32, {3}, {1.22474086, 7.1417079, -2.38647962}},
        {kFloat32, {3}, {0, 4.25, 0.5}}}},
      {"aten.native_batch_norm_backward.default",
       [] {
         return Args{T({1, -1, 2, 0.5}, {2, 2}, kFloat64),
                     T({1, 2, 4, 3}, {2, 2}, kFloat64),
                     T({2, 0.5}, {2}, kFloat64),
                     Arg(),
                     Arg(),
                     T({2.5, 2.5}, {2}, kFloat64),
                     T({0.66, 0.99}, {2}, kFloat64),
                     true,
                     0.001,
                     L({true, true, false})};
       },
       {{kFloat64,
         {2, 2},
         {-0.013134000000000019, -0.28028446874999996, 0.013134000000000019, 0.28028446874999996}},
        {kFloat64, {2}, {0.99, 0.7424999999999999}},
        kNone}},
      // embedding_dense_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq).
      {"aten.embedding_dense_backward.default",
       [] {
         return Args{T({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 3, 2}),
                     T({1, 1, 0, 3, 1, 2}, {2, 3}, kInt64), 4, -1, false};
       },
       {{kFloat32, {4, 2}, {5, 6, 13, 16, 11, 12, 7, 8}}}},
      {"aten.embedding_dense_backward.default",
       [] {
         return Args{T({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 3, 2}),
                     T({1, 1, 0, 3, 1, 2}, {2, 3}, kInt64), 5, 1, false};
       },
       {{kFloat32, {5, 2}, {5, 6, 0, 0, 11, 12, 7, 8, 0, 0}}}},
      {"aten.embedding_dense_backward.default",
       [] {
         return Args{T({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 3, 2}),
                     T({1, 1, 0, 3, 1, 2}, {2, 3}, kInt64), 4, -1, true};
       },
       {{kFloat32, {4, 2}, {5, 6, 4.33333349, 5.33333349, 11, 12, 7, 8}}}},
      {"aten.embedding_dense_backward.default",
       [] {
         return Args{T({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 3, 2}),
                     T({1, 1, 0, 3, 1, 2}, {2, 3}, kInt32), 4, 0, true};
       },
       {{kFloat32, {4, 2}, {0, 0, 4.33333349, 5.33333349, 11, 12, 7, 8}}}},
      {"aten.embedding_dense_backward.default",
       [] {
         return Args{T({1.5, 2.5, -1, 3}, {2, 2}, kFloat64), T({2, 2}, {2}, kInt64), 3, -1, false};
       },
       {{kFloat64, {3, 2}, {0, 0, 0, 0, 0.5, 5.5}}}},
  };
}

namespace {

using lz::aten::TensorMeta;

// native_batch_norm in training updates the running statistics in place, as eager's kernel,
// although its schema does not mark them; these are eager's values after one step.
const std::vector<double> kRunningMean = {0.2675, -0.04, 0.45625};
const std::vector<double> kRunningVar = {1.6229166, 0.76666665, 1.8807291};

Args batch_norm_step(const lz::Tensor& x, const lz::Tensor& running_mean,
                     const lz::Tensor& running_var) {
  return {Arg(x), Arg(), Arg(), Arg(running_mean), Arg(running_var), true, 0.1, 1e-5};
}

lz::Tensor batch_norm_input() {
  return lz_test::make({0.5, -1, 2, 1.5, 0.25, -0.75, 1, 3, -2, 0.5, 1.25, -0.5}, {2, 3, 2});
}

TEST(AtenNn, BatchNormTrainingUpdatesTheRunningStatistics) {
  lz::Tensor mean = lz_test::make({0.2, -0.1, 0.5}, {3});
  lz::Tensor var = lz_test::make({1.5, 0.5, 2}, {3});
  lz::aten::Call call;
  lz::aten::lower(*lz::aten::find("aten.native_batch_norm.default"),
                  batch_norm_step(batch_norm_input(), mean, var), call);
  lz_test::expect_values(mean, kFloat32, {3}, kRunningMean);
  lz_test::expect_values(var, kFloat32, {3}, kRunningVar);
}

TEST(AtenNn, BatchNormOfA16BitInputUpdatesFloat32StatisticsOnce) {
  // lower() records the entry once on the bfloat16 input to learn the result dtypes, then on
  // float32: only the second recording may update the statistics.
  lz::Tensor mean = lz_test::make({0.2, -0.1, 0.5}, {3});
  lz::Tensor var = lz_test::make({1.5, 0.5, 2}, {3});
  lz::aten::Call call;
  Arg out = lz::aten::lower(*lz::aten::find("aten.native_batch_norm.default"),
                            batch_norm_step(batch_norm_input().to(lz::kBFloat16), mean, var), call);
  EXPECT_EQ(out.list()[0].tensor().dtype(), lz::kBFloat16);
  EXPECT_EQ(out.list()[1].tensor().dtype(), kFloat32);
  lz_test::expect_values(mean, kFloat32, {3}, kRunningMean);
  lz_test::expect_values(var, kFloat32, {3}, kRunningVar);
}

TEST(AtenNn, BatchNormRefusesWhatItCannotUpdate) {
  auto meta = [](lz::DType dt, lz::Shape shape) {
    return Arg(TensorMeta{dt, std::move(shape), "", std::nullopt, 0});
  };
  Args half = {meta(lz::kBFloat16, {2, 3, 2}), Arg(), Arg(), meta(lz::kBFloat16, {3}),
               meta(lz::kBFloat16, {3}),       true,  0.1,   1e-5};
  EXPECT_NE(lz::aten::why_not("aten.native_batch_norm.default", half), std::nullopt);
  Args inference = {meta(kFloat32, {2, 3}), Arg(), Arg(), Arg(), Arg(), false, 0.1, 1e-5};
  EXPECT_EQ(lz::aten::why_not("aten.native_batch_norm.default", inference),
            "inference without running statistics");
}

}  // namespace
