// Decoding side of the wire codec: msgpack payload -> message, or a sentence saying why not.
//
// Untrusted bytes pass three gates: the payload size (before parsing), msgpack's own limits
// (declared lengths and counts, nesting depth; checked while parsing, before any allocation
// of that size), then a typed read of every field (type, range, required keys, the float
// block's length). No msgpack exception leaves this file.
#include <algorithm>
#include <cstring>
#include <limits>
#include <msgpack.hpp>
#include <new>
#include <string>
#include <type_traits>

#include "keel/wire/codec.hpp"
#include "keel/wire/message_fields.hpp"

namespace keel::wire {
namespace {

constexpr bool kLittleEndianHost = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

// Deepest protocol value: message map > layers array > layer map > shape array > integer.
// The margin lets a newer peer nest a little deeper inside keys we skip.
constexpr size_t kMaxDepth = 8;
// Maps hold a handful of keys today; the bound leaves room to evolve while keeping the
// key lookups cheap on hostile input.
constexpr size_t kMaxMapEntries = 256;

// The msgpack type of `o` with its article, to finish "field \"x\" is ...".
std::string type_name(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::NIL: return "nil";
    case msgpack::type::BOOLEAN: return "a boolean";
    case msgpack::type::POSITIVE_INTEGER:
    case msgpack::type::NEGATIVE_INTEGER: return "an integer";
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return "a float";
    case msgpack::type::STR: return "a string";
    case msgpack::type::BIN: return "a binary block";
    case msgpack::type::ARRAY: return "an array";
    case msgpack::type::MAP: return "a map";
    case msgpack::type::EXT: return "an extension value";
  }
  return "an unknown msgpack value";
}

template <typename T>
const char* int_type_label() {
  if (std::is_same_v<T, int32_t>) return "int32";
  if (std::is_same_v<T, uint32_t>) return "uint32";
  if (std::is_same_v<T, int64_t>) return "int64";
  return "uint64";
}

// Each convert() fills `out` or says, as the end of a sentence, why it could not.
template <typename T>
bool convert(const msgpack::object& o, T& out, std::string& why) {
  static_assert(std::is_integral_v<T>, "integer fields only");
  if (o.type == msgpack::type::POSITIVE_INTEGER) {
    if (o.via.u64 > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
      why = "has value " + std::to_string(o.via.u64) + ", which does not fit in " +
            int_type_label<T>();
      return false;
    }
    out = static_cast<T>(o.via.u64);
    return true;
  }
  if (o.type == msgpack::type::NEGATIVE_INTEGER) {
    if (std::is_unsigned_v<T> ||
        o.via.i64 < static_cast<int64_t>(std::numeric_limits<T>::min())) {
      why = "has value " + std::to_string(o.via.i64) + ", which does not fit in " +
            int_type_label<T>();
      return false;
    }
    out = static_cast<T>(o.via.i64);
    return true;
  }
  why = "is " + type_name(o) + ", expected an integer";
  return false;
}

// Float fields are written as msgpack floats; integers are accepted too because other
// msgpack writers (msgpack-c itself) pack integral floats as integers.
bool convert(const msgpack::object& o, double& out, std::string& why) {
  switch (o.type) {
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: out = o.via.f64; return true;
    case msgpack::type::POSITIVE_INTEGER: out = static_cast<double>(o.via.u64); return true;
    case msgpack::type::NEGATIVE_INTEGER: out = static_cast<double>(o.via.i64); return true;
    default: why = "is " + type_name(o) + ", expected a number"; return false;
  }
}

bool convert(const msgpack::object& o, float& out, std::string& why) {
  double value = 0;
  if (!convert(o, value, why)) return false;
  out = static_cast<float>(value);
  return true;
}

bool convert(const msgpack::object& o, bool& out, std::string& why) {
  if (o.type != msgpack::type::BOOLEAN) {
    why = "is " + type_name(o) + ", expected a boolean";
    return false;
  }
  out = o.via.boolean;
  return true;
}

bool convert(const msgpack::object& o, std::string& out, std::string& why) {
  if (o.type != msgpack::type::STR) {
    why = "is " + type_name(o) + ", expected a string";
    return false;
  }
  out.assign(o.via.str.ptr, o.via.str.size);
  return true;
}

// Typed access to one msgpack map of the payload. The first error sticks in `error` and
// turns every later call into a no-op, so a decoder reads its fields in a straight line
// and checks ok() once. Unknown keys are skipped (newer peers may add fields); a non-string
// key, or a known key given twice (which value would win?), is an error.
class MapReader {
 public:
  // `where` names this map in errors: "" for the message itself, "layers[3]" for an element.
  MapReader(std::string& error, const msgpack::object& map, std::string where)
      : error_(error), where_(std::move(where)) {
    if (!ok()) return;
    if (map.type != msgpack::type::MAP) {
      fail(where_ + " is " + type_name(map) + ", expected a map");
      return;
    }
    map_ = &map.via.map;
    for (uint32_t i = 0; i < map_->size; ++i) {
      if (map_->ptr[i].key.type != msgpack::type::STR) {
        fail("key #" + std::to_string(i + 1) + (where_.empty() ? std::string() : " of " + where_) +
             " is " + type_name(map_->ptr[i].key) + ", expected a string");
        return;
      }
    }
  }

