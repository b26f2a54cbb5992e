// Autograd: every primitive's gradient against central finite differences in float64, through one
// helper (CheckGradients) and one table (kGradCases); then the leaf/non-leaf rules and the errors.
#include <cmath>
#include <functional>
#include <set>

#include "autograd/grad_rules.h"
#include "test_util.h"

namespace lz {
namespace {

using testing::RuntimeTest;
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

struct Input {
  IntList shape;
  double lo = -1, hi = 1;  // values drawn in [lo, hi]
};

struct GradCase {
  const char* name;
  std::vector<Input> inputs;
  Fn fn;
  double eps = 1e-6;
  double rtol = 1e-5;
};

// Deterministic values in [lo, hi] (a simple LCG; no test depends on the device RNG).
std::vector<double> values(const Input& in, uint64_t seed) {
  std::vector<double> v(static_cast<size_t>(numel(in.shape)));
  uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  for (double& x : v) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x = in.lo + (in.hi - in.lo) * static_cast<double>(s >> 11) / 9007199254740992.0;
  }
  return v;
}

// sum(fn(inputs) * w) with fixed weights w, so non-scalar outputs get a non-uniform gradient.
double objective(const Fn& fn, const std::vector<Tensor>& xs, std::vector<double>* weights) {
  Tensor out = fn(xs).to(kFloat64);
  std::vector<double> o = out.to_vector<double>();
  if (weights->empty()) *weights = values({{static_cast<int64_t>(o.size())}, 0.5, 1.5}, 99);
  double s = 0;
  for (size_t i = 0; i < o.size(); ++i) s += o[i] * (*weights)[i];
  return s;
}

void CheckGradients(const GradCase& c) {
  SCOPED_TRACE(c.name);
  std::vector<std::vector<double>> data;
  std::vector<Tensor> xs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    data.push_back(values(c.inputs[i], i + 1));
    xs.push_back(tensor<double>(data.back(), c.inputs[i].shape));
    set_requires_grad(xs.back());
  }
  std::vector<double> w;
  {
    NoGradGuard off;
    objective(c.fn, xs, &w);
  }
  Tensor out = c.fn(xs).to(kFloat64);
  ASSERT_TRUE(requires_grad(out));
  backward(out, tensor<double>(w, out.shape()));
  NoGradGuard off;
  for (size_t i = 0; i < xs.size(); ++i) {
    Tensor g = grad(xs[i]);
    ASSERT_TRUE(g.defined()) << "input " << i << " got no gradient";
    std::vector<double> analytic = g.to_vector<double>();
    for (size_t j = 0; j < data[i].size(); ++j) {
      auto at = [&](double delta) {
        std::vector<Tensor> ys;
        for (size_t k = 0; k < xs.size(); ++k) {
          std::vector<double> d = data[k];
          if (k == i) d[j] += delta;
          ys.push_back(tensor<double>(d, c.inputs[k].shape));
        }
        return objective(c.fn, ys, &w);
      };
      double numeric = (at(c.eps) - at(-c.eps)) / (2 * c.eps);
      EXPECT_NEAR(analytic[j], numeric, 1e-7 + c.rtol * std::fabs(numeric))
          << "input " << i << " element " << j;
    }
  }
}

Tensor idx(std::vector<int64_t> v, IntList shape) { return tensor<int64_t>(v, shape); }

