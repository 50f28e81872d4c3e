#include "cpu_fused_reductions.hpp"

#include <algorithm>

namespace keel::probe {
namespace {

bool cpu_float_contiguous(const torch::Tensor& t) {
  // is_sparse() first: is_contiguous() throws on a sparse tensor.
  return t.defined() && t.device().is_cpu() && t.scalar_type() == torch::kFloat && !t.is_sparse() &&
         t.is_contiguous();
}

}  // namespace

CpuFusedReductions::CpuFusedReductions(const std::vector<torch::Tensor>& params, bool measure_in_backward,
                                       const std::vector<bool>& swapped)
    : params_(params), offset_(params.size(), -1), accumulated_(params, measure_in_backward, swapped) {
  int64_t total = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!cpu_float_contiguous(params_[i])) continue;
    offset_[i] = total;
    total += params_[i].numel();
  }
  snapshot_elems_ = static_cast<size_t>(total);
  holds_every_layer_ = std::all_of(offset_.begin(), offset_.end(), [](int64_t offset) { return offset >= 0; });
  // Both pairs of gradient lists take turns (enqueue_grads swaps them): full size from the
  // start, so that no step grows them in a trainer's fragmented heap.
  for (auto* layers : {&taken_grads_, &grad_layers_, &taken_accumulated_, &accumulated_layers_}) {
    layers->reserve(params_.size());
  }
  for (auto* stats : {&taken_accumulated_stats_, &accumulated_stats_}) stats->reserve(params_.size());
  for (auto* sums : {&taken_accumulated_weights_, &accumulated_weights_}) sums->reserve(params_.size());
  for (auto* spans : {&taken_grad_spans_, &mutable_spans_}) spans->reserve(params_.size());
  taken_weight_spans_.reserve(params_.size());
  weighed_in_pass_.assign(params_.size(), 0);
}

void CpuFusedReductions::measure_updates_of(const OptimizerAdapter* optimizer) {
  // An optimizer that steps a tensor twice moves it by twice -lr * g: only the copy sees that.
  optimizer_ = optimizer != nullptr && !steps_a_tensor_twice(*optimizer) ? optimizer : nullptr;
  group_of_ = optimizer_ ? group_of_layers(*optimizer_, LayerIndex(params_)) : std::vector<int>();
}

void CpuFusedReductions::plan_update(bool grads_this_step) {
  // Read each step: a group's momentum, weight decay or lr may be set between steps.
  update_from_grads_ = grads_this_step && optimizer_ != nullptr && plain_sgd_lrs(*optimizer_, group_lrs_);
  weighed_this_pass_ = false;   // until this step's pass has run
  // For the next backward's hooks: this step's plan is the likely next one.
  accumulated_.set_weighs(weighs_with_grads());
}

void CpuFusedReductions::begin_grads(float unscale) {
  taken_grads_.clear();
  taken_grad_spans_.clear();
  taken_weight_spans_.clear();
  taken_weights_ok_ = true;
  taken_accumulated_.clear();
  taken_accumulated_stats_.clear();
  taken_accumulated_weights_.clear();
  // The hooks measured the gradients as they were, scaled: an unscale must pass over them.
  accumulated_usable_ = unscale == 1.0f;
}

bool CpuFusedReductions::take_grad(size_t layer, const torch::Tensor& grad) {
  if (offset_[layer] < 0 || !cpu_float_contiguous(grad)) return false;
  GradStats stats;
  double weight_sumsq = 0;
  if (accumulated_usable_ && accumulated_.take(layer, grad, weighs_with_grads(), stats, weight_sumsq)) {
    taken_accumulated_.push_back(layer);
    taken_accumulated_stats_.push_back(stats);
    taken_accumulated_weights_.push_back(weight_sumsq);
    return true;
  }
  taken_grads_.push_back(layer);
  taken_grad_spans_.push_back({grad.data_ptr<float>(), grad.numel()});
  if (weighs_with_grads()) {
    // The parameter's TensorImpl is in cache now, on the way to its gradient.
    const torch::Tensor& weight = params_[layer];
    if (cpu_float_contiguous(weight) && weight.numel() == grad.numel()) {
      taken_weight_spans_.push_back({weight.data_ptr<float>(), weight.numel()});
    } else {
      taken_weights_ok_ = false;   // the weights' own pass reads them all
    }
  }
  return true;
}

void CpuFusedReductions::enqueue_grads(float unscale) {
  // The taken lists become the pass's; the swapped-out ones gather the next step's.
  grad_layers_.swap(taken_grads_);
  mutable_spans_.swap(taken_grad_spans_);
  accumulated_layers_.swap(taken_accumulated_);
  accumulated_stats_.swap(taken_accumulated_stats_);
  accumulated_weights_.swap(taken_accumulated_weights_);
  ++grad_pass_;
  weighed_this_pass_ = weighs_with_grads() && taken_weights_ok_;
  // Taken with W's norm when the pass weighs (take's with_weight).
  if (weighed_this_pass_) {
    for (size_t layer : accumulated_layers_) weighed_in_pass_[layer] = grad_pass_;
  }
  if (grad_layers_.empty()) return;
  if (weighed_this_pass_) {
    fused_.grad_and_weight_stats(mutable_spans_, unscale, taken_weight_spans_, grad_out_, grad_weight_out_);
    for (size_t layer : grad_layers_) weighed_in_pass_[layer] = grad_pass_;
  } else if (unscale != 1.0f) {
    fused_.unscale_and_grad_stats(mutable_spans_, unscale, grad_out_);
  } else {
    const_spans_.clear();
    for (const MutableSpan& span : mutable_spans_) const_spans_.push_back({span.data, span.numel});
    fused_.grad_stats(const_spans_, grad_out_);
  }
}

