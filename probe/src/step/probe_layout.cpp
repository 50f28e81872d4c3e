// The model changed after attach (ParameterLayout): its layers planned again at the next step.
#include <algorithm>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "keel/wire/vocabulary.hpp"
#include "probe_impl.hpp"
#include "layout/parameter_sequence.hpp"
#include "layout/run_description.hpp"

namespace keel::probe {
namespace {

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

void Probe::Impl::follow_layout(bool tensors_in_walk) {
  tensors_left_to_walk_ = false;
  try {
    optimizer_->begin_step();
    // One walk of the modules for the parameters and the buffers (WatchedBuffers::follow reads it).
    parameter_sequence(*model_, optimizer_.get(), sequence_, &buffers_.sequence());
    if (layout_.same_sequence(sequence_, params_.size())) {
      // Only while the layers are planned: a step that cannot reach the walk must try again here.
      if (tensors_in_walk && layout_error_.empty()) {
        tensors_left_to_walk_ = true;
        return;
      }
      // Whether the weights were written since the last step matters only to a copy (or
      // norms) of them that the next step would trust: without one, their versions are not read.
      if (LayoutChange same; layout_.unchanged(sequence_, params_, same, /*compare_values=*/snapshot_current_)) {
        if (same.weights) snapshot_current_ = false;
        layout_error_.clear();
        return;
      }
    }
    follow_changed_layout();
  } catch (const std::exception& e) {
    // The old plan is intact but the model may have left it (another device): until the
    // layers can be planned, every step's reductions fail, safely and counted (reduce()).
    layout_error_ = std::string("the model's parameters changed and could not be followed: ") + e.what();
  }
}

void Probe::Impl::follow_changed_layout() {
  const ModelParameters now = parameters_of(*model_, optimizer_.get());
  const LayoutChange change = layout_.compare(now.params);
  if (!change.layout) {
    layout_.remember_sequence(sequence_);
    // The same layers, in other places or groups of the optimizer: the groups' lrs follow.
    reducer_.measure_updates_of(optimizer_.get());
  }
  // Weights written outside the step: the copy the last update pass kept is not W. (They
  // are remembered as the step's own again at end_step.)
  if (change.weights) snapshot_current_ = false;
  if (change.layout) {
    if (now.params.empty()) throw std::runtime_error("the model has no parameters any more (" + change.what + ")");
    replan(now, change.what);
  } else if (const std::string renamed = alias_change(now, description_); !renamed.empty()) {
    // The same layers under other names besides their own: only the description changes.
    describe_layers(now, options_.layer_detail_above, description_);
    if (publisher_) publisher_->describe(description_);
    add_event(wire::event_kind::kLayoutChanged, "", "the model's parameters changed after the last step: " + renamed + "; the run is re-described");
  }
  layout_error_.clear();
}

void Probe::Impl::replan(const ModelParameters& now, const std::string& what) {
  // Everything that can fail first, while the old plan stands.
  std::vector<std::string> names = column(now.params, &NamedParams::value_type::first);
  std::vector<torch::Tensor> params = column(now.params, &NamedParams::value_type::second);
  std::vector<bool> swapped = swapped_parameters(*model_, params);
  LayerReducer reducer(params, options_.measure_in_backward, swapped);
  reducer.measure_updates_of(optimizer_.get());
  wire::RunDescription description = description_;   // the same run: its id, start and watches
  describe_layers(now, options_.layer_detail_above, description);
  ParameterLayout layout(now.params, sequence_);

  order_.track(params, std::move(swapped));
  names_ = std::move(names);
  params_ = std::move(params);
  reducer_ = std::move(reducer);
  layout_ = std::move(layout);
  description_ = std::move(description);
  record_.layer_count = static_cast<uint32_t>(params_.size());
  snapshot_current_ = false;
  // In order with the records: a subscriber reads the new layers before the first record of them.
  if (publisher_) publisher_->describe(description_);
  add_event(wire::event_kind::kLayoutChanged, "",
            "the model's parameters changed after the last step: " + what + "; its " +
                std::to_string(params_.size()) + " layers are measured as they are now, and the run is re-described");
}

}  // namespace keel::probe
