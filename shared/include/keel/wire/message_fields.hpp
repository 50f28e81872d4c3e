// keel wire messages' fields, defined once: each message's keys, in the order they are
// written, with what a decoder requires of them and when an encoder leaves them out.
//
// What it is for: the encoder, the decoder, their map sizes, keel-cli's JSON, the Python
// front's dicts, the app's byte accounting and the check of PROTOCOL.md all walk these tables
// (as Tracy's protocol header and rerun's type definitions are walked), so a field is added in
// one place plus PROTOCOL.md, and no list of keys can drift from another. A field's name is its
// wire key everywhere it is shown.
//
// How to use: `for_each_field(message, visit)` calls `visit(field)` once per field of the
// message's body, in wire order; `for_each_header_field` does the same for `rank` and `seq`,
// which every message carries (PROTOCOL §3.1) after `v` and `type`. Nested maps (LayerInfo,
// ModuleRange, ScalerState, WatchStats, Cause) have tables of their own. A visitor is a generic
// callable taking `const Field<T>&` (T const when the message is). The field's C++ type says
// how it travels: integers, float64 (double), float32 (float), str, bool, an array of those or
// of maps, a float32 bin (std::vector<float>, PROTOCOL §4), a map (a nested struct; an
// optional one is nil when it is always written and has no value).
// Threads: stateless templates; safe from any thread. Never: allocates or throws.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "keel/wire/limits.hpp"
#include "keel/wire/messages.hpp"

namespace keel::wire {

// When an encoder writes a field.
enum class Presence : uint8_t {
  kAlways,    // in every message; an optional without a value is written as nil
  kWhenSet,   // only when it differs from its default: non-empty, non-zero, true, a value (or,
              // with when_not, other than a default that is not zero)
  kWithMask,  // only with a non-zero `module_mask` (the modules' rollup block and its count)
};

// What the values of a float32 bin stand for, so a client that names them knows whose they are.
enum class FloatBlock : uint8_t {
  kNone,      // not a bin
  kLayers,    // StepRecord::layer_values: metric-major, layer_count per metric (PROTOCOL §4)
  kModules,   // StepRecord::module_values: metric-major, module_count per metric
  kBuffers,   // StepRecord::buffer_absmax: one per buffer of the run description
};

template <typename T>
struct Field {
  const char* name;
  uint32_t name_size;             // strlen(name), known at compile time
  T* value;
  bool required = false;          // a decoder rejects a message without it
  Presence presence = Presence::kAlways;
  bool written = true;            // this message's encoder writes it (from `presence`)
  uint32_t max_items = 0;         // an array's most items a decoder accepts
  FloatBlock block = FloatBlock::kNone;

  Field must() const {
    Field f = *this;
    f.required = true;
    return f;
  }
  Field when_set() const {
    Field f = *this;
    f.presence = Presence::kWhenSet;
    f.written = is_set(*value);
    return f;
  }
  // Only when it is not `absent` (a default that is not zero: a command's at_step -1).
  Field when_not(std::remove_const_t<T> absent) const {
    Field f = *this;
    f.presence = Presence::kWhenSet;
    f.written = *value != absent;
    return f;
  }
  Field with_mask(uint32_t module_mask) const {
    Field f = *this;
    f.presence = Presence::kWithMask;
    f.written = module_mask != 0;
    return f;
  }
  Field at_most(uint32_t items) const {
    Field f = *this;
    f.max_items = items;
    return f;
  }
  Field holding(FloatBlock kind) const {
    Field f = *this;
    f.block = kind;
    return f;
  }

