// keel app rank overview: a data-parallel job seen across its ranks (DESIGN §5).
//
// What it is for: with one probe per rank, the dashboard must say which rank went non-finite
// first (the replica whose data or hardware poisoned the step), which warned last and show every rank's layers
// side by side, so that one rank's diverging layer stands out. These are queries over the
// Model's current run of each rank, without ImGui, so they are unit-tested like the rest of
// the model.
// Threads: the model's owner thread (the UI thread).
// Never: throws, or allocates beyond `out` growing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "keel/wire/messages.hpp"
#include "model/model.hpp"
#include "model/value_summary.hpp"

namespace keel::app {

struct FirstNonfiniteRank {
  int32_t rank = -1;
  int64_t step = -1;
  std::string layer;   // the first layer to go non-finite on that rank, in backward order
  int64_t stamp_unix_ns = 0;
};

// The rank whose gradients went non-finite first: among the current runs of all ranks, the
// earliest first_nonfinite event by step, then by the probe's wall-clock stamp (ranks step
// together, so at one step the earlier stamp is the one that failed first), then by rank.
std::optional<FirstNonfiniteRank> first_nonfinite_rank(const Model& model);

// The newest warning of any current run (RunModel::newest_warning, compared by sent_after), and
// the run it is of: the dashboard's banner shows it whichever run the panes show, since a
// forecast on another rank is as urgent. Pointers valid until the next ingest.
struct NewestWarning {
  const RunModel* run = nullptr;
  const wire::Event* event = nullptr;
};
std::optional<NewestWarning> newest_warning(const Model& model);

// Rank x layer cells: row r is ranks[r]'s current run, column l its layer l (model order),
// each cell the summary of `metric` over steps [first_step, last_step] as one heatmap column
// holds it (every step covered, non-finite flagged, reaching less than one stored bucket past
// the edges), row-major into `out` (resized to ranks.size() * layer_count). A rank with no run
// or fewer layers has cells without data.
void rank_layer_cells(const Model& model, const std::vector<int32_t>& ranks, wire::LayerMetric metric,
                      int64_t first_step, int64_t last_step, size_t layer_count, std::vector<Summary>& out);

// The job's row under the ranks' (JobLayerValues, a sharded job's per-layer metrics): each
// layer's summary of `metric` over steps [first_step, last_step] as rank_layer_cells summarises
// a rank's, into `out` (resized to layer_count). False, with `out` cleared, when the job's
// layers are not `layer_count` (none stored yet, or another model's).
bool job_layer_cells(const JobLayerValues& job, wire::LayerMetric metric, int64_t first_step, int64_t last_step,
                     size_t layer_count, std::vector<Summary>& out);

}  // namespace keel::app
