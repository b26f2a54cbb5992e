// The persistent kernel cache level on its own: entry format checks, directory security, atomic
// writes under failure and concurrency, and the LRU size bound. Each test owns a fresh mkdtemp
// directory and starts with counters at zero.
#include "backend/disk_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "core/metrics.h"

namespace lz {
namespace {

namespace fs = std::filesystem;

Hash128 key_of(uint64_t i) { return Hash128{0x1234567800000000ull + i, 0xabcdef0000000000ull + i}; }

std::string payload_of(uint64_t i, size_t n = 100) {
  std::string s(n, '\0');
  for (size_t j = 0; j < n; ++j) s[j] = static_cast<char>((i * 131 + j * 7) & 0xff);
  return s;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The directory's files but its key (mac.key, made when a cache first enables it).
std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename() != "mac.key") names.push_back(e.path().filename().string());
  }
  return names;
}

bool has_temp_files(const std::string& dir) {
  for (const auto& n : list_dir(dir)) {
    if (n.starts_with(".tmp")) return true;
  }
  return false;
}

int64_t counter(const char* name) { return counter_value(name); }

void set_mtime(const std::string& path, time_t seconds) {
  timespec times[2] = {{seconds, 0}, {seconds, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

class DiskCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lazuli-disk-cache-test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/cache";
    clear_counters();
  }
  void TearDown() override {
    // A test may have left directories read-only; give them back to the owner before removing.
    std::error_code ec;
    for (const auto& e : fs::recursive_directory_iterator(root_, ec)) {
      if (e.is_directory()) fs::permissions(e.path(), fs::perms::owner_all, ec);
    }
    fs::permissions(root_, fs::perms::owner_all, ec);
    fs::remove_all(root_, ec);
  }
  DiskCacheOptions options(int64_t max_bytes = 1 << 30) const {
    DiskCacheOptions o;
    o.dir = dir_;
    o.max_bytes = max_bytes;
    return o;
  }

  std::string root_, dir_;
};

TEST_F(DiskCacheTest, StoredPayloadLoadsBackUnchanged) {
  DiskCache cache(options());
  ASSERT_TRUE(cache.enabled());
  std::string big = payload_of(7, 1 << 20);
  cache.store(key_of(1), payload_of(1));
  cache.store(key_of(2), "");
  cache.store(key_of(3), big);
  EXPECT_EQ(cache.load(key_of(1)), payload_of(1));
  EXPECT_EQ(cache.load(key_of(2)), std::string());
  EXPECT_EQ(cache.load(key_of(3)), big);
  EXPECT_EQ(counter("PersistentCacheHit"), 3);
  EXPECT_EQ(counter("PersistentCacheMiss"), 0);
  EXPECT_EQ(cache.entry_path(key_of(1)), dir_ + "/" + key_of(1).hex() + ".lzk");
  EXPECT_EQ(key_of(1).hex().size(), 32u);
  EXPECT_FALSE(has_temp_files(dir_));

  DiskCache other(options());  // another process's view: the same directory, a new object
  EXPECT_EQ(other.load(key_of(1)), payload_of(1));
}

TEST_F(DiskCacheTest, AbsentEntryIsAMiss) {
  DiskCache cache(options());
  EXPECT_EQ(cache.load(key_of(1)), std::nullopt);
  EXPECT_EQ(counter("PersistentCacheMiss"), 1);
  EXPECT_EQ(counter("PersistentCacheRejected"), 0);
  EXPECT_EQ(counter("PersistentCacheHit"), 0);
}

// After `key`'s entry was damaged: one rejection, one miss, no hit, and the file is gone.
void expect_rejected_and_removed(DiskCache& cache, const Hash128& key) {
  EXPECT_EQ(cache.load(key), std::nullopt);
  EXPECT_EQ(counter("PersistentCacheRejected"), 1);
  EXPECT_EQ(counter("PersistentCacheMiss"), 1);
  EXPECT_EQ(counter("PersistentCacheHit"), 0);
  EXPECT_FALSE(fs::exists(cache.entry_path(key)));
}

TEST_F(DiskCacheTest, TruncatedEntryIsRejectedAndRemoved) {
  DiskCache cache(options());
  cache.store(key_of(1), payload_of(1));
  std::string path = cache.entry_path(key_of(1));
  fs::resize_file(path, fs::file_size(path) - 1);
  expect_rejected_and_removed(cache, key_of(1));
}

TEST_F(DiskCacheTest, TruncatedHeaderIsRejectedAndRemoved) {
  DiskCache cache(options());
  cache.store(key_of(1), payload_of(1));
  fs::resize_file(cache.entry_path(key_of(1)), DiskCache::kHeaderSize - 8);
  expect_rejected_and_removed(cache, key_of(1));
}

TEST_F(DiskCacheTest, RandomBytesAreRejectedAndRemoved) {
  DiskCache cache(options());
  std::mt19937 rng(42);
  std::string junk(300, '\0');
  for (char& c : junk) c = static_cast<char>(rng());
  write_file(cache.entry_path(key_of(1)), junk);
  expect_rejected_and_removed(cache, key_of(1));
}

TEST_F(DiskCacheTest, EntryFromAnotherFormatVersionIsRejected) {
  DiskCache cache(options());
  cache.store(key_of(1), payload_of(1));
  std::string path = cache.entry_path(key_of(1));
  std::string bytes = read_file(path);
  uint32_t version = DiskCache::kFormatVersion + 1;
  std::memcpy(bytes.data() + 8, &version, sizeof(version));  // payload and checksum still agree
  write_file(path, bytes);
  expect_rejected_and_removed(cache, key_of(1));
}

TEST_F(DiskCacheTest, PayloadChecksumMismatchIsRejected) {
  DiskCache cache(options());
  cache.store(key_of(1), payload_of(1));
  std::string path = cache.entry_path(key_of(1));
  std::string bytes = read_file(path);
  bytes[DiskCache::kHeaderSize + 10] ^= 1;
  write_file(path, bytes);
  expect_rejected_and_removed(cache, key_of(1));
}

// An attacker who can write the directory but not read its key: flips a byte of the machine code
// and recomputes the entry's MAC under a key of its own (as it could recompute any checksum).
TEST_F(DiskCacheTest, AnEntryChangedAndReAuthenticatedWithoutTheKeyIsRejectedAndReplaced) {
  DiskCache cache(options());
  cache.store(key_of(1), payload_of(1));
  std::string path = cache.entry_path(key_of(1));
  std::string bytes = read_file(path);
  bytes[DiskCache::kHeaderSize + 10] ^= 1;
  unsigned char other_key[DiskCache::kKeySize] = {1, 2, 3};
  unsigned char mac[32];
  size_t len = 0;
  EVP_MAC* m = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(m);
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", digest, 0), OSSL_PARAM_construct_end()};
  ASSERT_EQ(EVP_MAC_init(ctx, other_key, sizeof(other_key), params), 1);
  EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(bytes.data()), 40);
  EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(bytes.data()) + DiskCache::kHeaderSize,
                 bytes.size() - DiskCache::kHeaderSize);
  ASSERT_EQ(EVP_MAC_final(ctx, mac, &len, sizeof(mac)), 1);
  EVP_MAC_CTX_free(ctx);
  EVP_MAC_free(m);
  std::memcpy(bytes.data() + 40, mac, sizeof(mac));
  write_file(path, bytes);
  expect_rejected_and_removed(cache, key_of(1));
  cache.store(key_of(1), payload_of(1));  // repaired by the next store
  EXPECT_EQ(cache.load(key_of(1)), payload_of(1));
}

