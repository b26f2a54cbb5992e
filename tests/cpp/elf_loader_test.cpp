// Kernels are linked by elf_loader (no LLVM needed to run a cached kernel); LLVM's JIT only links
// what the loader refuses, and the loader refuses anything it does not understand.
#include <elf.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#define XXH_INLINE_ALL  // the test computes entry checksums without linking libxxhash
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "backend/backend.h"
#include "backend/cpu/cpu_target.h"
#include "backend/cpu/elf_loader.h"
#include "backend/cpu/kernel_cache.h"
#include "backend/disk_cache.h"
#include "core/config.h"
#include "exec/graph_executor.h"
#include "lazuli/lazuli.h"
#include "lower/plan.h"

namespace {

TEST(ElfLoader, RefusesBytesThatAreNotAnObjectWithAReason) {
  std::string error;
  EXPECT_EQ(lz::cpu::load_elf_object("", &error), nullptr);
  EXPECT_FALSE(error.empty());
  error.clear();
  EXPECT_EQ(lz::cpu::load_elf_object(std::string(4096, '\x7f'), &error), nullptr);
  EXPECT_NE(error.find("ELF"), std::string::npos) << error;
}

TEST(ElfLoader, RefusesATruncatedObject) {
  std::string header =
      "\x7f"
      "ELF";
  header.resize(64, '\0');
  header[4] = 2;  // 64-bit
  header[5] = 1;  // little endian
  std::string error;
  EXPECT_EQ(lz::cpu::load_elf_object(header, &error), nullptr);
  EXPECT_FALSE(error.empty());
}

TEST(ElfLoader, EveryGeneratedKernelLinksWithoutLlvm) {
  lz::wait();
  lz::set_active_backend("cpu");
  const int64_t before = lz::debug::counter_value("KernelLinkedByLlvm");
  lz::Tensor x = lz::tensor<float>({1, -2, 3, -4, 5, -6}, {2, 3});
  // Transcendentals (libm and libmvec symbols), a reduction, a where, casts: every relocation
  // kind the code generator emits.
  lz::Tensor y = lz::where(x > 0, lz::exp(x) + lz::tanh(x), lz::erf(x)).sum({1});
  lz::Tensor z = (x.to(lz::kInt64) * 3).amax({0}).to(lz::kFloat64);
  std::vector<double> vy = y.to_vector<double>();
  std::vector<double> vz = z.to_vector<double>();
  EXPECT_NEAR(vy[0],
              std::exp(1.f) + std::tanh(1.f) + std::erf(-2.f) + std::exp(3.f) + std::tanh(3.f),
              1e-4);
  EXPECT_EQ(vz, (std::vector<double>{3, 15, 9}));
  EXPECT_EQ(lz::debug::counter_value("KernelLinkedByLlvm"), before);
  lz::wait();
  lz::set_active_backend(lz::config().backend);
}

// ---- damaged objects under a valid checksum
// ------------------------------------------------------
//
// The disk cache's checksum catches damage done to an entry after it was written; these tests give
// the loader objects whose damage a checksum cannot see (it was recomputed). A structural flip
// must give a refusal or a kernel that computes exactly what the undamaged one does, never a
// crash or a hang; the one exception (call_swaps) computes other values. Flips inside .text and the
// constants are not sampled: nothing but the checksum can tell damaged machine code from good
// (kernel_cache.cpp, link_cached).

namespace fs = std::filesystem;

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A private temporary cache directory for the kernel cache, restored on destruction.
class ScopedCacheDir {
 public:
  ScopedCacheDir() {
    char tmpl[] = "/tmp/lazuli-elf-loader-test.XXXXXX";
    root_ = ::mkdtemp(tmpl) ? tmpl : "";
    saved_ = lz::config().cache_dir;
    lz::mutable_config().cache_dir = root_;
  }
  ~ScopedCacheDir() {
    lz::mutable_config().cache_dir = saved_;
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(root_ + "/kernels", ec)) {
      if (e.path().extension() == ".lzk") out.push_back(e.path().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::string root_, saved_;
};

// An entry whose payload is `object`, with its checksum recomputed.
std::string entry_with_payload(const std::string& entry, const std::string& object) {
  std::string out = entry.substr(0, lz::DiskCache::kHeaderSize) + object;
  const uint64_t sum = XXH3_64bits(object.data(), object.size());
  std::memcpy(out.data() + 40, &sum, sizeof(sum));
  return out;
}

// A graph whose one kernel calls libm and libmvec and reads constants: every relocation kind.
lz::Tensor fuzz_graph(float offset) {
  std::vector<float> v(4 * 37);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = -2.0f + 4.0f * static_cast<float>(i) / v.size() + offset;
  lz::Tensor x = lz::tensor<float>(v, {4, 37});
  return lz::where(x > 0.25f, lz::exp(x) * lz::tanh(x), lz::erf(x) - 0.5f) * 1.75f;
}

// The one kernel step of a graph's plan, with buffers for its inputs (filled) and its output.
struct KernelCall {
  lz::lower::PlanKernel kernel;
  lz::lower::PlanStep step;
  std::vector<std::vector<char>> inputs;
  size_t out_bytes = 0;

  std::vector<char> run(lz::cpu::KernelFn fn) const {
    std::vector<char> out(out_bytes, '\x5a');
    std::vector<void*> ptrs;
    for (const auto& in : inputs)
      ptrs.push_back(in.empty() ? nullptr : const_cast<char*>(in.data()));
    ptrs.push_back(out.data());
    fn(0, step.range, ptrs.data(), step.args.data());
    return out;
  }
};

KernelCall plan_one_kernel(const lz::Tensor& t) {
  lz::Roots roots = lz::collect({t.impl()}, /*include_views=*/false);
  lz::PostOrder po = lz::post_order(roots.values);
  lz::lower::Plan plan = lz::lower::build_plan(lz::lowering_graph(roots, po),
                                               lz::cpu::cpu_target(), /*explain=*/false);
  KernelCall call;
  EXPECT_EQ(plan.kernels.size(), 1u);
  EXPECT_EQ(plan.steps.size(), 1u);
  if (plan.kernels.size() != 1 || plan.steps.size() != 1) return call;
  call.kernel = plan.kernels[0];
  call.step = plan.steps[0];
  for (int v : call.step.inputs) {
    call.inputs.emplace_back(v < 0 ? 0 : static_cast<size_t>(plan.values[v].nbytes));
    auto& in = call.inputs.back();
    for (size_t i = 0; i + 4 <= in.size(); i += 4) {
      const float f = -2.0f + 0.037f * static_cast<float>(i / 4 % 109);
      std::memcpy(in.data() + i, &f, 4);
    }
  }
  call.out_bytes = static_cast<size_t>(plan.values[call.step.output].nbytes);
  return call;
}

// The bit positions to flip: every bit of the ELF header, the section table and the sections
// the loader interprets (symbols, their names, relocations).
std::vector<uint64_t> structural_bits(const std::string& obj) {
  std::vector<uint64_t> bits;
  auto all_bits = [&](uint64_t off, uint64_t size) {
    for (uint64_t b = off * 8; b < (off + size) * 8 && b < obj.size() * 8; ++b) bits.push_back(b);
  };
  Elf64_Ehdr eh;
  std::memcpy(&eh, obj.data(), sizeof(eh));
  all_bits(0, sizeof(eh));
  all_bits(eh.e_shoff, uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr));
  for (unsigned i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, obj.data() + eh.e_shoff + i * sizeof(sh), sizeof(sh));
    if (sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_STRTAB || sh.sh_type == SHT_RELA) {
      all_bits(sh.sh_offset, sh.sh_size);
    }
  }
  return bits;
}

// The object's section headers.
std::vector<Elf64_Shdr> section_headers(const std::string& obj) {
  Elf64_Ehdr eh;
  std::memcpy(&eh, obj.data(), sizeof(eh));
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  std::memcpy(sh.data(), obj.data() + eh.e_shoff, sh.size() * sizeof(Elf64_Shdr));
  return sh;
}

// Whether section `index` holds data the kernel only reads (.rodata's constant pools).
bool constants_section(const std::vector<Elf64_Shdr>& sh, uint64_t index) {
  return index > 0 && index < sh.size() && sh[index].sh_type == SHT_PROGBITS &&
         (sh[index].sh_flags & SHF_ALLOC) && !(sh[index].sh_flags & (SHF_EXECINSTR | SHF_WRITE));
}

// The bits that turn a relocation against one symbol the kernel uses into a relocation against
// another one it uses (every symbol still used): a valid object that calls, say, the vector tanhf
// where the scalar one was called, or reads a function's first bytes where its constants were. No
// check of the object can see this; the kernel computes other values, and only the checksum
// guards against it.
std::vector<bool> call_swaps(const std::string& obj, const std::vector<uint64_t>& bits) {
  const std::vector<Elf64_Shdr> sh = section_headers(obj);
  std::vector<bool> swap(bits.size(), false);
  for (const Elf64_Shdr& r : sh) {
    if (r.sh_type != SHT_RELA) continue;
    const Elf64_Shdr& symtab = sh[r.sh_link];
    // An external function, or a section of constants (its section symbol).
    auto used = [&](uint64_t k) {
      if (k == 0 || k >= symtab.sh_size / sizeof(Elf64_Sym)) return false;
      Elf64_Sym sym;
      std::memcpy(&sym, obj.data() + symtab.sh_offset + k * sizeof(sym), sizeof(sym));
      return sym.st_shndx == SHN_UNDEF ||
             (ELF64_ST_TYPE(sym.st_info) == STT_SECTION && constants_section(sh, sym.st_shndx));
    };
    for (size_t i = 0; i < bits.size(); ++i) {
      const uint64_t byte = bits[i] / 8;
      if (byte < r.sh_offset || byte >= r.sh_offset + r.sh_size) continue;
      const uint64_t entry =
          r.sh_offset + (byte - r.sh_offset) / sizeof(Elf64_Rela) * sizeof(Elf64_Rela);
      const uint64_t field = entry + offsetof(Elf64_Rela, r_info) + 4;  // the symbol index
      if (byte < field || byte >= field + 4) continue;
      uint32_t index;
      std::memcpy(&index, obj.data() + field, 4);
      swap[i] = used(index) && used(index ^ (1u << (bits[i] - field * 8)));
    }
  }
  return swap;
}

// The bits that move a reference to a constant onto another constant of the same section: a
// relocation's addend, or a local symbol's value, still inside a section of data the kernel only
// reads (.rodata's constant pools). The object stays valid and reads another constant (a damaged
// constant, which the checksum alone guards against, as for the constants themselves).
std::vector<bool> constant_moves(const std::string& obj, const std::vector<uint64_t>& bits) {
  const std::vector<Elf64_Shdr> sh = section_headers(obj);
  auto is_constants = [&](uint64_t index) { return constants_section(sh, index); };
  auto flipped = [&](uint64_t field, uint64_t bit) {  // the 8-byte field with `bit` flipped
    uint64_t v;
    std::memcpy(&v, obj.data() + field, 8);
    return v ^ (uint64_t{1} << (bit - field * 8));
  };
  std::vector<bool> moves(bits.size(), false);
  for (const Elf64_Shdr& r : sh) {
    if (r.sh_type != SHT_RELA && r.sh_type != SHT_SYMTAB) continue;
    const size_t entry_size = r.sh_type == SHT_RELA ? sizeof(Elf64_Rela) : sizeof(Elf64_Sym);
    for (size_t i = 0; i < bits.size(); ++i) {
      const uint64_t byte = bits[i] / 8;
      if (byte < r.sh_offset || byte >= r.sh_offset + r.sh_size) continue;
      const uint64_t entry = r.sh_offset + (byte - r.sh_offset) / entry_size * entry_size;
      if (r.sh_type == SHT_SYMTAB) {
        const uint64_t field = entry + offsetof(Elf64_Sym, st_value);
        if (byte < field || byte >= field + 8) continue;
        Elf64_Sym sym;
        std::memcpy(&sym, obj.data() + entry, sizeof(sym));
        moves[i] = is_constants(sym.st_shndx) && flipped(field, bits[i]) < sh[sym.st_shndx].sh_size;
        continue;
      }
      const uint64_t field = entry + offsetof(Elf64_Rela, r_addend);
      if (byte < field || byte >= field + 8) continue;
      Elf64_Rela rela;
      std::memcpy(&rela, obj.data() + entry, sizeof(rela));
      const Elf64_Shdr& symtab = sh[r.sh_link];
      const uint64_t k = ELF64_R_SYM(rela.r_info);
      if (k == 0 || k >= symtab.sh_size / sizeof(Elf64_Sym)) continue;
      Elf64_Sym sym;
      std::memcpy(&sym, obj.data() + symtab.sh_offset + k * sizeof(sym), sizeof(sym));
      // A PC-relative reference reads at symbol + addend + 4 (its addend is -4 for a plain
      // load); an absolute one (the large code model's R_X86_64_64) at symbol + addend.
      const uint32_t type = ELF64_R_TYPE(rela.r_info);
      const int64_t pc = type == R_X86_64_PC32 || type == R_X86_64_PLT32 ? 4 : 0;
      const int64_t target =
          static_cast<int64_t>(sym.st_value) + static_cast<int64_t>(flipped(field, bits[i])) + pc;
      moves[i] = is_constants(sym.st_shndx) && target >= 0 &&
                 static_cast<uint64_t>(target) < sh[sym.st_shndx].sh_size;
    }
  }
  return moves;
}

// Outcome of one flip, as the child reports it.
enum : char { kRefused = 'R', kSame = 'S', kWrong = 'W' };

// Loads each flipped object in a child process, one after another, and runs what loads; a crash
// or a hang (no report within `stall_seconds`) is recorded against its flip and a new child goes
// on with the next. Returns one outcome per flip: R, S, W, or 'X' (crashed) / 'H' (hung).
std::string outcomes_in_children(const std::string& obj, const std::vector<uint64_t>& bits,
                                 const KernelCall& call, const std::vector<char>& expected,
                                 int stall_seconds) {
  std::string out;
  while (out.size() < bits.size()) {
    int fds[2];
    if (::pipe(fds) != 0) return out + std::string(bits.size() - out.size(), '?');
    const size_t first = out.size();
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      for (size_t i = first; i < bits.size(); ++i) {
        std::string damaged = obj;
        damaged[bits[i] / 8] ^= static_cast<char>(1u << (bits[i] % 8));
        std::string why;
        auto loaded = lz::cpu::load_elf_object(damaged, &why);
        void* fn = loaded ? loaded->function(call.kernel.name) : nullptr;
        char r = kRefused;
        if (fn) r = call.run(reinterpret_cast<lz::cpu::KernelFn>(fn)) == expected ? kSame : kWrong;
        if (::write(fds[1], &r, 1) != 1) ::_exit(2);
      }
      ::_exit(0);
    }
    ::close(fds[1]);
    for (;;) {
      pollfd p{fds[0], POLLIN, 0};
      char buf[4096];
      const int ready = ::poll(&p, 1, stall_seconds * 1000);
      ssize_t n = ready > 0 ? ::read(fds[0], buf, sizeof(buf)) : -1;
      if (n > 0) {
        out.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (ready == 0) ::kill(pid, SIGKILL);
      int status = 0;
      ::waitpid(pid, &status, 0);
      if (out.size() < bits.size() && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        out.push_back(ready == 0 ? 'H' : 'X');
      }
      break;
    }
    ::close(fds[0]);
  }
  return out;
}

TEST(ElfLoader, StructuralBitFlipsAreRefusedOrChangeNothing) {
  lz::wait();
  lz::set_active_backend("cpu");
  ScopedCacheDir dir;
  lz::cpu::clear_kernel_memory_cache();
  KernelCall call = plan_one_kernel(fuzz_graph(0.125f));
  ASSERT_FALSE(call.kernel.name.empty());
  std::vector<std::shared_ptr<lz::cpu::LoadedKernel>> k = lz::cpu::obtain_kernels({call.kernel});
  const std::vector<std::string> entries = dir.entries();
  ASSERT_EQ(entries.size(), 1u) << "the kernel was not compiled into the fresh cache";
  const std::string obj = read_bytes(entries[0]).substr(lz::DiskCache::kHeaderSize);
  std::string why;
  auto good = lz::cpu::load_elf_object(obj, &why);  // also loads libmvec before the children fork
  ASSERT_NE(good, nullptr) << why;
  const std::vector<char> expected =
      call.run(reinterpret_cast<lz::cpu::KernelFn>(good->function(call.kernel.name)));
  ASSERT_EQ(expected, call.run(k[0]->fn));

  const std::vector<uint64_t> bits = structural_bits(obj);
  ASSERT_GT(bits.size(), 4000u);
  const std::string outcomes = outcomes_in_children(obj, bits, call, expected, 30);
  const std::vector<bool> swaps = call_swaps(obj, bits);
  const std::vector<bool> moves = constant_moves(obj, bits);
  std::string failures;
  int refused = 0, same = 0, swapped = 0, moved = 0;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    refused += outcomes[i] == kRefused;
    same += outcomes[i] == kSame;
    if (outcomes[i] == kWrong && swaps[i]) {
      ++swapped;
      continue;
    }
    if (outcomes[i] == kWrong && moves[i]) {
      ++moved;
      continue;
    }
    if (outcomes[i] != kRefused && outcomes[i] != kSame && failures.size() < 2000) {
      failures += " bit " + std::to_string(bits[i]) + " (byte " + std::to_string(bits[i] / 8) +
                  "): " +
                  (outcomes[i] == kWrong ? "wrong values"
                   : outcomes[i] == 'H'  ? "hang"
                                         : "crash") +
                  ";";
    }
  }
  EXPECT_EQ(outcomes.size(), bits.size());
  EXPECT_EQ(failures, "") << refused << " refused, " << same << " unchanged, of " << bits.size();
  std::printf(
      "%zu structural bit flips: %d refused, %d harmless, %d swap one used symbol for another, %d "
      "read another constant\n",
      bits.size(), refused, same, swapped, moved);
  lz::wait();
  lz::set_active_backend(lz::config().backend);
}

