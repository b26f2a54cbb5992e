#include "backend/cpu/conv_weights.h"

#include <list>
#include <unordered_map>

#include "core/config.h"
#include "core/metrics.h"

namespace lz::cpu {

// One blocked copy: made at most once (the first part to need it), read by any number.
struct BlockedWeights {
  explicit BlockedWeights(size_t n) : nbytes(n) {}
  const size_t nbytes;
  std::once_flag made;
  std::shared_ptr<Storage> memory;  // set by the maker (Storage: freed blocks are reused warm)
};

namespace {

struct Key {
  uint64_t content_id;
  int64_t offset;
  dnnl::memory::desc plain, blocked;
  bool operator==(const Key& o) const {
    return content_id == o.content_id && offset == o.offset && plain == o.plain &&
           blocked == o.blocked;
  }
};

// The copies kept across calls, least recently used evicted first. Holders (a running call's
// CallWeights) keep an evicted copy alive until they finish.
class WeightCache {
 public:
  // The kept copy for `k`, added (not yet made) on a miss; a fresh unkept one when it cannot be
  // kept (larger than the bound). *kept says which.
  std::shared_ptr<BlockedWeights> find_or_add(const Key& k, size_t nbytes, bool* kept) {
    const size_t bound = static_cast<size_t>(config().conv_weight_cache_bytes);
    std::lock_guard<std::mutex> l(mu_);
    auto [b, e] = by_id_.equal_range(k.content_id);
    for (auto it = b; it != e; ++it) {
      if (it->second->key == k) {
        lru_.splice(lru_.begin(), lru_, it->second);
        *kept = true;
        return it->second->copy;
      }
    }
    auto copy = std::make_shared<BlockedWeights>(nbytes);
    *kept = nbytes <= bound;
    if (!*kept) return copy;
    lru_.push_front({k, copy});
    by_id_.emplace(k.content_id, lru_.begin());
    bytes_ += nbytes;
    while (bytes_ > bound) erase(std::prev(lru_.end()));
    return copy;
  }

  // Drops the copies of a content id that can never be asked for again.
  void retire(uint64_t id) {
    std::lock_guard<std::mutex> l(mu_);
    auto [b, e] = by_id_.equal_range(id);
    std::vector<std::list<Item>::iterator> items;
    for (auto it = b; it != e; ++it) items.push_back(it->second);
    for (auto it : items) erase(it);
  }

  void clear() {
    std::lock_guard<std::mutex> l(mu_);
    lru_.clear();
    by_id_.clear();
    bytes_ = 0;
  }

  size_t bytes() {
    std::lock_guard<std::mutex> l(mu_);
    return bytes_;
  }

 private:
  struct Item {
    Key key;
    std::shared_ptr<BlockedWeights> copy;
  };

  void erase(std::list<Item>::iterator item) {
    auto [b, e] = by_id_.equal_range(item->key.content_id);
    for (auto it = b; it != e; ++it) {
      if (it->second == item) {
        by_id_.erase(it);
        break;
      }
    }
    bytes_ -= item->copy->nbytes;
    lru_.erase(item);
  }

  std::mutex mu_;        // guards everything below
  std::list<Item> lru_;  // most recently used first
  std::unordered_multimap<uint64_t, std::list<Item>::iterator> by_id_;
  size_t bytes_ = 0;
};

WeightCache& weight_cache() {
  static WeightCache* c = [] {
    auto* cache = new WeightCache();  // never destroyed: storages may die during exit
    Storage::set_retire_hook([](uint64_t id) { weight_cache().retire(id); });
    return cache;
  }();
  return *c;
}

}  // namespace

CallWeights::CallWeights(const Storage* storage)
    : storage_(storage), content_id_(storage ? storage->content_id() : 0) {}

CallWeights::~CallWeights() = default;

const void* CallWeights::get(int64_t offset, const dnnl::memory::desc& plain,
                             const dnnl::memory::desc& blocked,
                             const std::function<void(void*)>& make) {
  static Counter* reorders = get_counter("ConvWeightReorder");
  static Counter* reuses = get_counter("ConvWeightReuse");
  std::shared_ptr<BlockedWeights> copy;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (const Use& u : uses_) {
      if (u.offset == offset && u.plain == plain && u.blocked == blocked) copy = u.copy;
    }
    if (!copy) {
      const size_t nbytes = blocked.get_size();
      bool kept = false;
      if (content_id_ != 0) {
        copy = weight_cache().find_or_add({content_id_, offset, plain, blocked}, nbytes, &kept);
      } else {
        copy = std::make_shared<BlockedWeights>(nbytes);
      }
      // Marked after the copy is in the cache: a retire from now on reaches it.
      if (kept) storage_->note_derived();
      uses_.push_back({offset, plain, blocked, copy});
    }
  }
  bool made_here = false;
  std::call_once(copy->made, [&] {
    auto memory = std::make_shared<Storage>(copy->nbytes);
    make(memory->data());
    copy->memory = std::move(memory);
    made_here = true;
  });
  (made_here ? reorders : reuses)->add();
  return copy->memory->data();
}

size_t conv_weight_cache_bytes() { return weight_cache().bytes(); }

void clear_conv_weight_cache() { weight_cache().clear(); }

}  // namespace lz::cpu
