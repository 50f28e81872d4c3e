// Message -> JSON, for `keel-cli tail --json` (one object per line, fed to jq or a script).
//
// What it is for: a stable, documented text form of every wire message. "type" comes first
// (the message's topic: "run", "step", "event", "cmd", "ack"), then every field of the
// message's table (keel/wire/message_fields.hpp), under its wire name and in wire order
// (PROTOCOL §3), whether or not the message carried it: a line of one type always has the same
// keys, a field the wire left out holds its default, and an absent map is null. The one
// alias: a run description's "run_id" is also printed as "run", the key every other line names
// its run by (PROTOCOL §5), so a script keys every line the same way.
// A step's float blocks are printed as objects that name their values: "layers" one per layer
// ({"name", "no_gradient" when frozen or unused, and each metric sent}), "module_values" one per
// module of a rollup step ({"name", each metric sent}), "buffer_absmax" one per buffer
// ({"name", "absmax"}).
// Non-finite numbers: JSON has none, and a NaN is exactly what a user of keel looks for, so
// NaN, +Inf and -Inf are written as the strings "nan", "inf", "-inf" rather than null.
// Threads: pure functions.
// Never: throws for any message content.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "text/layer_names.hpp"
#include "keel/wire/messages.hpp"

namespace keel::app {

// Step records name their layers, modules and buffers through `names` (see LayerNames for the
// fallback). A layer metric absent from the record's metric_mask (not due this step) is omitted
// from that layer's object rather than written as a number it never had. A wide model's rollup
// step (no layer values, module values instead) has an empty "layers" and its "module_values":
// per module, the module's worst layer's value of each metric sent, the sum of their
// grad_nonfinite.
nlohmann::ordered_json to_json(const keel::wire::Message& message, const LayerNames& names);

// to_json() as one line of text without the newline. Strings come from the network and may
// not be UTF-8; invalid bytes become U+FFFD instead of making the serializer throw.
std::string to_json_line(const keel::wire::Message& message, const LayerNames& names);

// A finite value as a JSON number, a non-finite one as "nan" / "inf" / "-inf". The float
// overload writes the shortest decimal that reads back as the same float (0.1f -> 0.1, not
// 0.10000000149011612).
nlohmann::ordered_json json_number(double value);
nlohmann::ordered_json json_number(float value);

}  // namespace keel::app
