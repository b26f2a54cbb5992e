#include "aten/graph.h"

#include <array>
#include <climits>
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

// Python's operator module's names, in SizeOp's order, with each op's arity (0: two or more, or one
// list of them).
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

[[noreturn]] void overflow(int op, const Args& a) {
  std::string args;
  for (const Arg& x : a) args += (args.empty() ? "" : ", ") + x.describe();
  throw ValueError("ATen graph: size op " + std::string(kSizeOps[op].name) + " (" + args +
                   ") overflows int64");
}

// x + y, x - y and x * y, throwing where int64 overflows (Python's ints do not).
int64_t add_exact(int op, const Args& a, int64_t x, int64_t y) {
  int64_t r = 0;
  if (__builtin_add_overflow(x, y, &r)) overflow(op, a);
  return r;
}
int64_t sub_exact(int op, const Args& a, int64_t x, int64_t y) {
  int64_t r = 0;
  if (__builtin_sub_overflow(x, y, &r)) overflow(op, a);
  return r;
}
int64_t mul_exact(int op, const Args& a, int64_t x, int64_t y) {
  int64_t r = 0;
  if (__builtin_mul_overflow(x, y, &r)) overflow(op, a);
  return r;
}

int64_t floor_div(int op, const Args& a, int64_t x, int64_t y) {
  if (x == INT64_MIN && y == -1) overflow(op, a);
  int64_t q = x / y;
  return (x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q;
}

// Python's float floor division (CPython's float_divmod): the quotient of x - fmod(x, y), so
// 1 // 0.1 is 9.0 as in Python, not floor(1 / 0.1) = 10.0.
double float_floor_div(double x, double y) {
  double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0 && ((y < 0) != (mod < 0))) div -= 1.0;
  if (div == 0) return std::copysign(0.0, x / y);
  double floored = std::floor(div);
  return div - floored > 0.5 ? floored + 1.0 : floored;
}

// Exponentiation by squaring, throwing where int64 overflows (Python's ints do not).
int64_t int_pow(int op, const Args& a, int64_t base, int64_t exp) {
  int64_t out = 1;
  while (exp > 0) {
    if (exp & 1) out = mul_exact(op, a, out, base);
    exp >>= 1;
    if (exp > 0) base = mul_exact(op, a, base, base);
  }
  return out;
}

