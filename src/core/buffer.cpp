#include "core/buffer.h"

#include <sys/mman.h>
#include <sys/sysinfo.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <unordered_map>
#include <vector>

#include "core/config.h"
#include "core/metrics.h"
#include "lazuli/error.h"

namespace lz {

namespace {

// Freed blocks kept for reuse, by exact rounded size: a training step allocates the same sizes
// every step, and first-touching fresh pages costs about 12 us per 4 KiB here (MACHINE.md). Small
// blocks go back to malloc, which already recycles them; the cache is bounded in bytes
// (LAZULI_BUFFER_CACHE_BYTES, default a quarter of the RAM: a GPT-2-small training step frees
// and reallocates about 3 GB, and with a 1 GiB bound a quarter of its time went to the kernel
// zeroing fresh pages, bench/RESULTS.md section 9). Counters: BufferReuse, BufferFresh.
size_t max_bytes();

class BlockCache {
 public:
  static constexpr size_t kMinCached = 64 * 1024;

  void* take(size_t rounded) {
    if (rounded < kMinCached) return nullptr;
    static Counter* reuse = get_counter("BufferReuse");
    static Counter* fresh = get_counter("BufferFresh");
    std::lock_guard<std::mutex> l(mu_);
    auto it = free_.find(rounded);
    if (it == free_.end() || it->second.empty()) {
      fresh->add();
      return nullptr;
    }
    void* p = it->second.back();
    it->second.pop_back();
    bytes_ -= rounded;
    reuse->add();
    return p;
  }

  // Frees every kept block (an allocation failed: they may be what it needs).
  void release_all() {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& [size, blocks] : free_) {
      for (void* p : blocks) std::free(p);
    }
    free_.clear();
    bytes_ = 0;
  }

  bool give(void* p, size_t rounded) {
    if (rounded < kMinCached) return false;
    const size_t bound = max_bytes();
    std::lock_guard<std::mutex> l(mu_);
    if (bytes_ + rounded > bound) return false;
    free_[rounded].push_back(p);
    bytes_ += rounded;
    return true;
  }

 private:
  std::mutex mu_;  // guards free_ and bytes_
  std::unordered_map<size_t, std::vector<void*>> free_;
  size_t bytes_ = 0;
};

// The cache's bound: LAZULI_BUFFER_CACHE_BYTES, or a quarter of the RAM.
size_t max_bytes() {
  const int64_t configured = config().buffer_cache_bytes;
  if (configured >= 0) return static_cast<size_t>(configured);
  static const size_t quarter = [] {
    struct sysinfo si {};
    if (sysinfo(&si) != 0) return size_t{1} << 30;
    return static_cast<size_t>(si.totalram) * si.mem_unit / 4;
  }();
  return quarter;
}

BlockCache& block_cache() {
  static auto* c = new BlockCache();  // never destroyed: storages may die during exit
  return *c;
}

// Blocks of 2 MiB and more are huge-page aligned and ask for transparent huge pages: first
// touches of fresh 4 KiB pages cost about 12 us each here, huge pages about 30x less (MACHINE.md).
constexpr size_t kHugePage = size_t{2} << 20;

size_t round_size(size_t nbytes) {
  if (nbytes >= kHugePage) return ((nbytes + kHugePage - 1) / kHugePage) * kHugePage;
  size_t r = ((nbytes + 63) / 64) * 64;
  return r == 0 ? 64 : r;
}

void* fresh_block(size_t rounded) {
  if (rounded < kHugePage) return std::aligned_alloc(64, rounded);
  void* p = std::aligned_alloc(kHugePage, rounded);
  if (p) madvise(p, rounded, MADV_HUGEPAGE);  // advice only: failure changes nothing
  return p;
}

// RAM plus swap: a block larger than that can never be backed. Refusing it here, rather than
// asking malloc, keeps an overcommitting kernel from granting it and killing the process at the
// first touches, and keeps AddressSanitizer's allocator (which aborts on a failed huge request)
// out of it.
size_t memory_limit_bytes() {
  static const size_t limit = [] {
    struct sysinfo si {};
    if (sysinfo(&si) != 0) return SIZE_MAX;
    size_t total = 0;
    if (__builtin_add_overflow(si.totalram, si.totalswap, &total) ||
        __builtin_mul_overflow(total, si.mem_unit, &total)) {
      return SIZE_MAX;
    }
    return total;
  }();
  return limit;
}

// Content ids: 0 is "unknown", so the first is 1; 64 bits never wrap.
uint64_t next_content_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

std::atomic<Storage::RetireHook> retire_hook{nullptr};

}  // namespace

void release_buffer_cache() { block_cache().release_all(); }

void Storage::set_retire_hook(RetireHook hook) {
  retire_hook.store(hook, std::memory_order_release);
}

