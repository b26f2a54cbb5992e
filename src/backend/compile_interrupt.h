// Stopping a compile at a kernel boundary (Ctrl-C during a long compile).
//
// A front end installs a CompileInterruptHook. obtain_kernels (kernel_cache.cpp) opens a
// CompileInterruptScope on the compiling thread before compiling a plan's missing kernels and
// polls it on that thread before each kernel it takes (never on the pool's other threads: the
// hook may be tied to the caller, as Python's signals are to the main thread). When a poll says
// stop, kernels not yet started are skipped and obtain_kernels throws CompileInterrupted. Kernels
// finished by then are whole (linked, on disk) and stay cached; the program is never made, so
// nothing half-made is recorded and the same graph compiles again at its next sync.
#pragma once
#include <cstdint>

#include "lazuli/error.h"

namespace lz {

class CompileInterrupted : public Error {
 public:
  using Error::Error;
};

// begin() returns a token that poll() and end() get back; a token of 0 means "cannot be
// interrupted" (poll is then not called). Functions, not std::function: installed once, called
// from any thread that compiles.
struct CompileInterruptHook {
  uint64_t (*begin)() = nullptr;
  bool (*poll)(uint64_t token) = nullptr;
  void (*end)(uint64_t token) = nullptr;
};
void set_compile_interrupt_hook(const CompileInterruptHook& hook);

class CompileInterruptScope {
 public:
  CompileInterruptScope();
  ~CompileInterruptScope();
  CompileInterruptScope(const CompileInterruptScope&) = delete;
  CompileInterruptScope& operator=(const CompileInterruptScope&) = delete;
  // True when the compile should stop. Call only on the thread that made the scope.
  bool poll() const;

 private:
  CompileInterruptHook hook_;
  uint64_t token_ = 0;
};

}  // namespace lz
