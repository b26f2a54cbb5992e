// Compiled kernels, cached in memory and on disk.
//
// A kernel's key is its structure (KernelSpec::structure) plus the compile environment: the
// library version and build revision, a checksum of the code generator library, and the JIT's
// LLVM version, target triple, CPU name and features. Lookup order: memory (LRU of loaded
// kernels) -> disk (DiskCache in LAZULI_CACHE_DIR, the object file) -> compile. Missing kernels
// of one plan compile concurrently on the runtime pool.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/kernel_abi.h"
#include "lower/plan.h"

namespace lz::cpu {

// A kernel's code, linked into the process; freed when the last program using it is gone.
struct LoadedKernel {
  KernelFn fn = nullptr;
  std::string symbol;
};

// The loaded kernels of `kernels`, in order. Compiles what neither cache has. Throws lz::Error
// naming the kernel when a compile fails (its IR is saved to a file named in the message).
std::vector<std::shared_ptr<LoadedKernel>> obtain_kernels(
    const std::vector<lower::PlanKernel>& kernels);

// The kernel's LLVM IR before optimization (loads the code generator).
std::string kernel_llvm_ir(const lower::PlanKernel& kernel);


// Drops the memory level (programs still holding kernels keep them). Tests use it to force the
// disk level.
void clear_kernel_memory_cache();

}  // namespace lz::cpu
