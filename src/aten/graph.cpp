#include "aten/graph.h"

#include <array>
#include <cmath>
#include <string_view>

#include "ir/user_op.h"

namespace lz::aten {
namespace {

enum SizeOp : int {
  kAdd,
  kSub,
  kMul,
  kFloorDiv,
  kTrueDiv,
  kMod,
  kNeg,
  kPow,
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
  kAnd,
  kOr,
  kNot,
  kMax,
  kMin,
  kAbs,
  kNumSizeOps
};

// Python's operator module's names, in SizeOp's order, with each op's arity (0: one or more).
struct SizeOpInfo {
  std::string_view name;
  int arity;
};
constexpr std::array<SizeOpInfo, kNumSizeOps> kSizeOps = {
    {{"add", 2},  {"sub", 2}, {"mul", 2},  {"floordiv", 2}, {"truediv", 2}, {"mod", 2}, {"neg", 1},
     {"pow", 2},  {"eq", 2},  {"ne", 2},   {"lt", 2},       {"le", 2},      {"gt", 2},  {"ge", 2},
     {"and_", 2}, {"or_", 2}, {"not_", 1}, {"max", 0},      {"min", 0},     {"abs", 1}}};

int find_size_op(std::string_view name) {
  for (int i = 0; i < kNumSizeOps; ++i) {
    if (kSizeOps[i].name == name) return i;
  }
  return -1;
}

// Python's int arithmetic covers bool (True + 1 == 2).
bool integral(const Arg& a) { return a.kind() == Arg::Kind::Int || a.kind() == Arg::Kind::Bool; }

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

int64_t int_pow(int64_t base, int64_t exp) {
  int64_t out = 1;
  for (; exp > 0; --exp) out *= base;
  return out;
}

Arg apply_size_op(int op, const Args& a) {
  const int arity = kSizeOps[op].arity;
  if ((arity > 0 && static_cast<int>(a.size()) != arity) || a.empty()) {
    throw ValueError("ATen graph: size op " + std::string(kSizeOps[op].name) + " takes " +
                     std::to_string(arity) + " argument(s), got " + std::to_string(a.size()));
  }
  for (const Arg& x : a) {
    if (!x.is_number()) {
      throw TypeError("ATen graph: size op " + std::string(kSizeOps[op].name) + " on a " +
                      std::string(kind_name(x.kind())) + " (" + x.describe() + ")");
    }
  }
  const bool ints = integral(a[0]) && (a.size() < 2 || integral(a[1]));
  auto zero_check = [&] {
    if (ints ? a[1].to_int() == 0 : a[1].to_double() == 0) {
      throw ValueError("ATen graph: size op " + std::string(kSizeOps[op].name) + " by zero (" +
                       a[0].describe() + ", " + a[1].describe() + ")");
    }
  };
  switch (op) {
    case kAdd:
      return ints ? Arg(a[0].to_int() + a[1].to_int()) : Arg(a[0].to_double() + a[1].to_double());
    case kSub:
      return ints ? Arg(a[0].to_int() - a[1].to_int()) : Arg(a[0].to_double() - a[1].to_double());
    case kMul:
      return ints ? Arg(a[0].to_int() * a[1].to_int()) : Arg(a[0].to_double() * a[1].to_double());
    case kFloorDiv:
      zero_check();
      return ints ? Arg(floor_div(a[0].to_int(), a[1].to_int()))
                  : Arg(std::floor(a[0].to_double() / a[1].to_double()));
    case kTrueDiv:
      zero_check();
      return Arg(a[0].to_double() / a[1].to_double());
    case kMod: {
      zero_check();
      if (ints) return Arg(a[0].to_int() - floor_div(a[0].to_int(), a[1].to_int()) * a[1].to_int());
      double x = a[0].to_double(), y = a[1].to_double();
      double r = std::fmod(x, y);
      return Arg(r != 0 && ((r < 0) != (y < 0)) ? r + y : r);
    }
    case kNeg:
      return integral(a[0]) ? Arg(-a[0].to_int()) : Arg(-a[0].to_double());
    case kPow:
      if (ints && a[1].to_int() >= 0) return Arg(int_pow(a[0].to_int(), a[1].to_int()));
      return Arg(std::pow(a[0].to_double(), a[1].to_double()));
    case kEq:
      return Arg(ints ? a[0].to_int() == a[1].to_int() : a[0].to_double() == a[1].to_double());
    case kNe:
      return Arg(ints ? a[0].to_int() != a[1].to_int() : a[0].to_double() != a[1].to_double());
    case kLt:
      return Arg(ints ? a[0].to_int() < a[1].to_int() : a[0].to_double() < a[1].to_double());
    case kLe:
      return Arg(ints ? a[0].to_int() <= a[1].to_int() : a[0].to_double() <= a[1].to_double());
    case kGt:
      return Arg(ints ? a[0].to_int() > a[1].to_int() : a[0].to_double() > a[1].to_double());
    case kGe:
      return Arg(ints ? a[0].to_int() >= a[1].to_int() : a[0].to_double() >= a[1].to_double());
    case kAnd:
    case kOr: {
      if (!ints) {
        throw TypeError("ATen graph: size op " + std::string(kSizeOps[op].name) + " on floats (" +
                        a[0].describe() + ", " + a[1].describe() + ")");
      }
      int64_t v = op == kAnd ? (a[0].to_int() & a[1].to_int()) : (a[0].to_int() | a[1].to_int());
      const bool bools = a[0].kind() == Arg::Kind::Bool && a[1].kind() == Arg::Kind::Bool;
      return bools ? Arg(v != 0) : Arg(v);
    }
    case kNot:
      return Arg(!a[0].to_bool());
    case kMax:
    case kMin: {
      // Python returns the first of the extreme arguments itself, keeping its kind.
      size_t best = 0;
      for (size_t i = 1; i < a.size(); ++i) {
        double x = a[i].to_double(), b = a[best].to_double();
        if (op == kMax ? x > b : x < b) best = i;
      }
      return a[best];
    }
    case kAbs:
      return integral(a[0]) ? Arg(std::abs(a[0].to_int())) : Arg(std::fabs(a[0].to_double()));
    default:
      break;
  }
  throw Error("ATen graph: size op " + std::to_string(op) + " not handled");
}

Arg materialize(const Graph::Template& t, const Args& values) {
  switch (t.kind) {
    case Graph::Template::Kind::Fixed:
      return t.fixed;
    case Graph::Template::Kind::Ref:
      return values[t.ref];
    case Graph::Template::Kind::List: {
      std::vector<Arg> items;
      items.reserve(t.items.size());
      for (const Graph::Template& item : t.items) items.push_back(materialize(item, values));
      return Arg(std::move(items));
    }
  }
  return Arg();
}

Args materialize_all(const std::vector<Graph::Template>& ts, const Args& values) {
  Args out;
  out.reserve(ts.size());
  for (const Graph::Template& t : ts) out.push_back(materialize(t, values));
  return out;
}

// Closes a user-op scope on every way out of a step.
class UserOp {
 public:
  explicit UserOp(const std::string& name)
      : open_(!name.empty()), outer_(open_ && ir::enter_user_op(name)) {}
  ~UserOp() {
    if (open_) ir::exit_user_op(outer_);
  }
  UserOp(const UserOp&) = delete;
  UserOp& operator=(const UserOp&) = delete;

