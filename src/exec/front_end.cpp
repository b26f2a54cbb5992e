// The front ends' header (front_end.h), over the executor, the tensor states and the backend.
#include "exec/front_end.h"

#include <cstring>
#include <limits>
#include <type_traits>

#include "backend/backend.h"
#include "core/buffer.h"
#include "core/config.h"
#include "core/metrics.h"
#include "exec/capture.h"
#include "exec/compile_region.h"
#include "exec/cut_record.h"
#include "exec/device_executor.h"
#include "exec/explain.h"
#include "exec/graph_executor.h"
#include "exec/step.h"
#include "exec/warm_program.h"
#include "ops/frontend.h"
#include "tensor/lazy_tensor.h"

namespace lz::front_end {

using internal::TensorImplPtr;

// ---- value reads ----

bool PendingRead::wait_for_ms(int ms) const {
  const std::shared_ptr<Execution>& exec = b_->producer();
  if (!exec) return true;
  // A wait that may sleep runs the program itself when it is next (a poll never does).
  if (ms > 0 && !exec->done()) device_executor().run_here_if_next(exec.get());
  return exec->wait_for_ms(ms);
}

void PendingRead::finish() const { frontend::finish_read(b_); }

void PendingRead::copy_to(void* dst, size_t nbytes) const {
  if (nbytes) active_backend().download(*b_->wait(), dst, nbytes);
}

const void* PendingRead::host_memory(const char* what) const {
  const std::shared_ptr<Storage>& st = b_->wait();
  active_backend().check_device(*st, what);
  return st->data();
}

void* PendingRead::expose_host_memory(const char* what) const {
  const void* data = host_memory(what);
  b_->wait()->expose();  // the view may be written: nothing derived from these bytes may be kept
  return const_cast<void*>(data);
}

std::shared_ptr<const void> PendingRead::keep_alive() const { return b_; }

PendingRead schedule_read(const Tensor& t, CutReason reason) {
  PendingRead r;
  r.b_ = frontend::schedule_read(t, reason);
  return r;
}

// ---- tensors over memory and host data ----

Tensor external_device_data(void* data, DType dtype, const IntList& shape,
                            std::shared_ptr<void> owner, uint64_t content_id) {
  const size_t nbytes = frontend::check_memory("external memory", data, dtype, shape);
  auto st = std::make_shared<Storage>(data, nbytes, std::move(owner), DeviceId::host(), content_id);
  auto buf = std::make_shared<DeviceBuffer>(dtype, shape, std::move(st));
  return Tensor(internal::TensorImpl::from_buffer(std::move(buf)));
}

uint64_t new_content_id() { return Storage::new_content_id(); }

void retire_content_id(uint64_t id) { Storage::retire_content_id(id); }

uintptr_t device_data_address(const Tensor& t) {
  BufferPtr b = t.impl()->buffer();
  if (!b) return 0;
  const std::shared_ptr<Storage>& st = b->wait();
  st->expose();  // whoever asks may write there (a torch tensor over the memory)
  return reinterpret_cast<uintptr_t>(st->data());
}

void set_host_data(const Tensor& t, const void* bytes, size_t nbytes) {
  const size_t want = static_cast<size_t>(t.numel()) * dtype_size(t.dtype());
  if (nbytes != want) {
    throw ValueError("set_host_data: " + std::to_string(nbytes) + " bytes for a tensor of " +
                     std::string(dtype_name(t.dtype())) + shape_str(t.shape()) + " (" +
                     std::to_string(want) + " bytes)");
  }
  auto st = std::make_shared<Storage>(nbytes);
  if (t.dtype() == DType::Bool) {  // 0/1 bytes, as from_data makes them
    frontend::bools_as_0_1(static_cast<uint8_t*>(st->data()), static_cast<const uint8_t*>(bytes),
                           nbytes);
  } else if (nbytes) {
    std::memcpy(st->data(), bytes, nbytes);
  }
  t.impl()->set_host_data(std::move(st));
}

Tensor host_memory_tensor(void* data, DType dtype, const IntList& shape,
                          std::shared_ptr<void> owner) {
  const size_t nbytes = static_cast<size_t>(numel(shape)) * dtype_size(dtype);
  auto st = std::make_shared<Storage>(data, nbytes, std::move(owner));
  return Tensor(internal::TensorImpl::from_host(dtype, shape, std::move(st)));
}

// ---- ops written in the front end ----

void check_index_values(const Tensor& index, int64_t size, bool allow_negative, const char* op,
                        std::optional<int64_t> ignore_index) {
  frontend::check_index_values(index, size, allow_negative, op, ignore_index);
}

void bump_counter(const std::string& name, int64_t n) { get_counter(name)->add(n); }

int debug_level() { return config().debug; }

std::shared_ptr<void> alias_token(const Tensor& t, std::shared_ptr<void> (*make)()) {
  return t.impl()->alias_token(make);
}

// ---- syncs, waits, modes ----

void sync_for_reason(bool reset_scope, CutReason reason) {
  step_barrier(false, reset_scope, reason);
}

CutReason cut_reason_from_id(const std::string& id) {
  for (int r = 0; r <= static_cast<int>(kLastCutReason); ++r) {
    if (cut_reason_id(static_cast<CutReason>(r)) == id) return static_cast<CutReason>(r);
  }
  throw ValueError("unknown cut reason '" + id + "'");
}

bool wait_all_for_ms(int ms) { return device_executor().wait_all_for_ms(ms); }

void raise_pending_async_error() { lz::raise_pending_async_error(); }

void drain() { device_executor().wait_all(); }

bool sync_waits() { return config().sync_wait; }

int64_t step_count() { return lz::step_count(); }

void set_eager_mode(bool enabled) { lz::set_eager_mode(enabled); }

bool eager_mode() { return lz::eager_mode(); }

void set_backend(const std::string& name) { set_active_backend(name); }

// ---- compile regions, capture and replay ----

void enter_region(const std::string& name, bool full_graph, int max_graphs, int64_t key) {
  lz::enter_region(name, full_graph, max_graphs, key);
}

void exit_region() { lz::exit_region(); }

void check_region_graph() { lz::check_region_graph(); }

namespace {
std::vector<TensorImplPtr> impls_of(const std::vector<Tensor>& ts) {
  std::vector<TensorImplPtr> out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) out.push_back(t.impl());
  return out;
}

std::vector<Tensor> tensors_of(std::vector<TensorImplPtr> impls) {
  std::vector<Tensor> out;
  out.reserve(impls.size());
  for (TensorImplPtr& t : impls) out.emplace_back(std::move(t));
  return out;
}
}  // namespace