const std::vector<GradCase>& grad_cases() {
  static const std::vector<GradCase> cases = {
      // unary
      {"neg", {{{2, 3}}}, [](auto& x) { return neg(x[0]); }},
      {"abs", {{{2, 3}, 0.2, 1}}, [](auto& x) { return abs(x[0]) + abs(neg(x[0])); }},
      {"exp", {{{2, 3}}}, [](auto& x) { return exp(x[0]); }},
      {"log", {{{2, 3}, 0.5, 2}}, [](auto& x) { return log(x[0]); }},
      {"log1p", {{{2, 3}, 0, 2}}, [](auto& x) { return log1p(x[0]); }},
      {"expm1", {{{2, 3}}}, [](auto& x) { return expm1(x[0]); }},
      {"sqrt", {{{2, 3}, 0.5, 2}}, [](auto& x) { return sqrt(x[0]); }},
      {"rsqrt", {{{2, 3}, 0.5, 2}}, [](auto& x) { return rsqrt(x[0]); }},
      {"sin", {{{2, 3}}}, [](auto& x) { return sin(x[0]); }},
      {"cos", {{{2, 3}}}, [](auto& x) { return cos(x[0]); }},
      {"tan", {{{2, 3}, -1.2, 1.2}}, [](auto& x) { return tan(x[0]); }},
      {"tanh", {{{2, 3}}}, [](auto& x) { return tanh(x[0]); }},
      {"sigmoid", {{{2, 3}, -3, 3}}, [](auto& x) { return sigmoid(x[0]); }},
      {"relu", {{{3, 4}}}, [](auto& x) { return relu(x[0]); }},
      {"gelu", {{{2, 3}, -3, 3}}, [](auto& x) { return gelu(x[0]); }},
      {"erf", {{{2, 3}}}, [](auto& x) { return erf(x[0]); }},
      {"floor", {{{2, 3}, 0.1, 0.9}}, [](auto& x) { return floor(x[0] * 3.0) + x[0]; }},
      {"ceil", {{{2, 3}, 0.1, 0.9}}, [](auto& x) { return ceil(x[0] * 3.0) + x[0]; }},
      {"round", {{{2, 3}, 0.1, 0.4}}, [](auto& x) { return round(x[0]) + x[0]; }},
      {"sign", {{{2, 3}, 0.1, 1}}, [](auto& x) { return sign(x[0]) * x[0]; }},
      {"reciprocal", {{{2, 3}, 0.5, 2}}, [](auto& x) { return reciprocal(x[0]); }},
      {"cast", {{{2, 3}}}, [](auto& x) { return (x[0].to(kFloat32) * 2.0f).to(kFloat64); }, 1e-2, 1e-4},
      // binary, with implicit broadcasting
      {"add", {{{2, 3}}, {{3}}}, [](auto& x) { return add(x[0], x[1]); }},
      {"add_bcast_both", {{{2, 1}}, {{1, 3}}}, [](auto& x) { return add(x[0], x[1]); }},
      {"add_scalar", {{{2, 3}}}, [](auto& x) { return add(x[0], 2.5); }},
      {"sub", {{{2, 3}}, {{2, 1}}}, [](auto& x) { return sub(x[0], x[1]); }},
      {"sub_scalar_left", {{{3}}}, [](auto& x) { return sub(2.5, x[0]); }},
      {"mul", {{{2, 3}}, {{3}}}, [](auto& x) { return mul(x[0], x[1]); }},
      {"mul_same", {{{2, 3}}}, [](auto& x) { return mul(x[0], x[0]); }},
      {"div", {{{2, 3}}, {{2, 1}, 0.5, 2}}, [](auto& x) { return div(x[0], x[1]); }},
      {"floor_divide", {{{2, 3}, 1.1, 1.9}, {{3}, 0.5, 0.6}},
       [](auto& x) { return floor_divide(x[0], x[1]) + x[0] * x[1]; }},
      {"remainder", {{{2, 3}, 2.1, 2.9}, {{3}, 1.0, 1.05}}, [](auto& x) { return remainder(x[0], x[1]); }},
      {"pow", {{{2, 3}, 0.5, 2}, {{3}, -1, 2}}, [](auto& x) { return pow(x[0], x[1]); }},
      {"pow_scalar", {{{2, 3}}}, [](auto& x) { return pow(x[0], 3); }},
      {"maximum", {{{2, 3}}, {{2, 3}}}, [](auto& x) { return maximum(x[0], x[1]); }},
      {"minimum", {{{2, 3}}, {{3}}}, [](auto& x) { return minimum(x[0], x[1]); }},
      {"clamp", {{{3, 4}}}, [](auto& x) { return clamp(x[0], -0.5, 0.5); }},
      {"where", {{{2, 3}}, {{3}}},
       [](auto& x) { return where(gt(x[0], 0.0), x[0] * 2.0, x[1]); }},
      // reductions
      {"sum_all", {{{2, 3}}}, [](auto& x) { return sum(x[0]); }},
      {"sum_dim", {{{2, 3, 2}}}, [](auto& x) { return sum(x[0], {1}); }},
      {"sum_keepdim", {{{2, 3, 2}}}, [](auto& x) { return sum(x[0], {0, 2}, true); }},
      {"prod", {{{2, 3}, 0.5, 1.5}}, [](auto& x) { return prod(x[0], {1}); }},
      {"amax", {{{3, 4}}}, [](auto& x) { return amax(x[0], {1}); }},
      {"amin_all", {{{3, 4}}}, [](auto& x) { return amin(x[0]); }},
      // matrix
      {"matmul", {{{2, 3}}, {{3, 4}}}, [](auto& x) { return matmul(x[0], x[1]); }},
      {"matmul_batched", {{{2, 2, 3}}, {{3, 2}}}, [](auto& x) { return matmul(x[0], x[1]); }},
      {"matmul_bcast_batch", {{{3, 2}}, {{2, 2, 3}}}, [](auto& x) { return matmul(x[0], x[1]); }},
      {"matmul_vector", {{{3}}, {{3, 2}}}, [](auto& x) { return matmul(x[0], x[1]); }},
      // movement
      {"reshape", {{{2, 3}}}, [](auto& x) { return reshape(x[0], {3, 2}) * x[0].reshape({3, 2}); }},
      {"permute", {{{2, 3, 2}}}, [](auto& x) { return permute(x[0], {2, 0, 1}); }},
      {"expand", {{{3, 1}}}, [](auto& x) { return expand(x[0], {2, 3, 4}); }},
      {"slice", {{{5, 3}}}, [](auto& x) { return slice(x[0], 0, 1, 5, 2); }},
      {"cat", {{{2, 3}}, {{1, 3}}}, [](auto& x) { return cat({x[0], x[1], x[0]}, 0); }},
      {"slice_scatter", {{{4, 3}}, {{2, 3}}},
       [](auto& x) {
         Tensor y = x[0] * 1.5;
         Tensor view = y.slice(0, 1, 3);
         view.copy_(x[1]);
         return y;
       }},
      {"index_select", {{{4, 3}}}, [](auto& x) { return index_select(x[0], 0, idx({2, 0, 2}, {3})); }},
      {"gather", {{{3, 4}}}, [](auto& x) { return gather(x[0], 1, idx({0, 3, 3, 1, 2, 0}, {3, 2})); }},
      {"scatter_add", {{{3, 4}}, {{3, 2}}},
       [](auto& x) { return scatter_add(x[0], 1, idx({0, 3, 3, 3, 2, 0}, {3, 2}), x[1]); }},
      {"index_copy", {{{4, 3}}, {{2, 3}}},
       [](auto& x) { return index_copy(x[0], 0, idx({3, 1}, {2}), x[1]); }},
      // ordering (a multi-output primitive: the values' gradient goes back through the indices)
      {"sort", {{{3, 4}}}, [](auto& x) { return sort(x[0], 1, true).first; }},
      {"sort_dim0_both_outputs", {{{3, 4}}},
       [](auto& x) {
         auto [v, i] = sort(x[0], 0);
         return v * i.to(kFloat64);
       }},
      {"topk", {{{3, 5}}}, [](auto& x) { return topk(x[0], 2, 1).first; }},
      // convolution and pooling (each gradient op is differentiable too: double backward)
      {"conv2d", {{{2, 4, 5, 6}}, {{6, 2, 3, 2}}},
       [](auto& x) { return nn::conv2d(x[0], x[1], Tensor(), {2, 1}, {1, 0}, {1, 2}, 2); }},
      {"conv1d", {{{2, 3, 7}}, {{4, 3, 3}}},
       [](auto& x) { return nn::conv1d(x[0], x[1], Tensor(), {1}, {2}, {2}); }},
      {"conv_transpose2d", {{{2, 4, 3, 3}}, {{4, 3, 2, 3}}},
       [](auto& x) {
         return nn::conv_transpose2d(x[0], x[1], Tensor(), {2, 1}, {1, 0}, {1, 0}, 1, {1, 1});
       }},
      {"conv2d_squared", {{{2, 2, 5, 5}}, {{3, 2, 2, 2}}},
       [](auto& x) {
         Tensor y = nn::conv2d(x[0], x[1], Tensor(), {2}, {1});
         return sum(y * y);
       }},
      {"max_pool2d", {{{2, 3, 5, 6}}},
       [](auto& x) { return nn::max_pool2d(x[0], {3, 2}, {2}, {1, 0}, {1}, true); }},
      {"max_pool1d_dilated", {{{2, 7}}}, [](auto& x) { return nn::max_pool1d(x[0], {2}, {1}, {0}, {2}); }},
      {"avg_pool2d", {{{2, 3, 5, 6}}},
       [](auto& x) { return nn::avg_pool2d(x[0], {3, 2}, {2}, {1, 0}, true, false); }},
      {"avg_pool2d_divisor", {{{1, 2, 4, 4}}},
       [](auto& x) { return nn::avg_pool2d(x[0], {2}, {}, {1}, false, true, 3); }},
      {"adaptive_avg_pool2d", {{{2, 3, 5, 7}}},
       [](auto& x) { return nn::adaptive_avg_pool2d(x[0], {3, 2}); }},
      {"batch_norm_train", {{{4, 3, 2, 2}}, {{3}}, {{3}}},
       [](auto& x) {
         return nn::batch_norm(x[0], Tensor(), Tensor(), x[1], x[2], true, 0.1, 1e-5);
       }},
      {"group_norm", {{{2, 4, 3}}, {{4}}, {{4}}},
       [](auto& x) { return nn::group_norm(x[0], 2, x[1], x[2]); }},
      {"rms_norm", {{{2, 3, 4}}, {{4}}}, [](auto& x) { return nn::rms_norm(x[0], {4}, x[1]); }},
      // scans (cumprod with zeros: before, at and after a line's first zero, and a second zero)
      {"cumsum", {{{3, 4}}}, [](auto& x) { return cumsum(x[0], 1); }},
      {"cumsum_dim0", {{{3, 4}}}, [](auto& x) { return cumsum(x[0], 0) * x[0]; }},
      {"cumprod", {{{3, 4}, 0.5, 1.5}}, [](auto& x) { return cumprod(x[0], 1); }},
      {"cumprod_zeros", {{{2, 5}, 0.5, 1.5}},
       [](auto& x) {
         // The input minus its own starting values at the marked places: exact zeros there
         // (row 0: one; row 1: two), which finite differences move off zero like any input.
         Tensor at = tensor<double>({0, 0, 1, 0, 0, 0, 1, 0, 1, 0}, {2, 5});
         Tensor start = tensor<double>(values({{2, 5}, 0.5, 1.5}, 1), {2, 5});
         return cumprod(x[0] - start * at, 1);
       }},
      {"sdpa", {{{2, 3, 4}}, {{2, 5, 4}}, {{2, 5, 3}}},
       [](auto& x) { return nn::scaled_dot_product_attention(x[0], x[1], x[2]); }},
      {"sdpa_causal_float_mask", {{{1, 2, 4, 3}}, {{1, 2, 4, 3}}, {{1, 2, 4, 2}}, {{4, 4}}},
       [](auto& x) {
         return nn::scaled_dot_product_attention(x[0], x[1], x[2], x[3]) +
                nn::scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), 0.0, true, 0.7);
       }},
      // composites: gradients from their primitives
      {"mean", {{{2, 3}}}, [](auto& x) { return mean(x[0], {1}); }},
      {"var", {{{2, 4}}}, [](auto& x) { return var(x[0], {1}); }},
      {"std", {{{2, 4}}}, [](auto& x) { return lz::std(x[0]); }},
      {"logsumexp", {{{2, 3}}}, [](auto& x) { return logsumexp(x[0], {1}); }},
      {"softmax", {{{2, 4}}}, [](auto& x) { return nn::softmax(x[0], 1); }},
      {"log_softmax", {{{2, 4}}}, [](auto& x) { return nn::log_softmax(x[0], -1); }},
      {"cross_entropy", {{{3, 4}}}, [](auto& x) { return nn::cross_entropy(x[0], idx({1, 0, 3}, {3})); }},
      {"mse_loss", {{{2, 3}}, {{2, 3}}}, [](auto& x) { return nn::mse_loss(x[0], x[1]); }},
      {"linear", {{{2, 3}}, {{4, 3}}, {{4}}}, [](auto& x) { return nn::linear(x[0], x[1], x[2]); }},
  };
  return cases;
}

