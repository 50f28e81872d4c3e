// Probe::Impl's control side: commands from the dashboard (taken and answered at the step
// boundary), checkpoint dumps and their results, subscription resets and refused clients, each
// turned into events of the step they are seen in.
#include <cstdio>
#include <filesystem>

#include "dump/checkpoint_capture.hpp"
#include "dump/stale_partial_dumps.hpp"
#include "probe_impl.hpp"
#include "layout/run_description.hpp"

namespace keel::probe {

void Probe::Impl::apply_commands() {
  if (!control_.commands) return;
  try {
    if (!control_.commands->take(control_.taken)) return;
    control_.describe_due = false;
    for (const PendingCommand& pending : control_.taken) {
      if (auto ack = apply_command(pending)) control_.acks.emplace_back(pending.ticket, std::move(*ack));
    }
    if (control_.describe_due && publisher_) publisher_->describe(description_);
  } catch (const std::exception& e) {
    report_probe_error("taking commands", e.what(), "commands taken but not answered time out on the client");
  }
}

// The command thread already checked kind, rank and argument ranges (check_command); this
// applies what depends on the run's state. No ack (nullopt) for a dump: the writer thread
// answers once the files are on disk.
std::optional<wire::Ack> Probe::Impl::apply_command(const PendingCommand& pending) {
  const wire::Command& command = pending.command;
  wire::Ack ack;
  ack.id = command.id;
  if (command.kind == "skip" && command.at_step >= 0) {
    // Every rank of a data-parallel job is sent the same steps; a rank that can no longer skip
    // them says so rather than skip others (its replica would diverge either way, and the
    // dashboard shows which rank refused).
    if (command.at_step < step_) {
      ack.error = "step " + std::to_string(command.at_step) + " is already trained (this probe is at step " +
                  std::to_string(step_) + ")";
      return ack;
    }
    if (command.at_step - step_ > kMaxSkipLead) {
      ack.error = "step " + std::to_string(command.at_step) + " is more than " + std::to_string(kMaxSkipLead) +
                  " steps ahead (this probe is at step " + std::to_string(step_) + ")";
      return ack;
    }
    if (int64_t(control_.scheduled_skips.size()) + command.count > kMaxSkipCount) {
      ack.error = "skip would leave more than " + std::to_string(kMaxSkipCount) + " steps scheduled";
      return ack;
    }
    for (int64_t s = command.at_step; s < command.at_step + command.count; ++s) control_.scheduled_skips.insert(s);
    ack.step = command.at_step;
    ack.count = command.count;
  } else if (command.kind == "skip") {
    if (control_.skips_left + command.count > kMaxSkipCount) {
      ack.error = "skip would leave " + std::to_string(control_.skips_left + command.count) +
                  " updates pending, more than " + std::to_string(kMaxSkipCount);
      return ack;
    }
    // Queued behind a skip still running, so the first skipped step of this one comes after.
    ack.step = step_ + control_.skips_left;
    ack.count = command.count;
    control_.skips_left += command.count;
  } else if (command.kind == "dump") {
    const auto now = Clock::now();
    if (control_.dump_requested) {
      ack.error = "a dump is already requested at step " + std::to_string(step_);
      return ack;
    }
    if (!dumps_.writer->accepts(CheckpointWriter::Admission::kWhenIdle)) {
      ack.error = "a dump is still being written; ask again once its acknowledgement arrives";
      return ack;
    }
    if (std::string refusal = dump_refusal(); !refusal.empty()) {
      ack.error = std::move(refusal);
      return ack;
    }
    if (control_.last_command_dump && now - *control_.last_command_dump < std::chrono::duration<double>(options_.dump_min_interval_secs)) {
      const double ago = std::chrono::duration<double>(now - *control_.last_command_dump).count();
      ack.error = "dumps are limited to one every " + std::to_string(options_.dump_min_interval_secs).substr(0, 4) +
                  " s; the last one was asked " + std::to_string(ago).substr(0, 4) + " s ago";
      return ack;
    }
    control_.last_command_dump = now;
    control_.dump_requested = DumpRequest{pending.ticket, command.id, sanitize_label(command.label)};
    return std::nullopt;
  } else if (command.kind == "policy") {
    if (!set_policy(command.policy, command.enable)) {
      ack.error = "unknown policy \"" + command.policy + "\"";
      return ack;
    }
    ack.step = step_;
    add_event("policy", "", command.policy + (command.enable ? " on" : " off") + " from step " +
                                std::to_string(step_) + " (command " + std::to_string(command.id) + ")");
  } else if (command.kind == "describe") {
    control_.describe_due = true;
    ack.step = step_;
  } else {
    ack.error = "unknown command kind \"" + command.kind + "\"";
    return ack;
  }
  ack.ok = true;
  return ack;
}

bool Probe::Impl::set_policy(const std::string& name, bool enable) {
  if (name == kPolicySkipNonfinite) {
    options_.skip_on_nonfinite = enable;
  } else if (name == kPolicySkipSpike) {
    options_.skip_on_spike = enable;
  } else if (name == kPolicyDumpNonfinite) {
    options_.dump_on_nonfinite = enable;
  } else {
    return false;
  }
  description_.policies_on = policies_on(options_);
  control_.describe_due = true;
  return true;
}

// Named after the step whose state it holds (a deferred step's dump is taken a step later,
// with that step's update skipped on the device: the same weights).
void Probe::Impl::take_dump(const std::string& reason, const std::optional<DumpRequest>& request) {
  DumpReason why;
  why.step = record_step_;
  why.reason = reason;
  // Every rank dumps the same step (an all-reduced NaN reaches them all): the rank tells them apart.
  if (options_.world_size > 1) why.rank = options_.rank;
  why.model = options_.model;
  if (request) {
    why.label = request->label;
    why.command_id = request->command_id;
  }
  CheckpointJob job;
  job.token = ++dumps_.next_token;
  job.step = record_step_;
  // Resolved now, on the training thread: the path the ack and the events report is where the
  // dump goes even if the trainer changes directory before the writer thread gets to it.
  job.dir = absolute_dir(options_.dump_dir);
  job.name = checkpoint_name(why);
  CommandServer* commands = control_.commands.get();
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
  std::string error = dump_refusal();
  if (error.empty() && !dumps_.writer->accepts(admission)) error = "a dump is still being written";
  // A sharded model's state_dict() is a collective: taken by every rank, or by none.
  if (skip_agreement_) error = agree_on_dump(error);
  if (error.empty()) {
    try {
      const auto telemetry = publisher_ ? publisher_->history() : std::vector<KeptMessage>{};
      job.files = capture_checkpoint(*model_, *optimizer_, description_, telemetry, why);
    } catch (const std::exception& e) {
      error = std::string("cannot serialise the model or optimizer: ") + e.what();
    }
  }
  if (error.empty() && dumps_.writer->submit(job, admission)) {
    ++dumps_.taken;
    return;
  }
  if (error.empty()) error = "a dump is still being written";
  add_event("dump_failed", "", "dump (" + reason + ") at step " + std::to_string(record_step_) + " not taken: " + error);
  CheckpointResult failed;
  failed.step = record_step_;
  failed.error = error;
  failed.path = (std::filesystem::path(job.dir) / job.name).string();
  job.on_written(failed);
}

std::string Probe::Impl::dump_refusal() const {
  if (dumps_.taken < options_.dump_max_count) return "";
  return "this probe has taken the " + std::to_string(options_.dump_max_count) +
         " dumps it may (ProbeOptions::dump_max_count)";
}

void Probe::Impl::remove_stale_dumps() {
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
  stale_dumps_note_ = note;
}

void Probe::Impl::report_finished_dumps() {
  if (!stale_dumps_note_.empty()) {
    add_event("dumps_cleaned", "", stale_dumps_note_);
    stale_dumps_note_.clear();
  }
  if (!dumps_.writer->poll(dumps_.results)) return;
  for (const CheckpointResult& r : dumps_.results) {
    if (r.ok) {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.2f", r.write_secs);
      add_event("dump", "", "wrote " + r.path + " (" + std::to_string(r.bytes) + " bytes, " + secs + " s)", r.step);
    } else {
      --dumps_.taken;
      add_event("dump_failed", "", r.error, r.step);
    }
  }
}

// A refused client is told only that the handshake failed (ZeroMQ says no more); the run
// says who was refused, on which socket, so its owner learns of it.
void Probe::Impl::report_refusals() {
  const auto report = [this](const char* socket) {
    for (const AuthRefusal& r : control_.refusals) {
      const std::string attempts =
          "refused " + std::to_string(r.attempts) + " " + socket + " connection attempt(s) ";
      if (r.client_key.empty() && r.address.rfind("(handshake", 0) == 0) {
        // A client with the wrong server key (another user's own) or none fails before ZAP.
        add_event("auth_refused", "", attempts + "that failed the CURVE handshake: the client does not hold this run's "
                                                 "key (another user, or keys meant for another run)");
      } else {
        add_event("auth_refused", "", attempts + "from " + r.address + " with client key " +
                                          (r.client_key.empty() ? "(none)" : r.client_key) + ": not on the allowed list");
      }
    }
  };
  try {
    if (control_.commands && control_.commands->take_refusals(control_.refusals)) report("command");
    if (publisher_ && publisher_->take_refusals(control_.refusals)) report("telemetry");
  } catch (const std::exception& e) {
    report_probe_error("reporting refused clients", e.what(), "training went on; the refusals are not reported");
  }
}

void Probe::Impl::report_subscription_resets() {
  if (!publisher_) return;
  const uint64_t resets = publisher_->subscription_resets();
  if (resets == subscription_resets_seen_) return;
  subscription_resets_seen_ = resets;
  add_event("telemetry_reset", "",
            "telemetry subscribers held more than " + std::to_string(PublisherOptions{}.max_subscriptions) +
                " subscriptions (a client subscribing without bound): every telemetry connection was closed (" +
                std::to_string(resets) + " time(s) so far); clients reconnect, and what was sent meanwhile shows as a gap");
}

}  // namespace keel::probe
