// RunModel: routing a run's records into its series, and the run's bookkeeping.
#include "model/run_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "keel/wire/vocabulary.hpp"
#include "model/event_rows.hpp"

namespace keel::app {
namespace {

constexpr size_t kNotWatched = static_cast<size_t>(-1);
// Records kept for steps_per_second(): enough to smooth jitter, few enough to follow changes.
constexpr size_t kRateWindow = 64;

const SeriesHistory& empty_series() {
  static const SeriesHistory empty(0, ModelConfig{});
  return empty;
}

// Scalars arrive as double; the plots need float precision only. A value beyond float range
// becomes +-Inf, which the store flags rather than hides.
float as_sample(double value) { return static_cast<float>(value); }

// The largest of a step's buffer maxima; NaN when any is NaN, so that it shows.
float largest_buffer_absmax(const std::vector<float>& buffer_absmax) {
  float largest = 0;
  for (float b : buffer_absmax) {
    if (std::isnan(b) || std::isnan(largest)) {
      largest = std::numeric_limits<float>::quiet_NaN();
    } else {
      largest = std::max(largest, b);
    }
  }
  return largest;
}

}  // namespace

const char* gradient_state_name(GradientState state) {
  switch (state) {
    case GradientState::kMeasured: return "";
    case GradientState::kFrozen: return "frozen";
    case GradientState::kUnused: return "unused";
  }
  return "";
}

const char* gradient_state_reason(GradientState state) {
  switch (state) {
    case GradientState::kMeasured: return "";
    case GradientState::kFrozen: return "frozen: requires_grad is off, no gradient to measure";
    case GradientState::kUnused: return "unused: the newest step's backward did not reach it";
  }
  return "";
}

RunModel::RunModel(wire::RunKey key, const ModelConfig& config, int segment)
    : key_(std::move(key)), config_(config), segment_(segment) {
  config_.max_events = std::max<size_t>(config_.max_events, 1);
  layer_config_ = config_;
}

SeriesHistory RunModel::make_series() const { return SeriesHistory(first_step_, config_); }

SeriesHistory RunModel::make_layer_series() const { return SeriesHistory(first_step_, layer_config_); }

void RunModel::size_layer_series(size_t layers) {
  // The run's share of the budget over its layer series (and its module series, when it keeps
  // them).
  const size_t modules = keeps_module_series_for(layers) ? modules_.module_count() : 0;
  const size_t series = std::max<size_t>(layers + modules, 1) * wire::kLayerMetricCount;
  layer_config_ = SeriesHistory::config_within(config_, config_.budget_share() / series);
}

void RunModel::start_series(int64_t origin_step) {
  // Every series of the run shares this origin, so bucket boundaries agree across rows.
  first_step_ = origin_step;
  series_started_ = true;
  for (auto& per_metric : layer_series_) {
    per_metric.clear();
    per_metric.reserve(layer_names_.size());
    for (size_t i = 0; i < layer_names_.size(); ++i) per_metric.push_back(make_layer_series());
  }
  for (auto& per_metric : module_series_) {
    per_metric.clear();
    if (!module_series_kept_) continue;
    per_metric.reserve(modules_.module_count());
    for (size_t i = 0; i < modules_.module_count(); ++i) per_metric.push_back(make_layer_series());
  }
  global_series_.clear();
  for (int i = 0; i < kGlobalSeriesCount; ++i) global_series_.push_back(make_series());
  watch_series_.clear();
  for (size_t i = 0; i < watch_names_.size() * kWatchMetricCount; ++i) {
    watch_series_.push_back(make_series());
  }
}

void RunModel::ensure_layers(size_t count) {
  if (count > layer_names_.size()) {
    size_layer_series(count);
    modules_stale_ = true;
  }
  for (size_t i = layer_names_.size(); i < count; ++i) {
    layer_names_.push_back("layer " + std::to_string(i));
  }
  for (int m = 0; m < wire::kLayerMetricCount; ++m) {
    latest_values_[m].resize(layer_names_.size(), std::numeric_limits<float>::quiet_NaN());
    latest_steps_[m].resize(layer_names_.size(), -1);
    if (series_started_) {
      while (layer_series_[m].size() < layer_names_.size()) {
        layer_series_[m].push_back(make_layer_series());
      }
    }
  }
}

size_t RunModel::watch_index(const std::string& name) {
  const auto found = watch_lookup_.find(name);
  if (found != watch_lookup_.end()) return found->second;
  if (watch_names_.size() >= kMaxWatches) return kNotWatched;
  const size_t index = watch_names_.size();
  watch_names_.push_back(name);
  watch_lookup_.emplace(name, index);
  if (series_started_) {
    for (int i = 0; i < kWatchMetricCount; ++i) watch_series_.push_back(make_series());
  }
  return index;
}

bool RunModel::describe(const wire::RunDescription& description) {
  if (key_.run_id.empty()) {
    key_.run_id = description.run_id;
    key_.model = description.model;
  }
  if (!same_layer_names(description.layers)) modules_stale_ = true;
  if (described_ && !same_layer_names(description.layers)) {
    size_layer_series(description.layers.size());
    relayout(description.layers);
  }
  described_ = true;
  description_ = description;
  ensure_layers(description.layers.size());
  for (size_t i = 0; i < description.layers.size(); ++i) {
    layer_names_[i] = description.layers[i].name;
  }
  for (const std::string& watch : description.watches) watch_index(watch);
  // Modules described for the first time keep series from now on (keeps_module_series_for()).
  if (modules_stale_ || module_series_kept_ != keeps_module_series_for(layer_names_.size())) {
    set_modules();
  } else {
    place_rollups();
  }
  return true;
}

bool RunModel::same_layer_names(const std::vector<wire::LayerInfo>& layers) const {
  if (layers.size() != layer_names_.size()) return false;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i].name != layer_names_[i]) return false;
  }
  return true;
}

