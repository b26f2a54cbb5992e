// Table entries: sort, topk and the scans cumsum, cumprod (aten/table.h).
//
// sort and topk go through Lazuli's Sort primitive (values and int64 indices, one multi-output
// node). Lazuli's sort is always stable: one of the orders PyTorch allows for stable=False, and
// the one it gives on the CPU. The scans give int64 for bool and integer inputs unless a dtype is
// asked for, as in both libraries; a dtype casts the input first.
#include "aten/entries.h"

namespace lz::aten {
namespace {

Arg pair(std::pair<Tensor, Tensor> r) { return std::vector<Arg>{r.first, r.second}; }

// sort(self, dim, descending)
Arg sort_entry(const Args& a, Call&) {
  return pair(sort(a[0].tensor(), a[1].to_int(), a[2].to_bool()));
}

// sort.stable(self, *, stable, dim, descending)
Arg sort_stable_entry(const Args& a, Call&) {
  bool stable = !a[1].is_none() && a[1].to_bool();
  return pair(sort(a[0].tensor(), a[2].to_int(), a[3].to_bool(), stable));
}

// topk(self, k, dim, largest, sorted)
Arg topk_entry(const Args& a, Call&) {
  return pair(topk(a[0].tensor(), a[1].to_int(), a[2].to_int(), a[3].to_bool(), a[4].to_bool()));
}

std::optional<std::string> scan_when(const Args& a) { return dtype_arg_refused(a[2]); }

std::optional<DType> scan_dtype(const Arg& dtype) {
  return dtype.is_none() ? std::nullopt : std::optional<DType>(dtype.dtype());
}

}  // namespace

void add_ordering(TableBuilder& b) {
  b.add({"aten.sort.default"}, kAll, sort_entry,
        {.note = "stable; NaN sorts last (first when descending)"});
  b.add({"aten.sort.stable"}, kAll, sort_stable_entry,
        {.note = "stable; NaN sorts last (first when descending)"});
  b.add({"aten.topk.default"}, kNumbers, topk_entry, {.note = "sorted; ties keep input order"});
  b.add({"aten.cumsum.default"}, kAll,
        [](const Args& a, Call&) -> Arg {
          return cumsum(a[0].tensor(), a[1].to_int(), scan_dtype(a[2]));
        },
        {.when = scan_when, .note = "bool and integers sum in int64"});
  b.add({"aten.cumprod.default"}, kAll,
        [](const Args& a, Call&) -> Arg {
          return cumprod(a[0].tensor(), a[1].to_int(), scan_dtype(a[2]));
        },
        {.when = scan_when,
         .note = "bool and integers multiply in int64; the gradient at zeros as PyTorch's"});
}

}  // namespace lz::aten