  bool ok() const { return error_.empty(); }

  bool fail(std::string message) {
    if (ok()) error_ = std::move(message);
    return false;
  }

  // The field's full name as errors print it: "seq", "layers[3].shape".
  std::string name(const char* key) const {
    return where_.empty() ? std::string(key) : where_ + "." + key;
  }

  // The value stored under `key`; nullptr when absent (an error if `required`) or failed.
  const msgpack::object* find(const char* key, bool required) {
    if (!ok()) return nullptr;
    const size_t key_size = std::strlen(key);
    const msgpack::object* found = nullptr;
    for (uint32_t i = 0; i < map_->size; ++i) {
      const msgpack::object_str& k = map_->ptr[i].key.via.str;
      if (k.size != key_size || std::memcmp(k.ptr, key, key_size) != 0) continue;
      if (found) {
        fail("field \"" + name(key) + "\" appears twice");
        return nullptr;
      }
      found = &map_->ptr[i].val;
    }
    if (!found && required) fail("required field \"" + name(key) + "\" is missing");
    return found;
  }

  template <typename T>
  MapReader& required(const char* key, T& out) {
    read(key, out, true);
    return *this;
  }
  template <typename T>
  MapReader& optional(const char* key, T& out) {
    read(key, out, false);
    return *this;
  }

  // The error string this reader and the readers of its nested maps share.
  std::string& error() { return error_; }

 private:
  template <typename T>
  void read(const char* key, T& out, bool is_required) {
    const msgpack::object* value = find(key, is_required);
    if (!value) return;
    std::string why;
    if (!convert(*value, out, why)) fail("field \"" + name(key) + "\" " + why);
  }

  std::string& error_;
  std::string where_;
  const msgpack::object_map* map_ = nullptr;
};

// A field's full name as errors print it ("layers[3].shape[1]"), built only when one is: a
// valid message, the common case, builds none.
struct FieldName {
  const MapReader& map;
  const char* key;
  int64_t index = -1;   // an array's item, or -1 for the field itself
  std::string str() const {
    std::string name = map.name(key);
    if (index >= 0) name += "[" + std::to_string(index) + "]";
    return name;
  }
};

// A bin of little-endian float32 (its size a multiple of 4, checked by the caller) into `out`.
void copy_floats(const msgpack::object& block, std::vector<float>& out) {
  const size_t count = block.via.bin.size / sizeof(float);
  out.resize(count);
  const char* bytes = block.via.bin.ptr;
  if (kLittleEndianHost) {
    if (count) std::memcpy(out.data(), bytes, count * sizeof(float));
    return;
  }
  for (size_t i = 0; i < count; ++i) {
    const auto* b = reinterpret_cast<const unsigned char*>(bytes + 4 * i);
    const uint32_t bits = uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 | uint32_t(b[3]) << 24;
    std::memcpy(&out[i], &bits, sizeof bits);
  }
}

// What one float32 of a block stands for, to finish "expected 4 bytes per ...".
const char* block_unit(FloatBlock block) {
  switch (block) {
    case FloatBlock::kLayers: return "layer value";
    case FloatBlock::kModules: return "module value";
    case FloatBlock::kBuffers: return "buffer";
    case FloatBlock::kNone: break;
  }
  return "value";
}

template <typename T>
void read_fields(MapReader& r, T& m);

// Reads one field's value by its C++ type (message_fields.hpp says how each type travels).
// `r` is the map holding the field; `name` names it, or one of its items, in errors.
class ValueReader {
 public:
  ValueReader(MapReader& r, std::string& error) : r_(r), error_(error) {}

