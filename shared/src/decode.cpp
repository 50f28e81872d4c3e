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

namespace keel::wire {
namespace {

constexpr bool kLittleEndianHost = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

// Deepest protocol value: message map > layers array > layer map > shape array > integer.
// The margin lets a newer peer nest a little deeper inside keys we skip.
constexpr size_t kMaxDepth = 8;
// Maps hold a handful of keys today; the bound leaves room to evolve while keeping the
// key lookups cheap on hostile input.
constexpr size_t kMaxMapEntries = 256;
// More dimensions than any real tensor has.
constexpr size_t kMaxShapeDims = 64;

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

  // An array value with at most `max_items` items; nullptr when absent or failed.
  const msgpack::object_array* array(const char* key, size_t max_items) {
    const msgpack::object* value = find(key, false);
    if (!value) return nullptr;
    if (value->type != msgpack::type::ARRAY) {
      fail("field \"" + name(key) + "\" is " + type_name(*value) + ", expected an array");
      return nullptr;
    }
    if (value->via.array.size > max_items) {
      fail("field \"" + name(key) + "\" has " + std::to_string(value->via.array.size) +
           " items, more than the limit of " + std::to_string(max_items));
      return nullptr;
    }
    return &value->via.array;
  }

  template <typename T>
  bool read_item(const char* key, uint32_t index, const msgpack::object& item, T& out) {
    std::string why;
    if (convert(item, out, why)) return true;
    return fail("field \"" + name(key) + "[" + std::to_string(index) + "]\" " + why);
  }

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

std::string item_name(const char* key, uint32_t index) {
  return std::string(key) + "[" + std::to_string(index) + "]";
}

void read_run(MapReader& r, std::string& error, RunDescription& m) {
  r.optional("run_id", m.run_id).optional("model", m.model).optional("world_size", m.world_size);
  if (const msgpack::object_array* layers = r.array("layers", kMaxLayers)) {
    m.layers.resize(layers->size);
    for (uint32_t i = 0; i < layers->size && r.ok(); ++i) {
      LayerInfo& layer = m.layers[i];
      MapReader lr(error, layers->ptr[i], item_name("layers", i));
      lr.required("name", layer.name).optional("numel", layer.numel).optional("dtype", layer.dtype);
      if (const msgpack::object_array* shape = lr.array("shape", kMaxShapeDims)) {
        layer.shape.resize(shape->size);
        for (uint32_t d = 0; d < shape->size && lr.ok(); ++d) {
          lr.read_item("shape", d, shape->ptr[d], layer.shape[d]);
        }
      }
      if (const msgpack::object_array* aliases = lr.array("aliases", kMaxAliases)) {
        layer.aliases.resize(aliases->size);
        for (uint32_t a = 0; a < aliases->size && lr.ok(); ++a) {
          lr.read_item("aliases", a, aliases->ptr[a], layer.aliases[a]);
        }
      }
    }
  }
  if (const msgpack::object_array* watches = r.array("watches", kMaxWatches)) {
    m.watches.resize(watches->size);
    for (uint32_t i = 0; i < watches->size && r.ok(); ++i) {
      r.read_item("watches", i, watches->ptr[i], m.watches[i]);
    }
  }
  if (const msgpack::object_array* buffers = r.array("buffers", kMaxLayers)) {
    m.buffers.resize(buffers->size);
    for (uint32_t i = 0; i < buffers->size && r.ok(); ++i) r.read_item("buffers", i, buffers->ptr[i], m.buffers[i]);
  }
  r.optional("keel_version", m.keel_version)
      .optional("torch_version", m.torch_version)
      .optional("device", m.device)
      .optional("start_unix_ms", m.start_unix_ms);
  if (const msgpack::object_array* policies = r.array("policies_on", kMaxPolicies)) {
    m.policies_on.emplace(policies->size);
    for (uint32_t i = 0; i < policies->size && r.ok(); ++i) {
      r.read_item("policies_on", i, policies->ptr[i], (*m.policies_on)[i]);
    }
  }
  r.optional("recording", m.recording).optional("sharded", m.sharded);
  if (const msgpack::object_array* modules = r.array("modules", kMaxModules)) {
    m.modules.resize(modules->size);
    uint64_t next_free = 0;   // ascending and disjoint
    for (uint32_t i = 0; i < modules->size && r.ok(); ++i) {
      ModuleRange& module = m.modules[i];
      MapReader mr(error, modules->ptr[i], item_name("modules", i));
      mr.required("name", module.name).required("first", module.first).required("count", module.count);
      if (!mr.ok()) return;
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
}

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

// The per-layer block: popcount(mask) * layer_count little-endian float32, nothing more or less.
void read_layer_block(MapReader& r, StepRecord& m) {
  const msgpack::object* block = r.find("layers", true);
  if (!block) return;
  if (m.layer_count > kMaxLayers) {
    r.fail("layer_count " + std::to_string(m.layer_count) + " exceeds the limit of " +
           std::to_string(kMaxLayers) + " layers");
    return;
  }
  if (block->type != msgpack::type::BIN) {
    r.fail("field \"layers\" is " + type_name(*block) +
           ", expected a binary block of little-endian float32");
    return;
  }
  const int metrics = __builtin_popcount(m.metric_mask);
  const uint64_t expected = static_cast<uint64_t>(metrics) * m.layer_count * sizeof(float);
  if (block->via.bin.size != expected) {
    r.fail("field \"layers\" holds " + std::to_string(block->via.bin.size) + " bytes, expected " +
           std::to_string(expected) + " (" + std::to_string(metrics) + " metrics x " +
           std::to_string(m.layer_count) + " layers x 4 bytes)");
    return;
  }
  copy_floats(*block, m.layer_values);
}

// The modules' rollup block: popcount(module_mask) * module_count little-endian float32.
void read_module_block(MapReader& r, StepRecord& m) {
  r.optional("module_mask", m.module_mask).optional("module_count", m.module_count);
  const msgpack::object* block = r.find("module_values", m.module_mask != 0);
  if (!block) return;
  if (m.module_count > kMaxModules) {
    r.fail("module_count " + std::to_string(m.module_count) + " exceeds the limit of " + std::to_string(kMaxModules));
    return;
  }
  if (block->type != msgpack::type::BIN) {
    r.fail("field \"module_values\" is " + type_name(*block) + ", expected a binary block of little-endian float32");
    return;
  }
  const uint64_t expected = static_cast<uint64_t>(__builtin_popcount(m.module_mask)) * m.module_count * sizeof(float);
  if (block->via.bin.size != expected) {
    r.fail("field \"module_values\" holds " + std::to_string(block->via.bin.size) + " bytes, expected " +
           std::to_string(expected) + " (" + std::to_string(__builtin_popcount(m.module_mask)) + " metrics x " +
           std::to_string(m.module_count) + " modules x 4 bytes)");
    return;
  }
  copy_floats(*block, m.module_values);
}

// The buffers' block: one little-endian float32 per buffer of the run description.
void read_buffer_block(MapReader& r, StepRecord& m) {
  const msgpack::object* block = r.find("buffer_absmax", false);
  if (!block) return;
  if (block->type != msgpack::type::BIN) {
    r.fail("field \"buffer_absmax\" is " + type_name(*block) + ", expected a binary block of little-endian float32");
    return;
  }
  if (block->via.bin.size % sizeof(float) != 0 || block->via.bin.size / sizeof(float) > kMaxLayers) {
    r.fail("field \"buffer_absmax\" holds " + std::to_string(block->via.bin.size) +
           " bytes, expected 4 bytes per buffer and at most " + std::to_string(kMaxLayers) + " buffers");
    return;
  }
  copy_floats(*block, m.buffer_absmax);
}

// A list of layer indices (frozen, unused): each must name a layer of the record.
void read_layer_list(MapReader& r, const char* key, uint32_t layer_count, std::vector<uint32_t>& out) {
  const msgpack::object_array* list = r.array(key, kMaxLayers);
  if (!list) return;
  out.resize(list->size);
  for (uint32_t i = 0; i < list->size && r.ok(); ++i) {
    if (r.read_item(key, i, list->ptr[i], out[i]) && out[i] >= layer_count) {
      r.fail(std::string(key) + "[" + std::to_string(i) + "] = " + std::to_string(out[i]) +
             " is not a layer (layer_count " + std::to_string(layer_count) + ")");
    }
  }
}

void read_step(MapReader& r, std::string& error, StepRecord& m) {
  r.optional("run", m.run)
      .optional("model", m.model)
      .required("step", m.step)
      .optional("loss", m.loss)
      .optional("lr", m.lr)
      .optional("grad_norm", m.grad_norm)
      .optional("skipped", m.skipped)
      .optional("skip_reason", m.skip_reason)
      .optional("step_time_us", m.step_time_us)
      .optional("probe_us", m.probe_us)
      .optional("dropped", m.dropped)
      .optional("probe_errors", m.probe_errors)
      .optional("record_dropped", m.record_dropped)
      .optional("stamp_unix_ns", m.stamp_unix_ns)
      .required("metric_mask", m.metric_mask)
      .required("layer_count", m.layer_count);
  read_layer_block(r, m);
  read_module_block(r, m);
  read_buffer_block(r, m);
  if (const msgpack::object* scaler = r.find("scaler", false)) {
    if (scaler->type != msgpack::type::NIL) {
      if (scaler->type != msgpack::type::MAP) {
        r.fail("field \"scaler\" is " + type_name(*scaler) + ", expected nil or a map");
        return;
      }
      ScalerState state;
      MapReader sr(error, *scaler, "scaler");
      sr.optional("scale", state.scale)
          .optional("growth_tracker", state.growth_tracker)
          .optional("found_inf", state.found_inf)
          .optional("skipped_total", state.skipped_total);
      m.scaler = state;
    }
  }
  if (const msgpack::object_array* watches = r.array("watches", kMaxWatches)) {
    m.watches.resize(watches->size);
    for (uint32_t i = 0; i < watches->size && r.ok(); ++i) {
      WatchStats& w = m.watches[i];
      MapReader wr(error, watches->ptr[i], item_name("watches", i));
      wr.required("name", w.name)
          .optional("absmax", w.absmax)
          .optional("rms", w.rms)
          .optional("z", w.z)
          .optional("nonfinite", w.nonfinite);
    }
  }
  read_layer_list(r, "frozen", m.layer_count, m.frozen_layers);
  read_layer_list(r, "unused", m.layer_count, m.unused_layers);
  if (const msgpack::object_array* lrs = r.array("group_lrs", kMaxGroupLrs)) {
    m.group_lrs.resize(lrs->size);
    for (uint32_t i = 0; i < lrs->size && r.ok(); ++i) r.read_item("group_lrs", i, lrs->ptr[i], m.group_lrs[i]);
  }
  r.optional("cause", m.cause);
}

void read_event(MapReader& r, std::string& error, Event& m) {
  r.optional("run", m.run)
      .optional("model", m.model)
      .required("step", m.step)
      .required("kind", m.kind)
      .optional("layer", m.layer)
      .optional("detail", m.detail)
      .optional("stamp_unix_ns", m.stamp_unix_ns);
  if (const msgpack::object* cause = r.find("cause", false)) {
    if (cause->type != msgpack::type::MAP) {
      r.fail("field \"cause\" is " + type_name(*cause) + ", expected a map");
      return;
    }
    Cause c;
    MapReader cr(error, *cause, "cause");
    cr.required("kind", c.kind)
        .optional("op", c.op)
        .optional("module", c.module)
        .optional("evidence", c.evidence)
        .optional("sentence", c.sentence);
    m.cause = std::move(c);
  }
}

void read_command(MapReader& r, Command& m) {
  r.required("id", m.id)
      .required("kind", m.kind)
      .optional("count", m.count)
      .optional("label", m.label)
      .optional("policy", m.policy)
      .optional("enable", m.enable)
      .optional("at_step", m.at_step)
      .optional("token", m.token);
}

void read_ack(MapReader& r, Ack& m) {
  r.optional("run", m.run)
      .optional("model", m.model)
      .required("id", m.id)
      .required("ok", m.ok)
      .optional("step", m.step)
      .optional("error", m.error)
      .optional("path", m.path)
      .optional("bytes", m.bytes)
      .optional("count", m.count);
}

// Reads one message of type T: the common header, then the type's own fields.
template <typename T, typename ReadBody>
bool read_message(MapReader& r, Message& out, ReadBody read_body) {
  T message;
  r.required("rank", message.rank).required("seq", message.seq);
  read_body(message);
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
    return read_message<RunDescription>(r, out,
                                        [&](RunDescription& m) { read_run(r, error, m); });
  }
  if (type == kTopicStep) {
    return read_message<StepRecord>(r, out, [&](StepRecord& m) { read_step(r, error, m); });
  }
  if (type == kTopicEvent) {
    return read_message<Event>(r, out, [&](Event& m) { read_event(r, error, m); });
  }
  if (type == kTopicCommand) {
    return read_message<Command>(r, out, [&](Command& m) { read_command(r, m); });
  }
  if (type == kTopicAck) {
    return read_message<Ack>(r, out, [&](Ack& m) { read_ack(r, m); });
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
