// HistoryIntents: the clients that said they will ask this probe for its history, and have not.
//
// What it is for: a client that backfills (the dashboard, keel-cli tail) subscribes, waits for
// the run description that tells it the subscription is live, and only then sends `history`
// on the command socket (PROTOCOL §6). A probe that ends in between must not close before that
// request arrives, or the client of a run shorter than a second never sees the steps published
// before it subscribed. So such a client also subscribes to `backfill:<token>` (PROTOCOL §2)
// and its history request carries the same token: the publisher thread notes the subscription
// (announced), or its connection closing first (withdrawn), the command thread the request
// (asked), and the probe's exit waits, bounded, while awaited() is not 0 (exit_flush.hpp).
// A token is awaited once: a client that subscribes again (a reconnection) has asked already.
// Threads: any; every call takes a mutex for a few set operations.
// Never: blocks beyond that mutex, throws, or holds more than kMaxTokens tokens of at most
// kMaxTokenBytes each in either set (a client that floods tokens is bounded by the publisher's
// subscription budget first).
#pragma once

#include <cstddef>
#include <deque>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

namespace keel::probe {

class HistoryIntents {
 public:
  static constexpr size_t kMaxTokens = 1024;
  static constexpr size_t kMaxTokenBytes = 64;

  // A client subscribed to backfill:<token>: its history request is on its way (publisher thread).
  void announced(std::string_view token);
  // That subscription's connection closed before the request came (publisher thread).
  void withdrawn(std::string_view token);
  // A history request carrying `token` arrived, answered or refused (command thread).
  void asked(std::string_view token);
  // Announced requests that have not arrived yet.
  size_t awaited() const;

 private:
  mutable std::mutex mutex_;
  std::set<std::string, std::less<>> awaited_;
  // Tokens whose request came, oldest first: announcing one again awaits nothing.
  std::set<std::string, std::less<>> asked_;
  std::deque<std::string> asked_order_;
};

}  // namespace keel::probe
