// PlannedLayers: the layers planned at attach, and planned again when the model changed after it
// (ParameterLayout) at the next step.
#include "planned_layers.hpp"

#include <algorithm>
#include <exception>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "keel/wire/vocabulary.hpp"
#include "layout/parameter_sequence.hpp"
#include "layout/run_description.hpp"

namespace keel::probe {
namespace {

// Which of `params` the model says a wrapper swaps the data of (TrainedModel::data_swapped):
// empty when none does.
std::vector<bool> swapped_parameters(const TrainedModel& model, const std::vector<torch::Tensor>& params) {
  std::vector<bool> swapped(params.size(), false);
  bool any = false;
  for (size_t i = 0; i < params.size(); ++i) any |= swapped[i] = model.data_swapped(params[i]);
  return any ? swapped : std::vector<bool>();
}

// One column of a list of pairs: the names or the tensors of NamedParams.
template <class Pairs, class Field>
auto column(const Pairs& pairs, Field field) {
  std::vector<std::decay_t<decltype(pairs.front().*field)>> out;
  for (const auto& p : pairs) out.push_back(p.*field);
  return out;
}

// The layers whose other names changed while the layers did not (a tensor registered again
// under another name, or such a name gone), as "fc1.weight now also named fc2.shared", or "".
std::string alias_change(const ModelParameters& now, const wire::RunDescription& described) {
  std::string what;
  for (size_t i = 0; i < now.params.size() && i < described.layers.size(); ++i) {
    const auto& aliases = now.aliases[i];
    const std::vector<std::string> shown(aliases.begin(), aliases.begin() + std::min<size_t>(aliases.size(), wire::kMaxAliases));
    if (shown == described.layers[i].aliases) continue;
    std::string names;
    for (const std::string& alias : shown) names += (names.empty() ? "" : ", ") + alias;
    what += (what.empty() ? "" : "; ") + now.params[i].first + (names.empty() ? " has no other name now" : " now also named " + names);
  }
  return what;
}

}  // namespace

PlannedLayers::PlannedLayers(const ModelParameters& parameters, TrainedModel& model, OptimizerAdapter* optimizer,
                             const ProbeOptions& options)
    : names_(column(parameters.params, &NamedParams::value_type::first)),
      params_(column(parameters.params, &NamedParams::value_type::second)),
      reducer_(params_, options.measure_in_backward, swapped_parameters(model, params_)),
      order_(params_, swapped_parameters(model, params_)),
      layout_(parameters.params, parameter_sequence(model, optimizer)) {
  reducer_.measure_updates_of(optimizer);
}

void PlannedLayers::follow(bool tensors_in_walk, const Run& run) {
  tensors_left_to_walk_ = false;
  try {
    run.optimizer->begin_step();
    // One walk of the modules for the parameters and the buffers (WatchedBuffers::follow reads it).
    parameter_sequence(run.model, run.optimizer, sequence_, &run.buffer_sequence);
    if (layout_.same_sequence(sequence_, params_.size())) {
      // Only while the layers are planned: a step that cannot reach the walk must try again here.
      if (tensors_in_walk && error_.empty()) {
        tensors_left_to_walk_ = true;
        return;
      }
      // Whether the weights were written since the last step matters only to a copy (or
      // norms) of them that the next step would trust: without one, their versions are not read.
      if (LayoutChange same; layout_.unchanged(sequence_, params_, same, /*compare_values=*/snapshot_current_)) {
        if (same.weights) snapshot_current_ = false;
        error_.clear();
        return;
      }
    }
    follow_changed(run);
  } catch (const std::exception& e) {
    // The old plan is intact but the model may have left it (another device): until the
    // layers can be planned, every step's reductions fail, safely and counted (Probe::Impl::reduce).
    error_ = std::string("the model's parameters changed and could not be followed: ") + e.what();
  }
}

void PlannedLayers::follow_changed(const Run& run) {
  const ModelParameters now = parameters_of(run.model, run.optimizer);
  const LayoutChange change = layout_.compare(now.params);
  if (!change.layout) {
    layout_.remember_sequence(sequence_);
    // The same layers, in other places or groups of the optimizer: the groups' lrs follow.
    reducer_.measure_updates_of(run.optimizer);
  }
  // Weights written outside the step: the copy the last update pass kept is not W. (They
  // are remembered as the step's own again at end_step.)
  if (change.weights) snapshot_current_ = false;
  if (change.layout) {
    if (now.params.empty()) throw std::runtime_error("the model has no parameters any more (" + change.what + ")");
    replan(now, change.what, run);
  } else if (const std::string renamed = alias_change(now, run.description); !renamed.empty()) {
    // The same layers under other names besides their own: only the description changes.
    describe_layers(now, run.options.layer_detail_above, run.description);
    if (run.publisher) run.publisher->describe(run.description);
    run.events.add(run.step, wire::event_kind::kLayoutChanged, "",
                   "the model's parameters changed after the last step: " + renamed + "; the run is re-described");
  }
  error_.clear();
}

void PlannedLayers::replan(const ModelParameters& now, const std::string& what, const Run& run) {
  // Everything that can fail first, while the old plan stands.
  std::vector<std::string> names = column(now.params, &NamedParams::value_type::first);
  std::vector<torch::Tensor> params = column(now.params, &NamedParams::value_type::second);
  std::vector<bool> swapped = swapped_parameters(run.model, params);
  LayerReducer reducer(params, run.options.measure_in_backward, swapped);
  reducer.measure_updates_of(run.optimizer);
  wire::RunDescription description = run.description;   // the same run: its id, start and watches
  describe_layers(now, run.options.layer_detail_above, description);
  ParameterLayout layout(now.params, sequence_);

  order_.track(params, std::move(swapped));
  names_ = std::move(names);
  params_ = std::move(params);
  reducer_ = std::move(reducer);
  layout_ = std::move(layout);
  run.description = std::move(description);
  snapshot_current_ = false;
  // In order with the records: a subscriber reads the new layers before the first record of them.
  if (run.publisher) run.publisher->describe(run.description);
  run.events.add(run.step, wire::event_kind::kLayoutChanged, "",
                 "the model's parameters changed after the last step: " + what + "; its " +
                     std::to_string(params_.size()) + " layers are measured as they are now, and the run is re-described");
}

std::optional<LayoutCheckInWalk> PlannedLayers::take_walk_check() {
  std::optional<LayoutCheckInWalk> check;
  if (tensors_left_to_walk_) check.emplace(layout_, /*compare_values=*/snapshot_current_);
  tensors_left_to_walk_ = false;
  return check;
}

void PlannedLayers::end_step(bool snapshot_current) {
  snapshot_current_ = snapshot_current;
  // The optimizer's writes are the step's: a write after this one is the user's. Only a
  // snapshot the next step may trust needs the versions to be compared with.
  if (snapshot_current_) layout_.remember_weights(params_);
  order_.rearm();
  reducer_.end_step();
}

}  // namespace keel::probe
