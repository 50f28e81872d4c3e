#include "history_intents.hpp"

namespace keel::probe {

void HistoryIntents::announced(std::string_view token) {
  if (token.empty() || token.size() > kMaxTokenBytes) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (asked_.count(token) > 0 || awaited_.size() >= kMaxTokens) return;
  awaited_.emplace(token);
}

void HistoryIntents::withdrawn(std::string_view token) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = awaited_.find(token);
  if (it != awaited_.end()) awaited_.erase(it);
}

void HistoryIntents::asked(std::string_view token) {
  if (token.empty() || token.size() > kMaxTokenBytes) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = awaited_.find(token);
  if (it != awaited_.end()) awaited_.erase(it);
  // Remembered even when the subscription has not been seen yet: the request may overtake it
  // when the publisher thread reads the subscription after the client heard the description.
  if (!asked_.emplace(token).second) return;
  asked_order_.emplace_back(token);
  if (asked_order_.size() > kMaxTokens) {
    asked_.erase(asked_order_.front());
    asked_order_.pop_front();
  }
}

size_t HistoryIntents::awaited() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return awaited_.size();
}

}  // namespace keel::probe