void RunModel::relayout(const std::vector<wire::LayerInfo>& layers) {
  constexpr size_t kNew = static_cast<size_t>(-1);
  std::unordered_map<std::string, size_t> was;
  for (size_t i = 0; i < layer_names_.size(); ++i) was.emplace(layer_names_[i], i);
  const size_t n = layers.size();
  std::vector<size_t> source(n, kNew);   // the layer's index before, kNew for a new layer
  std::vector<std::string> names(n);
  std::vector<GradientState> states(n, GradientState::kMeasured);
  for (size_t i = 0; i < n; ++i) {
    names[i] = layers[i].name;
    const auto found = was.find(names[i]);
    if (found == was.end()) continue;
    source[i] = found->second;
    states[i] = gradient_state(source[i]);
  }
  for (int m = 0; m < wire::kLayerMetricCount; ++m) {
    std::vector<SeriesHistory> series;
    std::vector<float> values(n, std::numeric_limits<float>::quiet_NaN());
    std::vector<int64_t> steps(n, -1);
    for (size_t i = 0; i < n; ++i) {
      const size_t old = source[i];
      if (series_started_) {
        series.push_back(old < layer_series_[m].size() ? std::move(layer_series_[m][old]) : make_layer_series());
      }
      if (old < latest_values_[m].size()) {
        values[i] = latest_values_[m][old];
        steps[i] = latest_steps_[m][old];
      }
    }
    layer_series_[m] = std::move(series);
    latest_values_[m] = std::move(values);
    latest_steps_[m] = std::move(steps);
  }
  layer_names_ = std::move(names);
  gradient_states_ = std::move(states);
  // Abandoned spans keep their layers by the old indices: rather than a span drawn under
  // another layer's name, the spans keep their global series only.
  for (AbandonedSpan& span : abandoned_) {
    for (auto& per_metric : span.layers) per_metric.clear();
  }
}

void RunModel::note_seq(uint64_t seq, bool may_restart) {
  ++counters_.messages;
  last_in_order_ = true;
  if (!seq_known_) {
    seq_known_ = true;
    last_seq_ = seq;
    return;
  }
  if (seq > last_seq_) {
    if (seq != last_seq_ + 1) {
      ++counters_.seq_gaps;
      counters_.seq_missing += seq - last_seq_ - 1;
    }
    last_seq_ = seq;
  } else if (may_restart) {
    // A probe sends its description first after it starts: a lower seq there is a restart,
    // and counting from it keeps later messages from all reading as rewinds.
    last_seq_ = seq;
  } else {
    ++counters_.seq_rewinds;
    last_in_order_ = false;
  }
}

