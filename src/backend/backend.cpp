#include "backend/backend.h"

#include <cstring>
#include <mutex>

#include "core/config.h"
#include "lazuli/error.h"

namespace lz {
namespace interp {
std::unique_ptr<Backend> make_interp_backend(const std::string& name);
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

const std::string& library_identity() {
  static const std::string id = std::string("lazuli-") + LAZULI_VERSION + "-" + LAZULI_BUILD_REVISION;
  return id;
}

std::string error_text(const std::exception_ptr& e) {
  try {
    if (e) std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
  }
  return "unknown error";
}

PartialRunFailure::PartialRunFailure(std::vector<bool> failed, std::exception_ptr e, int node)
    : root_failed(std::move(failed)), error(std::move(e)), failed_node(node), what_(error_text(error)) {}

const Hash128& Backend::env_hash() {
  std::call_once(env_once_, [this] {
    Hasher h;
    h.add_str(name());
    h.add(compile_env());
    h.add_str(library_identity());
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
  if (name == "interp") return interp::make_interp_backend(name);
  if (name == "cpu") return cpu::make_cpu_backend();
  throw ValueError("unknown backend '" + name + "' (use cpu or interp)");
}
}  // namespace

void run_root_copies(const std::vector<RootCopy>& copies) {
  auto overlap = [](const void* a, size_t na, const void* b, size_t nb) {
    auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
    return pa < pb + nb && pb < pa + na;
  };
  bool staged = false;
  for (size_t i = 0; i < copies.size() && !staged; ++i) {
    for (size_t j = 0; j < copies.size() && !staged; ++j) {
      staged = i != j && overlap(copies[i].dst, copies[i].nbytes, copies[j].src, copies[j].nbytes);
    }
  }
  if (!staged) {
    for (const RootCopy& c : copies) {
      if (c.nbytes && c.dst != c.src) std::memmove(c.dst, c.src, c.nbytes);
    }
    return;
  }
  std::vector<std::unique_ptr<char[]>> tmp;
  for (const RootCopy& c : copies) {
    tmp.emplace_back(new char[c.nbytes]);
    std::memcpy(tmp.back().get(), c.src, c.nbytes);
  }
  for (size_t i = 0; i < copies.size(); ++i) std::memcpy(copies[i].dst, tmp[i].get(), copies[i].nbytes);
}

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
