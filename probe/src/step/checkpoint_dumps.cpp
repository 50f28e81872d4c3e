#include "checkpoint_dumps.hpp"

#include <cstdio>
#include <filesystem>

#include "dump/checkpoint_capture.hpp"
#include "dump/stale_partial_dumps.hpp"
#include "keel/wire/vocabulary.hpp"

namespace keel::probe {

CheckpointDumps::CheckpointDumps(const ProbeOptions& options)
    : options_(options), writer_(std::make_unique<CheckpointWriter>()) {}

void CheckpointDumps::take(int64_t step, const std::string& reason, const std::optional<DumpRequest>& request,
                           const Subject& subject, const AgreeOnDump& agree, StepEvents& events) {
  DumpReason why;
  why.step = step;
  why.reason = reason;
  // Every rank dumps the same step (an all-reduced NaN reaches them all): the rank tells them apart.
  if (options_.world_size > 1) why.rank = options_.rank;
  why.model = options_.model;
  if (request) {
    why.label = request->label;
    why.command_id = request->command_id;
  }
  CheckpointJob job;
  job.token = ++next_token_;
  job.step = step;
  // Resolved now, on the training thread: the path the ack and the events report is where the
  // dump goes even if the trainer changes directory before the writer thread gets to it.
  job.dir = absolute_dir(options_.dump_dir);
  job.name = checkpoint_name(why);
  CommandServer* commands = subject.commands;
  const uint64_t ticket = request ? request->ticket : 0;
  const uint64_t command_id = why.command_id;
  job.on_written = [commands, ticket, command_id](const CheckpointResult& result) {
    if (commands == nullptr || ticket == 0) return;
    wire::Ack ack;
    ack.id = command_id;
    ack.ok = result.ok;
    ack.step = result.ok ? result.step : -1;
    ack.path = result.path;
    ack.bytes = result.bytes;
    ack.error = result.error;
    commands->reply(ticket, ack);
  };
  job.min_free_bytes = options_.dump_min_free_bytes;
  // The automatic dump at a blow-up's first step waits behind a dump still being written
  // rather than being lost: its state cannot be taken again later.
  const auto admission = request ? CheckpointWriter::Admission::kWhenIdle : CheckpointWriter::Admission::kBehindOne;
  std::string error = refusal();
  if (error.empty() && !writer_->accepts(admission)) error = "a dump is still being written";
  // A sharded model's state_dict() is a collective: taken by every rank, or by none.
  if (agree) error = agree(error);
  if (error.empty()) {
    try {
      const auto telemetry = subject.publisher ? subject.publisher->history() : std::vector<KeptMessage>{};
      job.files = capture_checkpoint(subject.model, subject.optimizer, subject.description, telemetry, why);
    } catch (const std::exception& e) {
      error = std::string("cannot serialise the model or optimizer: ") + e.what();
    }
  }
  if (error.empty() && writer_->submit(job, admission)) {
    ++taken_;
    return;
  }
  if (error.empty()) error = "a dump is still being written";
  events.add(step, wire::event_kind::kDumpFailed, "", "dump (" + reason + ") at step " + std::to_string(step) + " not taken: " + error);
  CheckpointResult failed;
  failed.step = step;
  failed.error = error;
  failed.path = (std::filesystem::path(job.dir) / job.name).string();
  job.on_written(failed);
}

std::string CheckpointDumps::refusal() const {
  if (taken_ < options_.dump_max_count) return "";
  return "this probe has taken the " + std::to_string(options_.dump_max_count) +
         " dumps it may (ProbeOptions::dump_max_count)";
}

bool CheckpointDumps::automatic_allowed(int64_t step) const {
  return !last_automatic_step_ || step - *last_automatic_step_ >= options_.dump_nonfinite_every;
}

void CheckpointDumps::remove_stale() {
  const StaleDumps stale = remove_stale_partial_dumps(absolute_dir(options_.dump_dir));
  if (stale.removed.empty() && stale.failed.empty()) return;
  std::string note;
  if (!stale.removed.empty()) {
    note = "removed " + std::to_string(stale.removed.size()) + " partial dump(s) of " +
           std::to_string(stale.bytes) + " bytes left in " + absolute_dir(options_.dump_dir) +
           " by trainers that are gone (killed while dumping): " + stale.removed.front();
    if (stale.removed.size() > 1) note += " and " + std::to_string(stale.removed.size() - 1) + " more";
  }
  if (!stale.failed.empty()) {
    note += std::string(note.empty() ? "" : "; ") + "could not remove " + std::to_string(stale.failed.size()) +
            " stale partial dump(s): " + stale.failed.front();
  }
  stale_note_ = note;
}

void CheckpointDumps::report_finished(StepEvents& events, int64_t step) {
  if (!stale_note_.empty()) {
    events.add(step, wire::event_kind::kDumpsCleaned, "", stale_note_);
    stale_note_.clear();
  }
  if (!writer_->poll(results_)) return;
  for (const CheckpointResult& r : results_) {
    if (r.ok) {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.2f", r.write_secs);
      events.add(r.step, wire::event_kind::kDump, "", "wrote " + r.path + " (" + std::to_string(r.bytes) + " bytes, " + secs + " s)");
    } else {
      --taken_;
      events.add(r.step, wire::event_kind::kDumpFailed, "", r.error);
    }
  }
}

}  // namespace keel::probe
