// The fusion rules: which nodes of a synced graph are materialized, and which fuse into the
// kernels of their users (planner.h lists the planner's other parts).
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
//     materialized first: the value under the operand's chain of reshapes, so other chains of
//     reshapes over that value (the ATen table records one per use) alias the same buffer. A
//     library call's dense operand is chosen the same way. cat and slice_scatter are materialized,
//     each by one elementwise kernel per part writing its window of the output (parts_kernels_for):
//     a cat's operands (fused) into consecutive ranges of the dim; a slice_scatter's src into its
//     strided window and the base around it (step 1: the two ranges outside the window; a larger
//     step: all of the base first, then the window over it). A slice_scatter whose base is
//     materialized by this program and read by nothing else (no other use, not a root; reshapes of
//     it count as the same buffer) writes only its window, into the base's buffer (in_place_base):
//     a chain of window writes (DDP's gradient bucket) copies the base once, not once per link. A
//     root that only reshapes such a value is written in place too.
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
//     computed once per row. A per-row value that is a graph root (layer_norm's mean and rstd,
//     a logsumexp, saved for the backward pass) computed elementwise from the stages, constants
//     and scalar parameters, of the rows' shape, is stored once per row by that kernel, after
//     its stages (KernelSpec::row_outs; a kernel that computes several values), not by kernels
//     of its own. A reduction also read elsewhere (a graph root itself, another kernel, a
//     library call) stays materialized, and so does one whose kernel turns out not to fit
//     (index checks, a view of the reduced value that is not the row's broadcast, more than
//     kMaxRowKernelOps ops, a stored per-row root that reads a point of the row). Rows longer than
//     the target's row_fusion_max_elements are not fused: they do not stay in cache, and few long
//     rows (a whole-tensor mean) would leave the outputs' work on one thread.
//  6. A kernel holds at most kMaxKernelOps ops: past it, the largest operand is materialized.
//  7. Matrix products are library calls (the cpu target: oneDNN sgemm for float32), and so are
//     convolutions where the target has a library for them (lower/target.h); ops the target's
//     code generator does not cover run their reference kernel (a fallback, counted as
//     fallback::<op>). Their operands are materialized dense buffers, except that a chain of
//     permutes under a 2-D matrix product operand of the target's transpose dtype (float32) is
//     folded into the call: it composes to the identity (read the buffer as is) or to a
//     transpose (sgemm's 'T'). Such a product whose only user is a transpose computes the
//     transpose directly (C^T = op(B)^T op(A)^T): a weight gradient written (x^T g)^T costs no
//     strided pass; not where that transpose is only transposed back (the product itself is
//     wanted). Permutes that compose to the identity over a materialized buffer are that buffer
//     (buffer_base), as reshapes are. Any other operand that is a permute moving the innermost
//     dim of math (exp, tanh: a libm call) materializes the math first, then copies it moved.
// 7b. Such a product (2-D, float32 on the cpu target) whose only reader, through reshapes and
//     adds nothing else reads, is a sum with a bias row (a materialized [n] value broadcast over
//     the rows: a linear layer's bias) or a dense value of the sum's shape (a residual), or
//     both, where the sum or a reshape of it is materialized, computes that value in its call:
//     C is filled with the bias rows plus the residual, then sgemm adds the product (beta = 1,
//     as addmm does). No kernel for the adds, and no second pass over the product
//     (fold_bias_adds).
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
//     scatter_add src larger than the index). An expression holding checks with more than one
//     user is materialized once: each user's kernel would redo its checks (not vectorized), and
//     a kernel holding checks takes no rule 5b stages (T5's relative position bias, gathered and
//     added to the scores its softmax reads three times). Rank-0 operands and empty iteration
//     spaces run the reference kernel.
// 10. float16 and bfloat16 values are loaded, converted and stored by the kernels like any other
//     dtype (i16 in memory and registers; a cast widens to or narrows from float32 exactly as
//     core/reduced_float.h). The frontend computes everything else in float32, so a 16-bit value
//     reaches the backend only in casts, leaves, movement and index ops, and bfloat16 matrix
//     products (a library call, rule 7). A node that would compute on 16-bit values in a kernel
//     (an arithmetic op, a where, a reduction or scatter_add built below the frontend) runs its
//     reference kernel, which refuses it with its own error.
#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "ir/libm.h"
#include "lower/planner.h"

