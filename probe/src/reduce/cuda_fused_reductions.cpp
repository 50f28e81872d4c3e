#include "cuda_fused_reductions.hpp"

#include "gradient_slot.hpp"

#include <stdexcept>

namespace keel::probe {

CudaFusedReductions::CudaFusedReductions(const std::vector<torch::Tensor>& params)
    : params_(params), layers_(params) {}

void CudaFusedReductions::measure_updates_of(const OptimizerAdapter* optimizer) {
  const bool rebuildable = optimizer != nullptr && has_update_rules(*optimizer) && !steps_a_tensor_twice(*optimizer);
  rebuild_from_ = rebuildable ? optimizer : nullptr;
}

void CudaFusedReductions::begin_grads(float /*unscale*/) { taken_grads_.clear(); }

bool CudaFusedReductions::take_grad(size_t layer, const torch::Tensor& grad) {
  if (!device_pass_accepts(grad)) return false;
  taken_grads_.push_back(layer);
  return true;
}

void CudaFusedReductions::enqueue_grads(float unscale) {
  for (auto& [index, device] : devices_) device.grads.clear();
  for (size_t i : taken_grads_) {
    const torch::Tensor& grad = *gradient_slot(params_[i]).grad;   // taken: defined
    Device& device = device_of(grad);
    if (!device.grads_pass) device.grads_pass = make_device_grad_pass(grad.device().index());
    device.grads.add(i, grad);
  }
  for (auto& [index, device] : devices_) {
    if (!device.grads.layers.empty()) device.grads_pass->enqueue(device.grads.tensors, unscale);
  }
}

void CudaFusedReductions::finish_grads(const VerdictRequest* verdict, bool gradients_elsewhere) {
  verdict_device_ = -1;
  if (verdict) {
    const int device = gradients_elsewhere ? -1 : sole_device();
    if (device < 0) throw std::logic_error("keel: a verdict needs every gradient on one device");
    verdict_device_ = device;
  }
  for (auto& [index, device] : devices_) {
    if (!device.grads.layers.empty()) device.grads_pass->finish(verdict);
  }
}

void CudaFusedReductions::collect_grads(LayerSums& out) {
  for (auto& [index, device] : devices_) {
    if (device.grads.layers.empty()) continue;
    device.grads_pass->collect(grad_out_);
    for (size_t k = 0; k < device.grads.layers.size(); ++k) out.grads[device.grads.layers[k]] = grad_out_[k];
    // The references kept the gradients alive only until their pass ran.
    device.grads.tensors.clear();
  }
}

int CudaFusedReductions::sole_device() const {
  int found = -1;
  for (const auto& [index, device] : devices_) {
    if (device.grads.layers.empty()) continue;
    if (found != -1) return -1;
    found = index;
  }
  return found;
}

bool CudaFusedReductions::pass_on(int device_index) const {
  const auto found = devices_.find(device_index);
  return found != devices_.end() && !found->second.grads.layers.empty();
}

torch::Tensor CudaFusedReductions::found_inf() const {
  if (verdict_device_ < 0) throw std::logic_error("keel: no verdict was asked for");
  return devices_.at(verdict_device_).grads_pass->found_inf();
}

float CudaFusedReductions::collected_found_inf() const {
  if (verdict_device_ < 0) throw std::logic_error("keel: no verdict was asked for");
  return devices_.at(verdict_device_).grads_pass->collected_found_inf();
}

bool CudaFusedReductions::takes_weights(size_t layer, bool for_update) const {
  return device_pass_accepts(params_[layer]) && (rebuild_from_ != nullptr || !for_update);
}

// sum w^2, with the gradient kernel read-only: W_old's norm for a rebuilt update comes from
// the update pass itself, so `for_update` asks for nothing more here.
void CudaFusedReductions::enqueue_weights(const std::vector<size_t>& layers, bool /*for_update*/) {
  for (auto& [index, device] : devices_) device.weights.clear();
  for (size_t i : layers) device_of(params_[i]).weights.add(i, params_[i]);
  for (auto& [index, device] : devices_) {
    if (device.weights.layers.empty()) continue;
    if (!device.weights_pass) device.weights_pass = make_device_grad_pass(index);
    device.weights_pass->enqueue(device.weights.tensors, 1.0f);
    device.weights_pass->finish(nullptr);
  }
}

void CudaFusedReductions::collect_weights(LayerSums& out) {
  for (auto& [index, device] : devices_) {
    if (device.weights.layers.empty()) continue;
    device.weights_pass->collect(grad_out_);
    for (size_t k = 0; k < device.weights.layers.size(); ++k) {
      out.param_sumsq[device.weights.layers[k]] = grad_out_[k].sumsq;
    }
    device.weights.clear();
  }
}

// The updates rebuilt from the optimizer's state after its step.
void CudaFusedReductions::enqueue_updates(const std::vector<size_t>& layers) {
  for (auto& [index, device] : devices_) device.updates.clear();
  if (layers.empty()) return;
  if (rebuild_from_ == nullptr) throw std::logic_error("keel: no optimizer to rebuild the updates from");
  for (size_t i : layers) device_of(params_[i]).updates.add(i, params_[i]);
  read_update_rules(*rebuild_from_, layers_, rules_);
  for (auto& [index, device] : devices_) {
    if (device.updates.layers.empty()) continue;
    if (!device.updates_pass) device.updates_pass = make_device_update_pass(index);
    device_rules_.clear();
    for (size_t i : device.updates.layers) device_rules_.push_back(&rules_[i]);
    device.updates_pass->enqueue(device.updates.tensors, device_rules_);
  }
  // The rules hold the optimizer's state tensors: the pass is enqueued, and the caching
  // allocator keeps their memory for it (stream order) whatever happens to them now.
  rules_.clear();
}

void CudaFusedReductions::collect_updates(bool applied, LayerSums& out) {
  for (auto& [index, device] : devices_) {
    if (device.updates.layers.empty() || !device.updates_pass) continue;
    device.updates_pass->collect(update_out_);
    for (size_t k = 0; k < device.updates.layers.size(); ++k) {
      const size_t i = device.updates.layers[k];
      if (applied) {
        out.update_sumsq[i] = update_out_[k].update_sumsq;
        out.param_sumsq[i] = update_out_[k].old_sumsq;
      } else {
        // |W|^2 is still what the pass read.
        out.update_sumsq[i] = 0;
        out.param_sumsq[i] = update_out_[k].new_sumsq;
      }
      out.next_param_sumsq[i] = update_out_[k].new_sumsq;
    }
    device.updates.clear();
  }
}

}  // namespace keel::probe
