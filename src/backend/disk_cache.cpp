#include "backend/disk_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <system_error>
#include <vector>

#include "core/debug_write.h"
#include "core/files.h"
#include "core/metrics.h"

namespace lz {
namespace {

constexpr char kMagic[8] = {'L', 'Z', 'K', 'C', 'A', 'C', 'H', 'E'};
constexpr const char* kEntrySuffix = ".lzk";
constexpr const char* kTempPrefix = ".tmp.";
constexpr const char* kKeyName = "mac.key";
constexpr size_t kMacSize = 32;  // HMAC-SHA256
// A temp file this old belongs to a writer that died mid-write (a rename takes microseconds).
constexpr time_t kStaleTempSeconds = 3600;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t reserved;
  uint64_t key_lo, key_hi;
  uint64_t payload_size;
  unsigned char mac[kMacSize];
};
static_assert(sizeof(Header) == DiskCache::kHeaderSize);
constexpr size_t kMacOffset = offsetof(Header, mac);

// HMAC-SHA256 under `key` of the header before the MAC, then the payload (OpenSSL's EVP_MAC).
// False if OpenSSL fails (then nothing is stored or loaded).
bool entry_mac(const unsigned char* key, const Header& h, std::string_view payload,
               unsigned char out[kMacSize]) {
  EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  if (!mac) return false;
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(mac);
  bool ok = ctx != nullptr;
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", digest, 0),
                         OSSL_PARAM_construct_end()};
  size_t len = 0;
  ok = ok && EVP_MAC_init(ctx, key, DiskCache::kKeySize, params) == 1 &&
       EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(&h), kMacOffset) == 1 &&
       EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(payload.data()),
                      payload.size()) == 1 &&
       EVP_MAC_final(ctx, out, &len, kMacSize) == 1 && len == kMacSize;
  EVP_MAC_CTX_free(ctx);
  EVP_MAC_free(mac);
  return ok;
}

std::string error_text(int err) { return std::error_code(err, std::generic_category()).message(); }

// True when all n bytes at `offset` were read.
bool read_all(int fd, char* p, size_t n, off_t offset) {
  return read_at(fd, p, n, offset) == static_cast<int64_t>(n);
}