void CpuFusedReductions::collect_grads(LayerSums& out) {
  for (size_t k = 0; k < accumulated_layers_.size(); ++k) out.grads[accumulated_layers_[k]] = accumulated_stats_[k];
  for (size_t k = 0; k < grad_layers_.size(); ++k) out.grads[grad_layers_[k]] = grad_out_[k];
  if (!weighed_this_pass_) return;
  for (size_t k = 0; k < accumulated_layers_.size(); ++k) out.param_sumsq[accumulated_layers_[k]] = accumulated_weights_[k];
  for (size_t k = 0; k < grad_layers_.size(); ++k) out.param_sumsq[grad_layers_[k]] = grad_weight_out_[k];
}

// Asked every step: set_data can leave a planned weight with the same shape and type but
// strided (a view that is not dense), whose elements are not the run the kernels read.
bool CpuFusedReductions::takes_weights(size_t layer, bool /*for_update*/) const {
  return offset_[layer] >= 0 && cpu_float_contiguous(params_[layer]);
}

const std::vector<SnapshotSpan>& CpuFusedReductions::snapshot_spans(const std::vector<size_t>& layers) {
  if (snapshot_.size() != snapshot_elems_) snapshot_.assign(snapshot_elems_, 0.0f);
  snapshot_spans_.clear();
  for (size_t i : layers) {
    snapshot_spans_.push_back({params_[i].data_ptr<float>(), snapshot_.data() + offset_[i], params_[i].numel()});
  }
  return snapshot_spans_;
}

const std::vector<ConstSpan>& CpuFusedReductions::weight_spans(const std::vector<size_t>& layers) {
  const_spans_.clear();
  for (size_t i : layers) const_spans_.push_back({params_[i].data_ptr<float>(), params_[i].numel()});
  return const_spans_;
}

void CpuFusedReductions::enqueue_weights(const std::vector<size_t>& layers, bool for_update) {
  // The layers this step's gradient pass weighed already have their norms (collect_grads).
  weight_layers_.clear();
  for (size_t i : layers) {
    if (!weighed_this_step(i)) weight_layers_.push_back(i);
  }
  if (weight_layers_.empty()) return;
  if (for_update && !update_from_grads_) {
    fused_.snapshot_sumsq(snapshot_spans(weight_layers_), weight_out_);
    snapshot_is_w_ = true;
  } else {
    fused_.sumsq(weight_spans(weight_layers_), weight_out_);
  }
}

void CpuFusedReductions::collect_weights(LayerSums& out) {
  for (size_t k = 0; k < weight_layers_.size(); ++k) out.param_sumsq[weight_layers_[k]] = weight_out_[k];
}

void CpuFusedReductions::enqueue_updates(const std::vector<size_t>& layers) {
  update_layers_ = layers;
  updates_were_from_grads_ = update_from_grads_;
  update_from_grads_ = false;   // planned again by the next step
  measured_next_norms_ = true;
  if (layers.empty()) return;
  if (updates_were_from_grads_) {
    // Only |W_new|^2 is left to read, for the next step. The whole model's: the next step
    // reads W before its update instead, which spares this pass and the versions' walks that
    // trusting it takes (remembered at the step's end, compared at the next one's start). Part
    // of it: read now, so that the other backends' layers keep reusing theirs.
    if (holds_every_layer_) {
      measured_next_norms_ = false;
    } else {
      fused_.sumsq(weight_spans(layers), next_weight_out_);
    }
    update_lrs_.clear();
    for (size_t i : layers) {
      const int group = group_of_[i];
      update_lrs_.push_back(group >= 0 ? group_lrs_[static_cast<size_t>(group)] : 0.0);   // -1: not stepped
    }
    snapshot_is_w_ = false;
  } else {
    fused_.update_and_snapshot(snapshot_spans(layers), update_out_, next_weight_out_);
    snapshot_is_w_ = true;
  }
}

void CpuFusedReductions::collect_updates(bool applied, LayerSums& out) {
  for (size_t k = 0; k < update_layers_.size(); ++k) {
    const size_t i = update_layers_[k];
    if (updates_were_from_grads_) {
      // -lr * g, with out.grads this step's (plan_update); a skipped step moved nothing.
      const double lr = update_lrs_[k];
      out.update_sumsq[i] = applied ? lr * lr * out.grads[i].sumsq : 0.0;
    } else {
      // Measured against the copy: a skipped update is the zero it measured.
      out.update_sumsq[i] = update_out_[k];
    }
    if (measured_next_norms_) out.next_param_sumsq[i] = next_weight_out_[k];
  }
}

}  // namespace keel::probe
