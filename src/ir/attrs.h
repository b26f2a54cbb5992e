// Typed node attributes. Each op's row in op_table.def names the one struct its
// nodes carry, and make_node() refuses any other, so a kernel, rule or planner
// reads `n.attr<SliceAttrs>().step` instead of decoding a list of ints by
// position.
//
// Contract for a new attribute struct: every field is listed by visit() (in a
// fixed order), which is what hashing (node hash), printing (dumps) and the
// explanations see; a field visit() skips would let two different nodes share a
// hash. Fields are plain values (integers, bools, doubles, dtypes, int lists),
// compared with the defaulted ==.
#pragma once
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "core/hash.h"
#include "core/shape.h"
#include "lazuli/dtype.h"

namespace lz::ir {

struct NoAttrs {
  template <class V>
  void visit(V &) const {}
  bool operator==(const NoAttrs &) const = default;
};

// Cast: the target dtype.
struct DTypeAttrs {
  DType dtype = DType::Float32;
  template <class V>
  void visit(V &v) const {
    v("dtype", dtype);
  }
  bool operator==(const DTypeAttrs &) const = default;
};

// Constant: a baked scalar (its value is hashed, DESIGN.md section 3). from_sizes: the value is
// a count of elements (a mean's divisor) that follows from the sizes; neither hashed nor printed
// (the value is), read by lz.capture's comparison of programs across sizes (exec/explain.h).
struct ConstantAttrs {
  double value = 0;
  DType dtype = DType::Float32;
  bool from_sizes = false;
  template <class V>
  void visit(V &v) const {
    v("value", value);
    v("dtype", dtype);
  }
  bool operator==(const ConstantAttrs &) const = default;
};

// Iota: 0..n-1.
struct IotaAttrs {
  int64_t n = 0;
  DType dtype = DType::Int64;
  template <class V>
  void visit(V &v) const {
    v("n", n);
    v("dtype", dtype);
  }
  bool operator==(const IotaAttrs &) const = default;
};

// RngUniform, RngNormal: the output's shape and (floating) dtype.
struct RandomAttrs {
  Shape shape;
  DType dtype = DType::Float32;
  template <class V>
  void visit(V &v) const {
    v("shape", shape);
    v("dtype", dtype);
  }
  bool operator==(const RandomAttrs &) const = default;
};

// Reshape and Expand: the output's sizes (no -1).
struct ShapeAttrs {
  Shape sizes;
  template <class V>
  void visit(V &v) const {
    v("sizes", sizes);
  }
  bool operator==(const ShapeAttrs &) const = default;
};

// Permute: output dim i is input dim perm[i].
struct PermuteAttrs {
  std::vector<int64_t> perm;
  template <class V>
  void visit(V &v) const {
    v("perm", perm);
  }
  bool operator==(const PermuteAttrs &) const = default;
};

// Slice and SliceScatter: normalized (0 <= start <= end <= size, step > 0).
struct SliceAttrs {
  int64_t dim = 0, start = 0, end = 0, step = 1;
  template <class V>
  void visit(V &v) const {
    v("dim", dim);
    v("start", start);
    v("end", end);
    v("step", step);
  }
  bool operator==(const SliceAttrs &) const = default;
};

// Cat and the index ops: the dim they work along (non-negative).
struct DimAttrs {
  int64_t dim = 0;
  template <class V>
  void visit(V &v) const {
    v("dim", dim);
  }
  bool operator==(const DimAttrs &) const = default;
};

// Reductions (sorted, distinct, non-negative dims) and ArgMax/ArgMin (exactly
// one dim).
struct ReduceAttrs {
  std::vector<int64_t> dims;
  bool keepdim = false;
  template <class V>
  void visit(V &v) const {
    v("dims", dims);
    v("keepdim", keepdim);
  }
  bool operator==(const ReduceAttrs &) const = default;
};

// Sort: along `dim`, ascending unless `descending`; `stable` keeps equal
// elements in input order (the reference kernel is always stable; the flag is
// PyTorch's and is hashed as given).
struct SortAttrs {
  int64_t dim = 0;
  bool descending = false;
  bool stable = false;
  template <class V>
  void visit(V &v) const {
    v("dim", dim);
    v("descending", descending);
    v("stable", stable);
  }
  bool operator==(const SortAttrs &) const = default;
};

// Conv, ConvBackwardInput, ConvBackwardWeight over N-d spatial dims (1-D and 2-D today): one
// entry per spatial dim in stride/padding/dilation. `shape` is the output's full shape for the
// backward ops (the input's, the weight's: a strided conv's output size does not determine its
// input size) and empty for the forward conv.
struct ConvAttrs {
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups = 1;
  Shape shape;
  template <class V>
  void visit(V &v) const {
    v("stride", stride);
    v("padding", padding);
    v("dilation", dilation);
    v("groups", groups);
    v("shape", shape);
  }
  bool operator==(const ConvAttrs &) const = default;
};

// MaxPool, AvgPool, AvgPoolBackward over the trailing spatial dims: one entry per spatial dim in
// kernel/stride/padding/dilation. `shape` is the input's full shape for AvgPoolBackward, empty
// otherwise. divisor 0: the window's size (with or without padding, per count_include_pad).
struct PoolAttrs {
  std::vector<int64_t> kernel, stride, padding, dilation;
  bool ceil_mode = false;
  bool count_include_pad = true;
  int64_t divisor = 0;
  Shape shape;
  template <class V>
  void visit(V &v) const {
    v("kernel", kernel);
    v("stride", stride);
    v("padding", padding);
    v("dilation", dilation);
    v("ceil_mode", ceil_mode);
    v("count_include_pad", count_include_pad);
    v("divisor", divisor);
    v("shape", shape);
  }
  bool operator==(const PoolAttrs &) const = default;
};

// CumSum, CumProd: the dim scanned (non-negative); `reverse` scans from the last element to the
// first (out[i] = x[i] + ... + x[n-1]: cumsum's gradient, without two flips).
struct ScanAttrs {
  int64_t dim = 0;
  bool reverse = false;
  template <class V>
  void visit(V &v) const {
    v("dim", dim);
    v("reverse", reverse);
  }
  bool operator==(const ScanAttrs &) const = default;
};

// AllReduce, AllGather, ReduceScatter, Broadcast: the process group the program was recorded for
// (its id and size enter the node's hash, so a program never runs under another world), the
// reduction (AllReduce, ReduceScatter: CollectiveAttrs::Reduce) and the source rank (Broadcast).
// Every rank records the same attributes: the rank itself is not one of them.
struct CollectiveAttrs {
  enum Reduce : int64_t { Sum = 0, Product = 1, Max = 2, Min = 3 };
  int64_t group = 0;       // 0: the world (src/dist/process_group.h)
  int64_t world_size = 1;  // the group's size when recorded
  int64_t reduce = Sum;
  int64_t root = 0;
  // When this process recorded it (increasing): a program runs its collectives in this order
  // (exec/graph_executor.cpp post_order), so ranks that record the same collectives in the same
  // order run them in the same order, whatever other tensors each holds. Not an attribute of the
  // value: neither hashed nor compared, so every step's program is the same.
  int64_t sequence = 0;
  template <class V>
  void visit(V &v) const {
    v("group", group);
    v("world_size", world_size);
    v("reduce", reduce);
    v("root", root);
  }
  bool operator==(const CollectiveAttrs &o) const {
    return group == o.group && world_size == o.world_size && reduce == o.reduce && root == o.root;
  }
};

// The attribute struct of a node. The order of the alternatives is part of
// every node hash (the index is hashed): append new structs at the end.
using Attrs =
    std::variant<NoAttrs, DTypeAttrs, ConstantAttrs, IotaAttrs, RandomAttrs, ShapeAttrs,
                 PermuteAttrs, SliceAttrs, DimAttrs, ReduceAttrs, SortAttrs, ConvAttrs, PoolAttrs,
                 ScanAttrs, CollectiveAttrs>;

// The variant index of attribute struct A (for the op table's column).
template <class A, size_t I = 0>
constexpr size_t attrs_index() {
  if constexpr (std::is_same_v<A, std::variant_alternative_t<I, Attrs>>) {
    return I;
  } else {
    return attrs_index<A, I + 1>();
  }
}

// Adds every field of `a`, and which struct it is, to `h`.
void hash_attrs(Hasher &h, const Attrs &a);
// "dim=1 start=0 end=4 step=2" (empty for NoAttrs), for dumps and explanations.
std::string attrs_str(const Attrs &a);
// The struct's name ("SliceAttrs"), for internal errors.
const char *attrs_name(size_t index);

}  // namespace lz::ir
