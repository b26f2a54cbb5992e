#include "backend/buffer.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "lazuli/error.h"

namespace lz {

Storage::Storage(size_t nbytes) : nbytes_(nbytes) {
  size_t rounded = ((nbytes + 63) / 64) * 64;
  if (rounded == 0) rounded = 64;
  data_ = std::aligned_alloc(64, rounded);
  if (!data_) throw std::bad_alloc();
}

Storage::~Storage() { std::free(data_); }

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
  if (slot_->producer) slot_->producer->wait();
  if (slot_->donated.load(std::memory_order_acquire)) {
    throw ExecutionError("this buffer was donated to a later program and no longer holds its value");
  }
  return slot_->storage;
}

}  // namespace lz
