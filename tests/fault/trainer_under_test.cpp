#include "trainer_under_test.hpp"

#include <stdlib.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "../e2e/child_process.hpp"

namespace keel::fault {

ScratchDir::ScratchDir(const std::string& name) {
  std::string pattern = "/tmp/keel-fault-" + name + "-XXXXXX";
  path_ = mkdtemp(pattern.data()) ? pattern : "/tmp";
}

ScratchDir::~ScratchDir() {
  const char* keep = std::getenv("KEEL_FAULT_KEEP");
  if (path_ != "/tmp" && !(keep && std::string(keep) == "1")) {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
}

int64_t unix_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch()).count();
}

TrainerUnderTest::TrainerUnderTest(const Binaries& binaries, const ScratchDir& dir, TrainerOptions options,
                                   const std::string& log_name)
    : binaries_(binaries), dir_(dir), unauthenticated_(options.unauthenticated) {
  port_ = options.port > 0 ? options.port : e2e::free_port_pair();
  endpoint_ = "tcp://127.0.0.1:" + std::to_string(port_);
  std::vector<std::string> args{binaries.demo, "--steps", "0", "--endpoint", endpoint_,
                               "--pace", std::to_string(options.steps_per_sec),
                               "--width", std::to_string(options.width),
                               "--layers", std::to_string(options.layers),
                               "--context", std::to_string(options.context),
                               "--batch", std::to_string(options.batch),
                               // One intra-op thread: the harness and its clients share 2 cores.
                               "--threads", "1", "--log-every", "0",
                               "--history", std::to_string(options.history_steps),
                               "--dump-dir", dir.file("dumps")};
  if (unauthenticated_) args.push_back("--allow-unauthenticated-local");
  process_ = std::make_unique<FaultProcess>(args, dir.file(log_name));
  sampler_ = std::thread([this, pid = process_->pid()] { sample(pid); });
}

TrainerUnderTest::~TrainerUnderTest() { stop(); }

std::string TrainerUnderTest::command_endpoint() const {
  return "tcp://127.0.0.1:" + std::to_string(port_ + 1);
}

void TrainerUnderTest::sample(pid_t pid) {
  while (!stop_sampling_.load()) {
    const long kib = rss_kib(pid);
    if (kib > 0) {
      std::lock_guard<std::mutex> lock(samples_mutex_);
      samples_.emplace_back(unix_now_ns(), kib);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

StepLedger TrainerUnderTest::history(const std::string& file_name, double timeout_secs) const {
  const std::string path = dir_.file(file_name);
  {
    std::vector<std::string> args{binaries_.cli, "history", "--endpoint", endpoint_, "--json", "--timeout",
                                  std::to_string(timeout_secs)};
    if (unauthenticated_) args.push_back("--no-auth");
    FaultProcess cli(args, path);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_secs + 5);
    while (cli.running() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  StepLedger ledger;
  ledger.add_json_lines_file(path);
  return ledger;
}

bool TrainerUnderTest::wait_until_training(double timeout_secs) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_secs);
  for (int attempt = 0; std::chrono::steady_clock::now() < deadline; ++attempt) {
    if (!history("probe-" + std::to_string(attempt) + ".jsonl", 1).empty()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return false;
}

long TrainerUnderTest::rss_at_or_after(int64_t unix_ns) const {
  std::lock_guard<std::mutex> lock(samples_mutex_);
  for (const auto& [at, kib] : samples_) {
    if (at >= unix_ns) return kib;
  }
  return samples_.empty() ? -1 : samples_.back().second;
}

long TrainerUnderTest::rss_last() const {
  std::lock_guard<std::mutex> lock(samples_mutex_);
  return samples_.empty() ? -1 : samples_.back().second;
}

long TrainerUnderTest::rss_max(int64_t begin_ns, int64_t end_ns) const {
  std::lock_guard<std::mutex> lock(samples_mutex_);
  long most = -1;
  for (const auto& [at, kib] : samples_) {
    if (at >= begin_ns && at < end_ns) most = std::max(most, kib);
  }
  return most;
}

void TrainerUnderTest::stop() {
  if (process_) process_->stop();
  stop_sampling_.store(true);
  if (sampler_.joinable()) sampler_.join();
}

}  // namespace keel::fault
