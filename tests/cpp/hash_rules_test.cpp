// The hashing rules of DESIGN.md section 3 and the graph-hash ingredients of section 4, each
// pinned by its own test and observed through hashes and cache counters.
#include "ir/node.h"
#include "test_util.h"

namespace lz {
namespace {

using testing::RuntimeTest;
using HashRules = RuntimeTest;

Tensor data(std::vector<float> v, IntList shape) { return tensor<float>(v, shape); }

Tensor program(const Tensor& a) { return ((a * 2.5f + 1.0f).relu()).sum(); }

TEST_F(HashRules, SameProgramOverOtherBuffersHashesEqualAndHitsCache) {
  Tensor a1 = data({1, 2, 3, 4}, {2, 2});
  Tensor a2 = data({5, 6, 7, 8}, {2, 2});
  Tensor y1 = program(a1), y2 = program(a2);
  EXPECT_EQ(debug::graph_hash({y1}), debug::graph_hash({y2}));
  EXPECT_FLOAT_EQ(y1.item<float>(), (3.5f + 6 + 8.5f + 11));
  EXPECT_FLOAT_EQ(y2.item<float>(), (13.5f + 16 + 18.5f + 21));
  EXPECT_EQ(counter("UncachedCompile"), 1);
  EXPECT_EQ(counter("CachedCompile"), 1);
}

TEST_F(HashRules, ChangedLeafShapeChangesRootHash) {
  Tensor y1 = program(data({1, 2, 3, 4}, {2, 2}));
  Tensor y2 = program(data({1, 2, 3, 4}, {4}));
  EXPECT_NE(debug::graph_hash({y1}), debug::graph_hash({y2}));
  EXPECT_NE(y1.impl()->value().hash(), y2.impl()->value().hash());
}

TEST_F(HashRules, InteriorNodeHashLeavesOutShapeButDagHashCarriesIt) {
  Tensor a = data({1, 2, 3, 4}, {2, 2}), b = data({1, 2, 3, 4}, {4});
  ir::Value va = (a + a).impl()->value(), vb = (b + b).impl()->value();
  EXPECT_EQ(va.node->node_hash, vb.node->node_hash);
  EXPECT_NE(va.node->dag_hash, vb.node->dag_hash);
}

TEST_F(HashRules, BuffersAreNeverHashed) {
  Tensor a = data({1, 2}, {2}), b = data({3, 4}, {2});
  EXPECT_EQ(a.impl()->value().hash(), b.impl()->value().hash());
  Tensor c = tensor<double>({1, 2}, {2});
  EXPECT_NE(a.impl()->value().hash(), c.impl()->value().hash());  // dtype is hashed
}

TEST_F(HashRules, ChangedNonSpecialScalarKeepsHashAndCompilesOnce) {
  Tensor a = data({1, 2}, {2});
  Tensor y1 = a * 2.5f, y2 = a * 3.75f;
  EXPECT_EQ(debug::graph_hash({y1}), debug::graph_hash({y2}));
  EXPECT_EQ(y1.to_vector<float>(), (std::vector<float>{2.5f, 5.0f}));
  EXPECT_EQ(y2.to_vector<float>(), (std::vector<float>{3.75f, 7.5f}));
  EXPECT_EQ(counter("UncachedCompile"), 1);
}

TEST_F(HashRules, SpecialScalarsZeroAndOneAreBaked) {
  Tensor a = data({1, 2}, {2});
  std::string h0 = debug::graph_hash({a * 0.0f}), h1 = debug::graph_hash({a * 1.0f});
  std::string h2 = debug::graph_hash({a * 2.0f});
  EXPECT_NE(h0, h1);
  EXPECT_NE(h1, h2);
  EXPECT_EQ(debug::graph_hash({lz::constant(3, kFloat32) + a}),
            debug::graph_hash({lz::constant(3, kFloat32) + a}));
  EXPECT_NE(debug::graph_hash({lz::constant(3, kFloat32) + a}),
            debug::graph_hash({lz::constant(4, kFloat32) + a}));
}

TEST_F(HashRules, ParameterSequenceSeparatesSameInputTwiceFromTwoInputs) {
  Tensor a = data({1, 2}, {2}), b = data({3, 4}, {2});
  Tensor same = a + a, diff = a + b;
  EXPECT_EQ(same.impl()->value().hash(), diff.impl()->value().hash());  // same dag hash...
  EXPECT_NE(debug::graph_hash({same}), debug::graph_hash({diff}));     // ...different program
  EXPECT_EQ(same.to_vector<float>(), (std::vector<float>{2, 4}));
  EXPECT_EQ(diff.to_vector<float>(), (std::vector<float>{4, 6}));
  EXPECT_EQ(counter("UncachedCompile"), 2);
}

// The leaves' arrangement enters the hash: {a - b, b - a} and {a - b, a - b} have equal root
// dag hashes and parameter sequences, and shared one program (the second gave -3 for a - b).
TEST_F(HashRules, LeavesInAnotherArrangementGetTheirOwnProgram) {
  Tensor a = data({5}, {1}), b = data({2}, {1});
  lz::sync(true);
  Tensor r1 = a - b, r2 = b - a;
  std::string swapped = debug::graph_hash({r1, r2});
  lz::sync(true);
  EXPECT_EQ(r2.to_vector<float>(), std::vector<float>{-3});
  Tensor s1 = a - b, s2 = a - b;
  EXPECT_NE(debug::graph_hash({s1, s2}), swapped);
  lz::sync(true);
  EXPECT_EQ(s1.to_vector<float>(), std::vector<float>{3});
  EXPECT_EQ(s2.to_vector<float>(), std::vector<float>{3});
  EXPECT_EQ(counter("UncachedCompile"), 2);
}

TEST_F(HashRules, TensorStillAliveAtBarrierAddsAnOutputAndChangesTheGraph) {
  Tensor x = data({1, 2, 3}, {3});
  lz::sync(true);
  auto step = [&](bool keep_hidden) {
    Tensor hidden = x * 3.0f;
    Tensor out = (hidden + 1.0f).sum();
    std::string h = keep_hidden ? debug::graph_hash({hidden, out}) : debug::graph_hash({out});
    if (!keep_hidden) hidden = Tensor();  // dropped before the barrier
    lz::sync(true);
    EXPECT_EQ(debug::tensor_state(out), "device_data");
    return h;
  };
  int64_t before = counter("UncachedCompile");
  std::string without = step(false);
  step(false);
  EXPECT_EQ(counter("UncachedCompile") - before, 1);
  std::string with = step(true);
  EXPECT_EQ(counter("UncachedCompile") - before, 2);
  EXPECT_NE(without, with);
}

TEST_F(HashRules, ViewsAreNotSyncedAtBarrierYetReadTheBaseUpdate) {
  Tensor x = data({1, 2, 3, 4}, {2, 2});
  Tensor row = x.select(0, 1);
  x += 10.0f;
  lz::sync(true);
  EXPECT_EQ(debug::tensor_state(row), "view");
  EXPECT_EQ(debug::tensor_state(x), "device_data");
  EXPECT_EQ(row.to_vector<float>(), (std::vector<float>{13, 14}));
}

TEST_F(HashRules, ReadThenBarrierOverSameGraphCompilesOnce) {
  Tensor a = data({1, 2, 3}, {3});
  Tensor y = (a * 2.5f).exp();
  y.to_vector<float>();  // value read: no donation
  Tensor z = (a * 2.5f).exp();
  lz::sync_tensors({z}, true);  // barrier, but a is alive so nothing is donated
  EXPECT_EQ(counter("UncachedCompile"), 1);
  EXPECT_EQ(counter("CachedCompile"), 1);
}

TEST_F(HashRules, ReadingTwiceAfterInPlaceAddReturnsTheSameValue) {
  Tensor a = data({1, 2}, {2});
  Tensor x = data({10, 20}, {2});
  lz::sync(true);
  a += x;
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{11, 22}));
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{11, 22}));
  EXPECT_EQ(counter("InputOutputAliasCount"), 0);
}

