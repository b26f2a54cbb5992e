// Where a node that can fail at run time came from, in the user's terms (DESIGN.md section 7):
// "cross_entropy at train.py:41". Only index ops carry one: their index values are data, checked
// when the program runs, and the error must name what the user called and where, not the
// primitive ("gather", "scatter_add") a composite recorded. An origin is never hashed, so it
// changes no graph key and costs nothing on a cache hit.
//
// Threading: both scopes are per thread (thread_local), like the recording they annotate.
#pragma once
#include <memory>
#include <string>

#include "ir/ops.h"
#include "ir/user_op.h"  // UserOpScope: the op the user called

namespace lz::ir {

using Origin = std::shared_ptr<const std::string>;

// Nodes recorded inside take `origin` (backward: a gradient's index ops report the forward op
// that made them). A null origin changes nothing.
class InheritOriginScope {
 public:
  explicit InheritOriginScope(Origin origin);
  ~InheritOriginScope();
  InheritOriginScope(const InheritOriginScope&) = delete;
  InheritOriginScope& operator=(const InheritOriginScope&) = delete;

 private:
  Origin saved_;
  bool active_;
};

// The origin of a node of kind `op` recorded now on this thread; null for ops that cannot fail
// at run time. Interned per (op, user op, call site): one allocation per distinct line.
Origin origin_for(OpKind op);

}  // namespace lz::ir
