// RunModel: everything the dashboard knows about one run on one rank.
//
// What it is for: the per-(run_id, model, rank) state behind every pane (wire::RunKey). It turns
// step records into series (one SeriesHistory per layer and LayerMetric, per global scalar,
// per watch metric), keeps the latest value of every layer metric (the layer list), the newest
// events (the events pane) and the stream's health counters (the status bar). All series of a
// run share one origin (the run's first stored step), so their buckets line up across a
// heatmap's rows.
// Records are stored in increasing step order only: a record whose step is not after the
// newest stored one (a duplicate, a `history` replay, a late record) is counted, not stored.
// One exception: a rewind (docs/rewind.md). After a `rewind` event arrives in order (its seq
// after the last one), the first in-order record whose step goes back to S, at or before the
// newest stored one, starts the continuation: every series forgets its steps from S on
// (SeriesHistory::drop_after()) and the steps S to the newest become an abandoned span
// (abandoned_spans(), greyed in the views), then the record is stored. A replay (lower seq)
// never does this; a rewind to before the run's first stored step is counted as duplicates.
// Layers: the run description names them; a record that arrives before any description (a
// client attached mid-run) still stores its layers, named "layer <i>" until described (a
// record with more layers than known adds layers; one with fewer leaves the rest missing).
// Once a description has declared layers, a record with another layer_count is refused and
// counted (refused_records): its values are by index into some other layout (another model's,
// or a plan the description no longer holds), and stored they would be drawn under this run's
// names. A later description with other layers re-lays them out by name (describe()).
// Module rollups: a wide model's probe sends per-layer values only every few steps and, on the
// steps between, each of the description's modules' worst layer (StepRecord::module_values):
// those steps add to the module series (see the modules section) and leave the layer series a
// gap, as a metric's cadence does.
// Threads: not thread-safe; only the model's owner thread (the UI thread) calls it.
// References it returns (series, names, events) are valid until the next call that ingests.
// Never: throws for any message content, or blocks. Memory is bounded: the layer series (with
// the module series of a model that keeps them) fit the run's share of the budget
// (ModelConfig::budget_share(), at the smallest series beyond it), the others take SeriesHistory::max_bytes(config) each, events at most max_event_bytes,
// abandoned spans at most ModelConfig::abandoned_share() (abandoned_span.hpp), plus the names.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "keel/wire/messages.hpp"
#include "model/abandoned_span.hpp"
#include "model/column_grid.hpp"
#include "model/model_config.hpp"
#include "model/module_tree.hpp"
#include "keel/wire/run_key.hpp"
#include "model/series_history.hpp"
#include "model/value_summary.hpp"

