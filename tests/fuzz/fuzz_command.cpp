// libFuzzer target: the probe's command path. One request payload goes through what the
// command thread does with it (CommandServer::handle): the size gate, wire::decode, "is it a
// cmd", check_command for this probe's rank, and the refusal Ack it would send back. Beyond
// "no crash, no over-read" it checks that nothing out of bounds is let through to the
// training thread (another rank's command, a skip count out of range, a history of no steps,
// a kind the protocol does not define, a made-up policy name) and that every refusal is an
// Ack the client can decode.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "transport/command_server.hpp"
#include "keel/wire/codec.hpp"

namespace {

constexpr int32_t kProbeRank = 3;
// More policies than the probe will ever have: a made-up name accepted grows the set past it.
constexpr size_t kMaxPolicies = 8;

[[noreturn]] void broken(const std::string& promise) {
  std::fprintf(stderr, "fuzz_command: %s\n", promise.c_str());
  std::abort();
}

void expect_decodable_refusal(uint64_t id, const std::string& refusal) {
  keel::wire::Ack ack;
  ack.id = id;
  ack.error = refusal;
  const std::vector<char> bytes = keel::wire::encode(ack);
  const keel::wire::DecodeResult back = keel::wire::decode(bytes.data(), bytes.size());
  if (!back.ok) broken("the refusal Ack does not decode: " + back.error);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace keel;
  if (size > probe::kMaxCommandBytes) return 0;  // refused by size, never parsed
  const wire::DecodeResult decoded = wire::decode(data, size);
  if (!decoded.ok) {
    if (decoded.error.empty()) broken("rejected without an error sentence");
    expect_decodable_refusal(0, "malformed command: " + decoded.error);
    return 0;
  }
  const auto* command = std::get_if<wire::Command>(&decoded.message);
  if (command == nullptr) return 0;  // refused as "expected a cmd message"
  const std::string refusal = probe::check_command(*command, kProbeRank);
  if (!refusal.empty()) {
    expect_decodable_refusal(command->id, refusal);
    return 0;
  }
  if (command->rank != -1 && command->rank != kProbeRank) broken("accepted another rank's command");
  if (command->kind == "skip" && (command->count < 1 || command->count > probe::kMaxSkipCount)) {
    broken("accepted a skip count out of range: " + std::to_string(command->count));
  }
  if (command->kind == "history" && command->count < 1) broken("accepted a history of no steps");
  static const std::set<std::string> kKinds = {"skip", "dump", "policy", "describe", "history"};
  if (kKinds.count(command->kind) == 0) broken("accepted an unknown kind");
  if (command->kind == "policy") {
    static std::set<std::string> accepted_policies;
    accepted_policies.insert(command->policy);
    if (accepted_policies.size() > kMaxPolicies) broken("accepted a made-up policy name");
  }
  return 0;
}
