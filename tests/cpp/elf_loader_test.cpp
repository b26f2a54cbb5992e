// Kernels are linked by elf_loader (no LLVM needed to run a cached kernel); LLVM's JIT only links
// what the loader refuses, and the loader refuses anything it does not understand.
#include <gtest/gtest.h>

#include <string>

#include <cmath>

#include "backend/backend.h"
#include "backend/cpu/elf_loader.h"
#include "core/config.h"
#include "lazuli/lazuli.h"

namespace {

TEST(ElfLoader, RefusesBytesThatAreNotAnObjectWithAReason) {
  std::string error;
  EXPECT_EQ(lz::cpu::load_elf_object("", &error), nullptr);
  EXPECT_FALSE(error.empty());
  error.clear();
  EXPECT_EQ(lz::cpu::load_elf_object(std::string(4096, '\x7f'), &error), nullptr);
  EXPECT_NE(error.find("ELF"), std::string::npos) << error;
}

TEST(ElfLoader, RefusesATruncatedObject) {
  std::string header = "\x7f" "ELF";
  header.resize(64, '\0');
  header[4] = 2;  // 64-bit
  header[5] = 1;  // little endian
  std::string error;
  EXPECT_EQ(lz::cpu::load_elf_object(header, &error), nullptr);
  EXPECT_FALSE(error.empty());
}

TEST(ElfLoader, EveryGeneratedKernelLinksWithoutLlvm) {
  lz::wait();
  lz::set_active_backend("cpu");
  const int64_t before = lz::debug::counter_value("KernelLinkedByLlvm");
  lz::Tensor x = lz::tensor<float>({1, -2, 3, -4, 5, -6}, {2, 3});
  // Transcendentals (libm and libmvec symbols), a reduction, a where, casts: every relocation
  // kind the code generator emits.
  lz::Tensor y = lz::where(x > 0, lz::exp(x) + lz::tanh(x), lz::erf(x)).sum({1});
  lz::Tensor z = (x.to(lz::kInt64) * 3).amax({0}).to(lz::kFloat64);
  std::vector<double> vy = y.to_vector<double>();
  std::vector<double> vz = z.to_vector<double>();
  EXPECT_NEAR(vy[0], std::exp(1.f) + std::tanh(1.f) + std::erf(-2.f) + std::exp(3.f) + std::tanh(3.f), 1e-4);
  EXPECT_EQ(vz, (std::vector<double>{3, 15, 9}));
  EXPECT_EQ(lz::debug::counter_value("KernelLinkedByLlvm"), before);
  lz::wait();
  lz::set_active_backend(lz::config().backend);
}

}  // namespace
