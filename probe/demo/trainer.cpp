#include "trainer.hpp"

#include <ATen/autocast_mode.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "keel/probe/torch_compat.hpp"

namespace keel::demo {

namespace {
ModelConfig with_vocab(ModelConfig config, int64_t vocab) {
  config.vocab = vocab;
  return config;
}
}  // namespace

ModelConfig gpt2_small_shape() {
  ModelConfig config;
  config.vocab = kGpt2Vocab;
  config.context = 1024;
  config.width = 768;
  config.heads = 12;
  config.layers = 12;
  return config;
}

Trainer::Trainer(const TrainerConfig& config)
    : config_(config), corpus_(config.data_path, config.model.context) {
  torch::manual_seed(config.seed);
  rng_ = at::detail::createCPUGenerator(config.seed);
  model_ = CharTransformer(with_vocab(config.model, std::max(config.vocab, corpus_.vocab_size())));
  model_->to(config.device);
  if (config.rmsprop) {
    optimizer_ = std::make_unique<torch::optim::RMSprop>(
        model_->parameters(), torch::optim::RMSpropOptions(config.lr).weight_decay(config.weight_decay));
  } else {
    optimizer_ = std::make_unique<torch::optim::AdamW>(
        model_->parameters(), torch::optim::AdamWOptions(config.lr).weight_decay(config.weight_decay));
  }
}

void Trainer::schedule(int64_t step, const Faults& faults) {
  double lr = config_.lr;
  if (config_.warmup_steps > 0 && step < config_.warmup_steps) {
    lr *= static_cast<double>(step + 1) / static_cast<double>(config_.warmup_steps);
  }
  if (faults.lr_spike_step && *faults.lr_spike_step == step) lr *= faults.lr_spike_factor;
  if (faults.lr_jump_step && step >= *faults.lr_jump_step) lr *= faults.lr_jump_factor;
  if (faults.lr_drift_step && step > *faults.lr_drift_step) {
    lr *= std::pow(faults.lr_drift_rate, static_cast<double>(step - *faults.lr_drift_step));
  }
  for (auto& group : optimizer_->param_groups()) group.options().set_lr(lr);
  scheduled_lr_ = lr;
}

void Trainer::keep_lr_cut() {
  const double now = optimizer_->param_groups().front().options().get_lr();
  if (scheduled_lr_ > 0 && now != scheduled_lr_) scale_lr(now / scheduled_lr_);
}

void Trainer::drift(int64_t step, const Faults& faults, Batch& batch) {
  if (!faults.batch_drift_step || step <= *faults.batch_drift_step) return;
  const double weight = std::pow(faults.batch_drift_rate, static_cast<double>(step - *faults.batch_drift_step));
  batch.weights.index_put_({0}, weight);
}

Batch Trainer::next_batch() {
  auto [inputs, targets] = corpus_.batch(config_.batch, rng_);
  Batch batch{inputs, targets, torch::ones({inputs.size(0)})};
  if (!config_.device.is_cpu()) {
    // Through pinned memory, so the copy does not wait for the device.
    batch.inputs = batch.inputs.pin_memory().to(config_.device, /*non_blocking=*/true);
    batch.targets = batch.targets.pin_memory().to(config_.device, /*non_blocking=*/true);
    batch.weights = batch.weights.to(config_.device);
  }
  return batch;
}

torch::Tensor Trainer::forward_backward(const Batch& batch, const std::function<void(const torch::Tensor&)>& on_logits,
                                        const std::function<torch::Tensor(const torch::Tensor&)>& scale) {
  optimizer_->zero_grad();
  if (config_.bf16) {
    keel::probe::compat::set_autocast(config_.device.type(), true, at::kBFloat16);
  }
  auto logits = model_->forward(batch.inputs);
  if (config_.bf16) {
    keel::probe::compat::set_autocast(config_.device.type(), false);
    at::autocast::clear_cache();
    logits = logits.to(torch::kFloat);
  }
  if (on_logits) on_logits(logits);
  namespace F = torch::nn::functional;
  const auto per_token = F::cross_entropy(logits.reshape({-1, logits.size(-1)}), batch.targets.reshape({-1}),
                                          F::CrossEntropyFuncOptions().reduction(torch::kNone));
  auto loss = (per_token.view({batch.inputs.size(0), -1}).mean(-1) * batch.weights).mean();
  (scale ? scale(loss) : loss).backward();
  return loss.detach();
}

void Trainer::inject(int64_t step, const Faults& faults) {
  torch::NoGradGuard no_grad;
  if (faults.nan_step && *faults.nan_step == step) {
    bool found = false;
    for (auto& p : model_->named_parameters()) {
      if (p.key() != faults.nan_layer) continue;
      found = true;
      if (p.value().grad().defined()) p.value().mutable_grad().view({-1})[0] = std::numeric_limits<float>::quiet_NaN();
    }
    if (!found) throw std::invalid_argument("no parameter named '" + faults.nan_layer + "' (see --list-layers)");
  }
  if (faults.spike_step && *faults.spike_step == step) {
    for (auto& p : model_->parameters()) {
      if (p.grad().defined()) p.mutable_grad().mul_(faults.spike_factor);
    }
  }
}

}  // namespace keel::demo
