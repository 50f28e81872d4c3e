// classify_cause: why an unsafe step was unsafe, in one of seven kinds and one sentence.
//
// What it is for: "the first non-finite gradient in backward order" answers only for a NaN
// born in the backward pass. The user's question is the cause: a forward op (log of 0, a norm
// over a constant row), the loss scale, a poisoned batch, weights already broken, a batch with
// NaN in it, or a fault that does not repeat. This puts what the step showed (its health, the
// loss, the scaler, the spike verdict, the weights' norms before the update) together with
// what the origin tracer found on a re-run, when the closure form gave one (DESIGN §2.1).
// Without a trace it says what can be known (a NaN already in the loss came from the forward
// pass or the batch) and never names the layer nearest the loss as the origin.
// Threads: plain values, the training thread. Never: throws.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "keel/probe/fused_reduce.hpp"
#include "keel/wire/messages.hpp"
#include "origin/origin_tracer.hpp"
#include "step_health.hpp"

namespace keel::probe {

struct StepEvidence {
  int64_t step = 0;
  const StepHealth* health = nullptr;
  double loss = 0;
  bool has_loss = false;
  const std::vector<GradStats>* grads = nullptr;
  const std::vector<std::string>* names = nullptr;
  // The weights' sums of squares before the update; null when not measured this step.
  const std::vector<double>* weight_sumsq = nullptr;
  bool scaler_overflow = false;   // a loss scaler found this step's scaled gradients non-finite
  double scale = 0;               // the scale the gradients were computed with
  bool spike = false;             // the spike detector's verdict (finite norm)
  double spike_z = 0;
  size_t spike_window = 0;
  // The learning rate's latest jump (10x or more from one step to the next) within the last
  // kLrJumpWindow steps, if any.
  struct LrJump {
    int64_t step = 0;
    double from = 0, to = 0;
  };
  std::optional<LrJump> lr_jump;
  // The re-run's trace, when the step was run again (the closure form); `not_traced` says why
  // not otherwise ("" with a trace).
  std::optional<Origin> origin;
  const char* not_traced = "";
};

struct StepCause {
  wire::Cause cause;
  std::string layer;   // the parameter to select in the dashboard; "" when none stands for it
};

// How far back a jump of the learning rate is still the likely cause of a blow-up, and how
// large a jump counts: warm-up and decay move it a few percent a step, a misconfigured
// schedule or a restart by 10x or more. A jump's damage can take long to show: keel-demo's
// learning rate x100000 for one step at step 150 blows up at step 314 (its weights pushed far
// off, every value finite until then), so the window reaches 256 steps back.
constexpr int64_t kLrJumpWindow = 256;
constexpr double kLrJumpFactor = 10.0;

// The latest jump in `lrs` (step, lr) pairs, oldest first, within kLrJumpWindow of `step`.
std::optional<StepEvidence::LrJump> latest_lr_jump(const std::vector<std::pair<int64_t, double>>& lrs, int64_t step);

// The cause of an unsafe step, or nothing for a safe one.
std::optional<StepCause> classify_cause(const StepEvidence& evidence);

}  // namespace keel::probe
