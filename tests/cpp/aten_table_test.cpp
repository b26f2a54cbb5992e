// The ATen table's contract (src/aten/table.h): every entry has a test row, conditions are
// decided from types alone (metas), refusals name the reason, and float16/bfloat16 operands are
// computed in float32 and rounded once per ATen op. The rows themselves: aten_<group>_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "aten/table.h"
#include "aten_rows.h"
#include "op_test_util.h"

namespace {

using lz::DType;
using lz::aten::Arg;
using lz::aten::Args;
using lz::aten::TensorMeta;
using lz_test::aten::T;

Arg meta(std::optional<DType> dtype, lz::Shape shape, std::string unsupported = "") {
  return Arg(TensorMeta{dtype, std::move(shape), std::move(unsupported), std::nullopt, 0});
}

const lz::aten::Entry& entry(const char* name) {
  const lz::aten::Entry* e = lz::aten::find(name);
  if (!e) throw std::runtime_error(std::string("no entry ") + name);
  return *e;
}

TEST(AtenTable, EveryEntryHasATestRow) {
  std::set<std::string> rowed;
  for (const auto& [name, group] : lz_test::aten::row_groups()) {
    for (const lz_test::aten::Row& row : group()) rowed.insert(row.op);
  }
  std::vector<std::string> missing;
  for (const lz::aten::Entry* e : lz::aten::entries()) {
    if (!rowed.count(e->name)) missing.push_back(e->name);
  }
  std::string list;
  for (const std::string& m : missing) list += " " + m;
  EXPECT_TRUE(missing.empty()) << missing.size() << " entries without a row:" << list;
  for (const std::string& op : rowed) EXPECT_NE(lz::aten::find(op), nullptr) << "a row for " << op;
}

TEST(AtenTable, EntriesAreSortedByNameAndFoundByName) {
  const auto& all = lz::aten::entries();
  ASSERT_GT(all.size(), 200u);
  for (size_t i = 1; i < all.size(); ++i) EXPECT_LT(all[i - 1]->name, all[i]->name);
  for (const lz::aten::Entry* e : all) EXPECT_EQ(lz::aten::find(e->name), e);
  EXPECT_EQ(lz::aten::find("aten.special_i0.default"), nullptr);
}

TEST(AtenTable, RefusalsNameTheReasonBeforeAnythingIsRecorded) {
  int64_t live = lz::debug::live_tensor_count();
  EXPECT_EQ(lz::aten::why_not("aten.special_i0.default", {meta(DType::Float32, {3})}),
            "no lowering");
  // A dtype Lazuli lacks arrives with its reason; a Lazuli dtype outside the entry's set is named.
  EXPECT_EQ(
      lz::aten::why_not("aten.add.Tensor", {meta(std::nullopt, {2}, "dtype int16 not supported"),
                                            meta(DType::Float32, {2}), Arg(1)}),
      "dtype int16 not supported");
  EXPECT_EQ(
      lz::aten::why_not("aten.fmod.Tensor", {meta(DType::Float64, {2}), meta(DType::Float64, {2})}),
      "dtype float64 not supported");
  // The entry's condition, read from types and values alone.
  EXPECT_EQ(lz::aten::why_not("aten.add.Tensor",
                              {meta(DType::Bool, {2}), meta(DType::Bool, {2}), Arg(2)}),
            "alpha on bool operands");
  EXPECT_EQ(lz::aten::why_not("aten.add.Tensor",
                              {meta(DType::Int64, {2}), meta(DType::Int32, {2}), Arg(0.5)}),
            "a float alpha on an integer result");
  EXPECT_EQ(lz::aten::why_not("aten.gelu.default", {meta(DType::Float32, {2}), Arg("erf")}),
            "approximate='erf'");
  EXPECT_EQ(lz::aten::why_not("aten.add.Tensor",
                              {meta(DType::Float32, {2}), meta(DType::Float32, {2}), Arg(2)}),
            std::nullopt);
  EXPECT_EQ(lz::debug::live_tensor_count(), live);
}

TEST(AtenTable, IndicesOfADtypeEagerRefusesAreRefusedNotTruncated) {
  // Eager takes int32 and int64 indices; what it refuses goes to the fallback, where eager raises
  // its own error.
  Arg x = meta(DType::Float32, {5, 3});
  EXPECT_EQ(lz::aten::why_not("aten.index_select.default", {x, Arg(0), meta(DType::Float32, {2})}),
            "index dtype float32");
  EXPECT_EQ(lz::aten::why_not("aten.index_select.default", {x, Arg(0), meta(DType::Int32, {2})}),
            std::nullopt);
  EXPECT_EQ(lz::aten::why_not("aten.embedding.default", {x, meta(DType::Float64, {2})}),
            "index dtype float64");
  EXPECT_EQ(lz::aten::why_not("aten.gather.default", {x, Arg(1), meta(DType::Bool, {5, 1}), Arg(false)}),
            "index dtype bool");
  EXPECT_EQ(lz::aten::why_not("aten.scatter_add.default",
                              {x, Arg(1), meta(DType::Float32, {5, 1}), meta(DType::Float32, {5, 1})}),
            "index dtype float32");
  EXPECT_EQ(lz::aten::why_not("aten.scatter.value", {x, Arg(1), meta(DType::Int64, {5, 1}), Arg(1.0)}),
            std::nullopt);
}

TEST(AtenTable, SixteenBitFloatsAreAcceptedWhereFloat32Is) {
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    EXPECT_EQ(lz::aten::why_not("aten.leaky_relu.default", {meta(dt, {2}), Arg(0.1)}),
              std::nullopt);
  }
  EXPECT_EQ(
      lz::aten::why_not("aten.fmod.Tensor", {meta(DType::Float16, {2}), meta(DType::Float16, {2})}),
      "dtype float16 not supported");
}

TEST(AtenTable, AMetaDecidesButCannotBeLowered) {
  const auto& e = entry("aten.relu.default");
  Args args{meta(DType::Float32, {2, 3})};
  EXPECT_EQ(lz::aten::why_not(e, args), std::nullopt);
  lz::aten::Call call;
  EXPECT_THROW(lz::aten::lower(e, args, call), lz::TypeError);
}

TEST(AtenTable, SixteenBitOperandsComputeInFloat32AndRoundOnce) {
  // log2(x) records log then a division: eager rounds its result once, Lazuli's own ops would
  // round after each. With and without the result dtypes given, the table rounds once.
  std::vector<double> in{3.0, 5.0, 7.0, 11.0, 0.1, 1000.0};
  lz::Tensor x = lz::cast(lz_test::make(in, {6}), DType::BFloat16);
  std::vector<double> once =
      lz::cast(lz::div(lz::log(x.to(DType::Float32)), std::log(2.0)), DType::BFloat16)
          .to(DType::Float64)
          .to_vector<double>();
  const auto& e = entry("aten.log2.default");
  std::vector<std::optional<DType>> dtypes{DType::BFloat16};
  for (const auto* given : {&dtypes, static_cast<decltype(&dtypes)>(nullptr)}) {
    lz::aten::Call call;
    Arg out = lz::aten::lower(e, {Arg(x)}, call, given);
    lz_test::expect_values(out.tensor(), DType::BFloat16, {6}, once, 0);
  }
  // A view keeps its 16-bit operand: no copy through float32.
  lz::aten::Call call;
  Arg v = lz::aten::lower(entry("aten.view.default"), {Arg(x), Arg(lz::IntList{2, 3})}, call);
  EXPECT_EQ(v.tensor().dtype(), DType::BFloat16);
}

}  // namespace
