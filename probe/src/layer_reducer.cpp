#include "layer_reducer.hpp"

#include <functional>
#include <map>
#include <string>
#include <utility>

namespace keel::probe {
namespace {

bool cpu_float_contiguous(const torch::Tensor& t) {
  // is_sparse() first: is_contiguous() throws on a sparse tensor.
  return t.defined() && t.device().is_cpu() && t.scalar_type() == torch::kFloat && !t.is_sparse() &&
         t.is_contiguous();
}

// Stacks per-layer rows that live on several devices into one host table: one stack and one
// device-to-host copy per device (the only synchronisation of the generic path).
void gather_rows(const std::vector<size_t>& layers, const std::vector<torch::Tensor>& rows,
                 const std::function<void(size_t layer, const double* row)>& sink) {
  std::map<std::string, std::vector<size_t>> by_device;
  for (size_t i = 0; i < rows.size(); ++i) by_device[rows[i].device().str()].push_back(i);
  for (auto& [device, indices] : by_device) {
    std::vector<torch::Tensor> group;
    group.reserve(indices.size());
    for (size_t i : indices) group.push_back(rows[i]);
    auto host = torch::stack(group).to(torch::kCPU).contiguous();
    const int64_t width = host.size(1);
    const double* data = host.data_ptr<double>();
    for (size_t k = 0; k < indices.size(); ++k) sink(layers[indices[k]], data + k * width);
  }
}

// Squared in fp64: a finite fp32 value above 1.8e19 (a poisoned batch) squares to Inf in
// fp32, and one below 1e-19 to 0. The fp64 copy costs memory for one tensor at a time.
torch::Tensor sumsq_on_device(const torch::Tensor& t) {
  return t.to(torch::kDouble).square().sum();
}

}  // namespace

LayerReducer::LayerReducer(std::vector<torch::Tensor> params)
    : params_(std::move(params)),
      fast_offset_(params_.size(), -1),
      generic_snapshot_(params_.size()),
      grad_stats_(params_.size()),
      param_sumsq_(params_.size(), 0.0),
      update_sumsq_(params_.size(), 0.0),
      next_param_sumsq_(params_.size(), 0.0) {
  int64_t total = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!on_fast_path(i)) continue;
    fast_offset_[i] = total;
    total += params_[i].numel();
  }
  cpu_snapshot_.assign(static_cast<size_t>(total), 0.0f);
}

void LayerReducer::measure_updates_of(torch::optim::Optimizer* optimizer) {
  // One that steps a tensor twice is measured as other optimizers are (a copy of W, opt-in
  // on a device): one rule would report half of such a tensor's update.
  rebuild_from_ = optimizer != nullptr && has_update_rules(*optimizer) && !steps_a_tensor_twice(*optimizer) ? optimizer : nullptr;
}

bool LayerReducer::on_fast_path(size_t layer) const {
  return cpu_float_contiguous(params_[layer]);
}

bool LayerReducer::grad_on_fast_path(size_t layer) const {
  return on_fast_path(layer) && cpu_float_contiguous(params_[layer].grad());
}

