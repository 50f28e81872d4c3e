// keel app LateAttach: one endpoint's backfill, with the command socket that asks for it.
//
// What it is for: the receiver thread hands every telemetry message of one endpoint through
// a LateAttach, which holds back what Backfill (backfill.hpp) says to hold, sends the history
// request on a DEALER to the probe's command endpoint, reads the answer, and releases the
// merged stream. A fresh socket is made for each request and closed when it is over, so an
// answer to a request given up on can never be mistaken for the next one's. Its requests carry
// a token of its own, which the endpoint's Subscriber announces (`backfill:<token>`, PROTOCOL
// §2), so a probe that ends just after this client subscribed still answers it.
// Threads: owned by the receiver thread; every call from that thread.
// Never: waits on the network (poll() only checks), or throws after construction.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "keel/wire/messages.hpp"
#include "net/backfill.hpp"
#include "net/command_socket.hpp"

namespace keel::app {

class LateAttach {
 public:
  // `command_endpoint` "" means the telemetry endpoint has no command socket beside it (no
  // numeric port): the first message goes live at once and status() says why.
  LateAttach(std::string command_endpoint, BackfillOptions options, ClientAuth auth = {});

  // A message from the telemetry socket; appends to `out` what may be delivered now.
  void on_live(keel::wire::Message&& message, std::vector<keel::wire::Message>& out);
  // Sends a due history request, takes the replies that have arrived, applies the timeout;
  // appends to `out` what that released.
  void poll(std::vector<keel::wire::Message>& out);

  const Backfill& backfill() const { return backfill_; }
  // What this client's history requests carry, random per LateAttach; "" when it sends none
  // (no command endpoint). The Subscriber of the same endpoint announces it.
  const std::string& history_token() const { return token_; }

 private:
  std::string command_endpoint_;
  std::string token_;
  ClientAuth auth_;
  Backfill backfill_;
  std::unique_ptr<CommandSocket> socket_;
  uint64_t next_id_ = 1;
};

}  // namespace keel::app
