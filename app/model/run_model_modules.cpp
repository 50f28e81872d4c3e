// RunModel's modules: the tree's folds of the layers' values at ingest, the folds a wide
// model's probe sends in their place (module rollups), and the module queries.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>

#include "model/run_model.hpp"

namespace keel::app {
namespace {

const SeriesHistory& no_series() {
  static const SeriesHistory empty(0, ModelConfig{});
  return empty;
}

// Whether `path` is `name` or a module holding it ("blocks.3" holds "blocks.3.norm").
bool holds_name(std::string_view path, std::string_view name) {
  return name.size() >= path.size() && name.compare(0, path.size(), path) == 0 &&
         (name.size() == path.size() || name[path.size()] == '.');
}

// Whether a module's value of `metric` is its layers' sum (a count) rather than its worst
// layer's (wire::ModuleRollup).
bool sums_layers(wire::LayerMetric metric) {
  switch (wire::info_of(metric).modules) {
    case wire::ModuleRollup::kWorst: return false;
    case wire::ModuleRollup::kSum: return true;
  }
  return false;
}

}  // namespace

bool RunModel::keeps_module_series_for(size_t layers) const {
  // A probe that sends module rollups sends per-layer values only every few steps: the module
  // series are then the only history of the steps between, whatever the model's width.
  return starts_folded(layers) || !description_.modules.empty();
}

void RunModel::set_modules() {
  modules_stale_ = false;
  ModuleTree next;
  next.build(layer_names_);
  std::unordered_map<std::string_view, size_t> was;
  for (size_t i = 0; i < modules_.module_count(); ++i) was.emplace(modules_.module(i).path, i);
  const size_t n = next.module_count();
  std::swap(modules_, next);
  // Sized with the new tree's modules counted; the series made from here on get that size.
  module_series_kept_ = keeps_module_series_for(layer_names_.size());
  size_layer_series(layer_names_.size());
  for (int m = 0; m < wire::kLayerMetricCount; ++m) {
    std::vector<SeriesHistory> series;
    std::vector<float> latest(n, std::numeric_limits<float>::quiet_NaN());
    std::vector<int64_t> steps(n, -1);
    for (size_t i = 0; i < n; ++i) {
      const auto found = was.find(modules_.module(i).path);
      const size_t old = found == was.end() ? ModuleTree::kNone : found->second;
      if (series_started_ && module_series_kept_) {
        series.push_back(old < module_series_[m].size() ? std::move(module_series_[m][old]) : make_layer_series());
      }
      if (old < module_latest_[m].size()) {
        latest[i] = module_latest_[m][old];
        steps[i] = module_latest_steps_[m][old];
      }
    }
    module_series_[m] = std::move(series);
    module_latest_[m] = std::move(latest);
    module_latest_steps_[m] = std::move(steps);
  }
  module_folds_.assign(n, ModuleFold{});
  place_rollups();
}

void RunModel::place_rollups() {
  // The probe names a module by its layers' names less their last component, at one depth for
  // the whole model; the tree by less their last two (module_tree.hpp). So "blocks.3.experts"
  // is a module of both, but "blocks.3.norm" (of blocks.3.norm.weight) only of the probe's:
  // its values go to the innermost module of the tree holding all its layers under a path
  // that holds its name (blocks.3). One that no module holds ("" for the model's own
  // parameters, "embed" for embed.weight, a name the layers no longer have) goes nowhere: those
  // layers have per-layer values only.
  const std::vector<wire::ModuleRange>& wire_modules = description_.modules;
  rollup_targets_.assign(wire_modules.size(), ModuleTree::kNone);
  for (size_t w = 0; w < wire_modules.size(); ++w) {
    const wire::ModuleRange& range = wire_modules[w];
    const size_t first = range.first, end = size_t(range.first) + range.count;
    if (range.count == 0 || end > modules_.layer_count()) continue;
    for (size_t node = modules_.layer_parent(first); node != ModuleTree::kNone; node = modules_.module(node).parent) {
      const ModuleNode& module = modules_.module(node);
      if (module.first_layer <= first && end <= module.end_layer && holds_name(module.path, range.name)) {
        rollup_targets_[w] = node;
        break;
      }
    }
  }
  module_rolled_up_.assign(modules_.module_count(), false);
  for (size_t node : rollup_targets_) {
    for (; node != ModuleTree::kNone && !module_rolled_up_[node]; node = modules_.module(node).parent) {
      module_rolled_up_[node] = true;
    }
  }
}

void RunModel::fold(ModuleFold& into, float value, float nonfinite, bool sum) {
  if (std::isnan(nonfinite) || (nonfinite != 0 && into.nonfinite == 0)) into.nonfinite = nonfinite;
  if (!into.any) {
    into.value = value;
  } else {
    into.value = sum ? into.value + value : std::max(into.value, value);
  }
  into.any = true;
}

void RunModel::fold_value(ModuleFold& into, float value, bool sum) {
  if (std::isfinite(value)) {
    fold(into, value, 0, sum);
  } else {
    // A non-finite value counts for nothing in the finite fold: its module is non-finite.
    fold(into, sum ? 0.0f : -std::numeric_limits<float>::infinity(), value, sum);
  }
}

void RunModel::store_module_folds(int m, int64_t step) {
  const bool sum = sums_layers(static_cast<wire::LayerMetric>(m));
  // Pre-order: a module's children come after it, so walking backwards folds each module
  // before its parent reads it. A module nothing was folded into (below a rollup's modules, or
  // none of whose layers has a sample) gets no value for the step.
  std::vector<SeriesHistory>& series = module_series_[m];
  float* latest = module_latest_[m].data();
  int64_t* latest_steps = module_latest_steps_[m].data();
  for (size_t j = modules_.module_count(); j-- > 0;) {
    const ModuleFold& folded = module_folds_[j];
    if (!folded.any) continue;
    const float value = folded.nonfinite != 0 ? folded.nonfinite : folded.value;
    if (j < series.size()) series[j].append(step, value);
    latest[j] = value;
    latest_steps[j] = step;
    const size_t parent = modules_.module(j).parent;
    if (parent != ModuleTree::kNone) fold(module_folds_[parent], folded.value, folded.nonfinite, sum);
  }
}

void RunModel::add_module_values(int m, int64_t step, const float* values, size_t available) {
  const size_t modules = modules_.module_count();
  if (modules == 0) return;
  const bool sum = sums_layers(static_cast<wire::LayerMetric>(m));
  const bool gradient_metric = is_gradient_metric(static_cast<wire::LayerMetric>(m));
  module_folds_.assign(modules, ModuleFold{});
  for (size_t i = 0; i < available; ++i) {
    if (gradient_metric && gradient_states_[i] != GradientState::kMeasured) continue;
    const size_t parent = modules_.layer_parent(i);
    if (parent != ModuleTree::kNone) fold_value(module_folds_[parent], values[i], sum);
  }
  store_module_folds(m, step);
}

bool RunModel::rollup_fits(const wire::StepRecord& record) const {
  const size_t blocks = size_t(__builtin_popcount(record.module_mask));
  return !description_.modules.empty() && record.module_count == description_.modules.size() &&
         record.module_values.size() >= blocks * record.module_count;
}

void RunModel::add_module_rollup(const wire::StepRecord& record) {
  if (modules_stale_) set_modules();
  const size_t modules = modules_.module_count();
  const size_t count = record.module_count;
  for (int m = 0; m < wire::kLayerMetricCount; ++m) {
    const auto metric = static_cast<wire::LayerMetric>(m);
    // A metric the record also carries per layer was stored from its layers.
    if (record.metric_block(metric) >= 0) continue;
    const int block = record.module_block(metric);
    if (block < 0 || modules == 0) continue;
    const bool sum = sums_layers(metric);
    const float* values = record.module_values.data() + size_t(block) * count;
    module_folds_.assign(modules, ModuleFold{});
    for (size_t w = 0; w < count; ++w) {
      const size_t target = rollup_targets_[w];
      if (target != ModuleTree::kNone) fold_value(module_folds_[target], values[w], sum);
    }
    store_module_folds(m, record.step);
  }
}

void RunModel::note_layer_detail(bool layer_values, bool rollup, int64_t step) {
  if (rollup) {
    rollups_since_layer_values_ = true;
    ++counters_.rollup_steps;
  }
  if (!layer_values) return;
  // Only a gap with rollups in it is the probe's cadence (a narrow model's gaps are lost records).
  if (rollups_since_layer_values_ && last_layer_values_step_ >= 0) {
    detail_gaps_[detail_gap_next_] = step - last_layer_values_step_;
    detail_gap_next_ = (detail_gap_next_ + 1) % detail_gaps_.size();
  }
  rollups_since_layer_values_ = false;
  last_layer_values_step_ = step;
}

std::string layer_cadence(const RunModel& run) {
  if (run.description().modules.empty()) return {};
  const int64_t every = run.layer_detail_every();
  return "per-layer values every " + (every > 0 ? std::to_string(every) : std::string("few")) +
         " steps; modules every step";
}

int64_t RunModel::layer_detail_every() const {
  // The widest of the last few gaps: an unsafe step between is sent per layer, out of cadence.
  return *std::max_element(detail_gaps_.begin(), detail_gaps_.end());
}

const SeriesHistory& RunModel::module_series(size_t module, wire::LayerMetric metric) const {
  const auto m = static_cast<size_t>(metric);
  if (m >= module_series_.size() || module >= module_series_[m].size()) return no_series();
  return module_series_[m][module];
}

void RunModel::module_summarize(size_t module, wire::LayerMetric metric, const ColumnGrid& grid, Summary* out) const {
  const auto columns = size_t(grid.columns());
  if (module_series_kept_) {
    module_series(module, metric).summarize(grid, out);
    return;
  }
  std::fill(out, out + columns, Summary{});
  if (module >= modules_.module_count()) return;
  const ModuleNode& node = modules_.module(module);
  const bool sum = sums_layers(metric);
  merge_cells_.resize(columns);
  Summary* cells = merge_cells_.data();
  for (size_t layer = node.first_layer; layer < node.end_layer && layer < layer_names_.size(); ++layer) {
    layer_series(layer, metric).summarize(grid, cells);
    for (size_t c = 0; c < columns; ++c) {
      const Summary& cell = cells[c];
      Summary& into = out[c];
      into.flags |= cell.flags;
      if (!cell.has_finite()) continue;
      if (!into.has_finite()) {
        into.min = cell.min;
        into.max = cell.max;
      } else if (sum) {
        into.min += cell.min;
        into.max += cell.max;
      } else {
        // Per step the module is its largest layer: the cell's max is the largest layer max;
        // its min, the largest layer minimum, is exact for a cell of one step.
        into.min = std::max(into.min, cell.min);
        into.max = std::max(into.max, cell.max);
      }
    }
  }
}

float RunModel::module_latest(size_t module, wire::LayerMetric metric) const {
  const auto& values = module_latest_[static_cast<size_t>(metric)];
  return module < values.size() ? values[module] : std::numeric_limits<float>::quiet_NaN();
}

int64_t RunModel::module_latest_step(size_t module, wire::LayerMetric metric) const {
  const auto& steps = module_latest_steps_[static_cast<size_t>(metric)];
  return module < steps.size() ? steps[module] : -1;
}

int RunModel::worst_layer(size_t module, wire::LayerMetric metric, int64_t first_step, int64_t last_step) const {
  if (module >= modules_.module_count()) return -1;
  const ModuleNode& node = modules_.module(module);
  const ColumnGrid one_cell(first_step, last_step, 1);
  int worst = -1;
  float worst_max = -std::numeric_limits<float>::infinity();
  for (size_t layer = node.first_layer; layer < node.end_layer && layer < layer_names_.size(); ++layer) {
    Summary cell;
    layer_series(layer, metric).summarize(one_cell, &cell);
    if (cell.has_nonfinite()) return int(layer);
    if (cell.has_finite() && (worst < 0 || cell.max > worst_max)) {
      worst = int(layer);
      worst_max = cell.max;
    }
  }
  return worst;
}

}  // namespace keel::app