 private:
  bool open_;
  bool outer_;
};

}  // namespace

Graph::Template Graph::value(Arg a) {
  Template t;
  t.fixed = std::move(a);
  return t;
}

Graph::Template Graph::ref(int index) {
  Template t;
  t.kind = Template::Kind::Ref;
  t.ref = index;
  return t;
}

Graph::Template Graph::list(std::vector<Template> items) {
  Template t;
  t.kind = Template::Kind::List;
  t.items = std::move(items);
  return t;
}

bool Graph::is_size_op(const std::string& name) { return find_size_op(name) >= 0; }

void Graph::check_refs(const Template& t) const {
  if (t.kind == Template::Kind::Ref && (t.ref < 0 || t.ref >= num_values())) {
    throw ValueError("ATen graph: a reference to value " + std::to_string(t.ref) + " of " +
                     std::to_string(num_values()));
  }
  for (const Template& item : t.items) check_refs(item);
}

int Graph::add(Step s) {
  for (const Template& t : s.args) check_refs(t);
  steps_.push_back(std::move(s));
  return num_values() - 1;
}

int Graph::input() {
  ++num_inputs_;
  Step s;
  s.kind = Kind::Input;
  return add(std::move(s));
}

int Graph::constant(Arg value) {
  Step s;
  s.kind = Kind::Constant;
  s.constant = std::move(value);
  return add(std::move(s));
}

int Graph::call(const Entry& entry, std::vector<Template> args,
                std::optional<std::vector<std::optional<DType>>> result_dtypes,
                std::string user_op) {
  Step s;
  s.kind = Kind::Call;
  s.entry = &entry;
  s.args = std::move(args);
  s.result_dtypes = std::move(result_dtypes);
  s.user_op = std::move(user_op);
  return add(std::move(s));
}

int Graph::size_op(const std::string& name, std::vector<Template> args) {
  int op = find_size_op(name);
  if (op < 0) throw ValueError("ATen graph: '" + name + "' is not a size op");
  Step s;
  s.kind = Kind::SizeOp;
  s.op = op;
  s.args = std::move(args);
  return add(std::move(s));
}

int Graph::item(int of, int64_t index) {
  check_refs(ref(of));
  Step s;
  s.kind = Kind::Item;
  s.of = of;
  s.index = index;
  return add(std::move(s));
}

void Graph::set_outputs(std::vector<Template> outputs) {
  for (const Template& t : outputs) check_refs(t);
  outputs_ = std::move(outputs);
}

Args Graph::record(const Args& inputs, Call& call, Args* values_out) const {
  if (static_cast<int>(inputs.size()) != num_inputs_) {
    throw ValueError("ATen graph: takes " + std::to_string(num_inputs_) + " input(s), got " +
                     std::to_string(inputs.size()));
  }
  Args values;
  values.reserve(steps_.size());
  size_t next_input = 0;
  for (const Step& s : steps_) {
    switch (s.kind) {
      case Kind::Input:
        values.push_back(inputs[next_input++]);
        break;
      case Kind::Constant:
        values.push_back(s.constant);
        break;
      case Kind::Call: {
        Args args = materialize_all(s.args, values);
        UserOp scope(s.user_op);
        values.push_back(
            lower(*s.entry, args, call, s.result_dtypes ? &*s.result_dtypes : nullptr));
        break;
      }
      case Kind::SizeOp:
        values.push_back(apply_size_op(s.op, materialize_all(s.args, values)));
        break;
      case Kind::Item: {
        const Arg& of = values[s.of];
        const auto& items = of.list();  // throws TypeError naming the kind for a non-list
        int64_t n = static_cast<int64_t>(items.size());
        int64_t i = s.index < 0 ? s.index + n : s.index;
        if (i < 0 || i >= n) {
          throw IndexError("ATen graph: item " + std::to_string(s.index) + " of a list of " +
                           std::to_string(n));
        }
        values.push_back(items[i]);
        break;
      }
    }
  }
  Args out = materialize_all(outputs_, values);
  if (values_out != nullptr) *values_out = std::move(values);
  return out;
}

}  // namespace lz::aten
