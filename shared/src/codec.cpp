// Encoding side of the wire codec: topic names and message -> msgpack payload.
// The byte layout is documented in shared/PROTOCOL.md; decode.cpp is the other half. Which
// fields a message has, and when each is written, is its table in message_fields.hpp.
#include "keel/wire/codec.hpp"
#include "keel/wire/message_fields.hpp"

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
  void key(const char* name, uint32_t size) {
    packer_.pack_str(size);
    packer_.pack_str_body(name, size);
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

// Writes a value by its C++ type (message_fields.hpp says how each type travels).
template <typename T>
void write_value(Encoder& e, const T& value);

// Writes the fields of one table that this message carries.
struct FieldWriter {
  Encoder& e;
  template <typename T>
  void operator()(const Field<T>& f) const {
    if (!f.written) return;
    e.key(f.name, f.name_size);
    write_value(e, *f.value);
  }
};

// How many fields of its table `m` carries: its map's size.
template <typename M>
uint32_t written_fields(const M& m) {
  uint32_t count = 0;
  for_each_field(m, [&count](const auto& f) { count += f.written ? 1 : 0; });
  return count;
}

template <typename T>
void write_value(Encoder& e, const T& value) {
  if constexpr (std::is_same_v<T, bool>) {
    e.boolean(value);
  } else if constexpr (std::is_same_v<T, double>) {
    e.f64(value);
  } else if constexpr (std::is_same_v<T, float>) {
    e.f32(value);
  } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    e.sint(value);
  } else if constexpr (std::is_integral_v<T>) {
    e.uint(value);
  } else if constexpr (std::is_same_v<T, std::string>) {
    e.str(value);
  } else if constexpr (std::is_same_v<T, std::vector<float>>) {
    e.float_block(value);
  } else if constexpr (is_vector_v<T>) {
    e.array(static_cast<uint32_t>(value.size()));
    for (const auto& item : value) write_value(e, item);
  } else if constexpr (is_optional_v<T>) {
    if (value) {
      write_value(e, *value);
    } else {
      e.nil();
    }
  } else {
    static_assert(has_fields_v<T>, "a field's type must be a scalar, a string, a vector, an optional or a table's struct");
    e.map(written_fields(value));
    for_each_field(value, FieldWriter{e});
  }
}

// A message: `v` and `type`, then the header's fields and the message's own (PROTOCOL §3).
template <typename M>
void encode_message(Encoder& e, const M& m, const char* type) {
  uint32_t header = 2;   // v, type
  for_each_header_field(m, [&header](const auto& f) { header += f.written ? 1 : 0; });
  e.map(header + written_fields(m));
  e.key("v", 1);
  e.uint(kProtocolVersion);
  e.key("type", 4);
  e.str(type);
  for_each_header_field(m, FieldWriter{e});
  for_each_field(m, FieldWriter{e});
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
  template <typename M>
  void operator()(const M& m) const {
    encode_message(e, m, TopicVisitor{}(m));
  }
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
