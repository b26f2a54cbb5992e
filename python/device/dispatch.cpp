// The lazuli device's ATen kernel: one boxed function for every op (the PrivateUse1 fallback),
// which looks the op up in the ATen table (src/aten/table.h), converts its arguments to the
// table's neutral form, checks the entry's conditions and records the entry. The device teaches
// no op itself: an in-place op (add_) records its functional entry (add) and copies the result
// into self, an out= op copies it into out, and an op the table does not lower, or whose
// conditions fail, runs on the CPU (transfer.h, counted fallback::<op>).
//
// Per op, what the schema says is read once into an OpPlan (the entry, the mode, each argument's
// kind); after that a call is a lookup, a conversion and the entry.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <unordered_set>

#include "aten/table.h"
#include "exec/front_end.h"
#include "lazuli/lazuli.h"
#include "lazuli_tensor.h"
#include "transfer.h"

namespace lzdev {
namespace {

using lz::aten::Arg;
using lz::aten::Args;

enum class Kind : uint8_t {
  Tensor,
  TensorList,
  OptionalTensorList,
  Int,
  Float,
  Bool,
  Scalar,
  String,
  ScalarType,
  Layout,
  Device,
  MemoryFormat,
  Generator,
  IntList,
  FloatList,
  BoolList,
  ScalarList,
  Unsupported
};

Kind kind_of(const c10::TypePtr& t) {
  c10::TypePtr type = t;
  if (auto opt = type->cast<c10::OptionalType>()) type = opt->getElementType();
  switch (type->kind()) {
    case c10::TypeKind::TensorType:
      return Kind::Tensor;
    case c10::TypeKind::IntType:
    case c10::TypeKind::SymIntType:
      return Kind::Int;
    case c10::TypeKind::FloatType:
    case c10::TypeKind::SymFloatType:
      return Kind::Float;
    case c10::TypeKind::BoolType:
    case c10::TypeKind::SymBoolType:
      return Kind::Bool;
    case c10::TypeKind::NumberType:
      return Kind::Scalar;
    case c10::TypeKind::StringType:
      return Kind::String;
    case c10::TypeKind::ScalarTypeType:
      return Kind::ScalarType;
    case c10::TypeKind::LayoutType:
      return Kind::Layout;
    case c10::TypeKind::DeviceObjType:
      return Kind::Device;
    case c10::TypeKind::MemoryFormatType:
      return Kind::MemoryFormat;
    case c10::TypeKind::GeneratorType:
      return Kind::Generator;
    case c10::TypeKind::ListType: {
      c10::TypePtr e = type->castRaw<c10::ListType>()->getElementType();
      if (auto opt = e->cast<c10::OptionalType>()) {
        if (opt->getElementType()->kind() == c10::TypeKind::TensorType) {
          return Kind::OptionalTensorList;
        }
        return Kind::Unsupported;
      }
      switch (e->kind()) {
        case c10::TypeKind::TensorType:
          return Kind::TensorList;
        case c10::TypeKind::IntType:
        case c10::TypeKind::SymIntType:
          return Kind::IntList;
        case c10::TypeKind::FloatType:
          return Kind::FloatList;
        case c10::TypeKind::BoolType:
          return Kind::BoolList;
        case c10::TypeKind::NumberType:
          return Kind::ScalarList;
        default:
          return Kind::Unsupported;
      }
    }
    default:
      return Kind::Unsupported;
  }
}

// InPlaceView: an in-place view op (t_, squeeze_): self takes the view as its new value.
enum class Mode : uint8_t { Functional, InPlace, InPlaceView, Out };

struct OpPlan {
  std::string name;                        // "aten.add_.Tensor": the op as called
  const lz::aten::Entry* entry = nullptr;  // the functional entry that computes it, or null
  std::string refused;  // why there is no entry ("no lowering"), when entry is null
  Mode mode = Mode::Functional;
  std::vector<Kind> kinds;       // per argument given to the entry (out= arguments excluded)
  std::vector<size_t> out_args;  // positions of out= arguments
  bool returns_list = false;     // a Tensor[] return (split, the foreach ops)
  size_t returns = 0;
};

// "aten::add_" + "Tensor" -> "aten.add_.Tensor", as torch prints an OpOverload.
std::string overload_name(const c10::OperatorName& n) {
  std::string s = n.name;
  size_t colon = s.find("::");
  if (colon != std::string::npos) s.replace(colon, 2, ".");
  return s + "." + (n.overload_name.empty() ? "default" : n.overload_name);
}

bool writes(const c10::Argument& a) { return a.alias_info() && a.alias_info()->isWrite(); }

// The table entry of the functional op an in-place or out= overload computes: op `name` (the
// in-place op's without its underscore), an overload whose arguments are named as the first
// `n_inputs` of `schema` (an out= overload's without its out arguments). bernoulli_.float
// computes bernoulli.p: overload names need not agree.
const lz::aten::Entry* functional_of(const std::string& name, const c10::FunctionSchema& schema,
                                     size_t n_inputs) {
  const std::string prefix = overload_name({name, ""});
  const std::string base = prefix.substr(0, prefix.size() - std::string("default").size());
  for (const lz::aten::Entry* e : lz::aten::entries()) {
    if (e->name.rfind(base, 0) != 0) continue;
    std::string overload = e->name.substr(base.size());
    if (overload.find('.') != std::string::npos) continue;
    auto handle =
        c10::Dispatcher::singleton().findSchema({name, overload == "default" ? "" : overload});
    if (!handle) continue;
    const auto& args = handle->schema().arguments();
    if (args.size() != n_inputs) continue;
    bool same = true;
    for (size_t i = 0; i < n_inputs && same; ++i)
      same = args[i].name() == schema.arguments()[i].name();
    if (same) return e;
  }
  return nullptr;
}

OpPlan make_plan(const c10::OperatorHandle& op) {
  const c10::FunctionSchema& schema = op.schema();
  OpPlan p;
  p.name = overload_name(schema.operator_name());
  const auto& args = schema.arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    if (writes(args[i]) && args[i].kwarg_only()) p.out_args.push_back(i);
  }
  const std::string& op_name = schema.name();
  bool trailing_underscore = !op_name.empty() && op_name.back() == '_';
  if (!p.out_args.empty()) {
    p.mode = Mode::Out;
    p.entry = functional_of(op_name, schema, args.size() - p.out_args.size());
  } else if (schema.is_mutable() && trailing_underscore && !args.empty() && writes(args[0])) {
    p.mode = Mode::InPlace;
    c10::OperatorName functional{op_name.substr(0, op_name.size() - 1), schema.overload_name()};
    p.entry = lz::aten::find(overload_name(functional));
    if (!p.entry) p.entry = functional_of(functional.name, schema, args.size());
  } else {
    p.entry = lz::aten::find(p.name);
  }
  if (p.mode == Mode::InPlace && p.entry && p.entry->has(lz::aten::kView))
    p.mode = Mode::InPlaceView;
  if (!p.entry) p.refused = "no lowering";
  size_t inputs = args.size() - p.out_args.size();
  for (size_t i = 0; i < inputs; ++i) {
    p.kinds.push_back(kind_of(args[i].real_type()));
    if (p.kinds.back() == Kind::Unsupported && p.entry) {
      p.entry = nullptr;
      p.refused = "an argument of type " + args[i].type()->str();
    }
  }
  p.returns = schema.returns().size();
  p.returns_list = p.returns == 1 && schema.returns()[0].type()->kind() == c10::TypeKind::ListType;
  return p;
}

const OpPlan& plan_of(const c10::OperatorHandle& op) {
  static std::shared_mutex mu;  // guards plans
  static std::unordered_map<const c10::FunctionSchema*, std::unique_ptr<OpPlan>> plans;
  const c10::FunctionSchema* key = &op.schema();
  {
    std::shared_lock<std::shared_mutex> read(mu);
    auto it = plans.find(key);
    if (it != plans.end()) return *it->second;
  }
  auto plan = std::make_unique<OpPlan>(make_plan(op));
  std::unique_lock<std::shared_mutex> write(mu);
  auto [it, fresh] = plans.emplace(key, std::move(plan));
  return *it->second;
}

// ---- arguments ----------------------------------------------------------------------------------

std::string layout_text(c10::Layout l) {
  switch (l) {
    case c10::kStrided:
      return "torch.strided";
    case c10::kSparse:
      return "torch.sparse_coo";
    case c10::kMkldnn:
      return "torch._mkldnn";
    default:
      return "torch.layout(" + std::to_string(static_cast<int>(l)) + ")";
  }
}

std::string memory_format_text(c10::MemoryFormat f) {
  switch (f) {
    case c10::MemoryFormat::Contiguous:
      return "torch.contiguous_format";
    case c10::MemoryFormat::Preserve:
      return "torch.preserve_format";
    case c10::MemoryFormat::ChannelsLast:
      return "torch.channels_last";
    case c10::MemoryFormat::ChannelsLast3d:
      return "torch.channels_last_3d";
    default:
      return "torch.memory_format";
  }
}

Arg scalar_arg(const c10::Scalar& s) {
  if (s.isBoolean()) return Arg(s.toBool());
  if (s.isIntegral(false)) return Arg(s.toLong());
  TORCH_CHECK(s.isFloatingPoint(), "lazuli: complex numbers are not supported");
  return Arg(s.toDouble());
}

// A tensor argument: a device tensor's Lazuli tensor; a CPU number (0-d: `x * torch.tensor(2.)`,
// as PyTorch allows) uploaded; anything else is the error PyTorch gives.
Arg tensor_arg(const at::Tensor& t, const std::string& op) {
  if (!t.defined()) return Arg();
  if (LazuliTensorImpl* impl = impl_of(t)) return Arg(impl->value());
  // A Python number PyTorch wrapped into a tensor (`x * 2.0`) stays a number: it promotes as one,
  // and the table makes it a parameter of the program (no upload of a tensor per call).
  if (t.unsafeGetTensorImpl()->is_wrapped_number()) {
    switch (t.scalar_type()) {  // read directly: item() would dispatch
      case c10::ScalarType::Double:
        return Arg(*t.const_data_ptr<double>());
      case c10::ScalarType::Long:
        return Arg(static_cast<int64_t>(*t.const_data_ptr<int64_t>()));
      case c10::ScalarType::Bool:
        return Arg(*t.const_data_ptr<bool>());
      default:
        return scalar_arg(t.item());
    }
  }
  TORCH_CHECK(t.device().is_cpu() && t.dim() == 0,
              "Expected all tensors to be on the same device, but found at least two devices, "
              "lazuli:0 and ",
              t.device(), "! (", op, ")");
  return Arg(from_cpu(t, "a CPU number tensor"));
}

Arg to_arg(const c10::IValue& v, Kind kind, const std::string& op) {
  if (v.isNone()) return Arg();
  switch (kind) {
    case Kind::Tensor:
      return tensor_arg(v.toTensor(), op);
    case Kind::TensorList: {
      std::vector<Arg> items;
      for (const at::Tensor& t : v.toTensorList()) items.push_back(tensor_arg(t, op));
      return Arg(std::move(items));
    }
    case Kind::OptionalTensorList: {
      std::vector<Arg> items;
      for (const c10::IValue& item : v.toList()) {
        items.push_back(item.isNone() ? Arg() : tensor_arg(item.toTensor(), op));
      }
      return Arg(std::move(items));
    }
    case Kind::Int:
      return Arg(v.isSymInt() ? v.toSymInt().guard_int(__FILE__, __LINE__) : v.toInt());
    case Kind::Float:
      return Arg(v.toDouble());
    case Kind::Bool:
      return Arg(v.toBool());
    case Kind::Scalar:
      return scalar_arg(v.toScalar());
    case Kind::String:
      return Arg(std::string(v.toStringRef()));
    case Kind::ScalarType: {
      c10::ScalarType t = v.toScalarType();
      if (std::optional<lz::DType> dt = lazuli_dtype(t)) return Arg(*dt);
      // The table's spelling of complex dtypes (Arg::complex_dtype), torch's for the rest.
      if (t == c10::ScalarType::ComplexFloat || t == c10::ScalarType::ComplexDouble) {
        lz::DType parts =
            t == c10::ScalarType::ComplexFloat ? lz::DType::Float32 : lz::DType::Float64;
        return Arg::of_kind(Arg::Kind::ForeignDType, Arg::complex_name(parts));
      }
      return Arg::of_kind(Arg::Kind::ForeignDType, c10::toString(t));
    }
    case Kind::Layout:
      return Arg::of_kind(Arg::Kind::Layout, layout_text(v.toLayout()));
    case Kind::Device:
      return Arg::of_kind(Arg::Kind::Device, v.toDevice().str());
    case Kind::MemoryFormat:
      return Arg::of_kind(Arg::Kind::MemoryFormat, memory_format_text(v.toMemoryFormat()));
    case Kind::Generator:
      return Arg("<generator>");
    case Kind::IntList:
      return Arg(lz::IntList(v.toIntVector()));
    case Kind::FloatList: {
      std::vector<Arg> items;
      for (double d : v.toDoubleVector()) items.emplace_back(d);
      return Arg(std::move(items));
    }
    case Kind::BoolList: {
      std::vector<Arg> items;
      for (bool b : v.toBoolList()) items.emplace_back(b);
      return Arg(std::move(items));
    }
    case Kind::ScalarList: {
      std::vector<Arg> items;
      for (const c10::IValue& item : v.toList()) items.push_back(scalar_arg(item.toScalar()));
      return Arg(std::move(items));
    }
    case Kind::Unsupported:
      break;
  }
  TORCH_CHECK(false, "lazuli: ", op, ": an argument the ATen table cannot take");
}

// ---- results ------------------------------------------------------------------------------------

c10::IValue to_ivalue(const Arg& a) {
  switch (a.kind()) {
    case Arg::Kind::None:
      return c10::IValue(at::Tensor());
    case Arg::Kind::Tensor:
      return wrap(a.tensor());
    case Arg::Kind::Int:
      return c10::IValue(a.to_int());
    case Arg::Kind::Double:
      return c10::IValue(a.to_double());
    case Arg::Kind::Bool:
      return c10::IValue(a.to_bool());
    default:
      TORCH_CHECK(false, "lazuli: an entry returned a ", lz::aten::kind_name(a.kind()));
  }
}

bool can_cast(lz::DType from, lz::DType to) {
  if (lz::is_floating(from) && !lz::is_floating(to)) return false;
  if (from != lz::DType::Bool && to == lz::DType::Bool) return false;
  return true;
}

// An in-place op's result into self (through a view, into its base), as eager does.
void write_into(const at::Tensor& self, const lz::Tensor& result, const std::string& op) {
  lz::Tensor target = value_of(self, "self");
  impl_of(self)->check_writable(op);
  TORCH_CHECK(can_cast(result.dtype(), target.dtype()), "result type ", torch_dtype(result.dtype()),
              " can't be cast to the desired output type ", torch_dtype(target.dtype()), " (", op,
              ")");
  TORCH_CHECK(result.shape() == target.shape(), "output with shape ", self.sizes(),
              " doesn't match the broadcast shape ", c10::IntArrayRef(result.shape()), " (", op,
              ")");
  target.copy_(result);
}

// An out= argument takes the result (resized to it, as eager resizes an out tensor).
void write_out(const at::Tensor& out, const lz::Tensor& result, const std::string& op) {
  LazuliTensorImpl* impl = impl_of(out);
  TORCH_CHECK(impl != nullptr, "lazuli: ", op, ": out= must be a lazuli tensor, got ",
              out.device());
  impl->check_writable(op);
  lz::Tensor target = impl->value();
  lz::Tensor value = result.dtype() == target.dtype() ? result : result.to(target.dtype());
  if (value.shape() == target.shape()) {
    target.copy_(value);
  } else {
    impl->set_value(value.contiguous());
  }
}

void lower(const c10::OperatorHandle& op, torch::jit::Stack* stack, const OpPlan& plan) {
  const size_t n = op.schema().arguments().size();
  const size_t first = stack->size() - n;
  Args args;
  args.reserve(plan.kinds.size());
  for (size_t i = 0; i < plan.kinds.size(); ++i) {
    args.push_back(to_arg((*stack)[first + i], plan.kinds[i], plan.name));
  }
  if (std::optional<std::string> why = lz::aten::why_not(*plan.entry, args)) {
    args.clear();
    cpu_fallback(op, stack, plan.name, *why);
    return;
  }
  if (lz::aten::involves_complex(*plan.entry, args)) {
    args.clear();
    cpu_fallback(op, stack, plan.name, "complex values (the lazy device holds no complex tensors)");
    return;
  }
  Arg out;
  {
    lz::ir::UserOpScope scope(plan.name.c_str());
    try {
      lz::aten::Call call;
      out = lz::aten::lower(*plan.entry, args, call);
    } catch (...) {
      rethrow_as_torch_error(plan.name);
    }
  }
  args.clear();
  // In-place and out= ops return arguments: keep those before the stack drops them.
  std::vector<c10::IValue> inputs;
  if (plan.mode != Mode::Functional) {
    inputs.assign(stack->begin() + static_cast<long>(first), stack->end());
  }
  stack->erase(stack->begin() + static_cast<long>(first), stack->end());
  try {
    switch (plan.mode) {
      case Mode::Functional:
        if (plan.entry->has(lz::aten::kCopiedView) && out.is_tensor() && !out.tensor().is_view()) {
          at::Tensor t = wrap(out.tensor());  // a copy standing for a view: writes would be lost
          impl_of(t)->set_read_only("a copy made for " + plan.name +
                                    " (an ATen view Lazuli has no view for)");
          stack->push_back(std::move(t));
          break;
        }
        if (plan.returns_list) {
          c10::List<at::Tensor> list;
          for (const Arg& a : out.list()) list.push_back(wrap(a.tensor()));
          stack->emplace_back(std::move(list));
        } else if (plan.returns == 1) {
          stack->push_back(to_ivalue(out));
        } else {
          for (const Arg& a : out.list()) stack->push_back(to_ivalue(a));
        }
        break;
      case Mode::InPlace:
        if (inputs[0].isTensorList()) {  // _foreach_add_: each self item takes its result
          auto selves = inputs[0].toTensorList();
          for (size_t i = 0; i < selves.size(); ++i) {
            write_into(selves[i], out.list()[i].tensor(), plan.name);
          }
        } else {
          write_into(inputs[0].toTensor(), out.tensor(), plan.name);
          stack->push_back(inputs[0]);
        }
        break;
      case Mode::InPlaceView:
        impl_of(inputs[0].toTensor())->set_value(out.tensor());
        stack->push_back(inputs[0]);
        break;
      case Mode::Out: {
        std::vector<Arg> results = out.is_list() ? out.list() : std::vector<Arg>{out};
        for (size_t k = 0; k < plan.out_args.size() && k < results.size(); ++k) {
          write_out(inputs[plan.out_args[k]].toTensor(), results[k].tensor(), plan.name);
        }
        for (size_t r = 0; r < plan.returns; ++r) stack->push_back(inputs[plan.out_args[r]]);
        break;
      }
    }
  } catch (...) {
    rethrow_as_torch_error(plan.name);
  }
}

void lazuli_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (has_fake_tensor(op, *stack)) {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), stack);
    return;
  }
  const OpPlan& plan = plan_of(op);
  if (!plan.entry) {
    cpu_fallback(op, stack, plan.name, plan.refused);
    return;
  }
  lower(op, stack, plan);
}

}  // namespace

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&lazuli_kernel>());
}

