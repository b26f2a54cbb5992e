// The safetensors header: parse and check, or build. JSON through nlohmann-json (Debian's
// nlohmann-json3-dev, docs/dependencies.md); the checks are this file's.
#include "io/safetensors_header.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "lazuli/error.h"

namespace lz::io {
namespace {

using Json = nlohmann::ordered_json;  // keeps the header's order: a flat state dict loads in order

constexpr const char* kMetadataKey = "__metadata__";

struct DTypeName {
  DType dtype;
  std::string_view name;
};
constexpr DTypeName kDTypes[] = {
    {DType::Bool, "BOOL"},   {DType::Int32, "I32"},   {DType::Int64, "I64"},
    {DType::Float32, "F32"}, {DType::Float64, "F64"}, {DType::Float16, "F16"},
    {DType::BFloat16, "BF16"},
};
// Valid safetensors dtypes Lazuli has no tensors of: named as such in the error, not as unknown.
constexpr std::string_view kForeignDTypes[] = {
    "U8",      "I8",      "U16",     "I16",     "U32", "U64",
    "F8_E5M2", "F8_E4M3", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4", "C64"};

[[noreturn]] void fail(const std::string& what) { throw ValueError(what); }

// Lazuli tensors have at most this many dims in a file (no real model comes near it); it keeps a
// header of a million 1s from becoming a tensor.
constexpr size_t kMaxFileRank = 64;

// A JSON value for an error message, cut to a readable length (invalid UTF-8 shown replaced).
std::string brief(const Json& v) {
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  return s.size() <= 80 ? s : s.substr(0, 77) + "...";
}
std::string named(std::string_view s) { return brief(Json(std::string(s))); }

uint64_t unsigned_field(const Json& v, const std::string& tensor, const char* field) {
  if (!v.is_number_unsigned()) {
    fail("tensor " + named(tensor) + ": " + field + " must hold non-negative integers, got " +
         brief(v));
  }
  return v.get<uint64_t>();
}

TensorEntry parse_entry(const std::string& name, const Json& info) {
  if (!info.is_object()) fail("tensor " + named(name) + ": expected an object, got " + brief(info));
  for (const auto& [key, value] : info.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      fail("tensor " + named(name) + ": unexpected field " + named(key) +
           " (expected dtype, shape, data_offsets)");
    }
  }
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!info.contains(field)) fail("tensor " + named(name) + ": missing field \"" + field + "\"");
  }
  TensorEntry e;
  e.name = name;
  const Json& dt = info["dtype"];
  if (!dt.is_string()) fail("tensor " + named(name) + ": dtype must be a string, got " + brief(dt));
  std::string dts = dt.get<std::string>();
  std::optional<DType> d = dtype_from_safetensors(dts);
  if (!d) {
    bool foreign = std::find(std::begin(kForeignDTypes), std::end(kForeignDTypes), dts) !=
                   std::end(kForeignDTypes);
    fail("tensor " + named(name) + ": " + (foreign ? "dtype " : "unknown dtype ") + named(dts) +
         (foreign ? " is not supported by Lazuli" : "") +
         " (Lazuli reads BOOL, I32, I64, F16, BF16, F32, F64)");
  }
  e.dtype = *d;

  const Json& shape = info["shape"];
  if (!shape.is_array())
    fail("tensor " + named(name) + ": shape must be a list, got " + brief(shape));
  if (shape.size() > kMaxFileRank) {
    fail("tensor " + named(name) + ": " + std::to_string(shape.size()) + " dims (at most " +
         std::to_string(kMaxFileRank) + ")");
  }
  // The tensor must be able to exist: dims (a 0 counted as 1) times the element size fit int64,
  // as every Lazuli tensor's must (core/shape.h, check_tensor_size).
  uint64_t extent = dtype_size(e.dtype), count = 1;
  for (const Json& dim : shape) {
    uint64_t n = unsigned_field(dim, name, "shape");
    if (__builtin_mul_overflow(extent, std::max<uint64_t>(n, 1), &extent) ||
        extent > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail("tensor " + named(name) + ": shape " + brief(shape) + " is too large for a tensor");
    }
    count *= n;  // <= extent / itemsize: cannot overflow
    e.shape.push_back(static_cast<int64_t>(n));
  }
  const Json& off = info["data_offsets"];
  if (!off.is_array() || off.size() != 2) {
    fail("tensor " + named(name) + ": data_offsets must be [begin, end], got " + brief(off));
  }
  e.begin = unsigned_field(off[0], name, "data_offsets");
  e.end = unsigned_field(off[1], name, "data_offsets");
  if (e.end < e.begin) {
    fail("tensor " + named(name) + ": data_offsets " + brief(off) + " end before they begin");
  }
  uint64_t nbytes = count * dtype_size(e.dtype);
  if (e.end - e.begin != nbytes) {
    fail("tensor " + named(name) + ": data_offsets " + brief(off) + " hold " +
         std::to_string(e.end - e.begin) + " bytes, but " + std::string(dts) + " " +
         shape_str(e.shape) + " needs " + std::to_string(nbytes));
  }
  return e;
}

