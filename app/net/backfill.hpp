// keel app Backfill: joining a probe's history ring to its live stream without a hole or a
// duplicate at the seam (late attach, PROTOCOL §6 `history`).
//
// What it is for: a dashboard that attaches to a long run asks the probe for its recent steps.
// The live stream and the history answer travel on different sockets, so they overlap: steps
// published after the subscription went live but before the probe read its ring arrive twice.
// Backfill is the merge, as a plain state machine with no sockets and no clock of its own
// (every call takes `now`), so each case is unit-tested:
//   1. the first message from an endpoint (the probe sends its run description to every new
//      subscriber, so it means the subscription is live) makes a history request due; a
//      description is delivered at once, a step record is held;
//   2. while the request is out, every live message is held, in arrival order;
//   3. on the ack, the history records whose step is older than the first held live step are
//      delivered (oldest first), then the held live messages, and the stream goes live. A
//      history that spans a change of layers carries the descriptions between its records
//      (PROTOCOL §3.2): each goes out before the first record delivered after it, and the
//      newest goes out after the records, so every record is read with its own layers and
//      the dashboard ends on the live stream's. When
//      no live step was held yet, live steps up to the newest history step are dropped until
//      one newer arrives (they were in the history already). The history's events (sent after
//      its steps) go first, those whose seq is older than every held live step or event: steps
//      and events share the probe's sequence, so seq finds their seam exactly; when none was
//      held, live events up to the newest history event's seq are dropped likewise;
//   4. a refusal, silence for `timeout_secs`, or more held messages than `max_held` ends the
//      wait without backfill: the held messages are delivered and status() says why;
//   5. a description with another run id (the trainer restarted) starts the whole thing again
//      for the new run; an answer still on its way for the old request is recognised by its
//      ack id and thrown away.
// The history's records carry their original seq, lower than the live description's, so the
// model sees them as replays (not as sequence gaps), and their steps come before every live
// step it is given, so none is counted as a duplicate.
// Threads: a plain value owned by one thread (the receiver thread).
// Never: blocks, throws, or holds more than max_held live messages plus history_count records.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "keel/wire/messages.hpp"

namespace keel::app {

struct BackfillOptions {
  // A probe answers from its command thread at once; two seconds of silence means there is no
  // command socket there (an older probe, another program) and the user should not wait longer
  // for the live view. Measured from the request and from each history record, so a large ring
  // that is still streaming in is not cut off.
  double timeout_secs = 2.0;
  // Live messages held while the history is on its way; past this the stream goes live without
  // backfill rather than grow without bound (a very fast trainer and a very slow answer).
  size_t max_held = 65536;
  // Steps asked for: the protocol's maximum, i.e. the probe's whole ring.
  int64_t history_count = 1 << 20;
};

enum class BackfillPhase {
  kIdle,     // nothing heard from the endpoint yet
  kWaiting,  // a history request is due or out; live messages are held
  kLive,     // messages pass through
};

class Backfill {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Backfill(BackfillOptions options = {});

  // A message from the telemetry stream; appends to `out` what may be delivered now.
  void on_live(keel::wire::Message&& message, Clock::time_point now,
               std::vector<keel::wire::Message>& out);

  // Whether a history request should go out now; the caller sends history_command(id) and
  // then calls request_sent(id, now), or request_failed() when it cannot be sent.
  bool request_due() const { return request_due_; }
  keel::wire::Command history_command(uint64_t id) const;
  void request_sent(uint64_t id, Clock::time_point now);
  void request_failed(const std::string& why, std::vector<keel::wire::Message>& out);

  // Replies from the command socket: history step records (with the run descriptions between
  // them when the layers changed within the history) and events, then the ack that closes them.
  void on_history_step(keel::wire::StepRecord&& record, Clock::time_point now);
  void on_history_description(keel::wire::RunDescription&& description, Clock::time_point now);
  void on_history_event(keel::wire::Event&& event, Clock::time_point now);
  void on_ack(const keel::wire::Ack& ack, std::vector<keel::wire::Message>& out);

  // Ends the wait when the probe has been silent for timeout_secs.
  void on_tick(Clock::time_point now, std::vector<keel::wire::Message>& out);

  BackfillPhase phase() const { return phase_; }
  // What the last attempt came to, e.g. "backfilled 4096 steps (1200..5295), 3 events" or
  // "no backfill: the probe refused the history request: ..."; "" before the first outcome.
  const std::string& status() const { return status_; }
  // Increments with every outcome, so a reader notices a new one with the same text.
  uint64_t outcomes() const { return outcomes_; }
  // The id of the request that is out, 0 when none.
  uint64_t request_id() const { return request_id_; }

 private:
  void start(Clock::time_point now);
  void go_live(const std::string& status, std::vector<keel::wire::Message>& out);

  BackfillOptions options_;
  BackfillPhase phase_ = BackfillPhase::kIdle;
  bool request_due_ = false;
  uint64_t request_id_ = 0;
  Clock::time_point last_activity_{};
  std::string run_id_;  // of the newest description seen; "" before one
  std::vector<keel::wire::Message> held_;
  std::vector<keel::wire::Message> history_;   // step records, and descriptions between them
  int64_t history_steps_ = 0;
  std::vector<keel::wire::Event> history_events_;
  // After a backfill that met no live step: live steps up to this one were in the history.
  bool dropping_overlap_ = false;
  int64_t overlap_through_step_ = 0;
  // After a backfill that met no live step or event: live events up to this seq were in it.
  bool dropping_event_overlap_ = false;
  uint64_t event_overlap_through_seq_ = 0;
  std::string status_;
  uint64_t outcomes_ = 0;
};

}  // namespace keel::app
