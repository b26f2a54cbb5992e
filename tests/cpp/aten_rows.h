// Test rows of the ATen table (src/aten/table.h): one row calls one entry on plain numbers and
// says what eager PyTorch gives, checked with the one op-test helper (op_test_util.h) on the
// reference backend and on the cpu backend. Each group's rows live in aten_<group>_test.cpp and
// register themselves, so AtenTable.EveryEntryHasATestRow sees them all.
//
//   LZ_ATEN_ROWS(Pointwise) {
//     return {
//         {"aten.add.Tensor", [] { return Args{T({1, 2}, {2}), T({3, 4}, {2}), 2}; },
//          {{kFloat32, {2}, {7, 10}}}},
//     };
//   }
//
// `args` makes fresh arguments for each backend, in schema order with the defaults filled in (as
// a front end passes them). `results` has one expectation per result (one per item of a tuple
// or list result); a result that is a number is expected as a 0-d int64 value, None as kNone.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "aten/table.h"
#include "backend/backend.h"
#include "core/config.h"
#include "op_test_util.h"

namespace lz_test::aten {

using lz::aten::Arg;
using lz::aten::Args;

struct Expect {
  lz::DType dtype = lz::kFloat32;
  std::vector<int64_t> shape = {};
  std::vector<double> values = {};
  double rtol = 1e-6;
  bool none = false;  // the result is None (a gradient an output mask left out)
  bool complex = false;  // a complex result (Arg::complex): shape and values are its pairs'
};
inline const Expect kNone{.none = true};

struct Row {
  std::string op;
  std::function<Args()> args;
  std::vector<Expect> results;
};

// Argument builders: a tensor from numbers, a list.
inline Arg T(const std::vector<double>& values, const std::vector<int64_t>& shape,
             lz::DType dtype = lz::kFloat32) {
  return Arg(make(values, shape, dtype));
}
inline Arg L(std::vector<Arg> items) { return Arg(std::move(items)); }
// A tensor argument known only by its type (what the bridge passes to why_not before tracing).
inline Arg meta(lz::DType dtype, std::vector<int64_t> shape) {
  lz::aten::TensorMeta m;
  m.dtype = dtype;
  m.shape = std::move(shape);
  return Arg(std::move(m));
}
// A complex tensor argument from its (real, imaginary) pairs: `shape` ends in 2.
inline Arg C(const std::vector<double>& pairs, const std::vector<int64_t>& shape,
             lz::DType dtype = lz::kFloat32) {
  return Arg::complex(make(pairs, shape, dtype));
}

using RowGroup = std::vector<Row> (*)();
inline std::vector<std::pair<const char*, RowGroup>>& row_groups() {
  static std::vector<std::pair<const char*, RowGroup>> groups;
  return groups;
}
struct RowGroupRegistrar {
  RowGroupRegistrar(const char* name, RowGroup g) { row_groups().emplace_back(name, g); }
};

// Runs every row on the reference backend, then on the cpu backend.
inline void run_rows(const std::vector<Row>& rows) {
  for (const char* backend : {"interp", "cpu"}) {
    lz::set_active_backend(backend);
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& row = rows[i];
      SCOPED_TRACE("row " + std::to_string(i) + ": " + row.op + " on the " + backend + " backend");
      const lz::aten::Entry* e = lz::aten::find(row.op);
      ASSERT_NE(e, nullptr) << "no entry " << row.op;
      Args args = row.args();
      std::optional<std::string> why = lz::aten::why_not(*e, args);
      ASSERT_FALSE(why.has_value()) << "the entry refuses the row: " << *why;
      lz::aten::Call call;
      Arg out;
      try {
        out = lz::aten::lower(*e, args, call);
      } catch (const std::exception& ex) {
        ADD_FAILURE() << "lowering threw: " << ex.what();
        continue;
      }
      std::vector<Arg> items = out.is_list() ? out.list() : std::vector<Arg>{out};
      ASSERT_EQ(items.size(), row.results.size()) << "results: " << out.describe();
      for (size_t k = 0; k < items.size(); ++k) {
        SCOPED_TRACE("result " + std::to_string(k));
        const Expect& want = row.results[k];
        if (want.none || items[k].is_none()) {
          EXPECT_EQ(want.none, items[k].is_none()) << items[k].describe();
          continue;
        }
        EXPECT_EQ(want.complex, items[k].is_complex()) << items[k].describe();
        lz::Tensor got = items[k].is_tensor() ? items[k].tensor()
                         : items[k].kind() == Arg::Kind::Int
                             ? lz::scalar_tensor(items[k].to_int(), lz::kInt64)
                             : lz::Tensor();
        expect_values(got, want.dtype, want.shape, want.values, want.rtol);
      }
    }
  }
  lz::set_active_backend(lz::config().backend);
}

// What a row file needs in scope: `using namespace lz_test::aten::rows;`.
namespace rows {
using lz::kBool;
using lz::kFloat16;
using lz::kFloat32;
using lz::kFloat64;
using lz::kInt32;
using lz::kInt64;
using lz_test::aten::Arg;
using lz_test::aten::Args;
using lz_test::aten::C;
using lz_test::aten::kNone;
using lz_test::aten::L;
using lz_test::aten::meta;
using lz_test::aten::T;
inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}  // namespace rows

}  // namespace lz_test::aten

// Defines a group of rows and a test running them: AtenRows.<group>.
#define LZ_ATEN_ROWS(group)                                                                       \
  static std::vector<lz_test::aten::Row> aten_rows_##group();                                     \
  static lz_test::aten::RowGroupRegistrar aten_rows_registrar_##group(#group, aten_rows_##group); \
  TEST(AtenRows, group) { lz_test::aten::run_rows(aten_rows_##group()); }                         \
  static std::vector<lz_test::aten::Row> aten_rows_##group()
