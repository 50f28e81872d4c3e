// WatchedBuffers: the model's floating-point buffers as the step follows and measures them.
// Owns: the buffers as they were planned (followed every step, like the parameters), those
// watched among them (finite when planned: a buffer that holds NaN/Inf from the start, an
// attention mask of -inf, is one by design), their pass, this step's max |b| of each watched
// one once collected (empty: not measured), the buffers' identities as planned and as they
// are this step, and whether the last measured step's held a NaN/Inf. A buffer turning
// non-finite is an event and a dump, never a skip: the forward pass wrote it, and skipping
// the update cannot undo that.
// Thread: the training thread only.
// Never: fails the step: a failure of its own is the probe's (a probe_error) and leaves the
// buffers unmeasured, or measured as they were planned. The pass reads its results back in
// one copy (a wait on a device) when collected.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "keel/probe/trained_model.hpp"
#include "keel/wire/messages.hpp"
#include "layout/model_buffers.hpp"
#include "reduce/buffer_reducer.hpp"
#include "step_events.hpp"
#include "transport/publisher.hpp"

namespace keel::probe {

class WatchedBuffers {
 public:
  // Plans the buffers to watch among `all` (one pass over them, read at once: at attach and
  // when the set changes); `description` lists them. Throws what the pass throws, with nothing
  // changed.
  void plan(ModelBuffers all, TrainedModel& model, wire::RunDescription& description);
  // The model's float buffers now, from their identities this step (sequence(), which the
  // layout's walk fills): a changed set is planned again, re-described and told.
  void follow(TrainedModel& model, wire::RunDescription& description, Publisher* publisher, StepEvents& events,
              int64_t step);
  // This step's pass: started before the gradients' (so a device runs both at once), read
  // into absmax() before the step is recorded.
  void enqueue(StepEvents& events, int64_t step);
  void collect(StepEvents& events, int64_t step);

  // Whether this step's buffers hold a NaN/Inf and the last recorded step's did not.
  bool turn_nonfinite() const;
  // As a step's events are raised: the nonfinite_buffer event of a step whose buffers turned
  // non-finite (naming the first in model order, NaN or Inf, the others, and what a skip cannot
  // do), and this step's buffers become the last. A step that did not measure them says
  // nothing: the run of non-finite buffers neither starts nor ends.
  void tell_turned_nonfinite(StepEvents& events, int64_t step);

  const ModelBuffers& all() const { return all_; }
  const ModelBuffers& watched() const { return watched_; }
  const std::vector<float>& absmax() const { return absmax_; }
  // This step's identities of the buffers (reused), for the layout's walk to fill.
  std::vector<const void*>& sequence() { return sequence_; }

 private:
  // The first watched buffer (model order) whose max |b| this step is NaN/Inf, or -1.
  int first_nonfinite() const;

  ModelBuffers all_;
  ModelBuffers watched_;
  BufferReducer reducer_;
  std::vector<float> absmax_;
  // The buffers' identities (parameter_sequence) as they were planned, and as they are this step.
  std::vector<const void*> planned_sequence_, sequence_;
  bool nonfinite_last_step_ = false;
};

}  // namespace keel::probe
