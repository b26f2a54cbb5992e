// Collectives (lz::distributed, op class Collective) without MPI: a simulated group whose other
// ranks hold a copy of this rank's data scaled by their rank number, installed as the world, so
// the recording, the shape rules, both backends' steps and the errors are checked in one process.
// The MPI engine itself is tested across processes (tests/python/test_distributed.py).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "dist/process_group.h"
#include "lazuli/distributed.h"
#include "test_util.h"

namespace lz {
namespace {

// Rank 0 of `n`; rank r's tensor is (r + 1) times rank 0's (float32 only).
class SimulatedGroup final : public dist::ProcessGroup {
 public:
  explicit SimulatedGroup(int n) : n_(n) {}
  int rank() const override { return 0; }
  int size() const override { return n_; }
  std::string engine() const override { return "simulated"; }
  void all_reduce(void* buf, int64_t count, DType, dist::Reduce op) override {
    auto* f = static_cast<float*>(buf);
    for (int64_t i = 0; i < count; ++i) f[i] = reduce(f[i], op);
    ++calls;
    reduced_counts.push_back(count);
    reduce_threads.push_back(std::this_thread::get_id());
    if (fail_count == count) throw std::runtime_error("the link went down");
  }
  void all_gather(const void* in, void* out, int64_t count, DType) override {
    for (int r = 0; r < n_; ++r) {
      for (int64_t i = 0; i < count; ++i) static_cast<float*>(out)[r * count + i] = (r + 1) * static_cast<const float*>(in)[i];
    }
    ++calls;
  }
  void reduce_scatter(const void* in, void* out, int64_t count, DType, dist::Reduce op) override {
    for (int64_t i = 0; i < count; ++i) static_cast<float*>(out)[i] = reduce(static_cast<const float*>(in)[i], op);
    ++calls;
  }
  void broadcast(void* buf, int64_t count, DType, int root) override {
    auto* f = static_cast<float*>(buf);
    for (int64_t i = 0; i < count; ++i) f[i] *= static_cast<float>(root + 1);
    ++calls;
  }
  void barrier() override { ++calls; }
  // The other ranks send `others` (empty: the same record as this rank's).
  std::vector<std::string> exchange(const std::string& record) override {
    ++exchanges;
    exchange_thread = std::this_thread::get_id();
    std::vector<std::string> all(static_cast<size_t>(n_), others.empty() ? record : others);
    all[0] = record;
    return all;
  }
  void set_timeout(double seconds) override { timeout = seconds; }
  [[noreturn]] void abort(int) override { std::abort(); }
  int calls = 0, exchanges = 0;
  std::vector<int64_t> reduced_counts;  // each all_reduce's element count, in call order
  std::vector<std::thread::id> reduce_threads;
  std::thread::id exchange_thread;  // the executor's, before each program
  int64_t fail_count = -1;          // an all_reduce of this many elements throws
  double timeout = -1;
  std::string others;

 private:
  float reduce(float x, dist::Reduce op) const {
    float acc = x;
    for (int r = 1; r < n_; ++r) {
      float y = (r + 1) * x;
      acc = op == dist::Reduce::Sum ? acc + y : op == dist::Reduce::Product ? acc * y
            : op == dist::Reduce::Max ? std::max(acc, y) : std::min(acc, y);
    }
    return acc;
  }
  int n_;
};

class Collectives : public testing::RuntimeTest {
 protected:
  void SetUp() override {
    RuntimeTest::SetUp();
    group_ = std::make_shared<SimulatedGroup>(2);
    dist::set_world(group_);
  }
  void TearDown() override {
    RuntimeTest::TearDown();
    dist::set_world(nullptr);
    set_active_backend(config().backend);
  }
  std::shared_ptr<SimulatedGroup> group_;
};

TEST_F(Collectives, RecordNodesThatRunInsideTheStepProgramOnBothBackends) {
  for (const char* backend : {"interp", "cpu"}) {
    set_active_backend(backend);
    group_->calls = 0;
    Tensor x = tensor<float>({1, -2, 3, 4}, {4});
    Tensor y = x * 2;
    distributed::all_reduce(y);  // rank 1 holds 2y: the sum is 3y
    Tensor avg = x + 0;
    distributed::all_reduce(avg, distributed::ReduceOp::AVG);  // (x + 2x) / 2
    Tensor mx = -x;
    distributed::all_reduce(mx, distributed::ReduceOp::MAX);
    Tensor g = distributed::all_gather(x.reshape({2, 2}));
    Tensor rs = distributed::reduce_scatter(x.reshape({2, 2}));
    Tensor b = x + 1;
    distributed::broadcast(b, 1);
    EXPECT_EQ(group_->calls, 0) << "recording ran a collective";
    sync_tensors({y, avg, mx, g, rs, b}, /*wait=*/true);
    EXPECT_EQ(group_->calls, 6) << backend;
    EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{6, -12, 18, 24})) << backend;
    EXPECT_EQ(avg.to_vector<float>(), (std::vector<float>{1.5, -3, 4.5, 6})) << backend;
    EXPECT_EQ(mx.to_vector<float>(), (std::vector<float>{-1, 4, -3, -4})) << backend;
    EXPECT_EQ(g.shape(), (Shape{4, 2}));
    EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{1, -2, 3, 4, 2, -4, 6, 8})) << backend;
    EXPECT_EQ(rs.shape(), (Shape{1, 2}));
    EXPECT_EQ(rs.to_vector<float>(), (std::vector<float>{3, -6})) << backend;
    EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{4, -2, 8, 10})) << backend;
  }
  EXPECT_EQ(counter("fallback::all_reduce"), 0) << "a collective counted as a fallback";
}

