#include "remote_control.hpp"

#include "keel/wire/vocabulary.hpp"
#include "layout/run_description.hpp"

namespace keel::probe {

void RemoteControl::take_commands(const Run& run) {
  if (!commands_) return;
  try {
    if (commands_->take(taken_)) {
      describe_due_ = false;
      for (const PendingCommand& pending : taken_) {
        if (auto ack = apply(pending, run)) acks_.emplace_back(pending.ticket, std::move(*ack));
      }
      if (describe_due_ && run.publisher) run.publisher->describe(run.description);
    }
  } catch (const std::exception& e) {
    run.events.add_probe_error(run.step, "taking commands", e.what(),
                               "commands taken but not answered time out on the client");
  }
  // Answered now rather than after the step: the decision is made, and the round trip stays
  // within one step interval.
  for (const auto& [ticket, ack] : acks_) commands_->reply(ticket, ack);
  acks_.clear();
}

bool RemoteControl::skips(int64_t step) {
  // A step scheduled by an at_step skip is taken off the schedule whether or not a "next
  // updates" skip also covers it: either way it is skipped once.
  const bool scheduled_skip = !scheduled_skips_.empty() && scheduled_skips_.erase(step) > 0;
  if (skips_left_ == 0 && !scheduled_skip) return false;
  if (skips_left_ > 0) --skips_left_;
  return true;
}

std::optional<wire::Ack> RemoteControl::apply(const PendingCommand& pending, const Run& run) {
  const int64_t step = run.step;
  const wire::Command& command = pending.command;
  wire::Ack ack;
  ack.id = command.id;
  if (command.kind == wire::command_kind::kSkip && command.at_step >= 0) {
    // Every rank of a data-parallel job is sent the same steps; a rank that can no longer skip
    // them says so rather than skip others (its replica would diverge either way, and the
    // dashboard shows which rank refused).
    if (command.at_step < step) {
      ack.error = "step " + std::to_string(command.at_step) + " is already trained (this probe is at step " +
                  std::to_string(step) + ")";
      return ack;
    }
    if (command.at_step - step > kMaxSkipLead) {
      ack.error = "step " + std::to_string(command.at_step) + " is more than " + std::to_string(kMaxSkipLead) +
                  " steps ahead (this probe is at step " + std::to_string(step) + ")";
      return ack;
    }
    if (int64_t(scheduled_skips_.size()) + command.count > kMaxSkipCount) {
      ack.error = "skip would leave more than " + std::to_string(kMaxSkipCount) + " steps scheduled";
      return ack;
    }
    for (int64_t s = command.at_step; s < command.at_step + command.count; ++s) scheduled_skips_.insert(s);
    ack.step = command.at_step;
    ack.count = command.count;
  } else if (command.kind == wire::command_kind::kSkip) {
    if (skips_left_ + command.count > kMaxSkipCount) {
      ack.error = "skip would leave " + std::to_string(skips_left_ + command.count) +
                  " updates pending, more than " + std::to_string(kMaxSkipCount);
      return ack;
    }
    // Queued behind a skip still running, so the first skipped step of this one comes after.
    ack.step = step + skips_left_;
    ack.count = command.count;
    skips_left_ += command.count;
  } else if (command.kind == wire::command_kind::kDump) {
    const auto now = Clock::now();
    if (dump_requested_) {
      ack.error = "a dump is already requested at step " + std::to_string(step);
      return ack;
    }
    if (!run.dumps.writer_idle()) {
      ack.error = "a dump is still being written; ask again once its acknowledgement arrives";
      return ack;
    }
    if (std::string refusal = run.dumps.refusal(); !refusal.empty()) {
      ack.error = std::move(refusal);
      return ack;
    }
    if (last_command_dump_ && now - *last_command_dump_ < std::chrono::duration<double>(run.options.dump_min_interval_secs)) {
      const double ago = std::chrono::duration<double>(now - *last_command_dump_).count();
      ack.error = "dumps are limited to one every " + std::to_string(run.options.dump_min_interval_secs).substr(0, 4) +
                  " s; the last one was asked " + std::to_string(ago).substr(0, 4) + " s ago";
      return ack;
    }
    last_command_dump_ = now;
    dump_requested_ = DumpRequest{pending.ticket, command.id, sanitize_label(command.label)};
    return std::nullopt;
  } else if (command.kind == wire::command_kind::kPolicy) {
    if (!set_policy(command.policy, command.enable, run)) {
      ack.error = "unknown policy \"" + command.policy + "\"";
      return ack;
    }
    ack.step = step;
    run.events.add(step, wire::event_kind::kPolicy, "",
                   command.policy + (command.enable ? " on" : " off") + " from step " + std::to_string(step) +
                       " (command " + std::to_string(command.id) + ")");
  } else if (command.kind == wire::command_kind::kRewind) {
    if (!ask_rewind(command, run, ack)) return ack;
  } else if (command.kind == wire::command_kind::kDescribe) {
    describe_due_ = true;
    ack.step = step;
  } else {
    ack.error = "unknown command kind \"" + command.kind + "\"";
    return ack;
  }
  ack.ok = true;
  return ack;
}

bool RemoteControl::ask_rewind(const wire::Command& command, const Run& run, wire::Ack& ack) {
  const int64_t step = run.step;
  if (rewind_requested_) {
    ack.error = "a rewind to step " + std::to_string(rewind_requested_->to_step) + " is already pending";
    return false;
  }
  if (!run.snapshots.enabled()) {
    ack.error = "this run keeps no snapshots to rewind to (the probe's rewind_every is 0)";
    return false;
  }
  const int64_t wanted = command.to_step < 0 ? step : command.to_step;
  const std::optional<int64_t> to = run.snapshots.newest_at_or_before(wanted);
  if (!to) {
    std::string kept;
    for (const int64_t s : run.snapshots.steps()) kept += (kept.empty() ? "" : ", ") + std::to_string(s);
    ack.error = "no snapshot at or before step " + std::to_string(wanted) + " (kept: " +
                (kept.empty() ? "none yet" : kept) + ")";
    return false;
  }
  if (command.at_step >= 0 && command.at_step < step) {
    ack.error = "step " + std::to_string(command.at_step) + " is already trained (this probe is at step " +
                std::to_string(step) + ")";
    return false;
  }
  rewind_requested_ = RewindRequest{*to, command.at_step, "command " + std::to_string(command.id)};
  ack.step = *to;
  return true;
}

bool RemoteControl::set_policy(const std::string& name, bool enable, const Run& run) {
  if (name == wire::policy::kSkipNonfinite) {
    run.options.skip_on_nonfinite = enable;
  } else if (name == wire::policy::kSkipSpike) {
    run.options.skip_on_spike = enable;
  } else if (name == wire::policy::kDumpNonfinite) {
    run.options.dump_on_nonfinite = enable;
  } else {
    return false;
  }
  run.description.policies_on = policies_on(run.options);
  describe_due_ = true;
  return true;
}

// A refused client is told only that the handshake failed (ZeroMQ says no more); the run
// says who was refused, on which socket, so its owner learns of it.
void RemoteControl::report_refusals(Publisher* publisher, StepEvents& events, int64_t step) {
  const auto report = [&](const char* socket) {
    for (const AuthRefusal& r : refusals_) {
      const std::string attempts =
          "refused " + std::to_string(r.attempts) + " " + socket + " connection attempt(s) ";
      if (r.client_key.empty() && r.address.rfind("(handshake", 0) == 0) {
        // A client with the wrong server key (another user's own) or none fails before ZAP.
        events.add(step, wire::event_kind::kAuthRefused, "",
                   attempts + "that failed the CURVE handshake: the client does not hold this run's key (another "
                              "user, or keys meant for another run)");
      } else {
        events.add(step, wire::event_kind::kAuthRefused, "",
                   attempts + "from " + r.address + " with client key " +
                       (r.client_key.empty() ? "(none)" : r.client_key) + ": not on the allowed list");
      }
    }
  };
  try {
    if (commands_ && commands_->take_refusals(refusals_)) report("command");
    if (publisher && publisher->take_refusals(refusals_)) report("telemetry");
  } catch (const std::exception& e) {
    events.add_probe_error(step, "reporting refused clients", e.what(), "training went on; the refusals are not reported");
  }
}

}  // namespace keel::probe