bool is_entry_name(std::string_view name) {
  return name.size() == 32 + std::strlen(kEntrySuffix) && name.ends_with(kEntrySuffix) &&
         std::all_of(name.begin(), name.begin() + 32,
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool older(const timespec& a, const timespec& b) {
  return a.tv_sec != b.tv_sec ? a.tv_sec < b.tv_sec : a.tv_nsec < b.tv_nsec;
}

void warn(const std::string& message) { debug_write("lazuli: kernel cache: " + message + "\n"); }

// mkdir -p with mode 0700 for every directory it creates; 0 or the errno of the failure.
int make_dirs(const std::string& dir) {
  for (size_t pos = dir.find('/', 1);; pos = dir.find('/', pos + 1)) {
    std::string prefix = dir.substr(0, pos);
    if (!prefix.empty() && prefix.back() != '/' && ::mkdir(prefix.c_str(), 0700) != 0 &&
        errno != EEXIST) {
      return errno;
    }
    if (pos == std::string::npos) return 0;
  }
}

// A write past RLIMIT_FSIZE raises SIGXFSZ, whose default action kills the process; ignored, the
// write fails with EFBIG and the store is an ordinary failed one (CPython ignores it at start).
// Checked before every store (one syscall; a store follows a compile), so a program that resets
// the signal later is still covered.
void ignore_sigxfsz_if_default() {
  struct sigaction old {};
  if (::sigaction(SIGXFSZ, nullptr, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
      old.sa_handler == SIG_DFL) {
    ::signal(SIGXFSZ, SIG_IGN);
  }
}

// Removes a directory found at an entry's name (else no store could ever replace it): renamed
// aside first, so only the directory that was judged goes, then removed with what it holds.
void remove_directory_at(const std::string& dir, const std::string& path, const Hash128& key) {
  std::string aside = dir + "/" + kTempPrefix + key.hex() + ".dir.XXXXXX";
  if (!::mkdtemp(aside.data())) return;
  std::error_code ec;
  if (::rename(path.c_str(), aside.c_str()) != 0) {
    ::rmdir(aside.c_str());
    return;
  }
  std::filesystem::remove_all(aside, ec);  // symlinks inside are removed, never followed
}

}  // namespace

DiskCache::DiskCache(DiskCacheOptions opts) : opts_(std::move(opts)) {
  if (opts_.dir.empty()) return;
  while (opts_.dir.size() > 1 && opts_.dir.back() == '/') opts_.dir.pop_back();
  if (opts_.max_bytes < 0) opts_.max_bytes = 0;
  const std::string& dir = opts_.dir;
  const char* off = "; the persistent kernel cache is off";
  if (!opts_.read_only) {
    if (int err = make_dirs(dir)) {
      warn("cannot create " + dir + ": " + error_text(err) + off);
      return;
    }
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    if (!(opts_.read_only && errno == ENOENT)) {
      warn("cannot use " + dir + ": " + error_text(errno) + off);
    }
    return;
  }
  if (!S_ISDIR(st.st_mode)) {
    warn(dir + " is not a directory" + off);
    return;
  }
  if (st.st_uid != ::geteuid()) {
    warn(dir + " is owned by uid " + std::to_string(st.st_uid) + ", not by this process (uid " +
         std::to_string(::geteuid()) +
         "); loading code from it would let its owner run code in this process" + off);
    return;
  }
  if (st.st_mode & 022) {
    warn(dir + " is writable by other users; loading code from it would let them run code in " +
         "this process" + off);
    return;
  }
  enabled_ = load_or_create_key();
}

std::string DiskCache::key_path() const { return opts_.dir + "/" + kKeyName; }

std::string DiskCache::trial_path(const Hash128& key) const {
  return opts_.dir + "/" + key.hex() + ".trial";
}

namespace {
// Whether the crash marker at `path` was left by a process that is gone (it died inside the
// kernel). A marker of a live process (trying the kernel now) or an unreadable one is not.
bool left_by_a_dead_process(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (fd.get() < 0) return false;
  char buf[32] = {};
  ssize_t n = ::pread(fd.get(), buf, sizeof(buf) - 1, 0);
  if (n <= 0) return false;
  long pid = std::strtol(buf, nullptr, 10);
  if (pid <= 0 || pid == ::getpid()) return false;
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}
}  // namespace

bool DiskCache::load_or_create_key() {
  const std::string path = key_path();
  const char* off = "; the persistent kernel cache is off";
  for (int attempt = 0; attempt < 2; ++attempt) {
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
    if (fd.get() >= 0) {
      struct stat st {};
      if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() ||
          (st.st_mode & 077) || st.st_size != static_cast<off_t>(kKeySize) ||
          !read_all(fd.get(), reinterpret_cast<char*>(mac_key_), kKeySize, 0)) {
        warn(path + " is not a key this process can trust (a regular file of " +
             std::to_string(kKeySize) + " bytes, owned by uid " + std::to_string(::geteuid()) +
             ", mode 0600); remove it to have a new one made" + off);
        return false;
      }
      return true;
    }
    if (errno != ENOENT) {
      warn("cannot read " + path + ": " + error_text(errno) + off);
      return false;
    }
    if (opts_.read_only) {
      warn(path + " is missing: a read-only cache cannot authenticate its entries" + off);
      return false;
    }
    // Made aside and linked into place: link() never replaces, so of two processes making a key
    // at once one wins and the other reads the winner's, always whole.
    unsigned char fresh[kKeySize];
    size_t got = 0;
    while (got < kKeySize) {
      ssize_t r = ::getrandom(fresh + got, kKeySize - got, 0);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        warn(std::string("cannot draw a key: ") + error_text(errno) + off);
        return false;
      }
      got += static_cast<size_t>(r);
    }
    AtomicFile out(path, opts_.dir + "/" + kTempPrefix + "key.", 0600);
    out.write(fresh, kKeySize);
    int err = out.commit(/*durable=*/false, AtomicFile::Commit::KeepExisting);
    if (err == EEXIST) err = 0;  // another process made it first: read theirs
    if (err) {
      warn("cannot write " + path + ": " + error_text(err) + off);
      return false;
    }
  }
  warn("cannot settle on a key in " + path + off);
  return false;
}

std::string DiskCache::entry_path(const Hash128& key) const {
  return opts_.dir + "/" + key.hex() + kEntrySuffix;
}

