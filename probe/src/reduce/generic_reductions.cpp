#include "generic_reductions.hpp"

#include <functional>
#include <map>
#include <string>

namespace keel::probe {
namespace {

// Stacks per-layer rows that live on several devices into one host table: one stack and one
// device-to-host copy per device. sink(k, row) gets rows[k].
void gather_rows(const std::vector<torch::Tensor>& rows, const std::function<void(size_t k, const double* row)>& sink) {
  std::map<std::string, std::vector<size_t>> by_device;
  for (size_t k = 0; k < rows.size(); ++k) by_device[rows[k].device().str()].push_back(k);
  for (auto& [device, indices] : by_device) {
    std::vector<torch::Tensor> group;
    group.reserve(indices.size());
    for (size_t k : indices) group.push_back(rows[k]);
    auto host = torch::stack(group).to(torch::kCPU).contiguous();
    const int64_t width = host.size(1);
    const double* data = host.data_ptr<double>();
    for (size_t j = 0; j < indices.size(); ++j) sink(indices[j], data + j * width);
  }
}

// Squared in fp64: a finite fp32 value above 1.8e19 (a poisoned batch) squares to Inf in
// fp32, and one below 1e-19 to 0. The fp64 copy costs memory for one tensor at a time.
torch::Tensor sumsq_on_device(const torch::Tensor& t) {
  return t.to(torch::kDouble).square().sum();
}

}  // namespace

GenericReductions::GenericReductions(const std::vector<torch::Tensor>& params)
    : params_(params), snapshot_(params.size()) {}

void GenericReductions::begin_grads(float /*unscale*/) { taken_grads_.clear(); }

bool GenericReductions::take_grad(size_t layer, const torch::Tensor& /*grad*/) {
  taken_grads_.push_back(layer);
  return true;
}

void GenericReductions::enqueue_grads(float unscale) {
  grad_layers_.swap(taken_grads_);
  const std::vector<size_t>& layers = grad_layers_;
  if (layers.empty()) return;
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
  grad_out_.resize(layers.size());
  gather_rows(rows, [this](size_t k, const double* row) {
    GradStats& s = grad_out_[k];
    s.sumsq = row[0];
    s.absmax = static_cast<float>(row[1]);
    s.nonfinite = static_cast<int64_t>(row[2]);
    s.zeros = static_cast<int64_t>(row[3]);
  });
}

void GenericReductions::collect_grads(LayerSums& out) {
  for (size_t k = 0; k < grad_layers_.size(); ++k) out.grads[grad_layers_[k]] = grad_out_[k];
}

bool GenericReductions::takes_weights(size_t /*layer*/, bool /*for_update*/) const { return true; }

void GenericReductions::enqueue_weights(const std::vector<size_t>& layers, bool for_update) {
  weight_layers_ = layers;
  if (layers.empty()) return;
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> rows;
  rows.reserve(layers.size());
  for (size_t i : layers) {
    const auto& w = params_[i];
    if (for_update) {
      auto& snap = snapshot_[i];
      if (!snap.defined()) snap = torch::empty_like(w);
      snap.copy_(w);
    }
    rows.push_back(sumsq_on_device(w).reshape({1}));
  }
  weight_out_.resize(layers.size());
  gather_rows(rows, [this](size_t k, const double* row) { weight_out_[k] = row[0]; });
}

void GenericReductions::collect_weights(LayerSums& out) {
  for (size_t k = 0; k < weight_layers_.size(); ++k) out.param_sumsq[weight_layers_[k]] = weight_out_[k];
}

void GenericReductions::enqueue_updates(const std::vector<size_t>& layers) {
  update_layers_ = layers;
  if (layers.empty()) return;
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> rows;
  rows.reserve(layers.size());
  for (size_t i : layers) {
    auto& snap = snapshot_[i];
    const auto& w = params_[i];
    if (!snap.defined()) {
      snap = w.detach().clone();
      rows.push_back(torch::stack({torch::zeros({}, w.options().dtype(torch::kDouble)), sumsq_on_device(w)}));
      continue;
    }
    rows.push_back(torch::stack({sumsq_on_device(w.to(torch::kDouble) - snap), sumsq_on_device(w)}));
    snap.copy_(w);
  }
  update_out_.resize(layers.size());
  next_weight_out_.resize(layers.size());
  gather_rows(rows, [this](size_t k, const double* row) {
    update_out_[k] = row[0];
    next_weight_out_[k] = row[1];
  });
}

void GenericReductions::collect_updates(bool /*applied*/, LayerSums& out) {
  // Measured against the copy: a skipped update is the zero it measured.
  for (size_t k = 0; k < update_layers_.size(); ++k) {
    out.update_sumsq[update_layers_[k]] = update_out_[k];
    out.next_param_sumsq[update_layers_[k]] = next_weight_out_[k];
  }
}

}  // namespace keel::probe