TEST_F(HashRules, DonationHappensAtBarrierAndNeverOnRead) {
  Tensor w = data({1, 2, 3}, {3});
  Tensor g = data({1, 1, 1}, {3});
  w += 0.0f;
  lz::sync(true);  // a barrier: w's uploaded buffer is donated to its new value
  EXPECT_EQ(counter("InputOutputAliasCount"), 1);
  w -= g * 0.5f;
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{0.5f, 1.5f, 2.5f}));  // a read
  EXPECT_EQ(counter("InputOutputAliasCount"), 1);
  for (int i = 0; i < 3; ++i) {
    w -= g * 0.5f;
    lz::sync(true);
  }
  EXPECT_EQ(counter("InputOutputAliasCount"), 4);
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{-1, 0, 1}));
}

TEST_F(HashRules, NoDonationWhenAnotherTensorStillHoldsTheBuffer) {
  Tensor w = data({1, 2, 3}, {3});
  w += 0.0f;
  lz::sync(true);
  Tensor old = w.contiguous();  // another tensor with the same value...
  lz::sync(true);               // ...now holding w's buffer? no: its own copy.
  Tensor alias = w;             // same tensor handle: sees the update
  Tensor snapshot = w * 1.0f;   // pending IR over w's buffer
  w -= 1.0f;
  lz::sync(true);
  EXPECT_EQ(snapshot.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(alias.to_vector<float>(), (std::vector<float>{0, 1, 2}));
}

TEST_F(HashRules, DisablingParamAliasingTurnsDonationOff) {
  mutable_config().enable_param_aliasing = false;
  Tensor w = data({1, 2, 3}, {3});
  w += 0.0f;
  lz::sync(true);
  for (int i = 0; i < 2; ++i) {
    w -= 1.0f;
    lz::sync(true);
  }
  EXPECT_EQ(counter("InputOutputAliasCount"), 0);
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{-1, 0, 1}));
}

