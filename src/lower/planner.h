// The planner behind build_plan (plan.h), shared by its parts; not an API. One Planner lowers one
// graph, in the steps of run():
//   fusion.cpp        decide, fuse_rows: which nodes are materialized and which fuse into their
//                     users' kernels (the fusion rules and their limits are at its top);
//   kernel_build.cpp  build_steps' kernels: the kernel specs, runtime arguments and kernel steps
//                     those decisions make (index maps: index_map.h);
//   planner.cpp       run, build_steps: the plan's values, library and fallback steps, and roots;
//   memory_plan.cpp   plan_memory: scratch offsets; and root_may_overwrite.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/lowering_graph.h"
#include "lower/index_map.h"
#include "lower/plan.h"

namespace lz::lower {

// Node classes the rules and the kernel builder both ask about (fusion.cpp).
bool is_reduction(ir::OpKind op);
bool is_random(ir::OpKind op);
bool is_view(ir::OpKind op);
bool is_indirect_load(const ir::Node& n);
bool is_scatter(const ir::Node& n);

class Planner {
 public:
  Planner(const ir::LoweringGraph& g, const Target& target, bool explain, bool fuse_rows)
      : g_(g), target_(target), explain_(explain), fuse_rows_(fuse_rows) {}

  Plan run();

 private:
  using Node = ir::Node;

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
  // Rule 7b: what a product's call adds to it (fusion.cpp, fold_bias_adds).
  struct Addends {
    const Node* mm = nullptr;
    Out bias;      // a row [n], or none
    Out residual;  // a dense value of the sum's shape, or none
  };

  void note(const std::string& s) {
    if (explain_) plan_.notes.push_back(s);
  }
  std::string label(const Node* n) const {
    return "n" + std::to_string(idx(n)) + " " + std::string(ir::op_name(n->op)) + shape_str(n->shape);
  }

  // ---- the fusion decisions (fusion.cpp) ----
  // Parts: a value written window by window by several elementwise kernels (cat, slice_scatter).
  enum class Kind : uint8_t { Param, Fusible, View, Reduce, Scatter, Parts, Opaque };
  Kind kind_of(const Node* n) const;
  Out buffer_base(Out o) const;
  Out under_permutes(Out o, std::vector<int64_t>* total) const;
  void materialize(const Node* n, const std::string& why);
  void need_dense(Out o, const Node* user);
  bool calls_math(const Node* n) const;
  Out reshaped_value(Out o) const;
  void materialize_reshaped(Out o, const std::string& why);
  bool folds_transposes(const Node* mm) const;
  bool folds_into_sgemm(const Node* mm, Out o, Out* base, bool* trans) const;
  const std::string& library_of(const Node* n) const;
  void decide();
  // Rule 7b
  void fold_bias_adds();
  // Rule 5b
  bool reduces_short_rows(const Node* r) const;
  const Node* row_sink(const Node* r, std::vector<const Node*>* outs = nullptr) const;
  bool row_out_ok(const Node* n) const;
  bool computed_per_row_in(const Node* o, const Node* k) const;
  bool row_kernel_ok(const Node* r, const Node* k) const;
  bool reads_materialized_reduction(const Node* o) const;
  bool restore_rule4(std::vector<const Node*>* done = nullptr);
  void fuse_rows();
  struct KernelBuild;
  std::string row_kernel_misfit(const KernelBuild& kb) const;
  void unfold_rows(const Node* k);

  // ---- the plan's values and steps (planner.cpp) ----
  int value_of(Out base);
  void read(int value, int step);
  void library_or_fallback(const Node* n, const Node* transposed_of = nullptr,
                           const Addends* addends = nullptr);
  void build_steps();

  // ---- kernels (kernel_build.cpp) ----
  // One kernel being built: its spec, and the runtime arguments and values of its step.
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
    // Per-row graph roots this row kernel also stores (row_out_of_): each node and its
    // expression.
    std::vector<std::pair<const Node*, int>> row_outs;
  };
  int add_expr(KernelBuild& kb, KExpr e);
  int add_check(KernelBuild& kb, const Node* n, int index, const Shape& data, int64_t dim);
  int build_expr(KernelBuild& kb, Out o, const View& v, const Node* root);
  int row_stage_expr(KernelBuild& kb, const Node* r, const View& v, const Node* root);
  void finish_kernel(KernelBuild& kb, const Shape& space, std::vector<bool> reduced,
                     std::vector<int64_t> out_args, int out_value, const std::string& what,
                     bool scatter = false, const DynTerms& out_dyn = {}, bool row = false);
  void scatter_kernels_for(const Node* n, int out);
  void part_kernel(const Node* n, int64_t dim, Out x, const View& xv, const Shape& space,
                   int64_t off, int64_t step, int out, const std::string& what);
  void parts_kernels_for(const Node* n, int out);
  const Node* in_place_base(const Node* n) const;
  const Node* sole_alias_base(const Node* n) const;
  bool chain_covers_base(const Node* n) const;
  void kernel_for(const Node* n);
  bool row_kernel_for(const Node* n, int out);

  // ---- memory (memory_plan.cpp) ----
  void plan_memory();

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
  // Rule 5b: a per-row value that is a graph root (layer_norm's mean and rstd, saved for the
  // backward) -> the row kernel that computes it from its stages and stores it once per row.
  std::unordered_map<const Node*, const Node*> row_out_of_;
  std::set<const Node*> row_out_refused_;  // per-row roots whose reductions did not all fold
  bool trial_ = false;  // row_kernel_for's build: the plan values it creates, to take back
  std::vector<std::pair<const Node*, int>> trial_keys_;
  std::map<std::pair<const Node*, int>, int> value_;  // (node, output) -> plan value
  // A slice_scatter written in place over its base (in_place_base) -> that base: one value.
  std::unordered_map<const Node*, const Node*> in_place_;
  std::unordered_map<const Node*, std::pair<Out, bool>> folded_;  // matmul operand -> (base, transposed)
  std::unordered_map<const Node*, const Node*> transposed_mm_;  // transpose -> the product it computes
  // Rule 7b: a sum a product's call computes -> the product and the buffers it adds.
  std::unordered_map<const Node*, Addends> bias_mm_;
};

}  // namespace lz::lower
