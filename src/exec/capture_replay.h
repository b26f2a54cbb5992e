// Between capture.cpp (tracing a captured function) and capture_replay.cpp (running its record
// again): the pieces both halves use. Internal to exec/.
#pragma once
#include <string>
#include <vector>

#include "exec/capture.h"
#include "tensor/lazy_tensor.h"

namespace lz::capture_detail {

// Computes these tensors' pending values before a call (cut reason compile-region-start).
void sync_before_call(const std::vector<internal::TensorImplPtr>& tensors);
// View arguments become copies (a replay reads whole buffers); returns which were replaced.
// Pending arguments are synced with them, so every argument holds device data afterwards.
std::vector<bool> materialize_args(std::vector<internal::TensorImplPtr>& args);
// One replay of `rec`; false (and *why) when it must not run and the call should trace instead.
bool replay(const CaptureRecord& rec, const std::string& name, std::vector<internal::TensorImplPtr> args,
            std::vector<internal::TensorImplPtr>* outs, std::string* why);

}  // namespace lz::capture_detail
