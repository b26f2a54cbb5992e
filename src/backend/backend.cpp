#include "backend/backend.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>

#include "core/config.h"
#include "lazuli_build_revision.h"  // generated: LAZULI_BUILD_REVISION
#include "lazuli/error.h"

namespace lz {
namespace interp {
std::unique_ptr<Backend> make_interp_backend(const std::string& name);
}
namespace cpu {
std::unique_ptr<Backend> make_cpu_backend();
}

#ifndef LAZULI_VERSION
#define LAZULI_VERSION "0"
#endif

const std::string& library_identity() {
  static const std::string id = std::string("lazuli-") + LAZULI_VERSION + "-" + LAZULI_BUILD_REVISION;
  return id;
}

StepTimes*& step_times() {
  thread_local StepTimes* sink = nullptr;
  return sink;
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

const Hash128& Backend::compile_env_hash() {
  std::call_once(env_once_, [this] {
    Hasher h;
    h.add_str(name());
    h.add(compile_env());
    h.add_str(library_identity());
    env_hash_ = h.digest();
  });
  return env_hash_;
}

void Backend::check_device(const Storage& s, const char* what) const {
  if (s.device() != device()) {
    throw ValueError(std::string(what) + ": the memory is on " + s.device().str() + ", but the " +
                     name() + " backend computes on " + device().str() +
                     " (copy it to the host first, e.g. torch's .cpu())");
  }
}

std::shared_ptr<Storage> Backend::upload(const void* src, size_t nbytes) {
  std::shared_ptr<Storage> st = allocate(nbytes);
  if (nbytes) std::memcpy(st->data(), src, nbytes);
  return st;
}

void Backend::download(const Storage& src, void* dst, size_t nbytes) {
  check_device(src, "download");
  if (nbytes > src.nbytes()) throw ValueError("download: " + std::to_string(nbytes) +
                                              " bytes asked of a " + std::to_string(src.nbytes()) +
                                              "-byte storage");
  if (nbytes) std::memcpy(dst, src.data(), nbytes);
}

void Backend::copy(const Storage& src, Storage& dst, size_t nbytes) {
  check_device(src, "copy");
  check_device(dst, "copy");
  if (nbytes > src.nbytes() || nbytes > dst.nbytes()) {
    throw ValueError("copy: " + std::to_string(nbytes) + " bytes between storages of " +
                     std::to_string(src.nbytes()) + " and " + std::to_string(dst.nbytes()));
  }
  if (nbytes) std::memmove(dst.data(), src.data(), nbytes);
  dst.contents_changed();
}

bool Backend::equal(const Storage& a, const Storage& b, size_t nbytes) {
  check_device(a, "equal");
  check_device(b, "equal");
  if (nbytes > a.nbytes() || nbytes > b.nbytes()) {
    throw ValueError("equal: " + std::to_string(nbytes) + " bytes of storages of " +
                     std::to_string(a.nbytes()) + " and " + std::to_string(b.nbytes()));
  }
  return nbytes == 0 || std::memcmp(a.data(), b.data(), nbytes) == 0;
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

namespace {
// Whether some copy's destination overlaps another copy's source: sources sorted by address with
// the two largest ends (of different copies) so far, so the check is O(n log n), not a pair scan
// (a sync of many repeated roots has many copies).
bool some_destination_overlaps_another_source(const std::vector<RootCopy>& copies) {
  struct Src {
    uintptr_t begin, end;
    size_t copy;
  };
  std::vector<Src> src;
  for (size_t i = 0; i < copies.size(); ++i) {
    if (copies[i].nbytes == 0) continue;
    auto b = reinterpret_cast<uintptr_t>(copies[i].src);
    src.push_back({b, b + copies[i].nbytes, i});
  }
  std::sort(src.begin(), src.end(), [](const Src& a, const Src& b) { return a.begin < b.begin; });
  // best[k]: the largest end among src[0..k] and its copy; second[k]: the largest of another copy.
  std::vector<std::pair<uintptr_t, size_t>> best(src.size()), second(src.size(), {0, SIZE_MAX});
  for (size_t k = 0; k < src.size(); ++k) {
    std::pair<uintptr_t, size_t> cur{src[k].end, src[k].copy};
    best[k] = k ? best[k - 1] : cur;
    second[k] = k ? second[k - 1] : std::pair<uintptr_t, size_t>{0, SIZE_MAX};
    if (k && cur.first > best[k].first) {
      second[k] = best[k];
      best[k] = cur;
    } else if (k && cur.first > second[k].first) {
      second[k] = cur;
    }
  }
  for (size_t i = 0; i < copies.size(); ++i) {
    if (copies[i].nbytes == 0 || copies[i].dst == copies[i].src) continue;
    auto d = reinterpret_cast<uintptr_t>(copies[i].dst);
    const uintptr_t d_end = d + copies[i].nbytes;
    // Sources starting before the destination ends; one of them overlaps if its end is past d.
    auto k = std::lower_bound(src.begin(), src.end(), d_end,
                              [](const Src& s, uintptr_t v) { return s.begin < v; }) - src.begin();
    if (k == 0) continue;
    const auto& top = best[k - 1].second == i ? second[k - 1] : best[k - 1];
    if (top.second != SIZE_MAX && top.first > d) return true;
  }
  return false;
}
}  // namespace

void run_root_copies(const std::vector<RootCopy>& copies) {
  const bool staged = some_destination_overlaps_another_source(copies);
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

const char* default_backend_name() {
  static const std::string name = Config{}.backend;  // config.h holds every default
  return name.c_str();
}

Backend& backend_named(const std::string& name) {
  static std::mutex mu;  // guards named
  static auto* named = new std::map<std::string, std::unique_ptr<Backend>>();  // never destroyed
  std::lock_guard<std::mutex> l(mu);
  auto it = named->find(name);
  if (it == named->end()) it = named->emplace(name, make_backend(name)).first;
  return *it->second;
}

}  // namespace lz
