// keel app FramePacer: when the UI thread starts its next frame.
//
// What it is for: a live view must draw a step soon after it arrives, yet an idle dashboard
// must leave the CPU to the trainer. The UI thread sleeps in the platform's event wait; it
// starts a frame when
//   - input arrives (the platform wait returns early),
//   - the receiver says data arrived (notify_data(), from the receiver thread), but no sooner
//     than kMinFrameSecs after the previous frame started, so a fast trainer cannot make the
//     UI spin (data that arrives meanwhile is drawn by that next frame), or
//   - kIdleFrameSecs have passed (the status bar's clocks and "stale" still move).
// Every frame handles the input queued before it, even one that starts without waiting.
// Waiting a fixed 1/30 s instead cost a step ~17 ms on average before its frame even began.
// keel's main loop and keel-bench-app's step-to-pixel loop both run this pacer, so the
// benchmark measures the app's pacing and not an imitation of it.
// Threads: wait_for_next_frame() on the UI thread only; notify_data() from any thread.
// Never: throws; notify_data() never blocks (it sets a flag and pokes the platform wait).
#pragma once

#include <atomic>
#include <chrono>

namespace keel::app::ui {

// The platform's event wait: the app's Window (GLFW), or a plain sleep where there is no
// window. wait(0) handles the input already queued without blocking. wake() may be called
// from any thread and makes a wait that is in progress, or the next one, return at once.
class EventWait {
 public:
  virtual ~EventWait() = default;
  virtual void wait(double max_secs) = 0;
  virtual void wake() = 0;
};

class FramePacer {
 public:
  // At most ~60 frames a second while data streams in (a display refreshes no faster).
  static constexpr double kMinFrameSecs = 1.0 / 60.0;
  // With neither input nor data, a frame this often.
  static constexpr double kIdleFrameSecs = 1.0 / 30.0;

  explicit FramePacer(EventWait& platform) : platform_(platform) {}

  // Receiver thread: new data is queued for the UI.
  void notify_data();
  // UI thread: returns when the next frame should start (see the header comment).
  void wait_for_next_frame();

 private:
  using Clock = std::chrono::steady_clock;

  EventWait& platform_;
  std::atomic<bool> data_pending_{false};
  Clock::time_point last_frame_start_{};
};

}  // namespace keel::app::ui