CaptureFunction::CaptureFunction(std::string name, bool full_graph)
    : cache_(std::make_shared<CaptureCache>(std::move(name), full_graph)) {}

std::vector<Tensor> CaptureFunction::call(const std::vector<Tensor>& args, uint64_t key,
                                          const Body& body, std::shared_ptr<void>* frontend_data) {
  auto traced = [&body](const std::vector<TensorImplPtr>& a, std::shared_ptr<void>* fd) {
    return impls_of(body(tensors_of(a), fd));
  };
  return tensors_of(cache_->call(impls_of(args), key, traced, frontend_data));
}

int64_t CaptureFunction::traces() const { return cache_->traces(); }
int64_t CaptureFunction::replays() const { return cache_->replays(); }
std::string CaptureFunction::last_reason() const { return cache_->last_reason(); }
std::string CaptureFunction::name() const { return cache_->name(); }

bool capture_tracing() { return lz::capture_tracing(); }

void refuse_replay(std::string reason) { lz::refuse_replay(std::move(reason)); }

void note_kept_output(const Tensor& t) { lz::note_kept_output(t.impl()); }

void add_replay_guard(std::function<bool()> check, uint64_t identity) {
  lz::add_replay_guard(std::move(check), identity);
}

WarmProgram::WarmProgram(const std::vector<Tensor>& inputs, std::string name, CutReason reason)
    : p_(std::make_unique<lz::WarmProgram>(inputs, std::move(name), reason)) {}

WarmProgram::~WarmProgram() = default;

