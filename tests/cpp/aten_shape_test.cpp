// Test rows of the ATen table's view, join, creation and copy entries (src/aten/entries_shape.cpp):
// what eager PyTorch 2.15 gives for each call (aten_rows.h says how rows run), and the reasons
// the entries' conditions give.
#include <cstdint>
#include <limits>

#include "aten_rows.h"

namespace {

using namespace lz_test::aten::rows;  // dtypes, T, L, Arg(s), kNone, kInf, kNaN

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

Arg device(const char* name) { return Arg::of_kind(Arg::Kind::Device, name); }
Arg layout(const char* name) { return Arg::of_kind(Arg::Kind::Layout, name); }
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
LZ_ATEN_ROWS(Shape) {
  const Arg none;
  return {
      // ---- views and reshapes
      {"aten.view.default", [] { return Args{iota({2, 3}), L({3, -1})}; },
       {{kFloat32, {3, 2}, {1, 2, 3, 4, 5, 6}}}},
      {"aten.view.default", [] { return Args{T({}, {0, 3}), L({-1})}; }, {{kFloat32, {0}, {}}}},
      {"aten.reshape.default", [] { return Args{iota({2, 2}, kBool), L({4})}; },
       {{kBool, {4}, {1, 1, 1, 1}}}},
      {"aten._unsafe_view.default", [] { return Args{T({5}, {}, kInt64), L({1, 1})}; },
       {{kInt64, {1, 1}, {5}}}},
      {"aten.t.default", [] { return Args{iota({2, 3})}; },
       {{kFloat32, {3, 2}, {1, 4, 2, 5, 3, 6}}}},
      {"aten.t.default", [] { return Args{iota({3})}; }, {{kFloat32, {3}, {1, 2, 3}}}},
      {"aten.transpose.int", [] { return Args{iota({1, 2, 3}), 0, -1}; },
       {{kFloat32, {3, 2, 1}, {1, 4, 2, 5, 3, 6}}}},
      {"aten.transpose.int", [] { return Args{T({7}, {}), 0, -1}; }, {{kFloat32, {}, {7}}}},
      {"aten.permute.default", [] { return Args{iota({2, 3}, kInt32), L({-1, 0})}; },
       {{kInt32, {3, 2}, {1, 4, 2, 5, 3, 6}}}},
      {"aten.permute.default", [] { return Args{T({3}, {}), L({})}; }, {{kFloat32, {}, {3}}}},
      {"aten.expand.default", [] { return Args{T({1, 2}, {2, 1}), L({2, -1, 3}), false}; },
       {{kFloat32, {2, 2, 3}, {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2}}}},
      {"aten.squeeze.default", [] { return Args{iota({1, 2, 1})}; }, {{kFloat32, {2}, {1, 2}}}},
      {"aten.squeeze.dim", [] { return Args{iota({1, 2}), -2}; }, {{kFloat32, {2}, {1, 2}}}},
      {"aten.squeeze.dim", [] { return Args{iota({1, 2}), 1}; }, {{kFloat32, {1, 2}, {1, 2}}}},
      {"aten.squeeze.dim", [] { return Args{T({4}, {}), 0}; }, {{kFloat32, {}, {4}}}},
      {"aten.squeeze.dims", [] { return Args{iota({1, 2, 1}), L({0, -1})}; },
       {{kFloat32, {2}, {1, 2}}}},
      {"aten.unsqueeze.default", [] { return Args{iota({2}), -1}; }, {{kFloat32, {2, 1}, {1, 2}}}},
      {"aten.unsqueeze.default", [] { return Args{iota({2}), 0}; }, {{kFloat32, {1, 2}, {1, 2}}}},
      {"aten.alias.default", [] { return Args{iota({2}, kInt64)}; }, {{kInt64, {2}, {1, 2}}}},
      // as_strided: a dense layout is a view (here a transpose), an overlapping one a gather
      {"aten.as_strided.default", [] { return Args{iota({2, 3}), L({3, 2}), L({1, 3}), 0}; },
       {{kFloat32, {3, 2}, {1, 4, 2, 5, 3, 6}}}},
      {"aten.as_strided.default", [] { return Args{iota({6}), L({2, 3}), L({1, 1}), Arg()}; },
       {{kFloat32, {2, 3}, {1, 2, 3, 2, 3, 4}}}},
      {"aten.as_strided.default", [] { return Args{iota({4}, kInt64), L({2}), L({2}), 1}; },
       {{kInt64, {2}, {2, 4}}}},
      {"aten.as_strided.default", [] { return Args{iota({4}), L({0, 3}), L({1, 1}), 0}; },
       {{kFloat32, {0, 3}, {}}}},
      // as_strided_scatter: the window replaced, row-major (here a transposed window)
      {"aten.as_strided_scatter.default",
       [] { return Args{iota({2, 3}), T({10, 20, 30, 40}, {2, 2}), L({2, 2}), L({1, 3}), 1}; },
       {{kFloat32, {2, 3}, {1, 10, 30, 4, 20, 40}}}},
      {"aten.as_strided_scatter.default",
       [] { return Args{iota({6}, kInt64), T({9, 8}, {2}, kInt64), L({2}), L({2}), 1}; },
       {{kInt64, {6}, {1, 9, 3, 8, 5, 6}}}},
      // unfold: each window a new last dim
      {"aten.unfold.default", [] { return Args{iota({2, 5}), 1, 2, 2}; },
       {{kFloat32, {2, 2, 2}, {1, 2, 3, 4, 6, 7, 8, 9}}}},
      {"aten.unfold.default", [] { return Args{iota({3, 2}), 0, 2, 1}; },
       {{kFloat32, {2, 2, 2}, {1, 3, 2, 4, 3, 5, 4, 6}}}},
      {"aten.unfold.default", [] { return Args{iota({4}, kInt32), -1, 4, 1}; },
       {{kInt32, {1, 4}, {1, 2, 3, 4}}}},

      // ---- copies
      {"aten.clone.default", [] { return Args{iota({2}, kInt32), Arg()}; },
       {{kInt32, {2}, {1, 2}}}},
      {"aten.lift_fresh_copy.default", [] { return Args{T({1, 0}, {2}, kBool)}; },
       {{kBool, {2}, {1, 0}}}},
      // float to int truncates; the lazy device's own name is a device Lazuli computes on.
      {"aten._to_copy.default",
       [=] { return Args{T({1.7, -1.7}, {2}), kInt32, none, device("lazuli:0"), none, false,
                         none}; },
       {{kInt32, {2}, {1, -1}}}},
      {"aten._to_copy.default",
       [=] { return Args{T({1.5}, {1}), none, layout("torch.strided"), device("cpu"), false, false,
                         none}; },
       {{kFloat32, {1}, {1.5}}}},
      // A 0-d float64 learning rate cast for an optimizer's float32 update, and a cast to the
      // same dtype, which still copies.
      {"prims.convert_element_type.default", [] { return Args{T({-0.01}, {}, kFloat64), kFloat32}; },
       {{kFloat32, {}, {-0.01}}}},
      {"prims.convert_element_type.default", [] { return Args{T({2.5, -1}, {2}), kFloat32}; },
       {{kFloat32, {2}, {2.5, -1}}}},
      {"aten.copy.default", [] { return Args{T({0, 0, 0, 0}, {2, 2}), iota({2}, kInt64), false}; },
       {{kFloat32, {2, 2}, {1, 2, 1, 2}}}},
      {"aten.copy_.default", [] { return Args{T({0, 0}, {2}, kInt32), T({2.5}, {}), false}; },
       {{kInt32, {2}, {2, 2}}}},

      // ---- slices: Python's bounds (clamped, negative from the end, end before start)
      {"aten.slice.Tensor", [] { return Args{T({0, 1, 2, 3, 4, 5, 6, 7, 8}, {9}), 0, 2, -3, 2}; },
       {{kFloat32, {2}, {2, 4}}}},
      {"aten.slice.Tensor", [] { return Args{iota({2, 3}), -1, Arg(), kMax, 1}; },
       {{kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6}}}},
      {"aten.slice.Tensor", [] { return Args{iota({5}), 0, -100, 2, 1}; },
       {{kFloat32, {2}, {1, 2}}}},
      {"aten.slice.Tensor", [] { return Args{iota({5}), 0, 4, 1, 1}; }, {{kFloat32, {0}, {}}}},
      {"aten.select.int", [] { return Args{iota({2, 3}), -1, -1}; }, {{kFloat32, {2}, {3, 6}}}},
      {"aten.select.int", [] { return Args{iota({2, 3}), 0, 1}; }, {{kFloat32, {3}, {4, 5, 6}}}},
      {"aten.slice_scatter.default",
       [] { return Args{T({0, 0, 0, 0}, {4}), T({9, 8}, {2}, kInt64), 0, 1, Arg(), 2}; },
       {{kFloat32, {4}, {0, 9, 0, 8}}}},
      {"aten.slice_scatter.default",
       [] { return Args{T({0, 0, 0}, {3}), T({}, {0}), 0, 5, kMax, 1}; },
       {{kFloat32, {3}, {0, 0, 0}}}},
      {"aten.select_scatter.default",
       [] { return Args{T({0, 0, 0, 0}, {2, 2}), T({5, 6}, {2}), 1, -1}; },
       {{kFloat32, {2, 2}, {0, 5, 0, 6}}}},

      // ---- joins and splits: legacy 1-D empty tensors take part in promotion only
      {"aten.cat.default",
       [] { return Args{L({T({1, 2}, {1, 2}, kInt32), T({}, {0}, kFloat64)}), 0}; },
       {{kFloat64, {1, 2}, {1, 2}}}},
      {"aten.cat.default",
       [] { return Args{L({T({1, 2}, {1, 2}, kInt32), T({}, {0}, kFloat64),
                           T({3, 4}, {1, 2}, kInt64)}), -2}; },
       {{kFloat64, {2, 2}, {1, 2, 3, 4}}}},
      {"aten.cat.default", [] { return Args{L({T({}, {0}, kInt32)}), 0}; }, {{kInt32, {0}, {}}}},
      {"aten.cat.default", [] { return Args{L({T({1, 2}, {2, 1}), iota({2, 2})}), -1}; },
       {{kFloat32, {2, 3}, {1, 1, 2, 2, 3, 4}}}},
      {"aten.split_with_sizes.default", [] { return Args{iota({5}), L({2, 0, 3}), 0}; },
       {{kFloat32, {2}, {1, 2}}, {kFloat32, {0}, {}}, {kFloat32, {3}, {3, 4, 5}}}},
      {"aten.split.Tensor", [] { return Args{iota({1, 5}), 2, -1}; },
       {{kFloat32, {1, 2}, {1, 2}}, {kFloat32, {1, 2}, {3, 4}}, {kFloat32, {1, 1}, {5}}}},
      {"aten.repeat.default", [] { return Args{iota({2}), L({2, 2})}; },
       {{kFloat32, {2, 4}, {1, 2, 1, 2, 1, 2, 1, 2}}}},
      {"aten.repeat.default", [] { return Args{T({7}, {}, kInt64), L({3})}; },
       {{kInt64, {3}, {7, 7, 7}}}},
      {"aten.flip.default", [] { return Args{iota({2, 3}), L({0, -1})}; },
       {{kFloat32, {2, 3}, {6, 5, 4, 3, 2, 1}}}},
      // roll: one shift per dim (negative and larger than the dim too); without dims, over the
      // flattened tensor; a 0-d tensor.
      {"aten.roll.default", [] { return Args{T({1, 2, 3, 4, 5, 6}, {2, 3}), L({1}), L({})}; },
       {{kFloat32, {2, 3}, {6, 1, 2, 3, 4, 5}}}},
      {"aten.roll.default",
       [] { return Args{T({1, 2, 3, 4, 5, 6}, {2, 3}), L({1, -1}), L({0, 1})}; },
       {{kFloat32, {2, 3}, {5, 6, 4, 2, 3, 1}}}},
      {"aten.roll.default", [] { return Args{T({1, 2, 3, 4, 5, 6}, {2, 3}), L({7}), L({-1})}; },
       {{kFloat32, {2, 3}, {3, 1, 2, 6, 4, 5}}}},
      {"aten.roll.default", [] { return Args{T({1, 2, 3, 4}, {4}, kInt64), L({1, 1}), L({0, 0})}; },
       {{kInt64, {4}, {3, 4, 1, 2}}}},
      {"aten.roll.default", [] { return Args{T({1, 0, 1}, {3}, kBool), L({-1}), L({0})}; },
       {{kBool, {3}, {0, 1, 1}}}},
      {"aten.roll.default", [] { return Args{T({5}, {}, kInt32), L({3}), L({})}; },
       {{kInt32, {}, {5}}}},
      // Negative pads crop; the value converts to the tensor's dtype.
      {"aten.constant_pad_nd.default", [] { return Args{iota({2, 3}), L({-1, 2, 1, 0}), 9}; },
       {{kFloat32, {3, 4}, {9, 9, 9, 9, 2, 3, 9, 9, 5, 6, 9, 9}}}},
      {"aten.constant_pad_nd.default", [] { return Args{iota({3}, kInt64), L({1, 1}), 2.5}; },
       {{kInt64, {5}, {2, 1, 2, 3, 2}}}},

      // ---- creation: the fill value's kind gives the dtype when none is given
      {"aten.full.default", [=] { return Args{L({2}), 1.5, none, none, none, none}; },
       {{kFloat32, {2}, {1.5, 1.5}}}},
      {"aten.full.default", [=] { return Args{L({2}), 3, none, none, device("meta"), false}; },
       {{kInt64, {2}, {3, 3}}}},
      {"aten.full.default", [=] { return Args{L({1, 2}), true, none, none, none, none}; },
       {{kBool, {1, 2}, {1, 1}}}},
      {"aten.full.default", [=] { return Args{L({2}), 2.7, kInt32, none, none, none}; },
       {{kInt32, {2}, {2, 2}}}},
      {"aten.full_like.default",
       [=] { return Args{iota({2}, kInt32), 2.7, none, none, none, none, none}; },
       {{kInt32, {2}, {2, 2}}}},
      {"aten.full_like.default",
       [=] { return Args{iota({2}, kInt32), 1, kFloat64, none, none, none, none}; },
       {{kFloat64, {2}, {1, 1}}}},
      {"aten.empty.memory_format", [=] { return Args{L({2, 1}), none, none, none, none, none}; },
       {{kFloat32, {2, 1}, {0, 0}}}},
      {"aten.empty_permuted.default",
       [=] { return Args{L({1, 2}), L({1, 0}), kInt64, none, none, none}; },
       {{kInt64, {1, 2}, {0, 0}}}},
      {"aten.new_empty_strided.default",
       [=] { return Args{iota({2}, kInt64), L({2, 3}), L({3, 1}), none, none, none, none}; },
       {{kInt64, {2, 3}, {0, 0, 0, 0, 0, 0}}}},
      {"aten.empty_like.default",
       [=] { return Args{iota({2}, kInt32), none, none, none, none, none}; },
       {{kInt32, {2}, {0, 0}}}},
      {"aten.scalar_tensor.default", [=] { return Args{3, none, none, none, none}; },
       {{kFloat32, {}, {3}}}},
      {"aten.scalar_tensor.default", [=] { return Args{2.5, kInt64, none, none, none}; },
       {{kInt64, {}, {2}}}},
      {"aten.arange.start_step", [=] { return Args{1, 10, 3, none, none, none, none}; },
       {{kInt64, {3}, {1, 4, 7}}}},
      {"aten.arange.start_step", [=] { return Args{0, 1, 0.25, none, none, none, none}; },
       {{kFloat32, {4}, {0, 0.25, 0.5, 0.75}}}},
      {"aten.arange.start_step", [=] { return Args{5, 0, -2, kFloat64, none, none, none}; },
       {{kFloat64, {3}, {5, 3, 1}}}},
      {"aten.arange.start", [=] { return Args{2, 5, none, none, none, none}; },
       {{kInt64, {3}, {2, 3, 4}}}},
      {"aten.arange.default", [=] { return Args{4, none, none, none, none}; },
       {{kInt64, {4}, {0, 1, 2, 3}}}},
      {"aten.arange.default", [=] { return Args{2.5, none, none, none, none}; },
       {{kFloat32, {3}, {0, 1, 2}}}},
      {"aten.fill.Scalar", [] { return Args{iota({2}, kInt32), 3.9}; }, {{kInt32, {2}, {3, 3}}}},
      {"aten.fill.Tensor", [] { return Args{iota({2}), T({7}, {}, kInt64)}; },
       {{kFloat32, {2}, {7, 7}}}},
      {"aten.sym_size.int", [] { return Args{iota({2, 3}), -1}; }, {{kInt64, {}, {3}}}},
      // zeros, ones, zeros_like, ones_like: the default float dtype, or the dtype given.
      {"aten.zeros.default", [] { return Args{L({2, 3}), Arg(), Arg(), Arg(), Arg()}; },
       {{kFloat32, {2, 3}, {0, 0, 0, 0, 0, 0}}}},
      {"aten.zeros.default", [] { return Args{L({2}), kInt32, Arg(), Arg(), Arg()}; },
       {{kInt32, {2}, {0, 0}}}},
      {"aten.ones.default", [] { return Args{L({3}), Arg(), Arg(), Arg(), Arg()}; },
       {{kFloat32, {3}, {1, 1, 1}}}},
      {"aten.ones.default", [] { return Args{L({}), kBool, Arg(), Arg(), false}; },
       {{kBool, {}, {1}}}},
      {"aten.zero.default", [] { return Args{T({1, -2, 3}, {3}, kInt32)}; },
       {{kInt32, {3}, {0, 0, 0}}}},
      {"aten.zeros_like.default",
       [] { return Args{T({1, 2, 3}, {3}, kInt32), Arg(), Arg(), Arg(), Arg(), Arg()}; },
       {{kInt32, {3}, {0, 0, 0}}}},
      {"aten.zeros_like.default",
       [] { return Args{T({1.5, 2}, {2, 1}), kFloat64, Arg(), Arg(), Arg(), Arg()}; },
       {{kFloat64, {2, 1}, {0, 0}}}},
      {"aten.ones_like.default",
       [] { return Args{T({1, 0}, {2}, kBool), Arg(), Arg(), Arg(), Arg(), Arg()}; },
       {{kBool, {2}, {1, 1}}}},
      {"aten.ones_like.default",
       [] { return Args{T({1, 2, 3, 4}, {2, 2}, kInt64), kFloat32, Arg(), Arg(), Arg(), Arg()}; },
       {{kFloat32, {2, 2}, {1, 1, 1, 1}}}},
      // tril and triu: the last two dims; any dtype.
      {"aten.tril.default",
       [] { return Args{T({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4}), 0}; },
       {{kFloat32, {3, 4}, {1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0}}}},
      {"aten.tril.default",
       [] { return Args{T({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4}), -1}; },
       {{kFloat32, {3, 4}, {0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0}}}},
      {"aten.tril.default", [] { return Args{T({1, 1, 1, 1, 1, 1, 1, 1}, {2, 2, 2}, kBool), 1}; },
       {{kBool, {2, 2, 2}, {1, 1, 1, 1, 1, 1, 1, 1}}}},
      {"aten.triu.default",
       [] { return Args{T({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4}), 0}; },
       {{kFloat32, {3, 4}, {1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12}}}},
      {"aten.triu.default",
       [] { return Args{T({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4}), 2}; },
       {{kFloat32, {3, 4}, {0, 0, 3, 4, 0, 0, 0, 8, 0, 0, 0, 0}}}},
      {"aten.triu.default", [] { return Args{T({1, 2, 3, 4, 5, 6}, {3, 2}, kInt64), -1}; },
       {{kInt64, {3, 2}, {1, 2, 3, 4, 0, 6}}}},
      // slice_backward / select_backward: the gradient in zeros of the input's sizes.
      {"aten.slice_backward.default",
       [] { return Args{T({1, 2, 3, 4}, {1, 4}), L({3, 4}), 0, 1, 2, 1}; },
       {{kFloat32, {3, 4}, {0, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0}}}},
      {"aten.slice_backward.default",
       [] { return Args{T({1, 2, 3, 4, 5, 6}, {3, 2}), L({3, 5}), 1, -4, 9223372036854775807, 2}; },
       {{kFloat32, {3, 5}, {0, 1, 0, 2, 0, 0, 3, 0, 4, 0, 0, 5, 0, 6, 0}}}},
      {"aten.slice_backward.default",
       [] { return Args{T({1, 2}, {2}, kInt64), L({5}), -1, 0, 3, 2}; },
       {{kInt64, {5}, {1, 0, 2, 0, 0}}}},
      {"aten.select_backward.default", [] { return Args{T({1, 2, 3}, {3}), L({2, 3}), 0, -1}; },
       {{kFloat32, {2, 3}, {0, 0, 0, 1, 2, 3}}}},
      {"aten.select_backward.default",
       [] { return Args{T({1.5, 2.5}, {2}, kFloat64), L({2, 3}), 1, 2}; },
       {{kFloat64, {2, 3}, {0, 0, 1.5, 0, 0, 2.5}}}},
  };
}
// clang-format on