using GradCheck = RuntimeTest;

TEST_F(GradCheck, EveryPrimitiveMatchesFiniteDifferences) {
  for (const GradCase& c : grad_cases()) CheckGradients(c);
}

TEST_F(GradCheck, TheTableCoversEveryDifferentiablePrimitive) {
  // Records every case's forward graph and collects the primitives that carry gradients.
  std::vector<bool> seen(static_cast<size_t>(ir::OpKind::kNumOps), false);
  for (const GradCase& c : grad_cases()) {
    std::vector<Tensor> xs;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      xs.push_back(tensor<double>(values(c.inputs[i], i + 1), c.inputs[i].shape));
      set_requires_grad(xs.back());
    }
    std::vector<ir::NodePtr> stack{c.fn(xs).impl()->value().node};
    std::set<const ir::Node*> visited;
    while (!stack.empty()) {
      ir::NodePtr n = stack.back();
      stack.pop_back();
      if (!n->requires_grad || !visited.insert(n.get()).second) continue;
      seen[static_cast<size_t>(n->op)] = true;
      for (const ir::Value& v : n->operands) stack.push_back(v.node);
    }
  }
  for (int op = 0; op < static_cast<int>(ir::OpKind::kNumOps); ++op) {
    auto k = static_cast<ir::OpKind>(op);
    if (autograd::grad_rule(k).kind != autograd::GradKind::Rule) continue;
    EXPECT_TRUE(seen[static_cast<size_t>(op)]) << ir::op_name(k) << " has a rule but no gradient check";
  }
}

