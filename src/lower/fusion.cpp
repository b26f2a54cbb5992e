// Lowering a synced graph into a plan of fused kernels, library calls and fallbacks.
//
// Fusion rules (each applied in build_plan, in this order; the limits are the constants below):
//  1. Elementwise ops (unary, binary, compare, where, cast, the autograd identities, constants,
//     iota, the random ops) fuse into the kernel of their consumer. A kernel computes one value.
//     A random draw's value i depends only on its key and i, its row-major position in the op's
//     output (interp/kernels.h), so like iota it is computed at the point from that position:
//     dropout's mask, multiply and scale are one kernel. A uniform draw counts 0 ops (as the load
//     of a materialized draw did), rng_normal kRngNormalOps (two scalar libm calls per element),
//     so a shared normal draw is computed once (rule 3). rng_advance (0-d) is a kernel of its own:
//     a draw's kernel then never depends on how many advances produced its key.
//  2. Movement ops (permute, expand, slice, and reshapes that only split dims or add/remove
//     size-1 dims) never copy: they become index arithmetic, pushed down to the loads as affine
//     maps from the kernel's loop indices. A reshape that merges dims is not affine; over a
//     materialized buffer it is a free reinterpretation (an alias), otherwise its operand is
//     materialized first. cat and slice_scatter are materialized, each by one elementwise
//     kernel per part writing its window of the output (parts_kernels_for): a cat's operands
//     (fused) into consecutive ranges of the dim; a slice_scatter's src into its strided window
//     and the base around it (step 1: the two ranges outside the window; a larger step: all of
//     the base first, then the window over it).
//  3. A value used more than once is recomputed in each user's kernel when its fused expression
//     has at most kMaxRecomputedOps ops (x - max(x) in a softmax), and materialized once otherwise.
//  4. An expand that broadcasts a computed expression of more than kMaxBroadcastRecompute ops
//     materializes it (otherwise each broadcast element would recompute it).
//  5. A reduction (sum, prod, max, min; on bool, max and min are any and all) is one kernel with
//     its elementwise producers fused in (rules 1-4 decide how far); its output is materialized,
//     except under rule 5b.
// 5b. Row fusion (LAZULI_FUSE_ROWS, on by default): a reduction over the trailing dims of its
//     input whose every use ends in one elementwise kernel over that same input space (softmax's
//     max and sum, layer_norm's mean and variance, each consumed through a broadcast) is not
//     materialized: it becomes a stage of that kernel, which runs row by row: each stage folds
//     its expression over the row (as a row reduction would, in the same order), later stages
//     and the row's outputs read the earlier stages' values, and the row's outputs are stored.
//     The row stays in cache, so softmax and layer_norm read their input from memory once. A
//     broadcast of a per-row value (rsqrt(var + eps)) is then not materialized by rule 4: it is
//     computed once per row. A reduction also read elsewhere (a graph root, another kernel, a
//     library call, the saved statistics of a backward pass) stays materialized, and so does
//     one whose kernel turns out not to fit (index checks, a view of the reduced value that is
//     not the row's broadcast, more than kMaxRowKernelOps ops). Rows longer than
//     kMaxRowElements are not fused: they do not stay in cache, and few long rows (a whole-tensor
//     mean) would leave the outputs' work on one thread.
//  6. A kernel holds at most kMaxKernelOps ops: past it, the largest operand is materialized.
//  7. Matrix products are library calls (the cpu target: oneDNN sgemm for float32), and so are
//     convolutions where the target has a library for them (lower/target.h); ops the target's
//     code generator does not cover run their reference kernel (a fallback, counted as
//     fallback::<op>). Their operands are materialized dense buffers, except that a chain of
//     permutes under a 2-D matrix product operand of the target's transpose dtype (float32) is
//     folded into the call: it composes to the identity (read the buffer as is) or to a
//     transpose (sgemm's 'T'). Such a product whose only user is a transpose computes the
//     transpose directly (C^T = op(B)^T op(A)^T): a weight gradient written (x^T g)^T costs no
//     strided pass.
//  8. Graph roots are materialized into their output storage directly, except a root that is a
//     parameter, an alias, or a repeated root: those are copied at the end.
//  9. Index ops. gather and index_select are indirect loads and fuse like elementwise ops (rule
//     1): their index expression is computed at the point and bounds-checked, and the data operand
//     (itself possibly a fused expression) is read with that dim's index replaced by the checked
//     value (a dynamic term of the view, kernel_spec.h). scatter_add and index_copy are
//     materialized by two steps: an elementwise kernel copying the base (fused) into the output,
//     then a Scatter kernel over the index space whose index and src are fused expressions. A
//     fused check must see every index the reference checks: an operand holding fused checks is
//     materialized when its consumer reads only part of it (a slice, a gather's data operand, a
//     scatter_add src larger than the index). Rank-0 operands and empty iteration spaces run the
//     reference kernel.
// 10. float16 and bfloat16 values are loaded, converted and stored by the kernels like any other
//     dtype (i16 in memory and registers; a cast widens to or narrows from float32 exactly as
//     core/reduced_float.h). The frontend computes everything else in float32, so a 16-bit value
//     reaches the backend only in casts, leaves, movement and index ops, and bfloat16 matrix
//     products (a library call, rule 7). A node that would compute on 16-bit values in a kernel
//     (an arithmetic op, a where, a reduction or scatter_add built below the frontend) runs its
//     reference kernel, which refuses it with its own error.
#include <algorithm>
#include <climits>
#include <cstring>
#include <map>
#include <queue>
#include <set>
#include <sstream>

#include "core/config.h"
#include "lazuli/error.h"
#include "lower/plan.h"

