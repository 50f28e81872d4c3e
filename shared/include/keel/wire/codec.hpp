// keel wire codec: messages <-> bytes (msgpack maps, per-layer values as one float32 bin).
//
// What it is for: the only place that knows the byte layout (shared/PROTOCOL.md). A message
// travels as two ZeroMQ frames: the topic (topic_of), then the payload (encode).
// Threads: stateless free functions; safe from any thread.
// Never: throws, crashes or reads past `size` on bad input. Decoding returns a DecodeResult
// whose error says what was wrong (truncated, oversized, wrong type, wrong version).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "keel/wire/limits.hpp"
#include "keel/wire/messages.hpp"

namespace keel::wire {

inline constexpr uint32_t kProtocolVersion = 1;

// Topic frames. Subscribers filter on these prefixes.
inline constexpr const char* kTopicRun = "run";
inline constexpr const char* kTopicStep = "step";
inline constexpr const char* kTopicEvent = "event";
inline constexpr const char* kTopicCommand = "cmd";
inline constexpr const char* kTopicAck = "ack";
// A subscription that matches no topic: a client that will ask for the history subscribes to
// this prefix followed by a token of its own, and sends that token in its `history` command,
// so a probe that is ending waits for the request (PROTOCOL §2, §6).
inline constexpr const char* kHistoryIntentPrefix = "backfill:";

const char* topic_of(const Message& message);

// Appends the payload bytes of `message` to `out` (cleared first). Allocates only to grow `out`.
void encode(const Message& message, std::vector<char>& out);
std::vector<char> encode(const Message& message);

struct DecodeResult {
  bool ok = false;
  Message message;
  std::string error;   // set when !ok
};

// Decodes one payload. Never trusts a length field beyond `size`.
DecodeResult decode(const void* data, size_t size);
// Decodes the first of payloads written back to back (a dump's telemetry.msgpack), as
// decode() does one; `consumed` is set to its size (0 when it did not parse), where the next
// one starts.
DecodeResult decode_first(const void* data, size_t size, size_t& consumed);

// Default endpoints: the probe binds the PUB socket on the first, commands on the next port.
inline constexpr const char* kDefaultPubEndpoint = "tcp://127.0.0.1:5557";
// "tcp://host:5557" -> "tcp://host:5558"; returns "" when the endpoint has no numeric port.
std::string command_endpoint_for(const std::string& pub_endpoint);

}  // namespace keel::wire