namespace keel::app {

// Scalars of a step record, one series each, stored as float32 like every series (a value
// beyond float range reads as +-Inf, flagged rather than hidden). kSkipped is 1 on a skipped
// step, else 0; kLossScale is stored only on steps whose record carries a scaler state.
enum class GlobalSeries : uint8_t {
  kLoss = 0,
  kLr,
  kGradNorm,
  kStepTimeUs,
  kProbeUs,
  kLossScale,
  kSkipped,
  // The largest max |b| of the model's floating-point buffers (RunDescription::buffers): NaN
  // when one holds a NaN, +Inf when one holds an Inf. No sample when none were measured.
  kBufferAbsmax,
};
inline constexpr int kGlobalSeriesCount = 8;

// Per watched tensor (wire::WatchStats).
enum class WatchMetric : uint8_t { kAbsmax = 0, kRms, kZ, kNonfinite };
inline constexpr int kWatchMetricCount = 4;

// Whether a step measured a layer's gradient, and if not, why: its gradient metrics then have
// no sample for that step (a zero would read as underflow).
enum class GradientState : uint8_t { kMeasured = 0, kFrozen, kUnused };
// "frozen", "unused"; "" for kMeasured.
const char* gradient_state_name(GradientState state);
// The state with its reason, as a tooltip says it ("frozen: requires_grad is off, ..."); "" for
// kMeasured.
const char* gradient_state_reason(GradientState state);
// A layer without a gradient has no sample of a gradient metric (wire::is_gradient_metric,
// layer_metrics.hpp); its weight metrics it still has.
using wire::is_gradient_metric;

// Health of one run's stream. Sequence numbers are per publisher (PROTOCOL §5); only the
// telemetry topics (run, step, event) are counted, acks come from another socket's counter.
struct RunCounters {
  uint64_t messages = 0;        // run descriptions, step records and events received
  uint64_t steps_stored = 0;    // step records stored
  uint64_t seq_gaps = 0;        // times seq jumped forward by more than one
  uint64_t seq_missing = 0;     // messages those jumps skipped (lost in transit or dropped)
  uint64_t seq_rewinds = 0;     // messages whose seq was not after the last one (replays)
  uint64_t duplicate_steps = 0; // step records not stored: step not after the newest stored
  uint64_t refused_records = 0; // step records not stored: layer_count not the description's
  // Step records whose module values were not stored: module_count not the described modules'
  // (or values missing); the rest of the record is. Before any description they are dropped
  // uncounted (a client attached mid-run gets the description within seconds).
  uint64_t refused_rollups = 0;
  uint64_t rollup_steps = 0;    // records stored with module values (module rollups)
  uint64_t probe_dropped = 0;   // the probe's own cumulative drop count, from the newest record
  uint64_t probe_errors = 0;    // failures inside the probe so far, from the newest record
  uint64_t events_evicted = 0;  // events pushed out of the bounded list (by count or bytes)
  uint64_t details_cut = 0;     // events whose detail was cut past ModelConfig::max_event_detail
  uint64_t rewinds = 0;         // continuations started after a rewind (abandoned spans made)
  uint64_t spans_evicted = 0;   // abandoned spans dropped past RunModel::kMaxAbandonedSpans
};

// The scalars of the newest stored record (no layer values: see latest()).
struct LatestStep {
  int64_t step = -1;            // -1 before the first record
  double loss = 0;
  double lr = 0;
  std::vector<double> group_lrs;   // every param group's lr when there are several
  double grad_norm = 0;
  bool skipped = false;
  std::string skip_reason;
  double step_time_us = 0;
  double probe_us = 0;
  int64_t stamp_unix_ns = 0;
  bool has_scaler = false;
  wire::ScalerState scaler;
  uint64_t snapshot_bytes = 0;  // what the probe's rewind snapshots hold; 0: it keeps none
};

class RunModel {
 public:
  // `segment`: which start of this identity it is, from 1 (Model numbers them).
  RunModel(wire::RunKey key, const ModelConfig& config, int segment = 1);
  // A run of a probe that names no model.
  RunModel(std::string run_id, int32_t rank, const ModelConfig& config, int segment = 1)
      : RunModel(wire::RunKey{std::move(run_id), std::string(), rank}, config, segment) {}

  // --- Ingest (owner thread). Each returns whether it changed what a view shows.
  // Applies a (re-sent) description: names layers and watches, adopts its run_id and model
  // when this run had no run_id yet. A description whose layers differ from the last one's
  // (the probe re-planned them: the model changed after attach) moves each layer's history to
  // its name's new index; a new layer starts empty and one no longer described is dropped.
  // (Sequence tracking of descriptions: note_seq.)
  bool describe(const wire::RunDescription& description);
  // Stores one step record (see the header comment for ordering and refused records).
  bool add_step(const wire::StepRecord& record);
  // Adds an event at the front of the bounded list.
  bool add_event(const wire::Event& event);

  // --- Identity and description.
  const wire::RunKey& key() const { return key_; }
  const std::string& run_id() const { return key_.run_id; }
  // Which of the job's models this run measures (RunDescription::model); "" when none is named.
  const std::string& model() const { return key_.model; }
  int32_t rank() const { return key_.rank; }
  // 1 for the first start of this identity that the model holds, 2 for the next
  // (a job restarted under the same run_id, resumed from a checkpoint), and so on.
  int segment() const { return segment_; }
  // Renumbers it when a Model takes it over from another (Model::adopt_runs()).
  void set_segment(int segment) { segment_ = segment; }
  bool described() const { return described_; }
  // The last description applied (default-constructed before the first).
  const wire::RunDescription& description() const { return description_; }

