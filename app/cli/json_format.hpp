// Message -> JSON, for `keel-cli tail --json` (one object per line, fed to jq or a script).
//
// What it is for: a stable, documented text form of every wire message. Field names follow
// the wire structs ("type" first, then identity, then values); "type" is the message's topic
// ("run", "step", "event", "cmd", "ack"). Run descriptions, steps, events and acks all carry
// "run", "model" and "rank" together, the run they belong to (PROTOCOL §5), "" where a probe
// older than those keys sent none, so a script can key every line the same way. Objects keep
// insertion order so a line reads in the same order as the documentation.
// Non-finite numbers: JSON has none, and a NaN is exactly what a user of keel looks for, so
// NaN, +Inf and -Inf are written as the strings "nan", "inf", "-inf" rather than null.
// Threads: pure functions.
// Never: throws for any message content.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "cli/layer_names.hpp"
#include "keel/wire/messages.hpp"

namespace keel::app {

// Step records name their layers through `names` (see LayerNames for the fallback). A layer
// metric absent from the record's metric_mask (not due this step) is omitted from that layer's
// object rather than written as a number it never had. A wide model's rollup step (no layer
// values, module values instead) has an empty "layers" and a "modules" array: per module of
// its run's description, {"name", and each metric sent: the module's worst layer's value, the
// sum of their grad_nonfinite}. A description with modules lists them ({"name","first","count"}).
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
