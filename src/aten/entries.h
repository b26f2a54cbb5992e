// How the group files (aten/entries_*.cpp) add their entries to the table, and the helpers they
// share: PyTorch's type promotion over ATen arguments, casts, and dims. Internal to src/aten.
#pragma once
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aten/table.h"
#include "lazuli/ops.h"

namespace lz::aten {

struct EntryOptions {
  Condition when = {};
  std::string note = {};
  uint32_t flags = 0;
};

class TableBuilder {
 public:
  // One entry per name, sharing the lowering and options. A name given twice throws.
  void add(std::initializer_list<std::string_view> names, DTypeSet dtypes, Lowering lower,
           EntryOptions options = {});
  // The lowering of an entry added earlier (a group built on another's: the foreach ops apply
  // the elementwise entries). Throws Error when there is none.
  const Lowering& lowering(std::string_view name) const;
  std::vector<Entry> take() { return std::move(entries_); }

 private:
  std::vector<Entry> entries_;
};

// The groups, each in its own file.
void add_pointwise(TableBuilder& b);   // entries_pointwise.cpp: elementwise ops, activations
void add_reductions(TableBuilder& b);  // entries_reduce.cpp: reductions, softmax, norms, matmul
void add_shape(TableBuilder& b);       // entries_shape.cpp: views, joins, creation, copies
void add_indexing(TableBuilder& b);    // entries_indexing.cpp: index, gather, scatter, embedding
void add_foreach(TableBuilder& b);     // entries_foreach.cpp: the optimizers' _foreach_*, lerp
void add_nn(TableBuilder& b);          // entries_nn.cpp: convolution, pooling, losses, attention
void add_random(TableBuilder& b);      // entries_random.cpp: dropout, bernoulli, rand_like
void add_ordering(TableBuilder& b);    // entries_ordering.cpp: sort, topk, cumsum, cumprod
void add_complex(TableBuilder& b);     // entries_complex.cpp: view_as_real/complex, FFTs
// _to_copy(x, dtype, ...) where x or dtype is complex (entries_complex.cpp).
Arg complex_to_copy(const Args& a);

// ---- shared helpers ----------------------------------------------------------------------------

// A tensor argument or a number argument as an op operand (None: an undefined Operand is never
// made; callers check is_none first).
Operand operand(const Arg& a);
// The dtype PyTorch's promotion gives these operands (None arguments skipped): dimensioned
// tensors, then 0-d tensors, then numbers, a lower tier counting only when its category
// (bool < int < float) is higher. Works on metas too.
DType promote(std::initializer_list<const Arg*> args);
// An operand converted to `dtype`: a tensor cast (itself when it has the dtype), a number
// converted (2.7 into int64 is 2).
Operand cast(const Operand& o, DType dtype);
// The dtype of a tensor argument (live or meta; a meta of a dtype Lazuli lacks never reaches a
// condition: why_not refuses it first).
DType dtype_of(const Arg& a);
// ATen's dim argument of a reduction (None, an int, or a list where [] means every dim) as
// Lazuli's (empty = every dim). A 0-d tensor takes dim 0 or -1: every dim.
IntList reduce_dims(const Arg& dim, int64_t rank);
// A dim wrapped into [0, max(rank, 1)).
int64_t wrap(int64_t dim, int64_t rank);
// Why a dtype argument (None, a Lazuli dtype or one it lacks) cannot be lowered, or nullopt.
std::optional<std::string> dtype_arg_refused(const Arg& dtype);
// The dtype an optional dtype argument asks for, else `fallback`.
DType dtype_or(const Arg& dtype, DType fallback);

}  // namespace lz::aten