  // --- Steps. first_step() > last_step() while no record is stored.
  bool has_steps() const { return counters_.steps_stored > 0; }
  int64_t first_step() const { return first_step_; }
  int64_t last_step() const { return latest_.step; }
  const LatestStep& latest_step() const { return latest_; }
  // Training speed from the probe's own timestamps over the last records; 0 when unknown.
  double steps_per_second() const;

  // --- Layers (model order).
  size_t layer_count() const { return layer_names_.size(); }
  const std::string& layer_name(size_t layer) const { return layer_names_[layer]; }
  // The other names of the layer's tensor (a shared submodule, tied weights), as described.
  const std::vector<std::string>& layer_aliases(size_t layer) const;
  // Latest value of a metric for a layer (NaN if never received) and the step it came from.
  float latest(size_t layer, wire::LayerMetric metric) const;
  int64_t latest_step(size_t layer, wire::LayerMetric metric) const;
  // Why the newest record has no gradient for the layer: frozen (requires_grad off) or unused
  // (its backward passed the layer by); kMeasured when it has one.
  GradientState gradient_state(size_t layer) const {
    return layer < gradient_states_.size() ? gradient_states_[layer] : GradientState::kMeasured;
  }
  // A layer's history of one metric. An empty series before the first record.
  const SeriesHistory& layer_series(size_t layer, wire::LayerMetric metric) const;

  // Heatmap: for layers [first_layer, first_layer + layer_count) x the grid's columns, the
  // exact min and max (and non-finite flags) of `metric` per cell, row-major into
  // out[row * grid.columns() + column]; `out` is resized (no allocation once large enough).
  // Cells carry the metric itself, not its log: log10 is monotonic, so log10(cell.max) is the
  // max of log10 over the cell; the view colours by whichever end it wants.
  // Same guarantee and cost per row as SeriesHistory::summarize().
  void heatmap(wire::LayerMetric metric, size_t first_layer, size_t layer_count,
               const ColumnGrid& grid, std::vector<Summary>& out) const;

