#include "model/job_layer_combine.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace keel::app {
namespace {

using wire::LayerMetric;

// Whether every rank holds `metric` at `step`. A record carries a metric for all its layers
// or none, so the first layer answers for the rest.
bool every_rank_sent(const std::vector<const RunModel*>& runs, LayerMetric metric, int64_t step) {
  for (const RunModel* run : runs) {
    float value = 0;
    if (!run->layer_series(0, metric).value_at(step, &value)) return false;
  }
  return true;
}

float value_of(const RunModel& run, size_t layer, LayerMetric metric, int64_t step) {
  // At the run's newest step (the live combine) the value is in its latest values, arrays read
  // in layer order; a series lookup per layer, rank and metric is a cache miss or two each,
  // 11 ms a step at 50,000 layers and two ranks (keel-bench-app --sharded-ranks 2). Older steps
  // (a job recombined from its recordings) come from the series.
  if (run.latest_step(layer, metric) == step) return run.latest(layer, metric);
  float value = std::numeric_limits<float>::quiet_NaN();
  run.layer_series(layer, metric).value_at(step, &value);
  return value;
}

// The element count of `layer` on one rank: 0 where the rank holds none of it.
double numel_of(const RunModel& run, size_t layer) {
  const auto& layers = run.description().layers;
  return layer < layers.size() ? static_cast<double>(layers[layer].numel) : 0.0;
}

float combine(const std::vector<const RunModel*>& runs, size_t layer, LayerMetric metric, int64_t step) {
  switch (wire::info_of(metric).shards) {
    case wire::ShardCombine::kRootSumSquares: {
      double sumsq = 0;
      for (const RunModel* run : runs) {
        const double v = value_of(*run, layer, metric, step);
        sumsq += v * v;
      }
      return static_cast<float>(std::sqrt(sumsq));   // NaN and Inf carry through
    }
    case wire::ShardCombine::kMax: {
      float largest = 0;
      for (const RunModel* run : runs) {
        const float v = value_of(*run, layer, metric, step);
        if (std::isnan(v)) return v;
        largest = std::max(largest, v);
      }
      return largest;
    }
    case wire::ShardCombine::kSum: {
      double sum = 0;
      for (const RunModel* run : runs) sum += value_of(*run, layer, metric, step);
      return static_cast<float>(sum);
    }
    case wire::ShardCombine::kMeanByNumel: {
      double weighted = 0, elements = 0;
      for (const RunModel* run : runs) {
        const double numel = numel_of(*run, layer);
        if (numel <= 0) continue;
        weighted += value_of(*run, layer, metric, step) * numel;
        elements += numel;
      }
      return elements > 0 ? static_cast<float>(weighted / elements) : 0.0f;
    }
    case wire::ShardCombine::kUpdateOverWeights: {
      // |dW| / |W| of the whole layer, |dW_r| being the shard's ratio times its param_norm: 0
      // where the weights' norm is 0 (as the probe sends a layer's). A shard whose weights'
      // norm is 0 has its |dW| on no wire and adds nothing, but a non-finite ratio of any shard
      // makes the layer's non-finite.
      double update_sumsq = 0, weight_sumsq = 0;
      for (const RunModel* run : runs) {
        const double ratio = value_of(*run, layer, metric, step);
        if (!std::isfinite(ratio)) return static_cast<float>(ratio);
        const double norm = value_of(*run, layer, LayerMetric::kParamNorm, step);
        update_sumsq += (ratio * norm) * (ratio * norm);
        weight_sumsq += norm * norm;
      }
      if (!std::isfinite(weight_sumsq) || !std::isfinite(update_sumsq)) return std::numeric_limits<float>::quiet_NaN();
      return weight_sumsq > 0 ? static_cast<float>(std::sqrt(update_sumsq / weight_sumsq)) : 0.0f;
    }
  }
  return std::numeric_limits<float>::quiet_NaN();
}

}  // namespace

bool combine_job_layers(const std::vector<const RunModel*>& runs, int64_t step, JobLayerStep& out) {
  out.mask = 0;
  if (runs.empty()) return false;
  const RunModel& first = *runs.front();
  const size_t layers = first.layer_count();
  if (layers == 0) return false;
  for (const RunModel* run : runs) {
    // The same model on every rank: its first and last layers' names stand for the rest (all of
    // them would be a string comparison per layer at every step).
    if (run->layer_count() != layers || run->layer_name(0) != first.layer_name(0) ||
        run->layer_name(layers - 1) != first.layer_name(layers - 1)) {
      return false;
    }
  }
  for (size_t m = 0; m < static_cast<size_t>(wire::kLayerMetricCount); ++m) {
    const auto metric = static_cast<LayerMetric>(m);
    if (!JobLayerValues::holds(metric) || !every_rank_sent(runs, metric, step)) continue;
    if (wire::info_of(metric).shards == wire::ShardCombine::kUpdateOverWeights &&
        !every_rank_sent(runs, LayerMetric::kParamNorm, step)) {
      continue;
    }
    out.mask |= wire::bit_of(metric);
    std::vector<float>& values = out.values[m];
    values.resize(layers);
    for (size_t l = 0; l < layers; ++l) values[l] = combine(runs, l, metric, step);
  }
  return out.mask != 0;
}

}  // namespace keel::app
