// Deterministic mutation test of the decoder: 130,000 hostile variants of real payloads of
// every message type (wire_mutator.hpp says how they are made), the same ones on every run.
// Each must decode to a clean result: ok, or an error sentence; never a crash, an exception
// or a read past the bytes received (each mutant sits in a buffer of exactly its size, so
// ASan sees an over-read). A mutant that decodes must also survive a re-encode: the decoder
// may not accept what the encoder then writes differently or cannot read back.
// codec_reject_test.cpp holds the hand-written cases and plain random bytes; this file is
// the bulk that reaches the field readers behind the parser.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "keel/wire/codec.hpp"
#include "wire_mutator.hpp"

namespace keel::wire {
namespace {

using keel::wire::testing::Mutation;
using keel::wire::testing::Mutator;

constexpr uint64_t kRngSeed = 0x6b65656c;  // "keel"
constexpr int kCasesPerMutation = 10000;
constexpr int kMaxReportedFailures = 20;

// One phrase per gate of decode.cpp. Every gate must be reached, or the mutations have
// stopped exercising the decoder (say, after a wire change) and the test would pass blind.
const std::vector<std::string> kGatePhrases = {
    "truncated payload",        // the parser ran out of bytes
    "trailing bytes",           // bytes after the message map
    "array declares more",      // array count beyond the bytes received
    "map declares more",        // map count beyond the bytes received or the entry limit
    "string is longer",         // string over kMaxStringBytes
    "nested deeper",            // depth limit
    "malformed msgpack",        // bytes that are no msgpack at all (0xc1)
    "payload is",               // top level is not a map
    "protocol version",         // wrong version
    "unknown message type",     // wrong message type
    "is missing",               // a required field is absent
    "appears twice",            // a repeated key
    "which does not fit",       // an integer out of its field's range
    ", expected a",             // a field of the wrong msgpack type
    "field \"layers\" holds",   // the float block's length disagrees with mask x count
    "more than the limit",      // an array over its item limit
    "exceeds the limit",        // layer_count over kMaxLayers
};

std::string hex(const std::vector<char>& bytes) {
  std::string out;
  char buf[4];
  for (size_t i = 0; i < bytes.size() && i < 256; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", static_cast<unsigned char>(bytes[i]));
    out += buf;
  }
  if (bytes.size() > 256) out += "...";
  return out;
}

struct Tally {
  int ok = 0;
  int rejected = 0;
};

TEST(CodecMutation, EveryMutantDecodesCleanly) {
  Mutator mutator(testing::make_seeds(testing::seed_messages()), kRngSeed);
  const size_t seed_count = mutator.seeds().size();
  std::map<std::string, Tally> by_mutation;
  std::map<std::string, int> by_gate;
  int failures = 0;
  int cases = 0;
  auto fail = [&](const std::string& what, const std::vector<char>& mutant) {
    if (++failures <= kMaxReportedFailures) ADD_FAILURE() << what << "\n  mutant: " << hex(mutant);
  };

  for (int m = 0; m < testing::kMutationCount; ++m) {
    const Mutation mutation = static_cast<Mutation>(m);
    Tally& tally = by_mutation[testing::mutation_name(mutation)];
    for (int i = 0; i < kCasesPerMutation; ++i, ++cases) {
      const size_t seed = static_cast<size_t>(i) % seed_count;
      const std::vector<char> mutant = mutator.mutate(mutation, seed);
      const std::string where = std::string(testing::mutation_name(mutation)) + " of " +
                                mutator.seeds()[seed].name + ", case " + std::to_string(i);
      const DecodeResult result = decode(mutant.data(), mutant.size());
      if (!result.ok) {
        ++tally.rejected;
        if (result.error.empty()) fail(where + ": rejected without an error sentence", mutant);
        for (const std::string& phrase : kGatePhrases) {
          if (result.error.find(phrase) != std::string::npos) ++by_gate[phrase];
        }
        continue;
      }
      ++tally.ok;
      if (!result.error.empty()) fail(where + ": ok but with error \"" + result.error + "\"", mutant);
      const std::vector<char> again = encode(result.message);
      const DecodeResult back = decode(again.data(), again.size());
      if (!back.ok) {
        fail(where + ": decoded, but its re-encoding does not: " + back.error, mutant);
      } else if (encode(back.message) != again) {
        fail(where + ": decoded, but its re-encoding changes on a second round trip", mutant);
      }
    }
  }

  EXPECT_EQ(failures, 0);
  EXPECT_GE(cases, 100000);
  int ok = 0;
  for (const auto& [name, tally] : by_mutation) {
    std::printf("%-20s %6d ok %6d rejected\n", name.c_str(), tally.ok, tally.rejected);
    ok += tally.ok;
    EXPECT_GT(tally.rejected, 0) << name << " never produced a payload the decoder rejects";
  }
  // Some mutants must still be valid messages (an optional field dropped, a float given as an
  // integer), or the decoder could reject everything and pass.
  EXPECT_GT(ok, cases / 100) << "too few mutants decoded";
  for (const std::string& phrase : kGatePhrases) {
    std::printf("gate %-26s %6d\n", ("\"" + phrase + "\"").c_str(), by_gate[phrase]);
    EXPECT_GT(by_gate[phrase], 0) << "no mutant reached the decoder's \"" << phrase << "\" check";
  }
}

// The mutator itself must be deterministic, or a failure seen in CI could not be replayed.
TEST(CodecMutation, SameSeedSameMutants) {
  Mutator a(testing::make_seeds(testing::seed_messages()), kRngSeed);
  Mutator b(testing::make_seeds(testing::seed_messages()), kRngSeed);
  for (int m = 0; m < testing::kMutationCount; ++m) {
    for (size_t seed = 0; seed < a.seeds().size(); ++seed) {
      EXPECT_EQ(a.mutate(static_cast<Mutation>(m), seed), b.mutate(static_cast<Mutation>(m), seed));
    }
  }
}

}  // namespace
}  // namespace keel::wire