  template <typename T>
  void read(const Field<T>& f, const msgpack::object& o, const FieldName& name, T& out) {
    if constexpr (std::is_same_v<T, std::vector<float>>) {
      read_block(f.block, o, name, out);
    } else if constexpr (is_vector_v<T>) {
      read_array(f, o, name, out);
    } else if constexpr (is_optional_v<T>) {
      if (o.type == msgpack::type::NIL && f.presence == Presence::kAlways) {
        out.reset();
        return;
      }
      typename T::value_type value{};
      if constexpr (has_fields_v<typename T::value_type>) {
        if (o.type != msgpack::type::MAP) {
          fail(name, "is " + type_name(o) + (f.presence == Presence::kAlways ? ", expected nil or a map" : ", expected a map"));
          return;
        }
      }
      Field<typename T::value_type> inner{f.name, f.name_size, &value};
      inner.max_items = f.max_items;
      read(inner, o, name, value);
      out = std::move(value);
    } else if constexpr (has_fields_v<T>) {
      MapReader nested(error_, o, name.str());
      if (nested.ok()) read_fields(nested, out);
    } else {
      std::string why;
      if (!convert(o, out, why)) fail(name, why);
    }
  }

 private:
  void fail(const FieldName& name, const std::string& why) { r_.fail("field \"" + name.str() + "\" " + why); }

  template <typename T>
  void read_array(const Field<T>& f, const msgpack::object& o, const FieldName& name, T& out) {
    if (o.type != msgpack::type::ARRAY) {
      fail(name, "is " + type_name(o) + ", expected an array");
      return;
    }
    if (o.via.array.size > f.max_items) {
      fail(name, "has " + std::to_string(o.via.array.size) + " items, more than the limit of " +
                     std::to_string(f.max_items));
      return;
    }
    using Item = typename T::value_type;
    out.resize(o.via.array.size);
    for (uint32_t i = 0; i < o.via.array.size && r_.ok(); ++i) {
      Field<Item> item{f.name, f.name_size, &out[i]};
      read(item, o.via.array.ptr[i], FieldName{name.map, name.key, i}, out[i]);
    }
  }

  void read_block(FloatBlock block, const msgpack::object& o, const FieldName& name, std::vector<float>& out) {
    if (o.type != msgpack::type::BIN) {
      fail(name, "is " + type_name(o) + ", expected a binary block of little-endian float32");
      return;
    }
    if (o.via.bin.size % sizeof(float) != 0) {
      fail(name, "holds " + std::to_string(o.via.bin.size) + " bytes, expected 4 bytes per " + block_unit(block));
      return;
    }
    copy_floats(o, out);
  }

