#include "model/event_rows.hpp"

namespace keel::app {
namespace {

bool same_event(const wire::Event& a, const wire::Event& b) {
  return a.kind == b.kind && a.step == b.step && a.layer == b.layer && a.seq == b.seq && a.rank == b.rank;
}

bool repeats(const wire::Event& a, const wire::Event& b) {
  return a.kind == b.kind && a.layer == b.layer && a.detail == b.detail;
}

}  // namespace

std::vector<EventRow> event_rows(const std::deque<wire::Event>& events, const std::optional<wire::Event>& first_nonfinite) {
  std::vector<EventRow> rows;
  if (first_nonfinite) {
    EventRow pinned;
    pinned.newest = &*first_nonfinite;
    pinned.first_step = pinned.last_step = first_nonfinite->step;
    pinned.pinned = true;
    rows.push_back(pinned);
  }
  const size_t unpinned = rows.size();
  for (const wire::Event& event : events) {
    if (first_nonfinite && same_event(event, *first_nonfinite)) continue;
    if (rows.size() > unpinned && repeats(*rows.back().newest, event)) {
      EventRow& row = rows.back();
      ++row.count;
      row.first_step = event.step;   // older than every event folded so far
      continue;
    }
    EventRow row;
    row.newest = &event;
    row.first_step = row.last_step = event.step;
    rows.push_back(row);
  }
  return rows;
}

std::string event_row_title(const EventRow& row) {
  if (row.count == 1) return row.newest->kind;
  std::string title = row.newest->kind + " x" + std::to_string(row.count) + ", steps " + std::to_string(row.first_step);
  if (row.last_step != row.first_step) title += "-" + std::to_string(row.last_step);
  return title;
}

}  // namespace keel::app
