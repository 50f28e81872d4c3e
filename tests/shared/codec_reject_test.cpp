// Hostile and broken input: every decoder failure is an error value with a sentence, never a
// crash, an exception or a read past the bytes received. Run under ASan/UBSan as well.
#include <gtest/gtest.h>

#include <random>

#include "keel/wire/codec.hpp"
#include "wire_samples.hpp"

namespace keel::wire {
namespace {

using namespace keel::wire::testing;

DecodeResult decode_string(const std::string& bytes) { return decode(bytes.data(), bytes.size()); }

// Rejected with an error that mentions `needle`.
void expect_error(const DecodeResult& result, const std::string& needle) {
  EXPECT_FALSE(result.ok);
  EXPECT_NE(result.error.find(needle), std::string::npos)
      << "error \"" << result.error << "\" does not mention \"" << needle << "\"";
}

void expect_error(const std::vector<char>& bytes, const std::string& needle) {
  expect_error(decode_bytes(bytes), needle);
}

TEST(CodecReject, EveryTruncationOfEveryMessageType) {
  for (const Message& m : sample_messages()) {
    const std::vector<char> bytes = encode(m);
    for (size_t size = 0; size < bytes.size(); ++size) {
      // A copy of exactly `size` bytes, so ASan sees any read past the end.
      const std::vector<char> prefix(bytes.begin(), bytes.begin() + size);
      const DecodeResult result = decode(prefix.data(), prefix.size());
      EXPECT_FALSE(result.ok) << topic_of(m) << " prefix of " << size << " bytes";
      EXPECT_FALSE(result.error.empty()) << topic_of(m) << " prefix of " << size << " bytes";
    }
  }
  const std::vector<char> step = encode(sample_step());
  // Long enough for the step map's entry count, so what is found is the truncation.
  expect_error(std::vector<char>(step.begin(), step.begin() + 60), "truncated");
}

TEST(CodecReject, EveryBitFlipOfEveryMessageTypeIsHandled) {
  for (const Message& m : sample_messages()) {
    const std::vector<char> bytes = encode(m);
    std::vector<char> flipped = bytes;
    for (size_t i = 0; i < bytes.size(); ++i) {
      for (int bit = 0; bit < 8; ++bit) {
        flipped[i] = static_cast<char>(bytes[i] ^ (1 << bit));
        const DecodeResult result = decode(flipped.data(), flipped.size());
        EXPECT_TRUE(result.ok || !result.error.empty())
            << topic_of(m) << " byte " << i << " bit " << bit;
      }
      flipped[i] = bytes[i];
    }
  }
}

TEST(CodecReject, RandomByteStrings) {
  std::mt19937 rng(20240601);
  const std::vector<char> valid = encode(sample_step());
  for (int i = 0; i < 4000; ++i) {
    std::vector<char> bytes(rng() % 300);
    for (char& b : bytes) b = static_cast<char>(rng());
    // Half start like a real message so the noise reaches the field readers too.
    if (i % 2 == 1 && !bytes.empty()) {
      const size_t keep = std::min(bytes.size(), valid.size()) * (rng() % 100) / 100;
      std::copy(valid.begin(), valid.begin() + keep, bytes.begin());
    }
    const DecodeResult result = decode(bytes.data(), bytes.size());
    EXPECT_TRUE(result.ok || !result.error.empty()) << "case " << i;
  }
}

TEST(CodecReject, RandomMutationsOfValidPayloads) {
  std::mt19937 rng(7);
  const std::vector<Message> messages = sample_messages();
  for (int i = 0; i < 3000; ++i) {
    std::vector<char> bytes = encode(messages[i % messages.size()]);
    const int edits = 1 + rng() % 4;
    for (int e = 0; e < edits; ++e) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    const DecodeResult result = decode(bytes.data(), bytes.size());
    EXPECT_TRUE(result.ok || !result.error.empty()) << "case " << i;
  }
}

TEST(CodecReject, EmptyAndNullPayloads) {
  expect_error(decode(nullptr, 0), "empty");
  expect_error(decode("", 0), "empty");
}

TEST(CodecReject, OversizedPayloadBeforeParsing) {
  std::vector<char> bytes = encode(sample_event());
  bytes.resize(kMaxPayloadBytes + 1, '\0');
  expect_error(bytes, "exceeds the limit");
}

TEST(CodecReject, TrailingBytesAfterTheMap) {
  std::vector<char> bytes = encode(sample_ack());
  bytes.push_back('\0');
  expect_error(bytes, "1 trailing bytes");
}

TEST(CodecReject, AFrozenLayerMustBeALayer) {
  StepRecord record = sample_step();
  record.frozen_layers = {1, 3};
  expect_error(encode(record), "frozen[1] = 3 is not a layer (layer_count 3)");
}

TEST(CodecReject, AnUnusedLayerMustBeALayer) {
  StepRecord record = sample_step();
  record.unused_layers = {7};
  expect_error(encode(record), "unused[0] = 7 is not a layer (layer_count 3)");
}

TEST(CodecReject, ModulesMustBeAscendingDisjointRangesOfTheLayers) {
  RunDescription overlapping = sample_run();
  overlapping.modules = {{"a", 0, 2}, {"b", 1, 2}};
  expect_error(encode(overlapping), "modules[1] (layers 1 to 3) overlaps the module before it");
  RunDescription past_the_end = sample_run();
  past_the_end.modules = {{"a", 2, 5}};
  expect_error(encode(past_the_end), "modules[0] (layers 2 to 7) overlaps the module before it or runs past the 4 layers");
}

TEST(CodecReject, ModuleBlockLengthMustMatchMaskTimesCount) {
  StepRecord record = sample_step();
  record.module_mask = kAllLayerMetrics;
  record.module_count = 2;
  record.module_values.assign(11, 1.0f);
  expect_error(encode(record), "field \"module_values\" holds 44 bytes, expected 48 (6 metrics x 2 modules x 4 bytes)");
}

TEST(CodecReject, LayerBlockLengthMustMatchMaskTimesCount) {
  StepRecord short_block = sample_step();
  short_block.layer_values.pop_back();
  expect_error(encode(short_block), "expected 48 (4 metrics x 3 layers x 4 bytes)");

  StepRecord wrong_mask = sample_step();
  wrong_mask.metric_mask = kAllLayerMetrics;
  expect_error(encode(wrong_mask), "field \"layers\" holds 48 bytes, expected 72");

  StepRecord wrong_count = sample_step();
  wrong_count.layer_count = 4;
  expect_error(encode(wrong_count), "expected 64");

  // A count large enough to overflow 32-bit arithmetic must not wrap into a match.
  StepRecord huge = sample_step();
  huge.metric_mask = kAllLayerMetrics;
  huge.layer_count = 0x2aaaaaabu;  // 6 * 4 * this wraps to 8 in 32 bits
  huge.layer_values.resize(2);
  expect_error(encode(huge), "exceeds the limit");
}

TEST(CodecReject, LayerBlockOfTheWrongType) {
  const std::vector<char> valid = encode(sample_step());
  expect_error(with_field(valid, "layers", [](Packer& p) { p.pack(std::vector<float>(12)); }),
               "field \"layers\" is an array, expected a binary block");
}

TEST(CodecReject, HugeDeclaredLengthsWithFewBytes) {
  const std::vector<std::string> cases = {
      // {"v": str32 of 0xffffffff bytes} with only two bytes present
      std::string("\x81\xa1v\xdb\xff\xff\xff\xff" "ab", 10),
      // {"v": bin32 of 0xffffffff bytes}
      std::string("\x81\xa1v\xc6\xff\xff\xff\xff" "ab", 10),
      // {"v": array32 of 0xffffffff items}
      std::string("\x81\xa1v\xdd\xff\xff\xff\xff\x01\x02", 10),
      // {"v": map32 of 0xffffffff entries}
      std::string("\x81\xa1v\xdf\xff\xff\xff\xff\x01\x02", 10),
      // {"v": ext32 of 0xffffffff bytes}
      std::string("\x81\xa1v\xc9\xff\xff\xff\xff\x01\x02", 10),
      // top-level array32 / map32 with huge counts
      std::string("\xdd\xff\xff\xff\xff\x01", 6),
      std::string("\xdf\xff\xff\xff\xff\xa1v\x01", 8),
      // str32 just above the string limit, with the bytes really there
      std::string("\x81\xa1v\xdb\x00\x01\x00\x01", 8) + std::string(65537, 'x'),
      // array16 of 0xffff items in a 10-byte payload
      std::string("\x81\xa1v\xdc\xff\xff\x01\x02\x03\x04", 10),
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const DecodeResult result = decode_string(cases[i]);
    EXPECT_FALSE(result.ok) << "case " << i;
    EXPECT_FALSE(result.error.empty()) << "case " << i;
  }
  expect_error(decode_string(cases[0]), "truncated");
  expect_error(decode_string(cases[2]), "array declares more items");
  expect_error(decode_string(cases[3]), "map declares more entries");
  expect_error(decode_string(cases[7]), "string is longer than the limit");
}

TEST(CodecReject, DeepNesting) {
  std::string bytes("\x81\xa1v", 3);
  bytes += std::string(1000, '\x91');
  bytes += '\x01';
  expect_error(decode_string(bytes), "nested deeper");
}

TEST(CodecReject, NonMapTopLevel) {
  expect_error(decode_string(std::string("\x93\x01\x02\x03", 4)), "payload is an array");
  expect_error(decode_string(std::string("\x2a", 1)), "payload is an integer");
  expect_error(decode_string(std::string("\x2a\x2b", 2)), "payload is an integer");
  expect_error(decode_string(std::string("\xc0", 1)), "payload is nil");
  expect_error(decode_string(std::string("\xa3run", 4)), "payload is a string");
}

TEST(CodecReject, WrongVersion) {
  for (const Message& m : sample_messages()) {
    expect_error(with_field(encode(m), "v", value_of(7)), "protocol version 7, expected 1");
  }
  expect_error(with_field(encode(sample_event()), "v", value_of(std::string("1"))),
               "field \"v\" is a string, expected an integer");
  expect_error(with_field(encode(sample_event()), "v", value_of(-1)),
               "field \"v\" has value -1");
}

TEST(CodecReject, UnknownMessageType) {
  expect_error(with_field(encode(sample_event()), "type", value_of(std::string("telemetry"))),
               "unknown message type \"telemetry\"");
  expect_error(with_field(encode(sample_event()), "type", value_of(3)),
               "field \"type\" is an integer, expected a string");
}

TEST(CodecReject, MissingRequiredKeys) {
  for (const Message& m : sample_messages()) {
    for (const char* key : {"v", "type", "rank", "seq"}) {
      expect_error(without_field(encode(m), key),
                   std::string("required field \"") + key + "\" is missing");
    }
  }
  for (const char* key : {"step", "metric_mask", "layer_count", "layers"}) {
    expect_error(without_field(encode(sample_step()), key),
                 std::string("required field \"") + key + "\" is missing");
  }
  expect_error(without_field(encode(sample_event()), "kind"), "\"kind\" is missing");
  expect_error(without_field(encode(sample_command()), "id"), "\"id\" is missing");
  expect_error(without_field(encode(sample_ack()), "ok"), "\"ok\" is missing");
}

TEST(CodecReject, WrongFieldTypes) {
  const std::vector<char> step = encode(sample_step());
  expect_error(with_field(step, "step", value_of(std::string("12"))),
               "field \"step\" is a string, expected an integer");
  expect_error(with_field(step, "step", value_of(1.5)),
               "field \"step\" is a float, expected an integer");
  expect_error(with_field(step, "loss", value_of(std::string("nan"))),
               "field \"loss\" is a string, expected a number");
  expect_error(with_field(step, "skipped", value_of(1)),
               "field \"skipped\" is an integer, expected a boolean");
  expect_error(with_field(step, "skip_reason", value_of(false)),
               "field \"skip_reason\" is a boolean, expected a string");
  expect_error(with_field(step, "scaler", value_of(std::string("on"))),
               "field \"scaler\" is a string, expected nil or a map");
  expect_error(with_field(step, "cause", value_of(3)), "field \"cause\" is an integer, expected a string");
  const std::vector<char> event = encode(sample_event());
  expect_error(with_field(event, "cause", value_of(std::string("forward"))),
               "field \"cause\" is a string, expected a map");
  expect_error(with_field(event, "cause", [](Packer& p) { p.pack_map(1); p.pack(std::string("op")); p.pack(std::string("aten::log")); }),
               "required field \"cause.kind\" is missing");
  expect_error(with_field(step, "buffer_absmax", value_of(3)),
               "field \"buffer_absmax\" is an integer, expected a binary block of little-endian float32");
  expect_error(with_field(step, "buffer_absmax", [](Packer& p) { p.pack_bin(6); p.pack_bin_body("\0\0\0\0\0\0", 6); }),
               "field \"buffer_absmax\" holds 6 bytes, expected 4 bytes per buffer");
  expect_error(with_field(encode(sample_run()), "buffers", [](Packer& p) { p.pack_array(1); p.pack(7); }),
               "field \"buffers[0]\" is an integer, expected a string");
  expect_error(with_field(step, "watches", value_of(3)),
               "field \"watches\" is an integer, expected an array");
  expect_error(with_field(step, "watches", [](Packer& p) { p.pack_array(1); p.pack(1); }),
               "watches[0] is an integer, expected a map");
  expect_error(with_field(step, "scaler",
                          [](Packer& p) {
                            p.pack_map(1);
                            p.pack(std::string("scale"));
                            p.pack(std::string("big"));
                          }),
               "field \"scaler.scale\" is a string");
  expect_error(with_field(encode(sample_run()), "layers",
                          [](Packer& p) {
                            p.pack_array(1);
                            p.pack_map(2);
                            p.pack(std::string("name"));
                            p.pack(std::string("w"));
                            p.pack(std::string("shape"));
                            p.pack_array(2);
                            p.pack(3);
                            p.pack(std::string("4"));
                          }),
               "field \"layers[0].shape[1]\" is a string, expected an integer");
  expect_error(with_field(encode(sample_run()), "watches",
                          [](Packer& p) { p.pack_array(1); p.pack_nil(); }),
               "field \"watches[0]\" is nil, expected a string");
}

TEST(CodecReject, IntegersOutOfRange) {
  const std::vector<char> step = encode(sample_step());
  expect_error(with_field(step, "rank", value_of(int64_t{1} << 40)),
               "field \"rank\" has value 1099511627776, which does not fit in int32");
  expect_error(with_field(step, "seq", value_of(-5)),
               "field \"seq\" has value -5, which does not fit in uint64");
  expect_error(with_field(step, "metric_mask", value_of(uint64_t{1} << 33)),
               "does not fit in uint32");
}

TEST(CodecReject, RepeatedAndNonStringKeys) {
  std::vector<char> bytes = encode(sample_event());
  bytes[0] = static_cast<char>(static_cast<unsigned char>(bytes[0]) + 1);  // fixmap: one more entry
  const std::string extra("\xa4step\x05", 6);
  bytes.insert(bytes.end(), extra.begin(), extra.end());
  expect_error(bytes, "field \"step\" appears twice");

  std::vector<char> int_key = encode(sample_event());
  int_key[0] = static_cast<char>(static_cast<unsigned char>(int_key[0]) + 1);
  int_key.push_back('\x07');
  int_key.push_back('\x08');
  const unsigned last_key = static_cast<unsigned char>(int_key[0]) & 0x0fu;  // fixmap's entry count
  expect_error(int_key, "key #" + std::to_string(last_key) + " is an integer, expected a string");
}

TEST(CodecReject, TooManyItems) {
  expect_error(with_field(encode(sample_step()), "watches",
                          [](Packer& p) {
                            p.pack_array(kMaxWatches + 1);
                            for (uint32_t i = 0; i <= kMaxWatches; ++i) p.pack_map(0);
                          }),
               "more than the limit of 1024");
}

TEST(CodecReject, ALayerWithTooManyAliases) {
  expect_error(with_field(encode(sample_run()), "layers",
                          [](Packer& p) {
                            p.pack_array(1);
                            p.pack_map(2);
                            p.pack(std::string("name"));
                            p.pack(std::string("w"));
                            p.pack(std::string("aliases"));
                            p.pack_array(kMaxAliases + 1);
                            for (uint32_t i = 0; i <= kMaxAliases; ++i) p.pack(std::string("a"));
                          }),
               "more than the limit of 64");
}

}  // namespace
}  // namespace keel::wire