bool RunModel::add_step(const wire::StepRecord& record) {
  if (!fits_layout(record)) {
    ++counters_.refused_records;
    return false;
  }
  if (starts_continuation(record)) abandon_from(record.step);
  if (has_steps() && record.step <= latest_.step) {
    ++counters_.duplicate_steps;
    return false;
  }
  if (!series_started_) start_series(record.step);
  const int64_t step = record.step;
  // The origin bounds what a series accepts; a record before it cannot be stored either.
  SeriesHistory& skipped = global_series_[static_cast<size_t>(GlobalSeries::kSkipped)];
  if (!skipped.append(step, record.skipped ? 1.0f : 0.0f)) {
    ++counters_.duplicate_steps;
    return false;
  }
  note_gradient_states(record);
  const bool layer_values = add_layer_values(record);
  const bool rollup = add_rollup_if_described(record);
  note_layer_detail(layer_values, rollup, step);
  add_global_values(record);
  add_watch_values(record);
  note_latest(record);
  return true;
}

bool RunModel::fits_layout(const wire::StepRecord& record) const {
  // A run not described yet learns its layers from records (so does one described without
  // layers, as a hand-built description may be); once the description declares them, another
  // layer count means values by index into another layout.
  const size_t described_layers = description_.layers.size();
  return !(described_ && described_layers > 0 && record.layer_count != described_layers);
}

void RunModel::note_gradient_states(const wire::StepRecord& record) {
  // A frozen or unused layer's gradient metrics are not this step's: no sample, rather than
  // a zero that reads as underflow. Its weight metrics still are.
  const size_t layer_count = record.layer_count;
  gradient_states_.assign(std::max(gradient_states_.size(), layer_count), GradientState::kMeasured);
  for (uint32_t layer : record.unused_layers) {
    if (layer < layer_count) gradient_states_[layer] = GradientState::kUnused;
  }
  for (uint32_t layer : record.frozen_layers) {
    if (layer < layer_count) gradient_states_[layer] = GradientState::kFrozen;
  }
}

bool RunModel::add_layer_values(const wire::StepRecord& record) {
  const size_t layer_count = record.layer_count;
  const int64_t step = record.step;
  bool stored = false;
  for (int m = 0; m < wire::kLayerMetricCount; ++m) {
    const bool gradient_metric = is_gradient_metric(static_cast<wire::LayerMetric>(m));
    const int block = record.metric_block(static_cast<wire::LayerMetric>(m));
    if (block < 0 || layer_count == 0) continue;
    // A hand-built record may hold fewer values than its mask promises: store what is there.
    const size_t begin = static_cast<size_t>(block) * layer_count;
    if (begin >= record.layer_values.size()) continue;
    const size_t available = std::min(layer_count, record.layer_values.size() - begin);
    ensure_layers(available);
    if (modules_stale_) set_modules();
    const float* values = record.layer_values.data() + begin;
    std::vector<SeriesHistory>& series = layer_series_[m];
    float* latest_values = latest_values_[m].data();
    int64_t* latest_steps = latest_steps_[m].data();
    for (size_t i = 0; i < available; ++i) {
      if (i + kAppendPrefetchAhead < available) series[i + kAppendPrefetchAhead].prefetch_append(step);
      if (gradient_metric && gradient_states_[i] != GradientState::kMeasured) continue;
      series[i].append(step, values[i]);
      latest_values[i] = values[i];
      latest_steps[i] = step;
    }
    add_module_values(m, step, values, available);
    stored = true;
  }
  return stored;
}

bool RunModel::add_rollup_if_described(const wire::StepRecord& record) {
  // Module rollups: only of a run described with modules, whose layers they are.
  if (record.module_mask == 0 || !described_) return false;
  if (!rollup_fits(record)) {
    ++counters_.refused_rollups;
    return false;
  }
  add_module_rollup(record);
  return true;
}

void RunModel::add_global_values(const wire::StepRecord& record) {
  const int64_t step = record.step;
  auto global = [&](GlobalSeries which) -> SeriesHistory& {
    return global_series_[static_cast<size_t>(which)];
  };
  global(GlobalSeries::kLoss).append(step, as_sample(record.loss));
  global(GlobalSeries::kLr).append(step, as_sample(record.lr));
  global(GlobalSeries::kGradNorm).append(step, as_sample(record.grad_norm));
  global(GlobalSeries::kStepTimeUs).append(step, as_sample(record.step_time_us));
  global(GlobalSeries::kProbeUs).append(step, as_sample(record.probe_us));
  if (record.scaler) global(GlobalSeries::kLossScale).append(step, as_sample(record.scaler->scale));
  // A block that does not match the described buffers is another layout's: not plotted.
  if (!record.buffer_absmax.empty() &&
      (description_.buffers.empty() || record.buffer_absmax.size() == description_.buffers.size())) {
    global(GlobalSeries::kBufferAbsmax).append(step, largest_buffer_absmax(record.buffer_absmax));
  }
}