TEST_F(Collectives, RunInTheOrderTheyWereRecordedWhateverOrderTheRootsReachThem) {
  // Roots are visited in tensor-id order: `first` (older) would reach its all_reduce first. The
  // ranks agree on recording order only, so the program runs `second`'s all_reduce first.
  for (const char* backend : {"interp", "cpu"}) {
    set_active_backend(backend);
    group_->reduced_counts.clear();
    Tensor first = tensor<float>({1, 2, 3}, {3}) * 1;
    Tensor second = tensor<float>({1, 2, 3, 4, 5}, {5}) * 1;
    std::vector<int64_t> compiles;
    for (int step = 0; step < 3; ++step) {
      distributed::all_reduce(second);
      distributed::all_reduce(first);
      sync_tensors({first, second}, /*wait=*/true);
      compiles.push_back(counter("UncachedCompile"));
    }
    EXPECT_EQ(group_->reduced_counts, (std::vector<int64_t>{5, 3, 5, 3, 5, 3})) << backend;
    // Steps 2 and 3 (over device data) are one program: the order is not part of its hash.
    EXPECT_EQ(compiles[1], compiles[2]) << backend;
  }
}

TEST_F(Collectives, AllReducesRunBesideTheProgramsLaterStepsAndFailOnlyWhatReadsThem) {
  // cpu backend: all_reduce and broadcast run on a thread of their own, in order, while the
  // program's later steps run; a step reading their result waits for it.
  mutable_config().dist_overlap = true;
  Tensor a = tensor<float>({1, 2, 3}, {3}) * 1;
  Tensor b = tensor<float>({1, 2, 3, 4, 5}, {5}) * 1;
  distributed::all_reduce(a);
  Tensor after = a * 10;  // reads the all_reduce's result: waits for it
  distributed::all_reduce(b);
  Tensor independent = tensor<float>({7}, {1}) + 1;
  sync_tensors({after, b, independent}, /*wait=*/true);
  EXPECT_EQ(after.to_vector<float>(), (std::vector<float>{30, 60, 90}));
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{3, 6, 9, 12, 15}));
  ASSERT_EQ(group_->reduce_threads.size(), 2u);
  EXPECT_NE(group_->reduce_threads[0], group_->exchange_thread) << "the all_reduce ran in line";
  EXPECT_EQ(group_->reduce_threads[0], group_->reduce_threads[1]) << "one thread, in order";
  // An engine failure fails the values computed from it, names the op, rank and engine, and
  // leaves the rest of the program's results (and the runtime) working.
  group_->fail_count = 5;
  Tensor c = tensor<float>({1, 2, 3, 4, 5}, {5}) * 2;
  distributed::all_reduce(c);
  Tensor from_c = c + 1;
  Tensor fine = tensor<float>({1, 2}, {2}) * 4;
  try {
    sync_tensors({from_c, fine}, /*wait=*/true);
    from_c.to_vector<float>();
    FAIL() << "a failed all_reduce gave a value";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("all_reduce on rank 0 of 2 (simulated): the link went down"),
        std::string::npos)
        << e.what();
  }
  EXPECT_EQ(fine.to_vector<float>(), (std::vector<float>{4, 8}));
  group_->fail_count = -1;
  Tensor d = tensor<float>({1, 2}, {2}) * 1;
  distributed::all_reduce(d);
  EXPECT_EQ(d.to_vector<float>(), (std::vector<float>{3, 6}));
  // LAZULI_DIST_OVERLAP=0: in line, on the program's thread.
  mutable_config().dist_overlap = false;
  Tensor e = tensor<float>({1, 2}, {2}) * 3;
  distributed::all_reduce(e);
  EXPECT_EQ(e.to_vector<float>(), (std::vector<float>{9, 18}));
  EXPECT_EQ(group_->reduce_threads.back(), group_->exchange_thread);
}

