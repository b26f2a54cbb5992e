// Why an execution happened. Every execution carries one reason; each has a stable short id (used
// in logs, debug output and tests) and one line of advice.
#pragma once
#include <string_view>

namespace lz {

enum class CutReason : uint8_t {
  UserSync,          // sync(): the step barrier
  SyncTensors,       // sync_tensors(ts)
  ValueRead,         // item / numpy / tolist / print / bool / control flow on a value
  EagerOp,           // eager mode runs every op
  CompileRegionStart,
  CompileRegionEnd,
  CaptureWarmup,
  GraphTooLarge,     // the pending graph passed LAZULI_MAX_PENDING_NODES
  HostFallback,
  DataDependentShape,
  CaptureReplay,     // a captured function's program, replayed without tracing
  TorchCompile,      // a graph torch.compile handed over, compiled once per input signature
};
constexpr CutReason kLastCutReason = CutReason::TorchCompile;

std::string_view cut_reason_id(CutReason r);
std::string_view cut_reason_advice(CutReason r);

}  // namespace lz
