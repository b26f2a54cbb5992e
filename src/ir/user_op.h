// The op the user called, per thread, for run-time errors to name (ir/origin.h says how it is
// used): "cross_entropy", not the gather a composite recorded. Std types only, so front ends
// reach it through exec/front_end.h.
#pragma once
#include <string>

namespace lz::ir {

// Scopes nest; the outermost names the op (cross_entropy calls nll_loss, which records a gather:
// all three report as cross_entropy). `name` must outlive the scope (a string literal, or an
// interned name).
class UserOpScope {
 public:
  explicit UserOpScope(const char* name);
  ~UserOpScope();
  UserOpScope(const UserOpScope&) = delete;
  UserOpScope& operator=(const UserOpScope&) = delete;

 private:
  bool outer_;
};

// `name` interned: a copy that lives as long as the process, for a UserOpScope opened many
// times over (a front end's graph recorded once per input signature).
const char* intern_user_op(const std::string& name);
// The same for a frontend that cannot hold a C++ object (Python): enter returns whether this was
// the outermost scope, to be handed to exit. Names are interned.
bool enter_user_op(const std::string& name);
// The op the user called, if a scope is open on this thread; else `fallback`.
const char* current_user_op(const char* fallback);
void exit_user_op(bool outer);

}  // namespace lz::ir
