#include "core/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

namespace lz {

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

int Fd::close_checked() {
  if (fd_ < 0) return EBADF;
  int rc = ::close(fd_);
  fd_ = -1;
  return rc == 0 ? 0 : errno;
}

int write_all(int fd, const void* src, size_t n) {
  const auto* p = static_cast<const char*>(src);
  while (n > 0) {
    ssize_t w = ::write(fd, p, std::min<size_t>(n, size_t{1} << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (w == 0) return ENOSPC;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return 0;
}

int64_t read_at(int fd, void* dst, size_t n, int64_t offset) {
  auto* p = static_cast<char*>(dst);
  int64_t done = 0;
  while (n > 0) {
    ssize_t r = ::pread(fd, p, std::min<size_t>(n, size_t{1} << 30), static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (r == 0) break;
    p += r;
    n -= static_cast<size_t>(r);
    offset += r;
    done += r;
  }
  return done;
}

AtomicFile::AtomicFile(std::string path, std::string temp_prefix, mode_t mode)
    : path_(std::move(path)) {
  static std::atomic<uint64_t> counter{0};
  const std::string stem = temp_prefix + std::to_string(::getpid()) + "-";
  // A name left by a process that had our pid (or by a writer on another host sharing the
  // directory) is skipped, never reused.
  for (int attempt = 0; attempt < 100; ++attempt) {
    temp_ = stem + std::to_string(counter++);
    int fd = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd >= 0) {
      fd_.reset(fd);
      return;
    }
    if (errno != EEXIST) break;
  }
  fail("create", errno);
  temp_.clear();  // nothing was created
}

int AtomicFile::fail(const char* step, int err) {
  if (!err_) {
    err_ = err;
    step_ = step;
  }
  return err_;
}

AtomicFile::~AtomicFile() {
  if (!placed_ && !temp_.empty()) ::unlink(temp_.c_str());
}

int AtomicFile::write(const void* src, size_t n) {
  if (err_) return err_;
  if (int err = write_all(fd_.get(), src, n)) return fail("write", err);
  return 0;
}

int AtomicFile::commit(bool durable, Commit how) {
  if (!err_ && durable && ::fsync(fd_.get()) != 0) fail("fsync", errno);
  if (fd_.get() >= 0) {
    if (int err = fd_.close_checked()) fail("close", err);
  }
  if (err_) return err_;
  if (how == Commit::Replace) {
    if (::rename(temp_.c_str(), path_.c_str()) != 0) return fail("rename", errno);
    placed_ = true;
    return 0;
  }
  // link() never replaces: of two writers the first wins, and the temporary file goes either way.
  if (::link(temp_.c_str(), path_.c_str()) != 0) return fail("link", errno);
  return 0;
}

}  // namespace lz
