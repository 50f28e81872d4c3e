// ClosureRerun: the closure form's answer to "where was the NaN born" (DESIGN §2.1): the state
// a re-run needs, saved before the closure runs, and the first of a run of unsafe steps run
// again with the origin tracer armed, before its update is applied or skipped.
// Owns: the closure of the step being taken (null in the plain form), the point its re-run
// starts from (the random state and the buffers' values, RerunPoint) and the buffers it was
// taken of (reused), what the re-run's trace found (when it ran), why the step was not run
// again otherwise, and whether the closure is running again now (its probe.watch() calls are
// the first run's, already taken).
// Thread: the training thread only.
// Never: runs a step again that is safe, that is not the first of its run of unsafe steps, or
// that is a sharded job's (its collectives would wait for the other ranks); allocates on a step
// it does not run again (why not is a literal); fails the step: a failure of its own is the
// probe's (a probe_error), the step's cause then told from the first run alone.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "keel/probe/probe.hpp"
#include "keel/probe/trained_model.hpp"
#include "origin/origin_tracer.hpp"
#include "origin/rerun_point.hpp"
#include "step_events.hpp"
#include "step_health.hpp"
#include "watched_buffers.hpp"

namespace keel::probe {

class ClosureRerun {
 public:
  // Before the closure runs: every buffer of `model` (integer ones too: BatchNorm counts its
  // batches in num_batches_tracked) and the random state of the CPU and of the devices of
  // `params`, saved. A failure is told (a probe_error of `step`) and no re-run is prepared.
  void prepare(TrainedModel& model, const std::vector<torch::Tensor>& params, StepEvents& events, int64_t step);

  // The closure of the step being taken, from its construction (after the closure's first run)
  // to its end: the step decides on the host while it is set.
  class Taking {
   public:
    Taking(ClosureRerun& rerun, const LossClosure& closure) : rerun_(rerun) { rerun_.closure_ = &closure; }
    ~Taking() { rerun_.closure_ = nullptr; }
    Taking(const Taking&) = delete;
    Taking& operator=(const Taking&) = delete;

   private:
    ClosureRerun& rerun_;
  };
  bool has_closure() const { return closure_ != nullptr; }
  // The closure is running again: its probe.watch() calls are the first run's.
  bool rerunning() const { return rerunning_; }

  // What decides whether the step being taken is run again, from its reduce and decide stages.
  struct Verdict {
    bool measured = false;            // its reductions succeeded (with its health)
    bool sharded = false;             // a sharded job's ranks agree on its verdict
    const StepHealth* health = nullptr;
    bool loss_is_the_jobs = true;     // Probe::Impl::loss_is_the_jobs
    bool scaler_found_inf = false;
    double loss = 0;
    bool nonfinite_last_step = false;   // the step before was blown up: not the first of the run
    bool applied = false;               // its update will be applied
  };
  // The model as the re-run's tracer names it, and its gradients restored after it.
  struct Model {
    const std::vector<std::string>& names;
    const std::vector<torch::Tensor>& params;
    const WatchedBuffers& buffers;
  };
  // Runs the step again with the origin tracer armed when `verdict` calls for it: origin() set,
  // the state put back as the first run left it (and the gradients, when its update will be
  // applied). not_traced() says why it did not run otherwise. Failures are told as `step`'s.
  void trace_if_due(const Verdict& verdict, const Model& model, StepEvents& events, int64_t step);
  // A deferred step is not run again (it has no closure): it is told how to have it be.
  void not_run_again_deferred() {
    origin_.reset();
    not_traced_ = kPlainStepAdvice;
  }

  const std::optional<Origin>& origin() const { return origin_; }
  const char* not_traced() const { return not_traced_; }

 private:
  static constexpr const char* kPlainStepAdvice =
      "pass the step as probe.step(closure) to have keel run it again and name the op and module";

  const LossClosure* closure_ = nullptr;
  RerunPoint rerun_point_;
  std::vector<torch::Tensor> rerun_buffers_;   // all_buffers() when the step began (reused)
  std::optional<Origin> origin_;
  const char* not_traced_ = "";   // a literal: set on every step, it must not allocate
  bool rerunning_ = false;
};

}  // namespace keel::probe
