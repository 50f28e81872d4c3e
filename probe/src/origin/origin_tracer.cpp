#include "origin_tracer.hpp"

#include <ATen/record_function.h>

#include <atomic>
#include <cmath>
#include <unordered_set>
#include <mutex>
#include <thread>

#include "finite_check.hpp"
#include "op_evidence.hpp"

namespace keel::probe {
namespace {

// One op being traced, from its start callback to its end callback (same thread).
struct OpFrame : at::ObserverContext {
  std::string name;
  bool node = false;           // autograd's backward node, not an op
  size_t depth = 0;            // frames open on this thread when it started
  int64_t index = 0;           // start order across all threads
  std::string module;          // the parameter's module it read, or the nearest before it
  // Its floating inputs, and whether each is finite: a buffer's as it was at the op's start
  // (batch_norm writes its running statistics in place, and they are not its outputs), the
  // others' read only when an output turns out non-finite (1 finite, 0 not, -1 not read yet).
  std::vector<at::Tensor> inputs;
  std::vector<signed char> input_finite;
  std::vector<double> scalars;
};

// What a trace has seen, shared by the threads that run its ops.
struct TraceState {
  const std::unordered_map<const void*, std::string>* names = nullptr;
  const std::vector<std::pair<std::string, at::Tensor>>* named = nullptr;
  const std::unordered_set<const void*>* buffers = nullptr;   // storages of the model's buffers
  bool backward_begun = false;     // a backward node has run: what follows is past the forward pass
  std::atomic<int64_t> next_index{0};
  std::atomic<bool> done{false};   // found, and the ops enclosing it have ended
  std::mutex mutex;
  std::string last_module;         // of the last op that read a parameter
  // The forward ops' modules by autograd sequence number: a backward node carries the number
  // of the forward op that made it, so a NaN born in the backward pass is placed in the module
  // whose forward op it differentiates.
  std::unordered_map<int64_t, std::string> module_by_sequence;
  // Storages whose Inf the code meant (a mask's -inf): the buffers that held one when the probe
  // planned them, the constants the code writes, and what carries them on. Kept alive while
  // the trace runs, so a freed one's address cannot be taken for another tensor.
  std::unordered_set<const void*> designed;
  std::vector<at::Tensor> designed_kept;
  Origin origin;
  bool found = false;
  std::thread::id found_thread;
  int64_t found_index = -1;
  size_t found_depth = 0;
};

std::atomic<TraceState*> g_active{nullptr};
thread_local std::vector<OpFrame*> t_frames;

const void* storage_key(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage()) return nullptr;
  return t.storage().data();
}

bool checkable(const at::Tensor& t) {
  return t.defined() && t.is_floating_point() && t.layout() == at::kStrided && !t.is_meta();
}

template <class Visit>
void for_each_tensor(const c10::IValue& v, Visit visit) {
  if (v.isTensor()) {
    visit(v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorVector()) visit(t);
  }
}

std::string count_nonfinite(const at::Tensor& t) {
  try {
    const at::Tensor bad = at::isfinite(t.detach()).logical_not();
    const int64_t n = bad.sum().item<int64_t>();
    const bool nan = t.detach().isnan().any().item<bool>();
    return std::to_string(n) + " of " + std::to_string(t.numel()) + " values " + (nan ? "NaN" : "Inf");
  } catch (const std::exception&) {
    return "";
  }
}

// The node this op runs in, on this thread, if any.
const OpFrame* enclosing_node() {
  for (auto it = t_frames.rbegin(); it != t_frames.rend(); ++it) {
    if ((*it)->node) return *it;
  }
  return nullptr;
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  TraceState* s = g_active.load();
  if (s == nullptr) return nullptr;
  auto frame = std::make_unique<OpFrame>();
  frame->name = fn.name();
  frame->node = fn.scope() == at::RecordScope::BACKWARD_FUNCTION;
  frame->depth = t_frames.size();
  frame->index = s->next_index++;
  const OpFrame* node = enclosing_node();
  t_frames.push_back(frame.get());
  if (frame->node) {
    std::lock_guard<std::mutex> lock(s->mutex);
    s->backward_begun = true;
    const auto it = s->module_by_sequence.find(fn.seqNr());
    if (it != s->module_by_sequence.end()) frame->module = it->second;
    return frame;
  }
  if (s->done.load()) return frame;

  at::RecordFunctionGuard off(false);
  at::NoGradGuard no_grad;
  std::string read_module;
  for (const c10::IValue& v : fn.inputs()) {
    if (v.isDouble()) frame->scalars.push_back(v.toDouble());
    for_each_tensor(v, [&](const at::Tensor& t) {
      if (!checkable(t)) return;
      if (read_module.empty()) {
        const auto it = s->names->find(storage_key(t));
        if (it != s->names->end()) read_module = OriginTracer::module_of(it->second);
      }
      frame->inputs.push_back(t);
      frame->input_finite.push_back(s->buffers->count(storage_key(t)) > 0 ? all_finite(t) : -1);
    });
  }
  std::lock_guard<std::mutex> lock(s->mutex);
  if (!read_module.empty()) s->last_module = read_module;
  frame->module = node != nullptr && !node->module.empty() ? node->module : s->last_module;
  if (node == nullptr && fn.seqNr() >= 0) s->module_by_sequence[fn.seqNr()] = frame->module;
  return frame;
}

void pop(OpFrame* frame) {
  if (!t_frames.empty() && t_frames.back() == frame) {
    t_frames.pop_back();
    return;
  }
  for (auto it = t_frames.begin(); it != t_frames.end(); ++it) {
    if (*it == frame) {
      t_frames.erase(it);
      return;
    }
  }
}

// An op whose output is memory it did not compute: aten::empty_like and its kind hand out
// whatever the allocator held (a freed NaN tensor's bytes, say), resize_ grows into it.
bool allocates_only(const std::string& name) {
  return name.find("empty") != std::string::npos || name == "aten::resize_" || name == "aten::resize_as_" ||
         name == "aten::set_";
}

bool has_nan(const at::Tensor& t) {
  try {
    return t.detach().isnan().any().item<bool>();
  } catch (const std::exception&) {
    return false;
  }
}

// The origin found: the op that made the first non-finite value, or read it from outside.
// The parameter whose gradient `t` is (a view of), or "".
std::string gradient_of(const TraceState& s, const at::Tensor& t) {
  const void* key = storage_key(t);
  if (key == nullptr) return "";
  for (const auto& [name, tensor] : *s.named) {
    if (tensor.requires_grad() && storage_key(tensor.grad()) == key) return name;
  }
  return "";
}

void found(TraceState& s, const OpFrame& frame, const std::vector<at::Tensor>& read, const at::Tensor& bad_output,
           const at::Tensor* read_nonfinite, const std::string& evidence) {
  Origin& o = s.origin;
  const OpFrame* node = enclosing_node();
  o.backward = node != nullptr || s.backward_begun;
  o.node = node ? node->name : "";
  o.op = frame.name;
  o.module = frame.module;
  o.nan = has_nan(read_nonfinite ? *read_nonfinite : bad_output);
  if (read_nonfinite) {
    o.kind = Origin::Kind::kRead;
    const auto it = s.names->find(storage_key(*read_nonfinite));
    o.read_from = it != s.names->end() ? it->second : "";
    if (!o.read_from.empty()) o.module = OriginTracer::module_of(o.read_from);
    o.evidence = count_nonfinite(*read_nonfinite);
  } else {
    o.kind = Origin::Kind::kProduced;
    o.evidence = evidence.empty() ? op_evidence(frame.name, read, frame.scalars, bad_output) : evidence;
    // Written straight into a parameter's gradient (after autograd made it): that parameter.
    const std::string gradient = gradient_of(s, bad_output);
    if (!gradient.empty()) {
      o.layer = gradient;
      o.module = OriginTracer::module_of(gradient);
      o.evidence += " into " + gradient + "'s gradient";
    }
  }
  if (!o.read_from.empty()) o.layer = o.read_from;
  s.found = true;
  s.found_thread = std::this_thread::get_id();
  s.found_index = frame.index;
  s.found_depth = frame.depth;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext* context) {
  auto* frame = static_cast<OpFrame*>(context);
  if (frame == nullptr) return;
  pop(frame);
  TraceState* s = g_active.load();
  if (s == nullptr || frame->node || s->done.load() || allocates_only(frame->name)) return;

  at::RecordFunctionGuard off(false);
  at::NoGradGuard no_grad;
  // Outputs that are the inputs themselves (in place, out=) are results; views of an input
  // computed nothing.
  std::vector<const c10::TensorImpl*> written;
  std::vector<at::Tensor> bad_outputs;
  for (const c10::IValue& v : fn.outputs()) {
    for_each_tensor(v, [&](const at::Tensor& t) {
      if (!checkable(t)) return;
      bool is_view = false;
      for (const at::Tensor& in : frame->inputs) {
        if (in.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) {
          written.push_back(t.unsafeGetTensorImpl());
        } else if (storage_key(in) != nullptr && storage_key(in) == storage_key(t)) {
          is_view = true;
        }
      }
      if (!is_view && !all_finite(t)) bad_outputs.push_back(t);
    });
  }
  if (bad_outputs.empty()) return;
  const at::Tensor& bad_output = bad_outputs.front();
  bool nonfinite_number = false;   // an inf or nan given as a number (masked_fill(mask, -inf))
  for (double v : frame->scalars) nonfinite_number = nonfinite_number || !std::isfinite(v);

  std::lock_guard<std::mutex> lock(s->mutex);
  // Its inputs, but those it wrote (their value at the start was not read as data); of their
  // non-finite ones, the first that is not non-finite by design.
  std::vector<at::Tensor> read;
  const at::Tensor* read_nonfinite = nullptr;
  bool read_designed = false;
  for (size_t i = 0; i < frame->inputs.size(); ++i) {
    const c10::TensorImpl* impl = frame->inputs[i].unsafeGetTensorImpl();
    if (std::find(written.begin(), written.end(), impl) != written.end()) continue;
    read.push_back(frame->inputs[i]);
    if (frame->input_finite[i] < 0) frame->input_finite[i] = all_finite(frame->inputs[i]);
    if (frame->input_finite[i] == 1) continue;
    if (s->designed.count(storage_key(frame->inputs[i])) > 0) {
      read_designed = true;
    } else if (read_nonfinite == nullptr) {
      read_nonfinite = &frame->inputs[i];
    }
  }
  const bool same_thread = s->found && s->found_thread == std::this_thread::get_id();
  if (!s->found) {
    if (read_nonfinite != nullptr) {
      found(*s, *frame, read, bad_output, read_nonfinite, "");
    } else if (read.empty() && !nonfinite_number) {
      // It read nothing: what its output holds was there before it (detach_, a view's write).
    } else if (read_designed || nonfinite_number) {
      // Infinities the code meant: a mask's -inf, a constant it wrote, and what carries them
      // on. A NaN made from them is an origin; an Inf is by design too.
      if (has_nan(bad_output)) {
        found(*s, *frame, read, bad_output, nullptr,
              read_designed ? "NaN from values that are non-finite by design (a mask's -inf, say)"
                            : "writes a NaN given as a number");
      } else {
        for (const at::Tensor& t : bad_outputs) {
          s->designed.insert(storage_key(t));
          s->designed_kept.push_back(t);
        }
      }
    } else {
      found(*s, *frame, read, bad_output, nullptr, "");
    }
  } else if (same_thread && s->origin.kind == Origin::Kind::kProduced && frame->index < s->found_index &&
             frame->depth < s->found_depth && read_nonfinite == nullptr && !read_designed && !read.empty()) {
    // An op enclosing the origin, itself from finite inputs: the op the user wrote.
    const OpFrame* node = enclosing_node();
    if (s->origin.backward && node == nullptr) return;   // outside the backward node: not its op
    s->origin.op = frame->name;
    s->origin.module = frame->module;
    const std::string evidence = op_evidence(frame->name, read, frame->scalars, bad_output);
    if (!evidence.empty()) s->origin.evidence = evidence;
    s->found_depth = frame->depth;
  }
  if (s->found && same_thread && frame->depth == 0) s->done = true;
}

}  // namespace