  // --- Modules (module_tree.hpp), for folding: each module's layers folded into one value per
  // step and metric. At each step a module's value is the largest of its layers' (their sum for
  // a count: wire::ModuleRollup), or, when any of them is non-finite, that non-finite value (a NaN
  // before an Inf): a folded module's row shows its worst layer and never averages a NaN away.
  // Layers without a sample of the step (no gradient) are left out; a module none of whose
  // layers has one gets none either. The tree follows the layer names (describe(), and layers
  // first named by records).
  // Where the history comes from depends on the model's width, so that modules cost the common
  // dense model none of its layers' steps:
  //   - a model that starts folded (more than kFoldAboveLayers layers, module_tree.hpp) keeps a
  //     series per module and metric, sized with its layers' from the run's share: a folded
  //     module of 50,000 experts' tensors is then one series query, as a layer's;
  //   - a smaller model keeps none (its layers keep the steps they had before modules had
  //     series): it starts open, and a module folded by hand has its cells merged from its
  //     layers' at query time, one layer query each (a block of a few tensors: what their rows
  //     cost open; all 1,000 layers of a model at 1,366 columns: about 10 ms).
  //   - a run whose description names modules (the probe sends their rollups between per-layer
  //     records) keeps them too, whatever its width: on those steps they are its only values.
  // A module's series follow its path when the layers are re-laid out; a model that grows past
  // the threshold starts its module series then.
  // On a rollup step (a record with module values and no layer values) each of the described
  // modules gives its value to the tree's module of its name, or, where the tree has none (the
  // probe names blocks.3.norm.weight's module blocks.3.norm, the tree blocks.3), to the
  // innermost module holding its layers whose path holds its name; each module above gets the
  // worst of those below it, as from layers. A described module no module of the tree holds
  // ("" for the model's own parameters) gives nothing. The tree's modules below the described
  // ones get nothing on such a step (they have the per-layer steps), nor do the layers. A record
  // whose module_count is not the described modules' count has its module values refused
  // (RunCounters::refused_rollups).
  const ModuleTree& modules() const { return modules_; }
  // The described module whose rollups module `module` of the tree receives (place_rollups()),
  // by index into description().modules; for tests and tooltips.
  const std::vector<size_t>& rollup_targets() const { return rollup_targets_; }
  // Whether module `module` of the tree gets values on rollup steps (a described module's, or
  // one above them); a module below them has only the per-layer steps, as its layers.
  bool module_has_rollups(size_t module) const {
    return module < module_rolled_up_.size() && module_rolled_up_[module];
  }
  // How many steps apart the probe sends per-layer values when it sends module rollups between
  // (ProbeOptions::layer_detail_every, as seen: the widest of the last few gaps between
  // per-layer records with rollups in them); 0 until seen.
  int64_t layer_detail_every() const;
  // The newest step with per-layer values; -1 before any.
  int64_t last_layer_values_step() const { return last_layer_values_step_; }
  bool keeps_module_series() const { return module_series_kept_; }
  // A module's kept series; an empty series where keeps_module_series() is false.
  const SeriesHistory& module_series(size_t module, wire::LayerMetric metric) const;
  // A module's cells over the grid's columns, into out[0 .. grid.columns()), from its series or
  // merged from its layers. Either way a cell's max is the worst value of its layers over the
  // cell's steps (their sum for a count: exact for a cell of one step, at most the sum
  // of each layer's worst over a wider one), and a non-finite value of any of them flags the
  // cell. Merged, a cell's min is the largest of its layers' minima (exact for a cell of one
  // step). Allocates only the first time a wider grid is merged.
  void module_summarize(size_t module, wire::LayerMetric metric, const ColumnGrid& grid, Summary* out) const;
  // A module's value (as above) at the newest step that gave it one; NaN before any.
  float module_latest(size_t module, wire::LayerMetric metric) const;
  // That step; -1 before any.
  int64_t module_latest_step(size_t module, wire::LayerMetric metric) const;
  // The layer of `module` whose `metric` is worst over steps [first_step, last_step]: the first
  // with a non-finite value there, else the one with the largest finite max; -1 when none has
  // a sample there. One query per layer of the module: for a hover, not for every frame.
  int worst_layer(size_t module, wire::LayerMetric metric, int64_t first_step, int64_t last_step) const;

  // --- Global scalars and watches.
  const SeriesHistory& global_series(GlobalSeries series) const;
  // Watches: in description order, then as first seen in records (at most kMaxWatches).
  static constexpr size_t kMaxWatches = 1024;
  size_t watch_count() const { return watch_names_.size(); }
  const std::string& watch_name(size_t watch) const { return watch_names_[watch]; }
  const SeriesHistory& watch_series(size_t watch, WatchMetric metric) const;

  // --- Rewinds (see the header comment): the spans left behind, oldest first, at most
  // kMaxAbandonedSpans (older ones are dropped and counted). Together they take at most
  // ModelConfig::abandoned_share() (abandoned_span.hpp).
  static constexpr size_t kMaxAbandonedSpans = 4;
  const std::deque<AbandonedSpan>& abandoned_spans() const { return abandoned_; }
  // A span's series; null where the span keeps none (a layer of a run too wide to keep them).
  const SeriesHistory* abandoned_global(size_t span, GlobalSeries series) const;
  const SeriesHistory* abandoned_layer(size_t span, size_t layer, wire::LayerMetric metric) const;
  // The newest step any series of the run shows, abandoned spans included (a view's right end).
  int64_t last_shown_step() const;

