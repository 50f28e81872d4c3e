// Serving a probe's clients a last time, when it ends (ProbeOptions::exit_flush_secs).
//
// What it is for: a run of under a second can end before a client that was there first has
// heard it. Such a client connects only once the probe has bound (ZeroMQ retries a refused
// connection every reconnect interval), its subscription goes live after the first steps, and
// it asks for the steps before that (PROTOCOL §6 `history`) only once it has heard the run
// description. A probe that closed at its last step would take all of that with it.
// wait_for_clients() keeps the publisher and command threads serving while any of these holds:
//  - the publisher's queue still holds messages the socket has not taken;
//  - the probe bound less than kConnectWindow ago, on an address a client could have been
//    waiting on (a wildcard port could not be known in advance): ZeroMQ's clients retry every
//    100 ms by default plus up to as much again at random, keel's own every 20 ms;
//  - a client announced a history request that has not arrived (HistoryIntents);
//  - a history answer is still being handed to its client's socket.
// It returns the deadline; the sockets then linger until it to deliver what they queued
// (CommandServer::finish, Publisher::finish), so the whole exit takes at most `limit`.
// A probe nobody connects to, bound on a wildcard port or for longer than the window, does
// not wait beyond the publisher's last drain (a poll interval or two).
// Threads: the thread that ends the probe, after its last publish(); never during training.
// Never: waits past the limit, or throws.
#pragma once

#include <chrono>
#include <string>

#include "command_server.hpp"
#include "history_intents.hpp"
#include "publisher.hpp"

namespace keel::probe {

inline constexpr std::chrono::milliseconds kConnectWindow{250};

// Whether a client could have been connecting to `endpoint` before the probe bound it: any
// address but a wildcard or ephemeral tcp port.
bool clients_may_wait_on(const std::string& endpoint);

// Waits as above for the clients of `publisher`, bound to `endpoint` as configured (a wildcard
// port is bound to a port of its own); `commands` may be null (no command socket). Returns
// now + limit.
std::chrono::steady_clock::time_point wait_for_clients(const std::string& endpoint, const Publisher& publisher,
                                                       const CommandServer* commands, const HistoryIntents& intents,
                                                       std::chrono::milliseconds limit);

}  // namespace keel::probe
