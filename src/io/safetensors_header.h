// The safetensors header (include/lazuli/serialize.h has the format): parsing with every check a
// loader needs before it allocates, and building the header a save writes. Pure functions over
// text and numbers; the file handling is in serialize.cpp.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/shape.h"
#include "lazuli/dtype.h"

namespace lz::io {

// The largest header accepted (the `safetensors` package's own limit): a length field beyond it
// is refused before anything is allocated for it.
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct TensorEntry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin = 0, end = 0;  // byte range in the data section, end exclusive
};

struct Header {
  std::vector<TensorEntry> entries;  // in the header's order
  std::map<std::string, std::string> metadata;
};

// "F32" for Float32, ...
std::string_view safetensors_dtype_name(DType dtype);
// Lazuli's dtype for a safetensors dtype name; nullopt when Lazuli has none.
std::optional<DType> dtype_from_safetensors(std::string_view name);

// Parses `json` as the header of a file whose data section has `data_bytes` bytes, and checks it:
// a JSON object (no duplicate keys) of entries {"dtype", "shape", "data_offsets"} and an optional
// "__metadata__" object of strings; known dtypes; shapes of non-negative integers whose byte size
// fits int64 and equals the entry's range; ranges that tile [0, data_bytes) exactly. Throws
// ValueError saying what is wrong (the caller names the file).
Header parse_header(std::string_view json, uint64_t data_bytes);

// Assigns each entry's data range (largest element size first, then in the given order, so every
// tensor starts aligned for its dtype) and returns the header text, padded with spaces so that
// 8 + its length is a multiple of 8. Entries appear in the header in the given order, after
// "__metadata__" when there is metadata. Throws ValueError for duplicate or reserved names.
std::string build_header(std::vector<TensorEntry>& entries,
                         const std::map<std::string, std::string>& metadata);

}  // namespace lz::io