void LayerReducer::enqueue_grads(float unscale) {
  fast_layers_.clear();
  generic_layers_.clear();
  for (auto& [index, device] : devices_) device.grads.clear();
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& grad = params_[i].grad();
    if (!grad.defined()) {
      grad_stats_[i] = GradStats{};
      grad_stats_[i].zeros = params_[i].numel();
    } else if (grad_on_fast_path(i)) {
      fast_layers_.push_back(i);
    } else if (device_pass_accepts(grad)) {
      DeviceLayers& device = devices_[grad.device().index()];
      if (!device.grads_pass) device.grads_pass = make_device_grad_pass(grad.device().index());
      device.grads.add(i, grad);
    } else {
      generic_layers_.push_back(i);
    }
  }
  // The device passes first: the GPU works while the host reduces its own layers.
  for (auto& [index, device] : devices_) {
    if (!device.grads.layers.empty()) device.grads_pass->enqueue(device.grads.tensors, unscale);
  }
  if (!fast_layers_.empty()) {
    if (unscale != 1.0f) {
      mutable_spans_.clear();
      for (size_t i : fast_layers_) {
        auto grad = params_[i].grad();
        mutable_spans_.push_back({grad.data_ptr<float>(), grad.numel()});
      }
      fused_.unscale_and_grad_stats(mutable_spans_, unscale, fast_grad_out_);
    } else {
      const_spans_.clear();
      for (size_t i : fast_layers_) {
        const auto& grad = params_[i].grad();
        const_spans_.push_back({grad.data_ptr<float>(), grad.numel()});
      }
      fused_.grad_stats(const_spans_, fast_grad_out_);
    }
    for (size_t k = 0; k < fast_layers_.size(); ++k) grad_stats_[fast_layers_[k]] = fast_grad_out_[k];
  }
  if (!generic_layers_.empty()) reduce_generic_grads(generic_layers_, unscale);
}

void LayerReducer::finish_grads(const VerdictRequest* verdict) {
  verdict_device_ = -1;
  if (verdict) {
    // The verdict folds one pass's results: every gradient must be in it.
    verdict_device_ = sole_device();
    if (verdict_device_ < 0) throw std::logic_error("keel: a verdict needs every gradient on one device");
  }
  for (auto& [index, device] : devices_) {
    if (!device.grads.layers.empty()) device.grads_pass->finish(verdict);
  }
}

bool LayerReducer::needs_device_snapshot() const {
  for (const auto& w : params_) {
    if (!w.is_cpu() && !(rebuild_from_ != nullptr && device_pass_accepts(w))) return true;
  }
  return false;
}

int LayerReducer::sole_device() const {
  if (!fast_layers_.empty() || !generic_layers_.empty()) return -1;
  int found = -1;
  for (const auto& [index, device] : devices_) {
    if (device.grads.layers.empty()) continue;
    if (found != -1) return -1;
    found = index;
  }
  return found;
}

torch::Tensor LayerReducer::found_inf() const {
  if (verdict_device_ < 0) throw std::logic_error("keel: no verdict was asked for");
  return devices_.at(verdict_device_).grads_pass->found_inf();
}

float LayerReducer::collected_found_inf() const {
  if (verdict_device_ < 0) throw std::logic_error("keel: no verdict was asked for");
  return devices_.at(verdict_device_).grads_pass->collected_found_inf();
}

void LayerReducer::collect_grads() {
  for (auto& [index, device] : devices_) {
    if (device.grads.layers.empty()) continue;
    device.grads_pass->collect(device_grad_out_);
    for (size_t k = 0; k < device.grads.layers.size(); ++k) grad_stats_[device.grads.layers[k]] = device_grad_out_[k];
    // The references kept the gradients alive only until their pass ran.
    device.grads.tensors.clear();
  }
}

bool LayerReducer::device_pass_on(int device_index) const {
  const auto found = devices_.find(device_index);
  return found != devices_.end() && !found->second.grads.layers.empty();
}

