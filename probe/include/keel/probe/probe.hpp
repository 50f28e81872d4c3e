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
// small gradients as backward writes them (results the training thread takes at step()). The
// publisher thread owns the telemetry socket, the command thread the command socket; step() only exchanges commands and
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
#include "keel/probe/probe_options.hpp"
#include "keel/probe/skip_agreement.hpp"
#include "keel/probe/trained_model.hpp"
#include "keel/wire/codec.hpp"
#include "keel/wire/messages.hpp"

namespace keel::probe {

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
  double end_us = 0;       // remembering the weights' versions, re-arming the arrival hooks, and a snapshot's
                           // copies (ProbeOptions::rewind_every) where one is due
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