using Autograd = RuntimeTest;

Tensor leaf(std::vector<float> v, IntList shape) {
  Tensor t = tensor<float>(v, shape);
  set_requires_grad(t);
  return t;
}

TEST_F(Autograd, GradientsAccumulateAcrossBackwardCalls) {
  Tensor w = leaf({1, 2, 3}, {3});
  backward(sum(w * w));
  backward(sum(w * 3.0f));
  EXPECT_EQ(grad(w).to_vector<float>(), (std::vector<float>{5, 7, 9}));
}

TEST_F(Autograd, LeafAndNonLeafRules) {
  Tensor w = leaf({1, 2}, {2});
  Tensor y = w * 2.0f;
  Tensor c = tensor<float>({1, 2}, {2});
  EXPECT_TRUE(is_leaf(w));
  EXPECT_FALSE(is_leaf(y));
  EXPECT_TRUE(requires_grad(y));
  EXPECT_TRUE(is_leaf(c));
  EXPECT_FALSE(requires_grad(c * w.to(kFloat32) > 0.0f));  // bool outputs never require grad
  EXPECT_THROW(set_requires_grad(y, false), Error);
  Tensor i = tensor<int64_t>({1, 2}, {2});
  EXPECT_THROW(set_requires_grad(i), Error);
}