TEST_F(DiskCacheTest, AnEntryWrittenUnderAnotherDirectorysKeyIsRejected) {
  DiskCache cache(options());
  DiskCacheOptions o = options();
  o.dir = root_ + "/other";
  DiskCache other(o);
  other.store(key_of(1), payload_of(1));
  fs::copy_file(other.entry_path(key_of(1)), cache.entry_path(key_of(1)));
  expect_rejected_and_removed(cache, key_of(1));
}

TEST_F(DiskCacheTest, TheKeyIsMadeOnceWithMode0600AndReadByLaterCaches) {
  { DiskCache(options()).store(key_of(1), payload_of(1)); }
  DiskCache again(options());
  struct stat st {};
  ASSERT_EQ(::stat(again.key_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_size, static_cast<off_t>(DiskCache::kKeySize));
  EXPECT_EQ(again.load(key_of(1)), payload_of(1));
}

TEST_F(DiskCacheTest, AKeyOthersCanReadOrNoKeyForAReadOnlyCacheTurnsTheCacheOff) {
  std::string key;
  {
    DiskCache cache(options());
    key = cache.key_path();
  }
  ASSERT_EQ(::chmod(key.c_str(), 0644), 0);
  ::testing::internal::CaptureStderr();
  DiskCache readable(options());
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(readable.enabled());
  EXPECT_NE(err.find("mac.key"), std::string::npos) << err;
  ASSERT_EQ(::unlink(key.c_str()), 0);
  DiskCacheOptions o = options();
  o.read_only = true;
  ::testing::internal::CaptureStderr();
  DiskCache keyless(o);
  err = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(keyless.enabled());
  EXPECT_NE(err.find("cannot authenticate"), std::string::npos) << err;
  EXPECT_TRUE(DiskCache(options()).enabled());  // a writable cache makes a new key
}

TEST_F(DiskCacheTest, EntryCopiedToAnotherKeysPathIsRejected) {
  DiskCache cache(options());
  cache.store(key_of(1), payload_of(1));
  fs::copy_file(cache.entry_path(key_of(1)), cache.entry_path(key_of(2)));
  expect_rejected_and_removed(cache, key_of(2));
  EXPECT_EQ(cache.load(key_of(1)), payload_of(1));  // the original is untouched
}

TEST_F(DiskCacheTest, DamagedEntryIsKeptWhenReadOnly) {
  DiskCache writer(options());
  writer.store(key_of(1), payload_of(1));
  std::string path = writer.entry_path(key_of(1));
  fs::resize_file(path, fs::file_size(path) - 1);
  DiskCacheOptions o = options();
  o.read_only = true;
  DiskCache reader(o);
  EXPECT_EQ(reader.load(key_of(1)), std::nullopt);
  EXPECT_EQ(counter("PersistentCacheRejected"), 1);
  EXPECT_TRUE(fs::exists(path));
}

TEST_F(DiskCacheTest, DirectoryWritableByOthersIsRefused) {
  ASSERT_EQ(::mkdir(dir_.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(dir_.c_str(), 0777), 0);  // chmod: mkdir's mode is filtered by the umask
  ::testing::internal::CaptureStderr();
  DiskCache cache(options());
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(cache.enabled());
  EXPECT_NE(err.find(dir_), std::string::npos) << err;
  EXPECT_NE(err.find("is writable by other users"), std::string::npos) << err;
  EXPECT_NE(err.find("the persistent kernel cache is off"), std::string::npos) << err;
  cache.store(key_of(1), payload_of(1));
  EXPECT_TRUE(list_dir(dir_).empty());
  EXPECT_EQ(cache.load(key_of(1)), std::nullopt);

  // Even an entry someone else planted there is not loaded.
  DiskCacheOptions clean;
  clean.dir = root_ + "/clean";
  DiskCache planter(clean);
  planter.store(key_of(1), payload_of(1));
  fs::copy_file(planter.entry_path(key_of(1)), cache.entry_path(key_of(1)));
  EXPECT_EQ(cache.load(key_of(1)), std::nullopt);
}

TEST_F(DiskCacheTest, DirectoryWritableByGroupIsRefused) {
  ASSERT_EQ(::mkdir(dir_.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(dir_.c_str(), 0770), 0);
  ::testing::internal::CaptureStderr();
  DiskCache cache(options());
  ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(cache.enabled());
}

TEST_F(DiskCacheTest, DirectoryOwnedByAnotherUserIsRefused) {
  // Root gives a fresh directory away; anyone else finds one root owns (mode 0755, so only the
  // ownership rule can refuse it).
  DiskCacheOptions o = options();
  std::string owner = "12345";
  if (::geteuid() == 0) {
    ASSERT_EQ(::mkdir(dir_.c_str(), 0700), 0);
    ASSERT_EQ(::chown(dir_.c_str(), 12345, 12345), 0);
  } else {
    o.dir = "/usr";
    owner = "0";
  }
  ::testing::internal::CaptureStderr();
  DiskCache cache(o);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(cache.enabled());
  EXPECT_NE(err.find("owned by uid " + owner + ","), std::string::npos) << err;
}

TEST_F(DiskCacheTest, DirectoryAndParentsAreCreatedWithMode0700) {
  DiskCacheOptions o = options();
  o.dir = root_ + "/a/b/cache";
  DiskCache cache(o);
  ASSERT_TRUE(cache.enabled());
  for (const std::string& d : {root_ + "/a", root_ + "/a/b", root_ + "/a/b/cache"}) {
    struct stat st {};
    ASSERT_EQ(::stat(d.c_str(), &st), 0) << d;
    EXPECT_TRUE(S_ISDIR(st.st_mode)) << d;
    EXPECT_EQ(st.st_mode & 07777, 0700u) << d;
  }
}

TEST_F(DiskCacheTest, DirectoryThatCannotBeCreatedDisablesTheCacheWithOneWarning) {
  write_file(root_ + "/file", "x");
  DiskCacheOptions o = options();
  o.dir = root_ + "/file/cache";
  ::testing::internal::CaptureStderr();
  DiskCache cache(o);
  cache.store(key_of(1), payload_of(1));
  EXPECT_EQ(cache.load(key_of(1)), std::nullopt);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(cache.enabled());
  EXPECT_NE(err.find("cannot create " + o.dir), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

TEST_F(DiskCacheTest, EmptyDirectoryPathMeansOff) {
  ::testing::internal::CaptureStderr();
  DiskCache cache(DiskCacheOptions{});
  cache.store(key_of(1), payload_of(1));
  EXPECT_EQ(cache.load(key_of(1)), std::nullopt);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_FALSE(cache.enabled());
}

TEST_F(DiskCacheTest, CacheThatIsOffCountsNoMiss) {
  DiskCache cache(DiskCacheOptions{});
  EXPECT_EQ(cache.load(key_of(1)), std::nullopt);
  EXPECT_EQ(counter("PersistentCacheMiss"), 0);
  EXPECT_EQ(counter("PersistentCacheRejected"), 0);
}

TEST_F(DiskCacheTest, DirectoryAtAnEntrysNameIsRemovedSoTheEntryCanBeStoredAgain) {
  DiskCache cache(options());
  const std::string path = cache.entry_path(key_of(1));
  fs::create_directories(path + "/inside");
  write_file(path + "/inside/file", "x");
  EXPECT_EQ(cache.load(key_of(1)), std::nullopt);
  EXPECT_EQ(counter("PersistentCacheRejected"), 1);
  EXPECT_FALSE(fs::exists(path));
  cache.store(key_of(1), payload_of(1));
  EXPECT_EQ(cache.load(key_of(1)), payload_of(1));
  EXPECT_FALSE(has_temp_files(dir_));
}

TEST_F(DiskCacheTest, AcceptHookRefusingAPayloadMakesItARejectedEntry) {
  DiskCache cache(options());
  cache.store(key_of(1), payload_of(1));
  EXPECT_EQ(cache.load(key_of(1), [](const std::string&) { return false; }), std::nullopt);
  EXPECT_EQ(counter("PersistentCacheRejected"), 1);
  EXPECT_EQ(counter("PersistentCacheHit"), 0);
  EXPECT_FALSE(fs::exists(cache.entry_path(key_of(1))));
}

TEST_F(DiskCacheTest, ReadOnlyCacheNeverWritesButLoadsEarlierEntries) {
  {
    DiskCache writer(options());
    writer.store(key_of(1), payload_of(1));
  }
  std::string path = DiskCache(options()).entry_path(key_of(1));
  set_mtime(path, 1000);
  DiskCacheOptions o = options();
  o.read_only = true;
  DiskCache cache(o);
  ASSERT_TRUE(cache.enabled());
  cache.store(key_of(2), payload_of(2));
  EXPECT_EQ(list_dir(dir_), std::vector<std::string>{key_of(1).hex() + ".lzk"});
  EXPECT_EQ(cache.load(key_of(1)), payload_of(1));
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mtim.tv_sec, 1000);  // a read-only hit leaves the LRU stamp alone

  // Over a directory that does not exist, a read-only cache creates nothing and says nothing.
  o.dir = root_ + "/never";
  ::testing::internal::CaptureStderr();
  DiskCache absent(o);
  absent.store(key_of(1), payload_of(1));
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_FALSE(absent.enabled());
  EXPECT_FALSE(fs::exists(o.dir));
}

TEST_F(DiskCacheTest, ReadOnlyDirectoryStillLoadsAndStoresFailWithOneWarning) {
  if (::geteuid() == 0)
    GTEST_SKIP() << "root ignores directory permissions, so mode 0500 "
                    "cannot make the directory read-only";
  {
    DiskCache writer(options());
    writer.store(key_of(1), payload_of(1));
  }
  ASSERT_EQ(::chmod(dir_.c_str(), 0500), 0);
  DiskCache cache(options());
  ASSERT_TRUE(cache.enabled());
  ::testing::internal::CaptureStderr();
  cache.store(key_of(2), payload_of(2));
  cache.store(key_of(3), payload_of(3));
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("cannot write " + cache.entry_path(key_of(2))), std::string::npos) << err;
  EXPECT_NE(err.find("continuing without saving"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_EQ(cache.load(key_of(1)), payload_of(1));
  EXPECT_EQ(cache.load(key_of(2)), std::nullopt);
  EXPECT_EQ(list_dir(dir_).size(), 1u);
}

// Runs `body` in a forked child with stderr sent to a pipe; returns the child's stderr and sets
// *status to its wait status.
template <typename F>
std::string run_in_child(F body, int* status) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  std::fflush(stderr);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ::dup2(fds[1], 2);
    body();
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;)
    out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  EXPECT_EQ(::waitpid(pid, status, 0), pid);
  return out;
}

TEST_F(DiskCacheTest, FullDiskLeavesNoPartialEntryAndDoesNotCrash) {
  DiskCache parent(options());
  ASSERT_TRUE(parent.enabled());
  int status = 0;
  std::string err = run_in_child(
      [&] {
        ::signal(SIGXFSZ, SIG_IGN);  // then a write past the limit fails with EFBIG
        rlimit lim{4096, 4096};
        if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) ::_exit(3);
        DiskCache cache(options());
        cache.store(key_of(1), payload_of(1, 64 << 10));
        cache.store(key_of(2), payload_of(2, 64 << 10));
        cache.store(key_of(3), payload_of(3, 100));  // small enough: still saved
      },
      &status);
  ASSERT_TRUE(WIFEXITED(status)) << "child died: status " << status << "\n" << err;
  EXPECT_EQ(WEXITSTATUS(status), 0) << err;
  EXPECT_NE(err.find("cannot write " + parent.entry_path(key_of(1))), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << "one warning per cache:\n" << err;
  EXPECT_FALSE(has_temp_files(dir_));
  EXPECT_FALSE(fs::exists(parent.entry_path(key_of(1))));
  EXPECT_FALSE(fs::exists(parent.entry_path(key_of(2))));
  EXPECT_EQ(parent.load(key_of(3)), payload_of(3, 100));
}

TEST_F(DiskCacheTest, WritePastTheFileSizeLimitIsAFailedStoreNotAKill) {
  DiskCache parent(options());
  int status = 0;
  std::string err = run_in_child(
      [&] {
        ::signal(SIGXFSZ, SIG_DFL);  // a C++ program's default: the kernel kills it at the limit
        rlimit lim{4096, 4096};
        if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) ::_exit(3);
        clear_counters();
        DiskCache cache(options());
        cache.store(key_of(1), payload_of(1, 64 << 10));
        if (counter("PersistentCacheStoreFailed") != 1) ::_exit(4);
      },
      &status);
  ASSERT_TRUE(WIFEXITED(status)) << "child died: status " << status << "\n" << err;
  EXPECT_EQ(WEXITSTATUS(status), 0) << err;
  EXPECT_NE(err.find("cannot write"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(parent.entry_path(key_of(1))));
  EXPECT_FALSE(has_temp_files(dir_));
}

TEST_F(DiskCacheTest, TwoProcessesStoringTheSameKeysLeaveWholeEntries) {
  DiskCache parent(options());
  ASSERT_TRUE(parent.enabled());
  constexpr int kKeys = 50, kRounds = 8;
  auto writer = [&] {
    DiskCache cache(options());
    for (int round = 0; round < kRounds; ++round) {
      for (int i = 0; i < kKeys; ++i) cache.store(key_of(i), payload_of(i, 4096 + i));
    }
  };
  std::fflush(stderr);
  pid_t a = ::fork();
  if (a == 0) {
    writer();
    ::_exit(0);
  }
  pid_t b = ::fork();
  if (b == 0) {
    writer();
    ::_exit(0);
  }
  int sa = 0, sb = 0;
  ASSERT_EQ(::waitpid(a, &sa, 0), a);
  ASSERT_EQ(::waitpid(b, &sb, 0), b);
  EXPECT_TRUE(WIFEXITED(sa) && WEXITSTATUS(sa) == 0) << sa;
  EXPECT_TRUE(WIFEXITED(sb) && WEXITSTATUS(sb) == 0) << sb;
  for (int i = 0; i < kKeys; ++i) EXPECT_EQ(parent.load(key_of(i)), payload_of(i, 4096 + i)) << i;
  EXPECT_EQ(counter("PersistentCacheHit"), kKeys);
  EXPECT_EQ(counter("PersistentCacheRejected"), 0);
  EXPECT_FALSE(has_temp_files(dir_));
  EXPECT_EQ(list_dir(dir_).size(), static_cast<size_t>(kKeys));
}

// Every entry below is header + 100 bytes; the bound holds three of them.
constexpr int64_t kEntryBytes = DiskCache::kHeaderSize + 100;

TEST_F(DiskCacheTest, SizeBoundEvictsLeastRecentlyUsedEntriesFirst) {
  DiskCache cache(options(3 * kEntryBytes + 10));
  for (int i = 0; i < 3; ++i) {
    cache.store(key_of(i), payload_of(i));
    set_mtime(cache.entry_path(key_of(i)), 1000 + 100 * (3 - i));  // key 2 oldest, key 0 newest
  }
  EXPECT_EQ(list_dir(dir_).size(), 3u);
  cache.store(key_of(3), payload_of(3));
  EXPECT_FALSE(fs::exists(cache.entry_path(key_of(2))));
  EXPECT_TRUE(fs::exists(cache.entry_path(key_of(1))));
  EXPECT_TRUE(fs::exists(cache.entry_path(key_of(0))));
  EXPECT_TRUE(fs::exists(cache.entry_path(key_of(3))));

  cache.store(key_of(4), payload_of(4));
  cache.store(key_of(5), payload_of(5));
  EXPECT_FALSE(fs::exists(cache.entry_path(key_of(1))));
  EXPECT_FALSE(fs::exists(cache.entry_path(key_of(0))));
  EXPECT_EQ(list_dir(dir_).size(), 3u);
}

TEST_F(DiskCacheTest, LoadRefreshesRecencySoTheEntrySurvivesEviction) {
  DiskCache cache(options(3 * kEntryBytes + 10));
  for (int i = 0; i < 3; ++i) {
    cache.store(key_of(i), payload_of(i));
    set_mtime(cache.entry_path(key_of(i)), 1000 + 100 * i);  // key 0 oldest
  }
  EXPECT_EQ(cache.load(key_of(0)), payload_of(0));  // now the most recent
  cache.store(key_of(3), payload_of(3));
  EXPECT_TRUE(fs::exists(cache.entry_path(key_of(0))));
  EXPECT_FALSE(fs::exists(cache.entry_path(key_of(1))));
  EXPECT_TRUE(fs::exists(cache.entry_path(key_of(2))));
  EXPECT_TRUE(fs::exists(cache.entry_path(key_of(3))));
}

TEST_F(DiskCacheTest, EntryLargerThanTheBoundIsNotWritten) {
  DiskCache cache(options(kEntryBytes - 1));
  cache.store(key_of(1), payload_of(1));
  EXPECT_TRUE(list_dir(dir_).empty());
  cache.store(key_of(2), payload_of(2, 10));
  EXPECT_EQ(cache.load(key_of(2)), payload_of(2, 10));
}

TEST_F(DiskCacheTest, StaleTempFileFromACrashedWriterIsCleanedUp) {
  DiskCache cache(options());
  std::string stale = dir_ + "/.tmp." + key_of(1).hex() + ".abcdef";
  std::string fresh = dir_ + "/.tmp." + key_of(2).hex() + ".abcdef";
  write_file(stale, "partial");
  write_file(fresh, "partial");
  set_mtime(stale, 1000);
  cache.store(key_of(3), payload_of(3));
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(fresh));  // may belong to a writer still at work
  EXPECT_EQ(cache.load(key_of(1)), std::nullopt);
}

}  // namespace
}  // namespace lz
