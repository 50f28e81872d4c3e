// Trainer: keel-demo's training set-up (model, AdamW, warmup schedule, data, fault injection),
// shared by the keel-demo program and the probe benchmark so both measure the same step.
// Threads: the training thread. Never: calls the probe (the caller instruments the loop).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <torch/torch.h>

#include "char_transformer.hpp"
#include "text_corpus.hpp"

namespace keel::demo {

struct TrainerConfig {
  std::string data_path = kDefaultTextPath;
  ModelConfig model;
  int64_t batch = 8;
  double lr = 3e-3;
  double weight_decay = 0.01;
  int64_t warmup_steps = 100;
  uint64_t seed = 1;
  bool bf16 = false;      // autocast to bfloat16 on the device (weights and gradients stay float32)
  torch::Device device = torch::kCPU;
  // Token ids the model has room for; 0 = the corpus's alphabet. GPT-2's 50,257 gives the
  // GPT-2-small shape its embedding and head (the text still uses the first ~100 ids).
  int64_t vocab = 0;
  // AdamW (the default), or RMSprop: an optimizer without ATen's fused kernel, whose update
  // keel cannot rebuild (keel-bench-gpu measures what the probe costs it).
  bool rmsprop = false;
};

// The GPT-2-small shape (163M parameters): 12 blocks of width 768 with 12 heads, 1,024
// tokens of context, GPT-2's vocabulary.
ModelConfig gpt2_small_shape();
constexpr int64_t kGpt2Vocab = 50257;

// One step's data: token ids, next-token targets, and a loss weight per sequence (ones; a
// data pipeline's importance or quality weights, which keel-demo's --cause can poison).
struct Batch {
  torch::Tensor inputs, targets, weights;
};

// Fault injection, each at one step.
struct Faults {
  std::optional<int64_t> nan_step;      // a NaN in nan_layer's gradient
  std::string nan_layer;
  std::optional<int64_t> spike_step;    // every gradient multiplied by spike_factor
  double spike_factor = 1.0;
  std::optional<int64_t> lr_spike_step; // learning rate multiplied by lr_spike_factor
  double lr_spike_factor = 1.0;
  std::optional<int64_t> lr_jump_step;  // from this step on, the learning rate multiplied by lr_jump_factor
  double lr_jump_factor = 1.0;
  // Slow divergences (--drift), each from its step on: the learning rate times lr_drift_rate
  // a step (a schedule gone wrong), and one sequence of each batch weighted batch_drift_rate
  // times more a step (a data pipeline's weights gone wrong).
  std::optional<int64_t> lr_drift_step;
  double lr_drift_rate = 1.02;
  std::optional<int64_t> batch_drift_step;
  double batch_drift_rate = 1.05;

  // The faults a step that is taken again (after a rewind) still meets: those of a range of
  // steps (lr_jump), not those of one moment (a NaN, a spike, an lr spike), which happened once.
  Faults replayed() const {
    Faults again;
    again.lr_jump_step = lr_jump_step;
    again.lr_jump_factor = lr_jump_factor;
    again.lr_drift_step = lr_drift_step;
    again.lr_drift_rate = lr_drift_rate;
    again.batch_drift_step = batch_drift_step;
    again.batch_drift_rate = batch_drift_rate;
    return again;
  }
};

class Trainer {
 public:
  explicit Trainer(const TrainerConfig& config);

  CharTransformer& model() { return model_; }
  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  const TextCorpus& corpus() const { return corpus_; }

  // Sets this step's learning rate (linear warmup, then constant; lr spike if due).
  void schedule(int64_t step, const Faults& faults);
  // A rewind's learning-rate cut, kept by every later schedule() (which would otherwise set
  // the rate from the configured one again).
  void scale_lr(double factor) {
    config_.lr *= factor;
    scheduled_lr_ *= factor;
  }
  // A cut keel made to the learning rate during the step without telling (a warning's,
  // ProbeOptions::warning_lr_factor), read back from the optimizer and kept as scale_lr keeps
  // a rewind's: what any schedule that sets the rate each step must do.
  void keep_lr_cut();
  // The next batch, on the training device.
  Batch next_batch();
  // The batch drift due at `step`: the batch's first sequence weighted more.
  static void drift(int64_t step, const Faults& faults, Batch& batch);
  // zero_grad, forward of `batch` (logits handed to on_logits, e.g. probe.watch), loss (each
  // sequence's mean cross-entropy times its weight, averaged), backward of scale(loss).
  // Returns the unscaled loss. Run twice on one batch, it computes the same step (the closure
  // form runs an unsafe step again).
  torch::Tensor forward_backward(const Batch& batch, const std::function<void(const torch::Tensor&)>& on_logits,
                                 const std::function<torch::Tensor(const torch::Tensor&)>& scale);
  // The same on the next batch.
  torch::Tensor forward_backward(const std::function<void(const torch::Tensor&)>& on_logits,
                                 const std::function<torch::Tensor(const torch::Tensor&)>& scale) {
    return forward_backward(next_batch(), on_logits, scale);
  }
  // Applies the gradient faults due at `step`; throws std::invalid_argument for an unknown layer.
  void inject(int64_t step, const Faults& faults);

 private:
  TrainerConfig config_;
  TextCorpus corpus_;
  CharTransformer model_{nullptr};
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  torch::Generator rng_;
  double scheduled_lr_ = 0;   // the learning rate schedule() set (0: none yet)
};

}  // namespace keel::demo
