// CpuCompilerDonation: in-place updates whose output storage is the donated input's agree with
// the reference backend and read the old values where they alias.
#include "cpu_compiler_util.h"

namespace lz {
namespace {

using namespace cpu_test;  // NOLINT(build/namespaces): the shared helpers of these test files

// ---------------------------------------------------------------------------------------------
// Donation: an in-place update written into its own input's storage
// ---------------------------------------------------------------------------------------------

using CpuCompilerDonation = CpuCompilerTest;

std::vector<float> square_values(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n * n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f - 3.0f;
  return v;
}

// Runs `update` on x (already on the device) under a barrier on both backends; the results agree
// and the buffer was donated on cpu.
void expect_in_place_update_agrees(const std::function<void(Tensor&)>& update, int64_t n = 9) {
  std::vector<Result> results[2];
  int64_t donated[2] = {0, 0};
  const char* backends[2] = {"interp", "cpu"};
  for (int b = 0; b < 2; ++b) {
    lz::wait();
    set_active_backend(backends[b]);
    {
      Tensor x = tensor<float>(square_values(n), {n, n});
      x = x + 0;  // a device buffer owned by x alone
      sync();
      lz::wait();
      const int64_t before = debug::counter_value("InputOutputAliasCount");
      update(x);
      sync();
      lz::wait();
      donated[b] = debug::counter_value("InputOutputAliasCount") - before;
      results[b].push_back(read(x));
    }
    lz::wait();
    set_active_backend(config().backend);
  }
  EXPECT_GT(donated[1], 0) << "the update did not donate x's buffer: the test proves nothing";
  EXPECT_EQ(compare_exact(results[0][0], results[1][0], false, {}), "");
}

TEST_F(CpuCompilerDonation, AddingItsOwnTransposeReadsTheOldValues) {
  expect_in_place_update_agrees([](Tensor& x) { x += transpose(x, 0, 1); });
}

TEST_F(CpuCompilerDonation, CopyingItsOwnTransposeReadsTheOldValues) {
  expect_in_place_update_agrees([](Tensor& x) { x.copy_(transpose(x, 0, 1)); });
}

TEST_F(CpuCompilerDonation, AddingAShiftedSliceOfItselfReadsTheOldValues) {
  expect_in_place_update_agrees([](Tensor& x) {
    x.mul_(2);
    x.add_(slice(x, 0, 1, 2));  // row 1 broadcast over every row
  });
}

TEST_F(CpuCompilerDonation, SubtractingItsOwnColumnSumsReadsTheOldValues) {
  expect_in_place_update_agrees([](Tensor& x) { x -= sum(x, {0}, true); });
}

TEST_F(CpuCompilerDonation, AnElementwiseUpdateAgrees) {
  expect_in_place_update_agrees([](Tensor& x) {
    x.mul_(0.5f);
    x.add_(1.0f);
    x.clamp_(-2.0f, 2.0f);
  });
}

// Two tensors swapped through a clone, at a barrier that donates both buffers: the program's
// last step copies one parameter into the other's output storage, which must not happen before
// that parameter's own copy has read it. (The runtime decides donations; both backends run the
// copies at the end.)
TEST_F(CpuCompilerDonation, SwappingTwoTensorsThroughACloneKeepsBothValues) {
  for (const char* backend : {"cpu", "interp"}) {
    SCOPED_TRACE(backend);
    lz::wait();
    set_active_backend(backend);
    {
      Tensor y = tensor<float>({0, 1, 2, 3}, {4}) + 0;  // y's id is smaller than x's
      Tensor x = tensor<float>({10, 11, 12, 13}, {4}) + 0;
      sync();
      lz::wait();
      const int64_t before = debug::counter_value("InputOutputAliasCount");
      Tensor t = x.clone();
      x.copy_(y);
      y.copy_(t);
      sync();
      lz::wait();
      EXPECT_GT(debug::counter_value("InputOutputAliasCount"), before) << "nothing donated: the test proves nothing";
      EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{0, 1, 2, 3}));
      EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{10, 11, 12, 13}));
      EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{10, 11, 12, 13}));
    }
    lz::wait();
    set_active_backend(config().backend);
  }
}

// Each root asks whether its donated parameter may be overwritten once, at run time: a table of
// every root's candidate parameters (roots x parameters entries) made this sync take minutes.
TEST_F(CpuCompilerDonation, FiftyThousandDonatedUpdatesInOneSyncAreEachWrittenInPlace) {
  constexpr int kTensors = 50000;
  std::vector<Tensor> ws;
  ws.reserve(kTensors);
  for (int i = 0; i < kTensors; ++i) ws.push_back(tensor<float>({1, 2}, {2}) + 0);  // owned buffers
  Tensor g = tensor<float>({1, 2}, {2});
  sync();
  lz::wait();
  const int64_t before = debug::counter_value("InputOutputAliasCount");
  for (Tensor& w : ws) w -= g;  // one node each: no graph-too-large cut inside the loop
  sync();
  lz::wait();
  EXPECT_EQ(debug::counter_value("InputOutputAliasCount") - before, kTensors);
  EXPECT_EQ(ws.front().to_vector<float>(), (std::vector<float>{0, 0}));
  EXPECT_EQ(ws.back().to_vector<float>(), (std::vector<float>{0, 0}));
}

}  // namespace
}  // namespace lz