  MapReader& r_;
  std::string& error_;
};

// Reads every field of `m`'s table from the map `r` reads: a missing required field, a value
// of the wrong type or over its limit is an error; an unknown key is skipped.
struct FieldReader {
  MapReader& r;
  std::string& error;
  template <typename T>
  void operator()(const Field<T>& f) const {
    const msgpack::object* value = r.find(f.name, f.required);
    if (!value) return;
    ValueReader(r, error).read(f, *value, FieldName{r, f.name}, *f.value);
  }
};

template <typename T>
void read_fields(MapReader& r, T& m) {
  for_each_field(m, FieldReader{r, r.error()});
}

// ---- What a table cannot say: how one field's value bounds another's --------------------

// A run's modules are ascending and disjoint, each within its layers.
void check_run(MapReader& r, const RunDescription& m) {
  uint64_t next_free = 0;
  for (size_t i = 0; i < m.modules.size(); ++i) {
    const ModuleRange& module = m.modules[i];
    const uint64_t end = uint64_t{module.first} + module.count;
    if (module.first < next_free || end > m.layers.size()) {
      r.fail("modules[" + std::to_string(i) + "] (layers " + std::to_string(module.first) + " to " +
             std::to_string(end) + ") overlaps the module before it or runs past the " +
             std::to_string(m.layers.size()) + " layers");
      return;
    }
    next_free = end;
  }
}

// A block holds popcount(mask) * count float32, nothing more or less.
void check_block(MapReader& r, const char* key, const std::vector<float>& block, uint32_t mask, uint32_t count,
                 const char* counted) {
  const int metrics = __builtin_popcount(mask);
  const uint64_t expected = static_cast<uint64_t>(metrics) * count;
  if (block.size() == expected) return;
  r.fail("field \"" + std::string(key) + "\" holds " + std::to_string(block.size() * sizeof(float)) +
         " bytes, expected " + std::to_string(expected * sizeof(float)) + " (" + std::to_string(metrics) +
         " metrics x " + std::to_string(count) + " " + counted + " x 4 bytes)");
}

// A list of layer indices (frozen, unused): each must name a layer of the record.
void check_layer_list(MapReader& r, const char* key, const std::vector<uint32_t>& layers, uint32_t layer_count) {
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i] < layer_count) continue;
    r.fail(std::string(key) + "[" + std::to_string(i) + "] = " + std::to_string(layers[i]) +
           " is not a layer (layer_count " + std::to_string(layer_count) + ")");
    return;
  }
}

void check_step(MapReader& r, const StepRecord& m) {
  if (m.layer_count > kMaxLayers) {
    r.fail("layer_count " + std::to_string(m.layer_count) + " exceeds the limit of " + std::to_string(kMaxLayers) +
           " layers");
    return;
  }
  check_block(r, "layers", m.layer_values, m.metric_mask, m.layer_count, "layers");
  if (m.module_mask != 0 && r.find("module_values", true)) {
    if (m.module_count > kMaxModules) {
      r.fail("module_count " + std::to_string(m.module_count) + " exceeds the limit of " + std::to_string(kMaxModules));
      return;
    }
    check_block(r, "module_values", m.module_values, m.module_mask, m.module_count, "modules");
  }
  if (m.buffer_absmax.size() > kMaxLayers) {
    r.fail("field \"buffer_absmax\" holds " + std::to_string(m.buffer_absmax.size() * sizeof(float)) +
           " bytes, expected 4 bytes per buffer and at most " + std::to_string(kMaxLayers) + " buffers");
  }
  check_layer_list(r, "frozen", m.frozen_layers, m.layer_count);
  check_layer_list(r, "unused", m.unused_layers, m.layer_count);
}

// Reads one message of type T: the common header, then the type's own fields, then what
// relates them.
template <typename T, typename Check>
bool read_message(MapReader& r, Message& out, Check check) {
  T message;
  for_each_header_field(message, FieldReader{r, r.error()});
  read_fields(r, message);
  if (r.ok()) check(message);
  // Nested readers share the error string, so this also sees their failures.
  if (!r.ok()) return false;
  out = std::move(message);
  return true;
}

bool read_payload(const msgpack::object& root, DecodeResult& result) {
  std::string& error = result.error;
  if (root.type != msgpack::type::MAP) {
    error = "payload is " + type_name(root) + ", expected a msgpack map";
    return false;
  }
  MapReader r(error, root, "");
  // The version comes first: a message of another version may differ in any other way,
  // and "wrong version" is the error that tells the user what to do.
  uint64_t version = 0;
  std::string type;
  if (!r.required("v", version).ok()) return false;
  if (version != kProtocolVersion) {
    error = "protocol version " + std::to_string(version) + ", expected " +
            std::to_string(kProtocolVersion);
    return false;
  }
  if (!r.required("type", type).ok()) return false;
  Message& out = result.message;
  if (type == kTopicRun) {
    return read_message<RunDescription>(r, out, [&](const RunDescription& m) { check_run(r, m); });
  }
  if (type == kTopicStep) {
    return read_message<StepRecord>(r, out, [&](const StepRecord& m) { check_step(r, m); });
  }
  if (type == kTopicEvent) {
    return read_message<Event>(r, out, [](const Event&) {});
  }
  if (type == kTopicCommand) {
    return read_message<Command>(r, out, [](const Command&) {});
  }
  if (type == kTopicAck) {
    return read_message<Ack>(r, out, [](const Ack&) {});
  }
  error = "unknown message type \"" + type.substr(0, 64) +
          "\" (expected run, step, event, cmd or ack)";
  return false;
}

