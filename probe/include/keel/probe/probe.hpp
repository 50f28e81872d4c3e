// keel::probe::Probe: per-layer training-stability statistics for a libtorch training loop.
//
// Integration (a handful of lines; the model's code does not change):
//
//   keel::probe::Probe probe(*model, optimizer);          // attach: hooks, publisher
//   for (...) {
//     optimizer.zero_grad();
//     auto logits = model->forward(x);
//     probe.watch("logits", logits);                        // optional, any activation
//     auto loss = torch::cross_entropy(...);
//     loss.backward();                                      // or scaler.scale(loss).backward()
//     probe.step(loss);                                     // instead of optimizer.step()
//   }
//
// Each step() reduces every parameter's gradient and weights in a few fused passes on the
// tensors' own device (grad_norm, grad_absmax, grad_nonfinite, grad_zero_frac, param_norm,
// update_ratio: DESIGN §2), applies the policies (skip the update when a gradient or the loss
// is non-finite, or the grad norm overflows float32), calls optimizer.step() unless skipping,
// and hands a step record to a background publisher thread (ZeroMQ XPUB, msgpack, shared/PROTOCOL.md).
// On one CUDA device with AdamW, Adam or SGD the step is deferred (DESIGN §8): the skip is
// decided on the device and the optimizer stepped by ATen's fused kernel, which reads that
// decision, so step() never waits for the GPU; the step's record, events and verdict
// (last_settled()) come with the next step() or settle().
//
// Remote control (PROTOCOL §6): a ROUTER socket on the telemetry port + 1 takes commands from
// the dashboard or `keel-cli send`: "skip" the next K updates (skip_reason "command"),
// "dump" a checkpoint, "policy <skip_nonfinite|skip_spike|dump_nonfinite> on|off",
// "describe", and "history" (the recent step records, answered by the command thread). They
// take effect at the next step() and are acknowledged with that step.
//
// Dumps: a directory under options.dump_dir with model.pt and optimizer.pt (load them with
// torch::load(model, dir + "/model.pt") and torch::load(optimizer, dir + "/optimizer.pt")),
// the recent telemetry, the run description and a manifest (checkpoint_capture.hpp). The state
// is captured in memory on the training thread before the step's update; a thread of its own
// writes it under a temporary name and renames it when complete.
//
// Threads: construct, watch() and step() on the training thread only. Gradient hooks may run
// on autograd worker threads: they note arrival order and, with measure_in_backward, measure
// small gradients as backward writes them (results the training thread takes at step()). The publisher thread owns the
// telemetry socket, the command thread the command socket; step() only exchanges commands and
// acks with it through bounded queues, and never waits for a client.
// Never: throws from watch() or step() because of keel (a failure inside the probe's own work
// is counted in every record's probe_errors and raised as an event, and the step ends safely:
// the update applied as libtorch would, or, with a scaler, skipped as its overflow; exceptions
// of the user's optimizer propagate, and the scaler is rearmed for the next step); blocks on
// the network (a full queue drops the record and counts it; a slow subscriber loses records
// alone, as seq gaps it shows);
// synchronises per layer: the device passes read their results back in one copy each, and a
// deferred step not at all (CPU tensors are read where they are; the generic ATen path for
// other layouts copies one small stats tensor per pass, and a CUDA loss without a fused pass
// on its device is read with .item()). The constructor throws AttachError, with a clear
// message, on setup errors (address in use, bad endpoint, no parameters).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "keel/probe/attach_error.hpp"
#include "keel/probe/grad_scaler.hpp"
#include "keel/probe/optimizer_adapter.hpp"
#include "keel/probe/skip_agreement.hpp"
#include "keel/probe/trained_model.hpp"
#include "keel/wire/codec.hpp"
#include "keel/wire/messages.hpp"

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

// What step() did.
struct StepOutcome {
  int64_t step = 0;
  bool applied = true;
  std::string skip_reason;          // "" when applied
  int64_t nonfinite_layers = 0;
  // What made the step unsafe to apply, whether or not a policy skipped it: "non-finite
  // gradient values", "overflowing grad norm", "non-finite loss", joined by " + "; "" if none.
  std::string nonfinite_cause;
  double grad_norm = 0;
  // false: a deferred step (on a CUDA device, DESIGN §8). The device decides whether the
  // update applies, with no host sync: `applied` says only what the host knew (a command
  // skip), and the rest comes a step later, in last_settled() after the next step() or
  // settle(), and in that step's record.
  bool settled = true;
};

