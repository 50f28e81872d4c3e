// Probe::Impl: the owner of the probe's stages, and the step that runs them in order.
//
// Stages with a header of their own (each says what it owns, its threads, what it never does):
//   stage            state it owns                                     thread       never
//   StepEvents       the events not yet published and the last         training     blocks, syncs
//   (step_events)    record's; the count of the probe's own failures
//   RunRecording     the flight recorder (its writer thread), why the  training;    writes or waits
//   (run_recording)  run is not recorded, the losses told              its thread   on the disk
//   CheckpointDumps  the dump writer (its thread), finished results,   training;    writes a file or
//   (checkpoint_     the automatic dump's step, the dump_max_count     its thread   waits for the
//    dumps)          count, the stale-dump note                                     writer
//   RemoteControl    the command server (its thread), commands taken   training;    waits for a client,
//   (remote_control) and acks owed, skips left and scheduled, the      command      allocates while
//                    dump asked for, refused clients                   thread       no command comes
//   WatchedBuffers   the model's float buffers as planned, those       training     fails the step
//   (watched_        watched, their pass and this step's max |b|,
//    buffers)        the buffers' identities, the last step's NaN/Inf
//   ClosureRerun     the closure of the step being taken, the point    training     runs a safe or a
//   (closure_rerun)  its re-run starts from, what the re-run's trace                sharded step again,
//                    found or why it did not run, whether it runs now               allocates without one
//   PlannedLayers    the layers' names and tensors, their reducer and  training;    allocates while the
//   (planned_        backward order (hooks), the layout planned, why   autograd's   model is as planned,
//    layers)         it could not be again, the walk's check, whether  (hooks)      drops a plan before
//                    the weight snapshot is W                                       the next is whole
//   CauseOfStep      the last steps' (step, lr), the cause of the      training     allocates once its
//   (cause_of_step)  step being recorded                                            window is full
//   StepTiming       the probe's time outside step() and in backward's training     allocates, blocks,
//   (step_timing)    hooks this step, the last step's start, its                    reads a device's
//                    ProbeTiming                                                    clock
//   StepDecision     this step's health and spike verdict, the spike   training     waits, allocates
//   (step_decision)  window, whether the last step was blown up;                    once its window is
//                    decides on the host, tells first_nonfinite,                    full
//                    spike and skip
//   StepRecordBuilder the record being made (the last one between      training     reads a device,
//   (step_record_    steps), its per-layer or per-module values,                    allocates once grown
//    builder)        whether the last step's watches were non-finite                to the model's width
//   StateSnapshots   the snapshots kept to rewind to (snapshot/), and  training     waits on the host
//   (snapshots_)     their side streams                                             while taking one
// The plan of a step and what its reduce stage found are plain values (step_plan.hpp), as is a
// deferred step kept until it settles (pending_step.hpp).
// Impl's own functions run the stages in order, in the files that define them: the step on the
// host (probe.cpp: plan, reduce, decide, apply, record), a sharded job's ranks agreeing on the
// verdict (probe_agreement.cpp), the closure form's step and the step's cause (probe_origin.cpp),
// the events a step raises, each stage telling its own (probe_events.cpp), the snapshots and a
// rewind (probe_rewind.cpp), the deferred step of a
// CUDA device (probe_deferred.cpp: decided there, settled a step later) and attaching
// (probe_attach.cpp: the options checked, the sockets, the public Probe's forwarding).
// Its state is private: the public Probe reaches it through the accessors of the public part.
// Threads: the training thread, but where a member says otherwise.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "transport/history_intents.hpp"
#include "reduce/deferred_scalar.hpp"
#include "keel/probe/optimizer_adapter.hpp"
#include "keel/probe/probe.hpp"
#include "keel/probe/trained_model.hpp"
#include "transport/publisher.hpp"
#include "cause_of_step.hpp"
#include "checkpoint_dumps.hpp"
#include "closure_rerun.hpp"
#include "planned_layers.hpp"
#include "pending_step.hpp"
#include "probe_clock.hpp"
#include "rank_verdict.hpp"
#include "remote_control.hpp"
#include "forecast/forecaster.hpp"
#include "snapshot/divergence_rule.hpp"
#include "snapshot/state_snapshots.hpp"
#include "run_recording.hpp"
#include "step_decision.hpp"
#include "step_events.hpp"
#include "step_plan.hpp"
#include "step_record_builder.hpp"
#include "step_timing.hpp"
#include "watched_buffers.hpp"
#include "reduce/watch_reducer.hpp"

