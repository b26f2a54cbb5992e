// How the cpu backend calls a compiled kernel (the arguments' layout: lower/kernel_spec.h).
#pragma once
#include <cstdint>

namespace lz::cpu {

using KernelFn = void (*)(int64_t begin, int64_t end, void* const* ptrs, const int64_t* args);

// Where a kernel with checks reports an index out of range: `report` is called (from any thread
// of the launch, at most once per row segment or output) with the failing point's key, the
// check and the index value. Kernels load `report` from offset 0 and call it with the sink
// itself, so they need no symbol of the runtime.
struct KernelErrorSink {
  void (*report)(KernelErrorSink* self, int64_t key, int64_t check, int64_t value);
};

}  // namespace lz::cpu
