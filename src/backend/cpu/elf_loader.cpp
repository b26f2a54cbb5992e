#include "backend/cpu/elf_loader.h"

#include <dlfcn.h>
#include <elf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace lz::cpu {
namespace {

template <class T>
bool read_at(const std::string& f, uint64_t off, T* out) {
  if (off > f.size() || f.size() - off < sizeof(T)) return false;
  std::memcpy(out, f.data() + off, sizeof(T));
  return true;
}

// Undefined symbols come from the process (libm) or glibc's vector math library.
void* resolve(const char* name) {
  static void* mvec = dlopen("libmvec.so.1", RTLD_NOW | RTLD_LOCAL);
  void* p = dlsym(RTLD_DEFAULT, name);
  if (!p && mvec) p = dlsym(mvec, name);
  return p;
}

bool is_unwind(const std::string& name) { return name == ".eh_frame" || name.rfind(".rela.eh_frame", 0) == 0; }

}  // namespace

LoadedObject::~LoadedObject() {
  if (base_) munmap(base_, size_);
}

void* LoadedObject::symbol(const std::string& name) const {
  Elf64_Ehdr eh;
  read_at(image_, 0, &eh);
  for (unsigned i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh;
    read_at(image_, eh.e_shoff + uint64_t{i} * sizeof(Elf64_Shdr), &sh);
    if (sh.sh_type != SHT_SYMTAB) continue;
    Elf64_Shdr strtab;
    if (!read_at(image_, eh.e_shoff + uint64_t{sh.sh_link} * sizeof(Elf64_Shdr), &strtab)) return nullptr;
    for (uint64_t k = 0; k * sizeof(Elf64_Sym) < sh.sh_size; ++k) {
      Elf64_Sym sym;
      if (!read_at(image_, sh.sh_offset + k * sizeof(Elf64_Sym), &sym)) return nullptr;
      if (sym.st_shndx == SHN_UNDEF || sym.st_shndx >= section_loaded_.size() || !section_loaded_[sym.st_shndx]) continue;
      if (sym.st_name >= strtab.sh_size) continue;
      const char* s = image_.c_str() + strtab.sh_offset + sym.st_name;
      if (name == s) return static_cast<char*>(base_) + section_offset_[sym.st_shndx] + sym.st_value;
    }
  }
  return nullptr;
}

