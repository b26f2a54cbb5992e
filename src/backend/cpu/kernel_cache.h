// Compiled kernels, cached in memory and on disk.
//
// A kernel's key is its structure (KernelSpec::structure) plus the compile environment: the
// library version and build revision, a checksum of the code generator library, and the JIT's
// LLVM version, target triple, CPU name and features. Lookup order: memory (LRU of loaded
// kernels) -> disk (DiskCache in LAZULI_CACHE_DIR, the object file) -> compile. Missing kernels
// of one plan compile concurrently on the runtime pool.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/cpu/kernel_abi.h"
#include "lower/plan.h"

namespace lz::cpu {

// A kernel this process loaded from the disk cache, until its first call returns: that call
// leaves a crash marker for its duration (disk_cache.h), so if the process dies inside the
// kernel (damaged code the checks could not see), the next process compiles it anew instead of
// loading it and dying the same way. Calls after the first cost one atomic load.
class KernelTrial {
 public:
  explicit KernelTrial(std::string marker) : marker_(std::move(marker)) {}
  bool pending() const { return !done_.load(std::memory_order_acquire); }
  void begin();  // writes the marker (the first time)
  void end();    // the kernel returned: removes the marker; later calls skip the trial

 private:
  std::string marker_;
  std::mutex mu_;  // guards written_
  bool written_ = false;
  std::atomic<bool> done_{false};
};

// A kernel's code, linked into the process; freed when the last program using it is gone.
struct LoadedKernel {
  KernelFn fn = nullptr;
  std::string symbol;
  std::shared_ptr<KernelTrial> trial;  // loaded from disk and not yet returned from, else null
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