void LayerReducer::reduce_generic_grads(const std::vector<size_t>& layers, float unscale) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> rows;
  rows.reserve(layers.size());
  for (size_t i : layers) {
    auto grad = params_[i].mutable_grad();
    if (unscale != 1.0f) grad.mul_(unscale);
    // A sparse gradient (an Embedding with sparse=true) is measured by the values it stores,
    // coalesced so that repeated indices add up first; the elements it does not store are zeros.
    const bool sparse = grad.is_sparse();
    const auto stored = sparse ? grad.coalesce()._values() : grad;
    // fp16/bf16 widen exactly to fp32; fp64 stays fp64, where a value above FLT_MAX is finite.
    auto g = stored.scalar_type() == torch::kDouble ? stored : stored.to(torch::kFloat);
    auto nonfinite = torch::isfinite(g).logical_not().sum().to(torch::kDouble);
    auto zeros = g.eq(0).sum().to(torch::kDouble);
    if (sparse) zeros = zeros + static_cast<double>(grad.numel() - stored.numel());
    // max() propagates NaN, which is the definition of grad_absmax.
    auto absmax = g.numel() > 0 ? g.abs().max().to(torch::kDouble)
                                : torch::zeros({}, g.options().dtype(torch::kDouble));
    rows.push_back(torch::stack({sumsq_on_device(g), absmax, nonfinite, zeros}));
  }
  gather_rows(layers, rows, [this](size_t layer, const double* row) {
    GradStats& s = grad_stats_[layer];
    s.sumsq = row[0];
    s.absmax = static_cast<float>(row[1]);
    s.nonfinite = static_cast<int64_t>(row[2]);
    s.zeros = static_cast<int64_t>(row[3]);
  });
}

void LayerReducer::partition_weights(bool device_only_rebuilt) {
  fast_layers_.clear();
  generic_layers_.clear();
  for (auto& [index, device] : devices_) device.weights.clear();
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& w = params_[i];
    if (fast_offset_[i] >= 0) {
      fast_layers_.push_back(i);
    } else if (device_pass_accepts(w) && (rebuild_from_ != nullptr || !device_only_rebuilt)) {
      DeviceLayers& device = devices_[w.device().index()];
      device.weights.add(i, w);
    } else {
      generic_layers_.push_back(i);
    }
  }
}

void LayerReducer::snapshot_weights() {
  partition_weights(/*device_only_rebuilt=*/true);
  snapshot_spans_.clear();
  for (size_t i : fast_layers_) {
    snapshot_spans_.push_back({params_[i].data_ptr<float>(), cpu_snapshot_.data() + fast_offset_[i], params_[i].numel()});
  }
  fused_.snapshot_sumsq(snapshot_spans_, fast_sum_out_);
  for (size_t k = 0; k < fast_layers_.size(); ++k) param_sumsq_[fast_layers_[k]] = fast_sum_out_[k];
  weights_on_devices();
  if (!generic_layers_.empty()) weights_generic(generic_layers_, /*snapshot=*/true);
}

void LayerReducer::reduce_weights() {
  partition_weights(/*device_only_rebuilt=*/false);
  const_spans_.clear();
  for (size_t i : fast_layers_) const_spans_.push_back({params_[i].data_ptr<float>(), params_[i].numel()});
  fused_.sumsq(const_spans_, fast_sum_out_);
  for (size_t k = 0; k < fast_layers_.size(); ++k) param_sumsq_[fast_layers_[k]] = fast_sum_out_[k];
  weights_on_devices();
  if (!generic_layers_.empty()) weights_generic(generic_layers_, /*snapshot=*/false);
}

// sum w^2 of the device layers partition_weights chose, with the gradient kernel read-only.
void LayerReducer::weights_on_devices() {
  for (auto& [index, device] : devices_) {
    if (device.weights.layers.empty()) continue;
    if (!device.weights_pass) device.weights_pass = make_device_grad_pass(index);
    device.weights_pass->enqueue(device.weights.tensors, 1.0f);
    device.weights_pass->finish(nullptr);
  }
  for (auto& [index, device] : devices_) {
    if (device.weights.layers.empty()) continue;
    device.weights_pass->collect(device_grad_out_);
    for (size_t k = 0; k < device.weights.layers.size(); ++k) {
      param_sumsq_[device.weights.layers[k]] = device_grad_out_[k].sumsq;
    }
    device.weights.tensors.clear();
  }
}

