#include "model/rank_overview.hpp"

#include <algorithm>
#include <tuple>

#include "model/column_grid.hpp"
#include "model/event_rows.hpp"
#include "model/run_model.hpp"

namespace keel::app {

std::optional<FirstNonfiniteRank> first_nonfinite_rank(const Model& model) {
  std::optional<FirstNonfiniteRank> first;
  for (int32_t rank : model.ranks()) {
    const RunModel* run = model.current_run(rank);
    if (run == nullptr || !run->first_nonfinite()) continue;
    const wire::Event& event = *run->first_nonfinite();
    const auto key = std::make_tuple(event.step, event.stamp_unix_ns, rank);
    if (!first || key < std::make_tuple(first->step, first->stamp_unix_ns, first->rank)) {
      first = FirstNonfiniteRank{rank, event.step, event.layer, event.stamp_unix_ns};
    }
  }
  return first;
}

std::optional<NewestWarning> newest_warning(const Model& model) {
  std::optional<NewestWarning> newest;
  for (const RunModel* run : model.current_runs()) {
    const std::optional<wire::Event>& warning = run->newest_warning();
    if (warning && (!newest || sent_after(*warning, *newest->event))) newest = NewestWarning{run, &*warning};
  }
  return newest;
}

void rank_layer_cells(const Model& model, const std::vector<int32_t>& ranks, wire::LayerMetric metric,
                      int64_t first_step, int64_t last_step, size_t layer_count, std::vector<Summary>& out) {
  out.assign(ranks.size() * layer_count, Summary{});
  if (layer_count == 0) return;
  const ColumnGrid whole_range(first_step, last_step, 1);
  std::vector<Summary> row;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RunModel* run = model.current_run(ranks[r]);
    if (run == nullptr || !run->has_steps()) continue;
    const size_t layers = std::min(layer_count, run->layer_count());
    // One heatmap column over the whole range: per layer, the range's summary.
    run->heatmap(metric, 0, layers, whole_range, row);
    std::copy(row.begin(), row.begin() + static_cast<std::ptrdiff_t>(layers),
              out.begin() + static_cast<std::ptrdiff_t>(r * layer_count));
  }
}

bool job_layer_cells(const JobLayerValues& job, wire::LayerMetric metric, int64_t first_step, int64_t last_step,
                     size_t layer_count, std::vector<Summary>& out) {
  out.clear();
  if (layer_count == 0 || job.layer_count() != layer_count || !JobLayerValues::holds(metric)) return false;
  out.assign(layer_count, Summary{});
  const ColumnGrid whole_range(first_step, last_step, 1);
  for (size_t l = 0; l < layer_count; ++l) job.layer(metric, l).summarize(whole_range, &out[l]);
  return true;
}

}  // namespace keel::app
