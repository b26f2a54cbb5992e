// Kernel specs from the fusion decisions (fusion.cpp): each materialized value that is not a
// library call or fallback becomes one kernel step (two for a scatter, one per part for cat and
// slice_scatter): its expression DAG built through the views of its fused operands (index_map.h),
// its loop dims reordered and collapsed, and its runtime arguments laid out as kernel_spec.h says.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "ir/libm.h"
#include "lazuli/error.h"
#include "lower/planner.h"

namespace lz::lower {

namespace {
// An elementwise kernel's innermost loop dim shorter than this, under one at least 4x longer,
// loops outside it (finish_kernel).
constexpr int64_t kTinyInnerDim = 8;
}  // namespace

using ir::Node;
using ir::OpKind;

int Planner::add_expr(KernelBuild& kb, KExpr e) {
  kb.spec.exprs.push_back(e);
  return static_cast<int>(kb.spec.exprs.size()) - 1;
}

// A bounds check of index expression `index` against dim `dim` of `data`; returns the checked
// value's expression.
int Planner::add_check(KernelBuild& kb, const Node* n, int index, const Shape& data, int64_t dim) {
  const int k = static_cast<int>(kb.checks.size());
  kb.checks.push_back({n->op, dim, data[dim], idx(n)});
  kb.spec.nchecks = k + 1;
  return add_expr(kb, {OpKind::Gather, DType::Int64, index, -1, -1, k, 0});
}

// The expression of output `o` read through view `v`. Only a materialized output can be one of
// a multi-output node, so past the first branch `n` is a single-output node.
int Planner::build_expr(KernelBuild& kb, Out o, const View& v, const Node* root) {
  const Node* n = o.node;
  auto key = std::make_tuple(n, o.index, view_key(v));
  if (auto it = kb.memo.find(key); it != kb.memo.end()) return it->second;
  int e = -1;
  // A per-row root this row kernel stores (rule 5b): computed here from the stages, not loaded.
  auto ro = row_out_of_.find(n);
  const bool row_out = kb.row_space && ro != row_out_of_.end() && ro->second == root;
  Out base = n == root || row_out ? Out{} : buffer_base(o);
  if (base && kb.row_space) {
    // A view of such a root (an unsqueeze of a mean kept without its dim) is computed through
    // the view too: its buffer is written by this very kernel.
    auto rb = row_out_of_.find(base.node);
    if (rb != row_out_of_.end() && rb->second == root) base = Out{};
  }
  if (base) {
    int input = static_cast<int>(kb.spec.inputs.size());
    kb.spec.inputs.push_back({o.dtype(), false, {}});
    kb.input_value.push_back(value_of(base));
    kb.input_args.push_back(linear(o.shape(), v, kb.rank));
    kb.input_dyn.emplace_back();
    split_dyn(linear_dyn(o.shape(), v), &kb.spec.inputs.back().dyn, &kb.input_dyn.back());
    e = add_expr(kb, {OpKind::DeviceData, o.dtype(), -1, -1, -1, input, 0});
  } else if (stage_of_.count(n)) {
    e = row_stage_expr(kb, n, v, root);
  } else if (n->op == OpKind::Constant) {
    e = add_expr(kb, {OpKind::Constant, n->dtype, -1, -1, -1, kb.spec.nscalars++, 0});
    kb.scalars.push_back(n->attr<ir::ConstantAttrs>().value);
  } else if (n->op == OpKind::Iota) {
    int input = static_cast<int>(kb.spec.inputs.size());
    kb.spec.inputs.push_back({DType::Int64, true, {}});
    kb.input_value.push_back(-1);
    std::vector<int64_t> a(kb.rank + 1, 0);
    a[0] = v[0].off;
    for (int d = 0; d < kb.rank; ++d) a[1 + d] = v[0].coef[d];
    kb.input_args.push_back(a);
    kb.input_dyn.emplace_back();
    split_dyn(v[0].dyn, &kb.spec.inputs.back().dyn, &kb.input_dyn.back());
    e = add_expr(kb, {OpKind::Iota, n->dtype, -1, -1, -1, input, 0});
  } else if (n->op == OpKind::RngUniform || n->op == OpKind::RngNormal) {
    // The key (0-d, read at every point) and, as an index input, the point's row-major
    // position in the draw's output: the counter of its value.
    const int key = build_expr(kb, op0(n), View{}, root);
    int input = static_cast<int>(kb.spec.inputs.size());
    kb.spec.inputs.push_back({DType::Int64, true, {}});
    kb.input_value.push_back(-1);
    kb.input_args.push_back(linear(n->shape, v, kb.rank));
    kb.input_dyn.emplace_back();
    split_dyn(linear_dyn(n->shape, v), &kb.spec.inputs.back().dyn, &kb.input_dyn.back());
    e = add_expr(kb, {n->op, n->dtype, key, -1, -1, input, 0});
  } else if (n->op == OpKind::Gather || n->op == OpKind::IndexSelect) {
    // out[p] = x[p with p[dim] = index value]: the index is computed and checked at this point,
    // then x is read through v with row `dim` replaced by the checked value.
    const Out x = op0(n);
    const Out index = out_of(n->operands[1]);
    const int64_t dim = n->attr<ir::DimAttrs>().dim;
    const View iv = n->op == OpKind::Gather ? v : View{v[dim]};
    const int checked = add_check(kb, n, build_expr(kb, index, iv, root), x.shape(), dim);
    View xv = v;
    if (x.shape()[dim] == 1) {
      xv[dim] = zero_row(kb.rank);  // the only valid index is 0: no dynamic term
    } else {
      xv[dim] = Row{0, std::vector<int64_t>(kb.rank, 0), {{checked, 1}}};
    }
    // Gather's index may be smaller than x outside dim: v's rows stay valid for x.
    e = build_expr(kb, x, xv, root);
  } else if (is_view(n->op)) {
    const Out x = op0(n);
    View in;
    switch (n->op) {
      case OpKind::Permute:
        in.resize(v.size());
        for (size_t i = 0; i < v.size(); ++i) in[n->attr<ir::PermuteAttrs>().perm[i]] = v[i];
        break;
      case OpKind::Expand:
        in = v;
        for (size_t j = 0; j < x.shape().size(); ++j) {
          if (x.shape()[j] == 1) in[j] = zero_row(kb.rank);
        }
        break;
      case OpKind::Slice: {
        in = v;
        const auto& sl = n->attr<ir::SliceAttrs>();
        int64_t dim = sl.dim, start = sl.start, step = sl.step;
        in[dim].off = start + step * v[dim].off;
        for (int64_t& c : in[dim].coef) c *= step;
        for (auto& [ex, c] : in[dim].dyn) c *= step;
        break;
      }
      default:
        if (!reshape_rows(x.shape(), n->shape, v, kb.rank, &in)) {
          throw Error("planner: internal error: non-affine reshape reached a kernel");
        }
    }
    e = build_expr(kb, x, in, root);
  } else {
    KExpr k{n->op, n->dtype, -1, -1, -1, -1, 0};
    int32_t* slots[3] = {&k.a, &k.b, &k.c};
    for (size_t i = 0; i < n->operands.size(); ++i) {
      const Out op = out_of(n->operands[i]);
      const Shape& os = op.shape();
      View ov(os.size());
      const size_t lead = n->shape.size() - os.size();
      for (size_t j = 0; j < os.size(); ++j) {
        ov[j] = os[j] == 1 ? zero_row(kb.rank) : v[lead + j];
      }
      *slots[i] = build_expr(kb, op, ov, root);
    }
    e = add_expr(kb, k);
  }
  kb.memo[key] = e;
  if (row_out && std::none_of(kb.row_outs.begin(), kb.row_outs.end(),
                              [n](const auto& r) { return r.first == n; })) {
    kb.row_outs.push_back({n, e});
  }
  return e;
}

// A reduction folded into this kernel (rule 5b): a stage folding x over the row. Read through
// `v`, its value must be the row's broadcast: its kept dims the kernel's own leading dims
// (identity rows), whatever its reduced (size-1) dims.
int Planner::row_stage_expr(KernelBuild& kb, const Node* r, const View& v, const Node* root) {
  const Out x = op0(r);
  const Shape& xs = x.shape();
  const int nred = static_cast<int>(r->attr<ir::ReduceAttrs>().dims.size());
  const int nkept = static_cast<int>(xs.size()) - nred;
  bool ok = kb.row_space && *kb.row_space == xs && (kb.row_dims == 0 || kb.row_dims == nred);
  for (int d = 0; ok && d < nkept; ++d) {
    if (xs[d] == 1 && v[d].off == 0 && v[d].dyn.empty()) continue;  // one row position: index 0
    ok = v[d].off == 0 && v[d].dyn.empty();
    for (int j = 0; ok && j < kb.rank; ++j) ok = v[d].coef[j] == (j == d ? 1 : 0);
  }
  if (!ok) {
    kb.row_failed = true;  // the caller discards this build
    return add_expr(kb, {r->op, r->dtype, -1, -1, -1, -1, 0});
  }
  kb.row_dims = nred;
  const int a = build_expr(kb, x, identity(xs), root);
  return add_expr(kb, {r->op, r->dtype, a, -1, -1, -1, 0});
}

// Reorders and collapses the loop dims, classifies inner strides, and emits the step. A Scatter
// kernel (`scatter`) marks its scattered dim reduced and passes the output's dynamic terms.
void Planner::finish_kernel(KernelBuild& kb, const Shape& space, std::vector<bool> reduced,
                            std::vector<int64_t> out_args, int out_value, const std::string& what,
                            bool scatter, const DynTerms& out_dyn, bool row) {
  const int rank = kb.rank;
  const int nin = static_cast<int>(kb.input_args.size());
  // With checks, the key (the point's row-major position in `space`) is one more operand.
  const int nops = nin + 1 + (kb.checks.empty() ? 0 : 1);
  std::vector<int64_t> key_args(rank + 1, 0);
  const std::vector<int64_t> space_strides = contiguous_strides(space);
  for (int d = 0; d < rank; ++d) key_args[1 + d] = space_strides[d];
  // Row outputs (RowFused): dense over the kernel's leading (kept) dims, 0 over the row's.
  const int nrow = static_cast<int>(kb.row_outs.size());
  std::vector<std::vector<int64_t>> row_args(nrow, std::vector<int64_t>(rank + 1, 0));
  if (nrow > 0) {
    const int nkept = rank - kb.row_dims;
    const std::vector<int64_t> ks = contiguous_strides(Shape(space.begin(), space.begin() + nkept));
    for (auto& a : row_args) std::copy(ks.begin(), ks.end(), a.begin() + 1);
  }
  auto arg = [&](int x) -> std::vector<int64_t>& {
    return x < nin    ? kb.input_args[x]
           : x == nin ? out_args
           : x < nops ? key_args
                      : row_args[x - nops];
  };
  const int nall = nops + nrow;  // the operands whose dims collapse together
  // Dims of size 1 do not loop.
  std::vector<int> dims;
  for (int d = 0; d < rank; ++d) {
    if (space[d] != 1) dims.push_back(d);
  }
  bool any_red = false, last_red = false;
  for (int d : dims) any_red = any_red || reduced[d];
  if (!dims.empty()) last_red = reduced[dims.back()];
  Scheme scheme = !any_red ? Scheme::Elementwise : last_red ? Scheme::RowReduce : Scheme::ColReduce;
  if (any_red && dims.size() == static_cast<size_t>(std::count_if(dims.begin(), dims.end(), [&](int d) { return reduced[d]; }))) {
    scheme = Scheme::RowReduce;  // a full reduction
  }
  if (scatter) scheme = Scheme::Scatter;
  if (row) scheme = Scheme::RowFused;
  std::vector<int> order;
  if (scheme == Scheme::Elementwise) {
    order = dims;
  } else {
    bool red_first = scheme == Scheme::ColReduce || scheme == Scheme::Scatter;
    for (int pass = 0; pass < 2; ++pass) {
      bool want = (pass == 0) == red_first;
      for (int d : dims) {
        if (reduced[d] == want) order.push_back(d);
      }
    }
  }
  // Collapse neighbours whose strides nest for every operand.
  std::vector<int64_t> sizes;
  std::vector<bool> red;
  std::vector<std::vector<int64_t>> st(nall);
  for (int d : order) {
    bool merge = !sizes.empty() && red.back() == reduced[d];
    for (int x = 0; merge && x < nall; ++x) merge = st[x].back() == arg(x)[1 + d] * space[d];
    if (merge) {
      sizes.back() *= space[d];
      for (int x = 0; x < nall; ++x) st[x].back() = arg(x)[1 + d];
    } else {
      sizes.push_back(space[d]);
      red.push_back(reduced[d]);
      for (int x = 0; x < nall; ++x) st[x].push_back(arg(x)[1 + d]);
    }
  }
  // A tiny innermost dim under a longer one (the (real, imaginary) pair of a complex value held
  // as [..., 2], a broadcast over it): the longer one loops innermost instead, so the loop's
  // per-iteration work is spread over more points. A [2, 32, 64, 2] broadcast multiply took
  // 20 us, 2.4 ns a value, with its pair innermost.
  if (scheme == Scheme::Elementwise && sizes.size() >= 2) {
    const size_t n = sizes.size();
    if (sizes[n - 1] < kTinyInnerDim && sizes[n - 2] >= 4 * sizes[n - 1]) {
      std::swap(sizes[n - 1], sizes[n - 2]);
      for (int x = 0; x < nops; ++x) std::swap(st[x][n - 1], st[x][n - 2]);
    }
  }
  if (scheme == Scheme::RowFused) {
    if (sizes.empty() || !red.back()) {  // rows of one point: a size-1 row dim
      sizes.push_back(1);
      red.push_back(true);
      for (int x = 0; x < nall; ++x) st[x].push_back(0);
    }
  } else if (sizes.empty() || (scheme == Scheme::Scatter && red.back())) {
    // A Scatter kernel's segments need a parallel dim: a size-1 one when all else is size 1.
    sizes.push_back(1);
    red.push_back(false);
    for (int x = 0; x < nops; ++x) st[x].push_back(0);
  }
  KernelSpec& s = kb.spec;
  s.scheme = scheme;
  s.rank = static_cast<int>(sizes.size());
  s.nred = static_cast<int>(std::count(red.begin(), red.end(), true));
  s.inner.clear();
  PlanStep step;
  step.kind = PlanStep::Kernel;
  step.args = sizes;
  for (int x = 0; x < nops; ++x) {
    int64_t inner = st[x].back();
    s.inner.push_back(inner == 0 ? StrideClass::Zero : inner == 1 ? StrideClass::One : StrideClass::Other);
    step.args.push_back(arg(x)[0]);
    step.args.insert(step.args.end(), st[x].begin(), st[x].end());
  }
  for (double v : kb.scalars) {
    int64_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    step.args.push_back(bits);
  }
  for (const IndexCheck& c : kb.checks) step.args.push_back(c.size);
  for (const std::vector<int64_t>& d : kb.input_dyn)
    step.args.insert(step.args.end(), d.begin(), d.end());
  s.out_dyn.clear();
  for (const auto& [e, c] : out_dyn) {
    s.out_dyn.push_back(e);
    step.args.push_back(c);
  }
  s.row_outs.clear();
  for (int k = 0; k < nrow; ++k) {
    const Node* n = kb.row_outs[k].first;
    s.row_outs.push_back({kb.row_outs[k].second, n->dtype});
    step.args.push_back(row_args[k][0]);
    step.args.insert(step.args.end(), st[nops + k].begin(), st[nops + k].end());
    step.more_outputs.push_back(value_of(out_of(n)));
  }
  step.checks = kb.checks;
  int64_t total = 1, reduce_total = 1;
  for (size_t d = 0; d < sizes.size(); ++d) (red[d] ? reduce_total : total) *= sizes[d];
  step.range = total;
  if (target_.launch) {
    const bool whole_rows = scheme == Scheme::RowReduce || scheme == Scheme::RowFused;
    int64_t math = 0;
    for (const KExpr& e : s.exprs) {
      // A normal draw calls scalar log and cos per point (emit_expr.cpp's Box-Muller).
      math += e.op == OpKind::RngNormal ? 2 : ir::calls_libm(e.op) ? 1 : 0;
    }
    step.launch = target_.launch({total, reduce_total, whole_rows, s.out_dtype, math});
  }
  step.node = kb.checks.empty() ? -1 : kb.checks[0].node;
  step.inputs = kb.input_value;
  step.output = out_value;
  std::string name = "lzk_" + s.structure().hex();
  int k = -1;
  for (size_t i = 0; i < plan_.kernels.size(); ++i) {
    if (plan_.kernels[i].name == name) k = static_cast<int>(i);
  }
  if (k < 0) {
    k = static_cast<int>(plan_.kernels.size());
    plan_.kernels.push_back({s, name});
  }
  step.kernel = k;
  int sid = static_cast<int>(plan_.steps.size());
  for (int v : step.inputs) {
    if (v >= 0) read(v, sid);
  }
  PlanValue& ov = plan_.values[out_value];
  if (ov.def_step < 0) ov.def_step = sid;  // a Scatter kernel updates what its fill wrote
  for (int v : step.more_outputs) plan_.values[v].def_step = sid;
  plan_.steps.push_back(std::move(step));
  std::string also;
  for (const auto& [n, e] : kb.row_outs) also += (also.empty() ? " and stores " : ", ") + label(n);
  note("kernel " + std::to_string(k) + " (" + name.substr(0, 12) + ") computes " + what + also +
       ": " + std::to_string(s.exprs.size()) + " ops, " + std::to_string(s.inputs.size()) +
       " inputs, " + scheme_name(scheme) +
       (kb.checks.empty() ? "" : ", " + std::to_string(kb.checks.size()) + " index check(s)"));
}

// scatter_add / index_copy: the base copied into the output (an elementwise kernel, the base's
// expression fused), then a Scatter kernel over the index space adding (copying) src there.
void Planner::scatter_kernels_for(const Node* n, int out) {
  const Out base = op0(n), index = out_of(n->operands[1]), src = out_of(n->operands[2]);
  const int64_t dim = n->attr<ir::DimAttrs>().dim;
  {
    KernelBuild kb;
    kb.rank = static_cast<int>(n->shape.size());
    kb.spec.out_dtype = n->dtype;
    build_expr(kb, base, identity(n->shape), nullptr);
    std::vector<int64_t> oa = linear(n->shape, identity(n->shape), kb.rank);
    finish_kernel(kb, n->shape, std::vector<bool>(kb.rank, false), oa, out, label(n) + "'s base");
  }
  KernelBuild kb;
  const Shape space = n->op == OpKind::ScatterAdd ? index.shape() : src.shape();
  kb.rank = static_cast<int>(space.size());
  kb.spec.out_dtype = n->dtype;
  kb.spec.reduce_op = n->op;
  const View id = identity(space);
  const View iv = n->op == OpKind::ScatterAdd ? id : View{id[dim]};
  const int checked = add_check(kb, n, build_expr(kb, index, iv, nullptr), n->shape, dim);
  int val = build_expr(kb, src, id, nullptr);
  if (val !=
      static_cast<int>(kb.spec.exprs.size()) - 1) {  // memoized earlier: the last is stored
    val = add_expr(kb, {OpKind::Cast, src.dtype(), val, -1, -1, -1, 0});
  }
  View ov = id;
  ov[dim] = n->shape[dim] == 1 ? zero_row(kb.rank)
                               : Row{0, std::vector<int64_t>(kb.rank, 0), {{checked, 1}}};
  std::vector<bool> reduced(kb.rank, false);
  reduced[dim] = true;
  finish_kernel(kb, space, reduced, linear(n->shape, ov, kb.rank), out, label(n),
                /*scatter=*/true, linear_dyn(n->shape, ov));
}

// One part of a cat or slice_scatter `n`: an elementwise kernel over `space` computing `x`
// read through `xv` and storing it at the output's window: dims as the space's, except `dim`,
// which starts at `off` and steps by `step`.
void Planner::part_kernel(const Node* n, int64_t dim, Out x, const View& xv, const Shape& space,
                          int64_t off, int64_t step, int out, const std::string& what) {
  KernelBuild kb;
  kb.rank = static_cast<int>(space.size());
  kb.spec.out_dtype = n->dtype;
  build_expr(kb, x, xv, nullptr);
  View ov = identity(space);
  ov[dim].off = off;
  ov[dim].coef[dim] = step;
  finish_kernel(kb, space, std::vector<bool>(kb.rank, false), linear(n->shape, ov, kb.rank), out,
                what);
}

// cat and slice_scatter: one kernel per non-empty part, each writing its window of the output,
// consecutive steps (root_may_overwrite relies on it). One kernel per part rather than one with
// a select chain: each part keeps its own fused expression and vectorized contiguous stores, no
// point evaluates the other parts, and a part's kernel is shared by every cat with that part's
// structure whatever the number of parts.
void Planner::parts_kernels_for(const Node* n, int out) {
  // Only the window: the base is already this value (in place), or nothing of it survives the
  // chain of window writes that follows.
  if (in_place_.count(n) || (n->op == OpKind::SliceScatter && chain_covers_base(n))) {
    const auto& sl = n->attr<ir::SliceAttrs>();
    const Out src = out_of(n->operands[1]);
    if (numel(src.shape()) > 0) {
      part_kernel(n, sl.dim, src, identity(src.shape()), src.shape(), sl.start, sl.step, out,
                  label(n) + " window only");
    }
    return;
  }
  struct Part {
    Out x;
    View xv;
    Shape space;
    int64_t off, step;
  };
  std::vector<Part> parts;
  if (n->op == OpKind::Cat) {
    const int64_t dim = n->attr<ir::DimAttrs>().dim;
    int64_t at = 0;
    for (const ir::Value& v : n->operands) {
      parts.push_back({out_of(v), identity(v.shape()), v.shape(), at, 1});
      at += v.shape()[dim];
    }
  } else {
    const auto& sl = n->attr<ir::SliceAttrs>();
    const Out base = op0(n), src = out_of(n->operands[1]);
    if (sl.step == 1) {  // the base before and after the window, around src
      Shape before = n->shape, after = n->shape;
      before[sl.dim] = sl.start;
      after[sl.dim] = n->shape[sl.dim] - sl.end;
      View av = identity(after);
      av[sl.dim].off = sl.end;
      parts.push_back({base, identity(before), before, 0, 1});
      parts.push_back({src, identity(src.shape()), src.shape(), sl.start, 1});
      parts.push_back({base, av, after, sl.end, 1});
    } else {  // all of the base, then src over its strided window
      parts.push_back({base, identity(n->shape), n->shape, 0, 1});
      parts.push_back({src, identity(src.shape()), src.shape(), sl.start, sl.step});
    }
  }
  const int64_t dim = n->op == OpKind::Cat ? n->attr<ir::DimAttrs>().dim
                                           : n->attr<ir::SliceAttrs>().dim;
  bool any = false;
  for (size_t k = 0; k < parts.size(); ++k) {
    const Part& p = parts[k];
    // An empty output still gets one (empty) step, so its value has a writer.
    if (numel(p.space) == 0 && (any || k + 1 < parts.size())) continue;
    any = true;
    part_kernel(n, dim, p.x, p.xv, p.space, p.off, p.step, out,
                label(n) + " part " + std::to_string(k));
  }
}

// A slice_scatter over a base computed by this program that nothing else reads (not a graph
// root, one use, possibly through reshapes: free reinterpretations of its buffer) writes only its
// window, into the base's own buffer: the two are one value. A chain of them (a gradient copied
// into each window of a flat bucket, a KV cache written slot by slot) then costs one copy of the
// base and its windows, not a copy of the whole base per link.
const ir::Node* Planner::in_place_base(const Node* n) const {
  if (n->op != OpKind::SliceScatter) return nullptr;
  const Node* b = n->operands[0].node.get();
  if (users_[idx(b)] != 1 || is_root_[idx(b)]) return nullptr;
  const Node* base = sole_alias_base(b);
  if (!base || base->num_outputs() != 1) return nullptr;
  const Kind k = kind_of(base);
  return k == Kind::Param || k == Kind::View ? nullptr : base;
}

// Whether slice_scatter `n` starts a chain of slice_scatters written in place over it
// (in_place_base) whose windows, with n's own, cover all of n's base: then no element of the base
// survives and n need not copy it (DDP's bucket: every element is some gradient's). Counts
// windows of step 1 along n's dim, links of n's shape.
bool Planner::chain_covers_base(const Node* n) const {
  const auto& sl = n->attr<ir::SliceAttrs>();
  const int64_t dim = sl.dim;
  if (n->shape[dim] == 0 || numel(n->operands[1].shape()) == 0) return false;
  std::vector<std::pair<int64_t, int64_t>> windows;
  auto add = [&](const ir::SliceAttrs& a) {
    if (a.step == 1 && a.dim == dim) windows.push_back({a.start, a.end});
  };
  add(sl);
  auto only_user = [&](const Node* x) -> const Node* {
    const int i = idx(x);
    return users_[i] == 1 && !is_root_[i] && user_list_[i].size() == 1 ? user_list_[i][0] : nullptr;
  };
  for (const Node* cur = n;;) {
    const Node* below = cur;
    const Node* u = only_user(cur);
    while (u && u->op == OpKind::Reshape && !mat_[idx(u)]) {
      below = u;
      u = only_user(u);
    }
    if (!u || u->op != OpKind::SliceScatter || u->operands[0].node.get() != below ||
        u->shape != n->shape || in_place_base(u) != cur) {
      break;
    }
    add(u->attr<ir::SliceAttrs>());
    cur = u;
  }
  std::sort(windows.begin(), windows.end());
  int64_t covered = 0;
  for (const auto& [a, b] : windows) {
    if (a > covered) return false;
    covered = std::max(covered, b);
  }
  return covered >= n->shape[dim];
}

// The materialized node whose buffer `n` is, through reshapes, when each link below `n` has no
// other use and is no graph root; null otherwise.
const ir::Node* Planner::sole_alias_base(const Node* n) const {
  while (!mat_[idx(n)]) {
    if (n->op != OpKind::Reshape) return nullptr;
    n = n->operands[0].node.get();
    if (users_[idx(n)] != 1 || is_root_[idx(n)]) return nullptr;
  }
  return n;
}

void Planner::kernel_for(const Node* n) {
  if (const Node* base = in_place_base(n)) {
    in_place_[n] = base;
    note("slice_scatter " + label(n) + " writes its window in place over " + label(base));
  }
  int out = value_of(out_of(n));
  KernelBuild kb;
  if (is_scatter(*n)) {
    scatter_kernels_for(n, out);
  } else if (n->op == OpKind::Cat || n->op == OpKind::SliceScatter) {
    parts_kernels_for(n, out);
  } else if (is_reduction(n->op)) {
    const Out x = op0(n);
    const Shape& xs = x.shape();
    kb.rank = static_cast<int>(xs.size());
    kb.spec.reduce_op = n->op;
    kb.spec.out_dtype = n->dtype;
    build_expr(kb, x, identity(xs), nullptr);
    std::vector<bool> reduced(kb.rank, false);
    for (int64_t d : n->attr<ir::ReduceAttrs>().dims) reduced[d] = true;
    // Output strides over the input's dims: the kept dims' dense strides, 0 on reduced dims.
    Shape kept;
    for (int d = 0; d < kb.rank; ++d) {
      if (!reduced[d]) kept.push_back(xs[d]);
    }
    std::vector<int64_t> ks = contiguous_strides(kept);
    std::vector<int64_t> oa(kb.rank + 1, 0);
    for (int d = 0, k = 0; d < kb.rank; ++d) {
      if (!reduced[d]) oa[1 + d] = ks[k++];
    }
    finish_kernel(kb, xs, reduced, oa, out, label(n));
  } else {
    if (row_kernels_.count(n)) {
      if (row_kernel_for(n, out)) return;
      unfold_rows(n);
    }
    kb.rank = static_cast<int>(n->shape.size());
    kb.spec.out_dtype = n->dtype;
    build_expr(kb, out_of(n), identity(n->shape), n);
    std::vector<int64_t> oa = linear(n->shape, identity(n->shape), kb.rank);
    finish_kernel(kb, n->shape, std::vector<bool>(kb.rank, false), oa, out, label(n));
  }
}

// The kernel of `n` with its reductions as stages (rule 5b); false, with nothing recorded, where
// it does not fit.
bool Planner::row_kernel_for(const Node* n, int out) {
  KernelBuild kb;
  kb.rank = static_cast<int>(n->shape.size());
  kb.spec.out_dtype = n->dtype;
  kb.row_space = &n->shape;
  const size_t nvalues = plan_.values.size();
  trial_keys_.clear();
  trial_ = true;
  int out_expr = build_expr(kb, out_of(n), identity(n->shape), n);
  // The per-row roots it stores that its output does not read (a logsumexp beside the softmax),
  // read as the rows' broadcast; then the output again, as the last expression (the stored one).
  const View id = identity(n->shape);
  for (const Node* r : g_.post_order) {
    auto it = row_out_of_.find(r);
    if (it == row_out_of_.end() || it->second != n) continue;
    if (std::any_of(kb.row_outs.begin(), kb.row_outs.end(),
                    [r](const auto& o) { return o.first == r; }))
      continue;
    View v(r->shape.size());
    for (size_t j = 0; j < r->shape.size(); ++j)
      v[j] = r->shape[j] == 1 ? zero_row(kb.rank) : id[j];
    build_expr(kb, out_of(r), v, n);
  }
  if (out_expr != static_cast<int>(kb.spec.exprs.size()) - 1) {
    add_expr(kb, {OpKind::Cast, n->dtype, out_expr, -1, -1, -1, 0});
  }
  trial_ = false;
  const std::string why = row_kernel_misfit(kb);
  if (!why.empty()) {
    for (const auto& k : trial_keys_) value_.erase(k);
    plan_.values.resize(nvalues);
    note("row kernel of " + label(n) + " does not fit: " + why + " (rule 5b)");
    return false;
  }
  std::vector<bool> reduced(kb.rank, false);
  for (int d = kb.rank - kb.row_dims; d < kb.rank; ++d) reduced[d] = true;
  finish_kernel(kb, n->shape, reduced, linear(n->shape, identity(n->shape), kb.rank), out,
                label(n) + " with its reductions", false, {}, /*row=*/true);
  return true;
}

}  // namespace lz::lower
