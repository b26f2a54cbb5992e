// Affine index maps, the planner's form of movement ops (fusion rule 2): a View gives each dim of a
// node, as read at one point of a kernel, as an offset plus coefficients over the kernel's loop
// indices, plus dynamic terms (checked index values of a gather times a coefficient, rule 9).
// Internal to the planner (planner.h).
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "core/shape.h"

namespace lz::lower {

// The index of one dim of a node as an affine function of the kernel's loop indices, plus
// dynamic terms: checked index values (the KExpr of a gather's index) times a coefficient.
struct Row {
  int64_t off = 0;
  std::vector<int64_t> coef;
  std::vector<std::pair<int32_t, int64_t>> dyn;  // (checked index expression, coefficient), sorted
};
using View = std::vector<Row>;
using DynTerms = std::vector<std::pair<int32_t, int64_t>>;

// terms += w * add, merged by expression.
void add_dyn(DynTerms& terms, const DynTerms& add, int64_t w);
// r += w * add
void add_scaled(Row& r, const Row& add, int64_t w);

// Reshape as an affine map from out-index rows to in-index rows: possible when each in dim is a
// product of consecutive out dims (a split), size-1 dims aside.
bool reshape_rows(const Shape& in, const Shape& out, const View& v, int rank, View* res);
bool reshape_is_affine(const Shape& in, const Shape& out);

Row zero_row(int rank);
// Each dim of `s` read at the loop index of the same dim.
View identity(const Shape& s);
// A view as a key (memoizing expressions per view).
std::vector<int64_t> view_key(const View& v);

// Offset and strides over the loop dims of a dense buffer of `shape` read through `v`.
std::vector<int64_t> linear(const Shape& shape, const View& v, int rank);
// Its dynamic terms: (checked index expression, element stride).
DynTerms linear_dyn(const Shape& shape, const View& v);
void split_dyn(const DynTerms& t, std::vector<int32_t>* ids, std::vector<int64_t>* strides);

}  // namespace lz::lower