std::unique_ptr<LoadedObject> load_elf_object(const std::string& f, std::string* error) {
  auto fail = [&](const std::string& why) -> std::unique_ptr<LoadedObject> {
    *error = why;
    return nullptr;
  };
  Elf64_Ehdr eh;
  if (!read_at(f, 0, &eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_machine != EM_X86_64 || eh.e_type != ET_REL ||
      eh.e_shentsize != sizeof(Elf64_Shdr)) {
    return fail("not an x86-64 relocatable ELF object");
  }
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  for (unsigned i = 0; i < eh.e_shnum; ++i) {
    if (!read_at(f, eh.e_shoff + uint64_t{i} * sizeof(Elf64_Shdr), &sh[i])) return fail("truncated section table");
  }
  if (eh.e_shstrndx >= sh.size()) return fail("no section names");
  const Elf64_Shdr& names = sh[eh.e_shstrndx];
  auto section_name = [&](const Elf64_Shdr& s) -> std::string {
    if (s.sh_name >= names.sh_size || names.sh_offset + s.sh_name >= f.size()) return "";
    return std::string(f.c_str() + names.sh_offset + s.sh_name);
  };
  // Layout: every allocated section but the unwind tables, each at its alignment.
  std::vector<size_t> off(sh.size(), 0);
  std::vector<bool> loaded(sh.size(), false);
  size_t total = 0;
  for (size_t i = 0; i < sh.size(); ++i) {
    if (!(sh[i].sh_flags & SHF_ALLOC) || is_unwind(section_name(sh[i]))) continue;
    if (sh[i].sh_flags & SHF_WRITE) return fail("writable section " + section_name(sh[i]));
    if (sh[i].sh_type == SHT_PROGBITS && (sh[i].sh_offset > f.size() || f.size() - sh[i].sh_offset < sh[i].sh_size)) {
      return fail("truncated section " + section_name(sh[i]));
    }
    size_t align = sh[i].sh_addralign ? sh[i].sh_addralign : 1;
    total = (total + align - 1) / align * align;
    off[i] = total;
    loaded[i] = true;
    total += sh[i].sh_size;
  }
  if (total == 0) return fail("no code");
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t size = (total + page - 1) / page * page;
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return fail("mmap failed");
  auto obj = std::make_unique<LoadedObject>(base, size);
  char* mem = static_cast<char*>(base);
  for (size_t i = 0; i < sh.size(); ++i) {
    if (loaded[i] && sh[i].sh_type == SHT_PROGBITS) std::memcpy(mem + off[i], f.data() + sh[i].sh_offset, sh[i].sh_size);
  }
  // Relocations.
  for (size_t r = 0; r < sh.size(); ++r) {
    if (sh[r].sh_type == SHT_REL) return fail("REL relocations");
    if (sh[r].sh_type != SHT_RELA) continue;
    const size_t target = sh[r].sh_info;
    if (target >= sh.size() || !loaded[target]) continue;  // e.g. the unwind tables' relocations
    const size_t symtab = sh[r].sh_link;
    if (symtab >= sh.size() || sh[symtab].sh_type != SHT_SYMTAB || sh[symtab].sh_link >= sh.size()) {
      return fail("bad symbol table link");
    }
    const Elf64_Shdr& strtab = sh[sh[symtab].sh_link];
    for (uint64_t k = 0; k * sizeof(Elf64_Rela) < sh[r].sh_size; ++k) {
      Elf64_Rela rel;
      if (!read_at(f, sh[r].sh_offset + k * sizeof(Elf64_Rela), &rel)) return fail("truncated relocations");
      const uint32_t type = ELF64_R_TYPE(rel.r_info);
      if (type == R_X86_64_NONE) continue;
      Elf64_Sym sym;
      if (!read_at(f, sh[symtab].sh_offset + uint64_t{ELF64_R_SYM(rel.r_info)} * sizeof(Elf64_Sym), &sym)) {
        return fail("bad symbol index");
      }
      uint64_t s = 0;
      if (sym.st_shndx == SHN_UNDEF) {
        if (sym.st_name >= strtab.sh_size || strtab.sh_offset + sym.st_name >= f.size()) return fail("bad symbol name");
        const char* name = f.c_str() + strtab.sh_offset + sym.st_name;
        void* p = resolve(name);
        if (!p) return fail(std::string("unresolved symbol ") + name);
        s = reinterpret_cast<uint64_t>(p);
      } else if (sym.st_shndx == SHN_ABS) {
        s = sym.st_value;
      } else if (sym.st_shndx < sh.size() && loaded[sym.st_shndx]) {
        s = reinterpret_cast<uint64_t>(mem + off[sym.st_shndx]) + sym.st_value;
      } else {
        return fail("relocation against an unloaded section");
      }
      if (rel.r_offset > sh[target].sh_size || sh[target].sh_size - rel.r_offset < 4) return fail("relocation out of range");
      char* p = mem + off[target] + rel.r_offset;
      const uint64_t value = s + static_cast<uint64_t>(rel.r_addend);
      switch (type) {
        case R_X86_64_64:
          if (sh[target].sh_size - rel.r_offset < 8) return fail("relocation out of range");
          std::memcpy(p, &value, 8);
          break;
        case R_X86_64_PC32:
        case R_X86_64_PLT32: {
          const int64_t d = static_cast<int64_t>(value - reinterpret_cast<uint64_t>(p));
          if (d != static_cast<int32_t>(d)) return fail("PC-relative relocation out of reach");
          const int32_t d32 = static_cast<int32_t>(d);
          std::memcpy(p, &d32, 4);
          break;
        }
        default: return fail("relocation type " + std::to_string(type));
      }
    }
  }
  if (mprotect(base, size, PROT_READ | PROT_EXEC) != 0) return fail("mprotect failed");
  obj->image_ = f;
  obj->section_offset_ = off;
  obj->section_loaded_ = loaded;
  return obj;
}

}  // namespace lz::cpu