  // --- Events (newest first, at most ModelConfig::max_events) and health.
  const std::deque<wire::Event>& events() const { return events_; }
  // The earliest "first_nonfinite" event of this run (the probe raises one per episode of
  // non-finite gradients), however many events came after it; empty before one.
  static constexpr const char* kFirstNonfiniteKind = "first_nonfinite";
  const std::optional<wire::Event>& first_nonfinite() const { return first_nonfinite_; }
  // The newest "warning" of this run (the forecaster's: a trend that usually ends in a
  // divergence, PROTOCOL §3.4), kept apart like first_nonfinite, for the dashboard's banner:
  // the one stamped last by the probe (a history replayed late does not replace it), by
  // sequence number where stamps tie. Empty before one.
  const std::optional<wire::Event>& newest_warning() const { return newest_warning_; }
  const RunCounters& counters() const { return counters_; }
  // Feeds the sequence counters; the Model calls it for every telemetry message of this run.
  // `may_restart`: a description whose start time the run cannot tell apart from its own. A
  // lower seq there means the probe restarted (tracking restarts with it instead of counting
  // a rewind); any other lower seq is a replay (a history reply), counted as a rewind.
  void note_seq(uint64_t seq, bool may_restart);
  // The newest sequence number noted (0 before any): what a replay after a takeover skips.
  uint64_t last_seq() const { return last_seq_; }

  size_t series_count() const;
  size_t bytes_used() const;
  // Steps a layer series of this run keeps at full resolution: ModelConfig::recent_steps, or
  // fewer where the run's layers would not fit its share of the budget otherwise.
  int64_t layer_recent_steps() const { return layer_config_.recent_steps; }

 private:
  void ensure_layers(size_t count);
  bool same_layer_names(const std::vector<wire::LayerInfo>& layers) const;
  void relayout(const std::vector<wire::LayerInfo>& layers);
  size_t watch_index(const std::string& name);
  void start_series(int64_t origin_step);
  SeriesHistory make_series() const;
  // A layer's series, sized by size_layer_series().
  SeriesHistory make_layer_series() const;
  // Sizes the layer series made from now on for a run of `layers` layers and, when such a run
  // keeps module series, the modules of the tree held (ModelConfig's budget): module series
  // are sized like layer series.
  void size_layer_series(size_t layers);
  // Rebuilds the module tree from layer_names_ and gives its modules their series (moved by path
  // from the tree before, new ones empty).
  void set_modules();
  // Whether a run of `layers` layers with this description keeps module series.
  bool keeps_module_series_for(size_t layers) const;
  // Maps each described module to the tree's module its rollups go to (rollup_targets_).
  void place_rollups();
  // Folds the step's values of metric `m` into every module (those stored: a gradient metric
  // leaves out layers without a gradient) and appends each module's value.
  void add_module_values(int m, int64_t step, const float* values, size_t available);
  // Whether the record's module values fit the description (count, and values enough).
  bool rollup_fits(const wire::StepRecord& record) const;
  // Stores a rollup record's module values: its modules' folds, then up the tree.
  void add_module_rollup(const wire::StepRecord& record);
  // add_step()'s parts, in the order it calls them. Whether the record's layer count is its
  // described layout's (or the run has none yet).
  bool fits_layout(const wire::StepRecord& record) const;
  // gradient_states_ from the record's frozen and unused layers.
  void note_gradient_states(const wire::StepRecord& record);
  // Appends each layer metric the record holds to its layer series and modules. Whether it
  // held any.
  bool add_layer_values(const wire::StepRecord& record);
  // Stores the record's module rollup when the run is described and it fits. Whether it did.
  bool add_rollup_if_described(const wire::StepRecord& record);
  // The loss, learning rate, grad norm, timings, loss scale and largest buffer value.
  void add_global_values(const wire::StepRecord& record);
  // Each watched tensor's statistics (a new name gets series, up to kMaxWatches).
  void add_watch_values(const wire::StepRecord& record);
  // latest_, the probe's counters and the stamps steps_per_second() is measured over.
  void note_latest(const wire::StepRecord& record);
  // Tracks the per-layer cadence (layer_detail_every()).
  void note_layer_detail(bool layer_values, bool rollup, int64_t step);
  static size_t event_bytes(const wire::Event& event);
  // Whether `record` starts a rewind's continuation (see the header comment); disarms a rewind
  // event whose continuation did not come.
  bool starts_continuation(const wire::StepRecord& record);
  // Moves the steps from `step` on of every series into a new abandoned span and truncates the
  // series there, so that `step` can be stored again.
  void abandon_from(int64_t step);
  // A span of [first_step, last_step] holding the live series' samples there, sized to its share.
  AbandonedSpan make_span(int64_t first_step, int64_t last_step) const;

