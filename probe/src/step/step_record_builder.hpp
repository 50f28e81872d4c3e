// StepRecordBuilder: the record stage's message. A step's record (wire::StepRecord) is made
// here, over the last step's: its values per layer, or per module of a wide model
// (ProbeOptions::layer_detail_every), from the reductions; and the event of a watched tensor
// that turned non-finite, read off its watches.
// Owns: the record being made (and, between steps, the last one: Probe::last_record()) and
// whether the last step's watched tensors held a non-finite value.
// Thread: the training thread.
// Never: allocates once its vectors have grown to the model's width, or reads a device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "keel/probe/probe_options.hpp"
#include "keel/wire/messages.hpp"
#include "reduce/layer_reducer.hpp"
#include "step_events.hpp"

namespace keel::probe {

class StepRecordBuilder {
 public:
  // Every record names the rank, the run and the model.
  StepRecordBuilder(int32_t rank, std::string run, std::string model);

  wire::StepRecord& message() { return record_; }
  const wire::StepRecord& message() const { return record_; }

  // Whether a step goes out per layer: a skipped or blown-up step (the first non-finite layer
  // and a skip are read off its per-layer values), every layer_detail_every-th step, and any
  // step of a model without modules. Otherwise per module.
  static bool per_layer_due(const ProbeOptions& options, int64_t step, bool has_modules, bool applied, bool blown_up) {
    return !has_modules || !applied || blown_up || (step - options.first_step) % options.layer_detail_every == 0;
  }
  // The global grad norm (NaN without `grads_reduced`: the stats are then the last step's,
  // and a stale norm would pass for this one's) and the values of the metrics in `mask`,
  // per layer or per module of `modules` (their worst layer's, a count's sum).
  void fill_values(uint32_t mask, bool applied, bool per_layer, bool grads_reduced, const LayerReducer& reducer,
                   const std::vector<wire::ModuleRange>& modules);

  // The first_nonfinite_watch event of a step whose watches (in the record) turn non-finite.
  void tell_watch_nonfinite(StepEvents& events, int64_t step);

 private:
  void fill_layer_values(uint32_t mask, bool applied, const LayerReducer& reducer);
  void fill_module_values(uint32_t mask, bool applied, const LayerReducer& reducer,
                          const std::vector<wire::ModuleRange>& modules);

  wire::StepRecord record_;
  bool watch_nonfinite_last_step_ = false;
};

}  // namespace keel::probe
