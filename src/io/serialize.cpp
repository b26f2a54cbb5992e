// lz::save / lz::load (include/lazuli/serialize.h): safetensors files. The header is built and
// checked in safetensors_header.cpp; this file reads values, moves bytes and handles the files.
#include "lazuli/serialize.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <unordered_map>

#include "backend/backend.h"
#include "core/files.h"
#include "exec/graph_executor.h"
#include "io/safetensors_header.h"
#include "ops/frontend.h"
#include "tensor/lazy_tensor.h"

namespace lz {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swaps");

namespace {

// "save: 'ckpt.safetensors': " + what
std::string where(const char* fn, const std::string& path) {
  return std::string(fn) + ": '" + path + "': ";
}

std::string errno_text() { return std::strerror(errno); }

// Reads exactly n bytes at `offset`; throws naming the file when it ends early (it was truncated
// while being read) or the read fails.
void read_exact(int fd, uint64_t offset, void* dst, size_t n, const std::string& path) {
  int64_t got = read_at(fd, dst, n, static_cast<int64_t>(offset));
  if (got < 0) throw Error(where("load", path) + "read failed: " + errno_text());
  if (static_cast<uint64_t>(got) < n)
    throw ValueError(where("load", path) + "the file ended early (changed while being read?)");
}

// Writes to the file being saved; throws naming the destination on a failure.
void write_or_throw(AtomicFile& file, const void* src, size_t n, const std::string& path) {
  if (int err = file.write(src, n))
    throw Error(where("save", path) + "write failed: " + std::strerror(err));
}

// The values of `tensors`, read together: the pending ones are computed by one program (a value
// read, so no buffer is donated), then every buffer is waited for. Tensors already holding data
// run nothing.
std::vector<BufferPtr> read_values(const std::vector<Tensor>& tensors) {
  std::vector<internal::TensorImplPtr> pending;
  for (const Tensor& t : tensors) {
    const auto& impl = t.impl();
    if (!impl->buffer() && impl->state() != internal::TensorState::Host) pending.push_back(impl);
  }
  std::unordered_map<const internal::TensorImpl*, BufferPtr> computed;
  if (!pending.empty()) {
    SyncConfig cfg;
    cfg.sync_data = true;
    cfg.barrier = false;
    cfg.reason = CutReason::ValueRead;
    SyncResult r = sync_tensors_graph(pending, cfg);
    for (size_t i = 0; i < r.tensors.size(); ++i) computed[r.tensors[i].get()] = r.outputs[i];
  }
  std::vector<BufferPtr> out;
  out.reserve(tensors.size());
  for (const Tensor& t : tensors) {
    auto it = computed.find(t.impl().get());
    out.push_back(it != computed.end() ? it->second
                                       : frontend::schedule_read(t, CutReason::ValueRead));
  }
  for (const BufferPtr& b : out) frontend::finish_read(b);
  return out;
}

std::shared_ptr<Storage> read_tensor_bytes(int fd, uint64_t offset, const io::TensorEntry& e,
                                           const std::string& path) {
  size_t nbytes = static_cast<size_t>(e.end - e.begin);
  Backend& be = active_backend();
  std::shared_ptr<Storage> st;
  std::vector<uint8_t> staging;
  void* dst = nullptr;
  try {
    if (be.device() == DeviceId::host()) {
      st = be.allocate(nbytes);  // the file's bytes land in the tensor's own memory
      dst = st->data();
    } else {
      staging.resize(nbytes);
      dst = staging.data();
    }
  } catch (const OutOfMemoryError& ex) {
    throw OutOfMemoryError(where("load", path) + "tensor \"" + e.name + "\": " + ex.what());
  }
  read_exact(fd, offset + e.begin, dst, nbytes, path);
  if (e.dtype == DType::Bool) {  // kernels treat bool as a byte holding 0 or 1
    frontend::bools_as_0_1(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(dst), nbytes);
  }
  if (!st) st = be.upload(staging.data(), nbytes);
  return st;
}

// Opens `path` and reads its header (length-checked before anything is allocated for it).
struct OpenedFile {
  std::unique_ptr<Fd> fd;
  uint64_t data_offset = 0;
  io::Header header;
};

OpenedFile open_and_parse(const std::string& path) {
  OpenedFile f;
  f.fd = std::make_unique<Fd>(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (f.fd->get() < 0) throw Error(where("load", path) + "cannot open: " + errno_text());
  struct stat st {};
  if (::fstat(f.fd->get(), &st) != 0)
    throw Error(where("load", path) + "cannot stat: " + errno_text());
  if (S_ISDIR(st.st_mode)) throw Error(where("load", path) + "is a directory");
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < 8) {
    throw ValueError(where("load", path) + "the file has " + std::to_string(size) +
                     " bytes, too short for the 8-byte header length (not a safetensors file?)");
  }
  uint8_t len_bytes[8];
  read_exact(f.fd->get(), 0, len_bytes, 8, path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
  if (n > io::kMaxHeaderBytes) {
    throw ValueError(where("load", path) + "the header length " + std::to_string(n) +
                     " is beyond the limit of " + std::to_string(io::kMaxHeaderBytes) +
                     " bytes (not a safetensors file?)");
  }
  if (n > size - 8) {
    throw ValueError(where("load", path) + "the header length " + std::to_string(n) +
                     " runs past the end of the file (" + std::to_string(size) +
                     " bytes): truncated or not a safetensors file");
  }
  std::string text(static_cast<size_t>(n), '\0');
  read_exact(f.fd->get(), 8, text.data(), text.size(), path);
  try {
    f.header = io::parse_header(text, size - 8 - n);
  } catch (const ValueError& e) {
    throw ValueError(where("load", path) + e.what());
  }
  f.data_offset = 8 + n;
  return f;
}

}  // namespace

const Tensor& LoadedTensors::at(const std::string& name) const {
  for (const auto& [n, t] : tensors) {
    if (n == name) return t;
  }
  std::string names;
  for (size_t i = 0; i < tensors.size() && i < 20; ++i) {
    names += (i ? ", " : "") + tensors[i].first;
  }
  if (tensors.size() > 20) names += ", ...";
  throw IndexError("LoadedTensors::at: no tensor named '" + name + "' (the file has: " + names +
                   ")");
}

void save(const NamedTensors& tensors, const std::string& path,
          const std::map<std::string, std::string>& metadata) {
  std::vector<io::TensorEntry> entries;
  std::vector<Tensor> values;
  for (const auto& [name, t] : tensors) {
    if (!t.defined())
      throw ValueError(where("save", path) + "tensor \"" + name + "\" is undefined");
    entries.push_back({name, t.dtype(), t.shape(), 0, 0});
    values.push_back(t);
  }
  std::string header;
  try {
    header = io::build_header(entries, metadata);  // checks the names before anything runs
  } catch (const ValueError& e) {
    throw ValueError(where("save", path) + e.what());
  }
  std::vector<BufferPtr> buffers = read_values(values);

  AtomicFile file(path, path + ".tmp-", 0666);
  if (file.error()) {
    throw Error(where("save", path) + "cannot create '" + path +
                ".tmp-*' beside it: " + std::strerror(file.error()));
  }
  uint8_t len_bytes[8];
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<uint8_t>(header.size() >> (8 * i));
  write_or_throw(file, len_bytes, 8, path);
  write_or_throw(file, header.data(), header.size(), path);
  // Data in layout order (build_header assigned the ranges).
  std::vector<size_t> order(entries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return entries[a].begin < entries[b].begin; });
  std::vector<uint8_t> staging;
  for (size_t i : order) {
    const io::TensorEntry& e = entries[i];
    size_t nbytes = static_cast<size_t>(e.end - e.begin);
    if (nbytes == 0) continue;
    const std::shared_ptr<Storage>& st = buffers[i]->wait();
    if (st->nbytes() < nbytes) {
      throw Error("internal: save: tensor \"" + e.name + "\" read " + std::to_string(st->nbytes()) +
                  " bytes, expected " + std::to_string(nbytes));
    }
    if (st->device() == DeviceId::host()) {
      write_or_throw(file, st->data(), nbytes, path);
    } else {
      staging.resize(nbytes);
      active_backend().download(*st, staging.data(), nbytes);
      write_or_throw(file, staging.data(), nbytes, path);
    }
  }
  // Durable before it replaces the old file: a crash leaves the old file or the new one, whole.
  if (int err = file.commit(/*durable=*/true)) {
    throw Error(where("save", path) + file.failed_step() +
                " of the written file failed: " + std::strerror(err));
  }
}

LoadedTensors load(const std::string& path) {
  OpenedFile f = open_and_parse(path);
  LoadedTensors out;
  out.metadata = std::move(f.header.metadata);
  out.tensors.reserve(f.header.entries.size());
  for (const io::TensorEntry& e : f.header.entries) {
    std::shared_ptr<Storage> st = read_tensor_bytes(f.fd->get(), f.data_offset, e, path);
    out.tensors.emplace_back(
        e.name, Tensor(internal::TensorImpl::from_host(e.dtype, e.shape, std::move(st))));
  }
  return out;
}

std::map<std::string, std::string> load_metadata(const std::string& path) {
  return open_and_parse(path).header.metadata;
}

}  // namespace lz
