#include "watched_buffers.hpp"

#include <cmath>
#include <utility>

#include "keel/wire/vocabulary.hpp"
#include "layout/parameter_sequence.hpp"

namespace keel::probe {

void WatchedBuffers::plan(ModelBuffers all, TrainedModel& model, wire::RunDescription& description) {
  std::vector<float> absmax;
  BufferReducer all_pass(all.tensors);
  all_pass.enqueue();
  all_pass.collect(absmax);
  ModelBuffers watched;
  for (size_t i = 0; i < all.tensors.size(); ++i) {
    if (!std::isfinite(absmax[i])) continue;
    watched.names.push_back(all.names[i]);
    watched.tensors.push_back(all.tensors[i]);
  }
  BufferReducer reducer(watched.tensors);
  all_ = std::move(all);
  watched_ = std::move(watched);
  reducer_ = std::move(reducer);
  description.buffers = watched_.names;
  nonfinite_last_step_ = false;
  std::vector<const void*> parameters;
  parameter_sequence(model, nullptr, parameters, &planned_sequence_);
}

void WatchedBuffers::follow(TrainedModel& model, wire::RunDescription& description, Publisher* publisher,
                            StepEvents& events, int64_t step) {
  try {
    // sequence_ is this step's, from follow_layout's walk of the modules.
    if (sequence_ == planned_sequence_) return;
    ModelBuffers now = float_buffers_of(model);
    if (now.same_as(all_)) {
      planned_sequence_ = sequence_;
      return;
    }
    const size_t before = watched_.names.size();
    plan(std::move(now), model, description);
    if (publisher) publisher->describe(description);
    events.add(step, wire::event_kind::kLayoutChanged, "",
              "the model's floating-point buffers changed after the last step (" + std::to_string(before) +
                  " watched before, " + std::to_string(watched_.names.size()) +
                  " now); they are measured as they are now, and the run is re-described");
  } catch (const std::exception& e) {
    events.add_probe_error(step, "following the model's buffers", e.what(),
                           "the buffers are measured as they were planned");
  }
}

void WatchedBuffers::enqueue(StepEvents& events, int64_t step) {
  absmax_.clear();
  if (reducer_.size() == 0) return;
  try {
    reducer_.enqueue();
  } catch (const std::exception& e) {
    events.add_probe_error(step, "measuring the model's buffers", e.what(), "buffers not measured this step");
  }
}

void WatchedBuffers::collect(StepEvents& events, int64_t step) {
  absmax_.clear();
  if (!reducer_.pending()) return;
  try {
    reducer_.collect(absmax_);
  } catch (const std::exception& e) {
    absmax_.clear();
    events.add_probe_error(step, "reading the model's buffers", e.what(), "buffers not measured this step");
  }
}

int WatchedBuffers::first_nonfinite() const {
  for (size_t i = 0; i < absmax_.size(); ++i) {
    if (!std::isfinite(absmax_[i])) return static_cast<int>(i);
  }
  return -1;
}

bool WatchedBuffers::turn_nonfinite() const { return !nonfinite_last_step_ && first_nonfinite() >= 0; }

void WatchedBuffers::tell_turned_nonfinite(StepEvents& events, int64_t step) {
  if (absmax_.empty()) return;
  const int first_index = first_nonfinite();
  const bool turned = first_index >= 0 && !nonfinite_last_step_;
  nonfinite_last_step_ = first_index >= 0;
  if (!turned) return;
  std::string first, others;
  size_t count = 0;
  for (size_t i = 0; i < absmax_.size(); ++i) {
    if (std::isfinite(absmax_[i])) continue;
    const std::string what = watched_.names[i] + (std::isnan(absmax_[i]) ? " (NaN)" : " (Inf)");
    if (count == 0) {
      first = what;
    } else if (count <= 8) {
      others += (others.empty() ? "" : ", ") + what;
    }
    ++count;
  }
  std::string detail = "non-finite values in buffer " + first;
  if (count > 1) {
    detail += "; also in " + others + (count > 9 ? " and " + std::to_string(count - 9) + " more" : "");
  }
  detail += "; the forward pass wrote them, so skipping the update does not undo them (eval mode and "
            "checkpoints from now on use them)";
  events.add(step, wire::event_kind::kNonfiniteBuffer, watched_.names[static_cast<size_t>(first_index)], detail);
}

}  // namespace keel::probe
