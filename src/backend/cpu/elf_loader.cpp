#include "backend/cpu/elf_loader.h"

#include <dlfcn.h>
#include <elf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string_view>
#include <unordered_set>

#include "ir/libm.h"

namespace lz::cpu {
namespace {

// Bounds on what a kernel object can hold, so that work and memory stay small whatever the bytes.
constexpr size_t kMaxSections = 256;
constexpr uint64_t kMaxAlign = 4096;
// Every loaded section starts at least this aligned: a flipped sh_addralign can only over-align.
constexpr uint64_t kMinAlign = 64;
// Slack after the data sections, so a vector load from the end of a constant stays mapped.
constexpr size_t kTailSlack = 64;

constexpr uint32_t kShtLlvmAddrsig = 0x6fff4c03;  // LLVM's address-significance table
constexpr uint64_t kKnownFlags = SHF_WRITE | SHF_ALLOC | SHF_EXECINSTR | SHF_MERGE | SHF_STRINGS |
                                 SHF_INFO_LINK | SHF_LINK_ORDER | SHF_GROUP | SHF_EXCLUDE;

template <class T>
bool read_at(std::string_view f, uint64_t off, T* out) {
  if (off > f.size() || f.size() - off < sizeof(T)) return false;
  std::memcpy(out, f.data() + off, sizeof(T));
  return true;
}

bool in_file(std::string_view f, uint64_t off, uint64_t size) {
  return off <= f.size() && size <= f.size() - off;
}

bool power_of_two(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

// The functions the code generator calls (the libm functions of op_table.def's LZ_LIBM rows and
// the libmvec names jit/codegen.cpp lets the vectorizer map them to; memset/memcpy/memmove from
// loop idioms; rounding and sqrt as library calls on processors without the instructions).
// Nothing else is resolved, so a damaged name can never call an arbitrary function of the process.
bool is_libm_scalar(std::string_view name) {
  static const char* const kRounding[] = {"floorf", "floor",     "ceilf", "ceil",
                                          "roundevenf", "roundeven", "sqrtf", "sqrt"};
  for (const char* s : kRounding) {
    if (name == s) return true;
  }
  for (const ir::LibmFn& f : ir::libm_fns()) {
    if (name == f.f32 || name == f.f64) return true;
  }
  return false;
}

bool allowed_external(std::string_view name) {
  static const char* const kOther[] = {"memset", "memcpy", "memmove"};
  for (const char* s : kOther) {
    if (name == s) return true;
  }
  // libmvec: _ZGV<isa b-e>N<lanes><v per argument>_<scalar name>
  if (name.starts_with("_ZGV") && name.size() > 7 && name[4] >= 'b' && name[4] <= 'e' &&
      name[5] == 'N') {
    size_t i = 6;
    while (i < name.size() && name[i] >= '0' && name[i] <= '9') ++i;
    const std::string_view lanes = name.substr(6, i - 6);
    if (lanes != "2" && lanes != "4" && lanes != "8" && lanes != "16") return false;
    size_t v = i;
    while (v < name.size() && name[v] == 'v') ++v;
    if (v - i < 1 || v - i > 2 || v >= name.size() || name[v] != '_') return false;
    name = name.substr(v + 1);
  }
  return is_libm_scalar(name);
}

// Undefined symbols come from the process (libm) or glibc's vector math library.
void* resolve(const char* name) {
  static void* mvec = dlopen("libmvec.so.1", RTLD_NOW | RTLD_LOCAL);
  void* p = dlsym(RTLD_DEFAULT, name);
  if (!p && mvec) p = dlsym(mvec, name);
  return p;
}

bool is_unwind(std::string_view name) { return name == ".eh_frame"; }

// The parsed, cross-checked object: everything below indexes only what was checked here.
struct Object {
  std::string_view file;
  std::vector<Elf64_Shdr> sh;
  std::vector<std::string_view> name;  // per section
  std::vector<bool> loaded;            // copied into memory
  size_t symtab = 0;
  std::vector<Elf64_Sym> syms;
  std::string_view strtab;  // NUL-terminated: its last byte is 0

  // The NUL-terminated string at `off` of a checked string table (its last byte is 0).
  static std::string_view string_at(std::string_view table, uint64_t off) {
    return off < table.size() ? std::string_view(table.data() + off) : std::string_view();
  }
};

const char* check_header(std::string_view f, Elf64_Ehdr* eh) {
  if (!read_at(f, 0, eh) || std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
      eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_ident[EI_DATA] != ELFDATA2LSB ||
      eh->e_ident[EI_VERSION] != EV_CURRENT || eh->e_machine != EM_X86_64 || eh->e_type != ET_REL) {
    return "not an x86-64 relocatable ELF object";
  }
  if ((eh->e_ident[EI_OSABI] != ELFOSABI_SYSV && eh->e_ident[EI_OSABI] != ELFOSABI_GNU) ||
      eh->e_version != EV_CURRENT || eh->e_ehsize != sizeof(Elf64_Ehdr) || eh->e_phnum != 0 ||
      eh->e_shentsize != sizeof(Elf64_Shdr)) {
    return "unexpected ELF header";
  }
  if (eh->e_shnum < 2 || eh->e_shnum > kMaxSections || eh->e_shoff % 8 != 0 ||
      !in_file(f, eh->e_shoff, uint64_t{eh->e_shnum} * sizeof(Elf64_Shdr))) {
    return "bad section table";
  }
  if (eh->e_shstrndx == SHN_UNDEF || eh->e_shstrndx >= eh->e_shnum) return "no section names";
  return nullptr;
}

// A string table: inside the file, ends with a NUL.
bool string_table(std::string_view f, const Elf64_Shdr& s, std::string_view* out) {
  if (s.sh_type != SHT_STRTAB || s.sh_size == 0 || !in_file(f, s.sh_offset, s.sh_size))
    return false;
  *out = f.substr(s.sh_offset, s.sh_size);
  return out->back() == '\0';
}

const char* check_sections(const Elf64_Ehdr& eh, Object* o) {
  std::string_view f = o->file;
  const size_t n = eh.e_shnum;
  o->sh.resize(n);
  for (size_t i = 0; i < n; ++i) read_at(f, eh.e_shoff + i * sizeof(Elf64_Shdr), &o->sh[i]);
  if (o->sh[0].sh_type != SHT_NULL) return "bad null section";
  std::string_view names;
  if (!string_table(f, o->sh[eh.e_shstrndx], &names)) return "bad section name table";
  o->name.resize(n);
  o->loaded.assign(n, false);
  size_t symtabs = 0;
  for (size_t i = 1; i < n; ++i) {
    const Elf64_Shdr& s = o->sh[i];
    if (s.sh_name >= names.size()) return "bad section name";
    o->name[i] = Object::string_at(names, s.sh_name);
    switch (s.sh_type) {
      case SHT_PROGBITS:
      case SHT_SYMTAB:
      case SHT_STRTAB:
      case SHT_RELA:
      case SHT_NOTE:
      case SHT_X86_64_UNWIND:
      case kShtLlvmAddrsig:
        break;
      default:
        return "unexpected section type";
    }
    if (!in_file(f, s.sh_offset, s.sh_size)) return "section outside the file";
    if ((s.sh_flags & ~kKnownFlags) != 0) return "unexpected section flags";
    if (s.sh_addralign > kMaxAlign || (s.sh_addralign != 0 && !power_of_two(s.sh_addralign))) {
      return "bad section alignment";
    }
    const bool rel_name = o->name[i].starts_with(".rel");
    if (rel_name != (s.sh_type == SHT_RELA)) return "relocation section name and type disagree";
    if (s.sh_type == SHT_SYMTAB) {
      ++symtabs;
      o->symtab = i;
    }
    if (!(s.sh_flags & SHF_ALLOC) || is_unwind(o->name[i])) continue;
    if (s.sh_type != SHT_PROGBITS) return "allocated section without contents";
    if (s.sh_flags & SHF_WRITE) return "writable section";
    o->loaded[i] = true;
  }
  if (symtabs != 1) return "not exactly one symbol table";
  // Each section's bytes lie apart from every other's and from the headers, at an offset of its
  // alignment, as an assembler lays them out: a flipped offset that moved a section onto other
  // bytes (machine code read as constants) is refused, not loaded.
  std::vector<std::pair<uint64_t, uint64_t>> extents = {
      {0, sizeof(Elf64_Ehdr)},
      {eh.e_shoff, eh.e_shoff + uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr)}};
  for (size_t i = 1; i < n; ++i) {
    const Elf64_Shdr& s = o->sh[i];
    if (s.sh_size == 0) continue;
    if (s.sh_addralign > 1 && s.sh_offset % s.sh_addralign != 0) return "misaligned section";
    extents.emplace_back(s.sh_offset, s.sh_offset + s.sh_size);
  }
  std::sort(extents.begin(), extents.end());
  for (size_t i = 1; i < extents.size(); ++i) {
    if (extents[i].first < extents[i - 1].second) return "overlapping sections";
  }
  return nullptr;
}

// A symbol table of whole entries, locals first, each symbol inside its section.
const char* check_symbols(Object* o) {
  std::string_view f = o->file;
  const Elf64_Shdr& st = o->sh[o->symtab];
  if (st.sh_entsize != sizeof(Elf64_Sym) || st.sh_size % sizeof(Elf64_Sym) != 0 ||
      st.sh_offset % 8 != 0 || st.sh_size == 0) {
    return "bad symbol table";
  }
  if (st.sh_link == 0 || st.sh_link >= o->sh.size() ||
      !string_table(f, o->sh[st.sh_link], &o->strtab)) {
    return "bad symbol name table";
  }
  const size_t count = st.sh_size / sizeof(Elf64_Sym);
  if (st.sh_info == 0 || st.sh_info > count) return "bad first global symbol";
  o->syms.resize(count);
  std::unordered_set<std::string_view> names;
  std::vector<bool> has_section_symbol(o->sh.size(), false);
  for (size_t k = 0; k < count; ++k) {
    Elf64_Sym& s = o->syms[k];
    read_at(f, st.sh_offset + k * sizeof(Elf64_Sym), &s);
    if (k == 0) {
      if (s.st_name || s.st_info || s.st_other || s.st_shndx || s.st_value || s.st_size)
        return "bad null symbol";
      continue;
    }
    const unsigned type = ELF64_ST_TYPE(s.st_info), bind = ELF64_ST_BIND(s.st_info);
    if (s.st_name >= o->strtab.size()) return "bad symbol name";
    if (s.st_other != STV_DEFAULT) return "unexpected symbol visibility";
    if ((bind == STB_LOCAL) != (k < st.sh_info)) return "symbol binding out of order";
    if (bind != STB_LOCAL && bind != STB_GLOBAL && bind != STB_WEAK)
      return "unexpected symbol binding";
    if (type == STT_FILE) {
      if (s.st_shndx != SHN_ABS || bind != STB_LOCAL) return "bad file symbol";
      continue;
    }
    if (type != STT_NOTYPE && type != STT_OBJECT && type != STT_FUNC && type != STT_SECTION) {
      return "unexpected symbol type";
    }
    const std::string_view name = Object::string_at(o->strtab, s.st_name);
    if (s.st_shndx == SHN_UNDEF) {
      if (bind == STB_LOCAL || type == STT_SECTION || s.st_value != 0 || s.st_size != 0 ||
          name.empty()) {
        return "bad undefined symbol";
      }
    } else {
      if (s.st_shndx >= o->sh.size()) return "symbol in a missing section";
      const Elf64_Shdr& sec = o->sh[s.st_shndx];
      if (s.st_value > sec.sh_size || s.st_size > sec.sh_size - s.st_value)
        return "symbol outside its section";
      if (type == STT_SECTION) {
        // One section symbol per section, at its start: a flipped index cannot alias another.
        if (s.st_value != 0 || s.st_size != 0 || bind != STB_LOCAL ||
            has_section_symbol[s.st_shndx]) {
          return "bad section symbol";
        }
        has_section_symbol[s.st_shndx] = true;
        continue;
      }
      if (type == STT_NOTYPE) return "defined symbol without a type";
      const bool exec = (sec.sh_flags & SHF_EXECINSTR) != 0;
      if ((type == STT_FUNC) != exec) return "function and section kinds disagree";
      // The code generator puts one function in its section: from its start to its end, so a
      // flipped value or size cannot move the entry point into the middle of the code.
      if (type == STT_FUNC && (s.st_value != 0 || s.st_size != sec.sh_size))
        return "bad function bounds";
    }
    if (!names.insert(name).second) return "two symbols of one name";
  }
  return nullptr;
}

struct Layout {
  std::vector<size_t> off;  // per section, in the mapping
  size_t code_end = 0;      // [0, code_end) is code (page aligned), the rest data
  size_t size = 0;          // page aligned
};

Layout lay_out(const Object& o) {
  Layout l;
  l.off.assign(o.sh.size(), 0);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_t total = 0;
  for (int pass = 0; pass < 2; ++pass) {  // code first, then data, on their own pages
    for (size_t i = 0; i < o.sh.size(); ++i) {
      if (!o.loaded[i] || ((o.sh[i].sh_flags & SHF_EXECINSTR) != 0) != (pass == 0)) continue;
      const size_t align = std::max<uint64_t>(o.sh[i].sh_addralign, kMinAlign);
      total = (total + align - 1) / align * align;
      l.off[i] = total;
      total += o.sh[i].sh_size;
    }
    if (pass == 0) l.code_end = total = (total + page - 1) / page * page;
  }
  l.size = (total + kTailSlack + page - 1) / page * page;
  return l;
}

// The relocations of one section: whole entries, in increasing offset order, each on a zero field
// inside its section (RELA objects keep addends in the entries), against a symbol in a loaded
// data section (within it) or an allowed external function.
const char* apply_relocations(const Object& o, size_t r, const Layout& l, char* mem,
                              std::vector<bool>* referenced) {
  const Elf64_Shdr& rs = o.sh[r];
  if (rs.sh_entsize != sizeof(Elf64_Rela) || rs.sh_size % sizeof(Elf64_Rela) != 0 ||
      rs.sh_offset % 8 != 0) {
    return "bad relocation section";
  }
  if (rs.sh_link != o.symtab) return "relocations against another symbol table";
  const size_t target = rs.sh_info;
  if (target == 0 || target >= o.sh.size() ||
      o.name[r] != std::string(".rela") + std::string(o.name[target])) {
    return "relocation section and its target disagree";
  }
  if (is_unwind(o.name[target])) return nullptr;  // not loaded
  if (!o.loaded[target]) return "relocations for a section that is not loaded";
  const Elf64_Shdr& ts = o.sh[target];
  const bool code = (ts.sh_flags & SHF_EXECINSTR) != 0;
  uint64_t next_free = 0;
  for (uint64_t k = 0; k < rs.sh_size / sizeof(Elf64_Rela); ++k) {
    Elf64_Rela rel;
    read_at(o.file, rs.sh_offset + k * sizeof(Elf64_Rela), &rel);
    const uint32_t type = ELF64_R_TYPE(rel.r_info);
    const uint64_t width = type == R_X86_64_64 ? 8 : 4;
    if (type != R_X86_64_64 && type != R_X86_64_PC32 && type != R_X86_64_PLT32) {
      return "unexpected relocation type";
    }
    if (rel.r_offset < next_free || rel.r_offset > ts.sh_size ||
        ts.sh_size - rel.r_offset < width) {
      return "relocation out of range or out of order";
    }
    next_free = rel.r_offset + width;
    const char* field = o.file.data() + ts.sh_offset + rel.r_offset;
    if (std::any_of(field, field + width, [](char c) { return c != 0; }))
      return "relocation on a non-zero field";
    // In code, an absolute address is the immediate of `movabs $imm64, %reg` (REX.W B8+r).
    if (code && type == R_X86_64_64 &&
        (rel.r_offset < 2 || (field[-2] & 0xfa) != 0x48 ||
         (static_cast<uint8_t>(field[-1]) & 0xf8) != 0xb8)) {
      return "absolute relocation outside a movabs";
    }
    const uint64_t si = ELF64_R_SYM(rel.r_info);
    if (si == 0 || si >= o.syms.size()) return "bad symbol index";
    const Elf64_Sym& sym = o.syms[si];
    (*referenced)[si] = true;
    const unsigned stype = ELF64_ST_TYPE(sym.st_info);
    uint64_t s = 0;
    if (sym.st_shndx == SHN_UNDEF) {
      const char* name = o.strtab.data() + sym.st_name;
      if (!allowed_external(name)) return "unexpected external symbol";
      void* p = resolve(name);
      if (!p) return "unresolved symbol";
      if (rel.r_addend != (type == R_X86_64_64 ? 0 : -4)) return "bad addend for a function";
      s = reinterpret_cast<uint64_t>(p);
    } else if (stype == STT_FILE) {
      return "relocation against a file symbol";
    } else {
      const Elf64_Shdr& sec = o.sh[sym.st_shndx];
      if (!o.loaded[sym.st_shndx]) return "relocation against an unloaded section";
      if (sec.sh_flags & SHF_EXECINSTR) return "relocation against code";
      // Where the reference lands, relative to its section (PC-relative fields are 4 bytes
      // before the end of their instruction, hence the -4 in their addends).
      const int64_t at =
          static_cast<int64_t>(sym.st_value) + rel.r_addend + (type == R_X86_64_64 ? 0 : 4);
      if (at < 0 || static_cast<uint64_t>(at) >= sec.sh_size)
        return "relocation points outside its section";
      if ((sec.sh_flags & SHF_MERGE) && sec.sh_entsize &&
          static_cast<uint64_t>(at) % sec.sh_entsize) {
        return "relocation points between constants";
      }
      s = reinterpret_cast<uint64_t>(mem + l.off[sym.st_shndx]) + sym.st_value;
    }
    char* p = mem + l.off[target] + rel.r_offset;
    const uint64_t value = s + static_cast<uint64_t>(rel.r_addend);
    if (type == R_X86_64_64) {
      std::memcpy(p, &value, 8);
    } else {
      const int64_t d = static_cast<int64_t>(value - reinterpret_cast<uint64_t>(p));
      if (d != static_cast<int32_t>(d)) return "PC-relative relocation out of reach";
      const int32_t d32 = static_cast<int32_t>(d);
      std::memcpy(p, &d32, 4);
    }
  }
  return nullptr;
}

}  // namespace

LoadedObject::~LoadedObject() {
  if (base_) munmap(base_, size_);
}

void* LoadedObject::function(const std::string& name) const {
  for (const auto& [n, p] : functions_) {
    if (n == name) return p;
  }
  return nullptr;
}

std::unique_ptr<LoadedObject> load_elf_object(const std::string& bytes, std::string* error) {
  auto fail = [&](const std::string& why) -> std::unique_ptr<LoadedObject> {
    *error = why;
    return nullptr;
  };
  Object o;
  o.file = bytes;
  Elf64_Ehdr eh;
  if (const char* why = check_header(o.file, &eh)) return fail(why);
  if (const char* why = check_sections(eh, &o)) return fail(why);
  if (const char* why = check_symbols(&o)) return fail(why);
  std::vector<bool> relocated(o.sh.size(), false);
  for (size_t r = 0; r < o.sh.size(); ++r) {
    if (o.sh[r].sh_type != SHT_RELA) continue;
    if (o.sh[r].sh_info < o.sh.size()) {
      if (relocated[o.sh[r].sh_info]) return fail("two relocation sections for one section");
      relocated[o.sh[r].sh_info] = true;
    }
  }
  const Layout l = lay_out(o);
  if (l.code_end == 0) return fail("no code");
  void* base = mmap(nullptr, l.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return fail("mmap failed");
  auto obj = std::make_unique<LoadedObject>(base, l.size);
  char* mem = static_cast<char*>(base);
  for (size_t i = 0; i < o.sh.size(); ++i) {
    if (o.loaded[i]) std::memcpy(mem + l.off[i], bytes.data() + o.sh[i].sh_offset, o.sh[i].sh_size);
  }
  std::vector<bool> referenced(o.syms.size(), false);
  for (size_t r = 0; r < o.sh.size(); ++r) {
    if (o.sh[r].sh_type != SHT_RELA) continue;
    if (const char* why = apply_relocations(o, r, l, mem, &referenced)) return fail(why);
  }
  // LLVM writes an undefined symbol only for a relocation: one nothing uses means a relocation's
  // symbol index was changed (a call to one math function turned into a call to another).
  for (size_t k = 1; k < o.syms.size(); ++k) {
    if (o.syms[k].st_shndx == SHN_UNDEF && !referenced[k])
      return fail("undefined symbol no relocation uses");
  }
  if (mprotect(base, l.code_end, PROT_READ | PROT_EXEC) != 0 ||
      (l.size > l.code_end && mprotect(mem + l.code_end, l.size - l.code_end, PROT_READ) != 0)) {
    return fail("mprotect failed");
  }
  for (size_t k = o.sh[o.symtab].sh_info; k < o.syms.size(); ++k) {
    const Elf64_Sym& s = o.syms[k];
    if (ELF64_ST_TYPE(s.st_info) != STT_FUNC || s.st_shndx == SHN_UNDEF || !o.loaded[s.st_shndx])
      continue;
    obj->functions_.emplace_back(std::string(Object::string_at(o.strtab, s.st_name)),
                                 mem + l.off[s.st_shndx] + s.st_value);
  }
  return obj;
}

}  // namespace lz::cpu
