// Probe::Impl's rewind (docs/rewind.md): the snapshots taken as steps end (StateSnapshots), and
// a rewind a command asked for, taken in the step it interrupts (skipped) before its record.
#include <cstdio>
#include <string>

#include "keel/wire/vocabulary.hpp"
#include "probe_impl.hpp"

namespace keel::probe {

void Probe::Impl::take_snapshot_if_due(int64_t next) {
  if (!snapshots_.due(next)) return;
  try {
    std::vector<torch::Tensor> buffers;
    model_->buffers(buffers);
    snapshots_.take(next, TrainingState{layers_.params(), buffers, *optimizer_, scaler_});
  } catch (const std::exception& e) {
    report_probe_error("taking the snapshot of step " + std::to_string(next), e.what(),
                       "no snapshot of that step; training goes on, and a rewind goes to an older one");
  }
}

std::optional<int64_t> Probe::Impl::rewind(int64_t from_step) {
  const RemoteControl::RewindRequest request = *control_.rewind_requested();
  control_.rewind_taken();
  const auto start = Clock::now();
  std::vector<torch::Tensor> buffers;
  try {
    model_->buffers(buffers);
    snapshots_.restore(request.to_step, TrainingState{layers_.params(), buffers, *optimizer_, scaler_});
  } catch (const std::exception& e) {
    report_probe_error("rewinding to step " + std::to_string(request.to_step), e.what(),
                       "not rewound: step " + std::to_string(from_step) + "'s update was skipped, and training goes on",
                       from_step);
    return std::nullopt;
  }
  // The weights are the snapshot's: the update pass's copy of them is of the state left.
  layers_.weights_written();
  const double pause_ms = micros(Clock::now() - start) / 1000.0;
  char pause[32];
  std::snprintf(pause, sizeof pause, "%.1f", pause_ms);
  add_event(wire::event_kind::kRewind, "",
            "rewound from step " + std::to_string(from_step) + " to step " + std::to_string(request.to_step) +
                " (command " + std::to_string(request.command_id) + "): weights, buffers, optimizer state" +
                (scaler_ && scaler_->enabled() ? " and loss scale" : "") + " put back in " + pause +
                " ms; the batches of steps " + std::to_string(request.to_step) + ".." + std::to_string(from_step) +
                " were consumed and are not replayed unless the trainer's on_rewind repositions its data",
            from_step);
  return request.to_step;
}

}  // namespace keel::probe
