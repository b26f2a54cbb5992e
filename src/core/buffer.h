// Device memory and placeholders.
//
// Storage is a block of 64-byte-aligned memory. A DeviceBuffer is what a tensor in the device-data
// state holds: dtype, shape, and a Storage that may not exist yet, because the execution that
// fills it is still queued or running (a placeholder). Readers call wait(), which blocks until the
// producing Execution finishes and rethrows the buffer's own error: a program that fails poisons
// only the outputs that depended on what failed (exec/graph_executor.cpp, run_program). Ownership:
// tensors and DeviceData IR nodes hold shared_ptr<DeviceBuffer>; use counts decide donation
// (exec/graph_executor.cpp, find_donations).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

#include "core/shape.h"
#include "lazuli/device.h"
#include "lazuli/dtype.h"

namespace lz {

// Contents identity (content_id): caches of something derived from a Storage's bytes (the
// cpu backend's oneDNN-blocked copies of convolution weights, backend/cpu/conv_weights.h) key
// what they keep by it. It is a number unique in the process and never reused, so memory freed
// and handed to a new Storage (the block cache) is a new identity; contents_changed() renews it
// whenever the bytes may have changed after anyone read them: the executor calls it on every
// output storage of a program once the program has run (a donated parameter's storage then
// holds new contents), Backend::copy on its destination. Contract: code that writes a Storage
// other than filling a new one before handing it out calls contents_changed() after writing,
// before anyone may read it again. Memory someone else may write behind
// Lazuli's back has content_id 0, "unknown", and nothing derived from it may be kept: external
// memory (a numpy array, a torch tensor, from_blob) from birth, and Lazuli's own memory once it
// has been handed out for writing (expose(): a numpy view, an address given to torch).
// Lent ids: the owner of external memory that can see every write to it (the torch bridge, through
// torch's version counters) may issue a content id for it (new_content_id()) and pass it to the
// Storage it lends; it promises to call retire_content_id() before the bytes change behind
// Lazuli's back. A lent id outlives the Storage (the next call lends the same memory again under
// the same id), so ~Storage does not retire it; a write by Lazuli (contents_changed, expose) does.
class Storage {
 public:
  explicit Storage(size_t nbytes);
  // Memory someone else owns (a numpy array, a torch tensor's storage, a DLPack tensor): used in
  // place, never freed here; `owner` keeps it alive until this Storage dies (give it the
  // deleter: `std::shared_ptr<void>(ctx, release)`). It must be aligned for its dtype and stay
  // valid and unmoved while `owner` lives. `device` says where the bytes are.
  // `lent_id`: a content id the owner issued for these bytes (see above); 0: unknown.
  Storage(void* data, size_t nbytes, std::shared_ptr<void> owner, DeviceId device = DeviceId::host(),
          uint64_t lent_id = 0);
  ~Storage();
  bool external() const { return owner_ != nullptr; }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  DeviceId device() const { return device_; }

  uint64_t content_id() const { return content_id_.load(std::memory_order_acquire); }
  // The bytes may have changed: a new content_id (0 stays 0).
  void contents_changed();
  // The memory is handed out for writing outside Lazuli: content_id is 0 from now on.
  void expose();
  // A cache keeps something derived from the current content_id: when that id is retired
  // (renewed, exposed, or the Storage dies) the retire hook hears it, so the cache can free it
  // early. Best effort: a cache must stay bounded without it.
  void note_derived() const { derived_.store(true, std::memory_order_release); }
  // The hook called with each retired id that note_derived() marked; one per process, set once by
  // the cache that needs it. It may run on any thread, inside ~Storage.
  using RetireHook = void (*)(uint64_t content_id);
  static void set_retire_hook(RetireHook hook);
  // A content id for an owner to lend with its memory: unique in the process, never reused.
  static uint64_t new_content_id();
  // The owner of a lent id says the bytes it names may change: whatever was derived from them
  // is dropped (the retire hook hears `id`).
  static void retire_content_id(uint64_t id);

 private:
  // `lent`: the id was lent by the owner, who may have derived things under it through another
  // Storage: the hook hears it whether or not this one was marked.
  void retire(uint64_t id, bool lent = false);
  // Clears lent_ and says whether it was set (exactly one caller sees true).
  bool take_lent();

  void* data_ = nullptr;
  size_t nbytes_ = 0;
  DeviceId device_;
  std::shared_ptr<void> owner_;  // set for external memory
  std::atomic<uint64_t> content_id_{0};
  mutable std::atomic<bool> derived_{false};
  std::atomic<bool> lent_{false};  // content_id_ is the owner's lent id
};

// Frees every block the Storage block cache keeps (core/buffer.cpp) back to the system.
void release_buffer_cache();

// One scheduled run of a program. Completed exactly once, with or without an error.
class Execution {
 public:
  void complete(std::exception_ptr error);
  // Blocks until completed; rethrows the error (as an ExecutionError) if there was one.
  void wait() const;
  // Blocks until completed; never throws (the error, if any, is error()).
  void wait_done() const;
  // Waits at most `ms` milliseconds; true when completed (does not throw).
  bool wait_for_ms(int ms) const;
  bool done() const;
  std::exception_ptr error() const;

 private:
  mutable std::mutex mu_;  // guards done_ and error_
  mutable std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

// What a queued program needs of a buffer: the memory (filled when the producing program runs),
// the producer, whether a later program took the memory, and the error that left it without a
// value. `storage` and `error` are written by the producing program before it completes and read
// only after it has (Execution's mutex orders them). DeviceBuffer owns one; the executor
// holds only slots, so a queued or running program never counts as a reference to the
// DeviceBuffer, and donation decisions (DeviceBuffer use counts) do not depend on timing.
struct BufferSlot {
  std::shared_ptr<Storage> storage;
  std::shared_ptr<Execution> producer;
  std::atomic<bool> donated{false};
  std::exception_ptr error;  // set: the producer failed to compute this buffer
};
using SlotPtr = std::shared_ptr<BufferSlot>;

class DeviceBuffer {
 public:
  // A ready buffer.
  DeviceBuffer(DType dtype, Shape shape, std::shared_ptr<Storage> storage);
  // A placeholder filled by `producer` (the slot's storage is set before producer completes).
  DeviceBuffer(DType dtype, Shape shape, std::shared_ptr<Execution> producer);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  size_t nbytes() const;
  // Waits for the producer; throws ExecutionError if it could not compute this buffer (its
  // program failed on something this value depends on) or the buffer was donated.
  const std::shared_ptr<Storage>& wait() const;
  const std::shared_ptr<Execution>& producer() const { return slot_->producer; }
  const SlotPtr& slot() const { return slot_; }

  // The tensor this buffer is the data of (for donation matching); 0 = none.
  int64_t owner_tensor_id = 0;
  // Where its tensor was created ("file:line"), when debugging records creation sites.
  std::shared_ptr<const std::string> created_at;

 private:
  DType dtype_;
  Shape shape_;
  SlotPtr slot_;
};

using BufferPtr = std::shared_ptr<DeviceBuffer>;

}  // namespace lz
