// TrainerUnderTest: keel-demo training a small model on a free loopback port, with its
// resident memory sampled in the background and its history ring readable on demand.
//
// What it is for: every fault scenario and the soak test need the same trainer, paced so
// that its step time is stable enough to compare before and during a fault, and the same
// measurements of it (RSS over time, the step records its probe kept).
// Threads: one owner thread; the RSS sampler is private. Never: leaves keel-demo running.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fault_process.hpp"
#include "step_ledger.hpp"

namespace keel::fault {

struct Binaries {
  std::string demo;   // keel-demo
  std::string cli;    // keel-cli
  std::string app;    // keel (the dashboard); "" when it cannot run (no display)
};

struct TrainerOptions {
  double steps_per_sec = 20;   // keel-demo --pace: stable step times, so A/B means something
  int width = 32, layers = 1, context = 16, batch = 2;
  size_t history_steps = 4096;
  int port = 0;                // 0: a free pair is picked
  // keel-demo --allow-unauthenticated-local, and clients that present no keys: for the raw
  // clients that speak only ZMTP's NULL mechanism (zmtp_subscriber.hpp).
  bool unauthenticated = false;
};

// A directory under /tmp for one scenario's logs; removed at the end unless KEEL_FAULT_KEEP=1.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name);
  ~ScratchDir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

int64_t unix_now_ns();

class TrainerUnderTest {
 public:
  TrainerUnderTest(const Binaries& binaries, const ScratchDir& dir, TrainerOptions options = {},
                   const std::string& log_name = "demo.log");
  ~TrainerUnderTest();

  const std::string& endpoint() const { return endpoint_; }
  std::string command_endpoint() const;
  int port() const { return port_; }
  // Whether its sockets take no keys (TrainerOptions::unauthenticated): clients need --no-auth.
  bool unauthenticated() const { return unauthenticated_; }
  pid_t pid() const { return process_->pid(); }
  FaultProcess& process() { return *process_; }

  // Runs `keel-cli history --json` now; the records land in the returned ledger.
  StepLedger history(const std::string& file_name, double timeout_secs = 10) const;
  // Waits until the probe's ring holds at least one step.
  bool wait_until_training(double timeout_secs) const;

  // RSS samples taken every 100 ms since start, in KiB: first, last, largest in a window.
  long rss_at_or_after(int64_t unix_ns) const;
  long rss_last() const;
  long rss_max(int64_t begin_ns, int64_t end_ns) const;

  // SIGTERM, then SIGKILL; the sampler stops.
  void stop();

 private:
  void sample(pid_t pid);

  Binaries binaries_;
  const ScratchDir& dir_;
  int port_ = 0;
  std::string endpoint_;
  bool unauthenticated_ = false;
  std::unique_ptr<FaultProcess> process_;
  mutable std::mutex samples_mutex_;
  std::vector<std::pair<int64_t, long>> samples_;
  std::atomic<bool> stop_sampling_{false};
  std::thread sampler_;
};

}  // namespace keel::fault
