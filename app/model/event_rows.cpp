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

std::string dump_path(const wire::Event& event) {
  static const std::string kWrote = "wrote ";
  if (event.kind != "dump" || event.detail.compare(0, kWrote.size(), kWrote) != 0) return "";
  // The size and time come last, "(N bytes, S s)": a path may hold " (" itself.
  const size_t sizes = event.detail.rfind(" (");
  const bool has_sizes = sizes != std::string::npos && sizes >= kWrote.size() && event.detail.back() == ')' &&
                         event.detail.find(" bytes", sizes) != std::string::npos;
  const size_t end = has_sizes ? sizes : event.detail.size();
  return event.detail.substr(kWrote.size(), end - kWrote.size());
}

std::string dump_path_at(const std::deque<wire::Event>& events, int64_t step) {
  for (const wire::Event& event : events) {
    if (event.step != step) continue;
    std::string path = dump_path(event);
    if (!path.empty()) return path;
  }
  return "";
}

bool sent_after(const wire::Event& event, const wire::Event& than) {
  if (event.stamp_unix_ns != than.stamp_unix_ns) return event.stamp_unix_ns > than.stamp_unix_ns;
  return event.seq > than.seq;
}

}  // namespace keel::app
