// Encoding side of the wire codec: topic names and message -> msgpack payload.
// The byte layout is documented in shared/PROTOCOL.md; decode.cpp is the other half.
#include "keel/wire/codec.hpp"

#include <cstring>
#include <msgpack.hpp>

namespace keel::wire {
namespace {

constexpr bool kLittleEndianHost = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

// Appends straight into the caller's vector, so encoding allocates only when it grows.
struct VectorWriter {
  std::vector<char>& out;
  void write(const char* data, size_t size) { out.insert(out.end(), data, data + size); }
};

// Thin layer over msgpack::packer. Floats are written by hand because msgpack-c 4.x packs
// integral floats as integers, which would lose -0.0 and make a float field's type depend
// on its value; the protocol promises float64/float32 for them.
class Encoder {
 public:
  explicit Encoder(std::vector<char>& out) : writer_{out}, packer_(writer_) {}

  void map(uint32_t entries) { packer_.pack_map(entries); }
  void array(uint32_t items) { packer_.pack_array(items); }
  template <size_t N>
  void key(const char (&name)[N]) {
    packer_.pack_str(N - 1);
    packer_.pack_str_body(name, N - 1);
  }
  void str(const std::string& value) {
    const uint32_t size = clipped_size(value);
    packer_.pack_str(size);
    packer_.pack_str_body(value.data(), size);
  }
  void uint(uint64_t value) { packer_.pack_uint64(value); }
  void sint(int64_t value) { packer_.pack_int64(value); }
  void boolean(bool value) { value ? packer_.pack_true() : packer_.pack_false(); }
  void nil() { packer_.pack_nil(); }
  void f64(double value) {
    uint64_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    char buf[9] = {static_cast<char>(0xcb)};
    for (int i = 0; i < 8; ++i) buf[1 + i] = static_cast<char>(bits >> (56 - 8 * i));
    writer_.write(buf, sizeof buf);
  }
  void f32(float value) {
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    char buf[5] = {static_cast<char>(0xca)};
    for (int i = 0; i < 4; ++i) buf[1 + i] = static_cast<char>(bits >> (24 - 8 * i));
    writer_.write(buf, sizeof buf);
  }
  // One bin of little-endian float32: a memcpy on little-endian hosts, which is why the
  // per-layer block is not an array of msgpack floats.
  void float_block(const std::vector<float>& values) {
    const uint32_t bytes = static_cast<uint32_t>(values.size() * sizeof(float));
    packer_.pack_bin(bytes);
    if (kLittleEndianHost) {
      packer_.pack_bin_body(reinterpret_cast<const char*>(values.data()), bytes);
      return;
    }
    for (float value : values) {
      uint32_t bits;
      std::memcpy(&bits, &value, sizeof bits);
      const char le[4] = {static_cast<char>(bits), static_cast<char>(bits >> 8),
                          static_cast<char>(bits >> 16), static_cast<char>(bits >> 24)};
      writer_.write(le, sizeof le);
    }
  }

 private:
  // Decoders reject strings over kMaxStringBytes, so a long string (an exception text, a
  // path) is clipped rather than making the whole message undecodable. The cut backs off
  // to a UTF-8 character boundary.
  static uint32_t clipped_size(const std::string& value) {
    if (value.size() <= kMaxStringBytes) return static_cast<uint32_t>(value.size());
    uint32_t size = kMaxStringBytes;
    while (size > 0 && (static_cast<unsigned char>(value[size]) & 0xc0u) == 0x80u) --size;
    return size;
  }