// Where the probe's time on the training thread went in the last step (for the benchmark).
// The stages below add up to about probe_us (less watch() calls); a stage a step did not run on
// the host is 0 (a deferred step's update and record, DESIGN §8, settle a step later).
struct ProbeTiming {
  double probe_us = 0;     // all of the probe's time this step (excludes optimizer.step())
  double reduce_us = 0;    // of which: reductions (gradient, weight, update, watched tensors)
  // The host's stages, in the order they run:
  double begin_us = 0;     // commands, finished dumps, refusals; settling a deferred step
  double layout_us = 0;    // following the model: the walk of its modules, the layout check, the step's plan
  double grads_us = 0;     // the gradient pass and the step's verdict (the reductions before the update), and
                           // the measuring of small gradients inside backward, as autograd accumulates them
  double backward_us = 0;  // of grads_us: that measuring inside backward (every 8th hook timed, counting for 8)
  double update_us = 0;    // after optimizer.step(): the update pass
  double record_us = 0;    // building the record and its events, handing them to the publisher
  double end_us = 0;       // remembering the weights' versions, re-arming the arrival hooks
};

// A step's closure, as optimizer.step(closure) takes it (torch::optim::Optimizer::LossClosure).
using LossClosure = std::function<torch::Tensor()>;

class Probe {
 public:
  // The C++ front: a libtorch module and optimizer, which must outlive the probe.
  Probe(torch::nn::Module& model, torch::optim::Optimizer& optimizer, ProbeOptions options = {});
  // The core, for any front: the model's tensors and the optimizer through their adapters
  // (trained_model.hpp, optimizer_adapter.hpp). Both constructors throw AttachError alike.
  Probe(std::unique_ptr<TrainedModel> model, std::unique_ptr<OptimizerAdapter> optimizer, ProbeOptions options = {});
  // Finishes a dump still being written (the user or a policy asked for it) and publishes
  // its outcome as an event, then serves the clients a last time, for at most
  // options.exit_flush_secs (a client waiting to connect, a history request on its way, what
  // connected clients have not received), and closes the sockets.
  ~Probe();
  Probe(const Probe&) = delete;
  Probe& operator=(const Probe&) = delete;

  // The deferred step still waiting for its verdict, if any, collected and published; step()
  // does it itself at its start. Call it before saving the optimizer (torch::save): until
  // then a step the device skipped is still counted in the optimizer's step counts.
  void settle();
  // What the last settled step did: the last step() when it settled at once, else the one
  // before it (its StepOutcome::step says which; -1 before any has settled).
  const StepOutcome& last_settled() const;

  // Loss scaling: step() unscales (fused with its gradient pass), skips on overflow, and
  // updates the scaler; in a deferred step all three on the device, the scaler's host values
  // coming with the step's settling. The scaler must outlive the probe.
  void use_scaler(GradScaler* scaler);

  // A sharded job (FSDP): every step's verdict is agreed with the other ranks through
  // `agreement` before the update (skip_agreement.hpp), so that a step any rank skips is
  // skipped by all, and an overflow any rank's scaler finds backs off every rank's scale. The
  // step is then decided on the host (not deferred, DESIGN §9), and the closure form does not
  // run an unsafe step again (its re-run would run the model's collectives on some ranks only).
  // An empty function turns the agreement off. Between steps only.
  void agree_skips(SkipAgreement agreement);

  // Statistics of an activation (absmax, rms, mean logsumexp over the last dim, non-finite
  // count), reduced now on its device and published with this step's record.
  void watch(const std::string& name, const torch::Tensor& tensor);

  // Replaces optimizer.step(): statistics, policies, the update (unless skipped), publish.
  StepOutcome step(const torch::Tensor& loss);
  // The closure form, as optimizer.step(closure) takes it: the closure zeroes the gradients,
  // runs the forward and backward passes and returns the loss. keel saves the random state
  // and the model's floating buffers, runs the closure, and steps as step(loss). When a step
  // turns unsafe (the first of a run of them), keel runs the closure once more, on the same
  // batch, weights, random state and buffers, with its origin tracer armed, and names the op
  // and module where the NaN was born, or calls it transient when it does not come back
  // (DESIGN §2.1). The state is then put back as the first run left it; an update that is
  // applied uses the first run's gradients. On a CUDA device the closure form is not deferred
  // (DESIGN §8): its skip is decided on the host, with the wait that costs, so that an unsafe
  // step is known while its closure and batch are still there to run again.
  // Exceptions of the closure's first run propagate; its re-run's are a probe_error.
  StepOutcome step(const LossClosure& closure);

  // The last step's record (what was published), for tests and in-process users.
  const wire::StepRecord& last_record() const;
  const wire::RunDescription& description() const;
  // Events raised by the last step (first non-finite layer / watch, skip), in order.
  const std::vector<wire::Event>& last_events() const;
  const ProbeTiming& last_timing() const;
  // Messages dropped because the publisher's queue was full (per-subscriber losses show as
  // seq gaps on that subscriber).
  uint64_t dropped() const;
  // The absolute path of the run's recording (ProbeOptions::record_dir); "" when none.
  std::string recording_path() const;
  // Where the publisher is bound (resolves a "tcp://127.0.0.1:*" wildcard port).
  std::string bound_endpoint() const;
  // Where the command socket is bound: the telemetry port + 1, or a port of its own when the
  // telemetry endpoint has a wildcard port; "" when there is none (endpoint "" or ipc://).
  std::string bound_command_endpoint() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace keel::probe
