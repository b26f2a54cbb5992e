// An ATen graph in the table's C++ form (src/aten/graph.h): converted once, recorded on each new
// input signature. Sizes are values of the graph, so one graph serves every size.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>

#include "aten/graph.h"
#include "aten_rows.h"
#include "op_test_util.h"

namespace {

using lz::aten::Arg;
using lz::aten::Args;
using lz::aten::Graph;
using lz_test::aten::T;

const lz::aten::Entry& entry(const char* name) {
  const lz::aten::Entry* e = lz::aten::find(name);
  if (!e) throw std::runtime_error(std::string("no entry ") + name);
  return *e;
}

// x -> view(x * 2, [n * 3, -1]).sum(1), and n * 3 itself: the size is an input of the graph.
struct ViewBySize {
  Graph g;
  ViewBySize() {
    int x = g.input(), n = g.input();
    int n3 = g.size_op("mul", {Graph::ref(n), Graph::value(3)});
    int twice = g.call(entry("aten.mul.Tensor"), {Graph::ref(x), Graph::value(2.0)});
    int v = g.call(entry("aten.view.default"),
                   {Graph::ref(twice), Graph::list({Graph::ref(n3), Graph::value(-1)})});
    int s = g.call(entry("aten.sum.dim_IntList"), {Graph::ref(v), Graph::list({Graph::value(1)}),
                                                   Graph::value(false), Graph::value(Arg())});
    g.set_outputs({Graph::ref(s), Graph::ref(n3)});
  }
};

std::vector<double> iota(int64_t n) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<double>(i));
  return v;
}

TEST(AtenGraph, OneGraphRecordsEverySizeItsSizeValuesAreInputs) {
  ViewBySize f;
  lz::aten::Call call;
  for (int64_t n : {1, 2, 5}) {
    Args out = f.g.record({T(iota(n * 6), {n, 6}), Arg(n)}, call);
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[1].to_int(), n * 3);
    const lz::Tensor& s = out[0].tensor();
    ASSERT_EQ(s.shape(), lz::Shape({n * 3}));
    std::vector<float> got = s.to_vector<float>();
    for (int64_t r = 0; r < n * 3; ++r) {  // row r holds 2r and 2r + 1, doubled
      EXPECT_EQ(got[r], 2.0f * (4 * r + 1)) << "n=" << n << " row " << r;
    }
  }
}

TEST(AtenGraph, KeptValuesAreEveryValueByIndex) {
  ViewBySize f;
  lz::aten::Call call;
  Args values;
  f.g.record({T(iota(12), {2, 6}), Arg(int64_t{2})}, call, &values);
  ASSERT_EQ(static_cast<int>(values.size()), f.g.num_values());
  EXPECT_EQ(values[1].to_int(), 2);                        // the size input
  EXPECT_EQ(values[2].to_int(), 6);                        // n * 3
  EXPECT_EQ(values[4].tensor_shape(), lz::Shape({6, 2}));  // the view
}