  VectorWriter writer_;
  msgpack::packer<VectorWriter> packer_;
};

// Every message opens with these four entries; the counts below include them.
void header(Encoder& e, uint32_t entries, const char* type, int32_t rank, uint64_t seq) {
  e.map(entries);
  e.key("v");
  e.uint(kProtocolVersion);
  e.key("type");
  e.str(type);
  e.key("rank");
  e.sint(rank);
  e.key("seq");
  e.uint(seq);
}

// How many entries run_identity() writes: `run` and `model`, each only when it is not empty,
// so a probe that names no model sends what it sent before.
uint32_t run_identity_entries(const std::string& run, const std::string& model) {
  return (run.empty() ? 0u : 1u) + (model.empty() ? 0u : 1u);
}

// The run a step, event or ack belongs to (PROTOCOL §5).
void run_identity(Encoder& e, const std::string& run, const std::string& model) {
  if (!run.empty()) {
    e.key("run");
    e.str(run);
  }
  if (!model.empty()) {
    e.key("model");
    e.str(model);
  }
}

void encode_run(Encoder& e, const RunDescription& m) {
  header(e,
         (m.policies_on ? 13 : 12) + (m.model.empty() ? 0 : 1) + (m.buffers.empty() ? 0 : 1) +
             (m.recording.empty() ? 0 : 1) + (m.modules.empty() ? 0 : 1) + (m.sharded ? 1 : 0),
         kTopicRun, m.rank, m.seq);
  e.key("run_id");
  e.str(m.run_id);
  if (!m.model.empty()) {
    e.key("model");
    e.str(m.model);
  }
  e.key("world_size");
  e.sint(m.world_size);
  e.key("layers");
  e.array(static_cast<uint32_t>(m.layers.size()));
  for (const LayerInfo& layer : m.layers) {
    e.map(layer.aliases.empty() ? 4 : 5);
    e.key("name");
    e.str(layer.name);
    e.key("shape");
    e.array(static_cast<uint32_t>(layer.shape.size()));
    for (int64_t dim : layer.shape) e.sint(dim);
    e.key("numel");
    e.sint(layer.numel);
    e.key("dtype");
    e.str(layer.dtype);
    if (!layer.aliases.empty()) {
      e.key("aliases");
      e.array(static_cast<uint32_t>(layer.aliases.size()));
      for (const std::string& alias : layer.aliases) e.str(alias);
    }
  }
  e.key("watches");
  e.array(static_cast<uint32_t>(m.watches.size()));
  for (const std::string& name : m.watches) e.str(name);
  if (!m.buffers.empty()) {
    e.key("buffers");
    e.array(static_cast<uint32_t>(m.buffers.size()));
    for (const std::string& name : m.buffers) e.str(name);
  }
  e.key("keel_version");
  e.str(m.keel_version);
  e.key("torch_version");
  e.str(m.torch_version);
  e.key("device");
  e.str(m.device);
  e.key("start_unix_ms");
  e.sint(m.start_unix_ms);
  if (m.policies_on) {
    e.key("policies_on");
    e.array(static_cast<uint32_t>(m.policies_on->size()));
    for (const std::string& name : *m.policies_on) e.str(name);
  }
  if (!m.recording.empty()) {
    e.key("recording");
    e.str(m.recording);
  }
  if (!m.modules.empty()) {
    e.key("modules");
    e.array(static_cast<uint32_t>(m.modules.size()));
    for (const ModuleRange& module : m.modules) {
      e.map(3);
      e.key("name");
      e.str(module.name);
      e.key("first");
      e.uint(module.first);
      e.key("count");
      e.uint(module.count);
    }
  }
  if (m.sharded) {
    e.key("sharded");
    e.boolean(true);
  }
}

void encode_step(Encoder& e, const StepRecord& m) {
  header(e,
         21 + (m.group_lrs.empty() ? 0 : 1) + (m.unused_layers.empty() ? 0 : 1) + (m.buffer_absmax.empty() ? 0 : 1) +
             (m.cause.empty() ? 0 : 1) + (m.record_dropped == 0 ? 0 : 1) + (m.module_mask == 0 ? 0 : 3) +
             run_identity_entries(m.run, m.model),
         kTopicStep, m.rank, m.seq);
  run_identity(e, m.run, m.model);
  e.key("step");
  e.sint(m.step);
  e.key("loss");
  e.f64(m.loss);
  e.key("lr");
  e.f64(m.lr);
  e.key("grad_norm");
  e.f64(m.grad_norm);
  e.key("skipped");
  e.boolean(m.skipped);
  e.key("skip_reason");
  e.str(m.skip_reason);
  e.key("step_time_us");
  e.f64(m.step_time_us);
  e.key("probe_us");
  e.f64(m.probe_us);
  e.key("dropped");
  e.uint(m.dropped);
  e.key("probe_errors");
  e.uint(m.probe_errors);
  if (m.record_dropped != 0) {
    e.key("record_dropped");
    e.uint(m.record_dropped);
  }
  e.key("stamp_unix_ns");
  e.sint(m.stamp_unix_ns);
  e.key("metric_mask");
  e.uint(m.metric_mask);
  e.key("layer_count");
  e.uint(m.layer_count);
  e.key("layers");
  e.float_block(m.layer_values);
  if (m.module_mask != 0) {
    e.key("module_mask");
    e.uint(m.module_mask);
    e.key("module_count");
    e.uint(m.module_count);
    e.key("module_values");
    e.float_block(m.module_values);
  }
  e.key("scaler");
  if (m.scaler) {
    e.map(4);
    e.key("scale");
    e.f64(m.scaler->scale);
    e.key("growth_tracker");
    e.sint(m.scaler->growth_tracker);
    e.key("found_inf");
    e.boolean(m.scaler->found_inf);
    e.key("skipped_total");
    e.sint(m.scaler->skipped_total);
  } else {
    e.nil();
  }
  e.key("watches");
  e.array(static_cast<uint32_t>(m.watches.size()));
  for (const WatchStats& w : m.watches) {
    e.map(5);
    e.key("name");
    e.str(w.name);
    e.key("absmax");
    e.f32(w.absmax);
    e.key("rms");
    e.f32(w.rms);
    e.key("z");
    e.f32(w.z);
    e.key("nonfinite");
    e.sint(w.nonfinite);
  }
  if (!m.buffer_absmax.empty()) {
    e.key("buffer_absmax");
    e.float_block(m.buffer_absmax);
  }
  e.key("frozen");
  e.array(static_cast<uint32_t>(m.frozen_layers.size()));
  for (uint32_t layer : m.frozen_layers) e.uint(layer);
  if (!m.unused_layers.empty()) {
    e.key("unused");
    e.array(static_cast<uint32_t>(m.unused_layers.size()));
    for (uint32_t layer : m.unused_layers) e.uint(layer);
  }
  if (!m.group_lrs.empty()) {
    e.key("group_lrs");
    e.array(static_cast<uint32_t>(m.group_lrs.size()));
    for (double lr : m.group_lrs) e.f64(lr);
  }
  if (!m.cause.empty()) {
    e.key("cause");
    e.str(m.cause);
  }
}

void encode_event(Encoder& e, const Event& m) {
  header(e, 9 + (m.cause ? 1 : 0) + run_identity_entries(m.run, m.model), kTopicEvent, m.rank, m.seq);
  run_identity(e, m.run, m.model);
  e.key("step");
  e.sint(m.step);
  e.key("kind");
  e.str(m.kind);
  e.key("layer");
  e.str(m.layer);
  e.key("detail");
  e.str(m.detail);
  e.key("stamp_unix_ns");
  e.sint(m.stamp_unix_ns);
  if (m.cause) {
    e.key("cause");
    e.map(5);
    e.key("kind");
    e.str(m.cause->kind);
    e.key("op");
    e.str(m.cause->op);
    e.key("module");
    e.str(m.cause->module);
    e.key("evidence");
    e.str(m.cause->evidence);
    e.key("sentence");
    e.str(m.cause->sentence);
  }
}

void encode_command(Encoder& e, const Command& m) {
  header(e, 10 + (m.at_step >= 0 ? 1 : 0) + (m.token.empty() ? 0 : 1), kTopicCommand, m.rank, m.seq);
  e.key("id");
  e.uint(m.id);
  e.key("kind");
  e.str(m.kind);
  e.key("count");
  e.sint(m.count);
  e.key("label");
  e.str(m.label);
  e.key("policy");
  e.str(m.policy);
  e.key("enable");
  e.boolean(m.enable);
  if (m.at_step >= 0) {
    e.key("at_step");
    e.sint(m.at_step);
  }
  if (!m.token.empty()) {
    e.key("token");
    e.str(m.token);
  }
}

void encode_ack(Encoder& e, const Ack& m) {
  header(e, 11 + run_identity_entries(m.run, m.model), kTopicAck, m.rank, m.seq);
  run_identity(e, m.run, m.model);
  e.key("id");
  e.uint(m.id);
  e.key("ok");
  e.boolean(m.ok);
  e.key("step");
  e.sint(m.step);
  e.key("error");
  e.str(m.error);
  e.key("path");
  e.str(m.path);
  e.key("bytes");
  e.sint(m.bytes);
  e.key("count");
  e.sint(m.count);
}

struct TopicVisitor {
  const char* operator()(const RunDescription&) const { return kTopicRun; }
  const char* operator()(const StepRecord&) const { return kTopicStep; }
  const char* operator()(const Event&) const { return kTopicEvent; }
  const char* operator()(const Command&) const { return kTopicCommand; }
  const char* operator()(const Ack&) const { return kTopicAck; }
};

struct EncodeVisitor {
  Encoder& e;
  void operator()(const RunDescription& m) const { encode_run(e, m); }
  void operator()(const StepRecord& m) const { encode_step(e, m); }
  void operator()(const Event& m) const { encode_event(e, m); }
  void operator()(const Command& m) const { encode_command(e, m); }
  void operator()(const Ack& m) const { encode_ack(e, m); }
};

}  // namespace

const char* topic_of(const Message& message) { return std::visit(TopicVisitor{}, message); }

void encode(const Message& message, std::vector<char>& out) {
  out.clear();
  // One reservation up front: the float block dominates a step record, the rest is small.
  if (const auto* step = std::get_if<StepRecord>(&message)) {
    out.reserve(320 + step->run.size() + step->model.size() + (step->layer_values.size() + step->buffer_absmax.size()) * sizeof(float) +
                step->watches.size() * 64);
  }
  Encoder encoder(out);
  std::visit(EncodeVisitor{encoder}, message);
}

std::vector<char> encode(const Message& message) {
  std::vector<char> out;
  encode(message, out);
  return out;
}

}  // namespace keel::wire