void WarmProgram::compile(const std::vector<Tensor>& outputs,
                          const std::vector<std::pair<int, int>>& donate) {
  p_->compile(outputs, donate);
}

std::vector<Tensor> WarmProgram::run(const std::vector<Tensor>& inputs) { return p_->run(inputs); }

std::vector<Tensor> WarmProgram::run_external(const std::vector<ExternalInput>& inputs) {
  return p_->run_external(inputs);
}

bool WarmProgram::donates_input(size_t i) const { return p_->donates_input(i); }

std::string WarmProgram::hash_hex() const { return p_->hash().hex(); }

size_t WarmProgram::num_constants() const { return p_->num_constants(); }

const std::vector<std::pair<DType, Shape>>& WarmProgram::input_types() const {
  return p_->input_types();
}

// ---- debugging and tests ----

std::vector<CutInfo> recent_cuts() {
  std::vector<CutInfo> out;
  for (const CutRecord& r : cut_log().recent()) {
    CutInfo c;
    c.reason = std::string(cut_reason_id(r.reason));
    c.graph_hash = r.hash.hex();
    c.nodes = static_cast<int64_t>(r.nodes);
    c.inputs = static_cast<int64_t>(r.inputs);
    c.outputs = static_cast<int64_t>(r.outputs);
    c.compiled = r.compiled;
    c.frames = r.frames;
    c.explanation = r.explanation;
    c.cause = r.cause;
    c.name = r.name;
    out.push_back(std::move(c));
  }
  return out;
}

void clear_recent_cuts() { cut_log().clear(); }

void clear_recompile_history() { lz::clear_recompile_history(); }

void clear_compile_cache() { lz::clear_compile_cache(); }

bool running_program_here() { return DeviceExecutor::running_task_here(); }

void hold_executor() { device_executor().hold(); }

void release_executor() { device_executor().release(); }

namespace {
// One row per setting: how to read it and how to write it, so the two directions cannot
// disagree about which settings exist.
struct SettingRow {
  const char* name;
  Setting (*get)(const Config& c);
  void (*set)(Config& c, const Setting& v);
};

template <class T, class Stored>
Stored setting_as(const char* name, const Setting& v) {
  const T* x = std::get_if<T>(&v);
  if (!x) throw TypeError(std::string("setting '") + name + "': a value of the wrong kind");
  if constexpr (std::is_integral_v<Stored> && !std::is_same_v<Stored, bool> &&
                !std::is_same_v<Stored, T>) {
    if (*x < std::numeric_limits<Stored>::min() || *x > std::numeric_limits<Stored>::max()) {
      throw ValueError(std::string("setting '") + name + "': " + std::to_string(*x) +
                       " is out of range");
    }
  }
  return static_cast<Stored>(*x);
}

// clang-format off
#define LZ_SETTING(field, T, Stored)                                           \
  SettingRow{#field, [](const Config& c) -> Setting { return T(c.field); },    \
             [](Config& c, const Setting& v) {                                 \
               c.field = setting_as<T, Stored>(#field, v);                     \
             }}
// clang-format on

const SettingRow kSettings[] = {
    LZ_SETTING(max_pending_nodes, int64_t, int64_t),
    LZ_SETTING(debug, int64_t, int),
    LZ_SETTING(debug_file, std::string, std::string),
    LZ_SETTING(debug_max_frame, int64_t, int),
    LZ_SETTING(save_graphs_file, std::string, std::string),
    LZ_SETTING(save_graphs_fmt, std::string, std::string),
    LZ_SETTING(enable_param_aliasing, bool, bool),
    LZ_SETTING(sync_wait, bool, bool),
    LZ_SETTING(waiter_run_ms, int64_t, int64_t),
};
#undef LZ_SETTING

const SettingRow& setting_row(const std::string& name) {
  for (const SettingRow& r : kSettings) {
    if (name == r.name) return r;
  }
  throw ValueError("unknown or read-only setting '" + name + "'");
}
}  // namespace

Setting get_setting(const std::string& name) { return setting_row(name).get(config()); }

void set_setting(const std::string& name, const Setting& value) {
  setting_row(name).set(mutable_config(), value);
}

}  // namespace lz::front_end