TEST_F(Collectives, EveryProgramWithCollectivesFirstChecksThatTheRanksAgree) {
  Tensor x = tensor<float>({1, 2}, {2});
  Tensor plain = x * 5;
  sync_tensors({plain}, /*wait=*/true);
  EXPECT_EQ(group_->exchanges, 0) << "a program without collectives exchanged";
  Tensor y = x * 3;
  distributed::all_reduce(y);
  sync_tensors({y}, /*wait=*/true);
  EXPECT_EQ(group_->exchanges, 1);
  EXPECT_EQ(group_->timeout, static_cast<double>(config().dist_timeout_s));
  // A rank about to run other collectives: every rank raises, naming each rank's.
  group_->others = std::string(512, 'x');
  Tensor z = x * 4;
  distributed::all_reduce(z);
  try {
    z.to_vector<float>();
    FAIL() << "ran collectives the other rank does not run";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("the ranks are about to run different collectives"), std::string::npos) << what;
    EXPECT_NE(what.find("rank 0: all_reduce float32[2] sum (program cut at "), std::string::npos) << what;
    EXPECT_NE(what.find("\n  rank 1: "), std::string::npos) << what;
  }
  EXPECT_EQ(group_->calls, 1) << "the mismatched collective reached the engine";
  // LAZULI_DIST_CHECK=0 skips the exchange.
  mutable_config().dist_check = false;
  Tensor w = x * 6;
  distributed::all_reduce(w);
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{18, 36}));
  EXPECT_EQ(group_->exchanges, 2);
}

TEST_F(Collectives, TheGroupSizeIsPartOfTheProgramAndChecksWhenItRuns) {
  Tensor x = tensor<float>({1, 2}, {2});
  Tensor y = x * 3;
  distributed::all_reduce(y);
  dist::set_world(std::make_shared<SimulatedGroup>(3));  // the world changed after recording
  try {
    y.to_vector<float>();
    FAIL() << "ran under another world";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("recorded for a group of 2 ranks; the group now has 3"), std::string::npos)
        << e.what();
  }
  // The same program recorded under each world hashes differently.
  Tensor z = x * 3;
  distributed::all_reduce(z);
  EXPECT_EQ(z.to_vector<float>(), (std::vector<float>{18, 36}));  // (1 + 2 + 3) times 3x
}

TEST_F(Collectives, BadArgumentsRaiseAtTheCallAndRecordNothing) {
  Tensor x = tensor<float>({1, 2, 3}, {3});
  EXPECT_THROW(distributed::broadcast(x, 2), ValueError);
  EXPECT_THROW(distributed::reduce_scatter(x), ValueError);  // 3 rows among 2 ranks
  EXPECT_THROW(distributed::all_gather(tensor<float>({1}, {})), ValueError);  // 0-d
  Tensor i = tensor<int64_t>({1, 2}, {2});
  EXPECT_THROW(distributed::all_reduce(i, distributed::ReduceOp::AVG), TypeError);
  Tensor flag = tensor<bool>({true}, {1});
  EXPECT_THROW(distributed::all_reduce(flag), TypeError);
  // Collectives have no gradient: a tensor that requires grad is refused, not left for backward.
  Tensor w = tensor<float>({1, 2}, {2});
  set_requires_grad(w);
  Tensor wy = w * 2;
  try {
    distributed::all_reduce(wy);
    FAIL() << "recorded a collective over a tensor that requires grad";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("requires grad"), std::string::npos) << e.what();
  }
  {
    NoGradGuard no_grad;
    Tensor ok = w * 2;
    distributed::all_reduce(ok);  // under no_grad: recorded
  }
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(wy.to_vector<float>(), (std::vector<float>{2, 4}));
  EXPECT_EQ(group_->calls, 0);
}

