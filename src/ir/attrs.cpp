#include "ir/attrs.h"

#include <sstream>

namespace lz::ir {
namespace {

struct HashFields {
  Hasher &h;
  void operator()(const char *, int64_t v) { h.add(v); }
  void operator()(const char *, bool v) { h.add(static_cast<uint8_t>(v)); }
  void operator()(const char *, double v) { h.add(v); }
  void operator()(const char *, DType v) { h.add(static_cast<uint8_t>(v)); }
  void operator()(const char *, const std::vector<int64_t> &v) {
    h.add<uint64_t>(v.size());
    if (!v.empty()) h.add_bytes(v.data(), v.size() * sizeof(int64_t));
  }
};

struct PrintFields {
  std::ostringstream &o;
  void sep(const char *name) {
    if (o.tellp() > 0) o << ' ';
    o << name << '=';
  }
  void operator()(const char *n, int64_t v) {
    sep(n);
    o << v;
  }
  void operator()(const char *n, bool v) {
    sep(n);
    o << (v ? "true" : "false");
  }
  void operator()(const char *n, double v) {
    sep(n);
    o << v;
  }
  void operator()(const char *n, DType v) {
    sep(n);
    o << dtype_name(v);
  }
  void operator()(const char *n, const std::vector<int64_t> &v) {
    sep(n);
    o << shape_str(v);
  }
};

constexpr const char *kNames[] = {"NoAttrs",     "DTypeAttrs",  "ConstantAttrs", "IotaAttrs",
                                  "RandomAttrs", "ShapeAttrs",  "PermuteAttrs",  "SliceAttrs",
                                  "DimAttrs",    "ReduceAttrs", "SortAttrs",     "ConvAttrs",
                                  "PoolAttrs",   "ScanAttrs",   "CollectiveAttrs"};
static_assert(std::size(kNames) == std::variant_size_v<Attrs>, "name every attribute struct");

}  // namespace

void hash_attrs(Hasher &h, const Attrs &a) {
  h.add(static_cast<uint8_t>(a.index()));
  HashFields f{h};
  std::visit([&](const auto &s) { s.visit(f); }, a);
}

std::string attrs_str(const Attrs &a) {
  std::ostringstream o;
  PrintFields f{o};
  std::visit([&](const auto &s) { s.visit(f); }, a);
  return o.str();
}

const char *attrs_name(size_t index) { return index < std::size(kNames) ? kNames[index] : "?"; }

}  // namespace lz::ir
