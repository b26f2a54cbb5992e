// The cpu backend's compiled cat and slice_scatter: one elementwise kernel per part, each writing
// its window of the output with its operand's expression fused in. Values bit for bit the
// reference backend's on random shapes (every dim, empty parts, broadcast, transposed and computed
// operands, steps above 1, Python's negative and clamped slice bounds), no reference kernel in
// the plan, and a root that overwrites a donated parameter only where that is safe.
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cpu_compiler_util.h"
#include "lazuli/autograd.h"

namespace lz {
namespace {

using namespace cpu_test;  // NOLINT(build/namespaces): the shared helpers of the cpu backend tests
using CpuCopyKernels = CpuCompilerTest;

class Gen {
 public:
  explicit Gen(uint32_t seed) : g_(seed) {}
  int64_t in(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(g_); }
  Shape shape(int rank, int64_t max = 5) {
    Shape s;
    for (int d = 0; d < rank; ++d) s.push_back(in(1, max));
    return s;
  }
  std::vector<double> values(const Shape& s) {
    std::vector<double> v(static_cast<size_t>(numel(s)));
    for (double& x : v) x = static_cast<double>(in(-50, 50)) / 4;
    return v;
  }

 private:
  std::mt19937 g_;
};

// `v` as a tensor of `dt` (bools: nonzero).
Tensor make(const std::vector<double>& v, const Shape& s, DType dt) {
  return cast(tensor<double>(v, IntList(s.begin(), s.end())), dt);
}

// One operand of `shape`, made in the way `how` says: 0 a parameter, 1 an expression of one,
// 2 a transposed parameter (stored with the last two dims swapped), 3 a broadcast (expanded from
// size 1 in dim 0).
Tensor operand(const std::vector<double>& v, const Shape& shape, DType dt, int how) {
  const int rank = static_cast<int>(shape.size());
  if (how == 2 && rank >= 2) {
    Shape st = shape;
    std::swap(st[rank - 1], st[rank - 2]);
    return transpose(make(v, st, dt), rank - 1, rank - 2);
  }
  if (how == 3 && numel(shape) > 0) {
    Shape one = shape;
    one[0] = 1;
    std::vector<double> head(v.begin(), v.begin() + numel(one));
    return expand(make(head, one, dt), IntList(shape.begin(), shape.end()));
  }
  Tensor t = make(v, shape, dt);
  if (how == 1 && dt != DType::Bool) return t * 2 + 1;
  if (how == 1) return logical_not(t);
  return t;
}

const DType kDtypes[] = {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::Bool};

TEST_F(CpuCopyKernels, CatOfTwoToFourOperandsAlongEveryDimIsTheReferences) {
  Gen gen(17);
  for (int trial = 0; trial < 40; ++trial) {
    const int rank = static_cast<int>(gen.in(1, 4));
    const Shape shape = gen.shape(rank);
    const int64_t dim = gen.in(0, rank - 1);
    const int nparts = static_cast<int>(gen.in(2, 4));
    const DType dt = kDtypes[trial % 5];
    std::vector<Shape> shapes;
    std::vector<std::vector<double>> data;
    std::vector<int> how;
    for (int k = 0; k < nparts; ++k) {
      Shape s = shape;
      s[dim] = gen.in(0, 3);  // size-0 parts included
      shapes.push_back(s);
      data.push_back(gen.values(s));
      how.push_back(static_cast<int>(gen.in(0, 3)));
    }
    auto program = [&] {
      std::vector<Tensor> parts;
      for (int k = 0; k < nparts; ++k) parts.push_back(operand(data[k], shapes[k], dt, how[k]));
      Tensor c = cat(parts, dim);
      // The cat as a root, and read by a later kernel (through a transpose when it can).
      Tensor user = rank >= 2 ? transpose(c, 0, rank - 1) : c;
      return std::vector<Tensor>{c, dt == DType::Bool ? logical_not(user) : user + user};
    };
    const std::string what = "trial " + std::to_string(trial) + " " + shape_str(shape) + " dim " +
                             std::to_string(dim) + " " + std::string(dtype_name(dt));
    expect_agree(program, 0, what);
    EXPECT_EQ(fallbacks(plan_of(program())), 0) << what;
  }
}

TEST_F(CpuCopyKernels, CatsWithEmptyPartsOrAnEmptyResultAreTheReferences) {
  const std::vector<double> six = {1, 2, 3, 4, 5, 6};
  expect_agree(
      [&] {
        Tensor x = make(six, {2, 3}, DType::Float32);
        Tensor e = zeros({0, 3});
        return std::vector<Tensor>{cat({e, x, e}, 0), cat({e, e}, 0), cat({x, zeros({2, 0})}, 1),
                                   cat({zeros({2, 0}), zeros({2, 0})}, 1) + 1};
      },
      0, "empty parts");
}

TEST_F(CpuCopyKernels, ACatsOperandsAreFusedIntoItsPartKernels) {
  const std::vector<double> six = {1, 2, 3, 4, 5, 6};
  auto program = [&] {
    Tensor x = make(six, {2, 3}, DType::Float32);
    Tensor t = make(six, {3, 2}, DType::Float32);
    return std::vector<Tensor>{cat({exp(x) * 2, transpose(t, 0, 1) - 1, x}, 1)};
  };
  expect_agree(program, 0, "fused operands");
  const lower::Plan plan = plan_of(program());
  EXPECT_EQ(fallbacks(plan), 0);
  EXPECT_EQ(count_steps(plan, lower::PlanStep::Kernel), 3);  // one per part
  EXPECT_EQ(plan.arena_bytes, 0);  // nothing computed aside: each part writes the output
}

TEST_F(CpuCopyKernels, SliceScatterWithStepsAndPythonBoundsOnEveryDimIsTheReferences) {
  Gen gen(5);
  for (int trial = 0; trial < 60; ++trial) {
    const int rank = static_cast<int>(gen.in(1, 4));
    const Shape shape = gen.shape(rank, 6);
    const int64_t dim = gen.in(0, rank - 1);
    const int64_t size = shape[dim];
    // Python slice bounds: negative counts from the end, out of range clamps, None is the end.
    std::optional<int64_t> start = gen.in(-size - 2, size + 2);
    std::optional<int64_t> end = gen.in(-size - 2, size + 2);
    if (gen.in(0, 4) == 0) start.reset();
    if (gen.in(0, 4) == 0) end.reset();
    const int64_t step = gen.in(1, 3);
    const DType dt = kDtypes[trial % 5];
    const std::vector<double> base_data = gen.values(shape);
    const int base_how = static_cast<int>(gen.in(0, 3));
    // The window's shape, from the reference's own slice.
    const Shape window =
        slice(zeros(IntList(shape.begin(), shape.end())), dim, start, end, step).shape();
    const std::vector<double> src_data = gen.values(window);
    const int src_how = static_cast<int>(gen.in(0, 3));
    auto program = [&] {
      Tensor out = operand(base_data, shape, dt, base_how).contiguous();
      if (base_how == 0) out = dt == DType::Bool ? logical_not(out) : out - 1;  // not the param
      out.slice(dim, start, end, step).copy_(operand(src_data, window, dt, src_how));
      return std::vector<Tensor>{out};
    };
    const std::string what = "trial " + std::to_string(trial) + " " + shape_str(shape) + " dim " +
                             std::to_string(dim) + " step " + std::to_string(step) + " " +
                             std::string(dtype_name(dt));
    expect_agree(program, 0, what);
    EXPECT_EQ(fallbacks(plan_of(program())), 0) << what;
  }
}

TEST_F(CpuCopyKernels, TheGradientOfASliceIsACompiledSliceScatter) {
  auto program = [] {
    std::vector<float> v(24);
    for (int i = 0; i < 24; ++i) v[i] = static_cast<float>(i) / 8;
    Tensor x = tensor<float>(v, {4, 6});
    set_requires_grad(x);
    Tensor y = x.slice(1, 1, std::nullopt, 2).slice(0, 0, 2) * x.slice(0, -3, -1).slice(1, 0, 3);
    backward(sum(y * y));
    return std::vector<Tensor>{grad(x)};
  };
  expect_agree(program, 0, "slice gradient");
  EXPECT_EQ(fallbacks(plan_of(program())), 0);
}

// DistributedDataParallel's bucket: each gradient copied into its window of one flat buffer, a
// chain of slice_scatters. Each link writes only its window into the one buffer: the base is
// copied once, not once per link. Windows of every step and dim, over a computed base and over a
// parameter (which is never written), the result also read by a later kernel.
TEST_F(CpuCopyKernels, AChainOfWindowWritesWritesEachWindowInPlace) {
  Gen gen(23);
  for (int trial = 0; trial < 24; ++trial) {
    const Shape shape = {gen.in(4, 9), gen.in(1, 4)};
    const int nlinks = static_cast<int>(gen.in(2, 6));
    const bool param_base = trial % 2 == 0;
    const DType dt = kDtypes[trial % 4];
    const std::vector<double> base_data = gen.values(shape);
    struct Link {
      int64_t dim, start, end, step;
      std::vector<double> src;
    };
    std::vector<Link> links;
    for (int k = 0; k < nlinks; ++k) {
      const int64_t dim = gen.in(0, 1), size = shape[dim];
      const int64_t start = gen.in(0, size - 1), end = gen.in(start, size), step = gen.in(1, 2);
      Shape w = shape;
      w[dim] = (end - start + step - 1) / step;
      links.push_back({dim, start, end, step, gen.values(w)});
    }
    auto program = [&] {
      Tensor bucket = make(base_data, shape, dt);
      if (!param_base) bucket = bucket * 3;
      for (const Link& l : links) {
        Shape w = shape;
        w[l.dim] = (l.end - l.start + l.step - 1) / l.step;
        bucket.slice(l.dim, l.start, l.end, l.step).copy_(make(l.src, w, dt) + 1);
      }
      return std::vector<Tensor>{bucket, transpose(bucket, 0, 1) * 2};
    };
    const std::string what = "trial " + std::to_string(trial) + " " + shape_str(shape) + " " +
                             std::to_string(nlinks) + " links " + std::string(dtype_name(dt)) +
                             (param_base ? " over a parameter" : " over a computed base");
    expect_agree(program, 0, what);
    const lower::Plan plan = plan_of(program());
    EXPECT_EQ(fallbacks(plan), 0) << what;
    // The first link copies the base around its window (at most 2 parts besides it); each
    // later link is one kernel; the transposed reader one more.
    const int base_kernels = param_base ? 0 : 1;
    EXPECT_LE(count_steps(plan, lower::PlanStep::Kernel), base_kernels + 3 + (nlinks - 1) + 1)
        << what << "\n"
        << lower::describe_plan(plan);
    // Nothing is computed aside: the computed base is written into the root's own buffer.
    EXPECT_EQ(plan.arena_bytes, 0) << what << "\n" << lower::describe_plan(plan);
  }
}

// The bucket as PyTorch's DDP sees it on the device: each gradient written through a view of a
// flat view of the buffer (view(-1), a slice, a view to the gradient's shape), so each link's base
// is a reshape of the last link. Still one buffer, which is the root's own storage.
TEST_F(CpuCopyKernels, WindowWritesThroughFlatViewsOfABucketWriteInPlace) {
  const std::vector<Shape> grads = {{3, 4}, {4}, {2, 3, 2}, {5}};
  int64_t total = 0;
  for (const Shape& g : grads) total += numel(g);
  auto program = [&] {
    Tensor bucket = zeros({total}) + 1;
    int64_t at = 0;
    for (size_t k = 0; k < grads.size(); ++k) {
      const Shape& s = grads[k];
      Tensor g = reshape(cast(arange(0, numel(s)), DType::Float32), IntList(s.begin(), s.end()));
      view(view(bucket, {-1}).slice(0, at, at + numel(s)), IntList(s.begin(), s.end()))
          .copy_(g * static_cast<double>(k + 2));
      at += numel(s);
    }
    return std::vector<Tensor>{bucket};  // its value: a reshape of the last link
  };
  expect_agree(program, 0, "flat bucket");
  const lower::Plan plan = plan_of(program());
  EXPECT_EQ(fallbacks(plan), 0);
  // One kernel per window and one per gradient that is not a view of the bucket's window (a
  // reshape merging dims of a computed value materializes it); the windows cover the bucket, so
  // nothing of its old value is copied; no copy of the bucket aside.
  EXPECT_LE(count_steps(plan, lower::PlanStep::Kernel), 2 * static_cast<int>(grads.size()))
      << lower::describe_plan(plan);
  EXPECT_LT(plan.arena_bytes, total * 4) << lower::describe_plan(plan);
  ASSERT_EQ(plan.root_copy.size(), 1u);
  EXPECT_FALSE(plan.root_copy[0]) << lower::describe_plan(plan);
}

TEST_F(CpuCopyKernels, ATrainingStyleLoopOfCatsAndSliceUpdatesRunsNoReferenceKernel) {
  set_active_backend("cpu");
  Tensor x = reshape(cast(arange(0, 12), DType::Float32), {12});
  Tensor buf = zeros({4, 5});
  sync();
  for (int step = 0; step < 3; ++step) {
    x = cat({x.slice(0, 1), x.slice(0, 0, 1)});  // a roll by one: the old x is donated
    buf.slice(1, step, std::nullopt, 2).copy_(buf.slice(1, step, std::nullopt, 2) + 1);
    sync();
  }
  std::vector<float> want;
  for (int i = 3; i < 15; ++i) want.push_back(static_cast<float>(i % 12));
  EXPECT_EQ(x.to_vector<float>(), want);
  // Column c was updated by the steps s <= c with c - s even.
  std::vector<float> cols = {1, 1, 2, 1, 2};
  std::vector<float> want_buf;
  for (int r = 0; r < 4; ++r) want_buf.insert(want_buf.end(), cols.begin(), cols.end());
  EXPECT_EQ(buf.to_vector<float>(), want_buf);
  EXPECT_EQ(counter("fallback::cat"), 0);
  EXPECT_EQ(counter("fallback::slice_scatter"), 0);
  EXPECT_GT(counter("ExecutedNode::cat"), 0);
  EXPECT_GT(counter("ExecutedNode::slice_scatter"), 0);
}

}  // namespace
}  // namespace lz
