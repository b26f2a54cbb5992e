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

namespace lz::ir {

using Origin = std::shared_ptr<const std::string>;

// The op the user called. Scopes nest; the outermost names the op (cross_entropy calls
// nll_loss, which records a gather: all three report as cross_entropy). `name` must outlive the
// scope (a string literal, or an interned name).
class UserOpScope {
 public:
  explicit UserOpScope(const char* name);
  ~UserOpScope();
  UserOpScope(const UserOpScope&) = delete;
  UserOpScope& operator=(const UserOpScope&) = delete;

 private:
  bool outer_;
};

// The same for a frontend that cannot hold a C++ object (Python): enter returns whether this was
// the outermost scope, to be handed to exit. Names are interned.
bool enter_user_op(const std::string& name);
// The same for a name that outlives the scope (a string literal): nothing is interned.
bool enter_user_op_literal(const char* name);
// The op the user called, if a scope is open on this thread; else `fallback`.
const char* current_user_op(const char* fallback);
void exit_user_op(bool outer);

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