void LayerReducer::weights_generic(const std::vector<size_t>& layers, bool snapshot) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> rows;
  rows.reserve(layers.size());
  for (size_t i : layers) {
    const auto& w = params_[i];
    if (snapshot) {
      auto& snap = generic_snapshot_[i];
      if (!snap.defined()) snap = torch::empty_like(w);
      snap.copy_(w);
    }
    rows.push_back(sumsq_on_device(w).reshape({1}));
  }
  gather_rows(layers, rows, [this](size_t layer, const double* row) { param_sumsq_[layer] = row[0]; });
}

void LayerReducer::enqueue_updates() {
  partition_weights(/*device_only_rebuilt=*/true);
  snapshot_spans_.clear();
  for (size_t i : fast_layers_) {
    snapshot_spans_.push_back({params_[i].data_ptr<float>(), cpu_snapshot_.data() + fast_offset_[i], params_[i].numel()});
  }
  fused_.update_and_snapshot(snapshot_spans_, fast_sum_out_, fast_sum_out2_);
  for (size_t k = 0; k < fast_layers_.size(); ++k) {
    update_sumsq_[fast_layers_[k]] = fast_sum_out_[k];
    next_param_sumsq_[fast_layers_[k]] = fast_sum_out2_[k];
  }
  enqueue_updates_on_devices();
  if (!generic_layers_.empty()) updates_generic(generic_layers_);
}

// The device layers' updates, rebuilt from the optimizer's state after its step. |W_old|^2 is
// rebuilt too, and replaces the weight norm taken before the step (the same quantity).
void LayerReducer::enqueue_updates_on_devices() {
  bool any = false;
  for (const auto& [index, device] : devices_) any = any || !device.weights.layers.empty();
  if (!any) return;
  read_update_rules(*rebuild_from_, params_, rules_);
  for (auto& [index, device] : devices_) {
    if (device.weights.layers.empty()) continue;
    if (!device.updates_pass) device.updates_pass = make_device_update_pass(index);
    device_rules_.clear();
    for (size_t i : device.weights.layers) device_rules_.push_back(&rules_[i]);
    device.updates_pass->enqueue(device.weights.tensors, device_rules_);
  }
  // The rules hold the optimizer's state tensors: the pass is enqueued, and the caching
  // allocator keeps their memory for it (stream order) whatever happens to them now.
  rules_.clear();
}

void LayerReducer::collect_updates(bool applied) {
  for (auto& [index, device] : devices_) {
    if (device.weights.layers.empty() || !device.updates_pass) continue;
    device.updates_pass->collect(device_update_out_);
    for (size_t k = 0; k < device.weights.layers.size(); ++k) {
      const size_t i = device.weights.layers[k];
      if (applied) {
        update_sumsq_[i] = device_update_out_[k].update_sumsq;
        param_sumsq_[i] = device_update_out_[k].old_sumsq;
      } else {
        // Skipped on the device: W did not move, and the rule (read before the verdict was
        // known) describes an update that never happened. |W|^2 is still what the pass read.
        update_sumsq_[i] = 0;
        param_sumsq_[i] = device_update_out_[k].new_sumsq;
      }
      next_param_sumsq_[i] = device_update_out_[k].new_sumsq;
    }
    device.weights.tensors.clear();
  }
}

void LayerReducer::updates_generic(const std::vector<size_t>& layers) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> rows;
  rows.reserve(layers.size());
  for (size_t i : layers) {
    auto& snap = generic_snapshot_[i];
    const auto& w = params_[i];
    if (!snap.defined()) {
      snap = w.detach().clone();
      rows.push_back(torch::stack({torch::zeros({}, w.options().dtype(torch::kDouble)), sumsq_on_device(w)}));
      continue;
    }
    rows.push_back(torch::stack({sumsq_on_device(w.to(torch::kDouble) - snap), sumsq_on_device(w)}));
    snap.copy_(w);
  }
  gather_rows(layers, rows, [this](size_t layer, const double* row) {
    update_sumsq_[layer] = row[0];
    next_param_sumsq_[layer] = row[1];
  });
}

}  // namespace keel::probe
