// The engine of collectives recorded on device tensors: a torch.distributed backend (gloo on
// CPUs) behind Lazuli's process-group interface (src/dist/process_group.h). The step program's
// collective nodes call it from the device's executor thread (all_reduce and broadcast from the
// program's communication thread: backend/cpu/cpu_backend.cpp) with host buffers, which it wraps as
// CPU tensors (no copy) for the backend. It is a backend of its own (lazuli.torch.distributed
// creates it on its own store prefix), never the one the user's CPU collectives run on: those run
// on the user's thread, these on the executor thread, and one gloo context serves one order.
#include <torch/library.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>
#include <vector>

#include "dist/process_group.h"
#include "lazuli/error.h"
#include "lazuli/runtime.h"
#include "lazuli_tensor.h"
#include "transfer.h"

namespace lzdev {
namespace {

using lz::dist::Reduce;

class TorchEngine final : public lz::dist::ProcessGroup {
 public:
  explicit TorchEngine(c10::intrusive_ptr<c10d::Backend> backend) : backend_(std::move(backend)) {}

  int rank() const override { return backend_->getRank(); }
  int size() const override { return backend_->getSize(); }
  std::string engine() const override { return backend_->getBackendName(); }  // "gloo"

  void all_reduce(void* buf, int64_t count, lz::DType dtype, Reduce op) override {
    std::vector<at::Tensor> t{blob(buf, count, dtype)};
    c10d::AllreduceOptions o;
    o.reduceOp = reduce_op(op);
    o.timeout = timeout_;
    wait(backend_->allreduce(t, o), "all_reduce");
  }
  void all_gather(const void* in, void* out, int64_t count, lz::DType dtype) override {
    gather(in, out, count, torch_dtype(dtype), "all_gather");
  }
  void reduce_scatter(const void* in, void* out, int64_t count, lz::DType dtype,
                      Reduce op) override {
    // gloo has no reduce-scatter for every dtype: an all-reduce of a copy, then this rank's block.
    const size_t bytes = static_cast<size_t>(count) * lz::dtype_size(dtype);
    at::Tensor whole = blob(const_cast<void*>(in), count * size(), dtype).clone();
    std::vector<at::Tensor> t{whole};
    c10d::AllreduceOptions o;
    o.reduceOp = reduce_op(op);
    o.timeout = timeout_;
    wait(backend_->allreduce(t, o), "reduce_scatter");
    std::memcpy(out,
                static_cast<const char*>(whole.data_ptr()) + static_cast<size_t>(rank()) * bytes,
                bytes);
  }
  void broadcast(void* buf, int64_t count, lz::DType dtype, int root) override {
    std::vector<at::Tensor> t{blob(buf, count, dtype)};
    c10d::BroadcastOptions o;
    o.rootRank = root;
    o.timeout = timeout_;
    wait(backend_->broadcast(t, o), "broadcast");
  }
  void barrier() override {
    c10d::BarrierOptions o;
    o.timeout = timeout_;
    wait(backend_->barrier(o), "barrier");
  }
  std::vector<std::string> exchange(const std::string& record) override {
    std::string all(record.size() * static_cast<size_t>(size()), '\0');
    gather(record.data(), all.data(), static_cast<int64_t>(record.size()), at::kByte,
           "the check that every rank runs the same collectives");
    std::vector<std::string> out;
    for (int r = 0; r < size(); ++r)
      out.push_back(all.substr(static_cast<size_t>(r) * record.size(), record.size()));
    return out;
  }
  void set_timeout(double seconds) override {
    // 0 (wait forever) becomes a day: c10d's zero means "the backend's default".
    timeout_ =
        std::chrono::milliseconds(static_cast<int64_t>((seconds > 0 ? seconds : 86400.0) * 1000));
  }
  [[noreturn]] void abort(int code) override {
    // The others' next operation fails when this process's connections close.
    try {
      backend_->abort();
    } catch (...) {
    }
    std::_Exit(code);
  }

