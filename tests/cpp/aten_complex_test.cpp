// Test rows of the ATen table's complex entries (src/aten/entries_complex.cpp) and _to_copy to
// and from complex dtypes: complex tensors are Arg::complex over (real, imaginary) pairs, so
// arguments and results are written as their pairs (C(...), .complex = true). The values are
// eager PyTorch 2.15's (torch.view_as_real of its complex results).
#include "aten_rows.h"

namespace {

using namespace lz_test::aten::rows;  // dtypes, T, L, C, Arg(s)

lz::aten::Arg foreign_dtype(const char* name) {
  return lz::aten::Arg::of_kind(lz::aten::Arg::Kind::ForeignDType, name);
}

}  // namespace

LZ_ATEN_ROWS(Complex) {
  return {
      {"aten.view_as_real.default",
       [] {
         return Args{C({1, 2, 3, -1}, {2, 2})};
       },
       {{kFloat32, {2, 2}, {1, 2, 3, -1}}}},
      {"aten.view_as_complex.default",
       [] {
         return Args{T({1, 2, 3, -1}, {2, 2})};
       },
       {{.dtype = kFloat32, .shape = {2, 2}, .values = {1, 2, 3, -1}, .complex = true}}},
      // _fft_c2c(self, dim, normalization, forward)
      {"aten._fft_c2c.default",
       [] {
         return Args{C({1, 0, 2, 1, 0, -1, 3, 0}, {4, 2}), L({0}), 0, true};
       },
       {{.dtype = kFloat32,
         .shape = {4, 2},
         .values = {6, 0, 2, 2, -4, -2, 0, 0},
         .complex = true}}},
      // inverse over two dims, normalization 2 (1/n)
      {"aten._fft_c2c.default",
       [] {
         return Args{C({1, 2, 0.5, -1, 3, 0, -2, 1, 0, 0.25, 1.5, 1}, {2, 3, 2}), L({0, 1}), 2,
                     false};
       },
       {{.dtype = kFloat32,
         .shape = {2, 3, 2},
         .values = {0.666666687, 0.541666687, -0.330742627, -0.0981835723, -0.835924089, 1.05651689,
                    0.833333313, -0.208333328, 0.369417757, 0.209829122, 0.2972489, 0.498504221},
         .rtol = 1e-5,
         .complex = true}}},
      // _fft_r2c(self, dim, normalization, onesided): ortho, one-sided
      {"aten._fft_r2c.default",
       [] {
         return Args{T({1, 2, -1, 0.5, 3, 2}, {2, 3}), L({1}), 1, true};
       },
       {{.dtype = kFloat32,
         .shape = {2, 2, 2},
         .values = {1.15470052, 0, 0.288675129, -1.49999988, 3.17542648, 0, -1.15470052,
                    -0.49999997},
         .rtol = 1e-5,
         .complex = true}}},
      // both dims, unscaled, two-sided
      {"aten._fft_r2c.default",
       [] {
         return Args{T({1, 2, -1, 0.5, 3, 2}, {2, 3}), L({0, 1}), 0, false};
       },
       {{.dtype = kFloat32,
         .shape = {2, 3, 2},
         .values = {7.5, 0, -1.5, -3.46410155, -1.5, 3.46410155, -3.5, 0, 2.5, -1.73205066, 2.5,
                    1.73205066},
         .rtol = 1e-5,
         .complex = true}}},
  };
}

namespace {

using lz::aten::Arg;
using lz::aten::Args;

Arg to_copy(Arg x, Arg dtype) {
  lz::aten::Call call;
  return lz::aten::lower(*lz::aten::find("aten._to_copy.default"),
                         {std::move(x), std::move(dtype), Arg(), Arg(), Arg(), false, Arg()}, call);
}

TEST(AtenComplex, ToCopyGivesARealTensorAZeroImaginaryPartAndKeepsTheRealPartBack) {
  Arg z = to_copy(lz_test::aten::T({1, -2}, {2}), foreign_dtype("complex64"));
  ASSERT_TRUE(z.is_complex());
  EXPECT_EQ(z.tensor_shape(), (lz::Shape{2}));
  lz_test::expect_values(z.tensor(), kFloat32, {2, 2}, {1, 0, -2, 0});
  Arg wide = to_copy(z, foreign_dtype("complex128"));
  lz_test::expect_values(wide.tensor(), kFloat64, {2, 2}, {1, 0, -2, 0});
  Arg back = to_copy(C({1, 5, -2, 7}, {2, 2}), Arg(lz::kFloat64));
  EXPECT_FALSE(back.is_complex());
  lz_test::expect_values(back.tensor(), kFloat64, {2}, {1, -2});
}

TEST(AtenComplex, EntriesWithoutTheFlagRefuseComplexTensors) {
  Args add = {C({1, 2}, {1, 2}), C({1, 2}, {1, 2}), 1};
  EXPECT_EQ(lz::aten::why_not("aten.add.Tensor", add), "dtype complex64 not supported");
  Args view = {T({1, 2, 3}, {3})};
  EXPECT_EQ(lz::aten::why_not("aten.view_as_complex.default", view), "a last dim other than 2");
}

TEST(AtenComplex, InvolvesComplexNamesWhatAFrontEndWithoutComplexValuesMustLeave) {
  const lz::aten::Entry& to = *lz::aten::find("aten._to_copy.default");
  Args real = {T({1}, {1}), Arg(lz::kFloat64), Arg(), Arg(), Arg(), false, Arg()};
  EXPECT_FALSE(lz::aten::involves_complex(to, real));
  real[1] = foreign_dtype("complex64");
  EXPECT_TRUE(lz::aten::involves_complex(to, real));
  EXPECT_TRUE(lz::aten::involves_complex(*lz::aten::find("aten.view_as_complex.default"),
                                         {T({1, 2}, {1, 2})}));
  EXPECT_TRUE(lz::aten::involves_complex(*lz::aten::find("aten.view_as_real.default"),
                                         {C({1, 2}, {1, 2})}));
}

}  // namespace
