// Message -> human-readable text, for `keel-cli tail` without --json.
//
// What it is for: watching a run from a terminal. A run description prints as a header
// naming the model it measures (when the probe names one) and listing the layers; each step
// is one compact table row (step, rank, loss, global grad norm, applied/skipped, probe time,
// dropped records, and the layer with the largest gradient norm, a non-finite one first since
// that is the signal; on a wide model's rollup step, which has no layer values, the worst
// module, "module <name>"), its layer named by its own run's description; events, commands and acks
// are one line each, an event's cause and a warning's numbers on a line of their own under it. Non-finite values print as nan / inf / -inf. Text from the network is
// made safe for a terminal (control bytes become '?').
// Threads: pure functions; a TablePrinter is a plain value owned by one thread.
// Never: throws for any message content.
#pragma once

#include <cstdint>
#include <optional>
#include <map>
#include <string>

#include "text/layer_names.hpp"
#include "keel/wire/messages.hpp"

namespace keel::app {

// Each returns text without a trailing newline; a run description spans several lines.
std::string format_run(const keel::wire::RunDescription& run);
std::string step_table_header();
std::string format_step(const keel::wire::StepRecord& step, const LayerNames& names);
std::string format_event(const keel::wire::Event& event);
// A `warning` event's numbers (values/warning_numbers.hpp) and its advice when the detail does
// not carry it already: "update_ratio 0.081, 2.6x its baseline 0.031, rising 4.08% a step; may
// diverge in ~35 steps"; "" for an event without a warning map. tail prints it under the event.
std::string warning_line(const keel::wire::Event& event);
std::string format_command(const keel::wire::Command& command);
std::string format_ack(const keel::wire::Ack& ack);

// Names and details come from the network or a file: control characters (an escape
// sequence) become '?' so none reaches the terminal as one.
std::string terminal_safe(const std::string& text);

// `value` with `significant_digits` (printf %g), or "nan" / "inf" / "-inf".
std::string format_value(double value, int significant_digits);

struct WorstLayer {
  uint32_t index = 0;
  float grad_norm = 0;
};
// The first layer (model order) whose grad_norm is non-finite, else the largest grad_norm;
// nothing when the record has no layers or grad_norm is not in its metric_mask.
std::optional<WorstLayer> worst_layer(const keel::wire::StepRecord& step);
// The same over a rollup step's modules (index into its run's modules); nothing when it
// carries no module grad_norm.
std::optional<WorstLayer> worst_module(const keel::wire::StepRecord& step);

// Adds the step table's column header where a reader needs it: before the first step, again
// after each run description (which pushes the previous header off screen) and, given
// `lines_per_header`, before the first step row once that many lines have followed the last
// header, as vmstat repeats its own so a screenful always shows one. A run
// description the probe re-sends unchanged (every 2 s) is printed once per run (run_id, model,
// rank): its layer table was over half of `keel-cli tail`'s output, and two probes of one
// process, both rank 0, would otherwise print theirs in turn every time.
class TablePrinter {
 public:
  // `lines_per_header`: 0 repeats the header only after a new description.
  explicit TablePrinter(int lines_per_header = 0) : lines_per_header_(lines_per_header) {}

  // Newline-terminated text for one message; "" for a description printed already.
  std::string format(const keel::wire::Message& message, const LayerNames& names);

 private:
  int lines_per_header_;
  int64_t lines_since_header_ = 0;   // the header's own line included
  bool header_due_ = true;
  std::map<wire::RunKey, std::string> printed_runs_;   // the last description printed (seq 0)
};

}  // namespace keel::app
