// Plans and kernels in words: debug.dump_kernels and LAZULI_DEBUG=3 print these.
#include <algorithm>
#include <sstream>

#include "lower/plan.h"

namespace lz::lower {
namespace {

using ir::OpKind;

std::string ctype(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::Int32: return "int32_t";
    case DType::Int64: return "int64_t";
    case DType::Float32: return "float";
    case DType::Float64: return "double";
    case DType::Float16: return "float16_t";
    case DType::BFloat16: return "bfloat16_t";
  }
  return "?";
}

const char* infix(OpKind op) {
  switch (op) {
    case OpKind::Add: return "+";
    case OpKind::Sub: return "-";
    case OpKind::Mul: return "*";
    case OpKind::Div: return "/";
    case OpKind::Eq: return "==";
    case OpKind::Ne: return "!=";
    case OpKind::Lt: return "<";
    case OpKind::Le: return "<=";
    case OpKind::Gt: return ">";
    case OpKind::Ge: return ">=";
    case OpKind::BitwiseAnd: return "&";
    case OpKind::BitwiseOr: return "|";
    case OpKind::BitwiseXor: return "^";
    default: return nullptr;
  }
}

std::string index_expr(const KernelSpec& s, int x, const std::string& j) {
  const int nin = static_cast<int>(s.inputs.size());
  std::string name = x < nin ? "in" + std::to_string(x) : "out";
  std::string base = "base_" + name;
  switch (s.inner[x]) {
    case StrideClass::Zero:
      break;
    case StrideClass::One:
      base += " + " + j;
      break;
    case StrideClass::Other:
      base += " + " + j + " * stride_" + name;
      break;
  }
  // Dynamic terms: a checked index value times a stride argument.
  const std::vector<int32_t>& dyn = x < nin ? s.inputs[x].dyn : s.out_dyn;
  for (size_t t = 0; t < dyn.size(); ++t) {
    base += " + v" + std::to_string(dyn[t]) + " * dstride_" + name +
            (dyn.size() > 1 ? "_" + std::to_string(t) : "");
  }
  return base;
}

}  // namespace

