// Probe::Impl's control side: commands from the dashboard (taken and answered at the step
// boundary; a dump asked for is taken by CheckpointDumps), subscription resets and refused
// clients, each turned into events of the step they are seen in.
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
    if (!dumps_.writer_idle()) {
      ack.error = "a dump is still being written; ask again once its acknowledgement arrives";
      return ack;
    }
    if (std::string refusal = dumps_.refusal(); !refusal.empty()) {
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
