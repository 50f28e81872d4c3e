#include "net/backfill.hpp"

#include <sstream>
#include <utility>
#include <variant>

#include "keel/wire/vocabulary.hpp"

namespace keel::app {
namespace {

std::string seconds_text(double seconds) {
  std::ostringstream out;
  out << seconds << " s";
  return out.str();
}

}  // namespace

Backfill::Backfill(BackfillOptions options) : options_(options) {}

void Backfill::start(Clock::time_point now) {
  phase_ = BackfillPhase::kWaiting;
  request_due_ = true;
  request_id_ = 0;
  last_activity_ = now;
  history_.clear();
  history_steps_ = 0;
  history_events_.clear();
  dropping_overlap_ = false;
  dropping_event_overlap_ = false;
}

void Backfill::go_live(const std::string& status, std::vector<keel::wire::Message>& out) {
  for (keel::wire::Message& message : held_) out.push_back(std::move(message));
  held_.clear();
  history_.clear();
  history_steps_ = 0;
  history_events_.clear();
  phase_ = BackfillPhase::kLive;
  request_due_ = false;
  request_id_ = 0;
  status_ = status;
  ++outcomes_;
}

void Backfill::on_live(keel::wire::Message&& message, Clock::time_point now,
                       std::vector<keel::wire::Message>& out) {
  if (const auto* description = std::get_if<keel::wire::RunDescription>(&message)) {
    const bool restarted = phase_ != BackfillPhase::kIdle && !run_id_.empty() &&
                           description->run_id != run_id_;
    const std::string previous_run = run_id_;
    run_id_ = description->run_id;
    if (phase_ == BackfillPhase::kIdle || restarted) {
      if (restarted && phase_ == BackfillPhase::kWaiting) {
        // What was held belongs to the old run, which is over: deliver it as it came.
        go_live("no backfill for run " + previous_run + ": the trainer restarted as run " +
                    run_id_,
                out);
      }
      start(now);
      // The description goes out at once, so the dashboard names the run while it waits.
      out.push_back(std::move(message));
      return;
    }
  }
  if (phase_ == BackfillPhase::kIdle) {
    start(now);
    held_.push_back(std::move(message));
    return;
  }
  if (phase_ == BackfillPhase::kWaiting) {
    if (held_.size() < options_.max_held) {
      held_.push_back(std::move(message));
      return;
    }
    go_live("no backfill: " + std::to_string(held_.size()) +
                " live messages arrived before the history did",
            out);
  }
  if (dropping_overlap_) {
    if (const auto* record = std::get_if<keel::wire::StepRecord>(&message)) {
      if (record->step <= overlap_through_step_) return;
      dropping_overlap_ = false;
    }
  }
  if (dropping_event_overlap_) {
    if (const auto* event = std::get_if<keel::wire::Event>(&message)) {
      if (event->seq <= event_overlap_through_seq_) return;
      dropping_event_overlap_ = false;
    }
  }
  out.push_back(std::move(message));
}

keel::wire::Command Backfill::history_command(uint64_t id) const {
  keel::wire::Command command;
  command.rank = -1;
  command.id = id;
  command.kind = wire::command_kind::kHistory;
  command.count = options_.history_count;
  return command;
}

void Backfill::request_sent(uint64_t id, Clock::time_point now) {
  request_due_ = false;
  request_id_ = id;
  last_activity_ = now;
  history_.clear();
  history_steps_ = 0;
  history_events_.clear();
}

void Backfill::request_failed(const std::string& why, std::vector<keel::wire::Message>& out) {
  if (phase_ != BackfillPhase::kWaiting) return;
  go_live("no backfill: " + why, out);
}

void Backfill::on_history_step(keel::wire::StepRecord&& record, Clock::time_point now) {
  if (phase_ != BackfillPhase::kWaiting || request_id_ == 0) return;
  last_activity_ = now;
  if (history_steps_ < options_.history_count) {
    history_.emplace_back(std::move(record));
    ++history_steps_;
  }
}

void Backfill::on_history_description(keel::wire::RunDescription&& description, Clock::time_point now) {
  if (phase_ != BackfillPhase::kWaiting || request_id_ == 0) return;
  last_activity_ = now;
  // A probe keeps at most as many as it keeps steps; the bound only guards against a peer that lies.
  if (history_.size() - static_cast<size_t>(history_steps_) < options_.max_held) history_.emplace_back(std::move(description));
}

void Backfill::on_history_event(keel::wire::Event&& event, Clock::time_point now) {
  if (phase_ != BackfillPhase::kWaiting || request_id_ == 0) return;
  last_activity_ = now;
  // The probe keeps at most a few thousand; the bound only guards against a peer that lies.
  if (history_events_.size() < options_.max_held) history_events_.push_back(std::move(event));
}

void Backfill::on_ack(const keel::wire::Ack& ack, std::vector<keel::wire::Message>& out) {
  if (phase_ != BackfillPhase::kWaiting || request_id_ == 0 || ack.id != request_id_) {
    // The records before this ack answered some other request (one given up on).
    history_.clear();
    history_steps_ = 0;
    history_events_.clear();
    return;
  }
  if (!ack.ok) {
    go_live("no backfill: the probe refused the history request: " + ack.error, out);
    return;
  }
  bool has_live_step = false, has_live_seq = false;
  int64_t first_live_step = 0;
  uint64_t first_live_seq = 0;
  for (const keel::wire::Message& message : held_) {
    const auto* record = std::get_if<keel::wire::StepRecord>(&message);
    const auto* event = std::get_if<keel::wire::Event>(&message);
    if (record != nullptr && !has_live_step) {
      has_live_step = true;
      first_live_step = record->step;
    }
    if ((record != nullptr || event != nullptr) && !has_live_seq) {
      has_live_seq = true;
      first_live_seq = record != nullptr ? record->seq : event->seq;
    }
  }
  size_t events_delivered = 0;
  uint64_t newest_event_seq = 0;
  for (keel::wire::Event& event : history_events_) {
    if (has_live_seq && event.seq >= first_live_seq) continue;
    if (events_delivered > 0 && event.seq <= newest_event_seq) continue;
    newest_event_seq = event.seq;
    ++events_delivered;
    out.emplace_back(std::move(event));
  }
  if (!has_live_seq && events_delivered > 0) {
    dropping_event_overlap_ = true;
    event_overlap_through_seq_ = newest_event_seq;
  }
  const size_t received = static_cast<size_t>(history_steps_);
  size_t delivered = 0;
  int64_t first_step = 0, last_step = 0;
  keel::wire::RunDescription* layout = nullptr;   // the newest description not delivered yet
  bool layout_delivered = false;
  for (keel::wire::Message& message : history_) {
    if (auto* description = std::get_if<keel::wire::RunDescription>(&message)) {
      layout = description;
      continue;
    }
    keel::wire::StepRecord& record = std::get<keel::wire::StepRecord>(message);
    // Oldest first and strictly before the live stream: the seam has neither hole nor twin.
    if (delivered > 0 && record.step <= last_step) continue;
    if (has_live_step && record.step >= first_live_step) continue;
    if (layout != nullptr) {
      out.emplace_back(std::move(*layout));
      layout = nullptr;
      layout_delivered = true;
    }
    if (delivered == 0) first_step = record.step;
    last_step = record.step;
    ++delivered;
    out.emplace_back(std::move(record));
  }
  // Back to the layers of the live stream (the newest the history had).
  if (layout_delivered && layout != nullptr) out.emplace_back(std::move(*layout));
  if (!has_live_step && delivered > 0) {
    dropping_overlap_ = true;
    overlap_through_step_ = last_step;
  }
  std::string status;
  if (delivered > 0) {
    status = "backfilled " + std::to_string(delivered) + " steps (" + std::to_string(first_step) +
             ".." + std::to_string(last_step) + ")";
  } else if (received == 0) {
    status = "backfilled no steps: the probe's history was empty";
  } else {
    status = "backfilled no steps: the live stream already began before the probe's history";
  }
  // Where the run starts in the dashboard when the history added nothing before it: a user
  // (and the fault test) can tell "from step 0" apart from "the start of the run is missing".
  if (delivered == 0 && has_live_step) status += "; live from step " + std::to_string(first_live_step);
  if (events_delivered > 0) {
    status += ", " + std::to_string(events_delivered) + (events_delivered == 1 ? " event" : " events");
  }
  if (ack.count != static_cast<int64_t>(received)) {
    status += "; the probe sent " + std::to_string(ack.count) + " records, " +
              std::to_string(received) + " arrived";
  }
  go_live(status, out);
}

void Backfill::on_tick(Clock::time_point now, std::vector<keel::wire::Message>& out) {
  if (phase_ != BackfillPhase::kWaiting) return;
  const double silent_secs = std::chrono::duration<double>(now - last_activity_).count();
  if (silent_secs < options_.timeout_secs) return;
  if (request_id_ == 0) {
    go_live("no backfill: the history request was not sent within " +
                seconds_text(options_.timeout_secs),
            out);
  } else {
    go_live("no backfill: no answer to the history request within " +
                seconds_text(options_.timeout_secs),
            out);
  }
}

}  // namespace keel::app