// Strings and bins stay pointers into the caller's buffer instead of copies in msgpack's
// zone: everything is copied into the owned message before decode() returns.
bool reference_in_place(msgpack::type::object_type, size_t, void*) { return true; }

}  // namespace

namespace {

// decode() and decode_first(): `consumed`, when given, takes the first payload's size and
// allows bytes after it.
DecodeResult decode_payload(const void* data, size_t size, size_t* consumed) {
  DecodeResult result;
  // Of payloads written back to back, the first is at most the size limit.
  if (consumed) size = std::min(size, kMaxPayloadBytes);
  if (size == 0 || data == nullptr) {
    result.error = "empty payload";
    return result;
  }
  if (size > kMaxPayloadBytes) {
    result.error = "payload of " + std::to_string(size) + " bytes exceeds the limit of " +
                   std::to_string(kMaxPayloadBytes) + " bytes";
    return result;
  }
  // msgpack allocates an array's or map's slots when it reads the header, before the
  // elements arrive. Every element takes at least one byte (a map entry two), so counts
  // above that are lies, and capping them by the payload size bounds the allocation by
  // what was actually received.
  const msgpack::unpack_limit limit(std::min<size_t>(kMaxLayers, size),
                                    std::min<size_t>(kMaxMapEntries, size / 2), kMaxStringBytes,
                                    kMaxPayloadBytes, kMaxStringBytes, kMaxDepth);
  const char* bytes = static_cast<const char*>(data);
  try {
    msgpack::object_handle handle;
    size_t offset = 0;
    msgpack::unpack(handle, bytes, size, offset, reference_in_place, nullptr, limit);
    if (!handle.zone()) {
      result.error = "truncated payload: the msgpack data ends before the message does";
      return result;
    }
    if (consumed) *consumed = offset;
    if (!consumed && handle.get().type == msgpack::type::MAP && offset != size) {
      result.error = std::to_string(size - offset) + " trailing bytes after the message map";
      return result;
    }
    result.ok = read_payload(handle.get(), result);
  } catch (const msgpack::insufficient_bytes&) {
    result.error = "truncated payload: the msgpack data ends before the message does";
  } catch (const msgpack::array_size_overflow&) {
    result.error = "an array declares more items than the payload holds or the limit of " +
                   std::to_string(kMaxLayers) + " allows";
  } catch (const msgpack::map_size_overflow&) {
    result.error = "a map declares more entries than the payload holds or the limit of " +
                   std::to_string(kMaxMapEntries) + " allows";
  } catch (const msgpack::str_size_overflow&) {
    result.error = "a string is longer than the limit of " + std::to_string(kMaxStringBytes) +
                   " bytes";
  } catch (const msgpack::bin_size_overflow&) {
    result.error = "a binary block is longer than the payload limit";
  } catch (const msgpack::ext_size_overflow&) {
    result.error = "an extension value is longer than the limit of " +
                   std::to_string(kMaxStringBytes) + " bytes";
  } catch (const msgpack::depth_size_overflow&) {
    result.error = "msgpack values nested deeper than " + std::to_string(kMaxDepth) + " levels";
  } catch (const msgpack::unpack_error& e) {
    result.error = std::string("malformed msgpack data (") + e.what() + ")";
  } catch (const msgpack::type_error&) {
    result.error = "a msgpack value has an unexpected type";
  } catch (const std::bad_alloc&) {
    result.error = "out of memory while decoding a payload of " + std::to_string(size) + " bytes";
  } catch (const std::exception& e) {
    result.error = std::string("cannot decode payload: ") + e.what();
  } catch (...) {
    result.error = "cannot decode payload: unknown error";
  }
  if (!result.ok) result.message = Message{};
  return result;
}

}  // namespace

DecodeResult decode(const void* data, size_t size) { return decode_payload(data, size, nullptr); }

DecodeResult decode_first(const void* data, size_t size, size_t& consumed) {
  consumed = 0;
  return decode_payload(data, size, &consumed);
}

}  // namespace keel::wire
