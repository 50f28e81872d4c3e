// keel::probe::ProbeOptions: everything a probe is set up with (endpoint, rank, cadence,
// policies, dumps, recording, queues, authentication), apart from the Probe itself.
//
// What it is for: the probe's parts that only read the settings (the run description among
// them) include this header, not probe.hpp and with it the whole Probe; the Python front binds
// the same fields by name (probe/python/src/module.cpp).
// Threads: a plain value, copied into the probe at construction. Never: allocates beyond its
// strings and vectors.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "keel/wire/codec.hpp"
#include "keel/wire/layer_metrics.hpp"

namespace keel::probe {

struct ProbeOptions {
  // Where the publisher binds its XPUB socket; "" publishes nothing (statistics and policies
  // still run) and takes no commands. Loopback by default. Commands are taken on the next port.
  std::string endpoint = wire::kDefaultPubEndpoint;
  // default: "<hostname>-<pid>-<start time>", with "-2", "-3", ... for a process's second,
  // third, ... probe, so that two probes of one process never share a run id.
  std::string run_id;
  // Which of the job's models this probe measures, when one process steps several (a GAN's
  // "generator" and "discriminator", an actor and its critic): shown wherever the run is named
  // (dashboard, keel-cli, events) and put in its dump names. Letters, digits, '.', '_' and '-',
  // at most 64; anything else is an AttachError. "" names none.
  std::string model;
  // The number of the first step(): a job resumed from a checkpoint taken at step 40,000 sets
  // 40000, so its records and dumps go on from there instead of starting again at 0.
  int64_t first_step = 0;
  int32_t rank = 0;
  int32_t world_size = 1;
  // Each rank measures only its shards of the parameters (FSDP, tensor parallelism): said in
  // the run description, so that the dashboard shows the job's grad norm, the ranks' combined,
  // beside this rank's. The Python front sets it for a sharded model.
  bool sharded = false;
  // Per LayerMetric (index = wire::LayerMetric): compute every N steps; 0 = never.
  std::array<int32_t, wire::kLayerMetricCount> cadence = wire::every_step_cadence();
  // A model of more layers than layer_detail_above is sent per layer only every
  // layer_detail_every steps; its other steps carry one value per module and metric (the
  // module's worst layer; modules at the deepest name depth with at most 1,024 of them, or the
  // top level when it has up to 8,192, PROTOCOL §3.3; a model with more top-level modules
  // than that is sent per layer every step). A step with a non-finite value or a skipped update is always sent per
  // layer, so the first non-finite layer and a skip stay exact; the probe measures every
  // layer at every step either way. At 50,000 layers this cuts the wire, the recording and the
  // dashboard's intake about layer_detail_every times (BENCHMARKS.md). 0: every step per layer.
  int64_t layer_detail_above = 4096;
  int32_t layer_detail_every = 16;
  // Policy: never apply an update with a NaN/Inf gradient, a NaN/Inf loss, or a global grad
  // norm that overflows float32 (above 1.8e19: a poisoned batch with finite gradients). A
  // "policy skip_nonfinite" command switches it while the run goes on. With world_size > 1
  // the loss is this rank's own while the gradients are the job's (all-reduced): a non-finite
  // loss with safe gradients is reported but not skipped, since one rank skipping alone would
  // leave the replicas apart.
  bool skip_on_nonfinite = true;
  // Policy (opt-in, "skip_spike"): skip an update whose global grad norm is a spike: a
  // z-score of log(grad norm) above spike_z against the last spike_window steps, decided only
  // after spike_warmup steps. Defaults from OLMo-core's skip-step rule (128-step window,
  // half of it as warm-up, 6 sigma); see spike_detector.hpp for why log and why not ZClip's 2.5.
  // Spikes are detected and reported as events whether or not the policy skips them.
  bool skip_on_spike = false;
  size_t spike_window = 128;
  size_t spike_warmup = 64;
  double spike_z = 6.0;
  // Policy ("dump_nonfinite"): dump a checkpoint at the first step of a run of steps that
  // skip_on_nonfinite would skip, at most once per dump_nonfinite_every steps.
  bool dump_on_nonfinite = true;
  int64_t dump_nonfinite_every = 1000;
  // Rewind (docs/rewind.md): every rewind_every steps the probe keeps a snapshot of the
  // training state in memory (weights, buffers, optimizer state, loss scale; on a GPU in
  // pinned host memory, copied on a side stream), the newest rewind_keep of them, and a
  // "rewind" command goes back to one. They hold rewind_keep times the weights and the
  // optimizer state in host memory (with Adam about 3 x 4 bytes per parameter each), which is
  // why they are off by default: 0 keeps none, and a rewind is refused.
  int64_t rewind_every = 0;
  int64_t rewind_keep = 2;
  // Told, on the training thread, after a rewind put the state of step `to_step` back while
  // step `from_step` was being taken: the trainer repositions or skips its data here. The
  // batches of steps to_step .. from_step were consumed; a loader that just goes on skips
  // them, which is what a rewind past a divergence wants. `lr_factor` is what the rewind
  // multiplied every param group's learning rate by (rewind_lr_factor on a repeated
  // divergence; 1 otherwise): a trainer whose schedule sets the learning rate from its own
  // base applies it there too, or the schedule undoes the cut. Its exceptions are the trainer's.
  std::function<void(int64_t from_step, int64_t to_step, double lr_factor)> on_rewind;
  // Rewind by policy (opt-in; needs rewind_every): when the run diverges, the probe rewinds as a
  // "rewind" command would, to the newest snapshot from before the divergence began. Diverged
  // (docs/rewind.md): the loss above rewind_loss_factor times its recent median for
  // rewind_loss_steps steps in a row, or 3 unsafe steps in a row. After rewind_max such rewinds
  // it stops rewinding and says so (a rewind_stopped event) with what usually cures a run that
  // keeps diverging, rather than loop.
  bool rewind_on_divergence = false;
  double rewind_loss_factor = 2.0;
  int64_t rewind_loss_steps = 10;
  int64_t rewind_max = 3;
  // The policy's second and later rewinds (the run diverged again from the state before)
  // also multiply every param group's learning rate by this, as OPT's restarts did by hand;
  // in (0, 1], and 1 (the default) cuts nothing. on_rewind is told the factor.
  double rewind_lr_factor = 1.0;
  // A rewind (by command or policy) also writes the state it put back as a dump,
  // "step-<S>-rewind" under dump_dir (within dump_max_count and dump_min_free_bytes): the
  // morning after, the state training went on from loads as any dump does.
  bool rewind_dump = true;
  // The early warning (docs/warnings.md): each step the forecaster reads the step's record (the
  // grad norm, the update ratios, the watched tensors, the loss scale) and raises a "warning"
  // event when one is on a trend that usually ends in a divergence, with its numbers, how many
  // steps ahead it expects trouble and what usually cures it. On by default: its state is a
  // few numbers per layer and watched tensor, and keel-bench-warning prints its cost and its
  // record on a corpus of divergences and healthy runs.
  bool forecast = true;
  // Acting on a warning (opt-in): every param group's learning rate multiplied by this, in
  // (0, 1], at a warning (at most once in 500 steps), as an engineer woken by it would; the
  // warning's detail says so. 1 (the default) changes nothing. A trainer whose schedule sets
  // the learning rate from its own base keeps the cut there too, or the schedule undoes it:
  // after the step, the optimizer's learning rate over the one the schedule set is the cut
  // (keel-demo's Trainer::keep_lr_cut; docs/warnings.md).
  double warning_lr_factor = 1.0;
  // Told, on the training thread, each event the probe raises (a warning, a first_nonfinite, a
  // rewind, a dump, ...) once, as its step's record goes out: an alert, a log line, an action.
  // Its exceptions are caught and told as a probe_error; training goes on.
  std::function<void(const wire::Event&)> on_event;
  // Where dumps are written (created when needed). Never taken from a request.
  std::string dump_dir = "keel-dumps";
  // Dumps asked for by command: at most one per this many seconds (and one at a time).
  double dump_min_interval_secs = 5.0;
  // Every dump, the policy's and the commands' together, is refused (an event and an error
  // ack, training unchanged) once this probe has written this many, or when it would leave
  // less than dump_min_free_bytes free on the dump directory's filesystem: a run that blows up
  // again and again, or a dashboard asking every few seconds, cannot fill the disk the job
  // writes its own checkpoints to. A dump is about the size of the model and optimizer state.
  int64_t dump_max_count = 32;
  int64_t dump_min_free_bytes = int64_t{2} << 30;   // 2 GiB
  // The flight recorder (shared/PROTOCOL.md §10): every run description, step record and
  // event also goes to one file per run and rank under this directory (created when needed),
  // "<run_id>[-<model>]-rank<R>.keelrec", which `keel --open` and `keel-cli summary|export`
  // read. A thread of its own writes it: a full or slow disk loses records (counted in every
  // record's record_dropped, told as a "record_dropped" event), never slows a step. A file
  // that cannot be created leaves the run unrecorded, told the same way. "" records nothing.
  std::string record_dir = "keel-runs";
  // The file's bound on disk. Past it, older step records are thinned: one in 2, then 4, 8, ...
  // is kept, with every step within 64 of an event and the newest 4,096 steps (as many as fit in
  // a quarter of the bound); descriptions and events are never dropped.
  uint64_t record_max_bytes = uint64_t{1} << 30;   // 1 GiB
  // Float32 mantissa bits the recording keeps of each layer value (1 to 23). 23 records the
  // values exactly (keel-demo's model: about 18 bytes per layer-step). Fewer round them to
  // nearest on the recorder's thread, for disk: 8 keeps a relative precision of 0.2% in about
  // 8 bytes per layer-step (BENCHMARKS.md). Non-finite values, the counts of non-finite values
  // and everything but the per-layer values stay exact; the live stream is never rounded.
  int record_mantissa_bits = 23;
  // update_ratio of a layer off the CPU whose optimizer keeps no rule to rebuild its update
  // (any but AdamW, Adam and SGD, docs/DESIGN.md §8) takes a copy of the weights on their
  // device, as large as they are. Off by default: such a run reports no update_ratio. The CPU
  // fp32 path always measures it (its copy is in host memory).
  bool snapshot_for_update_ratio = false;
  // On: a small float32 CPU gradient (up to 32K elements) is measured by a hook on its
  // gradient accumulator as backward writes it, while it is in cache, and its weight with it
  // under a plain SGD; the step's gradient pass takes those results unless the gradient was
  // written since. Off: the pass measures every gradient after backward. The same figures
  // either way, bit for bit. Unset (the default): on only when those small tensors, weights
  // and gradients, take more than half the CPU's last-level cache; below that the pass finds
  // them in cache and the hooks cost more than they save (keel-bench-probe --tensors-only
  // measures both ways).
  std::optional<bool> measure_in_backward;
  size_t queue_capacity = 256;      // records waiting for the publisher thread
  int send_high_water_mark = 1000;  // per subscriber, in messages
  double describe_interval_secs = 2.0;
  size_t history_steps = 4096;      // ring of recent step records kept for backfill
  // When the probe is destroyed, how long at most it keeps serving its clients (DESIGN §5): a
  // client that was waiting for the run connects (the probe waits until 250 ms after it bound,
  // on an address that is not a wildcard port), the history request of one that just
  // subscribed is answered, and what the connected clients have not received yet is
  // delivered. A probe nobody is connecting to waits for none of it. 0: it closes at once,
  // dropping what is still queued.
  double exit_flush_secs = 2.0;
  // Bind the command socket (telemetry port + 1). Off: the run can be watched, not steered.
  bool accept_commands = true;
  // Authentication (ZeroMQ CURVE) of the command socket and, with authenticate_telemetry, of
  // the telemetry socket: the probe's Z85 secret key and the Z85 public keys of the clients
  // allowed (`keel-cli keygen` makes both). Others are refused at the handshake and their
  // refusals are "auth_refused" events. "" (the default): the key pair of the user running the
  // trainer (~/.keel/user.key, made on first use; KEEL_KEY_DIR moves it), which the same user's
  // dashboard and keel-cli present with no flag, and no other user has.
  std::string command_secret_key;
  std::vector<std::string> allowed_client_keys;
  // Telemetry takes the same keys as commands: only the clients that may steer the run may
  // read it. Off: anyone who reaches the telemetry port reads the run (commands stay
  // authenticated).
  bool authenticate_telemetry = true;
  // No authentication at all, on a loopback address: anyone on the machine may read and steer
  // the run (a container where you are alone). Off by default.
  bool allow_unauthenticated_local = false;
  // No authentication on any other address either: anyone who can reach it may read and steer
  // the run.
  bool allow_unauthenticated_remote = false;
};

}  // namespace keel::probe
