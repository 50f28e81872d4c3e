// Codec round trips and the documented byte layout (shared/PROTOCOL.md).
#include <gtest/gtest.h>

#include <cmath>
#include <msgpack.hpp>

#include "keel/wire/codec.hpp"
#include "wire_samples.hpp"

namespace keel::wire {
namespace {

using namespace keel::wire::testing;

template <typename T>
T round_trip(const T& message) {
  const std::vector<char> bytes = encode(message);
  const DecodeResult result = decode_bytes(bytes);
  EXPECT_TRUE(result.ok) << result.error;
  EXPECT_TRUE(result.error.empty());
  EXPECT_TRUE(std::holds_alternative<T>(result.message));
  return std::holds_alternative<T>(result.message) ? std::get<T>(result.message) : T{};
}

TEST(CodecRoundTrip, RunDescriptionKeepsEveryField) {
  const RunDescription in = sample_run();
  const RunDescription out = round_trip(in);
  EXPECT_EQ(out.rank, in.rank);
  EXPECT_EQ(out.seq, in.seq);
  EXPECT_EQ(out.run_id, in.run_id);
  EXPECT_EQ(out.model, in.model);
  EXPECT_EQ(out.world_size, in.world_size);
  ASSERT_EQ(out.layers.size(), in.layers.size());
  for (size_t i = 0; i < in.layers.size(); ++i) {
    EXPECT_EQ(out.layers[i].name, in.layers[i].name);
    EXPECT_EQ(out.layers[i].shape, in.layers[i].shape);
    EXPECT_EQ(out.layers[i].numel, in.layers[i].numel);
    EXPECT_EQ(out.layers[i].dtype, in.layers[i].dtype);
    EXPECT_EQ(out.layers[i].aliases, in.layers[i].aliases);
  }
  EXPECT_EQ(out.watches, in.watches);
  EXPECT_EQ(out.buffers, in.buffers);
  EXPECT_EQ(out.keel_version, in.keel_version);
  EXPECT_EQ(out.torch_version, in.torch_version);
  EXPECT_EQ(out.device, in.device);
  EXPECT_EQ(out.start_unix_ms, in.start_unix_ms);
  ASSERT_TRUE(out.policies_on.has_value());
  EXPECT_EQ(out.policies_on, in.policies_on);
  EXPECT_EQ(out.recording, in.recording);
}

// A sharded job's description says so; a description without the key (data parallelism, or an
// older probe) is not.
TEST(CodecRoundTrip, ShardedIsKeptAndAbsentMeansNot) {
  RunDescription run = sample_run();
  EXPECT_FALSE(round_trip(run).sharded);
  run.sharded = true;
  EXPECT_TRUE(round_trip(run).sharded);
}

// A wide model's description names its modules, and its steps between per-layer records
// carry one value per module and metric (PROTOCOL §3.2, §3.3).
TEST(CodecRoundTrip, ModulesAndTheirRollupsKeepEveryField) {
  RunDescription run = sample_run();
  ASSERT_GE(run.layers.size(), 3u);
  run.modules = {{"blocks.0", 0, 2}, {"", 2, 1}};
  const RunDescription run_out = round_trip(run);
  ASSERT_EQ(run_out.modules.size(), 2u);
  EXPECT_EQ(run_out.modules[0].name, "blocks.0");
  EXPECT_EQ(run_out.modules[0].first, 0u);
  EXPECT_EQ(run_out.modules[0].count, 2u);
  EXPECT_EQ(run_out.modules[1].name, "");
  EXPECT_EQ(run_out.modules[1].first, 2u);
  EXPECT_TRUE(round_trip(sample_run()).modules.empty());

  StepRecord step = sample_step();
  step.metric_mask = 0;
  step.layer_values.clear();
  step.module_mask = bit_of(LayerMetric::kGradNorm) | bit_of(LayerMetric::kGradNonfinite);
  step.module_count = 2;
  step.module_values = {1.5f, std::numeric_limits<float>::quiet_NaN(), 0.0f, 3.0f};
  const StepRecord out = round_trip(step);
  EXPECT_EQ(out.metric_mask, 0u);
  EXPECT_EQ(out.layer_count, step.layer_count);
  EXPECT_EQ(out.module_mask, step.module_mask);
  EXPECT_EQ(out.module_count, 2u);
  ASSERT_EQ(out.module_values.size(), 4u);
  EXPECT_EQ(out.module_values[0], 1.5f);
  EXPECT_TRUE(std::isnan(out.module_values[1]));
  EXPECT_EQ(out.module_values[3], 3.0f);
  EXPECT_EQ(out.module_block(LayerMetric::kGradNonfinite), 1);
  EXPECT_EQ(out.module_block(LayerMetric::kGradAbsmax), -1);
}

// A probe that does not report its policies (an older one) leaves the key out; one whose
// policies are all off sends an empty list. The two must stay apart.
TEST(CodecRoundTrip, RunDescriptionTellsUnreportedPoliciesFromAllOff) {
  RunDescription in = sample_run();
  in.policies_on.reset();
  EXPECT_FALSE(round_trip(in).policies_on.has_value());
  in.policies_on.emplace();
  const RunDescription all_off = round_trip(in);
  ASSERT_TRUE(all_off.policies_on.has_value());
  EXPECT_TRUE(all_off.policies_on->empty());
}

void expect_same_step(const StepRecord& out, const StepRecord& in) {
  EXPECT_EQ(out.rank, in.rank);
  EXPECT_EQ(out.seq, in.seq);
  EXPECT_EQ(out.run, in.run);
  EXPECT_EQ(out.model, in.model);
  EXPECT_EQ(out.step, in.step);
  EXPECT_EQ(out.loss, in.loss);
  EXPECT_EQ(out.lr, in.lr);
  EXPECT_EQ(out.grad_norm, in.grad_norm);
  EXPECT_EQ(out.skipped, in.skipped);
  EXPECT_EQ(out.skip_reason, in.skip_reason);
  EXPECT_EQ(out.step_time_us, in.step_time_us);
  EXPECT_EQ(out.probe_us, in.probe_us);
  EXPECT_EQ(out.dropped, in.dropped);
  EXPECT_EQ(out.probe_errors, in.probe_errors);
  EXPECT_EQ(out.record_dropped, in.record_dropped);
  EXPECT_EQ(out.snapshot_bytes, in.snapshot_bytes);
  EXPECT_EQ(out.frozen_layers, in.frozen_layers);
  EXPECT_EQ(out.unused_layers, in.unused_layers);
  EXPECT_EQ(out.group_lrs, in.group_lrs);
  EXPECT_EQ(out.stamp_unix_ns, in.stamp_unix_ns);
  EXPECT_EQ(out.metric_mask, in.metric_mask);
  EXPECT_EQ(out.layer_count, in.layer_count);
  ASSERT_EQ(out.layer_values.size(), in.layer_values.size());
  for (size_t i = 0; i < in.layer_values.size(); ++i) {
    // Bit patterns, not values: NaN payloads, signalling NaNs and -0 must survive.
    EXPECT_EQ(bits_of(out.layer_values[i]), bits_of(in.layer_values[i])) << "value " << i;
  }
  ASSERT_EQ(out.scaler.has_value(), in.scaler.has_value());
  if (in.scaler) {
    EXPECT_EQ(out.scaler->scale, in.scaler->scale);
    EXPECT_EQ(out.scaler->growth_tracker, in.scaler->growth_tracker);
    EXPECT_EQ(out.scaler->found_inf, in.scaler->found_inf);
    EXPECT_EQ(out.scaler->skipped_total, in.scaler->skipped_total);
  }
  ASSERT_EQ(out.watches.size(), in.watches.size());
  for (size_t i = 0; i < in.watches.size(); ++i) {
    EXPECT_EQ(out.watches[i].name, in.watches[i].name);
    EXPECT_EQ(bits_of(out.watches[i].absmax), bits_of(in.watches[i].absmax));
    EXPECT_EQ(bits_of(out.watches[i].rms), bits_of(in.watches[i].rms));
    EXPECT_EQ(bits_of(out.watches[i].z), bits_of(in.watches[i].z));
    EXPECT_EQ(out.watches[i].nonfinite, in.watches[i].nonfinite);
  }
  ASSERT_EQ(out.buffer_absmax.size(), in.buffer_absmax.size());
  for (size_t i = 0; i < in.buffer_absmax.size(); ++i) {
    EXPECT_EQ(bits_of(out.buffer_absmax[i]), bits_of(in.buffer_absmax[i])) << "buffer " << i;
  }
}

TEST(CodecRoundTrip, StepRecordWithScalerKeepsEveryFieldBitExactly) {
  const StepRecord in = sample_step(true);
  expect_same_step(round_trip(in), in);
}

TEST(CodecRoundTrip, StepRecordWithoutScalerDecodesNoScaler) {
  const StepRecord in = sample_step(false);
  const StepRecord out = round_trip(in);
  EXPECT_FALSE(out.scaler.has_value());
  expect_same_step(out, in);
}

TEST(CodecRoundTrip, StepRecordWithPartialMaskKeepsBlocksInPlace) {
  const StepRecord out = round_trip(sample_step());
  EXPECT_EQ(out.metric_block(LayerMetric::kGradAbsmax), -1);
  EXPECT_EQ(out.metric_block(LayerMetric::kUpdateRatio), 3);
  EXPECT_TRUE(std::isnan(out.layer_value(LayerMetric::kParamNorm, 0)));
  EXPECT_EQ(out.layer_value(LayerMetric::kUpdateRatio, 2), -7.0f);
  EXPECT_TRUE(std::isinf(out.layer_value(LayerMetric::kGradNonfinite, 0)));
}

TEST(CodecRoundTrip, StepRecordWithNoLayersAndEmptyMask) {
  StepRecord in = sample_step();
  in.metric_mask = 0;
  in.layer_count = 0;
  in.layer_values.clear();
  in.watches.clear();
  in.frozen_layers.clear();
  in.unused_layers.clear();
  expect_same_step(round_trip(in), in);
}

TEST(CodecRoundTrip, LargeStepRecordOf1200LayersAllMetrics) {
  StepRecord in = sample_step();
  in.metric_mask = kAllLayerMetrics;
  in.layer_count = 1200;
  in.layer_values.resize(6 * 1200);
  for (size_t i = 0; i < in.layer_values.size(); ++i) in.layer_values[i] = 0.001f * i - 3.0f;
  expect_same_step(round_trip(in), in);
}

TEST(CodecRoundTrip, EventKeepsEveryField) {
  const Event in = sample_event();
  const Event out = round_trip(in);
  EXPECT_EQ(out.rank, in.rank);
  EXPECT_EQ(out.seq, in.seq);
  EXPECT_EQ(out.run, in.run);
  EXPECT_EQ(out.model, in.model);
  EXPECT_EQ(out.step, in.step);
  EXPECT_EQ(out.kind, in.kind);
  EXPECT_EQ(out.layer, in.layer);
  EXPECT_EQ(out.detail, in.detail);
  EXPECT_EQ(out.stamp_unix_ns, in.stamp_unix_ns);
  ASSERT_TRUE(out.cause);
  EXPECT_EQ(out.cause->kind, in.cause->kind);
  EXPECT_EQ(out.cause->op, in.cause->op);
  EXPECT_EQ(out.cause->module, in.cause->module);
  EXPECT_EQ(out.cause->evidence, in.cause->evidence);
  EXPECT_EQ(out.cause->sentence, in.cause->sentence);

  Event plain = in;
  plain.cause.reset();
  EXPECT_FALSE(round_trip(plain).cause) << "an event with no cause has none after the trip";
}

TEST(CodecRoundTrip, AStepCarriesItsCauseKindOnlyWhenItHasOne) {
  StepRecord unsafe = sample_step();
  unsafe.cause = "loss_scale";
  EXPECT_EQ(round_trip(unsafe).cause, "loss_scale");
  StepRecord safe = sample_step();
  std::vector<char> bytes;
  encode(safe, bytes);
  const msgpack::object_handle payload = msgpack::unpack(bytes.data(), bytes.size());
  for (uint32_t i = 0; i < payload.get().via.map.size; ++i) {
    EXPECT_NE(payload.get().via.map.ptr[i].key.as<std::string>(), "cause") << "a safe step sends no cause";
  }
  EXPECT_TRUE(round_trip(safe).cause.empty());
}

// A probe that names no model leaves `model` out, and a message of a probe older than the
// run identity has neither key: both decode with the field empty (PROTOCOL §5).
TEST(CodecRoundTrip, RunIdentityIsOptionalAndLeftOutWhenEmpty) {
  StepRecord unnamed = sample_step();
  unnamed.model.clear();
  std::vector<char> bytes;
  encode(unnamed, bytes);
  EXPECT_EQ(round_trip(unnamed).run, unnamed.run);
  EXPECT_TRUE(round_trip(unnamed).model.empty());
  const msgpack::object_handle payload = msgpack::unpack(bytes.data(), bytes.size());
  for (uint32_t i = 0; i < payload.get().via.map.size; ++i) {
    EXPECT_NE(payload.get().via.map.ptr[i].key.as<std::string>(), "model") << "an empty model is sent";
  }

  std::vector<char> event_bytes;
  encode(sample_event(), event_bytes);
  const DecodeResult older = decode_bytes(without_field(without_field(event_bytes, "run"), "model"));
  ASSERT_TRUE(std::holds_alternative<Event>(older.message)) << older.error;
  EXPECT_TRUE(std::get<Event>(older.message).run.empty());
  EXPECT_TRUE(std::get<Event>(older.message).model.empty());
}

// A probe older than rewind's snapshots sends no snapshot_bytes: the record decodes, keeping none.
TEST(CodecRoundTrip, ARecordWithoutSnapshotBytesKeepsNone) {
  std::vector<char> bytes;
  encode(sample_step(), bytes);
  const DecodeResult older = decode_bytes(without_field(bytes, "snapshot_bytes"));
  ASSERT_TRUE(std::holds_alternative<StepRecord>(older.message)) << older.error;
  EXPECT_EQ(std::get<StepRecord>(older.message).snapshot_bytes, 0u);
  EXPECT_EQ(round_trip(sample_step()).snapshot_bytes, 48200000u);
}

TEST(CodecRoundTrip, CommandKeepsEveryField) {
  const Command in = sample_command();
  const Command out = round_trip(in);
  EXPECT_EQ(out.rank, in.rank);
  EXPECT_EQ(out.seq, in.seq);
  EXPECT_EQ(out.id, in.id);
  EXPECT_EQ(out.kind, in.kind);
  EXPECT_EQ(out.count, in.count);
  EXPECT_EQ(out.label, in.label);
  EXPECT_EQ(out.policy, in.policy);
  EXPECT_EQ(out.enable, in.enable);
  EXPECT_EQ(out.at_step, -1) << "absent: the next step";
  Command scheduled = in;
  scheduled.at_step = 812;
  EXPECT_EQ(round_trip(scheduled).at_step, 812);
  EXPECT_EQ(out.token, "") << "absent: none";
  Command history = in;
  history.kind = "history";
  history.token = "9f86d081884c7d65";
  EXPECT_EQ(round_trip(history).token, "9f86d081884c7d65");
}

TEST(CodecRoundTrip, AckKeepsEveryField) {
  const Ack in = sample_ack();
  const Ack out = round_trip(in);
  EXPECT_EQ(out.rank, in.rank);
  EXPECT_EQ(out.seq, in.seq);
  EXPECT_EQ(out.run, in.run);
  EXPECT_EQ(out.model, in.model);
  EXPECT_EQ(out.id, in.id);
  EXPECT_EQ(out.ok, in.ok);
  EXPECT_EQ(out.step, in.step);
  EXPECT_EQ(out.error, in.error);
  EXPECT_EQ(out.path, in.path);
  EXPECT_EQ(out.bytes, in.bytes);
  EXPECT_EQ(out.count, in.count);
}

TEST(CodecRoundTrip, ExtremeIntegersSurvive) {
  StepRecord in = sample_step();
  in.rank = std::numeric_limits<int32_t>::min();
  in.seq = std::numeric_limits<uint64_t>::max();
  in.step = std::numeric_limits<int64_t>::min();
  in.dropped = std::numeric_limits<uint64_t>::max();
  in.probe_errors = std::numeric_limits<uint64_t>::max() - 1;
  in.stamp_unix_ns = std::numeric_limits<int64_t>::max();
  expect_same_step(round_trip(in), in);
}

TEST(CodecRoundTrip, NegativeZeroAndNonFiniteGlobalsSurvive) {
  StepRecord in = sample_step();
  in.loss = -0.0;
  in.lr = std::numeric_limits<double>::quiet_NaN();
  in.grad_norm = -std::numeric_limits<double>::infinity();
  const StepRecord out = round_trip(in);
  EXPECT_TRUE(std::signbit(out.loss));
  EXPECT_TRUE(std::isnan(out.lr));
  EXPECT_TRUE(std::isinf(out.grad_norm) && out.grad_norm < 0);
}

TEST(CodecEncode, ReusesAndClearsTheOutputBuffer) {
  std::vector<char> out(1000, 'x');
  encode(sample_event(), out);
  EXPECT_EQ(out, encode(sample_event()));
  EXPECT_TRUE(decode_bytes(out).ok);
}

TEST(CodecEncode, TopicsMatchTheMessageType) {
  EXPECT_STREQ(topic_of(sample_run()), "run");
  EXPECT_STREQ(topic_of(sample_step()), "step");
  EXPECT_STREQ(topic_of(sample_event()), "event");
  EXPECT_STREQ(topic_of(sample_command()), "cmd");
  EXPECT_STREQ(topic_of(sample_ack()), "ack");
}

TEST(CodecEncode, LayerValuesTravelAsOneLittleEndianFloat32Bin) {
  StepRecord in = sample_step();
  in.metric_mask = 1;
  in.layer_count = 2;
  in.layer_values = {1.0f, -2.0f};
  const std::vector<char> bytes = encode(in);
  // bin8 of 8 bytes: 1.0f = 00 00 80 3f, -2.0f = 00 00 00 c0.
  const std::string expected("\xc4\x08\x00\x00\x80\x3f\x00\x00\x00\xc0", 10);
  EXPECT_NE(std::string(bytes.begin(), bytes.end()).find("\xa6layers" + expected),
            std::string::npos);
}

const msgpack::object* find_key(const msgpack::object& map, const std::string& key) {
  for (uint32_t i = 0; i < map.via.map.size; ++i) {
    if (map.via.map.ptr[i].key.as<std::string>() == key) return &map.via.map.ptr[i].val;
  }
  return nullptr;
}

TEST(CodecEncode, FloatFieldsAreMsgpackFloatsEvenWhenIntegral) {
  StepRecord in = sample_step();
  in.loss = 3.0;
  in.watches[0].absmax = 2.0f;
  const std::vector<char> bytes = encode(in);
  const msgpack::object_handle handle = msgpack::unpack(bytes.data(), bytes.size());
  const msgpack::object* loss = find_key(handle.get(), "loss");
  ASSERT_NE(loss, nullptr);
  EXPECT_EQ(loss->type, msgpack::type::FLOAT64);
  const msgpack::object* watches = find_key(handle.get(), "watches");
  ASSERT_NE(watches, nullptr);
  const msgpack::object* absmax = find_key(watches->via.array.ptr[0], "absmax");
  ASSERT_NE(absmax, nullptr);
  EXPECT_EQ(absmax->type, msgpack::type::FLOAT32);
}

TEST(CodecEncode, OverlongStringsAreClippedAtACharacterBoundary) {
  Event in = sample_event();
  // One ASCII byte, then two-byte characters: a cut at exactly kMaxStringBytes would split one.
  in.detail = "a";
  while (in.detail.size() < kMaxStringBytes + 100) in.detail += "\xc3\xa9";
  const DecodeResult result = decode_bytes(encode(in));
  ASSERT_TRUE(result.ok) << result.error;
  const std::string& detail = std::get<Event>(result.message).detail;
  EXPECT_EQ(detail.size(), kMaxStringBytes - 1);
  EXPECT_EQ(detail, in.detail.substr(0, kMaxStringBytes - 1));
  EXPECT_EQ(static_cast<unsigned char>(detail.back()), 0xa9u);
}

// A payload written by hand from PROTOCOL.md, the way a peer in another language would:
// integers where floats are expected, keys in another order, an unknown key.
TEST(CodecWire, DecodesAStepWrittenFromTheDocumentedLayout) {
  msgpack::sbuffer buffer;
  Packer p(buffer);
  p.pack_map(10);
  p.pack(std::string("note"));
  p.pack(std::string("written by hand"));
  p.pack(std::string("layers"));
  const char block[8] = {0, 0, static_cast<char>(0x80), 0x3f, 0, 0, 0, static_cast<char>(0xc0)};
  p.pack_bin(8);
  p.pack_bin_body(block, 8);
  p.pack(std::string("type"));
  p.pack(std::string("step"));
  p.pack(std::string("v"));
  p.pack(1);
  p.pack(std::string("rank"));
  p.pack(0);
  p.pack(std::string("seq"));
  p.pack(5);
  p.pack(std::string("step"));
  p.pack(100);
  p.pack(std::string("metric_mask"));
  p.pack(1u << 4);
  p.pack(std::string("layer_count"));
  p.pack(2);
  p.pack(std::string("loss"));
  p.pack(3);
  const DecodeResult result = decode(buffer.data(), buffer.size());
  ASSERT_TRUE(result.ok) << result.error;
  const StepRecord& s = std::get<StepRecord>(result.message);
  EXPECT_EQ(s.seq, 5u);
  EXPECT_EQ(s.step, 100);
  EXPECT_EQ(s.loss, 3.0);
  EXPECT_EQ(s.lr, 0.0);  // absent: default
  EXPECT_FALSE(s.scaler.has_value());
  EXPECT_EQ(s.layer_value(LayerMetric::kParamNorm, 0), 1.0f);
  EXPECT_EQ(s.layer_value(LayerMetric::kParamNorm, 1), -2.0f);
}

TEST(CodecWire, UnknownKeysAreIgnored) {
  for (const Message& m : sample_messages()) {
    std::vector<char> bytes = with_field(encode(m), "from_the_future", [](Packer& p) {
      p.pack_map(1);
      p.pack(std::string("nested"));
      p.pack_array(2);
      p.pack(1.5);
      p.pack(std::string("x"));
    });
    const DecodeResult result = decode_bytes(bytes);
    ASSERT_TRUE(result.ok) << topic_of(m) << ": " << result.error;
    EXPECT_EQ(encode(result.message), encode(m)) << topic_of(m);
  }
}

TEST(CodecWire, MissingOptionalKeysKeepDefaults) {
  const DecodeResult step = decode_bytes(without_field(encode(sample_step()), "loss"));
  ASSERT_TRUE(step.ok) << step.error;
  EXPECT_EQ(std::get<StepRecord>(step.message).loss, 0.0);
  EXPECT_EQ(std::get<StepRecord>(step.message).lr, sample_step().lr);

  const DecodeResult no_scaler = decode_bytes(without_field(encode(sample_step()), "scaler"));
  ASSERT_TRUE(no_scaler.ok) << no_scaler.error;
  EXPECT_FALSE(std::get<StepRecord>(no_scaler.message).scaler.has_value());

  const DecodeResult ack = decode_bytes(without_field(encode(sample_ack()), "step"));
  ASSERT_TRUE(ack.ok) << ack.error;
  EXPECT_EQ(std::get<Ack>(ack.message).step, -1);

  const DecodeResult cmd = decode_bytes(without_field(encode(sample_command()), "count"));
  ASSERT_TRUE(cmd.ok) << cmd.error;
  EXPECT_EQ(std::get<Command>(cmd.message).count, 1);
}

TEST(CodecWire, EveryEncodedMessageDecodesToItsOwnType) {
  for (const Message& m : sample_messages()) {
    const DecodeResult result = decode_bytes(encode(m));
    ASSERT_TRUE(result.ok) << result.error;
    EXPECT_EQ(result.message.index(), m.index());
    EXPECT_EQ(encode(result.message), encode(m));
  }
}

}  // namespace
}  // namespace keel::wire