std::string KernelSpec::pseudo_c(const std::string& name) const {
  std::ostringstream os;
  const int nin = static_cast<int>(inputs.size());
  os << "void " << name << "(int64_t begin, int64_t end, void** ptrs, const int64_t* args) {\n";
  os << "  // " << scheme_name(scheme) << ", " << rank << " loop dim(s)";
  if (nred && scheme == Scheme::RowFused) {
    os << ", the last " << nred << " the row";
  } else if (nred) {
    os << ", " << nred << (scheme == Scheme::Scatter ? " serial" : " reduced") << " ("
       << ir::op_name(reduce_op) << ")";
  }
  os << "; sizes, offsets and strides are arguments\n";
  if (nchecks) {
    os << "  // " << nchecks
       << " index check(s): an index outside [0, bound) reads 0, and the first such point "
          "(row-major) is reported\n";
  }
  if (reduce_op == OpKind::ReduceSum && out_dtype == DType::Float32 &&
      (scheme == Scheme::RowReduce || scheme == Scheme::ColReduce)) {
    os << "  // float32 sum: accumulated in double ("
       << (scheme == Scheme::RowReduce
               ? "float32 blocks of the innermost dim, each added to a double"
               : "a double per output, in tiles")
       << ")\n";
  }
  for (int x = 0; x < nin; ++x) {
    if (inputs[x].is_index) {
      os << "  // in" << x << ": linear index (iota)\n";
    } else {
      os << "  const " << ctype(inputs[x].dtype) << "* in" << x << " = ptrs[" << x << "];\n";
    }
  }
  os << "  " << ctype(out_dtype) << "* out = ptrs[" << nin << "];\n";
  std::string ind = "  ";
  const std::string j = "j";
  if (scheme == Scheme::RowFused) {
    os << ind << "for (int64_t o = begin; o < end; ++o) {  // one row each\n";
    ind += "  ";
    os << ind << "// base_* = offset + index(o over the " << nout() << " row-index dims) . strides\n";
    os << ind << "// first each stage (vK = reduce(vA) over the row) folds its own pass over the row, in\n"
       << ind << "// order (float32 sums in double); then the loop below stores every point of the row\n";
    for (size_t k = 0; k < row_outs.size(); ++k) {
      os << ind << "row_out" << k << "[base_row_out" << k << "] = v" << row_outs[k].expr << ";  // "
         << ctype(row_outs[k].dtype) << "* row_out" << k << " = ptrs["
         << nin + 1 + (nchecks ? 1 : 0) + static_cast<int>(k)
         << "]: once per row, after the stages (v" << row_outs[k].expr
         << " as below, from the stages and scalars only)\n";
    }
    for (int d = nout(); d < rank - 1; ++d) {
      os << ind << "for (int64_t r" << d << " = 0; r" << d << " < size" << d << "; ++r" << d << ") {\n";
      ind += "  ";
    }
    os << ind << "for (int64_t j = 0; j < size" << rank - 1 << "; ++j) {  // vectorized\n";
  } else if (scheme == Scheme::RowReduce) {
    os << ind << "for (int64_t o = begin; o < end; ++o) {  // one output each\n";
    ind += "  ";
    os << ind << "// base_* = offset + index(o over the " << nout() << " output dims) . strides\n";
    os << ind << "acc = init;\n";
    for (int d = nout(); d < rank - 1; ++d) {
      os << ind << "for (int64_t r" << d << " = 0; r" << d << " < size" << d << "; ++r" << d << ") {\n";
      ind += "  ";
    }
    os << ind << "for (int64_t j = 0; j < size" << rank - 1 << "; ++j) {  // vectorized, reassociated\n";
  } else {
    os << ind << "for (int64_t i = begin; i < end; i += n) {  // row segments of the innermost dim\n";
    ind += "  ";
    os << ind << "// n = min(size" << rank - 1 << " - i % size" << rank - 1 << ", end - i); base_* from i\n";
    if (scheme == Scheme::ColReduce || scheme == Scheme::Scatter) {
      if (scheme == Scheme::ColReduce)
        os << ind << "for (int64_t j = 0; j < n; ++j) out[" << index_expr(*this, nin, j)
           << "] = init;\n";
      else
        os << ind << "// out already holds the base (the step before copied it)\n";
      for (int d = 0; d < nred; ++d) {
        os << ind << "for (int64_t r" << d << " = 0; r" << d << " < size" << d << "; ++r" << d << ") {\n";
        ind += "  ";
      }
    }
    os << ind << "for (int64_t j = 0; j < n; ++j) {  // vectorized\n";
  }
  ind += "  ";
  for (size_t i = 0; i < exprs.size(); ++i) {
    const KExpr& e = exprs[i];
    os << ind << ctype(e.dtype) << " v" << i << " = ";
    auto v = [](int k) { return "v" + std::to_string(k); };
    switch (e.op) {
      case OpKind::DeviceData: os << "in" << e.input << "[" << index_expr(*this, e.input, j) << "]"; break;
      case OpKind::Iota: os << "(" << ctype(e.dtype) << ")(" << index_expr(*this, e.input, j) << ")"; break;
      case OpKind::Constant: os << "scalar" << e.input << "  /* an argument */"; break;
      case OpKind::RngUniform:
      case OpKind::RngNormal:
        os << ir::op_name(e.op) << "(" << v(e.a) << ", " << index_expr(*this, e.input, j)
           << ")  /* key, counter */";
        break;
      case OpKind::Gather:
        os << "checked(" << v(e.a) << ", bound" << e.input << ")  /* index check " << e.input
           << " */";
        break;
      case OpKind::Where: os << v(e.a) << " ? " << v(e.b) << " : " << v(e.c); break;
      case OpKind::Cast: os << "(" << ctype(e.dtype) << ")" << v(e.a); break;
      case OpKind::ReduceSum:
      case OpKind::ReduceProd:
      case OpKind::ReduceMax:
      case OpKind::ReduceMin:
        os << ir::op_name(e.op) << " over the row of " << v(e.a) << "  /* stage, folded first */";
        break;
      default:
        if (e.b >= 0 && infix(e.op)) {
          os << v(e.a) << " " << infix(e.op) << " " << v(e.b);
        } else if (e.b >= 0) {
          os << ir::op_name(e.op) << "(" << v(e.a) << ", " << v(e.b) << ")";
        } else {
          os << ir::op_name(e.op) << "(" << v(e.a) << ")";
        }
    }
    os << ";\n";
  }
  std::string last = "v" + std::to_string(exprs.size() - 1);
  if (scheme == Scheme::Elementwise || scheme == Scheme::RowFused) {
    os << ind << "out[" << index_expr(*this, nin, j) << "] = " << last << ";\n";
  } else if (scheme == Scheme::ColReduce) {
    os << ind << "out[" << index_expr(*this, nin, j) << "] = " << ir::op_name(reduce_op) << "(out[...], " << last << ");\n";
  } else if (scheme == Scheme::Scatter) {
    os << ind << "out[" << index_expr(*this, nin, j) << "] "
       << (reduce_op == OpKind::IndexCopy ? "= " : "+= ") << last << ";\n";
  } else {
    os << ind << "acc = " << ir::op_name(reduce_op) << "(acc, " << last << ");\n";
  }
  while (ind.size() > 2) {
    ind.resize(ind.size() - 2);
    if (scheme == Scheme::RowReduce && ind.size() == 4) os << ind << "}\n" << ind << "out[base_out] = acc;\n";
    else os << ind << "}\n";
  }
  os << "}\n";
  return os.str();
}

