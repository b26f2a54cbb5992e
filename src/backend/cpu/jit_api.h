// The boundary between the runtime and its LLVM code generator.
//
// The code generator lives in its own shared library (liblazuli_jit.so, src/backend/cpu/jit/),
// loaded with dlopen at the first kernel compile or load: libLLVM costs about 60 ms to load
// (MACHINE.md), and `import lazuli` or a program that only hits compiled programs should not pay
// it. The library uses only the header-only structures of lower/kernel_spec.h, no runtime symbol,
// so it loads beside a Python extension whose symbols are private.
#pragma once
#include <string>

#include "lower/kernel_spec.h"

namespace lz::cpu {

class JitCompiler {
 public:
  virtual ~JitCompiler() = default;
  // Builds the kernel as LLVM IR, optimizes it for this CPU and returns a relocatable object whose
  // function is named `name`. Thread-safe: each call has its own LLVMContext, each thread its own
  // TargetMachine. Throws std::runtime_error on failure; `llvm_ir` (if given) receives the
  // unoptimized IR even then, for the bug report.
  virtual std::string compile(const lower::KernelSpec& spec, const std::string& name, std::string* llvm_ir) = 0;
  // Links an object into the process under its own resource tracker; returns `name`'s address.
  // Thread-safe. Throws std::runtime_error when the object cannot be linked.
  virtual void* load(const std::string& object, const std::string& name) = 0;
  // Frees a loaded kernel's code. The caller guarantees nothing runs it any more.
  virtual void unload(const std::string& name) = 0;
};

}  // namespace lz::cpu

// The library's one exported symbol. Returns nullptr and sets *error when LLVM cannot target this
// machine.
extern "C" lz::cpu::JitCompiler* lazuli_create_jit_compiler(std::string* error);
