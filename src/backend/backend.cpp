#include "backend/backend.h"

#include "backend/interp/kernels.h"

#include <mutex>

#include "core/config.h"
#include "lazuli/error.h"

namespace lz {
namespace interp {
std::unique_ptr<Backend> make_interp_backend(const std::string& name, LibraryCall library,
                                             const std::string& library_id);
}
namespace cpu {
std::unique_ptr<Backend> make_cpu_backend();
}

#ifndef LAZULI_BUILD_REVISION
#define LAZULI_BUILD_REVISION "unknown"
#endif
#ifndef LAZULI_VERSION
#define LAZULI_VERSION "0"
#endif

const Hash128& Backend::env_hash() {
  std::call_once(env_once_, [this] {
    Hasher h;
    h.add_str(name());
    h.add(compile_env());
    h.add_str(LAZULI_VERSION);
    h.add_str(LAZULI_BUILD_REVISION);
    env_hash_ = h.digest();
  });
  return env_hash_;
}

namespace {
std::mutex g_backend_mu;  // guards g_backend creation and replacement
std::unique_ptr<Backend> g_backend;

std::unique_ptr<Backend> make_backend(const std::string& name) {
  // interp: the reference kernels, the ground truth. cpu: fused kernels compiled by LLVM, matrix
  // products through oneDNN (backend/cpu/).
  if (name == "interp") return interp::make_interp_backend(name, nullptr, "");
  if (name == "cpu") return cpu::make_cpu_backend();
  throw ValueError("unknown backend '" + name + "' (use cpu or interp)");
}
}  // namespace

Backend& active_backend() {
  std::lock_guard<std::mutex> l(g_backend_mu);
  if (!g_backend) g_backend = make_backend(config().backend);
  return *g_backend;
}

void set_active_backend(const std::string& name) {
  std::lock_guard<std::mutex> l(g_backend_mu);
  g_backend = make_backend(name);
}

}  // namespace lz