std::string describe_plan(const Plan& plan) {
  std::ostringstream os;
  auto val = [&](int v) {
    if (v < 0) return std::string("index");
    const PlanValue& pv = plan.values[v];
    std::string where = pv.home.kind == ValueHome::Param    ? "param" + std::to_string(pv.home.index)
                        : pv.home.kind == ValueHome::Output ? "output" + std::to_string(pv.home.index)
                                                            : "scratch@" + std::to_string(pv.home.offset);
    return "b" + std::to_string(v) + "(" + where + ")";
  };
  int nk = 0, nl = 0, nf = 0;
  for (const PlanStep& s : plan.steps) {
    (s.kind == PlanStep::Kernel ? nk : s.kind == PlanStep::Fallback ? nf : nl)++;
  }
  os << "plan: " << plan.steps.size() << " steps (" << nk << " kernel launches of " << plan.kernels.size()
     << " kernels, " << nl << " library calls, " << nf << " fallbacks), " << plan.values.size()
     << " buffers, scratch arena " << plan.arena_bytes << " bytes\n";
  os << "  (nN: the N-th node of the plan's post-order, not dump_graph's numbering; bN: a buffer)\n";
  for (const std::string& n : plan.notes) os << "  decision: " << n << "\n";
  os << "values:\n";
  for (size_t v = 0; v < plan.values.size(); ++v) {
    const PlanValue& pv = plan.values[v];
    os << "  " << val(static_cast<int>(v)) << " " << ctype(pv.dtype) << shape_str(pv.shape) << " " << pv.nbytes << " bytes\n";
  }
  os << "steps:\n";
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& s = plan.steps[i];
    os << "  " << i << ": ";
    if (s.kind == PlanStep::Kernel) {
      os << "kernel " << plan.kernels[s.kernel].name << " range " << s.range << " (";
      for (size_t j = 0; j < s.inputs.size(); ++j) os << (j ? ", " : "") << val(s.inputs[j]);
      os << ") -> " << val(s.output);
      for (int v : s.more_outputs) os << ", " << val(v);  // a row kernel's stored per-row roots
      os << "\n";
    } else {
      os << (s.kind == PlanStep::Fallback ? "fallback (reference kernel) " : "library call ") << ir::op_name(s.op) << " (";
      for (size_t j = 0; j < s.inputs.size(); ++j) os << (j ? ", " : "") << val(s.inputs[j]);
      os << ") -> " << val(s.output) << "\n";
    }
  }
  for (size_t r = 0; r < plan.root_value.size(); ++r) {
    if (plan.root_copy[r]) os << "  end: copy " << val(plan.root_value[r]) << " -> output" << r << "\n";
  }
  os << "kernels:\n";
  for (const PlanKernel& k : plan.kernels) os << k.spec.pseudo_c(k.name);
  return os.str();
}

std::vector<StepWords> describe_steps(const Plan& plan) {
  std::vector<StepWords> out;
  out.reserve(plan.steps.size() + 1);
  auto typed = [&](int v) {
    const PlanValue& pv = plan.values[v];
    return std::string(dtype_name(pv.dtype)) + shape_str(pv.shape);
  };
  for (const PlanStep& s : plan.steps) {
    std::ostringstream os;
    if (s.kind == PlanStep::Kernel) {
      const PlanKernel& k = plan.kernels[s.kernel];
      os << "kernel " << k.name << " " << scheme_name(k.spec.scheme) << ":";
      // The ops it computes, each once, in order (loads, arguments and index checks left out).
      std::vector<OpKind> ops;
      for (const KExpr& e : k.spec.exprs) {
        if (e.op == OpKind::DeviceData || e.op == OpKind::Constant || e.op == OpKind::Gather)
          continue;
        if (std::find(ops.begin(), ops.end(), e.op) == ops.end()) ops.push_back(e.op);
      }
      if (k.spec.nred && k.spec.scheme != Scheme::RowFused &&
          std::find(ops.begin(), ops.end(), k.spec.reduce_op) == ops.end()) {
        ops.push_back(k.spec.reduce_op);
      }
      for (size_t j = 0; j < ops.size(); ++j) os << (j ? ", " : " ") << ir::op_name(ops[j]);
      if (ops.empty()) os << " copy";
      os << " -> " << typed(s.output);
      out.push_back({"kernel", os.str()});
      continue;
    }
    os << ir::op_name(s.op) << " ";
    for (size_t j = 0; j < s.in_shapes.size(); ++j) {
      if (j) os << (s.kind != PlanStep::MatMul ? ", " : j >= 2 ? " + " : " x ");
      if (j == 0 || s.kind != PlanStep::MatMul) os << dtype_name(s.in_dtypes[j]);
      os << shape_str(s.in_shapes[j]);
      if (j < s.trans.size() && s.trans[j]) os << "^T";
    }
    os << " -> " << typed(s.output);
    out.push_back({s.kind == PlanStep::MatMul    ? "matmul"
                   : s.kind == PlanStep::Library ? "library"
                                                 : "fallback",
                   os.str()});
  }
  out.push_back({"copies", "the copies into the outputs that end a run"});
  return out;
}

}  // namespace lz::lower