// The fallback serves only ops without a kernel for the device: an op with a composite kernel
// (most structured ops: add decomposes into empty + add.out) would decompose before reaching it.
// So every op the table lowers, and its in-place variant, gets the same kernel registered by
// name, unless it is CompositeImplicitAutograd (its decomposition carries its gradient).
namespace {

void register_table_ops(torch::Library& m) {
  auto& dispatcher = c10::Dispatcher::singleton();
  auto add = [&](const std::string& base, const std::string& overload) {
    auto op = dispatcher.findOp({"aten::" + base, overload == "default" ? "" : overload});
    if (!op || op->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) ||
        op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) {
      return;
    }
    std::string name = overload == "default" ? base : base + "." + overload;
    m.impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&lazuli_kernel>());
  };
  std::unordered_set<std::string> bases;  // op names with an entry: "add", "transpose"
  for (const lz::aten::Entry* e : lz::aten::entries()) {
    if (e->name.rfind("aten.", 0) != 0) continue;
    if (e->has(lz::aten::kComplexOnly)) continue;  // the device holds no complex tensors
    std::string rest = e->name.substr(5);  // "add.Tensor"
    size_t dot = rest.find('.');
    std::string base = rest.substr(0, dot), overload = rest.substr(dot + 1);
    add(base, overload);
    bases.insert(base);
  }
  // In-place variants, whatever their overload names (transpose_ computes transpose.int).
  for (const c10::OperatorName& n : dispatcher.getAllOpNames()) {
    const std::string& name = n.name;
    if (name.rfind("aten::", 0) != 0 || name.back() != '_') continue;
    if (bases.count(name.substr(6, name.size() - 7))) {
      add(name.substr(6), n.overload_name.empty() ? "default" : n.overload_name);
    }
  }
}

}  // namespace

// The boundary's own kernels first: they take precedence over the table's entries (copy_).
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_boundary_kernels(m);
  register_table_ops(m);
}

}  // namespace lzdev
