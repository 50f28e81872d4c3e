#include "exit_flush.hpp"

#include <algorithm>
#include <thread>

namespace keel::probe {
namespace {
// The publisher and command threads poll every 2 ms: checking more often finds nothing new.
constexpr std::chrono::milliseconds kCheckInterval{2};
}  // namespace

bool clients_may_wait_on(const std::string& endpoint) {
  if (endpoint.empty()) return false;
  const size_t colon = endpoint.rfind(':');
  const std::string port = colon == std::string::npos ? std::string() : endpoint.substr(colon + 1);
  const bool tcp = endpoint.rfind("tcp://", 0) == 0;
  return !(tcp && (port == "*" || port == "0"));
}

std::chrono::steady_clock::time_point wait_for_clients(const std::string& endpoint, const Publisher& publisher,
                                                       const CommandServer* commands, const HistoryIntents& intents,
                                                       std::chrono::milliseconds limit) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + std::max(limit, std::chrono::milliseconds(0));
  const Clock::time_point connect_until =
      clients_may_wait_on(endpoint) ? publisher.bound_at() + kConnectWindow : Clock::time_point{};
  for (Clock::time_point now = Clock::now(); now < deadline; now = Clock::now()) {
    const bool busy = !publisher.queue_empty() || now < connect_until || intents.awaited() > 0 ||
                      (commands != nullptr && commands->histories_in_flight() > 0);
    if (!busy) break;
    std::this_thread::sleep_for(kCheckInterval);
  }
  return deadline;
}

}  // namespace keel::probe
