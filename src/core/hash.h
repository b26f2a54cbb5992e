// 128-bit hashes (XXH3-128). Node hashes, dag hashes and graph hashes are all Hash128.
// A Hasher accumulates typed fields; equal field sequences give equal hashes on every run and
// machine of the same endianness, so hashes may key the persistent caches.
#pragma once
#include <xxhash.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

namespace lz {

struct Hash128 {
  uint64_t lo = 0, hi = 0;
  bool operator==(const Hash128& o) const { return lo == o.lo && hi == o.hi; }
  bool operator!=(const Hash128& o) const { return !(*this == o); }
  std::string hex() const;
};

struct Hash128Hasher {  // for unordered containers
  size_t operator()(const Hash128& h) const { return static_cast<size_t>(h.lo ^ (h.hi * 31)); }
};

// Small fixed buffer hashed in one XXH3 call: op recording hashes a few dozen bytes per node, so
// this avoids the streaming state's setup cost. Falls back to streaming when it overflows.
class Hasher {
 public:
  Hasher() = default;
  // Inline: op recording calls this a dozen times per node with a few bytes each.
  Hasher& add_bytes(const void* p, size_t n) {
    if (len_ + n <= kInline && !overflow_) {
      std::memcpy(buf_ + len_, p, n);
      len_ += n;
      return *this;
    }
    return add_bytes_slow(p, n);
  }
  template <typename T>
  Hasher& add(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    return add_bytes(&v, sizeof(T));
  }
  Hasher& add(const Hash128& h) { return add_bytes(&h, sizeof(h)); }
  Hasher& add_str(std::string_view s) {
    add<uint64_t>(s.size());
    return add_bytes(s.data(), s.size());
  }
  Hash128 digest() const;

 private:
  Hasher& add_bytes_slow(const void* p, size_t n);
  static constexpr size_t kInline = 192;
  unsigned char buf_[kInline];
  size_t len_ = 0;
  std::unique_ptr<std::string> overflow_;  // used only past kInline bytes
};

}  // namespace lz