namespace lz::lower {

using ir::Node;
using ir::OpKind;

namespace {

constexpr int kMaxRecomputedOps = 8;
constexpr int kMaxBroadcastRecompute = 2;
constexpr int kMaxKernelOps = 64;
constexpr int kMaxRowKernelOps = 2 * kMaxKernelOps;
constexpr int kRngNormalOps = kMaxRecomputedOps + 1;

}  // namespace

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

Planner::Kind Planner::kind_of(const Node* n) const {
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

// The materialized output whose buffer `o` reads, through reshape aliases and chains of permutes
// that compose to the identity (a transpose transposed back: a Linear's weight gradient on the
// lazy device); empty if none.
Planner::Out Planner::buffer_base(Out o) const {
  while (true) {
    if (mat_[idx(o.node)]) return o;
    if (o.node->op == OpKind::Reshape) {
      o = op0(o.node);
      continue;
    }
    if (o.node->op != OpKind::Permute) return {};
    std::vector<int64_t> total;
    const Out x = under_permutes(o, &total);
    for (size_t d = 0; d < total.size(); ++d) {
      if (total[d] != static_cast<int64_t>(d)) return {};
    }
    o = x;
  }
}

// The value `o` reads through its chain of unmaterialized permutes, and in `total`, per dim of
// `o`, the dim of that value it reads.
Planner::Out Planner::under_permutes(Out o, std::vector<int64_t>* total) const {
  total->resize(o.shape().size());
  for (size_t d = 0; d < total->size(); ++d) (*total)[d] = static_cast<int64_t>(d);
  while (!mat_[idx(o.node)] && o.node->op == OpKind::Permute) {
    const std::vector<int64_t>& p = o.node->attr<ir::PermuteAttrs>().perm;
    for (int64_t& t : *total) t = p[static_cast<size_t>(t)];
    o = op0(o.node);
  }
  return o;
}

void Planner::materialize(const Node* n, const std::string& why) {
  if (mat_[idx(n)]) return;
  mat_[idx(n)] = true;
  cost_[idx(n)] = 0;
  note("materialize " + label(n) + ": " + why);
}

// A dense buffer for a library call or fallback operand.
void Planner::need_dense(Out o, const Node* user) {
  if (buffer_base(o)) return;
  // A transpose of math (rule 7): the kernel writing the transposed value reads its operands
  // across their rows, which the vectorizer leaves scalar, so each exp or tanh is one libm call
  // (a causal softmax recomputed for attention's backward, exp(s - lse) read transposed by
  // the batched product: 23 us for 4096 values, 3.5 in order). The math is computed in order
  // first, and the transpose is a copy of it. The chain of permutes is composed (one that
  // composes to the identity reads in order), and a broadcast in between is left to rule 4.
  if (o.node->op == OpKind::Permute) {  // not materialized: buffer_base(o) would be it
    std::vector<int64_t> total;
    const Out x = under_permutes(o, &total);
    // The innermost dim that loops (size above 1), of the moved value and of what it moves.
    auto last_looping = [](const Shape& s) {
      int64_t d = static_cast<int64_t>(s.size()) - 1;
      while (d >= 0 && s[static_cast<size_t>(d)] == 1) --d;
      return d;
    };
    const int64_t out_last = last_looping(o.shape());
    const Out base = reshaped_value(x);
    if (out_last >= 0 && total[static_cast<size_t>(out_last)] != last_looping(x.shape()) &&
        !mat_[idx(base.node)] && kind_of(base.node) == Kind::Fusible && calls_math(base.node)) {
      materialize_reshaped(x, "its math runs in order before " + label(o.node) +
                                  " moves its innermost dim (rule 7)");
    }
  }
  materialize_reshaped(o, "operand of " + std::string(ir::op_name(user->op)));
}

// Whether the unmaterialized expression `n` calls a libm function (exp, log, tanh, erf, ...):
// vectorized (libmvec) in a kernel that reads its operands in order, a call per value otherwise.
bool Planner::calls_math(const Node* n) const {
  std::vector<const Node*> todo = {n};
  std::set<const Node*> seen;
  while (!todo.empty()) {
    const Node* m = todo.back();
    todo.pop_back();
    if (mat_[idx(m)] || !seen.insert(m).second) continue;
    const Kind k = kind_of(m);
    if (k != Kind::Fusible && k != Kind::View) continue;
    if (ir::calls_libm(m->op)) return true;
    for (const ir::Value& v : m->operands) todo.push_back(v.node.get());
  }
  return false;
}

// What to materialize for a dense `o`: the value under its chain of unmaterialized reshapes
// that are not roots (same elements, same order), so the reshapes become aliases of it. The ATen
// table records a view chain once per use, so two users reshaping one value reach it through
// different reshape nodes: materializing each reshape computed the value twice (rule 2).
Planner::Out Planner::reshaped_value(Out o) const {
  while (o.node->op == OpKind::Reshape && !mat_[idx(o.node)] && !is_root_[idx(o.node)]) {
    o = op0(o.node);
  }
  return o;
}

// Materializes reshaped_value(o); the reshapes between are aliases of it now, and cost nothing
// to read (rule 3 must not materialize them as kernels of their own).
void Planner::materialize_reshaped(Out o, const std::string& why) {
  const Out base = reshaped_value(o);
  materialize(base.node, why);
  for (Out r = o; r.node != base.node; r = op0(r.node)) cost_[idx(r.node)] = 0;
}

// A 2-D matrix product the target's library reads transposed operands for (rule 7).
bool Planner::folds_transposes(const Node* mm) const {
  return mm->op == OpKind::MatMul && target_.matmul_transpose_dtype == mm->dtype &&
         mm->shape.size() == 2;
}

// Such a product's operand that is a chain of permutes over x: x read as is or transposed.
bool Planner::folds_into_sgemm(const Node* mm, Out o, Out* base, bool* trans) const {
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
const std::string& Planner::library_of(const Node* n) const {
  static const std::string none;
  const ir::OpClass cls = ir::op_info(n->op).cls;
  static const std::string collectives = "the process group's engine";
  return cls == ir::OpClass::Conv         ? target_.convolution_library
         : cls == ir::OpClass::Pool       ? target_.pooling_library
         : cls == ir::OpClass::Collective ? collectives
                                          : none;
}

void Planner::decide() {
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
          auto is_transpose = [](const Node* p) {
            return p && p->op == OpKind::Permute &&
                   p->attr<ir::PermuteAttrs>().perm == std::vector<int64_t>{1, 0};
          };
          // Not where the transpose is only transposed back: the product itself is wanted.
          const Node* back =
              t && users_[idx(t)] == 1 && !is_root_[idx(t)] && !user_list_[idx(t)].empty()
                  ? user_list_[idx(t)].back()
                  : nullptr;
          if (is_transpose(t) && !is_transpose(back)) {
            transposed_mm_[t] = n;
            note("matmul " + label(n) + " computes its transpose " + label(t) + " directly");
            break;  // not materialized: its only user computes the product itself
          }
        }
        mat_[i] = true;
        if (ir::op_info(n->op).cls == ir::OpClass::Collective) {
          note("collective " + label(n) + ": " + library_of(n));
        } else if (!library_of(n).empty()) {
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
          materialize_reshaped(
              x, "reshape " + shape_str(x.shape()) + " -> " + shape_str(n->shape) + " merges dims");
        }
        if (n->op == OpKind::Expand && cost_[idx(x.node)] > kMaxBroadcastRecompute &&
            numel(n->shape) > numel(x.shape()) && !mat_[idx(x.node)]) {
          if (fuse_rows_ && per_row(x.node)) {
            row_broadcast_.push_back({x.node, n});  // rule 5b decides (fuse_rows)
          } else {
            materialize(x.node, "broadcast by " + label(n) + " (rule 4)");
          }
        }
        cost_[i] = buffer_base(x) ? 0 : cost_[idx(x.node)];
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
            // A scalar parameter (a divisor uploaded as data) is as uniform as a constant.
            const bool uniform = v.node->op == OpKind::Constant ||
                                 (v.node->op == OpKind::DeviceData && numel(v.shape()) == 1);
            all = all && (r || uniform);
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
      if (has_check_[i] && users_[i] > 1 && !mat_[i]) {
        materialize(n, std::to_string(users_[i]) + " users and index checks (rule 9)");
      }
    }
  }
  for (const ir::Value& r : g_.roots) {
    if (!buffer_base(out_of(r))) materialize(r.node.get(), "graph root");
  }
}