OriginTracer::OriginTracer(const NamedTensors& parameters, const NamedTensors& buffers,
                           std::vector<at::Tensor> nonfinite_by_design)
    : parameters_(parameters), designed_(std::move(nonfinite_by_design)) {
  for (const NamedTensors* named : {&parameters, &buffers}) {
    for (const auto& [name, tensor] : *named) {
      const void* key = storage_key(tensor);
      if (key == nullptr) continue;
      names_by_storage_.emplace(key, name);
      if (named == &buffers) buffers_.insert(key);
    }
  }
}

std::string OriginTracer::module_of(const std::string& name) {
  const size_t dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(0, dot);
}

Origin OriginTracer::trace(const std::function<void()>& run) {
  TraceState state;
  state.names = &names_by_storage_;
  state.named = &parameters_;
  state.buffers = &buffers_;
  for (const at::Tensor& t : designed_) {
    if (storage_key(t) == nullptr) continue;
    state.designed.insert(storage_key(t));
    state.designed_kept.push_back(t);
  }
  TraceState* expected = nullptr;
  if (!g_active.compare_exchange_strong(expected, &state)) throw std::runtime_error("another origin trace is running");
  const at::CallbackHandle handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(&on_start, &on_end)
          .needsInputs(true)
          .needsOutputs(true)
          .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
  struct Disarm {
    at::CallbackHandle handle;
    ~Disarm() {
      at::removeCallback(handle);
      g_active.store(nullptr);
    }
  } disarm{handle};
  run();
  std::lock_guard<std::mutex> lock(state.mutex);
  Origin origin = state.origin;
  origin.ops_seen = state.next_index.load();
  return origin;
}

}  // namespace keel::probe