namespace lz::lower {
namespace {

using ir::Node;
using ir::OpClass;
using ir::OpKind;

constexpr int kMaxRecomputedOps = 8;
constexpr int kMaxBroadcastRecompute = 2;
constexpr int kMaxKernelOps = 64;
constexpr int kMaxRowKernelOps = 2 * kMaxKernelOps;
// Rule 5b keeps a row in cache between its passes; a longer row gains nothing from it and a
// kernel of few long rows would run its outputs on few threads (one row each).
constexpr int64_t kMaxRowElements = 65536;  // 256 KiB of float32; the L2 here is 1 MiB a core
constexpr int kRngNormalOps = kMaxRecomputedOps + 1;

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

// r += w * add
void add_scaled(Row& r, const Row& add, int64_t w) {
  r.off += w * add.off;
  for (size_t d = 0; d < r.coef.size(); ++d) r.coef[d] += w * add.coef[d];
  add_dyn(r.dyn, add.dyn, w);
}

bool is_reduction(OpKind op) {
  return op == OpKind::ReduceSum || op == OpKind::ReduceProd || op == OpKind::ReduceMax ||
         op == OpKind::ReduceMin;
}
bool is_random(OpKind op) {
  return op == OpKind::RngUniform || op == OpKind::RngNormal || op == OpKind::RngAdvance;
}
bool is_view(OpKind op) {
  return op == OpKind::Permute || op == OpKind::Expand || op == OpKind::Slice || op == OpKind::Reshape;
}
// Index ops with a kernel: gather and index_select are indirect loads (fused like elementwise
// ops), scatter_add and index_copy a fill of the base then a Scatter kernel. Rank 0 (PyTorch's
// one-slot special case, with its own error) and an empty iteration space (whose index the
// reference still checks) run the reference kernel.
bool is_indirect_load(const Node& n) {
  return (n.op == OpKind::Gather || n.op == OpKind::IndexSelect) &&
         !n.operands[0].shape().empty() && numel(n.shape) > 0;
}
bool is_scatter(const Node& n) {
  if ((n.op != OpKind::ScatterAdd && n.op != OpKind::IndexCopy) || n.shape.empty()) return false;
  if (n.op == OpKind::ScatterAdd && is_reduced_float(n.dtype)) return false;  // rule 10
  return numel(n.operands[n.op == OpKind::ScatterAdd ? 1 : 2].shape()) > 0;
}

// Reshape as an affine map from out-index rows to in-index rows: possible when each in dim is a
// product of consecutive out dims (a split), size-1 dims aside.
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

class Planner {
 public:
  Planner(const ir::LoweringGraph& g, const Target& target, bool explain, bool fuse_rows)
      : g_(g), target_(target), explain_(explain), fuse_rows_(fuse_rows) {}

  Plan run() {
    const auto& po = g_.post_order;
    for (size_t i = 0; i < po.size(); ++i) index_[po[i]] = static_cast<int>(i);
    users_.assign(po.size(), 0);
    user_list_.assign(po.size(), {});
    is_root_.assign(po.size(), false);
    for (const Node* n : po) {
      for (const ir::Value& v : n->operands) {
        users_[idx(v.node.get())]++;
        user_list_[idx(v.node.get())].push_back(n);
      }
    }
    for (const ir::Value& r : g_.roots) {
      users_[idx(r.node.get())]++;
      is_root_[idx(r.node.get())] = true;
    }
    decide();
    if (fuse_rows_) fuse_rows();
    build_steps();
    plan_memory();
    return std::move(plan_);
  }

 private:
  int idx(const Node* n) const { return index_.at(n); }

  // One output of a node: what a plan value holds (a multi-output node, always materialized by
  // its own step, has one value per output).
  struct Out {
    const Node* node = nullptr;
    int index = 0;
    explicit operator bool() const { return node != nullptr; }
    DType dtype() const { return node->output_dtype(index); }
    const Shape& shape() const { return node->output_shape(index); }
  };
  static Out out_of(const ir::Value& v) { return {v.node.get(), v.index}; }
  static Out out_of(const Node* n) { return {n, 0}; }
  Out op0(const Node* n) const { return out_of(n->operands[0]); }

  void note(const std::string& s) {
    if (explain_) plan_.notes.push_back(s);
  }
  std::string label(const Node* n) const {
    return "n" + std::to_string(idx(n)) + " " + std::string(ir::op_name(n->op)) + shape_str(n->shape);
  }

  // Parts: a value written window by window by several elementwise kernels (cat, slice_scatter).
  enum class Kind : uint8_t { Param, Fusible, View, Reduce, Scatter, Parts, Opaque };
  Kind kind_of(const Node* n) const {
    if (n->op == OpKind::DeviceData) return Kind::Param;
    if (n->op == OpKind::Constant || n->op == OpKind::Iota || is_indirect_load(*n))
      return Kind::Fusible;
    if (is_scatter(*n)) return Kind::Scatter;
    if (is_random(n->op)) return Kind::Fusible;
    if (ir::is_elementwise(n->op)) {
      return target_.compiles_elementwise(*n) ? Kind::Fusible : Kind::Opaque;
    }
    if (is_view(n->op)) return Kind::View;
    if (n->op == OpKind::Cat || n->op == OpKind::SliceScatter) return Kind::Parts;
    if (is_reduction(n->op)) {
      // Bool max/min are any/all (an or/and fold); a bool sum or product is not recorded.
      const bool any_all = n->op == OpKind::ReduceMax || n->op == OpKind::ReduceMin;
      if (touches_reduced_float(*n)) return Kind::Opaque;  // rule 10
      return n->dtype == DType::Bool && !any_all ? Kind::Opaque : Kind::Reduce;
    }
    return Kind::Opaque;
  }

  // The materialized output whose buffer `o` reads, through reshape aliases; empty if none.
  Out buffer_base(Out o) const {
    while (true) {
      if (mat_[idx(o.node)]) return o;
      if (o.node->op != OpKind::Reshape) return {};
      o = op0(o.node);
    }
  }

  void materialize(const Node* n, const std::string& why) {
    if (mat_[idx(n)]) return;
    mat_[idx(n)] = true;
    cost_[idx(n)] = 0;
    note("materialize " + label(n) + ": " + why);
  }

  // A dense buffer for a library call or fallback operand.
  void need_dense(Out o, const Node* user) {
    if (buffer_base(o)) return;
    materialize(o.node, "operand of " + std::string(ir::op_name(user->op)));
  }

