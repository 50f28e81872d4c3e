// CommandChannel: a DEALER client of a probe's command socket that keeps count of every
// request and every acknowledgement, for flood and soak tests.
//
// What it is for: the fault tests send thousands of requests (valid ones and garbage) as fast
// as the socket takes them, and must then say, per request id, whether it was answered
// exactly once. keel-cli send answers one command per process, which is the wrong tool here.
// Threads: one owner thread. Never: blocks longer than the timeout it is given.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "keel/wire/messages.hpp"

namespace keel::fault {

struct AckTally {
  uint64_t acks = 0;
  uint64_t ok = 0;
  uint64_t refused = 0;            // ok == false
  uint64_t duplicates = 0;         // a second ack for an id already answered
  uint64_t unknown = 0;            // an ack whose id was never sent (id 0: undecodable request)
  std::map<std::string, uint64_t> refusal_reasons;   // first words of each error sentence
};

class CommandChannel {
 public:
  explicit CommandChannel(const std::string& command_endpoint);
  ~CommandChannel();
  CommandChannel(const CommandChannel&) = delete;
  CommandChannel& operator=(const CommandChannel&) = delete;

  // Sends a valid command with a fresh id (returned); waits at most `timeout_ms` for room.
  // 0 when the socket took nothing in that time.
  uint64_t send(wire::Command command, int timeout_ms = 1000);
  // Sends a request that is not a valid command: random bytes, a wrong topic, the wrong
  // number of frames, a truncated or oversized payload (picked by `rng`).
  bool send_garbage(std::mt19937& rng, int timeout_ms = 1000);

  // Reads acknowledgements until every sent id is answered or `timeout_ms` passes.
  void collect(int timeout_ms);
  // Reads what has arrived, without waiting.
  void collect_ready() { collect(0); }

  uint64_t sent_valid() const { return sent_ids_.size(); }
  uint64_t sent_garbage() const { return sent_garbage_; }
  // Valid ids sent and not answered (yet).
  uint64_t unanswered() const;
  const AckTally& tally() const { return tally_; }
  // Ack of one id (the last one received), if any.
  const wire::Ack* ack_for(uint64_t id) const;

 private:
  bool send_frames(const std::vector<std::string>& frames, int timeout_ms);
  void take(const wire::Ack& ack);

  struct Socket;
  std::unique_ptr<Socket> socket_;
  uint64_t next_id_;
  uint64_t sent_garbage_ = 0;
  std::map<uint64_t, int> sent_ids_;   // id -> acks received
  std::map<uint64_t, wire::Ack> acks_;
  AckTally tally_;
};

}  // namespace keel::fault
