// The training state in memory, and the rewind's restore (state_snapshots.hpp).
#include "state_snapshots.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace keel::probe {
namespace {

// -1 for a tensor the host copies itself (the CPU's, and a device's without a side stream).
int cuda_index(const torch::Tensor& t) { return t.defined() && t.is_cuda() ? t.device().index() : -1; }

std::string shape_of(const torch::Tensor& t) {
  if (!t.defined()) return "none";
  std::string out = "[";
  for (int64_t d = 0; d < t.dim(); ++d) out += (d ? ", " : "") + std::to_string(t.size(d));
  return out + "] " + std::string(c10::toString(t.scalar_type()));
}

// Throws unless `host` (a snapshot's) can be written into `live`.
void check_same(const torch::Tensor& host, const torch::Tensor& live, const char* what, size_t index) {
  if (host.defined() == live.defined() &&
      (!host.defined() || (host.sizes() == live.sizes() && host.scalar_type() == live.scalar_type()))) {
    return;
  }
  throw std::runtime_error(std::string(what) + " " + std::to_string(index) + " is " + shape_of(live) +
                           " now and was " + shape_of(host) + " in the snapshot");
}

}  // namespace

StateSnapshots::StateSnapshots(int64_t every, int64_t keep)
    : every_(every > 0 ? every : 0), slots_(every > 0 ? static_cast<size_t>(std::max<int64_t>(keep, 1)) : 0) {}

void StateSnapshots::copy_to_host(torch::Tensor& host, const torch::Tensor& source) {
  if (!source.defined()) {
    host = torch::Tensor();
    return;
  }
  const bool pinned = source.is_cuda();
  if (!host.defined() || host.sizes() != source.sizes() || host.scalar_type() != source.scalar_type() ||
      host.is_pinned() != pinned) {
    host = torch::empty(source.sizes(), torch::TensorOptions().dtype(source.scalar_type()).pinned_memory(pinned));
  }
  host.copy_(source.detach(), /*non_blocking=*/pinned);
}

SideCopy* StateSnapshots::side_copy(int device_index) {
  auto found = side_copies_.find(device_index);
  if (found == side_copies_.end()) found = side_copies_.emplace(device_index, make_side_copy(device_index)).first;
  return found->second.get();
}

void StateSnapshots::take(int64_t step, const TrainingState& state) {
  if (slots_.empty()) return;
  // Counted again however the copy ends: a failed one leaves its slot's host tensors made.
  struct Recount {
    StateSnapshots& snapshots;
    ~Recount() { snapshots.bytes_ = snapshots.count_bytes(); }
  } recount{*this};
  // An empty slot first (a rewind empties the abandoned span's), else the oldest not held
  // (hold() leaves at least one slot free).
  Slot* slot = nullptr;
  for (Slot& s : slots_) {
    if (s.step < 0) {
      slot = &s;
      break;
    }
    if (!s.held && (slot == nullptr || s.step < slot->step)) slot = &s;
  }
  if (slot == nullptr) slot = &slots_[0];
  slot->step = -1;
  const torch::NoGradGuard no_grad;
  // The buffers on the training stream: the next forward pass writes them.
  slot->buffers.resize(state.buffers.size());
  for (size_t i = 0; i < state.buffers.size(); ++i) copy_to_host(slot->buffers[i], state.buffers[i]);
  std::string why;
  const bool as_tensors = state.optimizer.state_tensors(live_state_, why);
  slot->optimizer.resize(as_tensors ? live_state_.size() : 0);
  slot->optimizer_archive.clear();
  if (!as_tensors) slot->optimizer_archive = state.optimizer.serialise();
  for (size_t i = 0; i < slot->optimizer.size(); ++i) {
    slot->optimizer[i].count = live_state_[i].count;
    slot->optimizer[i].tensors.resize(live_state_[i].tensors.size());
  }
  slot->weights.resize(state.weights.size());
  // The weights and the optimizer's tensors of one device (-1: those the host copies).
  const auto copy_of = [&](int device) {
    for (size_t i = 0; i < state.weights.size(); ++i) {
      if (cuda_index(state.weights[i]) == device) copy_to_host(slot->weights[i], state.weights[i]);
    }
    for (size_t i = 0; i < slot->optimizer.size(); ++i) {
      for (size_t k = 0; k < live_state_[i].tensors.size(); ++k) {
        if (cuda_index(live_state_[i].tensors[k]) == device) copy_to_host(slot->optimizer[i].tensors[k], live_state_[i].tensors[k]);
      }
    }
  };
  std::set<int> devices;
  for (const torch::Tensor& w : state.weights) devices.insert(cuda_index(w));
  for (const OptimizerStateTensors& s : live_state_) {
    for (const torch::Tensor& t : s.tensors) devices.insert(cuda_index(t));
  }
  for (const int device : devices) {
    SideCopy* side = device < 0 ? nullptr : side_copy(device);
    if (side != nullptr) {
      side->copy([&] { copy_of(device); });
    } else {
      copy_of(device);   // on the training stream, ordered before the next update
    }
  }
  // A deferred step's scaler settles when the next step begins: its scale here is the one
  // settled before, which the next steps' growth or backoff corrects.
  slot->has_scaler = state.scaler != nullptr && state.scaler->enabled();
  slot->scale = slot->has_scaler ? state.scaler->scale_value() : 0.0f;
  slot->growth_tracker = slot->has_scaler ? state.scaler->growth_tracker() : 0;
  live_state_.clear();   // no reference to the optimizer's tensors is kept between steps
  slot->step = step;
}

