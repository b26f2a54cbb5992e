#include "dist/process_group.h"

#include <dlfcn.h>

#include <mutex>

#include "lazuli/error.h"

namespace lz::dist {

namespace {

std::mutex g_mu;  // guards g_world
std::shared_ptr<ProcessGroup> g_world;

// The plugin of engine `name` sits beside the object holding this function (liblazuli.so, or the
// Python package's copy), as the code generator does (backend/cpu/kernel_cache.cpp).
std::string plugin_path(const std::string& name) {
  Dl_info info{};
  std::string file = "liblazuli_" + name + ".so";
  if (dladdr(reinterpret_cast<void*>(&plugin_path), &info) && info.dli_fname) {
    std::string self = info.dli_fname;
    size_t slash = self.rfind('/');
    if (slash != std::string::npos) return self.substr(0, slash + 1) + file;
  }
  return file;
}

std::shared_ptr<ProcessGroup> load_mpi() {
  std::string path = plugin_path("mpi");
  // RTLD_GLOBAL: Open MPI opens its own components with dlopen and they look for libmpi's
  // symbols in the global scope.
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    throw Error(std::string("init_process_group(backend=\"mpi\"): cannot load ") + dlerror() +
                ". It needs the system's Open MPI (Debian: apt-get install openmpi-bin "
                "libopenmpi-dev, which scripts/setup.sh installs) and a Lazuli built with it");
  }
  using Create = ProcessGroup* (*)(std::string*);
  auto create = reinterpret_cast<Create>(dlsym(h, "lazuli_create_mpi_group"));
  std::string why;
  ProcessGroup* g = create ? create(&why) : nullptr;
  if (!g) {
    throw Error("init_process_group(backend=\"mpi\"): " + (create ? why : path + " has no entry point"));
  }
  return std::shared_ptr<ProcessGroup>(g);
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

void destroy_world() {
  std::lock_guard<std::mutex> l(g_mu);
  g_world.reset();
}

void set_world(std::shared_ptr<ProcessGroup> group) {
  std::lock_guard<std::mutex> l(g_mu);
  g_world = std::move(group);
}

}  // namespace lz::dist