  // A 2-D matrix product the target's library reads transposed operands for (rule 7).
  bool folds_transposes(const Node* mm) const {
    return mm->op == OpKind::MatMul && target_.matmul_transpose_dtype == mm->dtype &&
           mm->shape.size() == 2;
  }

  // Such a product's operand that is a chain of permutes over x: x read as is or transposed.
  bool folds_into_sgemm(const Node* mm, Out o, Out* base, bool* trans) const {
    if (!folds_transposes(mm) || o.node->op != OpKind::Permute || o.shape().size() != 2) {
      return false;
    }
    std::vector<int64_t> total = {0, 1};
    Out n = o;
    while (n.node->op == OpKind::Permute && !buffer_base(n)) {
      for (int64_t& t : total) t = n.node->attr<ir::PermuteAttrs>().perm[t];
      n = op0(n.node);
    }
    *base = n;
    *trans = total[0] == 1;
    return n.shape().size() == 2;
  }

  // The library the target runs a convolution or a pooling node through; empty: none.
  const std::string& library_of(const Node* n) const {
    static const std::string none;
    const ir::OpClass cls = ir::op_info(n->op).cls;
    return cls == ir::OpClass::Conv   ? target_.convolution_library
           : cls == ir::OpClass::Pool ? target_.pooling_library
                                      : none;
  }

  void decide() {
    const auto& po = g_.post_order;
    mat_.assign(po.size(), false);
    cost_.assign(po.size(), 0);
    has_check_.assign(po.size(), false);
    row_scalar_.assign(po.size(), false);
    // A per-row value: a reduction, or computed (unmaterialized) from per-row values and
    // constants. Rule 5b may compute it once per row of the kernel the reduction folds into.
    auto per_row = [&](const Node* o) {
      return row_scalar_[idx(o)] && (kind_of(o) == Kind::Reduce || !mat_[idx(o)]);
    };
    for (const Node* n : po) {
      const int i = idx(n);
      const Kind kind = kind_of(n);
      // Rule 9: a consumer that reads only some points of an operand (a slice, the data operand of
      // a gather, a scatter's src larger than its index) would skip index checks fused there.
      auto partial_read = [&](const Node* o, std::string_view by) {
        if (!mat_[idx(o)] && has_check_[idx(o)]) {
          materialize(o, "its index checks must see every index; " + std::string(by) +
                             " reads part of it (rule 9)");
        }
      };
      if ((n->op == OpKind::Slice && kind == Kind::View) ||
          (kind == Kind::Fusible && is_indirect_load(*n))) {
        partial_read(n->operands[0].node.get(), ir::op_name(n->op));
      } else if (kind == Kind::Parts && n->op == OpKind::SliceScatter) {
        partial_read(n->operands[0].node.get(), "slice_scatter");  // the base outside the window
      } else if (kind == Kind::Scatter && n->op == OpKind::ScatterAdd &&
                 n->operands[1].shape() != n->operands[2].shape()) {
        partial_read(n->operands[2].node.get(), "scatter_add");
      }
      switch (kind) {
        case Kind::Param: mat_[i] = true; break;
        case Kind::Opaque:
          for (const ir::Value& v : n->operands) {
            Out base;
            bool trans = false;
            if (folds_into_sgemm(n, out_of(v), &base, &trans)) {
              if (!buffer_base(base)) materialize(base.node, "operand of matmul (transpose folded)");
              folded_[v.node.get()] = {base, trans};
              continue;
            }
            need_dense(out_of(v), n);
          }
          if (folds_transposes(n) && users_[i] == 1) {
            const Node* t = user_list_[i].empty() ? nullptr : user_list_[i].back();
            if (t && t->op == OpKind::Permute &&
                t->attr<ir::PermuteAttrs>().perm == std::vector<int64_t>{1, 0}) {
              transposed_mm_[t] = n;
              note("matmul " + label(n) + " computes its transpose " + label(t) + " directly");
              break;  // not materialized: its only user computes the product itself
            }
          }
          mat_[i] = true;
          if (!library_of(n).empty()) {
            note("library " + label(n) + ": " + library_of(n) + ", else the reference kernel");
          } else if (n->op != OpKind::MatMul) {
            note("fallback " + label(n) + ": reference kernel");
          }
          break;
        case Kind::Reduce:
        case Kind::Scatter:
        case Kind::Parts:
          mat_[i] = true;
          cost_[i] = 0;
          break;
        case Kind::View: {
          const Out x = op0(n);
          if (transposed_mm_.count(n)) {
            mat_[i] = true;
            break;
          }
          if (n->op == OpKind::Reshape && !reshape_is_affine(x.shape(), n->shape) && !buffer_base(x)) {
            materialize(x.node, "reshape " + shape_str(x.shape()) + " -> " + shape_str(n->shape) +
                                    " merges dims");
          }
          if (n->op == OpKind::Expand && cost_[idx(x.node)] > kMaxBroadcastRecompute &&
              numel(n->shape) > numel(x.shape()) && !mat_[idx(x.node)]) {
            if (fuse_rows_ && per_row(x.node)) {
              row_broadcast_.push_back({x.node, n});  // rule 5b decides (fuse_rows)
            } else {
              materialize(x.node, "broadcast by " + label(n) + " (rule 4)");
            }
          }
          cost_[i] = mat_[idx(x.node)] ? 0 : cost_[idx(x.node)];
          row_scalar_[i] = n->op == OpKind::Reshape && per_row(x.node);
          break;
        }
        case Kind::Fusible: {
          auto total = [&] {
            // A uniform draw counts as the load of the materialized draw it replaces, so fusing
            // draws changes no other fusion decision (plans keep their shapes); its key is a
            // loop-invariant load.
            if (n->op == OpKind::RngUniform) return 0;
            if (n->op == OpKind::RngNormal) return kRngNormalOps;
            int c = 1;
            for (const ir::Value& v : n->operands) c += mat_[idx(v.node.get())] ? 0 : cost_[idx(v.node.get())];
            return c;
          };
          int c = total();
          while (c > kMaxKernelOps) {  // rule 6
            const Node* big = nullptr;
            for (const ir::Value& v : n->operands) {
              const Node* o = v.node.get();
              if (!mat_[idx(o)] && (!big || cost_[idx(o)] > cost_[idx(big)])) big = o;
            }
            materialize(big, "kernel size limit (rule 6)");
            c = total();
          }
          cost_[i] = c;
          if (ir::is_elementwise(n->op) && !is_random(n->op) && !n->operands.empty()) {
            bool any = false, all = true;
            for (const ir::Value& v : n->operands) {
              const bool r = per_row(v.node.get());
              any = any || r;
              all = all && (r || v.node->op == OpKind::Constant);
            }
            row_scalar_[i] = any && all;
          }
          break;
        }
      }
      if (kind == Kind::Reduce) row_scalar_[i] = true;
      if (n->op == OpKind::RngAdvance) {
        // A key chain grows by one advance per draw until a barrier syncs the device's key; fused
        // into the draws, each length would be a new kernel structure (a compile per step).
        materialize(n, "a key: draws read it from memory (rule 1)");
      }
      if (!mat_[i] && users_[i] > 1 && cost_[i] > kMaxRecomputedOps) {
        materialize(n, std::to_string(users_[i]) + " users and " + std::to_string(cost_[i]) +
                           " ops (rule 3)");
      }
      if (kind == Kind::Fusible || kind == Kind::View) {
        has_check_[i] = is_indirect_load(*n);
        for (const ir::Value& v : n->operands) {
          has_check_[i] =
              has_check_[i] || (!mat_[idx(v.node.get())] && has_check_[idx(v.node.get())]);
        }
      }
    }
    for (const ir::Value& r : g_.roots) {
      if (!buffer_base(out_of(r))) materialize(r.node.get(), "graph root");
    }
  }