void StateSnapshots::order_before_update() {
  for (auto& [device, side] : side_copies_) {
    if (side) side->order_current_after();
  }
}

std::optional<int64_t> StateSnapshots::newest_at_or_before(int64_t step) const {
  std::optional<int64_t> newest;
  for (const Slot& s : slots_) {
    if (s.step >= 0 && s.step <= step && (!newest || s.step > *newest)) newest = s.step;
  }
  return newest;
}

void StateSnapshots::restore(int64_t step, const TrainingState& state) {
  const auto found = std::find_if(slots_.begin(), slots_.end(), [step](const Slot& s) { return s.step == step; });
  if (found == slots_.end()) throw std::runtime_error("no snapshot of step " + std::to_string(step) + " is kept");
  const Slot& slot = *found;
  if (slot.weights.size() != state.weights.size() || slot.buffers.size() != state.buffers.size()) {
    throw std::runtime_error("the model has " + std::to_string(state.weights.size()) + " parameters and " +
                             std::to_string(state.buffers.size()) + " buffers now, the snapshot " +
                             std::to_string(slot.weights.size()) + " and " + std::to_string(slot.buffers.size()));
  }
  for (size_t i = 0; i < slot.weights.size(); ++i) check_same(slot.weights[i], state.weights[i], "parameter", i);
  for (size_t i = 0; i < slot.buffers.size(); ++i) check_same(slot.buffers[i], state.buffers[i], "buffer", i);
  for (auto& [device, side] : side_copies_) {
    if (side) side->wait();
  }
  const torch::NoGradGuard no_grad;
  // The optimizer first: a front that cannot put its state back refuses before anything was
  // written, and the run goes on as it was rather than with the weights of one step and the
  // optimizer state of another.
  if (slot.optimizer_archive.empty()) {
    state.optimizer.restore_state_tensors(slot.optimizer);
  } else {
    state.optimizer.restore_serialised(slot.optimizer_archive);
  }
  for (size_t i = 0; i < slot.weights.size(); ++i) state.weights[i].copy_(slot.weights[i]);
  for (size_t i = 0; i < slot.buffers.size(); ++i) {
    if (slot.buffers[i].defined()) state.buffers[i].copy_(slot.buffers[i]);
  }
  if (slot.has_scaler && state.scaler != nullptr && state.scaler->enabled()) {
    state.scaler->load_state(slot.scale, slot.growth_tracker);
  }
  for (Slot& s : slots_) {
    if (s.step > step) {
      s.step = -1;
      s.held = false;
    }
  }
}

std::optional<int64_t> StateSnapshots::hold(int64_t step) {
  const std::optional<int64_t> newest = newest_at_or_before(step);
  if (slots_.size() < 2 || !newest) return held();
  for (Slot& s : slots_) s.held = s.step == *newest;
  return newest;
}

std::optional<int64_t> StateSnapshots::held() const {
  for (const Slot& s : slots_) {
    if (s.held && s.step >= 0) return s.step;
  }
  return std::nullopt;
}

uint64_t StateSnapshots::count_bytes() const {
  uint64_t total = 0;
  const auto add = [&total](const torch::Tensor& t) {
    if (t.defined()) total += static_cast<uint64_t>(t.nbytes());
  };
  for (const Slot& s : slots_) {
    for (const auto& t : s.weights) add(t);
    for (const auto& t : s.buffers) add(t);
    for (const auto& o : s.optimizer) {
      for (const auto& t : o.tensors) add(t);
    }
    total += s.optimizer_archive.size();
  }
  return total;
}

std::vector<int64_t> StateSnapshots::steps() const {
  std::vector<int64_t> out;
  for (const Slot& s : slots_) {
    if (s.step >= 0) out.push_back(s.step);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace keel::probe
