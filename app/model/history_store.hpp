// keel app model: the dashboard's history store. Include this one header to use the model.
//
// What it is for: everything the views draw, in plain C++ (no ImGui, no sockets), unit-tested
// without a window. The layers, bottom up:
//   value_summary.hpp  Summary: exact min/max of the finite samples + NaN/+Inf/-Inf flags.
//   column_grid.hpp    ColumnGrid: a step range cut into pixel columns (one per frame per view).
//   series_history.hpp SeriesHistory: one scalar series; recent steps at full resolution plus a
//                      bounded min/max pyramid of all history; per-column queries in O(pixels).
//                      Its header states the exactness guarantee and the memory bound.
//   run_model.hpp      RunModel: one (run_id, model, rank): layer x metric series, global scalars,
//                      watches, latest values, events (newest first), stream counters, heatmap.
//   model.hpp          Model: all runs, keyed by (run_id, model, rank); ingest(wire::Message).
//   model_config.hpp   ModelConfig: the memory budget.
//
// Threading scheme (the whole model): single owner, the UI thread. No locks inside.
//   receiver thread (net/receiver.hpp): receives and decodes, pushes each wire::Message into
//                    a bounded queue; never touches the Model.
//   UI thread, each frame: Receiver::drain() the queue, Model::ingest() each message, then
//                    build the views by querying the model (bytes that did not decode are
//                    counted per endpoint by the Receiver, not here). No lock is held
//                    while drawing, and a query never sees a half-ingested record.
//   Cost on the UI thread: ingest stores ~20 million layer samples per second once the
//   series are allocated (a 1,000-layer record with 6 metrics: ~0.3 ms), so a frame's
//   backlog is cheap; queries cost O(pixels), not O(steps) (series_history.hpp).
// Drawing a plot:
//   ColumnGrid grid(first_step, last_step, width_px);
//   run.layer_series(layer, wire::LayerMetric::kGradNorm).columns(grid, columns);
//   for each column: a vertical segment from value.min to value.max at x = column index;
//   value.has_nan()/has_posinf()/has_neginf(): a marker of its own (never dropped).
// Drawing the heatmap: run.heatmap(metric, first_layer, rows, grid, cells) once per frame.
// Never: throws for any message content, blocks, or grows without bound.
#pragma once

#include "model/column_grid.hpp"
#include "model/model.hpp"
#include "model/model_config.hpp"
#include "model/run_model.hpp"
#include "model/series_history.hpp"
#include "model/value_summary.hpp"
