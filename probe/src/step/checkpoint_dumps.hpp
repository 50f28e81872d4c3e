// CheckpointDumps: the run's checkpoint dumps (dump/checkpoint_writer.hpp) as the probe takes
// them: each one's state captured, handed to the writer's thread, its result told.
// Owns: the CheckpointWriter (and the thread that writes the files), the results it finished
// since the last step (reused), the step of the last automatic dump, the count of dumps on
// disk or being written (ProbeOptions::dump_max_count), and the note of the partial dumps
// removed at attach.
// Thread: the training thread (attach, a step's dumps, the probe's end); the writer's thread
// writes the files and sends a command's ack (CheckpointJob::on_written).
// Never: writes a file, or waits for the writer, on the training thread: take() captures the
// model's and the optimizer's state in memory (a copy; from a device, a wait) and hands it
// over, and a dump the writer cannot take now is refused and told.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dump/checkpoint_writer.hpp"
#include "keel/probe/optimizer_adapter.hpp"
#include "keel/probe/probe_options.hpp"
#include "keel/probe/trained_model.hpp"
#include "keel/wire/messages.hpp"
#include "step_events.hpp"
#include "transport/command_server.hpp"
#include "transport/publisher.hpp"

namespace keel::probe {

// A dump asked for by command: the ticket its ack goes back with, the command's id, its label.
struct DumpRequest {
  uint64_t ticket = 0;
  uint64_t command_id = 0;
  std::string label;
};

class CheckpointDumps {
 public:
  // `options`: the probe's, which outlive it (read as they are when a dump is taken).
  explicit CheckpointDumps(const ProbeOptions& options);

  // What a dump holds and who hears of it: the model's and optimizer's state, the run's
  // description, the publisher's recent telemetry (when there is one), and the command server
  // a command's ack goes back through.
  struct Subject {
    TrainedModel& model;
    OptimizerAdapter& optimizer;
    const wire::RunDescription& description;
    Publisher* publisher = nullptr;
    CommandServer* commands = nullptr;
  };
  // With a sharded job, the refusal of this rank's part (empty: it can take it) agreed with
  // the other ranks: why this rank does not take its part, "" when every rank can.
  using AgreeOnDump = std::function<std::string(const std::string& refusal)>;
  // Takes the dump of `step` for `reason` ("command" with `request`, else an automatic one),
  // or tells why not: a "dump_failed" event, and a command's failed ack. Named after the step
  // whose state it holds (a deferred step's dump is taken a step later, with that step's update
  // skipped on the device: the same weights).
  void take(int64_t step, const std::string& reason, const std::optional<DumpRequest>& request, const Subject& subject,
            const AgreeOnDump& agree, StepEvents& events);
  // Why no dump may be taken now, whatever asks for it; empty when one may.
  std::string refusal() const;
  // Whether a dump asked for by command would be taken now: the writer is idle.
  bool writer_idle() const { return writer_->accepts(CheckpointWriter::Admission::kWhenIdle); }
  // The automatic dump's cap (ProbeOptions::dump_nonfinite_every): whether one may be taken at
  // `step`, and the step one was taken at.
  bool automatic_allowed(int64_t step) const;
  void took_automatic(int64_t step) { last_automatic_step_ = step; }

  // At attach: removes the partial dumps in dump_dir whose writer process is gone
  // (dump/stale_partial_dumps.hpp), to be told at the first step.
  void remove_stale();
  // "dump" and "dump_failed" events for the dumps written since the last call, and once, the
  // "dumps_cleaned" event of remove_stale() (of `step`).
  void report_finished(StepEvents& events, int64_t step);
  // The probe's end: the dump still being written is finished (report_finished() tells it).
  void finish() { writer_->finish(); }

 private:
  const ProbeOptions& options_;
  std::unique_ptr<CheckpointWriter> writer_;
  std::vector<CheckpointResult> results_;   // reused
  std::optional<int64_t> last_automatic_step_;
  uint64_t next_token_ = 0;
  // On disk or still with the writer, failures not counted (ProbeOptions::dump_max_count):
  // two dumps in the writer at once must not pass the cap between them.
  int64_t taken_ = 0;
  std::string stale_note_;   // remove_stale()'s, until the first step tells it
};

}  // namespace keel::probe
