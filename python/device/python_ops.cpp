// What Python asks the device directly, as ops of the `lazuli` namespace (torch.ops.lazuli.*):
// the device has no pybind11 module of its own (torch's pybind11 and the one Lazuli's _C is
// built with keep separate type registries), so Python reaches it through the dispatcher.
// Every other runtime call (sync, wait, metrics) is lazuli's own: one runtime.
#include <torch/library.h>

#include "exec/front_end.h"
#include "lazuli/lazuli.h"
#include "lazuli_tensor.h"
#include "transfer.h"

namespace lzdev {
namespace {

// "device_data" | "ir" | "host" | "view": the state of a device tensor's Lazuli tensor.
std::string tensor_state(const at::Tensor& t) {
  return lz::debug::tensor_state(value_of(t, "tensor_state's argument"));
}

// Whether `t` is a tensor of this device (its impl is Lazuli's).
bool is_lazuli(const at::Tensor& t) { return impl_of(t) != nullptr; }

// The pending graph of these device tensors (text), nothing compiled or run.
std::string dump_graph(const std::vector<at::Tensor>& ts) {
  std::vector<lz::Tensor> values;
  for (const at::Tensor& t : ts) values.push_back(value_of(t, "dump_graph's argument"));
  return lz::debug::dump_graph(values);
}

// The Lazuli tensors of device tensors, under a ticket lazuli._C takes them by
// (src/tensor/handoff.h): how lazuli.torch.capture hands a call's arguments to the capture core.
int64_t put(const std::vector<at::Tensor>& ts) {
  std::vector<lz::Tensor> values;
  values.reserve(ts.size());
  for (const at::Tensor& t : ts) values.push_back(value_of(t, "lazuli._put's argument"));
  return static_cast<int64_t>(lz::internal::put_tensors(std::move(values)));
}

// Device tensors over the Lazuli tensors held under `ticket` (put there by lazuli._C): a captured
// call's arguments inside its trace, and its results.
std::vector<at::Tensor> take(int64_t ticket) {
  std::vector<at::Tensor> out;
  try {
    std::vector<lz::Tensor> values = lz::internal::take_tensors(static_cast<uint64_t>(ticket));
    out.reserve(values.size());
    for (lz::Tensor& v : values) out.push_back(wrap(std::move(v)));
  } catch (...) {
    rethrow_as_torch_error("lazuli._take");
  }
  return out;
}

}  // namespace

// CompositeImplicitAutograd (the catch-all kernel m.def registers): below autograd, before any
// backend, so the device's own fallback never sees these.
TORCH_LIBRARY(lazuli, m) {
  m.def("tensor_state(Tensor t) -> str", &tensor_state);
  m.def("is_lazuli(Tensor t) -> bool", &is_lazuli);
  m.def("dump_graph(Tensor[] ts) -> str", &dump_graph);
  m.def("_put(Tensor[] ts) -> int", &put);
  m.def("_take(int ticket) -> Tensor[]", &take);
}

}  // namespace lzdev
