// Saving and loading named tensors in the safetensors format (docs/serialization.md), so files are
// interchangeable with the `safetensors` package and PyTorch users:
//   8 bytes   N, the header's length (unsigned, little-endian)
//   N bytes   a JSON object: {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]},
//             ..., "__metadata__": {"key": "value", ...}} (optional metadata: strings only),
//             padded with spaces so the data starts 8-byte aligned
//   the rest  the tensors' bytes, little-endian, row-major; offsets are relative to the data's
//             start and must cover it exactly: no gap, no overlap, nothing after the last tensor.
// dtypes: BOOL, I32, I64, F32, F64 (Lazuli's). Loading checks everything above before allocating
// anything, so a truncated or hostile file raises an error naming the file, never crashes and never
// allocates more than the file holds.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lazuli/tensor.h"

namespace lz {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// A loaded file: its tensors in the header's order, and its "__metadata__".
struct LoadedTensors {
  NamedTensors tensors;
  std::map<std::string, std::string> metadata;
  // The tensor called `name`; throws IndexError naming the file's tensors when there is none.
  const Tensor& at(const std::string& name) const;
};

// Writes `tensors` (their values: one value read for all the pending ones) to `path`. Names must
// be unique and not "__metadata__"; tensors of any shape, views included (saved contiguous). The
// file is written beside `path` and renamed over it once complete, so a failed save leaves the old
// file, and tensors loaded from it, untouched. Throws ValueError for bad names or undefined
// tensors, Error when the file cannot be written.
void save(const NamedTensors& tensors, const std::string& path,
          const std::map<std::string, std::string>& metadata = {});

// Reads a safetensors file. Each tensor's bytes are read from the file straight into its own
// memory on the active backend's device (no staging copy on the host backends): the tensors are in
// the host state, uploaded (a hand-over on the cpu backend) the first time a graph uses them.
// Throws ValueError naming the file and the problem for a malformed file or a dtype Lazuli does not
// have, Error when the file cannot be read.
LoadedTensors load(const std::string& path);

// The "__metadata__" of a safetensors file, reading only its header.
std::map<std::string, std::string> load_metadata(const std::string& path);

}  // namespace lz