TEST(AtenGraph, SizeOpsFollowPython) {
  auto apply = [](const char* op, Args args) {
    Graph g;
    std::vector<Graph::Template> refs;
    for (size_t i = 0; i < args.size(); ++i) refs.push_back(Graph::ref(g.input()));
    g.set_outputs({Graph::ref(g.size_op(op, refs))});
    lz::aten::Call call;
    return g.record(args, call)[0];
  };
  EXPECT_EQ(apply("floordiv", {Arg(-7), Arg(2)}).to_int(), -4);
  EXPECT_EQ(apply("mod", {Arg(-7), Arg(2)}).to_int(), 1);
  EXPECT_EQ(apply("mod", {Arg(7), Arg(-2)}).to_int(), -1);
  EXPECT_DOUBLE_EQ(apply("mod", {Arg(-7.5), Arg(2)}).to_double(), 0.5);
  EXPECT_EQ(apply("truediv", {Arg(7), Arg(2)}).kind(), Arg::Kind::Double);
  EXPECT_DOUBLE_EQ(apply("truediv", {Arg(7), Arg(2)}).to_double(), 3.5);
  EXPECT_EQ(apply("pow", {Arg(3), Arg(4)}).to_int(), 81);
  EXPECT_DOUBLE_EQ(apply("pow", {Arg(2), Arg(-1)}).to_double(), 0.5);
  EXPECT_EQ(apply("add", {Arg(true), Arg(1)}).to_int(), 2);
  EXPECT_EQ(apply("and_", {Arg(true), Arg(false)}).kind(), Arg::Kind::Bool);
  EXPECT_EQ(apply("and_", {Arg(6), Arg(3)}).to_int(), 2);
  EXPECT_EQ(apply("max", {Arg(3), Arg(5.0), Arg(4)}).kind(), Arg::Kind::Double);
  EXPECT_EQ(apply("min", {Arg(3), Arg(5.0)}).kind(), Arg::Kind::Int);
  EXPECT_EQ(apply("abs", {Arg(-4)}).to_int(), 4);
  EXPECT_TRUE(apply("not_", {Arg(0)}).to_bool());
  EXPECT_TRUE(apply("le", {Arg(2), Arg(2.5)}).to_bool());
  EXPECT_DOUBLE_EQ(apply("floordiv", {Arg(1), Arg(0.1)}).to_double(), 9.0);  // not 10
  EXPECT_DOUBLE_EQ(apply("floordiv", {Arg(-7.0), Arg(2)}).to_double(), -4.0);
  EXPECT_TRUE(std::signbit(apply("mod", {Arg(0.0), Arg(-3.0)}).to_double()));  // -0.0
  EXPECT_TRUE(apply("not_", {Arg(0.0)}).to_bool());
  EXPECT_FALSE(apply("not_", {Arg(0.5)}).to_bool());
  EXPECT_EQ(apply("max", {Arg(Args{Arg(3), Arg(7), Arg(5)})}).to_int(), 7);  // max([3, 7, 5])
  EXPECT_THROW(apply("max", {Arg(3)}), lz::ValueError);                      // max(3) raises
  EXPECT_EQ(apply("pow", {Arg(-2), Arg(63)}).to_int(), INT64_MIN);
  EXPECT_EQ(apply("mod", {Arg(INT64_MIN), Arg(-1)}).to_int(), 0);
  // Where Python's ints would grow past int64, or Python raises, a ValueError.
  EXPECT_THROW(apply("pow", {Arg(2), Arg(63)}), lz::ValueError);
  EXPECT_THROW(apply("mul", {Arg(INT64_MAX), Arg(2)}), lz::ValueError);
  EXPECT_THROW(apply("add", {Arg(INT64_MAX), Arg(1)}), lz::ValueError);
  EXPECT_THROW(apply("neg", {Arg(INT64_MIN)}), lz::ValueError);
  EXPECT_THROW(apply("floordiv", {Arg(INT64_MIN), Arg(-1)}), lz::ValueError);
  EXPECT_THROW(apply("pow", {Arg(0), Arg(-1)}), lz::ValueError);
  EXPECT_THROW(apply("pow", {Arg(-8.0), Arg(0.5)}), lz::ValueError);
  EXPECT_THROW(apply("floordiv", {Arg(1), Arg(0)}), lz::ValueError);
  EXPECT_THROW(apply("add", {Arg("x"), Arg(1)}), lz::TypeError);
  EXPECT_THROW(apply("neg", {Arg(1), Arg(2)}), lz::ValueError);
  EXPECT_FALSE(Graph::is_size_op("sym_float"));
  Graph g;
  EXPECT_THROW(g.size_op("sym_float", {}), lz::ValueError);
}

TEST(AtenGraph, ItemsOfATupleResult) {
  Graph g;
  int x = g.input();
  int both = g.call(entry("aten.max.dim"), {Graph::ref(x), Graph::value(1), Graph::value(false)});
  g.set_outputs({Graph::ref(g.item(both, -1)), Graph::ref(g.item(both, 0))});
  lz::aten::Call call;
  Args out = g.record({T({1, 5, 2, 4, 3, 0}, {2, 3})}, call);
  EXPECT_EQ(out[0].tensor().to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(out[1].tensor().to_vector<float>(), (std::vector<float>{5, 4}));
  Graph bad;
  int y = bad.input();
  bad.set_outputs({Graph::ref(bad.item(y, 2))});
  EXPECT_THROW(bad.record({Arg(Args{Arg(1), Arg(2)})}, call), lz::IndexError);
}

TEST(AtenGraph, BadRecordingsThrowAndLeaveNothingBehind) {
  ViewBySize f;
  lz::aten::Call call;
  EXPECT_THROW(f.g.record({T(iota(6), {1, 6})}, call), lz::ValueError);  // one input short
  int64_t live = lz::debug::live_tensor_count();
  // 42 values do not view as [12, -1] (n = 4): the view's entry throws, at the third step.
  int failed_at = -1;
  EXPECT_THROW(f.g.record({T(iota(42), {7, 6}), Arg(int64_t{4})}, call, nullptr, &failed_at),
               lz::ValueError);
  EXPECT_EQ(failed_at, 4);  // x, n, n * 3, x * 2, then the view
  EXPECT_EQ(lz::debug::live_tensor_count(), live);
  Graph g;
  EXPECT_THROW(g.set_outputs({Graph::ref(0)}), lz::ValueError);  // no value 0 yet
  // The graph still records after a failure.
  Args out = f.g.record({T(iota(12), {2, 6}), Arg(int64_t{2})}, call);
  EXPECT_EQ(out[0].tensor_shape(), lz::Shape({6}));
}

}  // namespace