void RunModel::add_watch_values(const wire::StepRecord& record) {
  for (const wire::WatchStats& watch : record.watches) {
    const size_t index = watch_index(watch.name);
    if (index == kNotWatched) continue;
    SeriesHistory* series = &watch_series_[index * kWatchMetricCount];
    series[static_cast<int>(WatchMetric::kAbsmax)].append(record.step, watch.absmax);
    series[static_cast<int>(WatchMetric::kRms)].append(record.step, watch.rms);
    series[static_cast<int>(WatchMetric::kZ)].append(record.step, watch.z);
    series[static_cast<int>(WatchMetric::kNonfinite)].append(record.step,
                                                             static_cast<float>(watch.nonfinite));
  }
}

void RunModel::note_latest(const wire::StepRecord& record) {
  latest_.step = record.step;
  latest_.loss = record.loss;
  latest_.lr = record.lr;
  latest_.group_lrs = record.group_lrs;
  latest_.grad_norm = record.grad_norm;
  latest_.skipped = record.skipped;
  latest_.skip_reason = record.skip_reason;
  latest_.step_time_us = record.step_time_us;
  latest_.probe_us = record.probe_us;
  latest_.stamp_unix_ns = record.stamp_unix_ns;
  latest_.has_scaler = record.scaler.has_value();
  if (record.scaler) latest_.scaler = *record.scaler;
  latest_.snapshot_bytes = record.snapshot_bytes;
  ++counters_.steps_stored;
  counters_.probe_dropped = record.dropped;
  counters_.probe_errors = record.probe_errors;

  if (record.stamp_unix_ns > 0) {
    stamps_.emplace_back(record.step, record.stamp_unix_ns);
    if (stamps_.size() > kRateWindow) stamps_.pop_front();
  }
}

namespace {

// Cuts `text` past `limit` bytes on a character's first byte, so the rest is still UTF-8, and
// says how much was left out; whether it cut.
bool cut_text(std::string& text, size_t limit) {
  if (text.size() <= limit) return false;
  size_t cut = limit;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0u) == 0x80u) --cut;
  const size_t dropped = text.size() - cut;
  text.resize(cut);
  text += " ... [" + std::to_string(dropped) + " more bytes not kept]";
  text.shrink_to_fit();
  return true;
}

}  // namespace

bool RunModel::add_event(const wire::Event& event) {
  // A replayed rewind event is history: its continuation is stored already, or never will be.
  if (event.kind == wire::event_kind::kRewind && last_in_order_) rewind_from_step_ = std::max<int64_t>(event.step, 0);
  // Kept apart from the bounded list, which a long run's later events would push it out of.
  if (event.kind == kFirstNonfiniteKind && (!first_nonfinite_ || event.step < first_nonfinite_->step)) {
    first_nonfinite_ = event;
  }
  events_.push_front(event);
  wire::Event& kept = events_.front();
  bool cut = cut_text(kept.detail, config_.max_event_detail);
  if (kept.warning) cut = cut_text(kept.warning->advice, config_.max_event_detail) || cut;
  if (cut) ++counters_.details_cut;
  if (kept.kind == wire::event_kind::kWarning && (!newest_warning_ || sent_after(kept, *newest_warning_))) {
    newest_warning_ = kept;
  }
  events_bytes_ += event_bytes(kept);
  while (events_.size() > 1 && (events_.size() > config_.max_events || events_bytes_ > config_.max_event_bytes)) {
    events_bytes_ -= std::min(events_bytes_, event_bytes(events_.back()));
    events_.pop_back();
    ++counters_.events_evicted;
  }
  return true;
}

size_t RunModel::event_bytes(const wire::Event& event) {
  size_t bytes = sizeof(event) + event.kind.capacity() + event.layer.capacity() + event.detail.capacity() +
                 event.run.capacity() + event.model.capacity();
  if (event.cause) {
    bytes += sizeof(*event.cause) + event.cause->kind.capacity() + event.cause->op.capacity() +
             event.cause->module.capacity() + event.cause->sentence.capacity();
  }
  if (event.warning) bytes += sizeof(*event.warning) + event.warning->signal.capacity() + event.warning->advice.capacity();
  return bytes;
}

