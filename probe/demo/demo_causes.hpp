// keel-demo's --cause KIND:STEP: six ways a real run blows up, each made through the real
// math of training rather than by writing a NaN into a gradient (--inject-nan does that, and
// no real run does), so that keel's cause of each (DESIGN §2.1) can be seen and tested:
//   attention  a query/key weight blown up: attention logits overflow float32 (forward)
//   norm       QK-norm with eps 0 over a query of zeros: 0/0 (forward)
//   fp16       the loss scaled in float16 by 65,536: the scaled gradients overflow (loss scale)
//   batch      one sequence's loss weight 1e25: huge, finite gradients (batch)
//   lr         the learning rate 1000x from the step on: the run diverges (learning rate)
//   input      a NaN in the batch's loss weights (input)
// The weights a cause blows up are put back after its step: the cause lasts one step, the
// run goes on. Threads: the training thread.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "keel/probe/grad_scaler.hpp"
#include "trainer.hpp"

namespace keel::demo {

enum class CauseKind { kAttention, kNorm, kFp16, kBatch, kLearningRate, kInput };

struct DemoCause {
  CauseKind kind;
  int64_t step = 0;
};

// "attention:40" -> the cause; throws std::invalid_argument saying what is expected.
DemoCause parse_cause(const std::string& text);

// What a cause needs before the model and probe are built: the QK-norm with eps 0 (norm), a
// loss scaler (fp16), the learning rate's jump (lr).
void prepare_cause(const DemoCause& cause, TrainerConfig& config, Faults& faults, bool& use_scaler);

class CauseInjector {
 public:
  explicit CauseInjector(std::optional<DemoCause> cause) : cause_(cause) {}

  // Before the step's closure: the weights blown up (attention, norm) at the cause's step.
  // Says on stdout what it did.
  void before_step(int64_t step, CharTransformer& model);
  // The batch poisoned (batch, input) at the cause's step.
  void poison(int64_t step, Batch& batch) const;
  // The loss as the backward pass takes it: scaled by `scaler` when there is one, in float16
  // at the fp16 cause's step.
  torch::Tensor scaled(int64_t step, const torch::Tensor& loss, keel::probe::GradScaler* scaler) const;
  // After the probe's step: the blown-up weights put back.
  void after_step();

 private:
  bool due(CauseKind kind, int64_t step) const { return cause_ && cause_->kind == kind && cause_->step == step; }
  std::optional<DemoCause> cause_;
  torch::Tensor blown_, blown_bias_;         // the attention's qkv weight and bias blown up this step
  torch::Tensor original_, original_bias_;   // their values before
};

}  // namespace keel::demo
