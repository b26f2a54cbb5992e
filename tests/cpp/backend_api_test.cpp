// The Backend interface's shared pieces (backend/backend.h): the end-of-program root copies keep
// every value when destinations overlap other copies' sources, and dumps describe a graph through
// a backend named explicitly; memory transfers refuse storage on another device; from_blob wraps
// caller memory without a copy and releases it once.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <numeric>
#include <thread>
#include <random>

#include "backend/backend.h"
#include "lazuli/debug.h"
#include "lazuli/error.h"
#include "lazuli/lazuli.h"

namespace lz {
namespace {

TEST(RootCopies, TwoValuesSwappedThroughEachOthersBuffersKeepBoth) {
  std::vector<float> a = {1, 2}, b = {3, 4};
  run_root_copies({{a.data(), b.data(), 8}, {b.data(), a.data(), 8}});
  EXPECT_EQ(a, (std::vector<float>{3, 4}));
  EXPECT_EQ(b, (std::vector<float>{1, 2}));
}

TEST(RootCopies, RandomCopiesAgreeWithCopyingFromASnapshot) {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::vector<uint8_t> mem(256);
    std::iota(mem.begin(), mem.end(), 0);
    const std::vector<uint8_t> snapshot = mem;
    std::vector<uint8_t> expected = mem;
    std::vector<RootCopy> copies;
    std::vector<std::pair<size_t, size_t>> dsts;
    const int n = 1 + static_cast<int>(rng() % 6);
    for (int i = 0; i < n; ++i) {
      size_t len = 1 + rng() % 16, s = rng() % (256 - len), d;
      bool clash;
      do {  // destinations never overlap each other (two roots are two buffers)
        d = rng() % (256 - len);
        clash = false;
        for (auto [b, e] : dsts) clash |= d < e && b < d + len;
      } while (clash);
      dsts.push_back({d, d + len});
      copies.push_back({mem.data() + d, mem.data() + s, len});
      std::copy_n(snapshot.begin() + s, len, expected.begin() + d);
    }
    run_root_copies(copies);
    ASSERT_EQ(mem, expected) << "round " << round;
  }
}

TEST(BackendNamed, DescribesWithTheNamedBackendWhicheverIsActive) {
  Tensor x = full({4}, 2.0f);
  Tensor y = exp(x) * 3.0f;
  const std::string cpu = debug::dump_kernels({y});
  EXPECT_NE(cpu.find("kernel"), std::string::npos) << cpu;
  EXPECT_NE(backend_named("interp").name(), backend_named("cpu").name());
  EXPECT_EQ(&backend_named("cpu"), &backend_named("cpu")) << "made once";
  EXPECT_THROW(backend_named("tpu"), ValueError);
}

TEST(BackendTransfers, UploadDownloadAndCopyRoundTripOnTheHost) {
  Backend& be = active_backend();
  const std::vector<float> v = {1.5f, -2, 3};
  std::shared_ptr<Storage> a = be.upload(v.data(), 12);
  EXPECT_EQ(a->device(), DeviceId::host());
  auto b = be.allocate(12);
  be.copy(*a, *b, 12);
  std::vector<float> out(3);
  be.download(*b, out.data(), 12);
  EXPECT_EQ(out, v);
  EXPECT_THROW(be.download(*b, out.data(), 16), ValueError);  // past the storage's end
}

TEST(BackendTransfers, StorageOnAnotherDeviceIsRefusedNamingBothDevices) {
  float x[2] = {0, 0}, out[2];
  Storage cuda(x, sizeof(x), nullptr, DeviceId::cuda(1));
  try {
    active_backend().download(cuda, out, sizeof(x));
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("host"), std::string::npos) << e.what();
  }
  auto host = active_backend().allocate(sizeof(x));
  EXPECT_THROW(active_backend().copy(cuda, *host, sizeof(x)), ValueError);
}

TEST(FromBlob, SharesTheCallersMemoryAndReleasesItOnce) {
  std::vector<float> mem = {1, 2, 3, 4};
  std::atomic<int> released{0};
  {
    Tensor t = from_blob(mem.data(), DType::Float32, {2, 2}, [&] { ++released; });
    EXPECT_EQ((t * 2.0).to_vector<float>(), (std::vector<float>{2, 4, 6, 8}));
    mem[0] = 10;  // no copy: the tensor sees the caller's write
    EXPECT_EQ(t.to_vector<float>()[0], 10.0f);
  }
  // The executor thread may drop its last reference just after the read returned.
  for (int i = 0; i < 2000 && released.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(released.load(), 1);
}

TEST(FromBlob, BadMemoryIsRefusedAndNotReleased) {
  int released = 0;
  auto count = [&] { ++released; };
  float x[4] = {};
  EXPECT_THROW(from_blob(nullptr, DType::Float32, {2}, count), ValueError);
  EXPECT_THROW(from_blob(reinterpret_cast<char*>(x) + 1, DType::Float32, {2}, count), ValueError);
  try {
    from_blob(x, DType::Float32, {4}, count, DeviceId::cuda(0));
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("from_blob"), std::string::npos) << e.what();
  }
  EXPECT_EQ(released, 0);
  EXPECT_EQ(from_blob(x, DType::Float32, {4}).to_vector<float>(), (std::vector<float>(4, 0)));
}

}  // namespace
}  // namespace lz
