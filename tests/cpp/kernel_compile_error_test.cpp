// A kernel the code generator cannot build raises a clear error naming the kernel, with its IR
// saved for a bug report, and the runtime keeps working.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "backend/backend.h"
#include "backend/cpu/kernel_cache.h"
#include "core/config.h"
#include "lazuli/error.h"
#include "lazuli/lazuli.h"

namespace {

using lz::lower::KExpr;
using lz::ir::OpKind;

TEST(KernelCompileError, NamesTheKernelAndSavesItsIr) {
  lz::lower::PlanKernel k;
  k.spec.rank = 1;
  k.spec.inputs = {{lz::DType::Float32, false}};
  k.spec.inner = {lz::lower::StrideClass::One, lz::lower::StrideClass::One};
  // A matrix product is not an elementwise op: the code generator refuses it.
  k.spec.exprs = {KExpr{OpKind::DeviceData, lz::DType::Float32, -1, -1, -1, 0, 0},
                  KExpr{OpKind::MatMul, lz::DType::Float32, 0, 0, -1, -1, 0}};
  k.name = "lzk_test_refused_" + k.spec.structure().hex();
  try {
    lz::cpu::obtain_kernels({k});
    FAIL() << "the kernel compiled";
  } catch (const lz::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(k.name), std::string::npos) << msg;
    const std::string marker = "its LLVM IR is saved in ";
    size_t at = msg.find(marker);
    ASSERT_NE(at, std::string::npos) << msg;
    const std::string path = msg.substr(at + marker.size());
    std::ifstream f(path);
    ASSERT_TRUE(f.good()) << msg;
    std::stringstream ir;
    ir << f.rdbuf();
    EXPECT_NE(ir.str().find(k.name), std::string::npos) << ir.str();
    std::remove(path.c_str());
  }
  // The runtime still compiles and runs kernels.
  lz::wait();
  lz::set_active_backend("cpu");
  lz::Tensor x = lz::tensor<float>({1, 2, 3}, {3});
  EXPECT_EQ((x * 2 + 1).to_vector<float>(), (std::vector<float>{3, 5, 7}));
  lz::wait();
  lz::set_active_backend(lz::config().backend);
}

}  // namespace
