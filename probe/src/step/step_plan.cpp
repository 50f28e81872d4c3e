// What a step measures (step_plan.hpp).
#include "step_plan.hpp"

namespace keel::probe {
namespace {

using wire::LayerMetric;

bool due(const ProbeOptions& options, int64_t step, LayerMetric m) {
  const int32_t every = options.cadence[static_cast<int>(m)];
  return every > 0 && step % every == 0;
}

}  // namespace

bool gradient_pass_due(const ProbeOptions& options, int64_t step, bool has_scaler) {
  for (int m = 0; m < wire::kLayerMetricCount; ++m) {
    if ((wire::kGradientMetrics & (1u << m)) != 0 && due(options, step, static_cast<LayerMetric>(m))) return true;
  }
  return options.skip_on_nonfinite || options.skip_on_spike || options.dump_on_nonfinite || has_scaler;
}

StepPlan plan_step(const ProbeOptions& options, int64_t step, bool has_scaler, const LayerReducer& reducer) {
  StepPlan plan;
  for (int m = 0; m < wire::kLayerMetricCount; ++m) {
    if (due(options, step, static_cast<LayerMetric>(m))) plan.mask |= 1u << m;
  }
  plan.grads_due = gradient_pass_due(options, step, has_scaler);
  // Without a rule to rebuild it, the update of a layer on a device needs a copy of the
  // weights there: only when asked for (snapshot_for_update_ratio).
  const uint32_t update_bit = wire::bit_of(LayerMetric::kUpdateRatio);
  if ((plan.mask & update_bit) && !options.snapshot_for_update_ratio && reducer.needs_device_snapshot()) {
    plan.mask &= ~update_bit;
  }
  plan.update_due = (plan.mask & update_bit) != 0;
  plan.param_due = plan.update_due || (plan.mask & wire::bit_of(LayerMetric::kParamNorm)) != 0;
  return plan;
}

void classify_layers(StepPlan& plan, const PlannedLayers& layers, uint64_t grad_passes_before) {
  // Freezing and unfreezing mid-run is read each step. Unused: no gradient at all (zero_grad
  // sets them to none), or one left from an earlier step that this backward did not add to.
  // This step's gradient pass read each layer's state on its way to the gradient: a second
  // walk to the same bookkeeping, out of cache on a wide model, is made only without one.
  const LayerReducer& reducer = layers.reducer();
  const auto& params = layers.params();
  const bool from_pass = reducer.grad_passes() != grad_passes_before;
  plan.frozen.clear();
  plan.unused.clear();
  for (size_t i = 0; i < params.size(); ++i) {
    LayerReducer::LayerState state;
    if (from_pass) {
      state = reducer.layer_state(i);
    } else {
      // Ask for a later tensor's bookkeeping while this one's is read (LayerReducer does too).
      if (i + 8 < params.size()) __builtin_prefetch(params[i + 8].unsafeGetTensorImpl());
      state = LayerReducer::state_of(params[i]);
    }
    if (state == LayerReducer::LayerState::kFrozen) {
      plan.frozen.push_back(static_cast<uint32_t>(i));
    } else if (state == LayerReducer::LayerState::kWithoutGrad || layers.order().passed_by(i)) {
      plan.unused.push_back(static_cast<uint32_t>(i));
    }
  }
}

}  // namespace keel::probe
