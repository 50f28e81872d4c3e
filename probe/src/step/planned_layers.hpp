// PlannedLayers: the model's parameters as the step's layers were planned for them, and that
// plan followed as each step begins (the model may change after attach: ParameterLayout).
// Owns: the layers' names and tensors, the LayerReducer planned for them (with the gradient
// accumulators' hooks that measure in backward), the BackwardOrder (its hooks), the
// ParameterLayout they were planned from, this step's parameter_sequence (reused), why the
// layers could not be planned again for the model as it is (while set, every step's reductions
// fail), whether this step's gradient walk checks the tensors (LayoutCheckInWalk), and whether
// the weight snapshot is W as the last step left it.
// Thread: the training thread; the hooks run where autograd runs them (BackwardOrder and
// LayerReducer say how).
// Never: allocates while the model is as planned (the walk fills its sequence in place), or
// replaces a plan before the new one is whole: a model that cannot be planned again leaves the
// old plan intact, and error() says why.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "keel/probe/optimizer_adapter.hpp"
#include "keel/probe/probe_options.hpp"
#include "keel/probe/trained_model.hpp"
#include "keel/wire/messages.hpp"
#include "layout/backward_order.hpp"
#include "layout/parameter_layout.hpp"
#include "layout_check_in_walk.hpp"
#include "reduce/layer_reducer.hpp"
#include "step_events.hpp"
#include "transport/publisher.hpp"

namespace keel::probe {

class PlannedLayers {
 public:
  // The layers planned for `parameters` (the model's now, not empty), their updates measured
  // with `optimizer`'s groups. Throws what the plan throws.
  PlannedLayers(const ModelParameters& parameters, TrainedModel& model, OptimizerAdapter* optimizer,
                const ProbeOptions& options);

  // What following the model reads and changes.
  struct Run {
    TrainedModel& model;
    OptimizerAdapter* optimizer;
    const ProbeOptions& options;
    wire::RunDescription& description;   // re-described when the layers or their names change
    Publisher* publisher;                // null without one
    StepEvents& events;
    int64_t step;                        // the step its events are of
    // The buffers' identities this step (WatchedBuffers::sequence), filled by the same walk.
    std::vector<const void*>& buffer_sequence;
  };
  // Compares the model's parameters with the planned ones: a changed layout is planned again
  // and re-described, weights written since the last step make the weight snapshot stale.
  // `tensors_in_walk`: when the same tensors are in the same places, each one's device, type,
  // shape and values are left to this step's gradient walk (take_walk_check). A failure is
  // kept in error(), not thrown.
  void follow(bool tensors_in_walk, const Run& run);

  // The check of each tensor that follow() left to this step's gradient walk, if it left one;
  // taken once.
  std::optional<LayoutCheckInWalk> take_walk_check();
  // Until the walk, the step does not rely on the tensors' devices, types or shapes.
  bool tensors_left_to_walk() const { return tensors_left_to_walk_; }
  // Weights were written since the last step: the snapshot is not W.
  void weights_written() { snapshot_current_ = false; }
  bool snapshot_current() const { return snapshot_current_; }
  // As a step ends: `snapshot_current`, whether the update pass left a snapshot that equals W
  // (its weights' versions remembered then); the backward order and the reducer rearmed.
  void end_step(bool snapshot_current);

  // Why the layers could not be planned for the model as it is now; empty when they were.
  const std::string& error() const { return error_; }
  const std::vector<std::string>& names() const { return names_; }
  const std::vector<torch::Tensor>& params() const { return params_; }
  LayerReducer& reducer() { return reducer_; }
  const LayerReducer& reducer() const { return reducer_; }
  const BackwardOrder& order() const { return order_; }

 private:
  // The slow part of follow(): what changed, and the layers planned again for it.
  void follow_changed(const Run& run);
  void replan(const ModelParameters& now, const std::string& what, const Run& run);

  std::vector<std::string> names_;
  std::vector<torch::Tensor> params_;
  LayerReducer reducer_;
  BackwardOrder order_;
  ParameterLayout layout_;   // the parameters names_, params_ and reducer_ were planned for
  std::vector<const void*> sequence_;   // this step's parameter_sequence (reused)
  std::string error_;
  // follow() found the same tensors in the same places and left the check of each one to this
  // step's gradient walk on the host: a layout planned wholly on the CPU with a gradient pass due.
  bool tensors_left_to_walk_ = false;
  bool snapshot_current_ = false;   // the snapshot equals W as left by the last step
};

}  // namespace keel::probe
