// What makes "lazuli" a PyTorch device (PrivateUse1): its device guard, its hooks (the device is
// available, one device, its default generator) and its generator, whose seed is Lazuli's RNG
// seed (a device scalar: reseeding never recompiles). Registered when this object is loaded,
// which only lazuli.torch.device() does: the hooks make the device PyTorch's current accelerator
// (torch.accelerator, DataLoader's pin_memory target), so they must never come from an import.
//
// Streams and events: Lazuli orders the programs of a device on one executor thread, so there
// is one stream per device and events record nothing (a wait is a Lazuli wait: sync or a value
// read).
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <random>

#include "lazuli/lazuli.h"

namespace lzdev {
namespace {

constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;

struct LazuliGuard final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kType; }
  c10::Device exchangeDevice(c10::Device) const override { return c10::Device(kType, 0); }
  c10::Device getDevice() const override { return c10::Device(kType, 0); }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.index() <= 0, "lazuli: there is one device, lazuli:0; got ", d);
  }
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, c10::Device(kType, d.index() < 0 ? 0 : d.index()));
  }
  c10::Stream getDefaultStream(c10::Device d) const override { return getStream(d); }
  c10::Stream exchangeStream(c10::Stream s) const override { return s; }
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }
  // Events: nothing to record on one in-order stream.
  void record(void**, const c10::Stream&, const c10::DeviceIndex,
              const c10::EventFlag) const override {}
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void*, const c10::DeviceIndex) const noexcept override {}
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override { lz::wait(); }
  void synchronizeDevice(const c10::DeviceIndex) const override { lz::wait(); }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, LazuliGuard);

// torch.manual_seed reaches the device through lazuli.torch's device module (manual_seed_all);
// this generator serves ops given a generator argument and torch.lazuli.get_rng_state.
class LazuliGenerator final : public c10::GeneratorImpl {
 public:
  explicit LazuliGenerator(c10::DeviceIndex index)
      : c10::GeneratorImpl(c10::Device(kType, index),
                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {}
  void set_current_seed(uint64_t seed) override {
    seed_ = seed;
    lz::manual_seed(static_cast<int64_t>(seed));
  }
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override {
    uint64_t s = std::random_device()();
    set_current_seed(s);
    return s;
  }
  void set_state(const c10::TensorImpl& state) override {
    TORCH_CHECK(state.numel() == 1 && state.itemsize() == 8,
                "lazuli: an RNG state is one int64 seed (get_rng_state's)");
    // The state is a CPU tensor of torch's (get_rng_state returned it).
    uint64_t s = *static_cast<const uint64_t*>(state.data());
    set_current_seed(s);
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    auto state = c10::make_intrusive<c10::TensorImpl>(
        c10::Storage(c10::Storage::use_byte_size_t(), 8, c10::GetCPUAllocator(), true),
        c10::DispatchKeySet(c10::DispatchKey::CPU), caffe2::TypeMeta::Make<uint8_t>());
    state->set_sizes_contiguous({8});
    *static_cast<uint64_t*>(state->mutable_data()) = seed_;
    return state;
  }

 private:
  LazuliGenerator* clone_impl() const override {
    auto* g = new LazuliGenerator(device().index());
    g->seed_ = seed_;
    g->offset_ = offset_;
    return g;
  }

  uint64_t seed_ = 67280421310721;  // torch's default_rng_seed_val
  uint64_t offset_ = 0;
};

const at::Generator& default_generator() {
  static at::Generator g = at::make_generator<LazuliGenerator>(0);
  return g;
}

struct LazuliHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return 1; }
  c10::DeviceIndex getCurrentDevice() const override { return 0; }
  void setCurrentDevice(c10::DeviceIndex) const override {}
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex) const override { return 0; }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex) const override { return 0; }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex) const override {
    return default_generator();
  }
  at::Generator getNewGenerator(c10::DeviceIndex index) const override {
    return at::make_generator<LazuliGenerator>(index < 0 ? 0 : index);
  }
  // Host memory a DataLoader pins for the device: plain CPU memory (uploads copy it anyway).
  at::Allocator* getPinnedMemoryAllocator() const override { return c10::GetCPUAllocator(); }
  bool isPinnedPtr(const void*) const override { return false; }
  at::Device getDeviceFromPtr(void*) const override {
    TORCH_CHECK(false, "lazuli: device tensors have no memory a pointer could name");
  }
  // A device tensor's storage holds no bytes (it only says which tensors alias: lazuli_tensor.h)
  // and its values live in Lazuli's tensor, so resizing it changes nothing. FSDP2 frees and
  // reallocates unsharded parameters this way; on this device the values stay where they are.
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t) const override {
    TORCH_CHECK(storage.nbytes() == 0 && storage.data() == nullptr,
                "lazuli: this storage is not a device tensor's; it cannot be resized here");
  }
};

// Device tensors have no storage (lazuli_tensor.h); something asking for device memory (a
// storage moved to the device: torch.load(..., map_location="lazuli")) gets a clear error, not
// a null allocator.
struct NoDeviceMemory final : public c10::Allocator {
  c10::DataPtr allocate(size_t) override {
    TORCH_CHECK(false,
                "lazuli: device tensors have no storage of their own; load with "
                "map_location='cpu' and move the result with .to('lazuli') (or "
                "model.load_state_dict, which copies into the device's tensors)");
  }
  void copy_data(void*, const void*, std::size_t) const override {
    TORCH_CHECK(false, "lazuli: device tensors have no storage of their own");
  }
};

struct Registrar {
  Registrar() {
    static LazuliHooks hooks;
    at::RegisterPrivateUse1HooksInterface(&hooks);
    static NoDeviceMemory no_memory;
    c10::SetAllocator(kType, &no_memory);
  }
};
const Registrar registrar;

}  // namespace
}  // namespace lzdev
