#include "exec/cut_reason.h"

namespace lz {

std::string_view cut_reason_id(CutReason r) {
  switch (r) {
    case CutReason::UserSync: return "user-sync";
    case CutReason::SyncTensors: return "sync-tensors";
    case CutReason::ValueRead: return "value-read";
    case CutReason::EagerOp: return "eager-op";
    case CutReason::CompileRegionStart: return "compile-region-start";
    case CutReason::CompileRegionEnd: return "compile-region-end";
    case CutReason::CaptureWarmup: return "capture-warmup";
    case CutReason::GraphTooLarge: return "graph-too-large";
    case CutReason::HostFallback: return "host-fallback";
    case CutReason::DataDependentShape: return "data-dependent-shape";
    case CutReason::CaptureReplay: return "capture-replay";
    case CutReason::TorchCompile: return "torch-compile";
  }
  return "unknown";
}

std::string_view cut_reason_advice(CutReason r) {
  switch (r) {
    case CutReason::UserSync: return "the step barrier; one per training step is expected";
    case CutReason::SyncTensors: return "an explicit sync of listed tensors";
    case CutReason::ValueRead:
      return "reading a value forces an execution; read less often, or read inside a step closure";
    case CutReason::EagerOp: return "eager mode runs each op at once; turn it off for speed";
    case CutReason::CompileRegionStart: return "pending work was flushed before a compiled function";
    case CutReason::CompileRegionEnd: return "the end of a compiled function";
    case CutReason::CaptureWarmup: return "a captured function is traced and compiled once";
    case CutReason::GraphTooLarge:
      return "the pending graph grew past LAZULI_MAX_PENDING_NODES; add a sync() per step";
    case CutReason::HostFallback: return "an op ran on the host; it has no compiled kernel yet";
    case CutReason::DataDependentShape:
      return "the output shape depends on values (bool mask); use where() to keep shapes static";
    case CutReason::CaptureReplay: return "a captured function's step, replayed without tracing";
    case CutReason::TorchCompile:
      return "a torch.compile graph, compiled once per input signature";
  }
  return "";
}

}  // namespace lz