namespace keel::probe {

// Group 0's lr (0 without groups), and every group's when there are several
// (StepRecord::group_lrs; empty with one group).
inline void read_lrs(const OptimizerAdapter& optimizer, double& lr, std::vector<double>& group_lrs) {
  const size_t groups = optimizer.group_count();
  lr = groups == 0 ? 0.0 : optimizer.hyperparameters(0).lr;
  group_lrs.clear();
  if (groups > 1) {
    for (size_t g = 0; g < groups; ++g) group_lrs.push_back(optimizer.hyperparameters(g).lr);
  }
}

class Probe::Impl {
 public:
  // `parameters`: the model's now (parameters_of), not empty.
  Impl(std::unique_ptr<TrainedModel> model, std::unique_ptr<OptimizerAdapter> optimizer,
       const ModelParameters& parameters, ProbeOptions options);
  ~Impl();

  void watch(const std::string& name, const torch::Tensor& tensor);
  StepOutcome step(const torch::Tensor& loss);
  // The closure form (probe_origin.cpp): the state a re-run needs saved, the closure run, then
  // step(loss); an unsafe step is run again traced before its update is applied or skipped.
  StepOutcome step(const LossClosure& closure);
  // The deferred step still waiting for its verdict, if any: collected, decided, recorded.
  void settle_pending();

  // What the public Probe hands out (probe.hpp says what each is).
  void use_scaler(GradScaler* scaler) { scaler_ = scaler; }
  void agree_skips(SkipAgreement agreement);
  const StepOutcome& last_settled() const { return last_settled_; }
  const wire::StepRecord& last_record() const { return record_.message(); }
  const wire::RunDescription& description() const { return description_; }
  const std::vector<wire::Event>& last_events() const { return events_.all(); }
  const ProbeTiming& last_timing() const { return timing_.last(); }
  uint64_t dropped() const;
  std::string recording_path() const { return recording_.path(); }
  std::string bound_endpoint() const;
  std::string bound_command_endpoint() const;

 private:
  ProbeOptions options_;
  std::unique_ptr<TrainedModel> model_;
  std::unique_ptr<OptimizerAdapter> optimizer_;
  PlannedLayers layers_;   // the parameters, the layers planned for them, followed each step
  WatchReducer watches_;
  WatchedBuffers buffers_;   // the model's floating-point buffers, followed and measured
  GradScaler* scaler_ = nullptr;
  // A sharded job's ranks agree on each step's verdict through it (probe_agreement.cpp); empty
  // when the rank decides alone. verdict_words_: the words handed to it (reused), agreed_: what
  // the job's verdict was this step.
  SkipAgreement skip_agreement_;
  torch::Tensor verdict_words_;
  RankVerdict agreed_;
  wire::RunDescription description_;
  StepEvents events_;   // after description_: they name its run and model
  // Before publisher_: destroyed after it, so the publisher's last drain is still recorded.
  RunRecording recording_;
  std::unique_ptr<Publisher> publisher_;
  // The history requests its clients announced, which the probe's end waits for (exit_flush.hpp).
  std::shared_ptr<HistoryIntents> history_intents_ = std::make_shared<HistoryIntents>();
  // The remote control (remote_control.hpp): the commands taken at each step boundary, and the
  // skips and dump they asked for.
  RemoteControl control_;
  // After control_: destroyed first, it may still answer a dump's command while finishing.
  CheckpointDumps dumps_{options_};
  StepDecision decision_;   // this step's health and verdict, and the events that tell them
  ClosureRerun rerun_;   // the closure form's step, and an unsafe one's re-run
  CauseOfStep cause_of_step_;   // the cause of the step being recorded, and the lrs it is judged against
  DeferredScalar loss_;                               // this step's loss, read with the gradient pass
  std::optional<PendingStep> pending_;   // the deferred step not yet settled (probe_deferred.cpp)
  StateSnapshots snapshots_{options_.rewind_every, options_.rewind_keep};   // the state kept to rewind to
  // The rewind policy (rewind_on_divergence): whether the run diverged, and its rewinds so far.
  DivergenceDetector divergence_{DivergenceRule{options_.rewind_loss_factor, options_.rewind_loss_steps}};
  int64_t policy_rewinds_ = 0;
  bool told_rewinds_stopped_ = false;   // the cap's rewind_stopped event is raised once
  Forecaster forecaster_;               // the early warning (ProbeOptions::forecast)
  // The forecaster as each kept snapshot's step began: a rewind puts it back with the state, so
  // that the abandoned span's values (a divergence's) leave its baselines as well as its levels.
  std::vector<std::pair<int64_t, Forecaster>> forecaster_at_snapshot_;
  std::vector<Forecast> forecasts_;     // this step's warnings, kept to reuse their room
  int64_t warning_cut_quiet_until_ = 0; // warning_lr_factor cuts once in quiet_steps
  int64_t last_warning_step_ = -1;       // the step of the newest warning, -1: none yet
  int64_t hold_requested_ = -1;          // a warning's hold for the ranks to agree on; -1: none

