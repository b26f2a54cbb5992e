// A thread-safe LRU map from key to shared value, after LTC's cache.h.
// get() refreshes recency; add() evicts the least recently used entry past max_size and reports
// how many were evicted. One mutex guards the list and the index; values are shared_ptrs so a
// caller keeps using a value that another thread evicts.
#pragma once
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace lz {

template <typename K, typename V, typename H = std::hash<K>>
class LruCache {
 public:
  explicit LruCache(size_t max_size) : max_size_(max_size) {}

  std::shared_ptr<V> get(const K& key) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->second;
  }

  // Copies the value out under the lock (no reference count traffic); false on a miss.
  bool get_copy(const K& key, V* out) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return false;
    order_.splice(order_.begin(), order_, it->second);
    *out = *it->second->second;
    return true;
  }

  // Inserts or replaces; returns the number of entries evicted.
  size_t add(const K& key, std::shared_ptr<V> value) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      it->second->second = std::move(value);
      order_.splice(order_.begin(), order_, it->second);
      return 0;
    }
    order_.emplace_front(key, std::move(value));
    index_.emplace(key, order_.begin());
    return trim_locked();
  }

  size_t resize(size_t max_size) {
    std::lock_guard<std::mutex> l(mu_);
    max_size_ = max_size;
    return trim_locked();
  }

  void clear() {
    std::lock_guard<std::mutex> l(mu_);
    index_.clear();
    order_.clear();
  }

  size_t size() const {
    std::lock_guard<std::mutex> l(mu_);
    return index_.size();
  }

 private:
  size_t trim_locked() {
    size_t evicted = 0;
    while (index_.size() > max_size_) {
      index_.erase(order_.back().first);
      order_.pop_back();
      ++evicted;
    }
    return evicted;
  }

  using Entry = std::pair<K, std::shared_ptr<V>>;
  mutable std::mutex mu_;  // guards order_, index_, max_size_
  size_t max_size_;
  std::list<Entry> order_;  // most recent first
  std::unordered_map<K, typename std::list<Entry>::iterator, H> index_;
};

}  // namespace lz
