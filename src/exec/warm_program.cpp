#include "exec/warm_program.h"

#include "core/metrics.h"
#include "exec/device_executor.h"
#include "lazuli/error.h"
#include "tensor/lazy_tensor.h"

namespace lz {

using internal::TensorImpl;
using internal::TensorImplPtr;

WarmProgram::WarmProgram(const std::vector<Tensor>& inputs, std::string name, CutReason reason)
    : name_(std::move(name)), reason_(reason) {
  for (const Tensor& t : inputs) {
    BufferPtr b = t.defined() ? t.impl()->buffer() : nullptr;
    if (!b) throw ValueError(name_ + ": every input of a warm program must hold device data");
    input_buffers_.push_back(std::move(b));
    input_types_.emplace_back(t.dtype(), t.shape());
  }
}

void WarmProgram::compile(const std::vector<Tensor>& outputs,
                          const std::vector<std::pair<int, int>>& donate) {
  if (cap_.program.exe) throw ValueError(name_ + ": already compiled");
  std::vector<TensorImplPtr> roots;
  for (const Tensor& t : outputs) roots.push_back(t.impl());
  SyncConfig cfg;
  cfg.sync_data = false;
  cfg.compile_only = true;
  cfg.reason = reason_;
  cfg.name = name_;
  cfg.capture = &cap_;
  sync_tensors_graph(roots, cfg);
  if (!cap_.program.exe) throw ValueError(name_ + ": the outputs have nothing pending to compile");
  for (const Tensor& t : outputs) {
    int k = -1;
    for (size_t r = 0; r < cap_.roots.size(); ++r) {
      if (cap_.roots[r] == t.impl()) k = static_cast<int>(r);
    }
    if (k < 0) throw ValueError(name_ + ": an output is not pending IR (pass it aside)");
    out_root_.push_back(k);
  }
  for (const BufferPtr& p : cap_.params) {
    int source = -1;
    for (size_t i = 0; i < input_buffers_.size(); ++i) {
      if (input_buffers_[i] == p) source = static_cast<int>(i);
    }
    param_input_.push_back(source);  // -1: a constant of the recording, kept in cap_.params
  }
  for (auto [input, output] : donate) {
    if (output < 0 || output >= static_cast<int>(out_root_.size())) {
      throw ValueError(name_ + ": donation to output " + std::to_string(output) + " out of range");
    }
    const int root = out_root_[output];
    int param = -1;
    for (size_t k = 0; k < param_input_.size(); ++k) {
      if (param_input_[k] == input) param = static_cast<int>(k);
    }
    // An input the program does not read has no parameter: nothing to reuse. Types must match.
    if (param < 0 || input >= static_cast<int>(input_types_.size()) ||
        cap_.program.facts->root_types[root] != input_types_[input]) {
      continue;
    }
    donations_.emplace_back(param, root);
  }
  donated_input_.assign(input_types_.size(), false);
  for (auto [param, root] : donations_) donated_input_[param_input_[param]] = true;
  // The stand-ins' buffers are not kept: each run brings its own (a torch input's memory).
  for (size_t k = 0; k < cap_.params.size(); ++k) {
    if (param_input_[k] >= 0) cap_.params[k].reset();
  }
  input_buffers_.clear();
  cap_.roots.clear();  // the recording's tensors may go now
}

void WarmProgram::check_ready(size_t n_inputs) const {
  if (!cap_.program.exe) throw ValueError(name_ + ": not compiled");
  if (n_inputs != input_types_.size()) {
    throw ValueError(name_ + ": expected " + std::to_string(input_types_.size()) + " inputs, got " +
                     std::to_string(n_inputs));
  }
}

std::vector<Tensor> WarmProgram::run(const std::vector<Tensor>& inputs) {
  check_ready(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].dtype() != input_types_[i].first || inputs[i].shape() != input_types_[i].second) {
      throw ValueError(name_ + ": input " + std::to_string(i) + " is " +
                       std::string(dtype_name(inputs[i].dtype())) + shape_str(inputs[i].shape()) +
                       ", the program was compiled for " +
                       std::string(dtype_name(input_types_[i].first)) +
                       shape_str(input_types_[i].second));
    }
  }
  return run_params(param_slots([&](int i) {
    BufferPtr b = inputs[i].impl()->buffer();
    if (!b) throw ValueError(name_ + ": input " + std::to_string(i) + " is not device data");
    return b->slot();
  }));
}

std::vector<Tensor> WarmProgram::run_external(const std::vector<ExternalInput>& inputs) {
  check_ready(inputs.size());
  std::vector<SlotPtr> slots(inputs.size());  // one per input the program reads
  std::vector<SlotPtr> params = param_slots([&](int i) {
    if (slots[i]) return slots[i];
    const ExternalInput& in = inputs[i];
    const auto& [dtype, shape] = input_types_[i];
    if ((!in.data && numel(shape) != 0) ||
        reinterpret_cast<uintptr_t>(in.data) % dtype_size(dtype) != 0) {
      throw ValueError(name_ + ": input " + std::to_string(i) + "'s memory (" +
                       std::string(dtype_name(dtype)) + shape_str(shape) +
                       ") is null or not aligned for its dtype");
    }
    slots[i] = std::make_shared<BufferSlot>();
    slots[i]->storage =
        std::make_shared<Storage>(in.data, static_cast<size_t>(numel(shape)) * dtype_size(dtype),
                                  in.owner, DeviceId::host(), in.content_id);
    return slots[i];
  });
  return run_params(std::move(params), /*caller_waits=*/true);
}

std::vector<SlotPtr> WarmProgram::param_slots(const std::function<SlotPtr(int)>& input_slot) {
  std::vector<SlotPtr> params(cap_.params.size());
  for (size_t k = 0; k < params.size(); ++k) {
    const int i = param_input_[k];
    params[k] = i < 0 ? cap_.params[k]->slot() : input_slot(i);
  }
  return params;
}

bool WarmProgram::donates_input(size_t i) const {
  return i < donated_input_.size() && donated_input_[i];
}

std::vector<Tensor> WarmProgram::run_params(std::vector<SlotPtr> params, bool caller_waits) {
  const size_t n_params = params.size();
  ScheduledRun run;
  {
    auto lock = lock_executor();
    run = run_compiled(cap_.program, std::move(params), donations_, {}, caller_waits);
  }
  if (run.run_here) device_executor().run_here_or_wake(run.exec.get());
  std::vector<BufferPtr>& outs = run.outputs;
  LZ_COUNTER("WarmProgramRun", 1);
  note_replay(cap_.program, n_params, name_);
  std::vector<Tensor> fresh;
  fresh.reserve(outs.size());
  for (const BufferPtr& b : outs) fresh.emplace_back(TensorImpl::from_buffer(b));
  std::vector<Tensor> result;
  result.reserve(out_root_.size());
  for (int k : out_root_) result.push_back(fresh[k]);
  return result;
}

size_t WarmProgram::num_constants() const {
  size_t n = 0;
  for (int i : param_input_) n += i < 0;
  return n;
}

}  // namespace lz
