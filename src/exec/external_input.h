// A program input given as memory someone else owns (a torch tensor's): what a warm program's
// replay reads instead of a device-data tensor (exec/warm_program.h run_external). A leaf of std
// types, so the front-end header can carry it.
#pragma once
#include <cstdint>
#include <memory>

namespace lz {

struct ExternalInput {
  // numel * dtype_size bytes of the input's dtype and shape, C-contiguous, aligned for the dtype.
  void* data = nullptr;
  // Keeps `data` alive while a run reads it and, for a donated input, while its output lives.
  std::shared_ptr<void> owner;
  uint64_t content_id = 0;  // an id lent for these bytes (Storage::new_content_id), or 0
};

}  // namespace lz