 private:
  template <typename U>
  static bool is_set(const U& v) {
    if constexpr (std::is_arithmetic_v<U>) {
      return v != U{};
    } else if constexpr (std::is_same_v<U, std::string>) {
      return !v.empty();
    } else {
      return has_content(v);
    }
  }
  template <typename U>
  static bool has_content(const std::vector<U>& v) { return !v.empty(); }
  template <typename U>
  static bool has_content(const std::optional<U>& v) { return v.has_value(); }
};

template <typename T, size_t N>
Field<T> field(const char (&name)[N], T& value) {
  return Field<T>{name, N - 1, &value};
}

// `Same` is M with its const dropped: each table below takes its message const or not.
template <typename M, typename Same>
using if_fields_of = std::enable_if_t<std::is_same_v<std::remove_const_t<M>, Same>, int>;

// PROTOCOL §3.1: after `v` and `type`, in every message.
template <typename M, typename Visit>
void for_each_header_field(M& m, Visit&& visit) {
  visit(field("rank", m.rank).must());
  visit(field("seq", m.seq).must());
}

// ---- run (PROTOCOL §3.2) -------------------------------------------------------------------

template <typename M, typename Visit, if_fields_of<M, LayerInfo> = 0>
void for_each_field(M& m, Visit&& visit) {
  visit(field("name", m.name).must());
  visit(field("shape", m.shape).at_most(kMaxShapeDims));
  visit(field("numel", m.numel));
  visit(field("dtype", m.dtype));
  visit(field("aliases", m.aliases).when_set().at_most(kMaxAliases));
}

template <typename M, typename Visit, if_fields_of<M, ModuleRange> = 0>
void for_each_field(M& m, Visit&& visit) {
  visit(field("name", m.name).must());
  visit(field("first", m.first).must());
  visit(field("count", m.count).must());
}

template <typename M, typename Visit, if_fields_of<M, RunDescription> = 0>
void for_each_field(M& m, Visit&& visit) {
  visit(field("run_id", m.run_id));
  visit(field("model", m.model).when_set());
  visit(field("world_size", m.world_size));
  visit(field("layers", m.layers).at_most(kMaxLayers));
  visit(field("watches", m.watches).at_most(kMaxWatches));
  visit(field("buffers", m.buffers).when_set().at_most(kMaxLayers));
  visit(field("keel_version", m.keel_version));
  visit(field("torch_version", m.torch_version));
  visit(field("device", m.device));
  visit(field("start_unix_ms", m.start_unix_ms));
  visit(field("policies_on", m.policies_on).when_set().at_most(kMaxPolicies));
  visit(field("recording", m.recording).when_set());
  visit(field("modules", m.modules).when_set().at_most(kMaxModules));
  visit(field("sharded", m.sharded).when_set());
}

// ---- step (PROTOCOL §3.3) ------------------------------------------------------------------

template <typename M, typename Visit, if_fields_of<M, ScalerState> = 0>
void for_each_field(M& m, Visit&& visit) {
  visit(field("scale", m.scale));
  visit(field("growth_tracker", m.growth_tracker));
  visit(field("found_inf", m.found_inf));
  visit(field("skipped_total", m.skipped_total));
}

template <typename M, typename Visit, if_fields_of<M, WatchStats> = 0>
void for_each_field(M& m, Visit&& visit) {
  visit(field("name", m.name).must());
  visit(field("absmax", m.absmax));
  visit(field("rms", m.rms));
  visit(field("z", m.z));
  visit(field("nonfinite", m.nonfinite));
}

template <typename M, typename Visit, if_fields_of<M, StepRecord> = 0>
void for_each_field(M& m, Visit&& visit) {
  visit(field("run", m.run).when_set());
  visit(field("model", m.model).when_set());
  visit(field("step", m.step).must());
  visit(field("loss", m.loss));
  visit(field("lr", m.lr));
  visit(field("grad_norm", m.grad_norm));
  visit(field("skipped", m.skipped));
  visit(field("skip_reason", m.skip_reason));
  visit(field("step_time_us", m.step_time_us));
  visit(field("probe_us", m.probe_us));
  visit(field("dropped", m.dropped));
  visit(field("probe_errors", m.probe_errors));
  visit(field("record_dropped", m.record_dropped).when_set());
  visit(field("snapshot_bytes", m.snapshot_bytes).when_set());
  visit(field("stamp_unix_ns", m.stamp_unix_ns));
  visit(field("metric_mask", m.metric_mask).must());
  visit(field("layer_count", m.layer_count).must());
  visit(field("layers", m.layer_values).must().holding(FloatBlock::kLayers));
  visit(field("module_mask", m.module_mask).when_set());
  visit(field("module_count", m.module_count).with_mask(m.module_mask));
  visit(field("module_values", m.module_values).with_mask(m.module_mask).holding(FloatBlock::kModules));
  visit(field("scaler", m.scaler));
  visit(field("watches", m.watches).at_most(kMaxWatches));
  visit(field("buffer_absmax", m.buffer_absmax).when_set().holding(FloatBlock::kBuffers));
  visit(field("frozen", m.frozen_layers).at_most(kMaxLayers));
  visit(field("unused", m.unused_layers).when_set().at_most(kMaxLayers));
  visit(field("group_lrs", m.group_lrs).when_set().at_most(kMaxGroupLrs));
  visit(field("cause", m.cause).when_set());
}

// ---- event (PROTOCOL §3.4) -----------------------------------------------------------------

template <typename M, typename Visit, if_fields_of<M, Cause> = 0>
void for_each_field(M& m, Visit&& visit) {
  visit(field("kind", m.kind).must());
  visit(field("op", m.op));
  visit(field("module", m.module));
  visit(field("evidence", m.evidence));
  visit(field("sentence", m.sentence));
}

template <typename M, typename Visit, if_fields_of<M, Warning> = 0>
void for_each_field(M& m, Visit&& visit) {
  visit(field("signal", m.signal).must());
  visit(field("value", m.value));
  visit(field("baseline", m.baseline));
  visit(field("per_step", m.per_step));
  visit(field("lead_steps", m.lead_steps).when_not(-1));
  visit(field("advice", m.advice));
}

template <typename M, typename Visit, if_fields_of<M, Event> = 0>
void for_each_field(M& m, Visit&& visit) {
  visit(field("run", m.run).when_set());
  visit(field("model", m.model).when_set());
  visit(field("step", m.step).must());
  visit(field("kind", m.kind).must());
  visit(field("layer", m.layer));
  visit(field("detail", m.detail));
  visit(field("stamp_unix_ns", m.stamp_unix_ns));
  visit(field("cause", m.cause).when_set());
  visit(field("warning", m.warning).when_set());
}

// ---- cmd and ack (PROTOCOL §3.5, §3.6) -----------------------------------------------------

template <typename M, typename Visit, if_fields_of<M, Command> = 0>
void for_each_field(M& m, Visit&& visit) {
  visit(field("id", m.id).must());
  visit(field("kind", m.kind).must());
  visit(field("count", m.count));
  visit(field("label", m.label));
  visit(field("policy", m.policy));
  visit(field("enable", m.enable));
  visit(field("at_step", m.at_step).when_not(-1));
  visit(field("to_step", m.to_step).when_not(-1));
  visit(field("token", m.token).when_set());
}

template <typename M, typename Visit, if_fields_of<M, Ack> = 0>
void for_each_field(M& m, Visit&& visit) {
  visit(field("run", m.run).when_set());
  visit(field("model", m.model).when_set());
  visit(field("id", m.id).must());
  visit(field("ok", m.ok).must());
  visit(field("step", m.step));
  visit(field("error", m.error));
  visit(field("path", m.path));
  visit(field("bytes", m.bytes));
  visit(field("count", m.count));
}

// What a visitor needs to tell the field types apart.
template <typename T>
struct is_vector : std::false_type {};
template <typename U>
struct is_vector<std::vector<U>> : std::true_type {};
template <typename T>
inline constexpr bool is_vector_v = is_vector<std::remove_const_t<T>>::value;
template <typename T>
struct is_optional : std::false_type {};
template <typename U>
struct is_optional<std::optional<U>> : std::true_type {};
template <typename T>
inline constexpr bool is_optional_v = is_optional<std::remove_const_t<T>>::value;

// Whether T is a map with a table of its own (a message or a nested struct).
struct IgnoreField {
  template <typename F>
  void operator()(const F&) const {}
};
template <typename T, typename = void>
struct has_fields : std::false_type {};
template <typename T>
struct has_fields<T, std::void_t<decltype(for_each_field(std::declval<T&>(), IgnoreField{}))>>
    : std::true_type {};
template <typename T>
inline constexpr bool has_fields_v = has_fields<std::remove_const_t<T>>::value;

// A member added to a message or a nested map, and forgotten in its table above, would never
// travel. These sizes change with the struct (on the one ABI CI builds; a small member that
// fits in padding slips through): update the size once the member is in its table and in
// PROTOCOL.md, whose tables tests/shared/protocol_doc_test.cpp checks against these.
#if defined(__GLIBCXX__) && defined(__x86_64__)
static_assert(sizeof(RunDescription) == 360 && sizeof(LayerInfo) == 120 && sizeof(ModuleRange) == 40,
              "a run description's member changed: update its table above, then this size");
static_assert(sizeof(StepRecord) == 456 && sizeof(ScalerState) == 24 && sizeof(WatchStats) == 56,
              "a step record's member changed: update its table above, then this size");
static_assert(sizeof(Event) == 464 && sizeof(Cause) == 160 && sizeof(Warning) == 96, "an event's member changed: update its table above, then this size");
static_assert(sizeof(Command) == 184 && sizeof(Ack) == 184, "a command's or an ack's member changed: update its table above, then this size");
#endif

}  // namespace keel::wire