namespace {

using lz::aten::TensorMeta;
using lz::aten::why_not;

TEST(AtenShape, ConditionsNameTheirReasons) {
  const Arg none;
  Arg x = meta(kFloat32, {4});
  // Creation and _to_copy: a Lazuli dtype, strided, on the CPU, meta or lazuli device, not pinned.
  EXPECT_EQ(why_not("aten._to_copy.default", {x, none, none, device("cuda:0"), none, false, none}),
            "device cuda:0");
  EXPECT_EQ(why_not("aten._to_copy.default", {x, Arg::of_kind(Arg::Kind::ForeignDType, "int16"),
                                              none, none, none, false, none}),
            "dtype int16 not supported");
  EXPECT_EQ(why_not("prims.convert_element_type.default",
                    {x, Arg::of_kind(Arg::Kind::ForeignDType, "int16")}),
            "dtype int16 not supported");
  EXPECT_EQ(why_not("aten.full.default", {L({2}), 1, none, layout("torch.sparse_coo"), none, none}),
            "layout torch.sparse_coo");
  EXPECT_EQ(why_not("aten.empty.memory_format", {L({2}), none, none, device("cpu"), true, none}),
            "pin_memory");
  EXPECT_EQ(why_not("aten.empty_like.default", {x, none, none, device("lazuli:0"), false, none}),
            std::nullopt);
  EXPECT_EQ(why_not("aten.arange.start", {0, 2, lz::kBool, none, none, none}), "bool arange");
  EXPECT_EQ(why_not("aten.new_empty_strided.default",
                    {x, L({2}), L({1}), none, none, device("cuda:0"), none}),
            "device cuda:0");
  // as_strided reads memory: only over an input known to be row-major from its storage's start
  // (a meta of unknown layout is refused), and only inside its elements; as_strided_scatter also
  // names no element twice.
  const std::string unknown =
      "its input's memory layout is not known to be row-major from its storage's start";
  EXPECT_EQ(why_not("aten.as_strided.default", {x, L({2}), L({1}), 0}), unknown);
  auto laid = [](lz::Shape shape, std::vector<int64_t> strides, int64_t offset) {
    return Arg(TensorMeta{kFloat32, std::move(shape), "", std::move(strides), offset});
  };
  EXPECT_EQ(why_not("aten.as_strided.default", {laid({2, 3}, {3, 1}, 0), L({3}), L({2}), 1}),
            std::nullopt);
  EXPECT_EQ(why_not("aten.as_strided.default", {laid({2, 3}, {1, 2}, 0), L({3}), L({2}), 0}),
            unknown);
  EXPECT_EQ(why_not("aten.as_strided.default", {laid({2, 3}, {3, 1}, 3), L({3}), L({1}), 0}),
            unknown);
  EXPECT_EQ(why_not("aten.as_strided.default", {laid({2, 3}, {3, 1}, 0), L({3}), L({2}), 2}),
            "it reads past its input's elements");
  EXPECT_EQ(why_not("aten.as_strided.default", {laid({2, 3}, {3, 1}, 0), L({2}), L({1, 1}), 0}),
            "size and stride differ in length");
  EXPECT_EQ(why_not("aten.as_strided_scatter.default",
                    {laid({6}, {1}, 0), meta(kFloat32, {2, 3}), L({2, 3}), L({1, 1}), 0}),
            "its window names an element twice");
  EXPECT_EQ(why_not("aten.as_strided_scatter.default",
                    {laid({6}, {1}, 0), meta(kFloat32, {3, 2}), L({3, 2}), L({1, 3}), 0}),
            std::nullopt);
  // Slices with a step that is not positive.
  EXPECT_EQ(why_not("aten.slice.Tensor", {x, 0, none, none, -1}), "step -1");
  EXPECT_EQ(why_not("aten.slice_scatter.default", {x, x, 0, none, none, 0}), "step 0");
  // roll: one shift per dim, one without dims; no dims of a 0-d tensor (eager raises).
  EXPECT_EQ(why_not("aten.roll.default", {x, L({1, 2}), L({})}), "2 shifts for 0 dims");
  EXPECT_EQ(why_not("aten.roll.default", {x, L({1}), L({0, 0})}), "1 shifts for 2 dims");
  EXPECT_EQ(why_not("aten.roll.default", {meta(kFloat32, {}), L({1}), L({0})}),
            "dims of a 0-d tensor");
}

TEST(AtenShape, CopyIntoUpdatesItsInput) {
  lz::aten::Call call;
  lz::Tensor x = lz_test::make({0, 0}, {2}, kInt32);
  lz::aten::lower(*lz::aten::find("aten.copy_.default"), {Arg(x), T({1.5, 2.5}, {2}), false}, call);
  lz_test::expect_values(x, kInt32, {2}, {1, 2});
}

}  // namespace