// ---- rule 7b: a bias and a residual added by the product's call ----
// A materialized value that is a sum (or a reshape of one: a linear layer's [2, 32, 64] output
// of its [64, 64] product) of a 2-D float32 product, under reshapes nothing else reads, with a
// row of the product's width broadcast over the rows (its bias) and/or a materialized value of
// the sum's shape (a residual): the product's call fills C with them, adds the product, and
// writes the value; there is no kernel. Any reshape of the product reads its row-major buffer
// as it is; the sum's last dim must be the product's, so the row meets its columns, and the
// sizes must agree, so nothing on the product's path is broadcast. Where the sum is not
// materialized it fuses into its reader anyway, and the product stays as it is.
void Planner::fold_bias_adds() {
  if (!target_.matmul_bias) return;
  // The value under `o`'s chain of unmaterialized reshapes, each read by nothing else; null
  // where one is.
  auto under_reshapes = [&](Out o) -> Out {
    while (o.node->op == OpKind::Reshape && !mat_[idx(o.node)]) {
      if (users_[idx(o.node)] != 1 || is_root_[idx(o.node)]) return {};
      o = op0(o.node);
    }
    return o;
  };
  auto alone = [&](const Node* n) {
    return !mat_[idx(n)] && users_[idx(n)] == 1 && !is_root_[idx(n)];
  };
  for (const Node* top : g_.post_order) {
    if (!mat_[idx(top)] || top->dtype != DType::Float32 || row_kernels_.count(top) ||
        (top->op != OpKind::Add && top->op != OpKind::Reshape)) {
      continue;
    }
    const Node* add = top->op == OpKind::Add ? top : under_reshapes(op0(top)).node;
    if (add == nullptr || add->op != OpKind::Add || add->shape.empty() ||
        (add != top && !alone(add))) {
      continue;
    }
    // The terms of the sum: one product, at most one bias row, at most one dense value of the
    // add's shape (a residual), through adds nothing else reads (at most two deep).
    Addends a;
    bool ok = true;
    std::function<void(Out, int)> term = [&](Out o, int depth) {
      const Out u = under_reshapes(o);
      if (!u) {
        ok = false;
        return;
      }
      const Node* n = u.node;
      if (folds_transposes(n) && mat_[idx(n)] && users_[idx(n)] == 1 && !is_root_[idx(n)] &&
          a.mm == nullptr) {
        a.mm = n;
        return;
      }
      if (n->op == OpKind::Add && n->dtype == DType::Float32 && depth < 2 && alone(n)) {
        term(out_of(n->operands[0]), depth + 1);
        term(out_of(n->operands[1]), depth + 1);
        return;
      }
      Out v = o;
      const bool expanded = v.node->op == OpKind::Expand && !mat_[idx(v.node)];
      if (expanded) v = op0(v.node);
      const Out base = buffer_base(v);
      if (!base || v.dtype() != DType::Float32 || v.shape().empty()) {
        ok = false;
      } else if (!a.bias && numel(v.shape()) == add->shape.back() &&
                 v.shape().back() == add->shape.back()) {
        a.bias = base;
      } else if (!a.residual && !expanded && v.shape() == add->shape) {
        a.residual = base;
      } else {
        ok = false;
      }
    };
    term(out_of(add->operands[0]), 0);
    term(out_of(add->operands[1]), 0);
    const Node* mm = a.mm;
    if (!ok || mm == nullptr || (!a.bias && !a.residual) || mm->shape.back() != add->shape.back() ||
        numel(mm->shape) != numel(add->shape)) {
      continue;
    }
    bias_mm_[top] = a;
    mat_[idx(mm)] = false;  // the call writing `top` computes it
    note("matmul " + label(mm) + " adds " +
         (a.bias ? "the bias " + label(a.bias.node) + (a.residual ? " and " : "") : "") +
         (a.residual ? label(a.residual.node) : "") + " and writes " + label(top) +
         " in its call (rule 7b)");
  }
}

