// EventRows: the events pane's rows, with repeats folded together.
//
// What it is for: when every step after a poisoned one is skipped, the probe raises a `skip`
// event per step, and hundreds of identical rows pushed the one that matters (first_nonfinite)
// out of view. Events in a row that repeat (same kind, layer and detail, one after another)
// become one row, "skip x133, steps 38-170"; the run's first_nonfinite is pinned above them
// all, even once the bounded event list has dropped it. A dump's path is read out of its
// event whole, for the pane to show and copy; which of two events is the newer, for the
// newest warning.
// Threads: a plain function of a run's events; the UI thread calls it.
// Never: allocates per event beyond the rows it returns, or reorders events.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "keel/wire/messages.hpp"

namespace keel::app {

struct EventRow {
  const wire::Event* newest = nullptr;   // the newest event of the row (its text is shown)
  size_t count = 1;                      // events folded into it
  int64_t first_step = 0;                // the oldest event's step
  int64_t last_step = 0;                 // the newest event's step
  bool pinned = false;                   // the run's first_nonfinite, above every other row
};

// `events` newest first (RunModel::events()); `first_nonfinite` the run's (pinned, and not
// repeated below when it is still in the list). The rows are newest first after the pinned one.
std::vector<EventRow> event_rows(const std::deque<wire::Event>& events, const std::optional<wire::Event>& first_nonfinite);

// "skip x133, steps 38-170" for a folded row, the kind alone for one event.
std::string event_row_title(const EventRow& row);

// The path a `dump` event says it wrote ("wrote PATH (N bytes, S s)", PROTOCOL §3.4), in
// full, as the probe sent it; "" for any other event.
std::string dump_path(const wire::Event& event);
// The path of the newest dump written for `step` among `events` (newest first); "" when none.
std::string dump_path_at(const std::deque<wire::Event>& events, int64_t step);

// Whether `event` came after `than` from their probe: stamped later, or sent later (seq) at one
// stamp. A history replayed late is not newer for arriving last.
bool sent_after(const wire::Event& event, const wire::Event& than);

}  // namespace keel::app