TEST_F(Collectives, WithoutAGroupEveryCallSaysHowToStartOne) {
  dist::set_world(nullptr);
  Tensor x = tensor<float>({1}, {1});
  EXPECT_FALSE(distributed::is_initialized());
  try {
    distributed::all_reduce(x);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("init_process_group"), std::string::npos) << e.what();
  }
  EXPECT_THROW(distributed::get_rank(), Error);
  EXPECT_THROW(distributed::init_process_group("nccl"), ValueError);
}

TEST_F(Collectives, AveragedGradientsAreTheMeanOfEveryRanksContribution) {
  Tensor w = tensor<float>({1, 2}, {2});
  set_requires_grad(w);
  distributed::average_gradients(w);
  Tensor loss = sum(w * w);  // d/dw = 2w on rank 0, 2 * (2w) on the simulated rank 1
  backward(loss);
  EXPECT_EQ(grad(w).to_vector<float>(), (std::vector<float>{3, 6}));  // (2w + 4w) / 2
  EXPECT_EQ(group_->calls, 1);
  Tensor plain = tensor<float>({1}, {1});
  EXPECT_THROW(distributed::average_gradients(plain), ValueError);  // not a leaf requiring grad
}

// backward() reduces averaged gradients in buckets: in the order the walk reaches the leaves
// (the last layer's first), gradients of one dtype until their bytes reach the cap, one
// all_reduce each; a leaf reached twice (a shared weight) is reduced once, its contributions
// summed. Every cap gives every leaf the same average.
TEST_F(Collectives, AveragedGradientsAreReducedInBucketsOfTheCap) {
  struct Case {
    int64_t cap;
    std::vector<int64_t> counts;  // the all_reduces' element counts, in call order
  };
  // Layers a [3], b [2, 2], c [5], d [1], d last: the walk reaches d, c, b, a.
  const Case cases[] = {{0, {1, 5, 4, 3}},  // one per parameter
                        {16, {6, 4, 3}},    // d + c = 24 bytes >= 16; b = 16 bytes alone
                        {24, {6, 7}},       // a bucket closes when it reaches the cap
                        {28, {10, 3}},
                        {1 << 20, {13}}};  // one bucket
  for (const Case& c : cases) {
    SCOPED_TRACE("cap " + std::to_string(c.cap));
    Tensor a = tensor<float>({1, 2, 3}, {3});
    Tensor b = tensor<float>({1, -1, 2, -2}, {2, 2});
    Tensor cc = tensor<float>({0.5, 1, 1.5, 2, 2.5}, {5});
    Tensor d = tensor<float>({4}, {1});
    for (Tensor* t : {&a, &b, &cc, &d}) {
      set_requires_grad(*t);
      distributed::average_gradients(*t, c.cap);
    }
    sync();
    wait();
    group_->reduced_counts.clear();
    // sa = sum(a^2), then each layer multiplies by its sum; a is also read by the last layer.
    Tensor sa = sum(a * a), sb = sum(b * b), sc = sum(cc), sd = sum(d * a.slice(0, 0, 1));
    Tensor loss = sa * sb * sc * sd;
    backward(loss);
    sync();
    wait();
    EXPECT_EQ(group_->reduced_counts, c.counts);
    const float va = 14, vb = 10, vc = 7.5f, vd = 4;  // sa, sb, sc, sd
    // The simulated rank 1 contributes twice rank 0's gradient: the average is 1.5 times it.
    std::vector<float> ga = grad(a).to_vector<float>();
    for (int i = 0; i < 3; ++i) {
      const float x = static_cast<float>(i + 1);
      EXPECT_FLOAT_EQ(ga[i], 1.5f * (2 * x * vb * vc * vd + (i == 0 ? va * vb * vc * 4 : 0))) << i;
    }
    std::vector<float> gb = grad(b).to_vector<float>();
    const float bv[] = {1, -1, 2, -2};
    for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(gb[i], 1.5f * 2 * bv[i] * va * vc * vd) << i;
    for (float g : grad(cc).to_vector<float>()) EXPECT_FLOAT_EQ(g, 1.5f * va * vb * vd);
    EXPECT_FLOAT_EQ(grad(d).to_vector<float>()[0], 1.5f * va * vb * vc * 1);
  }
  Tensor w = tensor<float>({1}, {1});
  set_requires_grad(w);
  EXPECT_THROW(distributed::average_gradients(w, -1), ValueError);
}

}  // namespace
}  // namespace lz