double RunModel::steps_per_second() const {
  if (stamps_.size() < 2) return 0;
  const double steps = static_cast<double>(stamps_.back().first - stamps_.front().first);
  const double nanos = static_cast<double>(stamps_.back().second - stamps_.front().second);
  return nanos > 0 ? steps * 1e9 / nanos : 0;
}

const std::vector<std::string>& RunModel::layer_aliases(size_t layer) const {
  static const std::vector<std::string> kNone;
  return layer < description_.layers.size() ? description_.layers[layer].aliases : kNone;
}

float RunModel::latest(size_t layer, wire::LayerMetric metric) const {
  const auto& values = latest_values_[static_cast<size_t>(metric)];
  return layer < values.size() ? values[layer] : std::numeric_limits<float>::quiet_NaN();
}

int64_t RunModel::latest_step(size_t layer, wire::LayerMetric metric) const {
  const auto& steps = latest_steps_[static_cast<size_t>(metric)];
  return layer < steps.size() ? steps[layer] : -1;
}

const SeriesHistory& RunModel::layer_series(size_t layer, wire::LayerMetric metric) const {
  const auto m = static_cast<size_t>(metric);
  if (m >= layer_series_.size() || layer >= layer_series_[m].size()) return empty_series();
  return layer_series_[m][layer];
}

const SeriesHistory& RunModel::global_series(GlobalSeries series) const {
  const auto index = static_cast<size_t>(series);
  return index < global_series_.size() ? global_series_[index] : empty_series();
}

const SeriesHistory& RunModel::watch_series(size_t watch, WatchMetric metric) const {
  const size_t index = watch * kWatchMetricCount + static_cast<size_t>(metric);
  return index < watch_series_.size() ? watch_series_[index] : empty_series();
}

void RunModel::heatmap(wire::LayerMetric metric, size_t first_layer, size_t layer_count,
                       const ColumnGrid& grid, std::vector<Summary>& out) const {
  const size_t rows = first_layer < layer_names_.size()
                          ? std::min(layer_count, layer_names_.size() - first_layer)
                          : 0;
  const auto columns = static_cast<size_t>(grid.columns());
  out.resize(rows * columns);
  for (size_t row = 0; row < rows; ++row) {
    layer_series(first_layer + row, metric).summarize(grid, out.data() + row * columns);
  }
}

size_t RunModel::series_count() const {
  size_t count = global_series_.size() + watch_series_.size();
  for (const auto& per_metric : layer_series_) count += per_metric.size();
  for (const auto& per_metric : module_series_) count += per_metric.size();
  return count;
}

size_t RunModel::bytes_used() const {
  size_t bytes = sizeof(RunModel);
  for (const auto& per_metric : layer_series_) {
    for (const SeriesHistory& series : per_metric) bytes += series.bytes_used();
  }
  for (const auto& per_metric : module_series_) {
    for (const SeriesHistory& series : per_metric) bytes += series.bytes_used();
  }
  for (const auto& latest : module_latest_) bytes += latest.capacity() * sizeof(float);
  for (const auto& steps : module_latest_steps_) bytes += steps.capacity() * sizeof(int64_t);
  bytes += merge_cells_.capacity() * sizeof(Summary);
  bytes += modules_.bytes_used() + module_folds_.capacity() * sizeof(ModuleFold);
  for (const SeriesHistory& series : global_series_) bytes += series.bytes_used();
  for (const SeriesHistory& series : watch_series_) bytes += series.bytes_used();
  for (int m = 0; m < wire::kLayerMetricCount; ++m) {
    bytes += latest_values_[m].capacity() * sizeof(float) +
             latest_steps_[m].capacity() * sizeof(int64_t);
  }
  for (const std::string& name : layer_names_) bytes += sizeof(name) + name.capacity();
  for (const std::string& name : watch_names_) bytes += 2 * (sizeof(name) + name.capacity());
  bytes += rollup_targets_.capacity() * sizeof(size_t);
  for (const wire::ModuleRange& module : description_.modules) bytes += sizeof(module) + module.name.capacity();
  for (const wire::LayerInfo& layer : description_.layers) {
    bytes += sizeof(layer) + layer.name.capacity() + layer.dtype.capacity() +
             layer.shape.capacity() * sizeof(int64_t);
  }
  bytes += events_bytes_;
  for (const AbandonedSpan& span : abandoned_) bytes += span.bytes_used();
  if (first_nonfinite_) bytes += event_bytes(*first_nonfinite_);
  if (newest_warning_) bytes += event_bytes(*newest_warning_);
  return bytes;
}

}  // namespace keel::app
