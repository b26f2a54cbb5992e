// PyTorch's aliasing rules for views (tensor/view_layout.h): the strides a view would have there,
// view() refusing shapes those strides cannot express, and reshape() copying there instead of
// writing through. The expected strides and outcomes are PyTorch 2's.
#include <gtest/gtest.h>

#include <vector>

#include "lazuli/lazuli.h"
#include "op_test_util.h"

namespace {

using lz::Tensor;
using lz_test::expect_values;
using lz_test::make;
using Strides = std::vector<int64_t>;

Tensor iota_tensor(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<double>(i));
  return make(v, shape);
}

TEST(ViewLayout, StridesFollowPyTorch) {
  Tensor x = iota_tensor({2, 3, 4});
  EXPECT_EQ(x.strides(), (Strides{12, 4, 1}));
  EXPECT_TRUE(x.is_contiguous());
  EXPECT_EQ(x.permute({1, 0, 2}).strides(), (Strides{4, 12, 1}));
  EXPECT_EQ(x.permute({0, 2, 1}).strides(), (Strides{12, 1, 4}));
  Tensor m = iota_tensor({4, 6});
  EXPECT_EQ(m.slice(1, std::nullopt, std::nullopt, 2).strides(), (Strides{6, 2}));
  EXPECT_EQ(m.select(1, 1).strides(), (Strides{6}));
  EXPECT_EQ(iota_tensor({1, 3}).expand({2, 3}).strides(), (Strides{0, 1}));
  EXPECT_EQ(iota_tensor({3, 1}).expand({3, 4}).strides(), (Strides{1, 0}));
  EXPECT_EQ(m.T().unsqueeze(0).strides(), (Strides{6, 1, 6}));
}

TEST(ViewLayout, ContiguityFollowsPyTorch) {
  Tensor m = iota_tensor({3, 4});
  EXPECT_TRUE(m.slice(0, 1).is_contiguous());      // whole rows
  EXPECT_FALSE(m.slice(1, 1, 3).is_contiguous());  // part of each row
  EXPECT_FALSE(m.T().is_contiguous());
  EXPECT_TRUE(iota_tensor({3, 1}).T().is_contiguous());  // only size-1 dims moved
  EXPECT_TRUE(iota_tensor({0, 3}).T().is_contiguous());  // empty
  EXPECT_FALSE(iota_tensor({1, 3}).expand({2, 3}).is_contiguous());
}

TEST(ViewLayout, ViewOfATransposeThrowsNamingReshape) {
  Tensor t = iota_tensor({2, 3}).T();
  try {
    t.view({6});
    FAIL() << "view of a transposed tensor did not throw";
  } catch (const lz::ValueError&) {
    FAIL() << "threw ValueError; PyTorch raises RuntimeError (lz::Error)";
  } catch (const lz::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("view"), std::string::npos) << msg;
    EXPECT_NE(msg.find("reshape"), std::string::npos) << msg;
  }
  expect_values(t, lz::kFloat32, {3, 2}, {0, 3, 1, 4, 2, 5});  // unchanged
}

TEST(ViewLayout, ViewAcceptsWhatTheStridesExpress) {
  Tensor t = iota_tensor({2, 3}).T();
  expect_values(t.view({3, 2, 1}), lz::kFloat32, {3, 2, 1}, {0, 3, 1, 4, 2, 5});
  expect_values(t.view({1, 3, 2}), lz::kFloat32, {1, 3, 2}, {0, 3, 1, 4, 2, 5});
  EXPECT_THROW(t.view({2, 3}), lz::Error);
  Tensor p = iota_tensor({2, 3, 4}).permute({1, 0, 2});  // [3, 2, 4]
  EXPECT_EQ(p.view({3, 2, 2, 2}).strides(), (Strides{4, 12, 2, 1}));
  EXPECT_THROW(p.view({6, 4}), lz::Error);
  Tensor s = iota_tensor({4, 6}).slice(1, std::nullopt, std::nullopt, 2);  // [4, 3], strides 6, 2
  expect_values(s.view({12}), lz::kFloat32, {12}, {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22});
  EXPECT_THROW(iota_tensor({1, 3}).expand({2, 3}).view({6}), lz::Error);
}

TEST(ViewLayout, ReshapeOfATransposeIsACopy) {
  Tensor x = iota_tensor({2, 3});
  Tensor flat = x.T().reshape({6});
  EXPECT_TRUE(flat.is_contiguous());
  flat.fill_(-1);
  expect_values(x, lz::kFloat32, {2, 3}, {0, 1, 2, 3, 4, 5});  // no write-through
  Tensor again = x.T().reshape({6});
  x.add_(10);
  expect_values(again, lz::kFloat32, {6}, {0, 3, 1, 4, 2, 5});  // nor the other way
}

TEST(ViewLayout, ReshapeThatCanBeAViewStillWritesThrough) {
  Tensor x = iota_tensor({2, 3});
  x.T().reshape({3, 2, 1}).fill_(7);
  expect_values(x, lz::kFloat32, {2, 3}, {7, 7, 7, 7, 7, 7});
  Tensor y = iota_tensor({4, 6});
  y.slice(1, std::nullopt, std::nullopt, 2).reshape({12}).fill_(-1);
  expect_values(y.select(0, 0), lz::kFloat32, {6}, {-1, 1, -1, 3, -1, 5});
}

}  // namespace
