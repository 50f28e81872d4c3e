#include "thin_recording.hpp"

#include <algorithm>
#include <vector>

namespace keel::probe {

using wire::recording::FrameKind;

namespace {

bool near_an_event(const std::vector<int64_t>& event_steps, int64_t step, int64_t window) {
  // event_steps is sorted: the nearest event is at the first step >= step - window.
  const auto it = std::lower_bound(event_steps.begin(), event_steps.end(), step - window);
  return it != event_steps.end() && *it <= step + window;
}

}  // namespace

ThinResult thin_recording(const wire::RecordingReader& from, wire::RecordingWriter& to, const ThinRule& rule) {
  ThinResult result;
  const int64_t stride = std::max<int64_t>(rule.stride, 1);
  const auto& chunks = from.chunks();
  std::vector<int64_t> event_steps;
  for (size_t i = 0; i < chunks.size(); ++i) {
    // Only chunks that say they hold an event are read for them; an open one says nothing yet.
    if (!chunks[i].open && !(chunks[i].flags & wire::recording::kChunkHasDescriptionOrEvent)) continue;
    std::string error;
    from.read_chunk(
        i, [&](const wire::RecordingFrame& f) {
          if (f.kind == FrameKind::event) event_steps.push_back(f.step);
        },
        error);
  }
  std::sort(event_steps.begin(), event_steps.end());

  for (size_t i = 0; i < chunks.size() && result.ok; ++i) {
    std::string error;
    const bool read = from.read_chunk(
        i, [&](const wire::RecordingFrame& f) {
          if (!result.ok) return;
          if (f.kind == FrameKind::step) {
            const bool keep = f.step >= rule.keep_from_step || ((f.step % stride) + stride) % stride == 0 ||
                              near_an_event(event_steps, f.step, rule.event_window);
            if (!keep) {
              ++result.removed_steps;
              return;
            }
            ++result.kept_steps;
          }
          if (!to.append(f.kind, f.step, f.data, f.size)) {
            result.ok = false;
            result.error = to.error();
          }
        },
        error);
    if (!read) ++result.damaged_chunks;
    // Written as it goes: the copy never holds more than a chunk in memory.
    if (result.ok && !to.flush()) {
      result.ok = false;
      result.error = to.error();
    }
  }
  return result;
}

}  // namespace keel::probe
