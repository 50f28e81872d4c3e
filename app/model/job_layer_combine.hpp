// combine_job_layers: a sharded job's per-layer values at one step, from its ranks' shards.
//
// What it is for: JobLayerValues' input, for the metrics it holds. Each rank measured its own
// part of every layer, so the whole layer's value is exactly:
//   grad_norm:              sqrt(sum over ranks of the shard's value^2);
//   grad_absmax:            the largest shard's (NaN if any shard's is NaN);
//   grad_zero_frac:         the shards' fractions weighted by their element counts (each
//                           rank's description gives its own);
//   update_ratio:           |dW| / |W| of the whole layer, |dW_r| being the shard's ratio times
//                           its param_norm at that step: sqrt(sum (ratio_r * norm_r)^2) /
//                           sqrt(sum norm_r^2), 0 where the weights' norm is 0 (as the probe
//                           sends a layer's). A shard whose weights' norm is 0 has its |dW| on
//                           no wire and adds nothing, but a non-finite ratio of any shard makes
//                           the layer's non-finite.
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
