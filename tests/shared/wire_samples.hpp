// Sample messages with every field set to a non-default value, and payload surgery helpers,
// shared by the codec tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <msgpack.hpp>
#include <string>
#include <vector>

#include "keel/wire/codec.hpp"
#include "keel/wire/messages.hpp"

namespace keel::wire::testing {

inline RunDescription sample_run() {
  RunDescription m;
  m.rank = 3;
  m.seq = 1234567890123ull;
  m.run_id = "run-2024-06-01T03:00:00-char-transformer";
  m.model = "discriminator";
  m.world_size = 8;
  m.layers = {{"tok_emb.weight", {96, 65}, 96 * 65, "float32", {"head.weight", "decoder.weight"}},
              {"blocks.0.attn.qkv.weight", {288, 96}, 288 * 96, "bfloat16"},
              {"blocks.0.ln.bias", {96}, 96, "float16"},
              {"scalar", {}, 1, "float64"}};
  m.watches = {"logits", "blocks.0.attn.scores"};
  m.buffers = {"bn1.running_mean", "bn1.running_var"};
  m.keel_version = "0.1.0";
  m.torch_version = "1.13.1";
  m.device = "cuda:1";
  m.start_unix_ms = 1717210800123;
  m.policies_on = std::vector<std::string>{"skip_nonfinite", "dump_nonfinite"};
  m.recording = "/home/ada/keel-runs/run-2024-06-01T03:00:00-char-transformer-discriminator-rank3.keelrec";
  return m;
}

// Metrics 0, 2, 3 and 5 present (param_norm and grad_absmax not due this step).
inline constexpr uint32_t kSampleMask = (1u << 0) | (1u << 2) | (1u << 3) | (1u << 5);

inline float float_from_bits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

inline uint32_t bits_of(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

inline StepRecord sample_step(bool with_scaler = true) {
  StepRecord m;
  m.rank = -2;  // negative on purpose: rank is a signed field
  m.seq = 42;
  m.run = "run-2024-06-01T03:00:00-char-transformer";
  m.model = "discriminator";
  m.step = 987654321012ll;
  m.loss = 2.718281828459045;
  m.lr = 3e-4;
  m.grad_norm = 1.5e10;
  m.skipped = true;
  m.skip_reason = "nonfinite";
  m.step_time_us = 78123.5;
  m.probe_us = 912.25;
  m.dropped = 17;
  m.probe_errors = 2;
  m.record_dropped = 5;
  m.snapshot_bytes = 48200000;
  m.stamp_unix_ns = 1717210800123456789ll;
  m.metric_mask = kSampleMask;
  m.layer_count = 3;
  m.layer_values = {1.0f,
                    -0.0f,
                    std::numeric_limits<float>::quiet_NaN(),
                    std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity(),
                    float_from_bits(0x7fa00001u),  // signalling NaN with a payload
                    float_from_bits(0xffc12345u),  // negative quiet NaN with a payload
                    std::numeric_limits<float>::denorm_min(),
                    std::numeric_limits<float>::max(),
                    0.5f,
                    123.25f,
                    -7.0f};
  if (with_scaler) m.scaler = ScalerState{32768.0, 1999, true, 12};
  m.watches = {{"logits", 45.5f, 3.25f, 8.125f, 0},
               {"blocks.0.attn.scores", std::numeric_limits<float>::infinity(), 1.5f, -2.0f, 96}};
  if (with_scaler) m.buffer_absmax = {4.0e28f, std::numeric_limits<float>::infinity()};
  m.frozen_layers = {0, 2};
  if (with_scaler) m.group_lrs = {3e-4, 3e-5};
  if (with_scaler) m.unused_layers = {1};
  return m;
}

inline Event sample_event() {
  Event m;
  m.rank = 5;
  m.seq = 77;
  m.run = "gan-run";
  m.model = "generator";
  m.step = 1200;
  m.kind = "first_nonfinite";
  m.layer = "blocks.2.mlp.fc2.weight";
  m.detail = "grad of blocks.2.mlp.fc2.weight has 12 NaN values";
  m.stamp_unix_ns = -1;
  m.cause = Cause{"forward", "aten::log", "blocks.2.route", "log of a value that underflowed to 0",
                  "NaN born in the forward pass: aten::log in blocks.2.route at step 1200"};
  return m;
}

inline Command sample_command() {
  Command m;
  m.rank = -1;
  m.seq = 9;
  m.id = 0xfeedfacecafebeefull;
  m.kind = "policy";
  m.count = 3;
  m.label = "before-lr-bump";
  m.policy = "skip_on_spike";
  m.enable = true;
  return m;
}

inline Ack sample_ack() {
  Ack m;
  m.rank = 1;
  m.seq = 10;
  m.run = "gan-run";
  m.model = "critic";
  m.id = 0xfeedfacecafebeefull;
  m.ok = true;
  m.step = 1201;
  m.error = "dump directory was full; retried";
  m.path = "/tmp/keel-dumps/step-1201-before-lr-bump.pt";
  m.bytes = 5368709120ll;
  m.count = 4096;
  return m;
}

inline std::vector<Message> sample_messages() {
  return {sample_run(), sample_step(true), sample_step(false), sample_event(), sample_command(),
          sample_ack()};
}

inline DecodeResult decode_bytes(const std::vector<char>& bytes) {
  return decode(bytes.data(), bytes.size());
}

using Packer = msgpack::packer<msgpack::sbuffer>;
using ValueWriter = std::function<void(Packer&)>;

// Rebuilds a payload's top-level map with one key changed: `value` replaces (or, when the
// key is absent, adds) the key's value; an empty `value` removes the key. Other entries are
// copied as they are.
inline std::vector<char> with_field(const std::vector<char>& payload, const std::string& key,
                                    const ValueWriter& value) {
  msgpack::object_handle handle = msgpack::unpack(payload.data(), payload.size());
  const msgpack::object_map& map = handle.get().via.map;
  bool present = false;
  for (uint32_t i = 0; i < map.size; ++i) present |= map.ptr[i].key.as<std::string>() == key;
  const uint32_t entries = map.size + (value && !present ? 1 : 0) - (!value && present ? 1 : 0);
  msgpack::sbuffer buffer;
  Packer packer(buffer);
  packer.pack_map(entries);
  for (uint32_t i = 0; i < map.size; ++i) {
    if (map.ptr[i].key.as<std::string>() == key) {
      if (!value) continue;
      packer.pack(key);
      value(packer);
      continue;
    }
    packer.pack(map.ptr[i].key);
    packer.pack(map.ptr[i].val);
  }
  if (value && !present) {
    packer.pack(key);
    value(packer);
  }
  return std::vector<char>(buffer.data(), buffer.data() + buffer.size());
}

inline std::vector<char> without_field(const std::vector<char>& payload, const std::string& key) {
  return with_field(payload, key, ValueWriter());
}

template <typename T>
ValueWriter value_of(T v) {
  return [v](Packer& p) { p.pack(v); };
}

}  // namespace keel::wire::testing