// Drops every compiled program and kernel handle, so the next run asks the disk cache again.
void forget_compiled_kernels() {
  lz::wait();
  lz::clear_compile_cache();
  lz::cpu::clear_kernel_memory_cache();
  lz::debug::clear_counters();
}

TEST(ElfLoader, DiskEntryTheLoaderRefusesIsRecompiledAndReplacedNeverLinkedByLlvm) {
  lz::wait();
  lz::set_active_backend("cpu");
  ScopedCacheDir dir;
  forget_compiled_kernels();
  const std::vector<float> first = fuzz_graph(0.5f).to_vector<float>();
  const std::vector<std::string> entries = dir.entries();
  ASSERT_FALSE(entries.empty());
  std::vector<std::string> good;
  for (const std::string& e : entries) {
    good.push_back(read_bytes(e));
    std::string obj = good.back().substr(lz::DiskCache::kHeaderSize);
    obj[18] ^= 0x01;  // e_machine: no longer x86-64, which LLVM's loader used to be handed
    write_bytes(e, entry_with_payload(good.back(), obj));
  }
  forget_compiled_kernels();
  EXPECT_EQ(fuzz_graph(0.5f).to_vector<float>(), first);
  const int64_t n = static_cast<int64_t>(entries.size());
  EXPECT_EQ(lz::debug::counter_value("PersistentCacheRejected"), n);
  EXPECT_EQ(lz::debug::counter_value("PersistentCacheHit"), 0);
  EXPECT_EQ(lz::debug::counter_value("KernelCompile"), n);
  EXPECT_EQ(lz::debug::counter_value("KernelLinkedByLlvm"), 0);
  forget_compiled_kernels();  // the entries were replaced: the next process loads them
  EXPECT_EQ(fuzz_graph(0.5f).to_vector<float>(), first);
  EXPECT_EQ(lz::debug::counter_value("PersistentCacheHit"), n);
  EXPECT_EQ(lz::debug::counter_value("KernelCompile"), 0);
  EXPECT_EQ(lz::debug::counter_value("PersistentCacheRejected"), 0);
  lz::wait();
  lz::set_active_backend(lz::config().backend);
}

}  // namespace
