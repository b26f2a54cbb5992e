// The reference backend: "compiling" turns the post-ordered graph into a flat instruction list
// (no node or buffer references survive), and running evaluates one reference kernel per
// instruction into fresh dense arrays, freeing each intermediate after its last use.
#include <cstring>

#include "backend/backend.h"
#include "backend/interp/kernels.h"
#include "ir/dump.h"
#include "lazuli/error.h"

namespace lz::interp {
namespace {

// One node. Its outputs are consecutive value slots from `slot` on (one for most ops); inputs
// name the slots they read.
struct Instr {
  ir::OpKind op;
  ir::Attrs attrs;
  std::vector<ir::OutputType> outputs;
  std::vector<int> inputs;  // value slots
  int slot = 0;             // slot of output 0
  int param = -1;           // DeviceData: parameter index
};

// Ops whose output has the same bytes as their (dense) input: reshape, and the autograd identities.
bool is_alias(ir::OpKind op) {
  return op == ir::OpKind::Reshape || op == ir::OpKind::GradLeaf || op == ir::OpKind::StopGradient;
}

size_t nbytes_of(const ir::OutputType& t) {
  return static_cast<size_t>(numel(t.shape)) * dtype_size(t.dtype);
}

class Program final : public Executable {
 public:
  std::vector<Instr> instrs;
  std::vector<ir::OutputType> slot_types;
  std::vector<int> last_use;  // per slot: index of the last instruction reading it (-1: none)
  std::vector<int> roots;     // slot of each output

  void run(const std::vector<const Storage*>& params,
           const std::vector<Storage*>& outputs) const override {
    const size_t nslots = slot_types.size();
    std::vector<std::shared_ptr<Storage>> owned(nslots);
    std::vector<const void*> data(nslots, nullptr);
    std::vector<int> root_refs(nslots, 0);
    for (int r : roots) root_refs[r]++;
    // A root computed straight into its output storage, unless that storage is a (donated)
    // parameter's, which later instructions may still read.
    std::vector<void*> direct(nslots, nullptr);
    for (size_t r = 0; r < roots.size(); ++r) {
      bool is_param = false;
      for (const Storage* p : params) is_param = is_param || p->data() == outputs[r]->data();
      if (!is_param && !direct[roots[r]]) direct[roots[r]] = outputs[r]->data();
    }
    // A failed instruction fails everything computed from it; the rest still runs (backend.h).
    std::vector<uint8_t> failed(nslots, 0);
    std::exception_ptr first_error;
    int failed_node = -1;  // instructions are the post-order nodes, one each
    for (size_t i = 0; i < instrs.size(); ++i) {
      const Instr& ins = instrs[i];
      const int nout = static_cast<int>(ins.outputs.size());
      if (ins.op == ir::OpKind::DeviceData) {
        data[ins.slot] = params[ins.param]->data();
        continue;
      }
      uint8_t in_failed = 0;
      for (int j : ins.inputs) in_failed |= failed[j];
      if (in_failed) {
        for (int k = 0; k < nout; ++k) failed[ins.slot + k] = 1;
      } else if (is_alias(ins.op)) {  // same bytes as its input: share them, copy nothing
        int j = ins.inputs[0];
        data[ins.slot] = data[j];
        owned[ins.slot] = owned[j];
      } else {
        std::vector<MutArray> out;
        for (int k = 0; k < nout; ++k) {
          const int s = ins.slot + k;
          void* dst = direct[s];
          if (!dst) {
            owned[s] = std::make_shared<Storage>(nbytes_of(ins.outputs[k]));
            dst = owned[s]->data();
          }
          out.push_back({ins.outputs[k].dtype, &ins.outputs[k].shape, dst});
        }
        std::vector<ConstArray> in;
        in.reserve(ins.inputs.size());
        for (int j : ins.inputs) in.push_back({slot_types[j].dtype, &slot_types[j].shape, data[j]});
        try {
          run_kernel(ins.op, ins.attrs, in, out);
          for (int k = 0; k < nout; ++k) data[ins.slot + k] = out[k].data;
        } catch (...) {
          if (!first_error) {
            first_error = std::current_exception();
            failed_node = static_cast<int>(i);
          }
          for (int k = 0; k < nout; ++k) failed[ins.slot + k] = 1;
        }
      }
      for (int j : ins.inputs) {  // free intermediates after their last use
        if (last_use[j] == static_cast<int>(i) && root_refs[j] == 0) {
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
      bool donated = false;  // looked up only after a failure: a run without one pays nothing
      for (size_t p = 0; first_error && !donated && p < params.size(); ++p) {
        donated = params[p]->data() == outputs[r]->data();
      }
      if ((root_failed[r] = failed[roots[r]] != 0 || donated)) continue;
      copies.push_back({outputs[r]->data(), data[roots[r]], nbytes_of(slot_types[roots[r]])});
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

  std::string describe(const ir::LoweringGraph& g, bool /*detail*/) override {
    return "interp backend: one reference kernel per node, in post-order\n" + ir::dump_text(g.roots);
  }

  std::shared_ptr<Executable> compile(const ir::LoweringGraph& g) override {
    auto p = std::make_shared<Program>();
    std::unordered_map<const ir::Node*, int> slot_of;  // slot of each node's output 0
    p->instrs.reserve(g.post_order.size());
    for (const ir::Node* n : g.post_order) {
      Instr ins{n->op, n->attrs, {}, {}, static_cast<int>(p->slot_types.size()), -1};
      for (int k = 0; k < n->num_outputs(); ++k) {
        ins.outputs.push_back({n->output_dtype(k), n->output_shape(k)});
        p->slot_types.push_back(ins.outputs.back());
        p->last_use.push_back(-1);
      }
      if (n->op == ir::OpKind::DeviceData) ins.param = g.param_slot.at(n);
      const int self = static_cast<int>(p->instrs.size());
      for (const ir::Value& v : n->operands) {
        int j = slot_of.at(v.node.get()) + v.index;
        ins.inputs.push_back(j);
        p->last_use[j] = self;
      }
      slot_of[n] = ins.slot;
      p->instrs.push_back(std::move(ins));
    }
    for (const ir::Value& r : g.roots) p->roots.push_back(slot_of.at(r.node.get()) + r.index);
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
