// Recompile explanations, debug output, graph files and compile-region guards (DESIGN.md 6),
// each observed through counters, recent cut records and the files written.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "exec/compile_region.h"
#include "exec/explain.h"
#include "ir/origin.h"
#include "test_util.h"

namespace lz {
namespace {

using Explain = testing::RuntimeTest;
using Guards = testing::RuntimeTest;

std::string last_explanation() {
  auto cuts = cut_log().recent();
  return cuts.empty() ? "" : cuts.back().explanation;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST_F(Explain, FirstCompileIsANewCallSite) {
  (tensor<float>({1, 2}, {2}) * 3.0f).to_vector<float>();
  EXPECT_EQ(counter("RecompileReason::new-call-site"), 1);
  EXPECT_NE(last_explanation().find("first compile"), std::string::npos);
}

TEST_F(Explain, ChangedInputShapeIsNamedWithOldAndNewShape) {
  (tensor<float>({1, 2}, {2}) * 3.0f).to_vector<float>();
  (tensor<float>({1, 2, 3}, {3}) * 3.0f).to_vector<float>();
  EXPECT_EQ(counter("RecompileReason::input-shape"), 1);
  EXPECT_NE(last_explanation().find("float32[2] to float32[3]"), std::string::npos) << last_explanation();
}

TEST_F(Explain, ANodeIsNamedWithTheOpTheUserCalledThatRecordedIt) {
  Tensor x = tensor<float>({1, 2}, {2});
  lz::sync(true);
  for (bool exp_branch : {false, false, true}) {
    ir::UserOpScope scope(exp_branch ? "aten.exp.default" : "aten.neg.default");
    Tensor y = exp_branch ? lz::exp(x) : lz::neg(x);
    y.to_vector<float>();
  }
  std::string e = last_explanation();
  EXPECT_EQ(counter("RecompileReason::structure"), 1) << e;
  EXPECT_NE(e.find("exp (aten.exp.default) float32[2]"), std::string::npos) << e;
  EXPECT_NE(e.find("neg (aten.neg.default) float32[2]"), std::string::npos) << e;
}

TEST_F(Explain, ChangedInputDtypeIsNamed) {
  (tensor<float>({1, 2}, {2}) * 3.0f).to_vector<float>();
  (tensor<double>({1, 2}, {2}) * 3.0f).to_vector<double>();
  EXPECT_EQ(counter("RecompileReason::input-dtype"), 1);
  EXPECT_NE(last_explanation().find("float64"), std::string::npos) << last_explanation();
}

TEST_F(Explain, TensorKeptAliveAcrossTheBarrierIsNamedAsNewlyAlive) {
  Tensor w = tensor<float>({1, 2}, {2});
  lz::sync(true);
  {
    Tensor out = (w * 3.0f).sum();
    lz::sync(true);
  }
  Tensor hidden = w * 3.0f;
  Tensor out = hidden.sum();
  lz::sync(true);
  EXPECT_EQ(counter("RecompileReason::new-live-tensor"), 1) << last_explanation();
  EXPECT_NE(last_explanation().find("more tensor(s) alive"), std::string::npos);
}

TEST_F(Explain, ChangedBakedConstantIsNamedWithBothValues) {
  Tensor a = tensor<float>({1, 2}, {2});
  (a + lz::constant(5, kFloat32)).to_vector<float>();
  (a + lz::constant(7, kFloat32)).to_vector<float>();
  EXPECT_EQ(counter("RecompileReason::baked-constant"), 1);
  EXPECT_NE(last_explanation().find("from 5 to 7"), std::string::npos) << last_explanation();
}

TEST_F(Explain, SameBufferTwiceIsAnAliasingChange) {
  Tensor a = tensor<float>({1, 2}, {2}), b = tensor<float>({3, 4}, {2});
  (a + b).to_vector<float>();
  (a + a).to_vector<float>();
  EXPECT_EQ(counter("RecompileReason::aliasing"), 1) << last_explanation();
}

TEST_F(Explain, ChangedEnvironmentIsNamed) {
  Tensor a = tensor<float>({1, 2}, {2});
  (a * 3.0f).to_vector<float>();
  set_active_backend(config().backend == "cpu" ? "interp" : "cpu");
  (a * 3.0f).to_vector<float>();
  set_active_backend(config().backend);
  EXPECT_EQ(counter("RecompileReason::environment"), 1);
}

TEST_F(Explain, EveryChangedInputIsNamed) {
  (tensor<float>({1, 2}, {2}) + tensor<double>({1, 2, 3}, {3}).sum()).to_vector<float>();
  (tensor<float>({1, 2, 3}, {3}) + tensor<double>({1, 2, 3, 4}, {4}).sum()).to_vector<float>();
  std::string e = last_explanation();
  EXPECT_NE(e.find("float32[2] to float32[3]"), std::string::npos) << e;
  EXPECT_NE(e.find("float64[3] to float64[4]"), std::string::npos) << e;
}

TEST_F(Explain, ChangedInputsPastTheFirstFewAreCountedAsMore) {
  auto run = [](int64_t n) {
    Tensor s = lz::zeros({1});
    for (int i = 0; i < 6; ++i) s = s + lz::tensor<float>(std::vector<float>(n, 1.0f), {n}).sum();
    s.to_vector<float>();
  };
  run(2);
  run(3);
  std::string e = last_explanation();
  EXPECT_NE(e.find("input 0,"), std::string::npos) << e;
  EXPECT_NE(e.find("and 2 more difference(s)"), std::string::npos) << e;
}

TEST_F(Explain, AShapeGrowingEachStepIsComparedWithTheStepBefore) {
  for (int64_t n = 1; n <= 30; ++n) {
    (tensor<float>(std::vector<float>(n, 1.0f), {1, n}) * 3.0f).to_vector<float>();
  }
  std::string e = last_explanation();
  EXPECT_NE(e.find("float32[1, 29] to float32[1, 30]"), std::string::npos) << e;
}

// A sampler grows idx by cat and reads a value computed from it each token: the read stores idx,
// so each token's graph takes idx as an input one longer than before, and that is what is named.
TEST_F(Explain, AGrowingCatInputIsNamedByItsShapeChange) {
  Tensor idx = tensor<int64_t>({1, 2, 3}, {1, 3});
  for (int64_t k = 0; k < 4; ++k) {
    int64_t next = (idx.sum() % 5).item<int64_t>();
    idx = lz::cat({idx, tensor<int64_t>({next}, {1, 1})}, 1);
  }
  std::string e = last_explanation();
  EXPECT_EQ(e.find("input 0,"), 0u) << e;
  EXPECT_NE(e.find("int64[1, 4] to int64[1, 5]"), std::string::npos) << e;
  EXPECT_EQ(e.find("where it had"), std::string::npos) << e;
}

// sync_tensors syncs only what it lists, so a chain nothing stores grows by a link per call.
TEST_F(Explain, AChainGrowingByALinkPerCallIsNamedAsOne) {
  Tensor x = tensor<float>({1}, {1, 1});
  for (int k = 0; k < 4; ++k) {
    x = lz::cat({x, tensor<float>({static_cast<float>(k)}, {1, 1})}, 1);
    lz::sync_tensors({(x * 2.0f).sum()}, true);
  }
  std::string e = last_explanation();
  EXPECT_NE(e.find("2 node(s) inserted"), std::string::npos) << e;
  EXPECT_NE(e.find("(device_data float32[1, 1], cat float32[1, 5])"), std::string::npos) << e;
  EXPECT_NE(e.find("one more link of a chain"), std::string::npos) << e;
}

TEST_F(Explain, AGraphThatLostNodesNamesWhereItPartsNotAnInsertedRun) {
  Tensor a = tensor<float>({1, 2}, {2});
  ((a * 2.0f).exp() + 1.0f).sum().to_vector<float>();
  (a + 1.0f).sum().to_vector<float>();
  std::string e = last_explanation();
  EXPECT_NE(e.find("structure changed"), std::string::npos) << e;
  EXPECT_EQ(e.find("inserted"), std::string::npos) << e;
}

TEST_F(Explain, TheHistoryRemembersABoundedNumberOfGraphKeys) {
  for (int64_t n = 1; n <= 200; ++n) (lz::ones({n}) * 3.0f).to_vector<float>();
  EXPECT_EQ(counter("UncachedCompile"), 200);
  EXPECT_LE(recompile_history_size(), 64u);
  EXPECT_GE(recompile_history_size(), 1u);
}

TEST_F(Explain, DebugLevelOnePrintsABlockPerCompileToTheDebugFile) {
  std::string path = ::testing::TempDir() + "/lazuli_debug.txt";
  std::remove(path.c_str());
  mutable_config().debug = 1;
  mutable_config().debug_file = path;
  Tensor a = tensor<float>({1, 2}, {2});
  (a * 3.0f).to_vector<float>();
  (a * 3.0f).to_vector<float>();  // a cache hit: no block at level 1
  std::string text = slurp(path);
  EXPECT_NE(text.find("compile, cause value-read"), std::string::npos) << text;
  EXPECT_NE(text.find("why it compiled"), std::string::npos) << text;
  EXPECT_EQ(text.find("execution, cause"), std::string::npos) << text;
  mutable_config().debug = 2;
  (a * 3.0f).to_vector<float>();
  EXPECT_NE(slurp(path).find("execution, cause value-read"), std::string::npos);
}

TEST_F(Explain, SaveGraphsFileGetsReasonGraphAndHashAtEveryCut) {
  std::string path = ::testing::TempDir() + "/lazuli_graphs.txt";
  std::remove(path.c_str());
  mutable_config().save_graphs_file = path;
  Tensor a = tensor<float>({1, 2}, {2});
  Tensor y = (a * 3.0f).exp();
  std::string h = debug::graph_hash({y});
  lz::sync_tensors({y}, true);
  std::string text = slurp(path);
  EXPECT_NE(text.find("cause sync-tensors"), std::string::npos) << text;
  EXPECT_NE(text.find("exp("), std::string::npos) << text;
  EXPECT_NE(text.find("graph hash: " + h), std::string::npos) << text;
  mutable_config().save_graphs_fmt = "dot";
  (a + 1.0f).to_vector<float>();
  EXPECT_NE(slurp(path).find("digraph"), std::string::npos);
}

TEST_F(Guards, FullGraphRegionRaisesBeforeAnyExecutionAndStaysUsable) {
  Tensor a = tensor<float>({1, 2}, {2});
  Tensor y = a * 3.0f;
  enter_region("step", /*full_graph=*/true, -1, 1);
  EXPECT_THROW(y.to_vector<float>(), UnexpectedExecutionError);
  EXPECT_THROW(lz::sync(), UnexpectedExecutionError);
  exit_region();
  EXPECT_EQ(counter("UncachedCompile") + counter("CachedCompile"), 0);  // nothing ran
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{3, 6}));
}

TEST_F(Guards, MaxDifferentGraphsRaisesOnTheExtraGraphBeforeCompiling) {
  auto traced = [](int n) {
    enter_region("f", false, /*max_graphs=*/1, 42);
    Tensor y = lz::ones({n}) * 2.0f;
    try {
      check_region_graph();
    } catch (...) {
      exit_region();
      throw;
    }
    exit_region();
    lz::sync(true);
  };
  traced(3);
  traced(3);
  EXPECT_THROW(traced(4), TooManyGraphsError);
  EXPECT_EQ(counter("UncachedCompile"), 1);
  lz::sync(true);  // the runtime still works (the pending ones(4) runs here)
}

}  // namespace
}  // namespace lz
