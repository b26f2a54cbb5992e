// Loads a kernel object (a relocatable x86-64 ELF file from the code generator) into executable
// memory without LLVM, so a process whose kernels all come from the disk cache never loads
// libLLVM (about 60 ms, MACHINE.md).
//
// The code generator emits kernels in the large code model, so every reference to a symbol or to
// another section is an absolute 64-bit relocation (R_X86_64_64) on a movabs immediate;
// PC-relative ones are accepted when they stay inside the object. Undefined symbols are resolved
// with dlsym, and only the math functions the code generator calls (libm and its libmvec vector
// variants) are allowed. Unwind tables are not loaded: no exception passes through a kernel.
//
// The input may be any bytes (a damaged cache entry whose checksum was recomputed): everything is
// checked before it is used, and anything the code generator does not produce (another
// relocation type, a writable section, a field out of bounds, sections, symbols or relocations
// that disagree with each other) fails with a message. A load never reads outside the input,
// never writes outside the memory it mapped, and takes time linear in the input's size. Code
// sections are mapped read+execute, data sections read-only. What no check can see is damage to
// the machine code or to in-bounds constants (see link_cached in kernel_cache.cpp).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace lz::cpu {

class LoadedObject {
 public:
  LoadedObject(void* base, size_t size) : base_(base), size_(size) {}
  ~LoadedObject();
  LoadedObject(const LoadedObject&) = delete;
  LoadedObject& operator=(const LoadedObject&) = delete;
  // The address of a global function the object defines in an executable section, or nullptr.
  void* function(const std::string& name) const;

 private:
  friend std::unique_ptr<LoadedObject> load_elf_object(const std::string&, std::string*);
  void* base_;
  size_t size_;
  std::vector<std::pair<std::string, void*>> functions_;
};

// nullptr and *error set when the object cannot be loaded this way.
std::unique_ptr<LoadedObject> load_elf_object(const std::string& object, std::string* error);

}  // namespace lz::cpu
