// Sizes near and past the limits through the C++ API (core/shape.h, check_tensor_size): a tensor
// whose element or byte count does not fit in int64 throws OutOfMemoryError at the op, naming it
// and the shape, and records nothing; a huge shape that fits is recorded lazily and throws
// OutOfMemoryError at the wait point of the program that cannot allocate it; bad host input
// (too few values, a null pointer) throws ValueError. The runtime keeps working after each.
//
// Every lazy tensor here that a program could try to materialize is at least 1 TiB: Storage
// refuses it (more than RAM and swap) before asking malloc, so this also runs under ASan, whose
// allocator would abort on a failed huge request.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/shape.h"
#include "lazuli/lazuli.h"
#include "op_test_util.h"

namespace {

using lz::kFloat32;
using lz::kInt64;
using lz::Tensor;
using lz_test::expect_values;
using lz_test::expect_runtime_works;
using lz_test::make;

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kBig = int64_t{1} << 38;  // 1 TiB of float32

// Runs `bad`, which must throw E naming every part; the failed op leaves no tensor behind and
// the runtime still records, reads and syncs.
template <class E>
void expect_throw(const std::function<void()>& bad, const std::vector<std::string>& parts) {
  lz_test::expect_mentions(lz_test::expect_throw_and_recover<E>(bad), parts);
}

TEST(SizeLimits, OutOfMemoryErrorIsALazuliError) {
  static_assert(std::is_base_of_v<lz::Error, lz::OutOfMemoryError>);
  try {
    lz::zeros({kI64Max});
    FAIL() << "zeros({INT64_MAX}) did not throw";
  } catch (const lz::Error& e) {
    EXPECT_NE(dynamic_cast<const lz::OutOfMemoryError*>(&e), nullptr) << e.what();
  }
}

TEST(SizeLimits, ZerosInt64MaxThrowsOutOfMemoryAtTheOp) {
  expect_throw<lz::OutOfMemoryError>([] { lz::zeros({kI64Max}); },
                                     {"zeros", "float32[9223372036854775807]", "bytes"});
}

TEST(SizeLimits, CreationPastInt64BytesOrElementsThrowsOutOfMemory) {
  expect_throw<lz::OutOfMemoryError>([] { lz::ones({int64_t{1} << 62}); },
                                     {"ones", "[4611686018427387904]"});
  expect_throw<lz::OutOfMemoryError>(
      [] {
        lz::zeros({int64_t{1} << 31, int64_t{1} << 31});
      },
      {"zeros"});
  expect_throw<lz::OutOfMemoryError>(
      [] {
        lz::ones({int64_t{1} << 32, int64_t{1} << 32});
      },
      {"ones", "[4294967296, 4294967296]", "elements"});
  expect_throw<lz::OutOfMemoryError>([] { lz::full({int64_t{1} << 61}, 2.5, lz::kFloat64); },
                                     {"full"});
  expect_throw<lz::OutOfMemoryError>([] { lz::eye(int64_t{1} << 40); }, {"eye"});
  expect_throw<lz::OutOfMemoryError>([] { lz::arange(0, int64_t{1} << 62, 1); },
                                     {"arange", "int64"});
  expect_throw<lz::OutOfMemoryError>([] { lz::arange(0.0, 1e30, 1e-30); }, {"arange", "elements"});
  expect_throw<lz::OutOfMemoryError>([] { lz::rand({int64_t{1} << 62}); }, {"rand"});
  expect_throw<lz::OutOfMemoryError>([] { lz::randint(0, 3, {int64_t{1} << 61}, lz::kInt32); },
                                     {"randint"});
}

TEST(SizeLimits, ShapesAtTheLimitAreRecordedLazily) {
  EXPECT_EQ(lz::zeros({kI64Max}, lz::kBool).numel(), kI64Max);
  EXPECT_EQ(lz::zeros({(int64_t{1} << 61) - 1}).numel(), (int64_t{1} << 61) - 1);
  EXPECT_THROW(lz::zeros({int64_t{1} << 61}), lz::OutOfMemoryError);
  EXPECT_EQ(lz::arange(0, (int64_t{1} << 53) + 1, 1).numel(), (int64_t{1} << 53) + 1);  // exact
}

TEST(SizeLimits, TensorFromTooFewValuesThrowsValueError) {
  // It read 100000 floats from a 3-element vector (ASan: heap-buffer-overflow).
  expect_throw<lz::ValueError>(
      [] {
        lz::tensor<float>({1, 2, 3}, {100000});
      },
      {"tensor", "3 values", "[100000]"});
  expect_throw<lz::ValueError>([] { lz::tensor<bool>({true}, {2, 2}); }, {"tensor", "1 values"});
  expect_throw<lz::ValueError>(
      [] {
        lz::tensor<int64_t>({1, 2, 3, 4}, {2});
      },
      {"tensor", "4 values"});
  expect_throw<lz::ValueError>([] { lz::tensor<float>({1, 2}, {-1, -2}); }, {"negative"});
  // (2^62 + 1) * 4 wraps to 4 in int64.
  expect_throw<lz::ValueError>(
      [] {
        lz::tensor<float>({1, 2, 3, 4}, {(int64_t{1} << 62) + 1, 4});
      },
      {"tensor", "more than 2^63"});
  expect_values(lz::tensor<float>({1, 2, 3, 4}, {2, 2}), kFloat32, {2, 2}, {1, 2, 3, 4});
}

TEST(SizeLimits, FromDataNullPointerThrowsValueError) {
  expect_throw<lz::ValueError>([] { lz::from_data(nullptr, kFloat32, {4}); }, {"tensor", "null"});
  EXPECT_EQ(lz::from_data(nullptr, kFloat32, {0, 3}).numel(), 0);  // nothing to read
  expect_throw<lz::OutOfMemoryError>(
      [] {
        float x = 0;
        lz::from_data(&x, kFloat32, {kI64Max});
      },
      {"tensor"});
}

TEST(SizeLimits, HugeLazyTensorThrowsOutOfMemoryAtTheReadAndRuntimeKeepsWorking) {
  Tensor t = lz::zeros({int64_t{1} << 40});  // 4 TiB: fits the size limit, not the machine
  expect_throw<lz::OutOfMemoryError>(
      [&] { t.to_vector<float>(); },
      {"float32[1099511627776]", "4398046511104 bytes", "RAM and swap"});
}

TEST(SizeLimits, HugeSyncThrowsOutOfMemoryAtTheWait) {
  {
    Tensor t = lz::zeros({int64_t{1} << 40});
    lz::sync();  // scheduled: the failure waits for the next wait
    EXPECT_THROW(lz::wait(), lz::OutOfMemoryError);
  }
  EXPECT_NO_THROW(lz::wait());  // raised once
  expect_runtime_works();
}

TEST(SizeLimits, ExpandPastInt64ThrowsAndExpandThenContiguousThrowsAtTheRead) {
  Tensor one = lz::ones({1});
  expect_throw<lz::OutOfMemoryError>([&] { one.expand({int64_t{1} << 62}); },
                                     {"expand", "[4611686018427387904]"});
  Tensor big = one.expand({int64_t{1} << 40});  // a view: fine
  expect_throw<lz::OutOfMemoryError>([&] { big.contiguous().to_vector<float>(); },
                                     {"float32[1099511627776]"});
  expect_values(big.slice(0, 3, 5), kFloat32, {2}, {1, 1});
}

TEST(SizeLimits, CatPastInt64Throws) {
  Tensor b = lz::ones({1}, lz::kBool).expand({int64_t{1} << 62});
  expect_throw<lz::OutOfMemoryError>([&] { lz::cat({b, b}, 0); }, {"cat", "add up past int64"});
  Tensor f = lz::ones({1}).expand({int64_t{1} << 60});  // 2^62 bytes; two are 2^63
  expect_throw<lz::OutOfMemoryError>([&] { lz::cat({f, f}, 0); }, {"cat", "bytes"});
  expect_throw<lz::OutOfMemoryError>([&] { lz::stack({f, f, f, f}, 0); }, {"cat"});
}

// The operands live inside the lambdas: a sync after the check must not try to materialize them.
TEST(SizeLimits, MatmulOutputPastInt64Throws) {
  expect_throw<lz::OutOfMemoryError>(
      [] {
        lz::matmul(lz::ones({kBig, 1}), lz::ones({1, kBig}));
      },
      {"matmul", "[274877906944, 274877906944]"});
  // Batch dims that broadcast past int64.
  expect_throw<lz::OutOfMemoryError>(
      [] {
        lz::matmul(lz::ones({kBig, 1, 1, 1}), lz::ones({1, kBig, 1, 1}));
      },
      {"matmul"});
}

TEST(SizeLimits, HugeMatmulOutputThrowsAtTheRead) {
  Tensor a = lz::ones({int64_t{1} << 20, 1}), b = lz::ones({1, int64_t{1} << 20});
  expect_throw<lz::OutOfMemoryError>([&] { lz::matmul(a, b).to_vector<float>(); },
                                     {"float32[1048576, 1048576]"});
}

TEST(SizeLimits, BroadcastAndCastPastInt64ThrowNamingTheOp) {
  expect_throw<lz::OutOfMemoryError>(
      [] {
        lz::add(lz::ones({kBig, 1}), lz::ones({1, kBig}));
      },
      {"add", "[274877906944, 274877906944]"});
  Tensor m = lz::ones({1}, lz::kBool).expand({int64_t{1} << 62});  // a view: never synced
  expect_throw<lz::OutOfMemoryError>([&] { m.to(lz::kFloat64); }, {"[4611686018427387904]"});
}

TEST(SizeLimits, ReshapeWhoseSizesWrapThrowsValueError) {
  expect_throw<lz::ValueError>(
      [] {
        make({1, 2, 3, 4}, {4}).reshape({(int64_t{1} << 62) + 1, 4});
      },
      {"reshape", "past int64"});
  expect_throw<lz::ValueError>(
      [] {
        make({1, 2, 3, 4}, {4}).reshape({(int64_t{1} << 62) + 1, 4, -1});
      },
      {"reshape"});
}

TEST(SizeLimits, SliceAndChunkWithHugeStepsStayExact) {
  Tensor x = lz::arange(0, 10, 1);
  expect_values(x.slice(0, 0, 10, kI64Max), kInt64, {1}, {0});
  expect_values(x.slice(0, 3, std::nullopt, int64_t{1} << 62), kInt64, {1}, {3});
  EXPECT_EQ(lz::chunk(x, kI64Max, 0).size(), 10u);
  expect_throw<lz::ValueError>(
      [&] {
        lz::split(x, lz::IntList{kI64Max, kI64Max, 12}, 0);
      },
      {"split"});
}

TEST(SizeLimits, StorageLargerThanMemoryThrowsOutOfMemory) {
  EXPECT_THROW(lz::Storage(size_t{1} << 50), lz::OutOfMemoryError);
  EXPECT_THROW(lz::Storage(SIZE_MAX), lz::OutOfMemoryError);  // used to wrap to a tiny block
  EXPECT_THROW(lz::Storage(SIZE_MAX - 10), lz::OutOfMemoryError);
  lz::Storage ok(1024);
  EXPECT_EQ(ok.nbytes(), 1024u);
}

TEST(SizeLimits, CheckTensorSizeCountsBytes) {
  EXPECT_EQ(lz::check_tensor_size("t", {2, 3}, kFloat32), 24);
  EXPECT_EQ(lz::check_tensor_size("t", {0, 5}, kFloat32), 0);
  EXPECT_EQ(lz::check_tensor_size("t", {}, kInt64), 8);
  EXPECT_EQ(lz::check_tensor_size("t", {kI64Max}, lz::kBool), kI64Max);
  EXPECT_THROW(lz::check_tensor_size("t", {kI64Max, 2}, lz::kBool), lz::OutOfMemoryError);
  EXPECT_THROW(lz::check_tensor_size("t", {0, kI64Max, 2}, lz::kBool), lz::OutOfMemoryError);
  EXPECT_THROW(lz::check_tensor_size("t", {-1}, lz::kBool), lz::ValueError);
  EXPECT_EQ(lz::numel({int64_t{1} << 32, int64_t{1} << 32}), kI64Max);  // saturates
  EXPECT_EQ(lz::numel({int64_t{1} << 32, int64_t{1} << 32, 0}), 0);
  EXPECT_EQ(lz::numel_or_overflow({int64_t{1} << 32, int64_t{1} << 32}), -1);
}

TEST(SizeLimits, FullAndFillWithValuesPastTheDtypeThrowValueError) {
  double nan = std::nan("");
  expect_throw<lz::ValueError>([&] { lz::full({2}, nan, kInt64); },
                               {"full", "nan", "int64", "overflow"});
  expect_throw<lz::ValueError>([&] { lz::full({2}, 1e19, kInt64); }, {"full"});
  expect_throw<lz::ValueError>([&] { lz::full({2}, int64_t{1} << 40, lz::kInt32); },
                               {"full", "int32"});
  expect_throw<lz::ValueError>([&] { lz::full({2}, 1e300, kFloat32); }, {"full", "float32"});
  Tensor t = lz::zeros({2}, kInt64);
  expect_throw<lz::ValueError>([&] { t.fill_(nan); }, {"fill_", "nan"});
  expect_throw<lz::ValueError>([&] { t.fill_(INFINITY); }, {"fill_"});
  expect_values(t, kInt64, {2}, {0, 0});
  expect_values(lz::full({2}, 3.7, kInt64), kInt64, {2}, {3, 3});  // truncates, as PyTorch
  expect_values(lz::full({1}, kI64Max, kInt64), kInt64, {1}, {static_cast<double>(kI64Max)});
  EXPECT_EQ(lz::Scalar(nan).to_int(), 0);  // defined, not undefined behaviour
  EXPECT_EQ(lz::Scalar(1e300).to_int(), kI64Max);
}

TEST(SizeLimits, FillWithATensorNeedsA0DimValue) {
  Tensor t = lz::zeros({3});
  expect_throw<lz::ValueError>([&] { t.fill_(make({1, 2, 3}, {3})); }, {"fill_", "0-dim", "[3]"});
  expect_values(t.fill_(make({2}, {})), kFloat32, {3}, {2, 2, 2});
}

}  // namespace
