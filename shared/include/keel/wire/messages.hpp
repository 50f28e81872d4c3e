// keel wire messages: the plain structs that travel between a probe and its clients.
//
// What it is for: one vocabulary shared by the probe (publisher, command server) and the app
// (receiver, keel-cli). Which fields travel, under which keys, is each struct's table in
// message_fields.hpp; the bytes are codec.hpp's and documented in shared/PROTOCOL.md.
// Threads: plain values, no shared state; any thread may build, copy or read them.
// Never: includes torch or ImGui, allocates behind the caller's back, or throws.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "keel/wire/layer_metrics.hpp"

namespace keel::wire {

// Snake-case metric name as used in JSON output and the run description ("grad_norm", ...).
const char* layer_metric_name(LayerMetric metric);

struct LayerInfo {
  std::string name;            // dotted name from named_parameters(), e.g. "blocks.0.attn.qkv.weight"
  std::vector<int64_t> shape;
  int64_t numel = 0;
  std::string dtype;           // "float32", "bfloat16", ...
  // The tensor's other names (a submodule registered twice, tied weights): named_parameters()
  // lists one tensor under each, and it is one layer, under the first.
  std::vector<std::string> aliases = {};
};

// A module of the model: the layers [first, first + count) in model order, all named under
// `name` (a layer-name prefix, "blocks.17.experts"). A wide model's step records carry these
// modules' rollups on the steps that carry no per-layer values (StepRecord::module_values).
struct ModuleRange {
  std::string name;
  uint32_t first = 0;
  uint32_t count = 0;
};

// Sent first to every new subscriber and re-sent periodically, so a late client understands
// the stream at once.
struct RunDescription {
  int32_t rank = 0;
  uint64_t seq = 0;
  std::string run_id;
  // Which of the job's models this probe measures ("generator", "critic", ...); "" when the
  // job names none. One process may run a probe per model (PROTOCOL §5).
  std::string model;
  int32_t world_size = 1;
  std::vector<LayerInfo> layers;       // model order (named_parameters() order)
  std::vector<std::string> watches;    // watched tensor names, forward order of first watch()
  // The model's floating-point buffers (BatchNorm's running statistics, ...), in
  // named_buffers() order: StepRecord::buffer_absmax follows this order.
  std::vector<std::string> buffers;
  std::string keel_version;
  std::string torch_version;
  std::string device;                  // "cpu", "cuda:0", ...
  int64_t start_unix_ms = 0;
  // The probe's policies (PROTOCOL §6) that are on; empty when the probe does not report them
  // (an older probe), an empty list when all are off. A dashboard that attaches late shows
  // their state without waiting for a change.
  std::optional<std::vector<std::string>> policies_on;
  // The absolute path of the file the probe records this run into (its flight recorder,
  // PROTOCOL §10, docs/recordings.md); "" when it records nothing. A client on the same
  // machine can read from it the history older than the probe's ring.
  std::string recording;
  // The modules whose rollups the step records carry between per-layer records, ascending
  // and disjoint; empty for a model narrow enough to be sent in full every step (PROTOCOL
  // §3.2, ProbeOptions::layer_detail_above).
  std::vector<ModuleRange> modules;
  // Whether each rank measures only its shards of the parameters (FSDP, tensor parallelism):
  // its layer metrics and grad_norm are of its part, and the job's grad norm is the ranks'
  // combined, sqrt(sum of their grad_norm squared). False under data parallelism, where every
  // rank measures the same whole gradients, and from a probe older than this key.
  bool sharded = false;
};

struct ScalerState {
  double scale = 0;
  int32_t growth_tracker = 0;
  bool found_inf = false;
  int64_t skipped_total = 0;
};

struct WatchStats {
  std::string name;
  float absmax = 0;
  float rms = 0;
  float z = 0;          // mean logsumexp over the last dim
  int64_t nonfinite = 0;
};

// One training step of one rank.
struct StepRecord {
  int32_t rank = 0;
  uint64_t seq = 0;
  // The run this record belongs to: its description's run_id and model (PROTOCOL §5). ""
  // from a probe older than these keys; a client then knows the run only by rank.
  std::string run;
  std::string model;
  int64_t step = 0;
  double loss = 0;
  double lr = 0;
  double grad_norm = 0;       // global: sqrt(sum of squared layer grad norms)
  bool skipped = false;
  std::string skip_reason;    // "" when applied; "nonfinite", "scaler", "command", "spike", "rewind",
                              // "other_rank"
  double step_time_us = 0;    // wall time of the previous step boundary to this one
  double probe_us = 0;        // the probe's own time on the training thread this step
  uint64_t dropped = 0;       // records the probe could not publish so far (cumulative)
  uint64_t probe_errors = 0;  // failures inside the probe so far (cumulative): each a "probe_error" event
  // Messages the flight recorder could not write to its file so far (cumulative): a full or
  // slow disk. Each new run of losses is also a "record_dropped" event.
  uint64_t record_dropped = 0;
  // Host memory the probe's rewind snapshots hold now, in bytes (docs/rewind.md); 0 when it
  // keeps none, which also tells a client that a rewind command would be refused.
  uint64_t snapshot_bytes = 0;
  int64_t stamp_unix_ns = 0;  // when the probe finished the step (for latency measurement)
  // Per-layer values, metric-major: for each metric present in metric_mask (ascending
  // LayerMetric order), layer_count float32 values in model order. A metric that is not due
  // this step (cadence) is absent from the mask and the block.
  uint32_t metric_mask = kAllLayerMetrics;
  uint32_t layer_count = 0;
  std::vector<float> layer_values;
  // A wide model's step without per-layer values (metric_mask 0): per module of the run
  // description's `modules`, its worst layer's value of each metric in module_mask (the
  // largest; non-finite counts added up; NaN when any layer's is NaN), metric-major as
  // layer_values, module_count values per metric. Empty, and module_mask 0, otherwise.
  uint32_t module_mask = 0;
  uint32_t module_count = 0;
  std::vector<float> module_values;
  std::optional<ScalerState> scaler;
  std::vector<WatchStats> watches;
  // max |b| of each of the run description's buffers, in its order, as they were at this step
  // (after its forward pass): NaN when a value is NaN, +Inf when one is infinite and none
  // NaN. Empty when the model has none, or they were not measured this step.
  std::vector<float> buffer_absmax;
  // Layers whose parameter did not require grad at this step (frozen), ascending: their
  // gradient metrics were not measured (the block holds 0 for them), which is not underflow.
  std::vector<uint32_t> frozen_layers;
  // Layers whose parameter required grad but got no gradient from this step's backward (not
  // used in the forward pass), ascending: as for frozen ones, their gradient metrics are not
  // this step's. Not frozen at the same time.
  std::vector<uint32_t> unused_layers;
  // Each param group's lr, in the optimizer's order, when it has more than one group (`lr` is
  // group 0's); empty with one group.
  std::vector<double> group_lrs;
  // An unsafe step's cause kind (one of kCauseKinds); empty for a safe step, or when the
  // probe has not classified it.
  std::string cause;

