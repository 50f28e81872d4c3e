// combine_job_layers: a sharded job's per-layer values at one step, from its ranks' shards.
//
// What it is for: JobLayerValues' input, for the metrics it holds. Each rank measured its own
// part of every layer, so the whole layer's value is exactly what the metric's
// wire::ShardCombine says (layer_metrics.hpp): the root of the shards' summed squares for a
// norm, the largest for absmax, the element-weighted mean for a fraction (each rank's
// description gives its own element counts), and so on.
// A metric is combined at a step only where every rank sent it (cadences, rollups); the
// update ratio also needs every rank's param_norm of that step.
// Threads: the model's owner thread. Never: throws.
#pragma once

#include <cstdint>
#include <vector>

#include "model/job_layer_values.hpp"
#include "model/run_model.hpp"

namespace keel::app {

// False, with `out.mask` 0, when `runs` (one per rank, in rank order) have not the same layers
// (their count, and the first and last layers' names), or no metric every rank sent at `step`.
bool combine_job_layers(const std::vector<const RunModel*>& runs, int64_t step, JobLayerStep& out);

}  // namespace keel::app