 private:
  static at::Tensor blob(void* p, int64_t count, lz::DType dtype) {
    return blob(p, count, torch_dtype(dtype));
  }
  static at::Tensor blob(void* p, int64_t count, at::ScalarType dtype) {
    return at::from_blob(p, {count}, at::TensorOptions().dtype(dtype).device(at::kCPU));
  }
  void gather(const void* in, void* out, int64_t count, at::ScalarType dtype, const char* what) {
    std::vector<at::Tensor> input{blob(const_cast<void*>(in), count, dtype)};
    std::vector<std::vector<at::Tensor>> output(1);
    const size_t bytes = static_cast<size_t>(count) * c10::elementSize(dtype);
    for (int r = 0; r < size(); ++r) {
      output[0].push_back(
          blob(static_cast<char*>(out) + static_cast<size_t>(r) * bytes, count, dtype));
    }
    c10d::AllgatherOptions o;
    o.timeout = timeout_;
    wait(backend_->allgather(output, input, o), what);
  }
  static c10d::ReduceOp reduce_op(Reduce op) {
    switch (op) {
      case Reduce::Sum:
        return c10d::ReduceOp(c10d::ReduceOp::SUM);
      case Reduce::Product:
        return c10d::ReduceOp(c10d::ReduceOp::PRODUCT);
      case Reduce::Max:
        return c10d::ReduceOp(c10d::ReduceOp::MAX);
      case Reduce::Min:
        return c10d::ReduceOp(c10d::ReduceOp::MIN);
    }
    return c10d::ReduceOp(c10d::ReduceOp::SUM);
  }
  void wait(const c10::intrusive_ptr<c10d::Work>& work, const char* op) {
    if (!work->wait(timeout_)) {
      throw std::runtime_error(std::string(op) +
                               ": the torch.distributed backend reported failure");
    }
  }

  c10::intrusive_ptr<c10d::Backend> backend_;
  std::chrono::milliseconds timeout_{std::chrono::seconds(600)};
};

// Makes the CPU backend of the process group registered as `group_name` (c10d's registry) the
// engine of Lazuli's world group; "" ends it. Programs already queued finish on the old one.
void use_process_group(const std::string& group_name) {
  try {
    std::shared_ptr<lz::dist::ProcessGroup> current = lz::dist::world();
    if (group_name.empty()) {  // a torch.distributed engine, if it is the world, goes
      if (!current || current->engine() == "mpi") return;
      // Whatever the queued programs raise (the user sees it at their own wait or value read),
      // the engine is let go.
      try {
        lz::wait();
      } catch (...) {
        lz::dist::set_world(nullptr);
        throw;
      }
      lz::dist::set_world(nullptr);
      return;
    }
    if (current && current->engine() == "mpi") {
      throw lz::Error(
          "torch.distributed on the lazuli device: Lazuli's own process group is already started "
          "on MPI (lazuli.distributed.init_process_group(\"mpi\")); one process has one group");
    }
    lz::wait();
    c10::intrusive_ptr<c10d::ProcessGroup> pg = c10d::resolve_process_group(group_name);
    lz::dist::set_world(std::make_shared<TorchEngine>(pg->getBackend(c10::DeviceType::CPU)));
  } catch (...) {
    rethrow_as_torch_error("lazuli._use_process_group");
  }
}

}  // namespace

// DistributedDataParallel's step timings for device models: host times, as CPU models get, of
// recording the forward and backward (the device runs them later, inside sync's program).
class HostTimer final : public c10d::Timer {
 public:
  explicit HostTimer(c10::Device) {}
  std::optional<int64_t> measureDifference(Event start, Event end) override {
    std::optional<int64_t> a = getTimestamp(start), b = getTimestamp(end);
    if (!a || !b || *b < *a) return std::nullopt;
    return *b - *a;
  }
};

}  // namespace lzdev

namespace c10d {
C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::kPrivateUse1, lzdev::HostTimer)
}  // namespace c10d

namespace lzdev {

TORCH_LIBRARY_FRAGMENT(lazuli, m) {
  m.def("_use_process_group(str group_name) -> ()", &use_process_group);
}

}  // namespace lzdev
