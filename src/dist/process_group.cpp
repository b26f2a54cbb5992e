#include "dist/process_group.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>

#include "core/hash.h"
#include "core/library_path.h"
#include "lazuli/error.h"

namespace lz::dist {

namespace {

std::mutex g_mu;  // guards g_world
std::shared_ptr<ProcessGroup> g_world;

void (*g_before_shutdown)() = nullptr;
void (*g_engine_shutdown)() = nullptr;  // the loaded plugin's (MPI_Finalize), run once at exit
std::weak_ptr<ProcessGroup> g_started;   // the group started last, for the terminate handler
std::terminate_handler g_previous_terminate = nullptr;

// At exit, in this order: queued programs finish, then the engine shuts down. Registered when
// the engine is loaded, so it runs before any exit handler registered earlier (such as the
// executor's drain, which registers at the first program).
void shutdown_at_exit() {
  if (g_before_shutdown) {
    try {
      g_before_shutdown();
    } catch (...) {
    }
  }
  if (g_engine_shutdown) g_engine_shutdown();
}

// A C++ exception nobody catches, in a process of a group: this rank ends, and with it every
// rank (they would wait for it in their next collective).
[[noreturn]] void terminate_group() {
  if (std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      std::fprintf(stderr, "lazuli.distributed: uncaught exception: %s\n", x.what());
    } catch (...) {
      std::fprintf(stderr, "lazuli.distributed: uncaught exception\n");
    }
  }
  if (std::shared_ptr<ProcessGroup> g = g_started.lock(); g && g->size() > 1) {
    std::fprintf(stderr, "lazuli.distributed: rank %d ends the job (MPI_Abort)\n", g->rank());
    g->abort(1);
  }
  if (g_previous_terminate) g_previous_terminate();
  std::abort();
}

std::shared_ptr<ProcessGroup> load_mpi() {
  std::string path = sibling_library_path("liblazuli_mpi.so");
  // RTLD_GLOBAL: Open MPI opens its own components with dlopen and they look for libmpi's
  // symbols in the global scope.
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    throw Error(std::string("init_process_group(backend=\"mpi\"): cannot load ") + dlerror() +
                ". It needs the system's Open MPI (Debian: apt-get install openmpi-bin "
                "libopenmpi-dev, which scripts/setup.sh installs) and a Lazuli built with it");
  }
  using Create = ProcessGroup* (*)(std::string*);
  const std::string entry = "lazuli_create_mpi_group_abi" + std::to_string(kProcessGroupAbi);
  auto create = reinterpret_cast<Create>(dlsym(h, entry.c_str()));
  std::string why;
  ProcessGroup* g = create ? create(&why) : nullptr;
  if (!g) {
    throw Error("init_process_group(backend=\"mpi\"): " +
                (create ? why : path + " has no " + entry + ": it was built for another version of Lazuli"));
  }
  std::shared_ptr<ProcessGroup> group(g);
  static std::once_flag once;
  std::call_once(once, [h] {
    g_engine_shutdown = reinterpret_cast<void (*)()>(dlsym(h, "lazuli_mpi_shutdown"));
    std::atexit(shutdown_at_exit);
    g_previous_terminate = std::set_terminate(terminate_group);
  });
  g_started = group;
  return group;
}

}  // namespace

void init_world(const std::string& engine) {
  std::lock_guard<std::mutex> l(g_mu);
  if (g_world) {
    throw Error("init_process_group: the default process group is already initialized (engine " +
                g_world->engine() + "); call destroy_process_group() first");
  }
  if (engine == "mpi") {
    g_world = load_mpi();
    return;
  }
  throw ValueError("init_process_group: unknown backend \"" + engine +
                   "\"; the native API runs collectives on \"mpi\" (PyTorch programs use "
                   "torch.distributed's own backends)");
}

std::shared_ptr<ProcessGroup> world() {
  std::lock_guard<std::mutex> l(g_mu);
  return g_world;
}

std::shared_ptr<ProcessGroup> require_world(const char* op) {
  std::shared_ptr<ProcessGroup> g = world();
  if (!g) {
    throw Error(std::string(op) + ": the default process group is not initialized; call "
                "lazuli.distributed.init_process_group(\"mpi\") first (and start the program "
                "with mpirun)");
  }
  return g;
}

void set_before_shutdown(void (*fn)()) { g_before_shutdown = fn; }

void destroy_world() {
  std::lock_guard<std::mutex> l(g_mu);
  g_world.reset();
}

void check_same_collectives(ProcessGroup& group, const std::string& summary, const std::string& site) {
  // A fixed-size record: the summary's hash, then as much of "summary (site)" as fits.
  constexpr size_t kRecord = 512;
  Hasher h;
  h.add_str(summary);
  const Hash128 digest = h.digest();
  std::string record(kRecord, '\0');
  std::memcpy(record.data(), &digest, sizeof digest);
  std::string text = summary + " (program cut at " + site + ")";
  text.resize(std::min(text.size(), kRecord - sizeof digest - 1));
  std::memcpy(record.data() + sizeof digest, text.data(), text.size());
  std::vector<std::string> all;
  try {
    all = group.exchange(record);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error("lazuli.distributed: checking that every rank runs the same collectives (" +
                summary + ", program cut at " + site + "): " + e.what());
  }
  bool same = true;
  for (const std::string& r : all) same &= r.compare(0, sizeof digest, record, 0, sizeof digest) == 0;
  if (same) return;
  std::string what = "lazuli.distributed: the ranks are about to run different collectives (every rank "
                     "must record the same collectives in the same order; this rank is " +
                     std::to_string(group.rank()) + "):";
  for (size_t r = 0; r < all.size(); ++r) {
    what += "\n  rank " + std::to_string(r) + ": " + std::string(all[r].c_str() + sizeof digest);
  }
  throw Error(what);
}

void set_world(std::shared_ptr<ProcessGroup> group) {
  std::lock_guard<std::mutex> l(g_mu);
  g_world = std::move(group);
}

}  // namespace lz::dist
