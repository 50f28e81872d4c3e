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
  for (;;) {
    const Clock::time_point now = Clock::now();
    if (data_pending_.exchange(false)) woken_by_data = true;
    const Clock::time_point deadline = woken_by_data ? data_earliest : idle_deadline;
    if (now >= deadline) break;
    platform_.wait(std::chrono::duration<double>(deadline - now).count());
    // A wait that returned early without data (nor its deadline) was input: draw it now.
    if (!woken_by_data && !data_pending_.load() && Clock::now() < deadline) break;
  }
  last_frame_start_ = Clock::now();
}

}  // namespace keel::app::ui
