#include "core/hash.h"

#include <cstdio>

namespace lz {

std::string Hash128::hex() const {
  char s[33];
  std::snprintf(s, sizeof(s), "%016llx%016llx", static_cast<unsigned long long>(hi),
                static_cast<unsigned long long>(lo));
  return s;
}

Hasher& Hasher::add_bytes_slow(const void* p, size_t n) {
  if (!overflow_) overflow_ = std::make_unique<std::string>(reinterpret_cast<const char*>(buf_), len_);
  overflow_->append(static_cast<const char*>(p), n);
  return *this;
}

Hash128 Hasher::digest() const {
  XXH128_hash_t h = !overflow_ ? XXH3_128bits(buf_, len_)
                                : XXH3_128bits(overflow_->data(), overflow_->size());
  return Hash128{h.low64, h.high64};
}

}  // namespace lz
