// Test rows of the ATen table's batch norm entries (src/aten/entries_nn.cpp): native_batch_norm,
// the _native_batch_norm_legit family functionalized graphs hold, and the backward; what eager
// PyTorch 2.15 gives for each call, written as literals (aten_rows.h says how rows run). Then
// the running statistics' updates, which rows cannot see.
#include "aten_rows.h"

namespace {

using namespace lz_test::aten::rows;  // dtypes, T, L, Arg(s), kNone

}  // namespace

LZ_ATEN_ROWS(BatchNorm) {
  return {
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
      // The _native_batch_norm_legit family: what functionalized graphs hold (aot_autograd's).
      {"aten._native_batch_norm_legit.default",
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
      // ... functional: the new running statistics are two more results.
      {"aten._native_batch_norm_legit_functional.default",
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
        {kFloat32, {3}, {0.698961556, 0.648884296, 1.28514028}},
        {kFloat32, {3}, {0.267499983, -0.039999995, 0.456249982}},
        {kFloat32, {3}, {1.622916579, 0.766666651, 1.880729079}}}},
      // ... no_stats(input, weight, bias, training, momentum, eps): the batch's statistics.
      {"aten._native_batch_norm_legit.no_stats",
       [] {
         return Args{T({0.5, -1, 2, 1.5, 0.25, -0.75, 1, 3, -2, 0.5, 1.25, -0.5}, {2, 3, 2}),
                     T({1.5, -1, 0.5}, {3}),
                     T({0.1, 0.2, 0.3}, {3}),
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
      // ... no_training(input, weight, bias, running_mean, running_var, momentum, eps).
      {"aten._native_batch_norm_legit_no_training.default",
       [] {
         return Args{T({0.5, -1, 2, 1.5, 0.25, -0.75, 1, 3, -2, 0.5, 1.25, -0.5}, {2, 3, 2}),
                     T({1.5, -1, 0.5}, {3}),
                     T({0.1, 0.2, 0.3}, {3}),
                     T({0.2, -0.1, 0.5}, {3}),
                     T({1.5, 0.5, 2}, {3}),
                     0.1,
                     1e-05};
       },
       {{kFloat32,
         {2, 3, 2},
         {0.467422217, -1.36968887, -2.76981854, -2.06271887, 0.211611897, -0.141940594, 1.07979262,
          3.52927399, 2.88697886, -0.648519635, 0.565164387, -0.0535524786}},
        {kFloat32, {0}, {}},
        {kFloat32, {0}, {}}}},
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

TEST(AtenBatchNorm, TrainingUpdatesTheRunningStatistics) {
  lz::Tensor mean = lz_test::make({0.2, -0.1, 0.5}, {3});
  lz::Tensor var = lz_test::make({1.5, 0.5, 2}, {3});
  lz::aten::Call call;
  lz::aten::lower(*lz::aten::find("aten.native_batch_norm.default"),
                  batch_norm_step(batch_norm_input(), mean, var), call);
  lz_test::expect_values(mean, kFloat32, {3}, kRunningMean);
  lz_test::expect_values(var, kFloat32, {3}, kRunningVar);
}

TEST(AtenBatchNorm, LegitUpdatesTheRunningStatisticsAndFunctionalReturnsThem) {
  lz::Tensor mean = lz_test::make({0.2, -0.1, 0.5}, {3});
  lz::Tensor var = lz_test::make({1.5, 0.5, 2}, {3});
  lz::aten::Call call;
  lz::aten::lower(*lz::aten::find("aten._native_batch_norm_legit.default"),
                  batch_norm_step(batch_norm_input(), mean, var), call);
  lz_test::expect_values(mean, kFloat32, {3}, kRunningMean);
  lz_test::expect_values(var, kFloat32, {3}, kRunningVar);

  lz::Tensor mean2 = lz_test::make({0.2, -0.1, 0.5}, {3});
  lz::Tensor var2 = lz_test::make({1.5, 0.5, 2}, {3});
  Arg out = lz::aten::lower(*lz::aten::find("aten._native_batch_norm_legit_functional.default"),
                            batch_norm_step(batch_norm_input(), mean2, var2), call);
  lz_test::expect_values(mean2, kFloat32, {3}, {0.2, -0.1, 0.5});  // untouched
  lz_test::expect_values(var2, kFloat32, {3}, {1.5, 0.5, 2});
  lz_test::expect_values(out.list()[3].tensor(), kFloat32, {3}, kRunningMean);
  lz_test::expect_values(out.list()[4].tensor(), kFloat32, {3}, kRunningVar);
}

TEST(AtenBatchNorm, LegitOnA16BitInputComputesInFloat32AndUpdatesOnce) {
  // Flagged kMutates (its schema marks the statistics), the entry gets the bfloat16 input
  // itself, once.
  lz::Tensor mean = lz_test::make({0.2, -0.1, 0.5}, {3});
  lz::Tensor var = lz_test::make({1.5, 0.5, 2}, {3});
  lz::aten::Call call;
  Arg out = lz::aten::lower(*lz::aten::find("aten._native_batch_norm_legit.default"),
                            batch_norm_step(batch_norm_input().to(lz::kBFloat16), mean, var), call);
  EXPECT_EQ(out.list()[0].tensor().dtype(), lz::kBFloat16);
  EXPECT_EQ(out.list()[1].tensor().dtype(), kFloat32);
  lz_test::expect_values(mean, kFloat32, {3}, kRunningMean);
  lz_test::expect_values(var, kFloat32, {3}, kRunningVar);
}

TEST(AtenBatchNorm, A16BitInputUpdatesFloat32StatisticsOnce) {
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

TEST(AtenBatchNorm, RefusesWhatItCannotUpdate) {
  Args half = {meta(lz::kBFloat16, {2, 3, 2}), Arg(), Arg(), meta(lz::kBFloat16, {3}),
               meta(lz::kBFloat16, {3}),       true,  0.1,   1e-5};
  EXPECT_NE(lz::aten::why_not("aten.native_batch_norm.default", half), std::nullopt);
  Args inference = {meta(kFloat32, {2, 3}), Arg(), Arg(), Arg(), Arg(), false, 0.1, 1e-5};
  EXPECT_EQ(lz::aten::why_not("aten.native_batch_norm.default", inference),
            "inference without running statistics");
}

}  // namespace