// ---- rule 5b: row fusion ----
// Reduction r reduces the trailing dims of its input, at most the target's
// row_fusion_max_elements of them.
bool Planner::reduces_short_rows(const Node* r) const {
  std::vector<int64_t> d = r->attr<ir::ReduceAttrs>().dims;
  std::sort(d.begin(), d.end());
  const Shape& in = op0(r).shape();
  const int64_t first = static_cast<int64_t>(in.size() - d.size());
  int64_t row = 1;
  for (size_t k = 0; k < d.size(); ++k) {
    if (d[k] != first + static_cast<int64_t>(k)) return false;
    row *= in[d[k]];
  }
  return !d.empty() && row <= target_.row_fusion_max_elements;
}

// The one kernel every use of r's value ends in, through unmaterialized elementwise ops and
// views (a reduction folded into a kernel counts as that kernel); null if there are several,
// or a use that is not a kernel's (a graph root, a library call, a cat...). With `outs`, a
// per-row value that is a graph root (row_out_ok) is passed through and appended to it: the
// kernel can store it once per row.
const Node* Planner::row_sink(const Node* r, std::vector<const Node*>* outs) const {
  const Node* sink = nullptr;
  std::vector<const Node*> stack{r};
  std::set<const Node*> seen{r};
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (is_root_[idx(n)] && !(outs && row_out_ok(n))) return nullptr;
    for (const Node* u : user_list_[idx(n)]) {
      if (!seen.insert(u).second) continue;
      const Node* k = nullptr;
      if (auto it = stage_of_.find(u); it != stage_of_.end()) {
        k = it->second;
      } else if (outs && row_out_ok(u)) {
        if (auto o = row_out_of_.find(u); o != row_out_of_.end()) {
          k = o->second;  // stored by a row kernel already: its uses end there
        } else {
          outs->push_back(u);
          stack.push_back(u);
          continue;
        }
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

// A per-row value a row kernel may store (rule 5b): a graph root computed elementwise from
// per-row values and constants, of the rows' shape (the kept dims, with or without the reduced
// dims as 1s: a mean kept with keepdim).
bool Planner::row_out_ok(const Node* n) const {
  return is_root_[idx(n)] && row_scalar_[idx(n)] && kind_of(n) == Kind::Fusible &&
         ir::is_elementwise(n->op) && !is_random(n->op) && n->num_outputs() == 1 &&
         !row_out_refused_.count(n);
}

// An elementwise kernel over r's input space.
bool Planner::row_kernel_ok(const Node* r, const Node* k) const {
  return k && kind_of(k) == Kind::Fusible && ir::is_elementwise(k->op) && !is_random(k->op) &&
         k->shape == op0(r).shape();
}

// o's unmaterialized expression reads a reduction's materialized output.
bool Planner::reads_materialized_reduction(const Node* o) const {
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

// Whether per-row root o can be computed once per row in row kernel k: its expression reaches,
// through unmaterialized nodes and k's other stored per-row roots, only k's stages, constants
// and scalar parameters.
bool Planner::computed_per_row_in(const Node* o, const Node* k) const {
  std::vector<const Node*> stack{o};
  std::set<const Node*> seen{o};
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (kind_of(n) == Kind::Reduce) {
      auto st = stage_of_.find(n);
      if (st == stage_of_.end() || st->second != k) return false;
      continue;
    }
    if (n->op == OpKind::Constant) continue;
    if (n->op == OpKind::DeviceData) {
      if (numel(n->shape) != 1) return false;
      continue;
    }
    if (n != o && mat_[idx(n)]) {
      auto ro = row_out_of_.find(n);
      if (ro == row_out_of_.end() || ro->second != k) return false;
    }
    for (const ir::Value& v : n->operands) {
      if (seen.insert(v.node.get()).second) stack.push_back(v.node.get());
    }
  }
  return true;
}

// Rule 4 again for the per-row values rule 5b kept from it that still read a materialized
// reduction; each one materialized is appended to `done` (when given). True if any.
bool Planner::restore_rule4(std::vector<const Node*>* done) {
  bool any = false;
  for (const auto& [x, by] : row_broadcast_) {
    if (mat_[idx(x)] || !reads_materialized_reduction(x)) continue;
    materialize(x, "broadcast by " + label(by) + " (rule 4)");
    if (done) done->push_back(x);
    any = true;
  }
  return any;
}

void Planner::fuse_rows() {
  const auto& po = g_.post_order;
  for (size_t i = po.size(); i-- > 0;) {  // users first: a later reduction may take an earlier
    const Node* r = po[i];
    if (kind_of(r) != Kind::Reduce || !reduces_short_rows(r)) continue;
    std::vector<const Node*> outs;
    const Node* k = row_sink(r, &outs);
    if (!row_kernel_ok(r, k)) continue;
    // The per-row roots on the way: the kernel stores them when they have the rows' shape.
    const Shape& in = op0(r).shape();
    const size_t nkept = in.size() - r->attr<ir::ReduceAttrs>().dims.size();
    const Shape kept(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(nkept));
    Shape keepdim = kept;
    keepdim.resize(in.size(), 1);
    if (!std::all_of(outs.begin(), outs.end(),
                     [&](const Node* o) { return o->shape == kept || o->shape == keepdim; })) {
      continue;
    }
    for (const Node* o : outs) row_out_of_[o] = k;
    stage_of_[r] = k;
    mat_[i] = false;
  }
  // Rule 4 again where a per-row value still reads a materialized reduction; a stage whose uses
  // no longer end in its kernel (a value just materialized) is materialized too; until stable.
  for (bool changed = true; changed;) {
    changed = restore_rule4();
    for (size_t i = po.size(); i-- > 0;) {
      auto it = stage_of_.find(po[i]);
      std::vector<const Node*> outs;
      if (it != stage_of_.end() && row_sink(po[i], &outs) != it->second) {
        stage_of_.erase(it);
        mat_[i] = true;
        changed = true;
      }
    }
    // A stored per-row root needs every reduction under it folded into its kernel, and its
    // uses ending in that kernel (a value materialized since would read its buffer before the
    // kernel stores it); one that is not stays a root of its own kernel, and the stages under
    // it unfold (row_sink stops there).
    for (auto it = row_out_of_.begin(); it != row_out_of_.end();) {
      std::vector<const Node*> outs;
      const Node* sink = row_sink(it->first, &outs);
      const bool uses_end_in_kernel =
          sink == it->second || (sink == nullptr && user_list_[idx(it->first)].empty());
      if (!uses_end_in_kernel || !computed_per_row_in(it->first, it->second)) {
        row_out_refused_.insert(it->first);
        it = row_out_of_.erase(it);
        changed = true;
      } else {
        ++it;
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
  for (auto it = row_out_of_.begin(); it != row_out_of_.end();) {  // no stages left: its own kernel
    it = row_kernels_.count(it->second) ? std::next(it) : row_out_of_.erase(it);
  }
  for (const Node* o : po) {
    if (auto it = row_out_of_.find(o); it != row_out_of_.end()) {
      note("per-row root " + label(o) + " is stored by the kernel of " + label(it->second) +
           " (rule 5b)");
    }
  }
}

// Why a row kernel's trial build (row_kernel_for) does not fit rule 5b; empty where it fits.
std::string Planner::row_kernel_misfit(const KernelBuild& kb) const {
  // A row output is computed once per row: from stages and constants only, no point of the row.
  bool row_out_reads_points = false;
  for (const auto& [n, e] : kb.row_outs) {
    std::vector<bool> needed(kb.spec.exprs.size(), false);
    needed[e] = true;
    for (int i = e; i >= 0; --i) {
      const KExpr& x = kb.spec.exprs[i];
      if (!needed[i] || is_reduction(x.op) || x.op == OpKind::Constant) continue;
      if (x.op == OpKind::DeviceData && !kb.spec.inputs[x.input].is_index &&
          kb.spec.inputs[x.input].dyn.empty() &&
          std::all_of(kb.input_args[x.input].begin() + 1, kb.input_args[x.input].end(),
                      [](int64_t st) { return st == 0; })) {
        continue;  // a scalar read through a broadcast: the same at every point
      }
      if (x.a < 0) row_out_reads_points = true;  // a load, an iota, a draw
      for (int32_t j : {x.a, x.b, x.c}) {
        if (j >= 0) needed[j] = true;
      }
    }
  }
  // Nor may the kernel load a value it stores: this kernel writes that buffer.
  for (int v : kb.input_value) {
    for (const auto& ro : kb.row_outs) {
      auto it = value_.find({ro.first, 0});
      if (v >= 0 && it != value_.end() && it->second == v) row_out_reads_points = true;
    }
  }
  std::string why = kb.row_failed        ? "a reduced value is not read as the row's broadcast"
                    : !kb.checks.empty() ? "the kernel has index checks"
                    : kb.spec.exprs.size() > kMaxRowKernelOps
                        ? std::to_string(kb.spec.exprs.size()) + " ops"
                    : row_out_reads_points ? "a per-row root it would store reads points of the row"
                                           : "";
  if (kb.row_dims == 0 && why.empty()) why = "no reduction reached";
  return why;
}

// After row_kernel_for(k) failed: k's reductions (and the per-row values that broadcast them,
// rule 4) are materialized by their own kernels, emitted now, before k's.
void Planner::unfold_rows(const Node* k) {
  std::vector<const Node*> redo;
  for (const Node* r : g_.post_order) {
    if (auto o = row_out_of_.find(r); o != row_out_of_.end() && o->second == k) {
      // A root of its own kernel again (it is materialized): built now when it comes before k,
      // else by build_steps when it gets there.
      row_out_of_.erase(o);
      if (idx(r) < idx(k)) redo.push_back(r);
      continue;
    }
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

}  // namespace lz::lower
