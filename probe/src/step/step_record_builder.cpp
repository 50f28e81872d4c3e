// The record stage's message (step_record_builder.hpp).
#include "step_record_builder.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "keel/wire/vocabulary.hpp"

namespace keel::probe {
namespace {

using wire::LayerMetric;

// One layer's value of one metric, from the step's reductions.
double layer_value(const LayerReducer& reducer, LayerMetric metric, size_t i, bool applied) {
  const GradStats& grad = reducer.grad_stats()[i];
  switch (metric) {
    case LayerMetric::kGradNorm: return std::sqrt(grad.sumsq);
    case LayerMetric::kGradAbsmax: return grad.absmax;
    case LayerMetric::kGradNonfinite: return static_cast<double>(grad.nonfinite);
    case LayerMetric::kGradZeroFrac: {
      const double numel = static_cast<double>(reducer.numel(i));
      return numel > 0 ? static_cast<double>(grad.zeros) / numel : 0.0;
    }
    case LayerMetric::kParamNorm: return std::sqrt(reducer.param_sumsq()[i]);
    case LayerMetric::kUpdateRatio: {
      const double w = std::sqrt(reducer.param_sumsq()[i]);
      // Undefined for all-zero weights (fresh biases); reported as 0 rather than a
      // non-finite value that would read as an instability.
      return (applied && w > 0) ? std::sqrt(reducer.update_sumsq()[i]) / w : 0.0;
    }
  }
  return 0.0;
}

}  // namespace

StepRecordBuilder::StepRecordBuilder(int32_t rank, std::string run, std::string model) {
  record_.rank = rank;
  record_.run = std::move(run);
  record_.model = std::move(model);
}

void StepRecordBuilder::fill_values(uint32_t mask, bool applied, bool per_layer, bool grads_reduced,
                                    const LayerReducer& reducer, const std::vector<wire::ModuleRange>& modules) {
  double total_sumsq = 0;
  for (const auto& s : reducer.grad_stats()) total_sumsq += s.sumsq;
  record_.grad_norm = grads_reduced ? std::sqrt(total_sumsq) : std::numeric_limits<double>::quiet_NaN();
  if (per_layer) {
    fill_layer_values(mask, applied, reducer);
  } else {
    fill_module_values(mask, applied, reducer, modules);
  }
}

void StepRecordBuilder::fill_layer_values(uint32_t mask, bool applied, const LayerReducer& reducer) {
  const size_t n = reducer.grad_stats().size();
  record_.metric_mask = mask;
  record_.layer_values.resize(static_cast<size_t>(__builtin_popcount(mask)) * n);
  record_.module_mask = 0;
  record_.module_count = 0;
  record_.module_values.clear();
  float* out = record_.layer_values.data();
  for (int m = 0; m < wire::kLayerMetricCount; ++m) {
    if (!((mask >> m) & 1u)) continue;
    for (size_t i = 0; i < n; ++i) *out++ = static_cast<float>(layer_value(reducer, static_cast<LayerMetric>(m), i, applied));
  }
}

void StepRecordBuilder::fill_module_values(uint32_t mask, bool applied, const LayerReducer& reducer,
                                           const std::vector<wire::ModuleRange>& modules) {
  record_.metric_mask = 0;
  record_.layer_values.clear();
  record_.module_mask = mask;
  record_.module_count = static_cast<uint32_t>(modules.size());
  record_.module_values.resize(static_cast<size_t>(__builtin_popcount(mask)) * modules.size());
  float* out = record_.module_values.data();
  for (int m = 0; m < wire::kLayerMetricCount; ++m) {
    if (!((mask >> m) & 1u)) continue;
    const auto metric = static_cast<LayerMetric>(m);
    // Its worst layer's value, or a count's sum (wire::ModuleRollup, PROTOCOL §3.3).
    const wire::ModuleRollup rollup = wire::info_of(metric).modules;
    for (const wire::ModuleRange& module : modules) {
      double rolled = 0;
      for (uint32_t i = module.first; i < module.first + module.count; ++i) {
        const double v = layer_value(reducer, metric, i, applied);
        switch (rollup) {
          case wire::ModuleRollup::kSum: rolled += v; break;
          case wire::ModuleRollup::kWorst:
            rolled = std::isnan(v) || std::isnan(rolled) ? std::numeric_limits<double>::quiet_NaN() : std::max(rolled, v);
            break;
        }
      }
      *out++ = static_cast<float>(rolled);
    }
  }
}

void StepRecordBuilder::tell_watch_nonfinite(StepEvents& events, int64_t step) {
  bool watch_nonfinite = false;
  for (const auto& w : record_.watches) {
    if (w.nonfinite == 0) continue;
    if (!watch_nonfinite && !watch_nonfinite_last_step_) {
      events.add(step, wire::event_kind::kFirstNonfiniteWatch, w.name,
                 std::to_string(w.nonfinite) + " non-finite values in watched tensor " + w.name);
    }
    watch_nonfinite = true;
  }
  watch_nonfinite_last_step_ = watch_nonfinite;
}

}  // namespace keel::probe