std::optional<std::string> DiskCache::load(const Hash128& key,
                                           const std::function<bool(const std::string&)>& accept) {
  static Counter* hits = get_counter("PersistentCacheHit");
  static Counter* misses = get_counter("PersistentCacheMiss");
  static Counter* rejected = get_counter("PersistentCacheRejected");
  if (!enabled_) return std::nullopt;  // a cache that is off misses nothing
  const std::string path = entry_path(key);
  if (!opts_.read_only && left_by_a_dead_process(trial_path(key))) {
    // A process died running this entry's kernel: compile it anew rather than crash again.
    static Counter* crashed = get_counter("PersistentCacheCrashedEntry");
    crashed->add();
    rejected->add();
    misses->add();
    if (!warned_crash_.exchange(true)) {
      warn("a process died inside the kernel cached in " + path +
           "; it is removed and compiled again");
    }
    ::unlink(path.c_str());
    ::unlink(trial_path(key).c_str());
    return std::nullopt;
  }
  // O_NONBLOCK: a FIFO at the entry's name must not hang the load; regular files ignore it.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (fd.get() < 0) {
    // ELOOP is a symlink at the entry's name: damaged, not absent.
    if (errno != ELOOP) {
      misses->add();
      return std::nullopt;
    }
  }
  struct stat st {};
  auto reject = [&]() -> std::optional<std::string> {
    rejected->add();
    misses->add();
    if (!opts_.read_only) {
      // Delete only the file we judged: another process may have renamed a good entry over it.
      struct stat now {};
      bool same = fd.get() < 0 || (::lstat(path.c_str(), &now) == 0 && now.st_ino == st.st_ino &&
                                   now.st_dev == st.st_dev);
      if (same && S_ISDIR(now.st_mode)) {
        remove_directory_at(opts_.dir, path, key);
      } else if (same) {
        ::unlink(path.c_str());
      }
    }
    return std::nullopt;
  };
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return reject();
  // The directory was checked once; the file is checked every time, so a directory swapped in
  // afterwards by someone else cannot hand this process their code.
  if (st.st_uid != ::geteuid() || (st.st_mode & 022)) {
    rejected->add();
    misses->add();
    return std::nullopt;
  }
  const auto file_size = static_cast<uint64_t>(st.st_size);
  Header h;
  if (file_size < kHeaderSize || !read_all(fd.get(), reinterpret_cast<char*>(&h), sizeof(h), 0)) {
    return reject();
  }
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0 || h.version != kFormatVersion ||
      h.key_lo != key.lo || h.key_hi != key.hi || h.payload_size != file_size - kHeaderSize) {
    return reject();
  }
  std::string payload(h.payload_size, '\0');
  unsigned char mac[kMacSize];
  if (!read_all(fd.get(), payload.data(), payload.size(), kHeaderSize) ||
      !entry_mac(mac_key_, h, payload, mac) || CRYPTO_memcmp(mac, h.mac, kMacSize) != 0) {
    return reject();
  }
  if (accept && !accept(payload)) return reject();
  if (!opts_.read_only) ::futimens(fd.get(), nullptr);  // LRU stamp; failure only costs recency
  hits->add();
  return payload;
}

void DiskCache::store(const Hash128& key, std::string_view payload) {
  if (!enabled_ || opts_.read_only) return;
  if (kHeaderSize + payload.size() > static_cast<uint64_t>(opts_.max_bytes)) return;
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = kFormatVersion;
  h.key_lo = key.lo;
  h.key_hi = key.hi;
  h.payload_size = payload.size();
  if (!entry_mac(mac_key_, h, payload, h.mac)) return;

  ignore_sigxfsz_if_default();
  const std::string path = entry_path(key);
  AtomicFile out(path, opts_.dir + "/" + kTempPrefix + key.hex() + ".", 0600);
  out.write(&h, sizeof(h));
  out.write(payload.data(), payload.size());
  if (int err = out.commit(/*durable=*/false)) {
    warn_write_failure(path, err);
    return;
  }
  evict_to_bound();
}

void DiskCache::warn_write_failure(const std::string& path, int err) {
  static Counter* failed = get_counter("PersistentCacheStoreFailed");
  failed->add();
  if (warned_write_.exchange(true)) return;
  warn("cannot write " + path + ": " + error_text(err) + "; continuing without saving");
}

// One directory scan per store: a store follows a compile, which costs far more than the scan.
// Also deletes temp files left by writers that died mid-write.
void DiskCache::evict_to_bound() {
  struct Entry {
    std::string path;
    timespec mtime;
    uint64_t size;
  };
  DIR* d = ::opendir(opts_.dir.c_str());
  if (!d) return;
  std::vector<Entry> entries;
  uint64_t total = 0;
  const time_t now = std::time(nullptr);
  while (dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    const bool entry = is_entry_name(name), temp = name.starts_with(kTempPrefix);
    if (!entry && !temp) continue;
    std::string path = opts_.dir + "/" + std::string(name);
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (temp) {
      if (now - st.st_mtim.tv_sec > kStaleTempSeconds) ::unlink(path.c_str());
      continue;
    }
    entries.push_back({std::move(path), st.st_mtim, static_cast<uint64_t>(st.st_size)});
    total += static_cast<uint64_t>(st.st_size);
  }
  ::closedir(d);
  const auto bound = static_cast<uint64_t>(opts_.max_bytes);
  if (total <= bound) return;
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return older(a.mtime, b.mtime); });
  for (const Entry& e : entries) {
    if (total <= bound) break;
    // ENOENT: another process evicted it first; its bytes are gone either way.
    if (::unlink(e.path.c_str()) == 0 || errno == ENOENT) total -= e.size;
  }
}

}  // namespace lz
