// SideCopy: a snapshot's copies from one CUDA device into pinned host memory, on a stream of
// their own: after the work the training stream has enqueued so far (the step's update), and
// before what the caller orders after them (the next update), with no wait on the host.
// Built only with the CUDA probe (KEEL_PROBE_CUDA in probe/CMakeLists.txt); elsewhere
// make_side_copy returns nullptr and a snapshot copies on the training stream, waiting.
// Threads: the training thread. Never: waits on the host but in wait().
#pragma once

#include <functional>
#include <memory>

namespace keel::probe {

class SideCopy {
 public:
  virtual ~SideCopy() = default;
  // The side stream waits (on the device) for what the current stream has enqueued, then
  // `copies` runs with the side stream current (the copies it enqueues go there), then the
  // copies' event is recorded.
  virtual void copy(const std::function<void()>& copies) = 0;
  // The current stream waits (on the device) for the last copies: called before anything
  // writes their sources. Once per copy; no-op after.
  virtual void order_current_after() = 0;
  // The host waits for the last copies (a rewind reads them).
  virtual void wait() = 0;
};

// nullptr where keel is built without the CUDA probe.
std::unique_ptr<SideCopy> make_side_copy(int device_index);

}  // namespace keel::probe