  // ---- rule 5b: row fusion ----
  // Reduction r reduces the trailing dims of its input, at most kMaxRowElements of them.
  bool reduces_short_rows(const Node* r) const {
    std::vector<int64_t> d = r->attr<ir::ReduceAttrs>().dims;
    std::sort(d.begin(), d.end());
    const Shape& in = op0(r).shape();
    const int64_t first = static_cast<int64_t>(in.size() - d.size());
    int64_t row = 1;
    for (size_t k = 0; k < d.size(); ++k) {
      if (d[k] != first + static_cast<int64_t>(k)) return false;
      row *= in[d[k]];
    }
    return !d.empty() && row <= kMaxRowElements;
  }

  // The one kernel every use of r's value ends in, through unmaterialized elementwise ops and
  // views (a reduction folded into a kernel counts as that kernel); null if there are several,
  // or a use that is not a kernel's (a graph root, a library call, a cat...).
  const Node* row_sink(const Node* r) const {
    const Node* sink = nullptr;
    std::vector<const Node*> stack{r};
    std::set<const Node*> seen{r};
    while (!stack.empty()) {
      const Node* n = stack.back();
      stack.pop_back();
      if (is_root_[idx(n)]) return nullptr;
      for (const Node* u : user_list_[idx(n)]) {
        if (!seen.insert(u).second) continue;
        const Node* k = nullptr;
        if (auto it = stage_of_.find(u); it != stage_of_.end()) {
          k = it->second;
        } else if (mat_[idx(u)]) {
          k = u;
        } else if (kind_of(u) == Kind::Fusible || kind_of(u) == Kind::View) {
          stack.push_back(u);
          continue;
        } else {
          return nullptr;
        }
        if (sink && sink != k) return nullptr;
        sink = k;
      }
    }
    return sink;
  }

  // An elementwise kernel over r's input space.
  bool row_kernel_ok(const Node* r, const Node* k) const {
    return k && kind_of(k) == Kind::Fusible && ir::is_elementwise(k->op) && !is_random(k->op) &&
           k->shape == op0(r).shape();
  }

  // o's unmaterialized expression reads a reduction's materialized output.
  bool reads_materialized_reduction(const Node* o) const {
    std::vector<const Node*> stack{o};
    std::set<const Node*> seen{o};
    while (!stack.empty()) {
      const Node* n = stack.back();
      stack.pop_back();
      if (kind_of(n) == Kind::Reduce && mat_[idx(n)]) return true;
      if (n != o && mat_[idx(n)]) continue;
      for (const ir::Value& v : n->operands) {
        if (seen.insert(v.node.get()).second) stack.push_back(v.node.get());
      }
    }
    return false;
  }

  // Rule 4 again for the per-row values rule 5b kept from it that still read a materialized
  // reduction; each one materialized is appended to `done` (when given). True if any.
  bool restore_rule4(std::vector<const Node*>* done = nullptr) {
    bool any = false;
    for (const auto& [x, by] : row_broadcast_) {
      if (mat_[idx(x)] || !reads_materialized_reduction(x)) continue;
      materialize(x, "broadcast by " + label(by) + " (rule 4)");
      if (done) done->push_back(x);
      any = true;
    }
    return any;
  }

  void fuse_rows() {
    const auto& po = g_.post_order;
    for (size_t i = po.size(); i-- > 0;) {  // users first: a later reduction may take an earlier
      const Node* r = po[i];
      if (kind_of(r) != Kind::Reduce || !reduces_short_rows(r)) continue;
      const Node* k = row_sink(r);
      if (!row_kernel_ok(r, k)) continue;
      stage_of_[r] = k;
      mat_[i] = false;
    }
    // Rule 4 again where a per-row value still reads a materialized reduction; a stage whose uses
    // no longer end in its kernel (a value just materialized) is materialized too; until stable.
    for (bool changed = true; changed;) {
      changed = restore_rule4();
      for (size_t i = po.size(); i-- > 0;) {
        auto it = stage_of_.find(po[i]);
        if (it != stage_of_.end() && row_sink(po[i]) != it->second) {
          stage_of_.erase(it);
          mat_[i] = true;
          changed = true;
        }
      }
    }
    for (const Node* r : po) {
      if (auto it = stage_of_.find(r); it != stage_of_.end()) {
        row_kernels_.insert(it->second);
        note("reduction " + label(r) + " folds into the kernel of " + label(it->second) +
             " (rule 5b)");
      }
    }
  }