TEST_F(Autograd, NoGradRecordsNothingThatRequiresGrad) {
  Tensor w = leaf({1, 2}, {2});
  {
    NoGradGuard off;
    EXPECT_FALSE(is_grad_enabled());
    EXPECT_FALSE(requires_grad(w * 2.0f));
  }
  EXPECT_TRUE(is_grad_enabled());
  EXPECT_TRUE(requires_grad(w * 2.0f));
}

TEST_F(Autograd, BackwardOnATensorThatDoesNotRequireGradThrows) {
  Tensor c = tensor<float>({1, 2}, {2});
  EXPECT_THROW(backward(sum(c)), Error);
}

TEST_F(Autograd, NonScalarBackwardNeedsAGradient) {
  Tensor w = leaf({1, 2}, {2});
  Tensor y = w * 2.0f;
  EXPECT_THROW(backward(y), Error);
  backward(y, tensor<float>({1, 10}, {2}));
  EXPECT_EQ(grad(w).to_vector<float>(), (std::vector<float>{2, 20}));
}

TEST_F(Autograd, SecondBackwardThroughTheSameGraphThrowsUnlessRetained) {
  Tensor w = leaf({1, 2}, {2});
  Tensor loss = sum(exp(w));
  backward(loss);
  EXPECT_THROW(backward(loss), Error);
  Tensor loss2 = sum(w * w);
  backward(loss2, Tensor(), /*retain_graph=*/true);
  backward(loss2);
  EXPECT_THROW(backward(loss2), Error);
}