void Storage::retire(uint64_t id, bool lent) {
  if (id == 0) return;
  // Most Storages never lend nor derive: a plain load spares them the read-modify-write.
  const bool derived = derived_.load(std::memory_order_acquire) &&
                       derived_.exchange(false, std::memory_order_acq_rel);
  if (lent || derived) retire_content_id(id);
}

bool Storage::take_lent() {
  return lent_.load(std::memory_order_acquire) && lent_.exchange(false, std::memory_order_acq_rel);
}

uint64_t Storage::new_content_id() { return next_content_id(); }

void Storage::retire_content_id(uint64_t id) {
  if (id == 0) return;
  if (RetireHook hook = retire_hook.load(std::memory_order_acquire)) hook(id);
}

void Storage::contents_changed() {
  uint64_t old = content_id_.load(std::memory_order_acquire);
  do {
    if (old == 0) return;  // unknown stays unknown
  } while (!content_id_.compare_exchange_weak(old, next_content_id(), std::memory_order_acq_rel));
  // The new id is Lazuli's own: the owner's lent id names bytes that are gone.
  retire(old, take_lent());
}

void Storage::expose() {
  const uint64_t old = content_id_.exchange(0, std::memory_order_acq_rel);
  retire(old, take_lent());
}

Storage::Storage(size_t nbytes) : nbytes_(nbytes), content_id_(next_content_id()) {
  if (nbytes > memory_limit_bytes() - kHugePage) {  // also keeps round_size from wrapping
    throw OutOfMemoryError("cannot allocate " + bytes_str(static_cast<double>(nbytes)) +
                           ": more than this machine's RAM and swap together, " +
                           bytes_str(static_cast<double>(memory_limit_bytes())));
  }
  size_t rounded = round_size(nbytes);
  data_ = block_cache().take(rounded);
  if (!data_) data_ = fresh_block(rounded);
  if (!data_) {
    block_cache().release_all();  // kept blocks may be what the system is missing
    data_ = fresh_block(rounded);
  }
  if (!data_) {
    throw OutOfMemoryError("cannot allocate " + bytes_str(static_cast<double>(nbytes)) +
                           ": the system is out of memory");
  }
}

std::string DeviceId::str() const {
  return type == DeviceType::Host ? std::string("host") : "cuda:" + std::to_string(index);
}

Storage::Storage(void* data, size_t nbytes, std::shared_ptr<void> owner, DeviceId device,
                 uint64_t lent_id)
    : data_(data), nbytes_(nbytes), device_(device), owner_(std::move(owner)), content_id_(lent_id),
      lent_(lent_id != 0) {
  if (!owner_) owner_ = std::shared_ptr<void>(data, [](void*) {});  // still external: never freed
}

Storage::~Storage() {
  // A lent id outlives this Storage: its owner lends the same bytes again under it.
  if (!lent_.load(std::memory_order_acquire)) retire(content_id_.load(std::memory_order_acquire));
  if (owner_) return;  // external memory: releasing owner_ is all there is to do
  if (!block_cache().give(data_, round_size(nbytes_))) std::free(data_);
}

void Execution::complete(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> l(mu_);
    done_ = true;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

void Execution::wait() const {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return done_; });
  if (error_) std::rethrow_exception(error_);
}

void Execution::wait_done() const {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return done_; });
}

bool Execution::wait_for_ms(int ms) const {
  std::unique_lock<std::mutex> l(mu_);
  return cv_.wait_for(l, std::chrono::milliseconds(ms), [&] { return done_; });
}

bool Execution::done() const {
  std::lock_guard<std::mutex> l(mu_);
  return done_;
}

std::exception_ptr Execution::error() const {
  std::lock_guard<std::mutex> l(mu_);
  return error_;
}

DeviceBuffer::DeviceBuffer(DType dtype, Shape shape, std::shared_ptr<Storage> storage)
    : dtype_(dtype), shape_(std::move(shape)), slot_(std::make_shared<BufferSlot>()) {
  slot_->storage = std::move(storage);
}

DeviceBuffer::DeviceBuffer(DType dtype, Shape shape, std::shared_ptr<Execution> producer)
    : dtype_(dtype), shape_(std::move(shape)), slot_(std::make_shared<BufferSlot>()) {
  slot_->producer = std::move(producer);
}

size_t DeviceBuffer::nbytes() const { return static_cast<size_t>(numel(shape_)) * dtype_size(dtype_); }

const std::shared_ptr<Storage>& DeviceBuffer::wait() const {
  if (slot_->producer) slot_->producer->wait_done();
  if (slot_->error) std::rethrow_exception(slot_->error);
  if (slot_->donated.load(std::memory_order_acquire)) {
    throw ExecutionError("this buffer was donated to a later program and no longer holds its value");
  }
  return slot_->storage;
}

}  // namespace lz