  // ---- values ----
  int value_of(Out base) {
    auto key = std::make_pair(base.node, base.index);
    auto it = value_.find(key);
    if (it != value_.end()) return it->second;
    if (trial_) trial_keys_.push_back(key);
    PlanValue v;
    v.dtype = base.dtype();
    v.shape = base.shape();
    v.nbytes = numel(v.shape) * static_cast<int64_t>(dtype_size(v.dtype));
    if (base.node->op == OpKind::DeviceData) {
      v.home = {ValueHome::Param, g_.param_slot.at(base.node), 0};
    } else {
      v.home = {ValueHome::Scratch, 0, 0};
    }
    int id = static_cast<int>(plan_.values.size());
    plan_.values.push_back(v);
    value_[key] = id;
    return id;
  }

  void read(int value, int step) {
    PlanValue& v = plan_.values[value];
    v.last_use = std::max(v.last_use, step);
  }

  // ---- kernels ----
  struct KernelBuild {
    KernelSpec spec;
    std::vector<int> input_value;                 // per input
    std::vector<std::vector<int64_t>> input_args; // per input: offset, strides[rank]
    std::vector<std::vector<int64_t>> input_dyn;  // per input: the strides of its dynamic terms
    std::map<std::tuple<const Node*, int, std::vector<int64_t>>, int> memo;
    std::vector<double> scalars;                  // constant values, passed as arguments
    std::vector<IndexCheck> checks;               // per check: the op, dim and bound
    int rank = 0;
    // Row fusion (rule 5b): the kernel's space, the number of trailing dims its stages reduce,
    // and whether a stage could not be placed.
    const Shape* row_space = nullptr;
    int row_dims = 0;
    bool row_failed = false;
  };

