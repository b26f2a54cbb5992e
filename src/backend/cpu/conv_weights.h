// Blocked copies of convolution weights: a convolution on oneDNN's blocked layouts (conv_dnnl.cpp)
// reads its weights (Conv, ConvBackwardInput) in a layout of oneDNN's choosing (OIhw16i16o...),
// which Lazuli's tensors never hold. The copy is made once per call and shared by the call's parts
// (one per pool thread), and, when the weights are a parameter whose Storage has a content id
// (core/buffer.h), kept across calls: steady-state inference reads the same parameter storages,
// unchanged, every call, and pays the weights' reorder once.
//
// Identity: a kept copy is keyed by (content id, byte offset of the slice, plain layout, blocked
// layout), which determine its bytes. A content id is never reused and is renewed whenever its
// Storage's bytes may change (a program's outputs, donated parameters included), so a stale copy
// can never be found: at worst it waits, unused, for eviction. Storage's retire hook frees the
// copies of an id as soon as it is renewed or its Storage dies. External memory is kept only
// under an id its owner lent (core/buffer.h): the torch bridge lends one per parameter and
// version when asked to (docs/torch.md, keep_weight_layouts), and retires it on a new version.
//
// Bound: the kept copies total at most LAZULI_CONV_WEIGHT_CACHE_BYTES (least recently used
// evicted first; 0 keeps none, each call still shares one copy between its parts). Counters:
// ConvWeightReorder (a copy made), ConvWeightReuse (a part that used a copy made before it, by
// another part of its call or by an earlier call).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <utility>
#include <vector>

#include "core/buffer.h"

namespace lz::cpu {

struct BlockedWeights;

// The blocked weight copies of one convolution call, shared by its parts (thread-safe).
class CallWeights {
 public:
  // `storage`: the Storage the weights start at, when nothing writes it during the call (a
  // parameter no output of the program overwrites); null: the copies live for this call only.
  explicit CallWeights(const Storage* storage);
  ~CallWeights();
  CallWeights(const CallWeights&) = delete;
  CallWeights& operator=(const CallWeights&) = delete;

  // The weights `offset` bytes into the storage (or the operand), laid out as `plain`, in the
  // layout `blocked`; `make(dst)` writes them there (the reorder) the first time, on the calling
  // thread, while the call's other parts that need the same copy wait.
  const void* get(int64_t offset, const dnnl::memory::desc& plain,
                  const dnnl::memory::desc& blocked, const std::function<void(void*)>& make);

 private:
  struct Use {
    int64_t offset;
    dnnl::memory::desc plain, blocked;
    std::shared_ptr<BlockedWeights> copy;
  };
  const Storage* storage_;
  uint64_t content_id_;  // read once: every part of the call agrees on it
  std::mutex mu_;        // guards uses_
  std::vector<Use> uses_;
};

// The bytes the kept copies hold now (tests check that a dead Storage's copies are freed).
size_t conv_weight_cache_bytes();
// Drops every kept copy.
void clear_conv_weight_cache();

}  // namespace lz::cpu
