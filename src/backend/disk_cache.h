// The persistent (disk) level of the kernel cache: one file per compiled kernel, keyed by its
// Hash128, under a directory that survives the process (LAZULI_CACHE_DIR).
//
// Entry file `<dir>/<32 hex digits of the key>.lzk`: a 72-byte header, then the payload.
//   offset  0  char[8]  magic "LZKCACHE"
//           8  uint32   format version (kFormatVersion)
//          12  uint32   reserved, 0
//          16  uint64   key.lo, then key.hi at 24 (the key this entry was written for)
//          32  uint64   payload size (the file is exactly header + payload bytes)
//          40  byte[32] HMAC-SHA256, under the cache's key, of bytes 0-39 and the payload
// All fields are in host byte order, like the hashes themselves (core/hash.h). load() checks every
// field before it returns a payload; an entry that fails any check is counted as rejected, treated
// as a miss and deleted, so a crash, a full disk, a format change or tampering costs one
// recompile, and the entry is replaced by the next store.
//
// The key: 32 random bytes in `<dir>/mac.key`, mode 0600, made by the first process that
// enables the directory (written aside, then linked into place, so a reader sees all of it or
// nothing), read by every later one. A key file that is not a regular file of exactly 32 bytes,
// owned by this process's effective uid and unreadable by group and others, turns the cache off
// with one warning; a read-only cache without a key is off (it could authenticate nothing).
// A checksum guards against accidents only: with a MAC, bytes changed by anyone who can write
// the directory but cannot read the key (a shared or mounted cache, a copied entry) never load,
// however they were re-checksummed.
//
// Security rule: the payload is machine code this process will run, so whoever can write the
// directory can run code in this process. The directory is created with mode 0700 (missing parents
// too); an existing directory that is writable by group or others, or not owned by our effective
// uid, is refused: enabled() is false and one warning names it. A cache that was refused, could not
// be created, or was given an empty path loads nothing and stores nothing.
//
// Crash markers: a process about to run a kernel it loaded from the cache for the first time
// writes `<dir>/<key hex>.trial` (its pid) and removes it once the kernel returned
// (KernelTrial, kernel_cache.h). A marker whose process is gone means that process died inside
// the kernel: load() then rejects the entry (counted PersistentCacheCrashedEntry, one warning),
// so the next process compiles the kernel anew instead of crashing the same way.
//
// Writes go to a unique temp file in the same directory (`.tmp.<key hex>.XXXXXX`, never matched
// as an entry) and are renamed over the entry, so readers see a whole entry or none, and two
// processes storing the same key both succeed. Recency is the entry's mtime: a hit refreshes it,
// and after each store the least recently used entries are deleted until the entries' total size
// is at most max_bytes. An entry larger than max_bytes by itself is not written.
//
// Errors: nothing here throws or aborts. A failed write deletes its temp file, is counted
// (PersistentCacheStoreFailed) and prints one warning per DiskCache object; the caller goes on
// without the entry. A write past RLIMIT_FSIZE (`ulimit -f`) is such a failure, not a kill: like
// CPython, each store sets SIGXFSZ to ignored when it is at its default action (which
// kills the process); a handler the program installed is left alone. Processes the program
// starts inherit the ignored disposition, as they do from Python. Thread-safe: the object
// holds no mutable state but the warned-once flag; cooperating processes share a directory
// through atomic renames only (no locks).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/hash.h"

namespace lz {

struct DiskCacheOptions {
  std::string dir;              // "" turns the cache off
  bool read_only = false;       // never create, write, delete or touch anything
  int64_t max_bytes = 1 << 30;  // bound on the entries' total size (headers included)
};

class DiskCache {
 public:
  static constexpr uint32_t kFormatVersion = 2;
  static constexpr size_t kHeaderSize = 72;
  static constexpr size_t kKeySize = 32;

  // Creates the directory unless read_only (a read-only cache over a missing directory is simply
  // off, silently). Never throws; a refusal or failure prints one warning.
  explicit DiskCache(DiskCacheOptions opts);

  bool enabled() const { return enabled_; }

  // The payload stored under `key`, or nullopt. `accept` (when given) judges a payload whose
  // header and checksum are good; a payload it refuses is a damaged entry like any other.
  // Counters, only while enabled(): PersistentCacheHit on a hit, PersistentCacheMiss on every
  // nullopt, PersistentCacheRejected in addition for a damaged entry. A damaged entry is deleted
  // (a directory at its name too) unless read_only, so the next store can replace it.
  std::optional<std::string> load(const Hash128& key,
                                  const std::function<bool(const std::string&)>& accept = {});

  // Atomically writes the entry, then evicts past max_bytes. No-op when read_only or disabled.
  void store(const Hash128& key, std::string_view payload);

  std::string entry_path(const Hash128& key) const;
  std::string key_path() const;
  std::string trial_path(const Hash128& key) const;
  // Whether crash markers are kept here (an enabled, writable cache).
  bool keeps_trials() const { return enabled_ && !opts_.read_only; }

 private:
  void warn_write_failure(const std::string& path, int err);
  void evict_to_bound();
  // Reads `<dir>/mac.key`, or makes it (unless read_only); false, with one warning, when there
  // is no usable key.
  bool load_or_create_key();

  DiskCacheOptions opts_;
  bool enabled_ = false;
  unsigned char mac_key_[kKeySize] = {};
  std::atomic<bool> warned_write_{false};
  std::atomic<bool> warned_crash_{false};
};

}  // namespace lz
