// keel app global charts: the run's scalars over the shared step range.
//
// What it is for: the first place a blow-up shows: loss, global gradient norm (log y) with the
// largest of the model's buffers (BatchNorm's running statistics) beside it, loss scale (log
// y, with skipped updates marked in every chart) and the magnitudes of the first watched
// tensor (logits: absmax and z, the mean logsumexp that z-loss penalises). Where other runs
// share the shown run's rank (the other models of the job: a GAN's generator beside its
// discriminator; or another run opened beside it, yesterday's and today's with the fix), their
// losses and global grad norms are overlaid on its charts, each named by its model (else its
// run id) and with its own skipped updates marked in its colour. Those names are shortened in
// the legend to the part that tells the runs apart (distinct_labels.hpp), whole in its tooltip.
// A sharded job's run (FSDP: each rank measures its shards) has the job's grad norm, its
// ranks' combined (Model::job_grad_norm), beside its own in the grad-norm chart: `job_norm`,
// of `job_ranks` ranks, or null.
// Threads: the UI thread, inside an ImGui window; fills the space it is given.
#pragma once

#include <cstdint>
#include <vector>

#include "model/run_model.hpp"
#include "ui/app_state.hpp"

namespace keel::app::ui {

void draw_global_charts(const RunModel& run, const std::vector<const RunModel*>& others,
                        const SeriesHistory* job_norm, int32_t job_ranks, AppState& state);

}  // namespace keel::app::ui