  // Index of a metric's block in layer_values, or -1 when absent.
  int metric_block(LayerMetric metric) const;
  // Value of one metric for one layer; NaN when the metric is absent.
  float layer_value(LayerMetric metric, uint32_t layer) const;
  // Index of a metric's block in module_values, or -1 when absent.
  int module_block(LayerMetric metric) const;
};

// Why a step was unsafe, and where its first non-finite value was born (PROTOCOL §3.4).
// `kind` is one of kCauseKinds; `op` and `module` are empty where the probe could not see them
// (the plain probe.step(loss) does not trace ops: it can say "forward pass" but not which op).
struct Cause {
  std::string kind;      // one of kCauseKinds
  std::string op;        // "aten::log", "LogBackward0"
  std::string module;    // a layer-name prefix, "blocks.2.route"
  std::string evidence;  // "log of a value that underflowed to 0"
  std::string sentence;  // the cause in one readable sentence, as clients show it
};
inline constexpr const char* kCauseKinds[] = {"forward", "backward", "loss_scale", "batch",
                                              "learning_rate", "weights", "input", "transient"};

// The forecaster's reading of a trend that usually ends in a divergence (PROTOCOL §3.4,
// docs/warnings.md). `signal` is one of kWarningSignals; the event's `layer` names the layer or
// watched tensor the trend is in ("" for the run's global grad norm or loss scale).
struct Warning {
  std::string signal;      // one of kWarningSignals
  double value = 0;        // the signal now, smoothed over the last steps
  double baseline = 0;     // its level before the trend
  double per_step = 0;     // the trend: how much log(value) rises a step (log_z: nats a step; loss_scale: falls)
  int64_t lead_steps = -1; // steps until trouble at this rate; -1 when the trend gives no estimate
  std::string advice;      // one sentence: what usually cures it
};
inline constexpr const char* kWarningSignals[] = {"grad_norm", "update_ratio", "loss", "logit_max", "log_z",
                                                  "loss_scale"};

struct Event {
  int32_t rank = 0;
  uint64_t seq = 0;
  std::string run;        // as StepRecord::run
  std::string model;      // as StepRecord::model
  int64_t step = 0;
  std::string kind;       // "first_nonfinite", "first_nonfinite_watch", "skip", ...
  std::string layer;      // layer or watched tensor name, "" when not about one
  std::string detail;     // human-readable
  int64_t stamp_unix_ns = 0;
  std::optional<Cause> cause;  // first_nonfinite: why the step was unsafe
  std::optional<Warning> warning;  // warning: the trend the forecaster saw
};

// A request from a client to the probe's command socket.
struct Command {
  int32_t rank = 0;       // target rank; -1 = any
  uint64_t seq = 0;
  uint64_t id = 0;        // chosen by the client, echoed in the Ack
  std::string kind;       // "skip", "dump", "policy", "describe", "history", "rewind"
  int64_t count = 1;      // skip: number of updates; history: most recent steps wanted
  int64_t at_step = -1;   // skip: the first step to skip (every rank the same); -1 = the next
  int64_t to_step = -1;   // rewind: to the newest snapshot at or before this step; -1 = the newest
  std::string label;      // dump: label (sanitised by the probe)
  std::string policy;     // policy: name
  bool enable = false;    // policy: on/off
  std::string token;      // history: the token of the client's backfill: subscription; "" = none
};

// The probe's answer to a Command.
struct Ack {
  int32_t rank = 0;
  uint64_t seq = 0;
  std::string run;        // as StepRecord::run: the run of the probe that answered
  std::string model;      // as StepRecord::model
  uint64_t id = 0;
  bool ok = false;
  int64_t step = -1;      // step at which the command took effect
  std::string error;      // refusal reason when !ok
  std::string path;       // dump: file written
  int64_t bytes = 0;      // dump: size
  int64_t count = 0;      // history: step records sent just before this ack
};

using Message = std::variant<RunDescription, StepRecord, Event, Command, Ack>;

}  // namespace keel::wire