TEST_F(HashRules, LruEvictionPastCacheSizeRecompilesAndCounts) {
  resize_compile_cache(2);
  Tensor a = data({1, 2}, {2});
  auto run = [&](int k) {
    Tensor y = a;
    for (int i = 0; i <= k; ++i) y = y.exp();  // k+1 exps: a distinct graph per k
    y.to_vector<float>();
  };
  run(0);
  run(1);
  run(2);  // evicts graph 0
  EXPECT_EQ(counter("UncachedCompile"), 3);
  EXPECT_EQ(counter("CompileCacheEviction"), 1);
  run(2);
  EXPECT_EQ(counter("CachedCompile"), 1);
  run(0);  // evicted: compiled again
  EXPECT_EQ(counter("UncachedCompile"), 4);
  EXPECT_EQ(compile_cache_entries(), 2u);
}

TEST_F(HashRules, ManualSeedDoesNotChangeTheHash) {
  lz::manual_seed(1);
  Tensor r1 = lz::rand({8});
  std::string h1 = debug::graph_hash({r1});
  std::vector<float> v1 = r1.to_vector<float>();
  lz::manual_seed(2);
  Tensor r2 = lz::rand({8});
  EXPECT_EQ(debug::graph_hash({r2}), h1);
  std::vector<float> v2 = r2.to_vector<float>();
  EXPECT_NE(v1, v2);
  lz::manual_seed(1);
  EXPECT_EQ(lz::rand({8}).to_vector<float>(), v1);
  EXPECT_EQ(counter("UncachedCompile"), 1);
}

TEST_F(HashRules, NewStepDrawsNewRandomNumbersWithTheSameProgram) {
  lz::manual_seed(7);
  std::vector<std::vector<float>> draws;
  for (int i = 0; i < 3; ++i) {
    Tensor r = lz::rand({4});
    lz::sync(true);
    draws.push_back(r.to_vector<float>());
  }
  EXPECT_NE(draws[0], draws[1]);
  EXPECT_NE(draws[1], draws[2]);
  // Step 1 syncs the seed as a fresh device scalar; steps 2 and 3 share one program.
  EXPECT_LE(counter("UncachedCompile"), 2);
}

TEST_F(HashRules, CompileEnvironmentEntersEveryGraphHash) {
  Tensor y = data({1, 2}, {2}) * 2.5f;
  std::string h_cpu = debug::graph_hash({y});
  set_active_backend("interp");
  std::string h_interp = debug::graph_hash({y});
  set_active_backend(config().backend);
  EXPECT_NE(h_cpu, h_interp);
}

}  // namespace
}  // namespace lz