TEST_F(Autograd, InPlaceOnALeafThatRequiresGradThrowsUnderGradMode) {
  Tensor w = leaf({1, 2}, {2});
  try {
    w.add_(1.0f);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a leaf tensor that requires grad is used in an in-place operation"),
              std::string::npos);
  }
  Tensor v = w.slice(0, 0, 1);
  EXPECT_THROW(v.mul_(2.0f), Error);
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{1, 2}));  // nothing changed
  {
    NoGradGuard off;
    w.add_(1.0f);
  }
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{2, 3}));
}

TEST_F(Autograd, LeafUpdatedInPlaceAndNotSyncedStillCollectsItsGradient) {
  Tensor w = leaf({1, 2}, {2});
  {
    NoGradGuard off;
    w.mul_(3.0f);  // w is now pending IR: a GradLeaf carries its flag
  }
  EXPECT_EQ(w.impl()->value().node->op, ir::OpKind::GradLeaf);
  EXPECT_EQ(w.impl()->value().node, w.impl()->value().node);  // asking twice, same node
  backward(sum(w * w));
  EXPECT_EQ(grad(w).to_vector<float>(), (std::vector<float>{6, 12}));
}

TEST_F(Autograd, DetachStopsGradientsAndSharesTheValue) {
  Tensor w = leaf({1, 2}, {2});
  Tensor d = detach(w);
  EXPECT_FALSE(requires_grad(d));
  backward(sum(w * detach(w)));
  EXPECT_EQ(grad(w).to_vector<float>(), (std::vector<float>{1, 2}));
  d.add_(1.0f);  // writes through to w, allowed (as PyTorch's w.detach().add_())
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{2, 3}));
}

TEST_F(Autograd, ReadingTheLossBeforeBackwardKeepsItsGraph) {
  Tensor w = leaf({1, 2}, {2});
  Tensor loss = sum(w * w);
  EXPECT_FLOAT_EQ(loss.item<float>(), 5.0f);
  EXPECT_EQ(debug::tensor_state(loss), "device_data");
  EXPECT_TRUE(requires_grad(loss));
  backward(loss);
  EXPECT_EQ(grad(w).to_vector<float>(), (std::vector<float>{2, 4}));
}

TEST_F(Autograd, BackwardRecordsAndRunsNothing) {
  Tensor w = leaf({1, 2}, {2});
  Tensor loss = sum(w * w);
  int64_t execs = counter("UncachedCompile") + counter("CachedCompile");
  backward(loss);
  EXPECT_EQ(counter("UncachedCompile") + counter("CachedCompile"), execs);
  EXPECT_EQ(debug::tensor_state(grad(w)), "ir");
}

TEST_F(Autograd, AGradientForADeadLeafIsDropped) {
  Tensor loss;
  {
    Tensor w = leaf({1, 2}, {2});
    loss = sum(w * w);
  }
  backward(loss);  // nothing to accumulate into
  EXPECT_FLOAT_EQ(loss.item<float>(), 5.0f) << "the loss still reads";
  Tensor v = leaf({3}, {1});
  backward(sum(v * v));
  EXPECT_EQ(grad(v).to_vector<float>(), (std::vector<float>{6})) << "autograd keeps working";
}

TEST_F(Autograd, SgdStepsDonateParametersAndCompileOnce) {
  nn::MLP model({4, 8, 3});
  std::vector<Tensor> params = model.parameters();
  Tensor x = randn({5, 4});
  Tensor y = tensor<int64_t>({0, 1, 2, 1, 0}, {5});
  sync_tensors({x, y});
  int64_t compiles_after_2 = 0, donated_before = 0;
  for (int step = 0; step < 5; ++step) {
    nn::zero_grad(params);
    backward(nn::cross_entropy(model.forward(x), y));
    nn::sgd_step(params, 0.1);
    donated_before = counter("InputOutputAliasCount");
    sync();
    if (step == 1) compiles_after_2 = counter("UncachedCompile");
    if (step >= 2) {
      EXPECT_EQ(counter("InputOutputAliasCount") - donated_before, static_cast<int64_t>(params.size()));
    }
  }
  EXPECT_EQ(counter("UncachedCompile"), compiles_after_2);
}

}  // namespace
}  // namespace lz
