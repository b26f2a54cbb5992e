// An ATen graph in the table's neutral form (DESIGN.md 5b): a front end's graph of ATen calls
// (the torch.compile bridge's FX graph after aot_autograd) converted once into calls of table
// entries over numbered values. Recording it on inputs records each entry in order, exactly as
// the front end's own walk over its graph would, but with no front-end code per node.
//
// A size the front end holds as a symbol (a dim dynamo marks dynamic: a SymInt input, aten
// sym_size, and the integer arithmetic on them) is a value of the graph like a tensor, so the
// graph is size-generic: the front end converts its graph once, and each new size is one
// record() in C++ and then a plan (the cpu backend's kernels are shape-generic already), never
// a trace of the front end's graph again.
//
//   Graph g;
//   int x = g.input(), n = g.input();
//   int n2 = g.size_op("mul", {Graph::ref(n), Graph::value(2)});
//   int y = g.call(*find("aten.view.default"), {Graph::ref(x), Graph::list({Graph::ref(n2),
//                                                                           Graph::value(-1)})});
//   g.set_outputs({Graph::ref(y)});
//   Args out = g.record({Arg(tensor), Arg(int64_t{3})}, call);
//
// A Graph is built on one thread and then only read: record() may run on several at once, on
// distinct inputs. Its constants are shared by every recording, so a front end never hands an
// in-place entry a constant to update (the bridge's conversion refuses such a graph).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "aten/table.h"

namespace lz::aten {

class Graph {
 public:
  // One argument of a step: a value fixed when the graph is built (any Arg), a reference to a
  // value of the graph, or a list of those.
  struct Template {
    enum class Kind : uint8_t { Fixed, Ref, List };
    Kind kind = Kind::Fixed;
    int ref = -1;
    Arg fixed;
    std::vector<Template> items;
  };
  static Template value(Arg a);
  static Template ref(int index);
  static Template list(std::vector<Template> items);

  // Integer and float arithmetic on sizes, with Python's semantics (floordiv and mod round
  // toward minus infinity; truediv gives a float; int ** negative int gives a float), named as
  // Python's operator module names them: "add", "sub", "mul", "floordiv", "truediv", "mod",
  // "neg", "pow", "eq", "ne", "lt", "le", "gt", "ge", "and_", "or_", "not_", "max", "min",
  // "abs". Where Python's ints would grow past int64, or Python raises (division by zero, a
  // complex power), they throw ValueError. Whether `name` is one.
  static bool is_size_op(const std::string& name);

  // Each adds one value to the graph and returns its index.
  int input();  // the next of record()'s inputs
  // A value every recording sees as it is (a tensor constant of the graph: data, never recorded
  // over; a number).
  int constant(Arg value);
  // `entry` applied to `args` (schema order, defaults filled in). `result_dtypes`: eager's dtype
  // per tensor result where known (table.h's lower()); `user_op`: what run-time errors of the
  // recorded ops name ("aten.gather.default (node %gather_1)"), or "".
  int call(const Entry& entry, std::vector<Template> args,
           std::optional<std::vector<std::optional<DType>>> result_dtypes = std::nullopt,
           std::string user_op = "");
  // A size op (is_size_op) on numbers; throws ValueError naming an unknown one.
  int size_op(const std::string& name, std::vector<Template> args);
  // Item `index` (negative counts from the end) of a list value (a tuple result).
  int item(int of, int64_t index);
  void set_outputs(std::vector<Template> outputs);

  int num_values() const { return static_cast<int>(steps_.size()); }
  int num_inputs() const { return num_inputs_; }

  // Records the graph on `inputs` (one per input(), in order; live tensors in tensor positions)
  // and returns its outputs. Where `values` is given, it receives every value of the graph, by
  // index (a front end checks each call's result against its own graph's types). Throws what an
  // entry or a size op throws (ValueError for an input count that differs), with `failed_at`,
  // where given, set to the index of the value that failed (a front end names its node). What
  // the steps before it did stays done: an in-place entry (copy_ into an input, batch norm's
  // running statistics) has updated its input's recording, and `call`'s key has advanced past
  // the draws made. So a front end does not record a graph again after a failure on the same
  // inputs; the other values die with the call.
  Args record(const Args& inputs, Call& call, Args* values = nullptr,
              int* failed_at = nullptr) const;

 private:
  enum class Kind : uint8_t { Input, Constant, Call, SizeOp, Item };
  struct Step {
    Kind kind = Kind::Input;
    const Entry* entry = nullptr;
    int op = 0;  // SizeOp
    std::vector<Template> args;
    std::optional<std::vector<std::optional<DType>>> result_dtypes;
    const char* user_op = nullptr;  // interned (ir::intern_user_op), or none
    Arg constant;
    int of = -1;  // Item
    int64_t index = 0;
  };
  int add(Step s);
  void check_refs(const Template& t) const;
  void record_steps(const Args& inputs, Call& call, Args& values) const;

  std::vector<Step> steps_;
  std::vector<Template> outputs_;
  int num_inputs_ = 0;
};

}  // namespace lz::aten
