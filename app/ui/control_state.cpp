#include "ui/control_state.hpp"

#include "keel/wire/vocabulary.hpp"
#include "ui/verbose_log.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

namespace keel::app::ui {
namespace {

int64_t unix_ns_now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string megabytes(int64_t bytes) {
  std::ostringstream out;
  out.precision(3);
  out << static_cast<double>(bytes) / (1024.0 * 1024.0) << " MB";
  return out.str();
}

bool final_state(CommandState state) {
  return state == CommandState::kAcknowledged || state == CommandState::kRefused;
}

}  // namespace

std::string status_text(const CommandStatus& status) {
  std::string text;
  switch (status.state) {
    case CommandState::kPending: return "pending";
    case CommandState::kRefused: return "refused: " + status.error;
    case CommandState::kTimedOut: return "timed out: " + status.error;
    case CommandState::kAcknowledged: break;
  }
  const std::string step = std::to_string(status.ack.step);
  const keel::wire::Command& command = status.command;
  if (command.kind == wire::command_kind::kSkip) {
    text = command.count == 1 ? "skipped step " + step
                              : "skipping " + std::to_string(command.count) + " steps from step " + step;
  } else if (command.kind == wire::command_kind::kDump) {
    text = "dump at step " + step + ": " + status.ack.path + " (" + megabytes(status.ack.bytes) + ")";
  } else if (command.kind == wire::command_kind::kPolicy) {
    text = command.policy + (command.enable ? " on" : " off") + " from step " + step;
  } else {
    text = "acknowledged at step " + step;
  }
  if (status.answered_late) text += " (answered after the timeout)";
  return text;
}

void ControlState::submitted(const std::string& control, uint64_t id,
                             const keel::wire::Command& command) {
  const auto previous = last_by_control_.find(control);
  if (previous != last_by_control_.end()) statuses_.erase(previous->second);
  last_by_control_[control] = id;
  CommandStatus status;
  status.id = id;
  status.command = command;
  status.command.id = id;
  statuses_[id] = status;
  std::string target;
  if (command.rank >= 0) target += " rank " + std::to_string(command.rank);
  if (command.at_step >= 0) target += " at step " + std::to_string(command.at_step);
  verbose_log("keel: sent command %s id %llu%s", command.kind.c_str(), static_cast<unsigned long long>(id),
              target.c_str());
}

void ControlState::update(const CommandStatus& status) {
  const auto found = statuses_.find(status.id);
  if (found == statuses_.end()) return;
  CommandStatus& known = found->second;
  if (known.state == status.state && known.answered_late == status.answered_late) return;
  known = status;
  if (status.state == CommandState::kPending) return;
  const std::string text = status_text(status);
  verbose_log("keel: command %s id %llu %s at step %lld: %s", status.command.kind.c_str(),
              static_cast<unsigned long long>(status.id), command_state_name(status.state),
              static_cast<long long>(status.ack.step), text.c_str());
  if (status.state == CommandState::kAcknowledged && status.command.kind == wire::command_kind::kPolicy) {
    policies_[status.command.policy] = status.command.enable ? PolicyState::kOn : PolicyState::kOff;
  }
  CommandEntry entry;
  entry.id = status.id;
  entry.kind = status.command.kind;
  entry.state = status.state;
  entry.step = final_state(status.state) ? status.ack.step : -1;
  entry.text = text;
  if (status.state == CommandState::kAcknowledged && status.command.kind == wire::command_kind::kDump) entry.path = status.ack.path;
  entry.stamp_unix_ns = unix_ns_now();
  log_.push_front(std::move(entry));
  while (log_.size() > kMaxLog) log_.pop_back();
}

void ControlState::note_events(const std::deque<keel::wire::Event>& events) {
  // Newest first: apply the unseen ones oldest first, so the newest decides.
  size_t fresh = 0;
  while (fresh < events.size() && (!events_seen_any_ || events[fresh].seq > events_seen_seq_)) ++fresh;
  for (size_t i = fresh; i-- > 0;) {
    const keel::wire::Event& event = events[i];
    if (event.kind != wire::event_kind::kPolicy) continue;
    // The probe's sentence starts "NAME on" or "NAME off".
    for (const char* name : wire::kPolicyNames) {
      const std::string prefix = name;
      if (event.detail.compare(0, prefix.size() + 1, prefix + " ") != 0) continue;
      const std::string rest = event.detail.substr(prefix.size() + 1);
      if (rest.compare(0, 2, "on") == 0) policies_[prefix] = PolicyState::kOn;
      if (rest.compare(0, 3, "off") == 0) policies_[prefix] = PolicyState::kOff;
    }
  }
  if (!events.empty()) {
    events_seen_seq_ = events.front().seq;
    events_seen_any_ = true;
  }
}

void ControlState::note_description(const keel::wire::RunDescription& description) {
  if (!description.policies_on) return;
  if (description_seen_any_ && description.seq == description_seen_seq_) return;
  description_seen_any_ = true;
  description_seen_seq_ = description.seq;
  for (const char* name : wire::kPolicyNames) {
    const std::vector<std::string>& on_list = *description.policies_on;
    const bool on = std::find(on_list.begin(), on_list.end(), name) != on_list.end();
    policies_[name] = on ? PolicyState::kOn : PolicyState::kOff;
  }
}

void ControlState::new_run() {
  policies_.clear();
  events_seen_any_ = false;
  events_seen_seq_ = 0;
  description_seen_any_ = false;
  description_seen_seq_ = 0;
}

const CommandStatus* ControlState::latest(const std::string& control) const {
  const auto id = last_by_control_.find(control);
  if (id == last_by_control_.end()) return nullptr;
  const auto status = statuses_.find(id->second);
  return status == statuses_.end() ? nullptr : &status->second;
}

PolicyState ControlState::policy(const std::string& name) const {
  const auto found = policies_.find(name);
  return found == policies_.end() ? PolicyState::kUnknown : found->second;
}

}  // namespace keel::app::ui
