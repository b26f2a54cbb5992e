// Output dtype and shape of a primitive from its operands and attributes. This is also where an
// IR node's operands are validated: a bad combination throws ValueError / TypeError naming the op,
// shapes and dtypes. Results are memoized by dag hash in the LRU shape cache
// (LAZULI_IR_SHAPE_CACHE_SIZE): the dag hash covers the leaves' shapes, so it determines the output.
#pragma once
#include <utility>
#include <vector>

#include "ir/node.h"

namespace lz::ir {

// Every output of a node: output 0, then outputs 1.. of a multi-output op.
struct NodeType {
  OutputType out;
  std::vector<OutputType> extra;
};

NodeType infer_output(OpKind op, const std::vector<Value>& operands, const Attrs& attrs);

// The memoizing front (hits are not counted: they are on the op-recording hot path).
NodeType cached_infer_output(const Hash128& dag_hash, OpKind op,
                               const std::vector<Value>& operands, const Attrs& attrs);
void resize_shape_cache(size_t n);
size_t shape_cache_size();

}  // namespace lz::ir