Arg apply_size_op(int op, const Args& given) {
  // max and min take two or more numbers, or one list of them (max([a, b])).
  const bool one_list = kSizeOps[op].arity == 0 && given.size() == 1 && given[0].is_list();
  const Args& a = one_list ? given[0].list() : given;
  const int arity = kSizeOps[op].arity;
  if ((arity > 0 && static_cast<int>(a.size()) != arity) || a.empty() ||
      (arity == 0 && !one_list && a.size() < 2)) {
    throw ValueError("ATen graph: size op " + std::string(kSizeOps[op].name) + " takes " +
                     (arity > 0 ? std::to_string(arity) : std::string("two or more, or a list,")) +
                     " argument(s), got " + std::to_string(a.size()));
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
  // Comparisons: exact for two ints, in double otherwise (as Python's for ints under 2^53).
  auto less = [](const Arg& x, const Arg& y) {
    return integral(x) && integral(y) ? x.to_int() < y.to_int() : x.to_double() < y.to_double();
  };
  auto equal = [](const Arg& x, const Arg& y) {
    return integral(x) && integral(y) ? x.to_int() == y.to_int() : x.to_double() == y.to_double();
  };
  switch (op) {
    case kAdd:
      if (!ints) return Arg(a[0].to_double() + a[1].to_double());
      return Arg(add_exact(op, a, a[0].to_int(), a[1].to_int()));
    case kSub:
      if (!ints) return Arg(a[0].to_double() - a[1].to_double());
      return Arg(sub_exact(op, a, a[0].to_int(), a[1].to_int()));
    case kMul:
      if (!ints) return Arg(a[0].to_double() * a[1].to_double());
      return Arg(mul_exact(op, a, a[0].to_int(), a[1].to_int()));
    case kFloorDiv:
      zero_check();
      return ints ? Arg(floor_div(op, a, a[0].to_int(), a[1].to_int()))
                  : Arg(float_floor_div(a[0].to_double(), a[1].to_double()));
    case kTrueDiv:
      zero_check();
      return Arg(a[0].to_double() / a[1].to_double());
    case kMod: {
      zero_check();
      if (ints) {
        int64_t x = a[0].to_int(), y = a[1].to_int();
        return Arg(y == -1 ? int64_t{0} : x - floor_div(op, a, x, y) * y);
      }
      double x = a[0].to_double(), y = a[1].to_double();
      double r = std::fmod(x, y);
      if (r == 0) return Arg(std::copysign(0.0, y));
      return Arg((r < 0) != (y < 0) ? r + y : r);
    }
    case kNeg:
      if (!integral(a[0])) return Arg(-a[0].to_double());
      return Arg(sub_exact(op, a, 0, a[0].to_int()));
    case kPow: {
      if (ints && a[1].to_int() >= 0) return Arg(int_pow(op, a, a[0].to_int(), a[1].to_int()));
      double x = a[0].to_double(), y = a[1].to_double();
      if (x == 0 && y < 0) {
        throw ValueError("ATen graph: size op pow: 0 to a negative power (" + a[1].describe() +
                         ")");
      }
      if (x < 0 && y != std::floor(y)) {
        throw ValueError("ATen graph: size op pow: a negative base to a fractional power (" +
                         a[0].describe() + ", " + a[1].describe() + ") is complex");
      }
      return Arg(std::pow(x, y));
    }
    case kEq:
      return Arg(equal(a[0], a[1]));
    case kNe:
      return Arg(!equal(a[0], a[1]));
    case kLt:
      return Arg(less(a[0], a[1]));
    case kLe:
      return Arg(!less(a[1], a[0]));
    case kGt:
      return Arg(less(a[1], a[0]));
    case kGe:
      return Arg(!less(a[0], a[1]));
    case kAnd:
    case kOr: {
      if (!ints) {
        throw TypeError("ATen graph: size op " + std::string(kSizeOps[op].name) + " on floats (" +
                        a[0].describe() + ", " + a[1].describe() + ")");
      }
      int64_t bits = op == kAnd ? (a[0].to_int() & a[1].to_int()) : (a[0].to_int() | a[1].to_int());
      const bool bools = a[0].kind() == Arg::Kind::Bool && a[1].kind() == Arg::Kind::Bool;
      return bools ? Arg(bits != 0) : Arg(bits);
    }
    case kNot:
      return Arg(integral(a[0]) ? a[0].to_int() == 0 : a[0].to_double() == 0);
    case kMax:
    case kMin: {
      // Python returns the first of the extreme arguments itself, keeping its kind.
      size_t best = 0;
      for (size_t i = 1; i < a.size(); ++i) {
        if (op == kMax ? less(a[best], a[i]) : less(a[i], a[best])) best = i;
      }
      return a[best];
    }
    case kAbs:
      if (!integral(a[0])) return Arg(std::fabs(a[0].to_double()));
      if (a[0].to_int() == INT64_MIN) overflow(op, a);
      return Arg(std::abs(a[0].to_int()));
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
  if (!user_op.empty()) s.user_op = ir::intern_user_op(user_op);  // once, not per record
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

Args Graph::record(const Args& inputs, Call& call, Args* values_out, int* failed_at) const {
  if (static_cast<int>(inputs.size()) != num_inputs_) {
    throw ValueError("ATen graph: takes " + std::to_string(num_inputs_) + " input(s), got " +
                     std::to_string(inputs.size()));
  }
  Args values;
  values.reserve(steps_.size());
  try {
    record_steps(inputs, call, values);
  } catch (...) {
    if (failed_at != nullptr) *failed_at = static_cast<int>(values.size());
    throw;
  }
  Args out = materialize_all(outputs_, values);
  if (values_out != nullptr) *values_out = std::move(values);
  return out;
}

void Graph::record_steps(const Args& inputs, Call& call, Args& values) const {
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
        ir::UserOpScope scope(s.user_op);  // no name: leaves an enclosing scope as it is
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
}

}  // namespace lz::aten
