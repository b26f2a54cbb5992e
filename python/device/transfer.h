// Values across the device boundary, shared by the device's kernels: a device tensor's value as a
// CPU tensor (a value read: its program runs, and the CPU tensor is a view of the buffer, no
// copy), a CPU tensor as Lazuli device data (no copy: the Lazuli tensor holds the CPU tensor),
// and the CPU fallback that runs an ATen op Lazuli does not lower.
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <string>

#include "exec/front_end.h"
#include "lazuli/tensor.h"

namespace lzdev {

// The value of `t` as a contiguous CPU tensor over its Lazuli buffer (computed first if pending:
// a cut with `reason`). The CPU tensor keeps the buffer alive. Writable only if `writable` (the
// buffer is then exposed: nothing derived from its bytes is kept).
at::Tensor read_to_cpu(const lz::Tensor& t, lz::CutReason reason, bool writable = false);
// A CPU tensor as a Lazuli tensor in the device-data state over the same memory (made
// contiguous first); the Lazuli tensor keeps the CPU tensor alive. TypeError for a dtype Lazuli
// lacks.
lz::Tensor from_cpu(const at::Tensor& cpu, const char* what);

// Runs `op` on the CPU: device tensors among its arguments cross as CPU tensors over their
// values (a cut, named `why` with the user's line under LAZULI_DEBUG), results come back as
// device tensors, and arguments the op writes get their new values. Counted as
// fallback::<name>.
void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack, const std::string& name,
                  const std::string& why);

// Registers the kernels of the device boundary (boundary_kernels.cpp): copies to and from the
// device, value reads, allocation and tensor metadata.
void register_boundary_kernels(torch::Library& m);

// Lazuli's errors as PyTorch raises them (IndexError stays IndexError; the rest RuntimeError),
// naming `op`. Rethrows the current exception; call it inside a catch block.
[[noreturn]] void rethrow_as_torch_error(const std::string& op);

}  // namespace lzdev