  wire::RunKey key_;
  ModelConfig config_;
  ModelConfig layer_config_;   // config_, with the series window sized for this run's layers
  int segment_ = 1;
  bool described_ = false;
  wire::RunDescription description_;
  RunCounters counters_;
  bool seq_known_ = false;
  uint64_t last_seq_ = 0;
  bool last_in_order_ = true;   // the last message noted had a seq after the one before
  // The step of the newest in-order `rewind` event whose continuation has not come; -1: none.
  int64_t rewind_from_step_ = -1;
  std::deque<AbandonedSpan> abandoned_;

  int64_t first_step_ = 0;
  LatestStep latest_;
  bool series_started_ = false;  // the origin is known once the first record is stored
  std::vector<std::string> layer_names_;
  std::array<std::vector<SeriesHistory>, wire::kLayerMetricCount> layer_series_;
  std::array<std::vector<float>, wire::kLayerMetricCount> latest_values_;
  std::array<std::vector<int64_t>, wire::kLayerMetricCount> latest_steps_;
  std::vector<GradientState> gradient_states_;   // per layer, as of the newest record
  ModuleTree modules_;
  bool modules_stale_ = false;   // layer_names_ changed since the tree was built
  std::array<std::vector<SeriesHistory>, wire::kLayerMetricCount> module_series_;
  bool module_series_kept_ = false;   // starts_folded(): set with the tree (set_modules())
  std::array<std::vector<float>, wire::kLayerMetricCount> module_latest_;
  std::array<std::vector<int64_t>, wire::kLayerMetricCount> module_latest_steps_;
  // A layer's cells while module_summarize() merges them (mutable: a query's scratch).
  mutable std::vector<Summary> merge_cells_;
  // Per module, reused by add_module_values(): the step's fold of its layers and modules.
  struct ModuleFold {
    float value = 0;       // largest (or sum) of the finite values
    float nonfinite = 0;   // the non-finite value seen (NaN wins over an Inf); 0: none
    bool any = false;
  };
  std::vector<ModuleFold> module_folds_;
  // The worst-of rule (the sum for a count; NaN before Inf), for a module's fold.
  static void fold(ModuleFold& into, float value, float nonfinite, bool sum);
  static void fold_value(ModuleFold& into, float value, bool sum);
  // Appends every module folded into for the step, folding each into its parent first.
  void store_module_folds(int m, int64_t step);
  std::vector<size_t> rollup_targets_;   // per described module: the tree's module, or kNone
  std::vector<bool> module_rolled_up_;   // per module of the tree: module_has_rollups()
  int64_t last_layer_values_step_ = -1;
  bool rollups_since_layer_values_ = false;
  std::array<int64_t, 4> detail_gaps_{};   // the last gaps between per-layer records
  size_t detail_gap_next_ = 0;
  std::vector<SeriesHistory> global_series_;
  std::vector<std::string> watch_names_;
  std::unordered_map<std::string, size_t> watch_lookup_;
  std::vector<SeriesHistory> watch_series_;  // [watch * kWatchMetricCount + metric]
  std::deque<wire::Event> events_;
  size_t events_bytes_ = 0;
  std::optional<wire::Event> first_nonfinite_;
  std::optional<wire::Event> newest_warning_;
  // (step, probe stamp) of recent records, oldest first, for steps_per_second().
  std::deque<std::pair<int64_t, int64_t>> stamps_;
};

// For a run whose probe sends module rollups (its description names modules): "per-layer
// values every 16 steps; modules every step" (or "every few steps" before the cadence is seen).
// "" for a run sent per layer every step.
std::string layer_cadence(const RunModel& run);

}  // namespace keel::app
