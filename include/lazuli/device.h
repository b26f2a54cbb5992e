// Where tensor memory lives. Every backend today computes on host memory; the other kinds tag
// memory handed to Lazuli from elsewhere (a CUDA torch tensor, a DLPack tensor) so it is refused
// with a clear error instead of dereferenced.
#pragma once
#include <cstdint>
#include <string>

namespace lz {

enum class DeviceType : uint8_t { Host, Cuda };

struct DeviceId {
  DeviceType type = DeviceType::Host;
  int index = 0;
  static DeviceId host() { return {}; }
  static DeviceId cuda(int index) { return {DeviceType::Cuda, index}; }
  bool operator==(const DeviceId& o) const { return type == o.type && index == o.index; }
  bool operator!=(const DeviceId& o) const { return !(*this == o); }
  std::string str() const;  // "host", "cuda:0"
};

}  // namespace lz
