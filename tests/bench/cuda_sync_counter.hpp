// Host synchronisations with a CUDA device, counted: c10's sync debug mode warns at each
// synchronising CUDA call while it is on (set_sync_debug), and SyncCounter, installed as c10's
// warning handler for its lifetime, counts those warnings. keel-bench-gpu's models share it.
// Threads: the training thread (c10's warning handler is per thread).
#pragma once

#include <c10/cuda/CUDAFunctions.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <string>

namespace keel::bench {

// Counts the warnings c10 raises for a synchronising CUDA call while sync debug mode is on;
// every other warning is passed to the handler that was in place.
class SyncCounter : public c10::WarningHandler {
 public:
  SyncCounter() : previous_(c10::WarningUtils::get_warning_handler()) {
    c10::WarningUtils::set_warning_handler(this);
  }
  ~SyncCounter() override { c10::WarningUtils::set_warning_handler(previous_); }
  SyncCounter(const SyncCounter&) = delete;
  SyncCounter& operator=(const SyncCounter&) = delete;
  void process(const c10::Warning& warning) override {
    if (warning.msg().find("synchroniz") != std::string::npos) {
      ++count;
    } else {
      previous_->process(warning);
    }
  }
  int64_t count = 0;

 private:
  c10::WarningHandler* previous_;
};

inline void set_sync_debug(bool on) {
  c10::cuda::warning_state().set_sync_debug_mode(on ? c10::cuda::SyncDebugMode::L_WARN
                                                   : c10::cuda::SyncDebugMode::L_DISABLED);
}

}  // namespace keel::bench
