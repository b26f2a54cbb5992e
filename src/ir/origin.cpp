#include "ir/origin.h"

#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include "core/call_site.h"

namespace lz::ir {
namespace {
thread_local const char* t_user_op = nullptr;
thread_local Origin t_inherited;

bool fails_at_run_time(OpKind op) { return op_info(op).cls == OpClass::Index; }
}  // namespace

UserOpScope::UserOpScope(const char* name) : outer_(t_user_op == nullptr) {
  if (outer_) t_user_op = name;
}
UserOpScope::~UserOpScope() {
  if (outer_) t_user_op = nullptr;
}

const char* intern_user_op(const std::string& name) {
  static std::mutex mu;  // guards names
  static std::set<std::string> names;
  std::lock_guard<std::mutex> l(mu);
  return names.insert(name).first->c_str();
}

bool enter_user_op(const std::string& name) {
  if (t_user_op) return false;
  t_user_op = intern_user_op(name);
  return true;
}

const char* current_user_op(const char* fallback) { return t_user_op ? t_user_op : fallback; }

void exit_user_op(bool outer) {
  if (outer) t_user_op = nullptr;
}

InheritOriginScope::InheritOriginScope(Origin origin) : active_(origin != nullptr) {
  if (!active_) return;
  saved_ = std::move(t_inherited);
  t_inherited = std::move(origin);
}
InheritOriginScope::~InheritOriginScope() {
  if (active_) t_inherited = std::move(saved_);
}

Origin origin_for(OpKind op) {
  if (!fails_at_run_time(op)) return nullptr;
  if (t_inherited) return t_inherited;
  CallSite site = user_call_site();  // interned: its address identifies the line
  std::string name = t_user_op ? std::string(t_user_op) : std::string(op_name(op));
  // Bounded: a program records index ops at a few lines; past the bound, origins are not shared.
  thread_local std::map<std::tuple<std::string, const void*>, Origin> interned;
  auto key = std::make_tuple(name, static_cast<const void*>(site.get()));
  if (auto it = interned.find(key); it != interned.end()) return it->second;
  auto o = std::make_shared<const std::string>(site ? name + " at " + *site : name);
  if (interned.size() < 4096) interned.emplace(std::move(key), o);
  return o;
}

}  // namespace lz::ir
