// Probe::Impl's watch on the model's floating-point buffers (BatchNorm's running statistics):
// planned at attach and when they change, measured each step beside the gradients, and the
// first non-finite one named.
#include <cmath>
#include <string>

#include "layout/parameter_sequence.hpp"
#include "probe_impl.hpp"

namespace keel::probe {

void Probe::Impl::plan_buffers(ModelBuffers all) {
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
  buffers_ = std::move(all);
  watched_buffers_ = std::move(watched);
  buffer_reducer_ = std::move(reducer);
  description_.buffers = watched_buffers_.names;
  buffer_nonfinite_last_step_ = false;
  std::vector<const void*> parameters;
  parameter_sequence(*model_, nullptr, parameters, &planned_buffer_sequence_);
}

void Probe::Impl::follow_buffers() {
  try {
    // buffer_sequence_ is this step's, from follow_layout's walk of the modules.
    if (buffer_sequence_ == planned_buffer_sequence_) return;
    ModelBuffers now = float_buffers_of(*model_);
    if (now.same_as(buffers_)) {
      planned_buffer_sequence_ = buffer_sequence_;
      return;
    }
    const size_t before = watched_buffers_.names.size();
    plan_buffers(std::move(now));
    if (publisher_) publisher_->describe(description_);
    add_event("layout_changed", "",
              "the model's floating-point buffers changed after the last step (" + std::to_string(before) +
                  " watched before, " + std::to_string(watched_buffers_.names.size()) +
                  " now); they are measured as they are now, and the run is re-described");
  } catch (const std::exception& e) {
    report_probe_error("following the model's buffers", e.what(), "the buffers are measured as they were planned");
  }
}

void Probe::Impl::enqueue_buffers() {
  buffer_absmax_.clear();
  if (buffer_reducer_.size() == 0) return;
  try {
    buffer_reducer_.enqueue();
  } catch (const std::exception& e) {
    report_probe_error("measuring the model's buffers", e.what(), "buffers not measured this step");
  }
}

void Probe::Impl::collect_buffers() {
  buffer_absmax_.clear();
  if (!buffer_reducer_.pending()) return;
  try {
    buffer_reducer_.collect(buffer_absmax_);
  } catch (const std::exception& e) {
    buffer_absmax_.clear();
    report_probe_error("reading the model's buffers", e.what(), "buffers not measured this step");
  }
}

int Probe::Impl::first_nonfinite_buffer() const {
  for (size_t i = 0; i < buffer_absmax_.size(); ++i) {
    if (!std::isfinite(buffer_absmax_[i])) return static_cast<int>(i);
  }
  return -1;
}

bool Probe::Impl::buffers_turn_nonfinite() const {
  return !buffer_nonfinite_last_step_ && first_nonfinite_buffer() >= 0;
}

std::string Probe::Impl::describe_nonfinite_buffers() const {
  std::string first, others;
  size_t count = 0;
  for (size_t i = 0; i < buffer_absmax_.size(); ++i) {
    if (std::isfinite(buffer_absmax_[i])) continue;
    const std::string what = watched_buffers_.names[i] + (std::isnan(buffer_absmax_[i]) ? " (NaN)" : " (Inf)");
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
  return detail + "; the forward pass wrote them, so skipping the update does not undo them (eval mode and "
                  "checkpoints from now on use them)";
}

}  // namespace keel::probe
