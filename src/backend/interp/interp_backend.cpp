// The reference backend: "compiling" turns the post-ordered graph into a flat instruction list
// (no node or buffer references survive), and running evaluates one reference kernel per
// instruction into fresh dense arrays, freeing each intermediate after its last use.
#include <cstring>

#include "backend/backend.h"
#include "backend/interp/kernels.h"
#include "lazuli/error.h"

namespace lz::interp {
namespace {

struct Instr {
  ir::OpKind op;
  ir::Attrs attrs;
  DType dtype;
  Shape shape;
  std::vector<int> inputs;  // instruction indices
  int param = -1;           // DeviceData: parameter index
  int last_use = -1;        // index of the last instruction reading this one
};

// Ops whose output has the same bytes as their (dense) input: reshape, and the autograd identities.
bool is_alias(ir::OpKind op) {
  return op == ir::OpKind::Reshape || op == ir::OpKind::GradLeaf || op == ir::OpKind::StopGradient;
}

class Program final : public Executable {
 public:
  std::vector<Instr> instrs;
  std::vector<int> roots;  // instruction index of each output

  void run(const std::vector<const Storage*>& params,
           const std::vector<Storage*>& outputs) const override {
    std::vector<std::shared_ptr<Storage>> owned(instrs.size());
    std::vector<const void*> data(instrs.size(), nullptr);
    std::vector<int> root_refs(instrs.size(), 0);
    for (int r : roots) root_refs[r]++;
    // A root computed straight into its output storage, unless that storage is a (donated)
    // parameter's, which later instructions may still read.
    std::vector<void*> direct(instrs.size(), nullptr);
    for (size_t r = 0; r < roots.size(); ++r) {
      bool is_param = false;
      for (const Storage* p : params) is_param = is_param || p->data() == outputs[r]->data();
      if (!is_param && !direct[roots[r]]) direct[roots[r]] = outputs[r]->data();
    }
    // A failed instruction fails everything computed from it; the rest still runs (backend.h).
    std::vector<uint8_t> failed(instrs.size(), 0);
    std::exception_ptr first_error;
    int failed_node = -1;  // instructions are the post-order nodes, one each
    for (size_t i = 0; i < instrs.size(); ++i) {
      const Instr& ins = instrs[i];
      if (ins.op == ir::OpKind::DeviceData) {
        data[i] = params[ins.param]->data();
        continue;
      }
      for (int j : ins.inputs) failed[i] |= failed[j];
      if (failed[i]) {
      } else if (is_alias(ins.op)) {  // same bytes as its input: share them, copy nothing
        int j = ins.inputs[0];
        data[i] = data[j];
        owned[i] = owned[j];
      } else {
        void* dst = direct[i];
        if (!dst) {
          owned[i] = std::make_shared<Storage>(static_cast<size_t>(numel(ins.shape)) * dtype_size(ins.dtype));
          dst = owned[i]->data();
        }
        std::vector<ConstArray> in;
        in.reserve(ins.inputs.size());
        for (int j : ins.inputs) in.push_back({instrs[j].dtype, &instrs[j].shape, data[j]});
        MutArray out{ins.dtype, &ins.shape, dst};
        try {
          run_kernel(ins.op, ins.attrs, in, out);
          data[i] = dst;
        } catch (...) {
          if (!first_error) {
            first_error = std::current_exception();
            failed_node = static_cast<int>(i);
          }
          failed[i] = 1;
        }
      }
      for (int j : ins.inputs) {  // free intermediates after their last use
        if (instrs[j].last_use == static_cast<int>(i) && root_refs[j] == 0) {
          owned[j].reset();
          data[j] = nullptr;
        }
      }
    }
    // Every parameter has been read: outputs may now overwrite donated parameter storage. A failed
    // root's output is not written, so a donated parameter under it keeps its contents.
    std::vector<RootCopy> copies;
    std::vector<bool> root_failed(roots.size(), false);
    for (size_t r = 0; r < roots.size(); ++r) {
      const Instr& ins = instrs[roots[r]];
      bool donated = false;  // looked up only after a failure: a run without one pays nothing
      for (size_t p = 0; first_error && !donated && p < params.size(); ++p) {
        donated = params[p]->data() == outputs[r]->data();
      }
      if ((root_failed[r] = failed[roots[r]] != 0 || donated)) continue;
      size_t nbytes = static_cast<size_t>(numel(ins.shape)) * dtype_size(ins.dtype);
      copies.push_back({outputs[r]->data(), data[roots[r]], nbytes});
    }
    run_root_copies(copies);
    if (first_error) throw PartialRunFailure(std::move(root_failed), first_error, failed_node);
  }
};

class InterpBackend : public Backend {
 public:
  explicit InterpBackend(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  Hash128 compile_env() const override {
    Hasher h;
    h.add_str("interp-reference-v1");
    return h.digest();
  }

  std::shared_ptr<Executable> compile(const LoweringGraph& g) override {
    auto p = std::make_shared<Program>();
    std::unordered_map<const ir::Node*, int> index;
    p->instrs.reserve(g.post_order.size());
    for (const ir::Node* n : g.post_order) {
      Instr ins{n->op, n->attrs, n->dtype, n->shape, {}, -1, -1};
      if (n->op == ir::OpKind::DeviceData) ins.param = g.param_slot.at(n);
      int self = static_cast<int>(p->instrs.size());
      for (const ir::Value& v : n->operands) {
        int j = index.at(v.node.get());
        ins.inputs.push_back(j);
        p->instrs[j].last_use = self;
      }
      index[n] = self;
      p->instrs.push_back(std::move(ins));
    }
    for (const ir::Value& r : g.roots) p->roots.push_back(index.at(r.node.get()));
    return p;
  }

 private:
  std::string name_;
};

}  // namespace

std::unique_ptr<Backend> make_interp_backend(const std::string& name) {
  return std::make_unique<InterpBackend>(name);
}

}  // namespace lz::interp
