// Affine index maps (index_map.h): composing, reshaping and linearizing views.
#include "lower/index_map.h"

#include <algorithm>
#include <climits>

namespace lz::lower {

void add_dyn(DynTerms& terms, const DynTerms& add, int64_t w) {
  for (const auto& [e, c] : add) {
    auto it = std::lower_bound(terms.begin(), terms.end(), std::make_pair(e, INT64_MIN));
    if (it != terms.end() && it->first == e) {
      it->second += w * c;
    } else {
      terms.insert(it, {e, w * c});
    }
  }
}

void add_scaled(Row& r, const Row& add, int64_t w) {
  r.off += w * add.off;
  for (size_t d = 0; d < r.coef.size(); ++d) r.coef[d] += w * add.coef[d];
  add_dyn(r.dyn, add.dyn, w);
}

bool reshape_rows(const Shape& in, const Shape& out, const View& v, int rank, View* res) {
  res->assign(in.size(), Row{0, std::vector<int64_t>(rank, 0), {}});
  size_t o = 0;
  for (size_t j = 0; j < in.size(); ++j) {
    if (in[j] == 1) continue;
    Row row{0, std::vector<int64_t>(rank, 0), {}};
    std::vector<size_t> dims;
    int64_t prod = 1;
    while (prod < in[j] && o < out.size()) {
      prod *= out[o];
      dims.push_back(o++);
    }
    if (prod != in[j]) return false;
    int64_t w = 1;
    for (size_t t = dims.size(); t-- > 0;) {
      add_scaled(row, v[dims[t]], w);
      w *= out[dims[t]];
    }
    (*res)[j] = row;
  }
  for (; o < out.size(); ++o) {
    if (out[o] != 1) return false;
  }
  return true;
}

bool reshape_is_affine(const Shape& in, const Shape& out) {
  View v(out.size(), Row{0, {}, {}});
  View r;
  return reshape_rows(in, out, v, 0, &r);
}

Row zero_row(int rank) { return Row{0, std::vector<int64_t>(rank, 0), {}}; }

View identity(const Shape& s) {
  const int rank = static_cast<int>(s.size());
  View v(rank, zero_row(rank));
  for (int d = 0; d < rank; ++d) v[d].coef[d] = 1;
  return v;
}

std::vector<int64_t> view_key(const View& v) {
  std::vector<int64_t> k;
  for (const Row& r : v) {
    k.push_back(r.off);
    k.insert(k.end(), r.coef.begin(), r.coef.end());
    k.push_back(static_cast<int64_t>(r.dyn.size()));
    for (const auto& [e, c] : r.dyn) {
      k.push_back(e);
      k.push_back(c);
    }
  }
  return k;
}

std::vector<int64_t> linear(const Shape& shape, const View& v, int rank) {
  std::vector<int64_t> st = contiguous_strides(shape);
  std::vector<int64_t> a(rank + 1, 0);
  for (size_t j = 0; j < shape.size(); ++j) {
    a[0] += st[j] * v[j].off;
    for (int d = 0; d < rank; ++d) a[1 + d] += st[j] * v[j].coef[d];
  }
  return a;
}

DynTerms linear_dyn(const Shape& shape, const View& v) {
  std::vector<int64_t> st = contiguous_strides(shape);
  DynTerms t;
  for (size_t j = 0; j < shape.size(); ++j) add_dyn(t, v[j].dyn, st[j]);
  return t;
}

void split_dyn(const DynTerms& t, std::vector<int32_t>* ids, std::vector<int64_t>* strides) {
  for (const auto& [e, c] : t) {
    ids->push_back(e);
    strides->push_back(c);
  }
}

}  // namespace lz::lower