  static std::vector<int64_t> view_key(const View& v) {
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

  int add_expr(KernelBuild& kb, KExpr e) {
    kb.spec.exprs.push_back(e);
    return static_cast<int>(kb.spec.exprs.size()) - 1;
  }

  // Offset and strides over the loop dims of a dense buffer of `shape` read through `v`.
  std::vector<int64_t> linear(const Shape& shape, const View& v, int rank) {
    std::vector<int64_t> st = contiguous_strides(shape);
    std::vector<int64_t> a(rank + 1, 0);
    for (size_t j = 0; j < shape.size(); ++j) {
      a[0] += st[j] * v[j].off;
      for (int d = 0; d < rank; ++d) a[1 + d] += st[j] * v[j].coef[d];
    }
    return a;
  }
  // Its dynamic terms: (checked index expression, element stride).
  static DynTerms linear_dyn(const Shape& shape, const View& v) {
    std::vector<int64_t> st = contiguous_strides(shape);
    DynTerms t;
    for (size_t j = 0; j < shape.size(); ++j) add_dyn(t, v[j].dyn, st[j]);
    return t;
  }
  static void split_dyn(const DynTerms& t, std::vector<int32_t>* ids,
                        std::vector<int64_t>* strides) {
    for (const auto& [e, c] : t) {
      ids->push_back(e);
      strides->push_back(c);
    }
  }

  Row zero_row(int rank) const { return Row{0, std::vector<int64_t>(rank, 0), {}}; }

  // A bounds check of index expression `index` against dim `dim` of `data`; returns the checked
  // value's expression.
  int add_check(KernelBuild& kb, const Node* n, int index, const Shape& data, int64_t dim) {
    const int k = static_cast<int>(kb.checks.size());
    kb.checks.push_back({n->op, dim, data[dim], idx(n)});
    kb.spec.nchecks = k + 1;
    return add_expr(kb, {OpKind::Gather, DType::Int64, index, -1, -1, k, 0});
  }

  // The expression of output `o` read through view `v`. Only a materialized output can be one of
  // a multi-output node, so past the first branch `n` is a single-output node.
  int build_expr(KernelBuild& kb, Out o, const View& v, const Node* root) {
    const Node* n = o.node;
    auto key = std::make_tuple(n, o.index, view_key(v));
    if (auto it = kb.memo.find(key); it != kb.memo.end()) return it->second;
    int e = -1;
    const Out base = n == root ? Out{} : buffer_base(o);
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
            throw Error("cpu backend: internal error: non-affine reshape reached a kernel");
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
    return e;
  }

  // A reduction folded into this kernel (rule 5b): a stage folding x over the row. Read through
  // `v`, its value must be the row's broadcast: its kept dims the kernel's own leading dims
  // (identity rows), whatever its reduced (size-1) dims.
  int row_stage_expr(KernelBuild& kb, const Node* r, const View& v, const Node* root) {
    const Out x = op0(r);
    const Shape& xs = x.shape();
    const int nred = static_cast<int>(r->attr<ir::ReduceAttrs>().dims.size());
    const int nkept = static_cast<int>(xs.size()) - nred;
    bool ok = kb.row_space && *kb.row_space == xs && (kb.row_dims == 0 || kb.row_dims == nred);
    for (int d = 0; ok && d < nkept; ++d) {
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
  void finish_kernel(KernelBuild& kb, const Shape& space, std::vector<bool> reduced,
                     std::vector<int64_t> out_args, int out_value, const std::string& what,
                     bool scatter = false, const DynTerms& out_dyn = {}, bool row = false) {
    const int rank = kb.rank;
    const int nin = static_cast<int>(kb.input_args.size());
    // With checks, the key (the point's row-major position in `space`) is one more operand.
    const int nops = nin + 1 + (kb.checks.empty() ? 0 : 1);
    std::vector<int64_t> key_args(rank + 1, 0);
    const std::vector<int64_t> space_strides = contiguous_strides(space);
    for (int d = 0; d < rank; ++d) key_args[1 + d] = space_strides[d];
    auto arg = [&](int x) -> std::vector<int64_t>& {
      return x < nin ? kb.input_args[x] : x == nin ? out_args : key_args;
    };
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
    std::vector<std::vector<int64_t>> st(nops);
    for (int d : order) {
      bool merge = !sizes.empty() && red.back() == reduced[d];
      for (int x = 0; merge && x < nops; ++x) merge = st[x].back() == arg(x)[1 + d] * space[d];
      if (merge) {
        sizes.back() *= space[d];
        for (int x = 0; x < nops; ++x) st[x].back() = arg(x)[1 + d];
      } else {
        sizes.push_back(space[d]);
        red.push_back(reduced[d]);
        for (int x = 0; x < nops; ++x) st[x].push_back(arg(x)[1 + d]);
      }
    }
    if (scheme == Scheme::RowFused) {
      if (sizes.empty() || !red.back()) {  // rows of one point: a size-1 row dim
        sizes.push_back(1);
        red.push_back(true);
        for (int x = 0; x < nops; ++x) st[x].push_back(0);
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
    step.checks = kb.checks;
    int64_t total = 1, reduce_total = 1;
    for (size_t d = 0; d < sizes.size(); ++d) (red[d] ? reduce_total : total) *= sizes[d];
    step.range = total;
    step.grain = std::max<int64_t>(1, target_.grain_elements / std::max<int64_t>(1, reduce_total));
    // Segment boundaries at whole cache lines of the output (on the cpu target 16 elements of 4
    // bytes, 32 of 2, 64 bools), so two threads never write one line.
    step.align = scheme == Scheme::RowReduce || scheme == Scheme::RowFused
                     ? 1
                     : std::max<int64_t>(target_.min_align_elements,
                                         target_.line_bytes /
                                             static_cast<int64_t>(dtype_size(s.out_dtype)));
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
    plan_.steps.push_back(std::move(step));
    note("kernel " + std::to_string(k) + " (" + name.substr(0, 12) + ") computes " + what + ": " +
         std::to_string(s.exprs.size()) + " ops, " + std::to_string(s.inputs.size()) + " inputs, " +
         scheme_name(scheme) +
         (kb.checks.empty() ? "" : ", " + std::to_string(kb.checks.size()) + " index check(s)"));
  }

  View identity(const Shape& s) {
    const int rank = static_cast<int>(s.size());
    View v(rank, zero_row(rank));
    for (int d = 0; d < rank; ++d) v[d].coef[d] = 1;
    return v;
  }

  // scatter_add / index_copy: the base copied into the output (an elementwise kernel, the base's
  // expression fused), then a Scatter kernel over the index space adding (copying) src there.
  void scatter_kernels_for(const Node* n, int out) {
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
  void part_kernel(const Node* n, int64_t dim, Out x, const View& xv, const Shape& space,
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
  void parts_kernels_for(const Node* n, int out) {
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

  void kernel_for(const Node* n) {
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
  bool row_kernel_for(const Node* n, int out) {
    KernelBuild kb;
    kb.rank = static_cast<int>(n->shape.size());
    kb.spec.out_dtype = n->dtype;
    kb.row_space = &n->shape;
    const size_t nvalues = plan_.values.size();
    trial_keys_.clear();
    trial_ = true;
    build_expr(kb, out_of(n), identity(n->shape), n);
    trial_ = false;
    std::string why = kb.row_failed         ? "a reduced value is not read as the row's broadcast"
                      : !kb.checks.empty()  ? "the kernel has index checks"
                      : kb.spec.exprs.size() > kMaxRowKernelOps
                          ? std::to_string(kb.spec.exprs.size()) + " ops"
                          : "";
    if (kb.row_dims == 0 && why.empty()) why = "no reduction reached";
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

  // After row_kernel_for(k) failed: k's reductions (and the per-row values that broadcast them,
  // rule 4) are materialized by their own kernels, emitted now, before k's.
  void unfold_rows(const Node* k) {
    std::vector<const Node*> redo;
    for (const Node* r : g_.post_order) {
      auto it = stage_of_.find(r);
      if (it == stage_of_.end() || it->second != k) continue;
      stage_of_.erase(it);
      mat_[idx(r)] = true;
      redo.push_back(r);
    }
    restore_rule4(&redo);
    std::sort(redo.begin(), redo.end(), [&](const Node* a, const Node* b) { return idx(a) < idx(b); });
    for (const Node* r : redo) kernel_for(r);
  }

  // `n` computed by its own op, or (transposed_of set) the transpose `n` of a 2-D product
  // computed as op(B)^T op(A)^T.
  void library_or_fallback(const Node* n, const Node* transposed_of = nullptr) {
    const Node* src = transposed_of ? transposed_of : n;
    PlanStep step;
    step.kind = src->op == OpKind::MatMul ? PlanStep::MatMul
                : !library_of(src).empty()   ? PlanStep::Library
                                             : PlanStep::Fallback;
    if (step.kind == PlanStep::Fallback && !target_.host_fallbacks) {
      throw Error(target_.name + " backend: no kernel for " + label(src) +
                  ", and its reference kernel cannot run on this target's memory");
    }
    step.op = src->op;
    step.attrs = src->attrs;
    step.node = idx(src);
    int sid = static_cast<int>(plan_.steps.size());
    for (const ir::Value& o : src->operands) {
      Out on = out_of(o);
      bool trans = false;
      if (auto it = folded_.find(o.node.get()); it != folded_.end()) {
        on = it->second.first;
        trans = it->second.second;
      }
      int v = value_of(buffer_base(on));
      step.inputs.push_back(v);
      step.in_shapes.push_back(on.shape());
      step.in_dtypes.push_back(on.dtype());
      step.trans.push_back(transposed_of ? !trans : trans);
      read(v, sid);
    }
    if (transposed_of) {
      std::swap(step.inputs[0], step.inputs[1]);
      std::swap(step.in_shapes[0], step.in_shapes[1]);
      std::swap(step.trans[0], step.trans[1]);
    }
    step.output = value_of(out_of(n));
    plan_.values[step.output].def_step = sid;
    for (int k = 1; k < n->num_outputs(); ++k) {
      step.more_outputs.push_back(value_of({n, k}));
      plan_.values[step.more_outputs.back()].def_step = sid;
    }
    // Bumped only when the reference kernel runs: always for a fallback, and for a library step
    // where the library has no implementation (an integer or float64 product, an odd geometry).
    step.counter = "fallback::" + std::string(ir::op_name(src->op));
    plan_.steps.push_back(std::move(step));
  }

  void build_steps() {
    for (const Node* n : g_.post_order) {
      if (!mat_[idx(n)] || n->op == OpKind::DeviceData) continue;
      if (auto it = transposed_mm_.find(n); it != transposed_mm_.end()) {
        library_or_fallback(n, it->second);
      } else if (kind_of(n) == Kind::Opaque) {
        library_or_fallback(n);
      } else {
        kernel_for(n);
      }
    }
    // Roots: written in place into their output storage when they are a computed value seen for
    // the first time; otherwise copied at the end.
    const int nroots = static_cast<int>(g_.roots.size());
    plan_.root_value.resize(nroots);
    plan_.root_copy.assign(nroots, true);
    for (int r = 0; r < nroots; ++r) {
      const Out root = out_of(g_.roots[r]);
      const Out base = buffer_base(root);
      int v = value_of(base);
      plan_.root_value[r] = v;
      PlanValue& pv = plan_.values[v];
      if (base.node == root.node && base.index == root.index && pv.home.kind == ValueHome::Scratch) {
        pv.home = {ValueHome::Output, r, 0};
        plan_.root_copy[r] = false;
      } else {
        pv.last_use = INT_MAX;
      }
    }
    // Which value each parameter is, for root_may_overwrite(); -2 (never overwritten) for a buffer
    // read through two nodes, which the check does not follow.
    plan_.param_value.assign(g_.num_params, -1);
    for (size_t vi = 0; vi < plan_.values.size(); ++vi) {
      const ValueHome& h = plan_.values[vi].home;
      if (h.kind != ValueHome::Param) continue;
      int& slot = plan_.param_value[h.index];
      slot = slot == -1 ? static_cast<int>(vi) : -2;
    }
  }

  // Scratch values get arena offsets by liveness (place_scratch).
  void plan_memory() {
    std::vector<int> order;
    std::vector<ScratchInterval> iv;
    for (size_t i = 0; i < plan_.values.size(); ++i) {
      const PlanValue& v = plan_.values[i];
      if (v.home.kind != ValueHome::Scratch) continue;
      order.push_back(static_cast<int>(i));
      iv.push_back({v.nbytes, v.def_step, std::max(v.last_use, v.def_step)});
    }
    const std::vector<int64_t> off =
        place_scratch(iv, &plan_.arena_bytes,
                      iv.size() > kLargestFirstLimit ? Placement::Sweep : Placement::LargestFirst);
    for (size_t k = 0; k < order.size(); ++k) plan_.values[order[k]].home.offset = off[k];
  }

  const ir::LoweringGraph& g_;
  const Target& target_;
  bool explain_;
  bool fuse_rows_;
  Plan plan_;
  std::unordered_map<const Node*, int> index_;
  std::vector<int> users_;
  std::vector<bool> mat_;
  std::vector<int> cost_;
  std::vector<bool> has_check_;  // a fused (not materialized) index check is in its expression
  std::vector<std::vector<const Node*>> user_list_;  // per node, its users (once per operand use)
  std::vector<bool> is_root_;
  // Rule 5b: per-row values; broadcasts rule 4 left to it (value, expand); each folded reduction's
  // kernel, and those kernels.
  std::vector<bool> row_scalar_;
  std::vector<std::pair<const Node*, const Node*>> row_broadcast_;
  std::unordered_map<const Node*, const Node*> stage_of_;
  std::set<const Node*> row_kernels_;
  bool trial_ = false;  // row_kernel_for's build: the plan values it creates, to take back
  std::vector<std::pair<const Node*, int>> trial_keys_;
  std::map<std::pair<const Node*, int>, int> value_;  // (node, output) -> plan value
  std::unordered_map<const Node*, std::pair<Out, bool>> folded_;  // matmul operand -> (base, transposed)
  std::unordered_map<const Node*, const Node*> transposed_mm_;  // transpose -> the product it computes
};

int64_t aligned_size(int64_t nbytes) {
  int64_t size = 0;
  if (nbytes < 0 || __builtin_add_overflow(nbytes, int64_t{63}, &size)) {
    throw OutOfMemoryError("cpu backend: a scratch buffer of " + std::to_string(nbytes) +
                           " bytes cannot be allocated");
  }
  return size / 64 * 64;
}

int64_t end_of(int64_t off, int64_t size) {
  int64_t end = 0;
  if (__builtin_add_overflow(off, size, &end)) {
    throw OutOfMemoryError("cpu backend: the program's scratch memory exceeds the address space");
  }
  return end;
}

// Largest first, each at the lowest offset no value alive at the same time occupies. Tight, but
// it compares each value with every one placed before it.
std::vector<int64_t> place_largest_first(const std::vector<ScratchInterval>& v, int64_t* total) {
  struct Placed {
    int64_t off, end;
    int def, last;
  };
  std::vector<int> order(v.size());
  for (size_t i = 0; i < v.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return v[a].nbytes > v[b].nbytes; });
  std::vector<int64_t> off(v.size(), 0);
  std::vector<Placed> placed;
  std::vector<std::pair<int64_t, int64_t>> busy;
  for (int i : order) {
    const int64_t size = aligned_size(v[i].nbytes);
    busy.clear();
    for (const Placed& p : placed) {
      if (p.def <= v[i].last && v[i].def <= p.last) busy.push_back({p.off, p.end});
    }
    std::sort(busy.begin(), busy.end());
    int64_t o = 0;
    for (auto [b, e] : busy) {
      if (end_of(o, size) <= b) break;
      o = std::max(o, e);
    }
    off[i] = o;
    placed.push_back({o, end_of(o, size), v[i].def, v[i].last});
    *total = std::max(*total, end_of(o, size));
  }
  return off;
}

// A sweep over the steps: a value's block is freed after its last use and reused best-fit by
// values defined later (free neighbours merge; the top of the arena grows only when nothing
// fits). O(n log n), for graphs too large for the quadratic placement.
std::vector<int64_t> place_sweep(const std::vector<ScratchInterval>& v, int64_t* total) {
  std::vector<int> order(v.size());
  for (size_t i = 0; i < v.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return v[a].def < v[b].def; });
  std::map<int64_t, int64_t> free_at;                 // offset -> size
  std::set<std::pair<int64_t, int64_t>> free_by_size;  // (size, offset)
  int64_t top = 0;
  auto add_free = [&](int64_t o, int64_t size) {
    auto next = free_at.lower_bound(o);
    if (next != free_at.end() && next->first == o + size) {  // merge with the block after
      size += next->second;
      free_by_size.erase({next->second, next->first});
      next = free_at.erase(next);
    }
    if (next != free_at.begin()) {  // merge with the block before
      auto prev = std::prev(next);
      if (prev->first + prev->second == o) {
        o = prev->first;
        size += prev->second;
        free_by_size.erase({prev->second, prev->first});
        free_at.erase(prev);
      }
    }
    if (o + size == top) {  // the top of the arena comes down instead
      top = o;
      return;
    }
    free_at[o] = size;
    free_by_size.insert({size, o});
  };
  using Live = std::pair<int, int>;  // (last step, value)
  std::priority_queue<Live, std::vector<Live>, std::greater<Live>> live;
  std::vector<int64_t> off(v.size(), 0), size(v.size(), 0);
  for (int i : order) {
    while (!live.empty() && live.top().first < v[i].def) {
      const int j = live.top().second;
      live.pop();
      add_free(off[j], size[j]);
    }
    size[i] = aligned_size(v[i].nbytes);
    auto fit = free_by_size.lower_bound({size[i], INT64_MIN});
    if (fit != free_by_size.end()) {
      const auto [fsize, fo] = *fit;
      free_by_size.erase(fit);
      free_at.erase(fo);
      off[i] = fo;
      if (fsize > size[i]) {
        free_at[fo + size[i]] = fsize - size[i];
        free_by_size.insert({fsize - size[i], fo + size[i]});
      }
    } else {
      off[i] = top;
      top = end_of(top, size[i]);
    }
    *total = std::max(*total, end_of(off[i], size[i]));
    live.push({v[i].last, i});
  }
  return off;
}

}  // namespace

std::vector<int64_t> place_scratch(const std::vector<ScratchInterval>& values, int64_t* arena_bytes,
                                   Placement how) {
  *arena_bytes = 0;
  return how == Placement::LargestFirst ? place_largest_first(values, arena_bytes)
                                        : place_sweep(values, arena_bytes);
}

Plan build_plan(const ir::LoweringGraph& graph, const Target& target, bool explain) {
  return Planner(graph, target, explain, config().fuse_rows).run();
}

// A root written in place may take a donated parameter's storage when its step is the last reader
// of that parameter and reads it element for element (same offset and strides as the output),
// which only an elementwise kernel does.
bool root_may_overwrite(const Plan& plan, int r, int p) {
  if (plan.root_copy[r] || p < 0 || p >= static_cast<int>(plan.param_value.size())) return false;
  const int vi = plan.param_value[p];
  if (vi < 0) return false;  // no step reads it (no value), or read through two nodes
  const PlanValue& out = plan.values[plan.root_value[r]];
  const PlanValue& pv = plan.values[vi];
  const int sid = out.def_step;
  const PlanStep& s = plan.steps[sid];
  if (s.kind != PlanStep::Kernel || plan.kernels[s.kernel].spec.scheme != Scheme::Elementwise) return false;
  // A scatter's output is written twice (its base, then the scatter kernel right after), a cat's
  // or slice_scatter's once per part, by consecutive steps.
  if (sid + 1 < static_cast<int>(plan.steps.size())) {
    const PlanStep& next = plan.steps[sid + 1];
    if (next.kind == PlanStep::Kernel && next.output == plan.root_value[r]) return false;
  }
  if (pv.last_use > sid || pv.nbytes != out.nbytes) return false;
  const KernelSpec& spec = plan.kernels[s.kernel].spec;
  const int rank = spec.rank;
  const int nin = static_cast<int>(spec.inputs.size());
  auto op_args = [&](int x) {
    auto b = s.args.begin() + rank + x * (rank + 1);
    return std::vector<int64_t>(b, b + rank + 1);
  };
  const std::vector<int64_t> oargs = op_args(nin);
  for (int x = 0; x < nin; ++x) {
    if (s.inputs[x] == vi && op_args(x) != oargs) return false;
  }
  return true;
}

Hash128 KernelSpec::structure() const {
  Hasher h;
  h.add_str("lz-kernel-v2");
  h.add(static_cast<uint8_t>(scheme));
  h.add(rank);
  h.add(nred);
  h.add(reduce_op);
  h.add(out_dtype);
  h.add(nscalars);
  h.add<uint64_t>(exprs.size());
  for (const KExpr& e : exprs) {
    h.add(e.op).add(e.dtype).add(e.a).add(e.b).add(e.c).add(e.input);
    uint64_t bits;
    std::memcpy(&bits, &e.scalar, sizeof(bits));
    h.add(bits);
  }
  h.add<uint64_t>(inputs.size());
  for (const KInput& in : inputs) {
    h.add(in.dtype).add(in.is_index).add<uint64_t>(in.dyn.size());
    for (int32_t e : in.dyn) h.add(e);
  }
  h.add<uint64_t>(inner.size());
  for (StrideClass c : inner) h.add(c);
  h.add<uint64_t>(out_dyn.size());
  for (int32_t e : out_dyn) h.add(e);
  h.add(nchecks);
  return h.digest();
}

}  // namespace lz::lower