  int64_t step_ = 0;
  StepTiming timing_;   // what the probe costs the training thread
  // A deferred step's scaler update was lost (its settling failed): the next step's loss was
  // scaled by a value the host does not know, so that step ends as the scaler's overflow.
  bool scaler_out_of_step_ = false;
  StepRecordBuilder record_;   // after description_: it names its run and model
  int64_t record_step_ = 0;           // the step the record and events being made are of
  StepOutcome last_settled_ = [] {
    StepOutcome none;
    none.step = -1;   // no step has settled yet
    return none;
  }();

 private:
  // A step in four stages: reduce (statistics and health, before the update), decide (skip or
  // apply), apply (the optimizer and the scaler), record (the update pass, the record, events).
  // The CUDA device a deferred step can run on, or -1 (the step runs as before, deciding on
  // the host): every gradient and weight in a fused pass on one device, a verdict the fused
  // optimizer step can take, and nothing that must be known before the update.
  int deferrable_device(const StepPlan& plan, const torch::Tensor& loss) const;
  void deferred_step(const torch::Tensor& loss, const StepPlan& plan, uint64_t grad_passes_before, StepOutcome& outcome,
                     StepTimes& times);
  // The probe failed inside deferred_step with `e` (`stepped`: the optimizer's step, or a part of
  // the fused one, was taken): the step ends safely, as decide() would have ended it without
  // the probe (applied; with a scaler, its overflow), the device's verdict read where the fused
  // step was enqueued, and it is recorded with nothing measured.
  void recover_deferred_step(const std::exception& e, PendingStep& p, bool stepped, const StepPlan& plan,
                             uint64_t grad_passes_before, StepOutcome& outcome, StepTimes& times);
  void begin_step();
  // What this step measures (plan_step), with this probe's options and scaler.
  StepPlan plan() const { return plan_step(options_, step_, scaler_ != nullptr, layers_.reducer()); }
  bool gradient_pass_due() const { return keel::probe::gradient_pass_due(options_, step_, scaler_ != nullptr); }
  // PlannedLayers::follow, of the step being recorded: its walk of the modules also reads the
  // buffers for WatchedBuffers::follow.
  void follow_layout(bool tensors_in_walk);
  Reduction reduce(const torch::Tensor& loss, const StepPlan& plan, StepOutcome& outcome);
  // The dumps a step calls for: one asked for by command, and the automatic dump of a
  // blown-up step (or, with `buffers_start`, of the step whose buffers turned non-finite).
  struct DumpDue {
    bool command = false;
    RankVerdict::AutoDump automatic = RankVerdict::AutoDump::kNone;
  };
  // With skip_agreement_: this rank's verdict, as decide() and dump_due() left it, handed to
  // the other ranks, and the job's taken in its place (the scaler's overflow, the skip, the
  // dumps). The agreement's failure is the probe's: counted and told, this rank's verdict
  // stands, and it takes no dump (a sharded model's state_dict() would wait for the others).
  // `rewinding` becomes true when another rank rewinds this step (join_agreed_rewind).
  void agree_with_ranks(Reduction& reduction, StepOutcome& outcome, DumpDue& dump, bool& rewinding);
  // The rewind the ranks agreed on, taken by this rank too: the same snapshot step, the same
  // count of policy rewinds, this step skipped as "rewind".
  void join_agreed_rewind(StepOutcome& outcome, bool& rewinding);
  // With skip_agreement_, in a step every rank dumps: `error` (why this rank cannot, or "")
  // agreed with the other ranks. Returns why this rank does not take its part ("" when every
  // rank can).
  std::string agree_on_dump(const std::string& error);
  // The closure form's re-run of the first of a run of unsafe steps, with the origin tracer
  // armed (ClosureRerun::trace_if_due), from this step's reduction and verdict.
  void trace_origin_if_due(const Reduction& reduction, const StepOutcome& outcome);
  // The cause of the step being recorded (CauseOfStep), from its health and the re-run's trace.
  void classify(const StepPlan& plan, const Reduction& reduction);
  // Whether this rank's loss stands for the job's. With several data-parallel ranks it is the
  // rank's own while the gradients are the job's, so a non-finite loss alone does not make a
  // step unsafe (StepHealth::unsafe_to_apply), on the host or in the device verdict.
  bool loss_is_the_jobs() const { return options_.world_size <= 1; }
  // The dumps this step calls for (DumpDue); the command's only with `take_requested`.
  DumpDue dump_due(const Reduction& reduction, bool take_requested, bool buffers_start) const;
  // Takes the dump `due` calls for, if any (a command's answered).
  void take_due_dump(const DumpDue& due);
  // Takes the dump of `step` for `reason` (a command's with its request), agreed with the other
  // ranks when they agree on each step.
  void take_dump(int64_t step, const std::string& reason, const std::optional<DumpRequest>& request);
  // take_due_dump(dump_due(...)).
  void dump_if_due(const Reduction& reduction, bool take_requested = true, bool buffers_start = false);
  // The update pass of an immediate step, after the optimizer's.
  void measure_updates(const StepPlan& plan, bool applied, Reduction& reduction);
  // The update pass failed with `e`: update_ratio and param_norm are absent from the record.
  void lose_update_metrics(Reduction& reduction, const std::exception& e);
  // `watches`: the watched tensors' statistics of a deferred step, taken when it was enqueued;
  // null: this step's, collected now.
  void record(const StepPlan& plan, Reduction& reduction, StepOutcome& outcome, const StepTimes& times,
              std::vector<wire::WatchStats>* watches = nullptr);
  // `rewinding`: no snapshot is taken of a state a rewind is about to leave.
  void end_step(const StepPlan& plan, const Reduction& reduction, const StepTimes& times, bool rewinding = false);
  // The snapshot of the state step `next` begins from, when one is due (probe_rewind.cpp).
  void take_snapshot_if_due(int64_t next);
  // Whether this rank would take no snapshot now: a divergence in progress, a rewind pending.
  bool holds_snapshots() const;
  // Keeps a copy of the forecaster with the snapshot of step `step` (in the room of one no
  // longer kept), and after a rewind to `step` puts it back.
  void keep_forecaster_with_snapshot(int64_t step);
  void restore_forecaster(int64_t step);
  // What a rewind put back: the snapshot's step (the next step's number) and the factor every
  // group's learning rate was multiplied by (1: not cut).
  struct Rewound {
    int64_t to_step;
    double lr_factor;
  };
  // The rewind a command or the policy asked for, taken in step `from_step` (skipped) after
  // its optimizer's turn: the snapshot put back, the learning rate cut on the policy's repeated
  // rewinds, and the rewind event raised. nullopt when it could not be put back (a probe_error).
  std::optional<Rewound> rewind(int64_t from_step);
  // The policy's repeated rewinds multiply the learning rate by rewind_lr_factor: the factor
  // applied (1: none, or the optimizer could not, a probe_error).
  double cut_learning_rate(const RemoteControl::RewindRequest& request);
  // ProbeOptions::rewind_dump: the state put back, written as the dump of `to_step`.
  void dump_rewound_state(int64_t to_step);
  // The rewind policy's turn, as the step being recorded is: a divergence it completes asks for
  // a rewind to the newest snapshot from before its onset, or says why there is none
  // (probe_rewind.cpp).
  void watch_divergence(const StepOutcome& outcome, const Reduction& reduction);
  // The forecaster's turn, on the step's finished record: a trend that usually ends in a
  // divergence is a "warning" event (probe_forecast.cpp).
  void watch_forecast(const wire::StepRecord& record);
  // warning_lr_factor applied at a warning of `step`: what the warning's detail adds ("" for none).
  std::string cut_learning_rate_on_warning(int64_t step);
  // With snapshots, keeps the newest one from before a warning's trend (StateSnapshots::hold);
  // what it kept, for the event's detail.
  std::string hold_snapshot_on_warning(int64_t step);
  // The events raised since the last call, told to ProbeOptions::on_event (probe_forecast.cpp).
  void tell_events();
  // The events of the step being recorded, each stage telling its own (probe_events.cpp).
  // `measured`: the step's health and spike verdict are its own (its reductions succeeded).
  void raise_events(const StepOutcome& outcome, bool measured);
  // An event (StepEvents::add), and a failure inside the probe (StepEvents::add_probe_error),
  // of the step being recorded unless `step` says otherwise.
  void add_event(const std::string& kind, const std::string& layer, const std::string& detail,
                 std::optional<int64_t> step = std::nullopt) {
    events_.add(step.value_or(record_step_), kind, layer, detail);
  }
  void report_probe_error(const std::string& what, const std::string& error, const std::string& consequence,
                          std::optional<int64_t> step = std::nullopt) {
    events_.add_probe_error(step.value_or(record_step_), what, error, consequence);
  }
};

}  // namespace keel::probe
