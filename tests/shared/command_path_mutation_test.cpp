// The probe's command path under hostile bytes: what CommandServer's thread does with one
// request payload (size gate, wire::decode, "is it a cmd", check_command, the refusal Ack),
// run on 70,000 mutants of real commands of every kind. Nothing may crash, and nothing
// outside the documented bounds may pass check_command to the training thread: a command for
// another rank, a skip or history count out of range, a kind the protocol does not define,
// or a made-up policy name (tens of thousands of mutated names reach the check; the ones
// accepted must stay the handful of real policies). Every refusal must travel back as an
// Ack the client can decode.
// It lives beside the codec mutation test because it shares its mutator; it links keel_probe
// (and so libtorch) only for check_command, and is built only with the probe.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "transport/command_server.hpp"
#include "keel/wire/codec.hpp"
#include "wire_mutator.hpp"

namespace keel::probe {
namespace {

using keel::wire::testing::Mutation;
using keel::wire::testing::Mutator;

constexpr uint64_t kRngSeed = 0x636d64;  // "cmd"
constexpr int kCasesPerMutation = 5000;
constexpr int kMaxReportedFailures = 20;
// The probe's own rank in the checks; mutants carry -1 (any), these, and everything else.
constexpr int32_t kProbeRanks[] = {0, 5};
// More policies than the probe will ever have; a mutated name accepted would grow the set.
constexpr size_t kMaxPolicies = 8;

// The Ack the command thread would send for `refusal`, as the client decodes it.
wire::DecodeResult refusal_as_received(uint64_t id, const std::string& refusal) {
  wire::Ack ack;
  ack.id = id;
  ack.error = refusal;
  const std::vector<char> bytes = wire::encode(ack);
  return wire::decode(bytes.data(), bytes.size());
}

TEST(CommandPathMutation, NoMutantCrashesOrPassesOutOfBounds) {
  std::vector<wire::Message> commands;
  for (const wire::Message& m : wire::testing::seed_messages()) {
    if (std::holds_alternative<wire::Command>(m)) commands.push_back(m);
  }
  ASSERT_GE(commands.size(), 4u);
  Mutator mutator(wire::testing::make_seeds(commands), kRngSeed);
  int failures = 0;
  int cases = 0;
  int decoded_commands = 0;
  int accepted = 0;
  int refused = 0;
  std::set<std::string> accepted_policies;
  auto fail = [&](const std::string& what) {
    if (++failures <= kMaxReportedFailures) ADD_FAILURE() << what;
  };

  for (int m = 0; m < wire::testing::kMutationCount; ++m) {
    const Mutation mutation = static_cast<Mutation>(m);
    for (int i = 0; i < kCasesPerMutation; ++i, ++cases) {
      const std::vector<char> payload = mutator.mutate(mutation, i % commands.size());
      const std::string where =
          std::string(wire::testing::mutation_name(mutation)) + " case " + std::to_string(i);
      if (payload.size() > kMaxCommandBytes) continue;  // refused unparsed, by size
      const wire::DecodeResult decoded = wire::decode(payload.data(), payload.size());
      if (!decoded.ok) {
        const wire::DecodeResult ack = refusal_as_received(0, "malformed command: " + decoded.error);
        if (!ack.ok) fail(where + ": the refusal Ack does not decode: " + ack.error);
        continue;
      }
      const auto* command = std::get_if<wire::Command>(&decoded.message);
      if (command == nullptr) continue;  // refused as "expected a cmd message"
      ++decoded_commands;
      for (const int32_t rank : kProbeRanks) {
        const std::string refusal = check_command(*command, rank);
        if (!refusal.empty()) {
          ++refused;
          const wire::DecodeResult ack = refusal_as_received(command->id, refusal);
          if (!ack.ok) fail(where + ": the refusal Ack does not decode: " + ack.error);
          continue;
        }
        ++accepted;
        const std::string what = where + ": passed to the training thread: kind \"" +
                                 command->kind.substr(0, 40) + "\", rank " +
                                 std::to_string(command->rank) + ", count " +
                                 std::to_string(command->count) + ", probe rank " +
                                 std::to_string(rank);
        if (command->rank != -1 && command->rank != rank) fail(what + " (another rank's)");
        if (command->kind == "skip" && (command->count < 1 || command->count > kMaxSkipCount)) {
          fail(what + " (skip count out of range)");
        }
        if (command->kind == "history" && command->count < 1) fail(what + " (history of no steps)");
        if (command->kind == "policy") accepted_policies.insert(command->policy);
        const bool known_kind = command->kind == "skip" || command->kind == "dump" ||
                                command->kind == "policy" || command->kind == "describe" ||
                                command->kind == "history";
        if (!known_kind) fail(what + " (unknown kind)");
      }
    }
  }

  EXPECT_LE(accepted_policies.size(), kMaxPolicies) << "made-up policy names were accepted";
  EXPECT_EQ(failures, 0);
  EXPECT_GE(cases, 70000);
  // Both outcomes must occur, or the mutants never reached check_command's decisions.
  EXPECT_GT(decoded_commands, cases / 50);
  EXPECT_GT(accepted, 0);
  EXPECT_GT(refused, 0);
  std::printf("%d cases, %d decoded commands: %d checks accepted, %d refused\n", cases,
              decoded_commands, accepted, refused);
}

}  // namespace
}  // namespace keel::probe
