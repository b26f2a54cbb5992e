// Loads a kernel object (a relocatable x86-64 ELF file from the code generator) into executable
// memory without LLVM, so a process whose kernels all come from the disk cache never loads
// libLLVM (about 60 ms, MACHINE.md).
//
// The code generator emits kernels in the large code model, so every reference to a symbol or to
// another section is an absolute 64-bit relocation (R_X86_64_64); PC-relative ones are accepted
// when they stay inside the object. Undefined symbols (libm, libmvec) are resolved with dlsym.
// Unwind tables are not loaded: no exception passes through a kernel. Anything else (another
// relocation type, a writable section, a malformed file) fails with a message, and the caller
// links the object through LLVM's JIT instead.
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace lz::cpu {

class LoadedObject {
 public:
  LoadedObject(void* base, size_t size) : base_(base), size_(size) {}
  ~LoadedObject();
  LoadedObject(const LoadedObject&) = delete;
  LoadedObject& operator=(const LoadedObject&) = delete;
  // The address of a function defined by the object, or nullptr.
  void* symbol(const std::string& name) const;

 private:
  friend std::unique_ptr<LoadedObject> load_elf_object(const std::string&, std::string*);
  void* base_;
  size_t size_;
  std::string image_;  // the object file, for its symbol table
  std::vector<size_t> section_offset_;
  std::vector<bool> section_loaded_;
};

// nullptr and *error set when the object cannot be loaded this way.
std::unique_ptr<LoadedObject> load_elf_object(const std::string& object, std::string* error);

}  // namespace lz::cpu
