#include "demo_causes.hpp"

#include <cstdio>
#include <limits>
#include <stdexcept>

namespace keel::demo {
namespace {

constexpr const char* kCauses = "attention, norm, fp16, batch, lr or input";

torch::Tensor parameter(CharTransformer& model, const std::string& name) {
  for (const auto& p : model->named_parameters()) {
    if (p.key() == name) return p.value();
  }
  throw std::invalid_argument("keel-demo has no parameter " + name);
}

// The block a cause blows up: the second, or the only one.
int64_t cause_block(CharTransformer& model) {
  int64_t blocks = 0;
  for (const auto& p : model->named_parameters()) {
    if (p.key().rfind("blocks.", 0) == 0 && p.key().find(".attn.qkv.weight") != std::string::npos) ++blocks;
  }
  return blocks > 1 ? 1 : 0;
}

}  // namespace

DemoCause parse_cause(const std::string& text) {
  const auto colon = text.find(':');
  const std::string expected = "expected KIND:STEP with KIND one of " + std::string(kCauses) + ", got '" + text + "'";
  if (colon == std::string::npos) throw std::invalid_argument(expected);
  const std::string kind = text.substr(0, colon);
  DemoCause cause{CauseKind::kAttention, 0};
  if (kind == "attention") cause.kind = CauseKind::kAttention;
  else if (kind == "norm") cause.kind = CauseKind::kNorm;
  else if (kind == "fp16") cause.kind = CauseKind::kFp16;
  else if (kind == "batch") cause.kind = CauseKind::kBatch;
  else if (kind == "lr") cause.kind = CauseKind::kLearningRate;
  else if (kind == "input") cause.kind = CauseKind::kInput;
  else throw std::invalid_argument(expected);
  try {
    size_t used = 0;
    const std::string step = text.substr(colon + 1);
    cause.step = std::stoll(step, &used);
    if (used != step.size() || cause.step < 0) throw std::invalid_argument("step");
  } catch (const std::logic_error&) {
    throw std::invalid_argument(expected);
  }
  return cause;
}

void prepare_cause(const DemoCause& cause, TrainerConfig& config, Faults& faults, bool& use_scaler) {
  switch (cause.kind) {
    case CauseKind::kNorm: config.model.q_norm_eps = 0.0; break;
    case CauseKind::kFp16: use_scaler = true; break;
    case CauseKind::kLearningRate:
      faults.lr_jump_step = cause.step;
      faults.lr_jump_factor = 1000.0;
      break;
    default: break;
  }
}

void CauseInjector::before_step(int64_t step, CharTransformer& model) {
  const bool attention = due(CauseKind::kAttention, step), norm = due(CauseKind::kNorm, step);
  if (!attention && !norm) return;
  torch::NoGradGuard no_grad;
  const int64_t block = norm ? 0 : cause_block(model);
  const std::string name = "blocks." + std::to_string(block) + ".attn.qkv";
  blown_ = parameter(model, name + ".weight");
  blown_bias_ = parameter(model, name + ".bias");
  original_ = blown_.detach().clone();
  original_bias_ = blown_bias_.detach().clone();
  const int64_t width = blown_.size(1);
  if (attention) {
    // Queries and keys 1e21 times too large: their products overflow float32.
    blown_.narrow(0, 0, 2 * width).mul_(1e21);
    std::printf("keel-demo: step %lld causing attention: %s's query and key weights blown up 1e21x\n",
                static_cast<long long>(step), name.c_str());
  } else {
    // Head 0's queries all zero: a row the QK-norm (eps 0) divides by its zero spread.
    const int64_t rows = parameter(model, "blocks.0.attn.q_norm.weight").size(0);
    blown_.narrow(0, 0, rows).zero_();
    blown_bias_.narrow(0, 0, rows).zero_();
    std::printf("keel-demo: step %lld causing norm: %s's head-0 queries zeroed, under a QK-norm with eps 0\n",
                static_cast<long long>(step), name.c_str());
  }
  std::fflush(stdout);
}

void CauseInjector::poison(int64_t step, Batch& batch) const {
  if (due(CauseKind::kBatch, step)) {
    batch.weights[0] = 1e25;
    std::printf("keel-demo: step %lld causing batch: sequence 0's loss weight is 1e25\n", static_cast<long long>(step));
  } else if (due(CauseKind::kInput, step)) {
    batch.weights[0] = std::numeric_limits<float>::quiet_NaN();
    std::printf("keel-demo: step %lld causing input: sequence 0's loss weight is NaN\n", static_cast<long long>(step));
  } else {
    return;
  }
  std::fflush(stdout);
}

torch::Tensor CauseInjector::scaled(int64_t step, const torch::Tensor& loss, keel::probe::GradScaler* scaler) const {
  if (scaler == nullptr) return loss;
  // In float16 the scale itself, 65,536, is past the largest value (65,504).
  return scaler->scale(due(CauseKind::kFp16, step) ? loss.to(torch::kHalf) : loss);
}

void CauseInjector::after_step() {
  if (!blown_.defined()) return;
  torch::NoGradGuard no_grad;
  blown_.copy_(original_);
  blown_bias_.copy_(original_bias_);
  blown_ = blown_bias_ = original_ = original_bias_ = torch::Tensor();
}

}  // namespace keel::demo
