#include "ops/frontend.h"

#include <algorithm>
#include <cstring>

#include "backend/backend.h"
#include "core/reduced_float.h"
#include "exec/compile_region.h"
#include "exec/graph_executor.h"
#include "lazuli/autocast.h"

namespace lz::frontend {

ir::Value value_of(const Tensor& t, const char* op) {
  if (!t.defined()) throw ValueError(std::string(op) + ": got an undefined tensor");
  return t.impl()->value();
}

Tensor wrap(ir::Value v) {
  if (current_region()) note_node_location(v.node.get());
  // An op that can fail at run time (an index op) waits in eager mode, so it raises at its line;
  // one over 16-bit floats is the cast of its float32 result (node_outputs below).
  const ir::Node* n = v.node.get();
  bool fallible = n->origin != nullptr ||
                  (n->op == ir::OpKind::Cast && n->operands[0].node->origin != nullptr);
  Tensor t(internal::TensorImpl::from_value(std::move(v)));
  if (eager_mode()) {
    // Each op is its own small program, cached per op signature like any graph.
    SyncConfig cfg;
    cfg.reason = CutReason::EagerOp;
    cfg.wait = fallible;
    sync_tensors_graph({t.impl()}, cfg);
    return t;
  }
  maybe_cut_large_graph();
  return t;
}

namespace {

// Ops that only move, relabel or convert elements keep 16-bit floats as they are; so does a
// product of bfloat16 matrices, which the backends compute as PyTorch does on CPUs (oneDNN's bf16
// matmul): float32 sums of the exact products, each result rounded once.
bool keeps_reduced_floats(ir::OpKind op, const std::vector<ir::Value>& operands) {
  using ir::OpKind;
  switch (op) {
    case OpKind::MatMul: return operands[0].dtype() == DType::BFloat16;
    case OpKind::Cast:
    case OpKind::GradLeaf:
    case OpKind::StopGradient:
    case OpKind::DeviceData:
    case OpKind::Constant:
    case OpKind::Iota:
    case OpKind::IndexSelect:
    case OpKind::Gather:
    case OpKind::IndexCopy:
    case OpKind::AllGather:  // moved as their bits (reductions widen: ops/distributed.cpp)
    case OpKind::Broadcast: return true;
    default: return ir::op_info(op).cls == ir::OpClass::Movement;
  }
}

// A random op's drawn dtype, when it is a 16-bit float (drawn in float32, then rounded).
bool widen_random_attrs(ir::Attrs& attrs) {
  auto* r = std::get_if<ir::RandomAttrs>(&attrs);
  if (!r || !is_reduced_float(r->dtype)) return false;
  r->dtype = DType::Float32;
  return true;
}

// In an autocast region (lazuli/autocast.h), a matrix product's or convolution's float32 operands
// are cast to the region's dtype. Every matmul-based op (linear, bmm, einsum, attention, their
// gradients) and every convolution records one of these nodes, so this is the one place.
void autocast_operands(ir::OpKind op, std::vector<ir::Value>& operands) {
  using ir::OpKind;
  if (op != OpKind::MatMul && op != OpKind::Conv && op != OpKind::ConvBackwardInput) return;
  const AutocastState amp = autocast_state();
  if (!amp.enabled) return;
  for (ir::Value& v : operands) {
    if (v.dtype() == DType::Float32) v = cast(std::move(v), amp.dtype);
  }
}

}  // namespace

// float16 and bfloat16 compute in float32, as PyTorch does on CPUs: an op that computes (anything
// but movement, indexing loads and casts) reads its 16-bit operands widened to float32 and its
// 16-bit results are rounded back, once per op. The node as the user wrote it is made first, so
// its checks (shapes, the op table's dtype policy) and its output dtypes are the user's; the
// backends then see 16-bit floats only in casts, leaves and byte moves.
std::vector<ir::Value> node_outputs(ir::OpKind op, std::vector<ir::Value> operands,
                                    ir::Attrs attrs) {
  autocast_operands(op, operands);
  ir::NodePtr n = ir::make_node(op, operands, attrs);
  bool widen = false;
  if (!keeps_reduced_floats(op, operands)) {
    for (const ir::Value& v : operands) widen = widen || is_reduced_float(v.dtype());
    widen = widen_random_attrs(attrs) || widen;
  }
  std::vector<ir::Value> outs;
  if (!widen) {
    for (int k = 0; k < n->num_outputs(); ++k) outs.push_back({n, k});
    return outs;
  }
  for (ir::Value& v : operands) {
    if (is_reduced_float(v.dtype())) v = cast(std::move(v), DType::Float32);
  }
  ir::NodePtr w = ir::make_node(op, std::move(operands), std::move(attrs));
  for (int k = 0; k < n->num_outputs(); ++k) outs.push_back(cast({w, k}, n->output_dtype(k)));
  return outs;
}

Tensor autocast_bias(const Tensor& bias) {
  const AutocastState amp = autocast_state();
  if (!amp.enabled || !bias.defined() || bias.dtype() != DType::Float32) return bias;
  return bias.to(amp.dtype);
}

Tensor autocast_float32(const Tensor& t) {
  if (!autocast_state().enabled || !t.defined() || !is_reduced_float(t.dtype())) return t;
  return t.to(DType::Float32);
}

ir::Value node(ir::OpKind op, std::vector<ir::Value> operands, ir::Attrs attrs) {
  return node_outputs(op, std::move(operands), std::move(attrs))[0];
}

ir::Value unary(ir::OpKind op, ir::Value x) { return node(op, {std::move(x)}); }

ir::Value scalar_value(const Scalar& s, DType dtype) {
  double d = s.kind() == Scalar::Kind::Float ? s.to_double() : static_cast<double>(s.to_int());
  if (d == 0.0 || d == 1.0) return {ir::make_constant(d, dtype), 0};
  alignas(8) unsigned char bytes[8];
  void* p = bytes;
  switch (dtype) {
    case DType::Bool: *static_cast<bool*>(p) = d != 0.0; break;
    case DType::Int32: *static_cast<int32_t*>(p) = static_cast<int32_t>(s.to_int()); break;
    case DType::Int64: *static_cast<int64_t*>(p) = s.to_int(); break;
    case DType::Float32: *static_cast<float*>(p) = static_cast<float>(s.to_double()); break;
    case DType::Float64: *static_cast<double*>(p) = s.to_double(); break;
    case DType::Float16:
    case DType::BFloat16: {
      // The scalar is rounded to the tensor's dtype, as PyTorch does for every op but + - * /
      // (elementwise.cpp `binary` applies a number to those in float32, as PyTorch does).
      uint16_t h = to_reduced(dtype, static_cast<float>(s.to_double()));
      std::memcpy(p, &h, sizeof h);
      break;
    }
  }
  auto buf = std::make_shared<DeviceBuffer>(dtype, Shape{}, upload(bytes, dtype_size(dtype)));
  return {ir::make_device_data(std::move(buf)), 0};
}

ir::Value cast(ir::Value v, DType dtype) {
  if (v.dtype() == dtype) return v;
  return node(ir::OpKind::Cast, {std::move(v)}, ir::DTypeAttrs{dtype});
}

ir::Value operand_value(const Operand& o, DType dtype, const char* op) {
  if (o.is_tensor()) return cast(value_of(o.tensor(), op), dtype);
  return scalar_value(o.scalar(), dtype);
}

ir::Value broadcast_to(ir::Value v, const Shape& shape) {
  if (v.shape() == shape) return v;
  if (v.shape().size() < shape.size()) {
    Shape s(shape.size() - v.shape().size(), 1);
    s.insert(s.end(), v.shape().begin(), v.shape().end());
    v = node(ir::OpKind::Reshape, {v}, ir::ShapeAttrs{s});
  }
  if (v.shape() == shape) return v;
  return node(ir::OpKind::Expand, {v}, ir::ShapeAttrs{shape});
}

std::string desc(const char* op, const Tensor& x) {
  if (!x.defined()) return std::string(op) + "(undefined)";
  return std::string(op) + "(" + std::string(dtype_name(x.dtype())) + shape_str(x.shape()) + ")";
}

const Shape& operand_shape(const Operand& o, const char* op) {
  static const Shape kScalar;
  if (!o.is_tensor()) return kScalar;
  if (!o.tensor().defined()) throw ValueError(std::string(op) + ": got an undefined tensor");
  return o.tensor().shape();
}

std::string describe(const char* op, const std::vector<Operand>& operands) {
  std::string s = std::string(op) + "(";
  for (size_t i = 0; i < operands.size(); ++i) {
    if (i) s += ", ";
    const Operand& o = operands[i];
    if (o.is_tensor() && !o.tensor().defined()) {
      s += "undefined";
    } else if (o.is_tensor()) {
      s += std::string(dtype_name(o.tensor().dtype())) + shape_str(o.tensor().shape());
    } else {
      s += o.scalar().kind() == Scalar::Kind::Float ? std::to_string(o.scalar().to_double())
                                                    : std::to_string(o.scalar().to_int());
    }
  }
  return s + ")";
}

std::vector<int64_t> reduce_dims(const IntList& dims, const Tensor& x, const char* op) {
  std::vector<int64_t> out;
  int64_t rank = x.dim();
  if (dims.empty()) {
    for (int64_t i = 0; i < rank; ++i) out.push_back(i);
    return out;
  }
  for (int64_t d : dims) {
    try {
      out.push_back(wrap_dim(d, rank, op));
    } catch (const IndexError& e) {
      throw IndexError(desc(op, x) + std::string(e.what()).substr(std::string(op).size()));
    }
  }
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) {
    throw ValueError(std::string(op) + ": dim " + shape_str(dims) + " appears more than once");
  }
  if (rank == 0) out.clear();  // reducing a scalar over dim 0/-1 is the identity
  return out;
}

std::vector<uint8_t> host_bytes(const BufferPtr& b) {
  const std::shared_ptr<Storage>& st = b->wait();
  std::vector<uint8_t> out(b->nbytes());
  active_backend().download(*st, out.data(), out.size());
  return out;
}

std::shared_ptr<Storage> upload(const void* src, size_t nbytes) {
  return active_backend().upload(src, nbytes);
}

void bools_as_0_1(uint8_t* dst, const uint8_t* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = src[i] != 0;
}

}  // namespace lz::frontend
