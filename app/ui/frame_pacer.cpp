#include "ui/frame_pacer.hpp"

namespace keel::app::ui {

void FramePacer::notify_data() {
  data_pending_.store(true);
  platform_.wake();
}

void FramePacer::wait_for_next_frame() {
  const auto secs = [](double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  const Clock::time_point idle_deadline = last_frame_start_ + secs(kIdleFrameSecs);
  const Clock::time_point data_earliest = last_frame_start_ + secs(kMinFrameSecs);
  bool woken_by_data = false;
  bool input_handled = false;
  for (;;) {
    const Clock::time_point now = Clock::now();
    if (data_pending_.exchange(false)) woken_by_data = true;
    const Clock::time_point deadline = woken_by_data ? data_earliest : idle_deadline;
    if (now >= deadline) break;
    platform_.wait(std::chrono::duration<double>(deadline - now).count());
    input_handled = true;
    // A wait that returned early without data (nor its deadline) was input: draw it now.
    if (!woken_by_data && !data_pending_.load() && Clock::now() < deadline) break;
  }
  // A frame that took longer than the interval (a software renderer drawing a modal's dimmed
  // screen takes ~45 ms) finds its deadline already passed and never waits: without this, the
  // input queued meanwhile would never be handled, and the window would follow the pointer
  // (polled) but take no click nor key.
  if (!input_handled) platform_.wait(0);
  last_frame_start_ = Clock::now();
}

}  // namespace keel::app::ui
