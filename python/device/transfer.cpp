#include "transfer.h"

#include <ATen/ops/from_blob.h>
#include <c10/util/Exception.h>

#include "exec/front_end.h"
#include "lazuli/lazuli.h"
#include "lazuli_tensor.h"

namespace lzdev {

at::Tensor read_to_cpu(const lz::Tensor& t, lz::CutReason reason, bool writable) {
  lz::front_end::PendingRead r = lz::front_end::schedule_read(t, reason);
  r.finish();
  const char* what = "a lazuli tensor read on the CPU";
  void* data = writable ? r.expose_host_memory(what) : const_cast<void*>(r.host_memory(what));
  auto options = at::TensorOptions().dtype(torch_dtype(t.dtype())).device(c10::kCPU);
  // The CPU tensor's deleter holds the buffer: its memory lives as long as the tensor.
  return at::from_blob(
      data, t.shape(), [keep = r.keep_alive()](void*) {}, options);
}

lz::Tensor from_cpu(const at::Tensor& cpu, const char* what) {
  std::optional<lz::DType> dt = lazuli_dtype(cpu.scalar_type());
  TORCH_CHECK_TYPE(dt.has_value(), "lazuli: ", what, " is ", cpu.scalar_type(),
                   ", a dtype the lazuli device does not have (it has bool, int32, int64, "
                   "float16, bfloat16, float32, float64)");
  if (cpu._is_zerotensor()) {  // autograd's ZeroTensor: zeros with no memory behind them
    return lz::zeros(lz::IntList(cpu.sizes().begin(), cpu.sizes().end()), *dt);
  }
  at::Tensor dense = cpu.contiguous();
  auto* keep = new at::Tensor(dense);
  return lz::from_blob(dense.data_ptr(), *dt,
                       lz::IntList(dense.sizes().begin(), dense.sizes().end()),
                       [keep] { delete keep; });
}

void rethrow_as_torch_error(const std::string& op) {
  try {
    throw;
  } catch (const c10::Error&) {
    throw;
  } catch (const lz::IndexError& e) {
    TORCH_CHECK_INDEX(false, "lazuli: ", op, ": ", e.what());
  } catch (const lz::Error& e) {
    TORCH_CHECK(false, "lazuli: ", op, ": ", e.what());
  }
}

namespace {

// The user's line for a report ("train.py:12"), or "".
std::string user_line() {
  std::vector<lz::UserFrame> frames = lz::user_frames(1);
  if (frames.empty()) return "";
  return frames[0].file + ":" + std::to_string(frames[0].line);
}

// A CPU tensor over a device tensor's value; a copy where the op may write it (a Lazuli buffer
// is never written behind Lazuli's back), else a view of the buffer.
at::Tensor to_cpu_arg(const at::Tensor& t, bool written) {
  LazuliTensorImpl* impl = impl_of(t);
  if (!impl) return t;
  at::Tensor cpu = read_to_cpu(impl->value(), lz::CutReason::HostFallback);
  return written ? cpu.clone() : cpu;
}

// A CPU result as a device tensor. One of a dtype Lazuli lacks (an opaque buffer such as batch
// norm's uint8 reserve, which only its own backward reads) stays on the CPU.
at::Tensor to_device_result(const at::Tensor& cpu) {
  if (!lazuli_dtype(cpu.scalar_type())) return cpu;
  return wrap(from_cpu(cpu, "a result"));
}

}  // namespace

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack, const std::string& name,
                  const std::string& why) {
  lz::front_end::bump_counter("fallback::" + name);
  if (lz::front_end::debug_level() > 0) {
    std::string where = user_line();
    lz::debug_write("lazuli.torch: fallback " + name + " (" + why + "): runs on the CPU, a cut" +
                    (where.empty() ? "" : " at " + where) + "\n");
  }
  const c10::FunctionSchema& schema = op.schema();
  const size_t n = schema.arguments().size();
  const size_t first = stack->size() - n;
  // Device tensors among the arguments, kept to write the op's updates back into.
  std::vector<std::pair<size_t, at::Tensor>> written;
  for (size_t i = 0; i < n; ++i) {
    c10::IValue& v = (*stack)[first + i];
    const c10::Argument& arg = schema.arguments()[i];
    bool writes = arg.alias_info() && arg.alias_info()->isWrite();
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (writes && impl_of(t)) {
        impl_of(t)->check_writable(name);
        written.emplace_back(i, t);
      }
      v = to_cpu_arg(t, writes);
    } else if (v.isTensorList()) {
      auto list = v.toTensorList();
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : list) out.push_back(to_cpu_arg(t, writes));
      v = out;
    } else if (v.isList() && !v.isIntList() && !v.isDoubleList() && !v.isBoolList()) {
      // Tensor?[]
      c10::List<c10::IValue> items = v.toList();
      c10::impl::GenericList out(items.elementType());
      for (const c10::IValue& item : items) {
        out.push_back(item.isTensor() ? c10::IValue(to_cpu_arg(item.toTensor(), writes)) : item);
      }
      v = out;
    } else if (v.isDevice() && v.toDevice().is_privateuseone()) {
      v = c10::Device(c10::kCPU);  // a factory op: make it on the CPU, bring it over
    }
  }
  std::vector<at::Tensor> cpu_written;
  for (auto& [i, t] : written) cpu_written.push_back((*stack)[first + i].toTensor());
  op.callBoxed(stack);
  // Updates of written arguments go back into their device tensors, in place.
  for (size_t k = 0; k < written.size(); ++k) {
    lz::Tensor target = impl_of(written[k].second)->value();
    target.copy_(from_cpu(cpu_written[k], "an updated argument"));
  }
  const size_t m = schema.returns().size();
  for (size_t r = 0; r < m; ++r) {
    c10::IValue& v = (*stack)[stack->size() - m + r];
    const c10::Argument& ret = schema.returns()[r];
    if (ret.alias_info() && ret.alias_info()->isWrite()) {
      // Returns an updated argument: the device tensor itself.
      for (size_t k = 0; k < written.size(); ++k) {
        if (schema.arguments()[written[k].first].alias_info()->beforeSets() ==
            ret.alias_info()->beforeSets()) {
          v = written[k].second;
        }
      }
      continue;
    }
    if (v.isTensor() && v.toTensor().defined()) {
      v = to_device_result(v.toTensor());
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : v.toTensorList()) out.push_back(to_device_result(t));
      v = out;
    }
  }
}

}  // namespace lzdev
