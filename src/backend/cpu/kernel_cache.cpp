#include "backend/cpu/kernel_cache.h"

#include <cpuid.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "backend/backend.h"
#include "backend/compile_interrupt.h"
#include "backend/cpu/elf_loader.h"
#include "backend/cpu/jit_api.h"
#include "backend/disk_cache.h"
#include "core/config.h"
#include "core/debug_write.h"
#include "core/library_path.h"
#include "core/lru_cache.h"
#include "core/metrics.h"
#include "core/progress.h"
#include "core/thread_pool.h"
#include "lazuli/error.h"

#ifndef LAZULI_LLVM_VERSION
#define LAZULI_LLVM_VERSION "unknown"
#endif

namespace lz::cpu {

using lower::PlanKernel;

namespace {

constexpr size_t kMemoryKernels = 4096;

std::string jit_library_path() { return sibling_library_path("liblazuli_jit.so"); }

// The linker's build ID of an ELF shared library (a hash of what it linked; GNU ld writes it by
// default), or "" where it has none or the file is unreadable. Found through the section headers:
// a few reads, where hashing the whole file took 30 ms once LLVM is linked into it (40 MB).
std::string elf_build_id(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  Elf64_Ehdr eh{};
  if (!f.read(reinterpret_cast<char*>(&eh), sizeof eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum > 4096) {
    return "";
  }
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  f.seekg(static_cast<std::streamoff>(eh.e_shoff));
  if (!f.read(reinterpret_cast<char*>(sh.data()), static_cast<std::streamsize>(sh.size() * sizeof(Elf64_Shdr)))) {
    return "";
  }
  for (const Elf64_Shdr& s : sh) {
    if (s.sh_type != SHT_NOTE || s.sh_size > 4096) continue;
    std::string notes(s.sh_size, '\0');
    f.seekg(static_cast<std::streamoff>(s.sh_offset));
    if (!f.read(notes.data(), static_cast<std::streamsize>(notes.size()))) return "";
    for (size_t at = 0; at + sizeof(Elf64_Nhdr) <= notes.size();) {
      Elf64_Nhdr n{};
      std::memcpy(&n, notes.data() + at, sizeof n);
      size_t name_at = at + sizeof n, desc_at = name_at + ((size_t{n.n_namesz} + 3) & ~size_t{3});
      size_t next = desc_at + ((size_t{n.n_descsz} + 3) & ~size_t{3});
      if (next > notes.size()) break;
      if (n.n_type == NT_GNU_BUILD_ID && n.n_namesz == 4 && notes.compare(name_at, 4, std::string("GNU\0", 4)) == 0) {
        return notes.substr(desc_at, n.n_descsz);
      }
      at = next;
    }
  }
  return "";
}

// What identifies the code generator library's code: its build ID, else a hash of its bytes.
// (Tools that only edit its dynamic section, as auditwheel's patchelf does, keep the build ID:
// the same code generates the same kernels.)
std::string code_generator_identity(const std::string& path) {
  std::string id = elf_build_id(path);
  if (!id.empty()) return "build-id:" + id;
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  Hasher h;
  h.add_str(ss.str());
  return h.digest().hex();
}

struct Codegen {
  JitCompiler* jit = nullptr;
};

// Loaded once, at the first compile or load; never unloaded (kernels may outlive everything).
Codegen& codegen() {
  static Codegen* cg = nullptr;
  static std::once_flag once;
  static std::string error;
  std::call_once(once, [] {
    std::string path = jit_library_path();
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      error = "cannot load the code generator " + path + ": " + dlerror();
      return;
    }
    using Create = JitCompiler* (*)(std::string*);
    auto create = reinterpret_cast<Create>(dlsym(h, "lazuli_create_jit_compiler"));
    std::string why;
    JitCompiler* jit = create ? create(&why) : nullptr;
    if (!jit) {
      error = "the code generator " + path + " failed to start: " + (create ? why : "no entry point");
      return;
    }
    cg = new Codegen{jit};
  });
  if (!cg) throw Error("cpu backend: " + error + " (LAZULI_BACKEND=interp runs without it)");
  return *cg;
}

LruCache<Hash128, LoadedKernel, Hash128Hasher>& memory_cache() {
  static auto* c = new LruCache<Hash128, LoadedKernel, Hash128Hasher>(kMemoryKernels);
  return *c;
}

DiskCache& disk_cache() {
  static std::mutex mu;
  static std::unique_ptr<DiskCache> cache;
  static std::string dir;
  static bool read_only = false;
  std::lock_guard<std::mutex> l(mu);
  const Config& c = config();
  if (!cache || dir != c.cache_dir || read_only != c.persistent_cache_read_only) {
    dir = c.cache_dir;
    read_only = c.persistent_cache_read_only;
    DiskCacheOptions o;
    o.dir = dir.empty() ? "" : dir + "/kernels";
    // The user's directory is checked as its kernels/ subdirectory is (disk_cache.h): whoever can
    // write it can swap the subdirectory.
    struct stat st;
    if (!dir.empty() && ::stat(dir.c_str(), &st) == 0 && ((st.st_mode & 022) || st.st_uid != ::geteuid())) {
      debug_write("lazuli: kernel cache: " + dir + " is " +
                  ((st.st_mode & 022) ? "writable by other users" : "owned by another user") +
                  "; loading code from it would let them run code in this process; the "
                  "persistent kernel cache is off\n");
      o.dir = "";
    }
    o.read_only = read_only;
    o.max_bytes = c.persistent_cache_max_bytes;
    cache = std::make_unique<DiskCache>(o);
  }
  return *cache;
}

// The processor, as the code generator sees it: vendor, brand and the feature leaves of cpuid.
std::string cpu_identity() {
  std::string id;
  auto leaf = [&](unsigned l, unsigned sub) {
    unsigned r[4] = {0, 0, 0, 0};
    __get_cpuid_count(l, sub, &r[0], &r[1], &r[2], &r[3]);
    if (l == 1) r[1] = 0;  // EBX of leaf 1 holds the APIC id of the core this thread is on
    id.append(reinterpret_cast<const char*>(r), sizeof(r));
  };
  for (unsigned l : {0u, 1u}) leaf(l, 0);
  leaf(7, 0);
  leaf(7, 1);
  leaf(0xD, 1);
  for (unsigned l : {0x80000001u, 0x80000002u, 0x80000003u, 0x80000004u}) leaf(l, 0);
  return id;
}

// What every kernel key starts with: this library, the code generator library's identity, the LLVM
// it was built against, and the processor. Computed without loading LLVM, so a process served by
// the disk cache never loads it.
const Hash128& key_environment() {
  static const Hash128 h = [] {
    Hasher hh;
    hh.add_str(library_identity());
    hh.add_str(code_generator_identity(jit_library_path()));
    hh.add_str(LAZULI_LLVM_VERSION);
    hh.add_str(cpu_identity());
    return hh.digest();
  }();
  return h;
}

Hash128 kernel_key(const PlanKernel& k) {
  Hasher h;
  h.add(key_environment());
  h.add(k.spec.structure());
  return h.digest();
}

// Linked kernels by key, with a count of the handles to each, all under one mutex, so a kernel is
// never linked twice under its symbol and its code is freed when the last handle goes.
struct Linked {
  KernelFn fn;
  std::string symbol;
  int64_t handles = 0;
  std::shared_ptr<LoadedObject> object;  // loaded by elf_loader; null when LLVM's JIT linked it
  std::shared_ptr<KernelTrial> trial;    // read from the disk cache in this process
};
std::mutex g_link_mu;  // guards g_linked
std::unordered_map<Hash128, Linked, Hash128Hasher>& linked() {
  static auto* m = new std::unordered_map<Hash128, Linked, Hash128Hasher>();
  return *m;
}

std::shared_ptr<LoadedKernel> handle_locked(const Hash128& key, Linked& l) {
  l.handles++;
  auto* k = new LoadedKernel{l.fn, l.symbol, l.trial};
  return std::shared_ptr<LoadedKernel>(k, [key](LoadedKernel* p) {
    delete p;
    std::lock_guard<std::mutex> g(g_link_mu);
    auto it = linked().find(key);
    if (it != linked().end() && --it->second.handles == 0) {
      if (!it->second.object) codegen().jit->unload(it->second.symbol);
      linked().erase(it);
    }
  });
}

// A handle to the kernel if it is linked already (another program holds it).
std::shared_ptr<LoadedKernel> find_linked(const Hash128& key) {
  std::lock_guard<std::mutex> g(g_link_mu);
  auto it = linked().find(key);
  return it == linked().end() ? nullptr : handle_locked(key, it->second);
}

// Links a freshly compiled object: the own loader, else LLVM's JIT (counted: the loader refuses
// what it does not understand, elf_loader.h).
std::shared_ptr<LoadedKernel> link(const Hash128& key, const std::string& object, const std::string& symbol) {
  std::lock_guard<std::mutex> g(g_link_mu);
  auto it = linked().find(key);
  if (it == linked().end()) {
    Linked l{nullptr, symbol, 0, nullptr, nullptr};
    std::string why;
    std::shared_ptr<LoadedObject> obj = load_elf_object(object, &why);
    if (obj && (l.fn = reinterpret_cast<KernelFn>(obj->function(symbol)))) {
      l.object = std::move(obj);
    } else {
      get_counter("KernelLinkedByLlvm")->add();
      l.fn = reinterpret_cast<KernelFn>(codegen().jit->load(object, symbol));
    }
    it = linked().emplace(key, l).first;
  }
  return handle_locked(key, it->second);
}

// Links an object read from the disk cache with the own loader only, or returns nullptr. Bytes
// from a file never reach LLVM's loader, which aborts or hangs on some damaged objects; an entry
// the loader refuses is a damaged one (a miss, recompiled and replaced).
//
// What is guaranteed for an entry: the disk cache's key (kernel structure, compile environment,
// format version) and its XXH3-64 checksum of the object, checked on every load, catch an entry
// from another build or CPU and any damage done after the write. The loader's checks catch, in
// bytes whose checksum was recomputed, any damage to the structure it reads (headers, section
// table, symbols, relocations): it never reads or writes outside the file and its own mapping,
// never loops longer than the file is long, and links only a function that lies in an
// executable section, against symbols in the object or allowed math functions. Nothing can prove
// the machine code itself undamaged: a flip inside .text (or a constant) under a recomputed
// checksum may make the kernel compute wrong values, fault or loop, and only the checksum stands
// in its way.
// `trial_marker` (or "" where the cache keeps no markers): where its first call marks itself.
std::shared_ptr<LoadedKernel> link_cached(const Hash128& key, const std::string& object,
                                          const std::string& symbol, const std::string& trial_marker) {
  std::lock_guard<std::mutex> g(g_link_mu);
  auto it = linked().find(key);
  if (it == linked().end()) {
    std::string why;
    std::shared_ptr<LoadedObject> obj = load_elf_object(object, &why);
    void* fn = obj ? obj->function(symbol) : nullptr;
    if (!fn) return nullptr;
    auto trial = trial_marker.empty() ? nullptr : std::make_shared<KernelTrial>(trial_marker);
    it = linked().emplace(key, Linked{reinterpret_cast<KernelFn>(fn), symbol, 0, std::move(obj), std::move(trial)}).first;
  }
  return handle_locked(key, it->second);
}

// Saves a failed kernel's IR for a bug report; returns where.
std::string save_ir(const std::string& name, const std::string& ir) {
  const char* tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/lazuli-failed-" + name + ".ll";
  std::ofstream f(path);
  f << ir;
  return f ? path : "(could not be saved)";
}

}  // namespace

void KernelTrial::begin() {
  std::lock_guard<std::mutex> l(mu_);
  if (written_ || done_.load(std::memory_order_relaxed)) return;
  written_ = true;
  int fd = ::open(marker_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return;  // no marker: a crash would go unnoticed, nothing worse
  std::string pid = std::to_string(::getpid()) + "\n";
  ssize_t w = ::write(fd, pid.data(), pid.size());
  (void)w;
  ::close(fd);
}

void KernelTrial::end() {
  std::lock_guard<std::mutex> l(mu_);
  if (written_) ::unlink(marker_.c_str());
  done_.store(true, std::memory_order_release);
}

std::vector<std::shared_ptr<LoadedKernel>> obtain_kernels(const std::vector<PlanKernel>& kernels) {
  std::vector<std::shared_ptr<LoadedKernel>> out(kernels.size());
  std::vector<Hash128> keys(kernels.size());
  std::vector<size_t> missing;
  for (size_t i = 0; i < kernels.size(); ++i) {
    keys[i] = kernel_key(kernels[i]);
    out[i] = memory_cache().get(keys[i]);
    if (!out[i]) out[i] = find_linked(keys[i]);
    if (!out[i]) missing.push_back(i);
  }
  if (missing.empty()) return out;
  std::vector<std::exception_ptr> errors(kernels.size());
  std::vector<std::function<void()>> tasks;
  // Ctrl-C stops the compile between kernels (compile_interrupt.h); polled on this thread only.
  CompileInterruptScope interrupt;
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> stop{false};
  Progress progress("kernels", missing.size());  // a long compile says so (core/progress.h)
  for (size_t i : missing) {
    tasks.push_back([&, i] {
      struct Stepped {  // how this kernel ended, for the progress report
        Progress& p;
        Progress::Outcome outcome = Progress::Outcome::NotDone;  // skipped, or failed
        ~Stepped() { p.step(outcome); }
      } stepped{progress};
      if (stop.load(std::memory_order_relaxed) ||
          (std::this_thread::get_id() == caller && interrupt.poll())) {
        stop.store(true, std::memory_order_relaxed);
        return;  // skipped: out[i] stays empty
      }
      const PlanKernel& k = kernels[i];
      try {
        // An object the loader refuses is a damaged entry: rejected, deleted, compiled below.
        DiskCache& disk = disk_cache();
        const std::string marker = disk.keeps_trials() ? disk.trial_path(keys[i]) : std::string();
        auto accept = [&](const std::string& obj) {
          return (out[i] = link_cached(keys[i], obj, k.name, marker)) != nullptr;
        };
        if (disk.load(keys[i], accept)) {
          stepped.outcome = Progress::Outcome::Cheap;
          return;
        }
        std::string ir;
        std::string obj;
        try {
          obj = codegen().jit->compile(k.spec, k.name, &ir);
        } catch (const std::exception& e) {
          throw Error("cpu backend: compiling kernel " + k.name + " failed: " + e.what() +
                      "; its LLVM IR is saved in " + save_ir(k.name, ir));
        }
        get_counter("KernelCompile")->add();
        out[i] = link(keys[i], obj, k.name);
        stepped.outcome = Progress::Outcome::Worked;
        disk.store(keys[i], obj);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  }
  runtime_pool().run_all(tasks);
  if (stop.load()) {
    for (size_t i : missing) {
      if (out[i] && !errors[i]) memory_cache().add(keys[i], out[i]);  // finished ones are whole
    }
    get_counter("CompileInterrupted")->add();
    throw CompileInterrupted("cpu backend: compile interrupted between kernels");
  }
  for (size_t i : missing) {
    if (errors[i]) std::rethrow_exception(errors[i]);
    memory_cache().add(keys[i], out[i]);
  }
  return out;
}

std::string kernel_llvm_ir(const PlanKernel& kernel) {
  std::string ir;
  codegen().jit->compile(kernel.spec, kernel.name, &ir);
  return ir;
}


void clear_kernel_memory_cache() { memory_cache().clear(); }

}  // namespace lz::cpu
