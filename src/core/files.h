// Files, written once for every writer in the library: checkpoints (io/serialize.cpp) and the
// persistent kernel cache (backend/disk_cache.cpp).
//
// AtomicFile writes a file so that a reader sees the old file or the new one whole, never a
// part: the bytes go to a temporary file beside the destination (same directory, so the same
// filesystem), which is then renamed over it, or linked to it where a file already there must win.
// Failures are returned, not thrown (0 or the errno; AtomicFile also names the step that failed),
// and the caller words the error in its own terms (a checkpoint raises, the kernel cache warns
// once and goes on). Only allocation can throw.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace lz {

// An open file descriptor, closed when it goes.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd();
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Closes the one held (if any) and holds `fd`.
  void reset(int fd);
  // Closes now: 0, or the errno close() gave (a deferred write error on some filesystems).
  int close_checked();

 private:
  int fd_;
};

// Writes all n bytes: 0, or the errno of the failure; a write that makes no progress counts as a
// full disk (ENOSPC). Retries interrupted writes.
int write_all(int fd, const void* src, size_t n);

// Reads up to n bytes at `offset`, stopping early only at the end of the file: the count read
// (less than n: the file is shorter), or -1 with errno set. Retries interrupted reads.
int64_t read_at(int fd, void* dst, size_t n, int64_t offset);

// A file being written beside `path`. The temporary file is `<temp_prefix><pid>-<n>`, created
// exclusively with `mode` (less the umask); the destructor removes it unless commit() put it in
// place. Not thread-safe (one writer per object); any number of objects and processes may write
// the same path at once, and the last commit wins.
class AtomicFile {
 public:
  AtomicFile(std::string path, std::string temp_prefix, mode_t mode);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // 0 while everything so far succeeded, else the errno of the first failure (creating the
  // temporary file included). Later writes after a failure do nothing and return it again.
  int error() const { return err_; }
  // The step the first failure happened in ("create", "write", "fsync", "close", "rename",
  // "link"), or "" while there is none.
  const char* failed_step() const { return step_; }
  int write(const void* src, size_t n);

  enum class Commit {
    Replace,       // rename over the destination
    KeepExisting,  // link: a file already at the destination stays (commit returns EEXIST)
  };
  // Flushes the bytes to the disk first when `durable` (a crash then leaves the old file or the
  // new one whole), closes, and puts the file in place. 0, or the errno of the first failure.
  int commit(bool durable, Commit how = Commit::Replace);

  const std::string& temp_path() const { return temp_; }

 private:
  std::string path_, temp_;
  Fd fd_;
  int err_ = 0;
  const char* step_ = "";
  bool placed_ = false;
  int fail(const char* step, int err);
};

}  // namespace lz