std::map<std::string, std::string> parse_metadata(const Json& m) {
  if (!m.is_object()) fail("__metadata__ must be an object of strings, got " + brief(m));
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : m.items()) {
    if (!value.is_string()) {
      fail("__metadata__[" + named(key) + "] must be a string, got " + brief(value));
    }
    out[key] = value.get<std::string>();
  }
  return out;
}

// The ranges must tile the data section: sorted by begin, each starts where the last ended, the
// last ends at its end. This rules out overlaps (two tensors sharing bytes), gaps (bytes no tensor
// owns) and trailing bytes, as the safetensors package does.
void check_layout(std::vector<const TensorEntry*> order, uint64_t data_bytes) {
  std::stable_sort(order.begin(), order.end(), [](const TensorEntry* a, const TensorEntry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t at = 0;
  for (const TensorEntry* e : order) {
    if (e->begin != at) {
      std::string range = "[" + std::to_string(e->begin) + ", " + std::to_string(e->end) + ")";
      if (e->begin < at)
        fail("tensor " + named(e->name) + ": bytes " + range + " overlap another tensor's");
      fail("tensor " + named(e->name) + ": bytes " + range + " leave a gap after byte " +
           std::to_string(at) + " that no tensor owns");
    }
    at = e->end;
  }
  if (at != data_bytes) {
    if (at > data_bytes) {
      fail("the tensors need " + std::to_string(at) + " bytes of data, the file holds " +
           std::to_string(data_bytes) + " (truncated?)");
    }
    fail("the file holds " + std::to_string(data_bytes - at) +
         " bytes after the last tensor's data");
  }
}

}  // namespace

std::string_view safetensors_dtype_name(DType dtype) {
  for (const auto& d : kDTypes) {
    if (d.dtype == dtype) return d.name;
  }
  throw Error("internal: no safetensors name for dtype " + std::string(dtype_name(dtype)));
}

std::optional<DType> dtype_from_safetensors(std::string_view name) {
  for (const auto& d : kDTypes) {
    if (d.name == name) return d.dtype;
  }
  return std::nullopt;
}

Header parse_header(std::string_view text, uint64_t data_bytes) {
  if (text.empty() || text.front() != '{') {
    fail("the header does not start with '{' (not a safetensors file?)");
  }
  // Duplicate keys would let two readers see different files; nesting deeper than the format's
  // (object -> entry -> shape) is refused as soon as it opens.
  std::vector<std::set<std::string>> keys;
  auto check = [&keys](int depth, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        if (depth > 2) fail("the header nests deeper than the format allows");
        if (event == Json::parse_event_t::object_start) keys.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        keys.pop_back();
        break;
      case Json::parse_event_t::key:
        if (!keys.back().insert(parsed.get<std::string>()).second) {
          fail("the header has the key " + brief(parsed) + " twice");
        }
        break;
      default:
        break;
    }
    return true;
  };
  Json root;
  try {
    root = Json::parse(text.begin(), text.end(), check);
  } catch (const Json::exception& e) {
    fail(std::string("the header is not valid JSON: ") + e.what());
  }
  if (!root.is_object()) fail("the header is not a JSON object");
  Header h;
  std::vector<const TensorEntry*> order;
  h.entries.reserve(root.size());
  for (const auto& [name, info] : root.items()) {
    if (name == kMetadataKey) {
      h.metadata = parse_metadata(info);
    } else {
      h.entries.push_back(parse_entry(name, info));
    }
  }
  for (const TensorEntry& e : h.entries) order.push_back(&e);
  check_layout(std::move(order), data_bytes);
  return h;
}

std::string build_header(std::vector<TensorEntry>& entries,
                         const std::map<std::string, std::string>& metadata) {
  std::set<std::string_view> names;
  for (const TensorEntry& e : entries) {
    if (e.name == kMetadataKey) fail("the name \"__metadata__\" is reserved by the format");
    if (!names.insert(e.name).second) fail("the name " + named(e.name) + " is used twice");
  }
  // Largest elements first: each tensor's offset is then a multiple of its element size, and the
  // data section starts 8-byte aligned, so a reader can use the bytes in place.
  std::vector<TensorEntry*> layout;
  for (TensorEntry& e : entries) layout.push_back(&e);
  std::stable_sort(layout.begin(), layout.end(), [](const TensorEntry* a, const TensorEntry* b) {
    return dtype_size(a->dtype) > dtype_size(b->dtype);
  });
  uint64_t at = 0;
  for (TensorEntry* e : layout) {
    uint64_t nbytes = static_cast<uint64_t>(numel(e->shape)) * dtype_size(e->dtype);
    e->begin = at;
    e->end = at += nbytes;
  }
  Json root = Json::object();
  if (!metadata.empty()) {
    Json m = Json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    root[kMetadataKey] = std::move(m);
  }
  for (const TensorEntry& e : entries) {
    root[e.name] = {{"dtype", std::string(safetensors_dtype_name(e.dtype))},
                    {"shape", e.shape},
                    {"data_offsets", {e.begin, e.end}}};
  }
  std::string text;
  try {
    text = root.dump();  // ASCII-escapes nothing: names and metadata stay UTF-8
  } catch (const Json::exception& e) {
    fail(std::string("a name or metadata string is not valid UTF-8: ") + e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

}  // namespace lz::io
