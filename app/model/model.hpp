// Model: the dashboard's data, keyed by (run_id, model, rank) (wire::RunKey), fed one decoded
// message at a time.
//
// What it is for: the single owner of all runs the app has seen. Rank alone does not tell runs
// apart: two probes of one process (a GAN's generator and discriminator) are both rank 0.
// ingest() routes each message to its run:
//   - a RunDescription with an identity new to the model starts a new run (runs of other
//     identities keep their history and stay listed); the same identity again just refreshes
//     names and watches, unless its start_unix_ms differs: the job was started again under the
//     same run_id (resumed from a checkpoint, counting from its step there), and that start is
//     a new segment of the run, a RunModel of its own (RunModel::segment()), rather than
//     records that all read as duplicates of the earlier start's steps. The description's run
//     becomes its rank's current run (current_run());
//   - step records and events that name their run (`run`, `model`: PROTOCOL §5) go to the run
//     of that identity, whichever run the rank's last description was of; if none exists yet
//     (the app attached mid-run and the periodic description has not come), a run of that
//     identity is started, and its description finds it when it arrives;
//   - step records and events that do not (a probe older than those keys) go to the rank's
//     current run; if none exists yet, a run with an empty run_id is started and adopts the
//     identity of the first description of that rank;
//   - a step record whose layer count is not the one its run's description declared is
//     refused and counted, never drawn under that run's names (RunModel::add_step());
//   - acks go to a bounded list (newest first) for the controls pane; commands are counted
//     and ignored (they are what a client sends, not telemetry);
//   - a message beyond sane limits is refused and counted (refused_insane, last_refusal),
//     never stored: a description or record of more than max_layers layers, a rank below 0
//     or at or past max_ranks, a description whose rank is not below its world_size, and a
//     record or event whose rank is not below the world_size its run_id's description gave.
// Threads: not thread-safe. One thread owns the Model and makes every call: the UI thread. The
// receiver thread never touches it; it hands decoded messages over a queue that the UI thread
// drains at the start of each frame, calling ingest() for each (see history_store.hpp).
// References and pointers it returns are valid until the next ingest().
// Never: throws for any message content, or blocks. Memory is bounded by ModelConfig: when a
// run starts and max_runs are held, the oldest run that no rank is streaming is dropped (so
// more than max_runs are held only while more ranks than that stream at once); each run is
// bounded as RunModel says.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "keel/wire/messages.hpp"
#include "model/job_grad_norm.hpp"
#include "model/job_layer_values.hpp"
#include "model/model_config.hpp"
#include "model/run_model.hpp"

namespace keel::app {

struct ModelCounters {
  uint64_t messages = 0;       // every message given to ingest()
  uint64_t runs_evicted = 0;   // runs dropped to stay within max_runs
  uint64_t refused_records = 0;  // step records whose layer count was not their run's (all runs)
  uint64_t refused_rollups = 0;  // step records whose module values did not fit their run's modules
  // Messages beyond sane limits (ModelConfig): more layers than max_layers, a rank below 0,
  // at or past max_ranks or past its run's world_size. Never stored.
  uint64_t refused_insane = 0;
  std::string last_refusal;    // why the newest of those was refused, in words
};

class Model {
 public:
  explicit Model(const ModelConfig& config = ModelConfig{});

  // Stores one decoded message. Returns whether anything a view shows changed.
  bool ingest(const wire::Message& message);
  // Takes over the runs of a model built elsewhere (a recording read on the loader's thread,
  // core/recording_loader.hpp): each replaces the held run of the same identity and start
  // (same_start()) when it starts earlier or holds at least as many steps, and is dropped
  // otherwise; a run of an identity or start not held is added as one more run (the oldest
  // run no rank streams is evicted past max_runs). A replaced run keeps its place: a rank
  // streaming it streams into the new one, so a live run read back from its recording goes
  // on live. Returns how many runs were replaced or added.
  size_t adopt_runs(Model&& staged);

  // Runs in the order they started, oldest first.
  size_t run_count() const { return runs_.size(); }
  const RunModel& run(size_t index) const { return *runs_[index]; }
  // The run with this identity (its newest segment), or nullptr.
  const RunModel* find_run(const wire::RunKey& key) const;
  // The newest run with this run_id on this rank, whichever model it measures, or nullptr.
  const RunModel* find_run(const std::string& run_id, int32_t rank) const;
  // The run a rank is streaming now: the one its last description was of (before any, the
  // first run its records went to), or nullptr if that rank never sent anything. Of several
  // runs on one rank (a probe per model), see current_runs().
  const RunModel* current_run(int32_t rank) const;
  // Every run messages go to now, oldest first: each identity's newest segment, and each
  // rank's current run. A run whose probe has stopped stays here until it is evicted: the
  // model has no clock to tell a finished run from a quiet one.
  std::vector<const RunModel*> current_runs() const;
  // Ranks that have sent telemetry, ascending.
  std::vector<int32_t> ranks() const;
  // A sharded job's grad norm (RunDescription::sharded): each step's, once every rank's current
  // run has stored it, combined from the ranks' own (JobGradNorm). nullptr until then, and for
  // a job that is not sharded. Ranks read from recordings (adopt_runs) are combined over the
  // steps every rank still holds exactly: the last ModelConfig::recent_steps of each, older
  // steps being min/max buckets that no sum of squares can be taken of; a series combined live
  // from further back is kept and extended.
  const SeriesHistory* job_grad_norm() const { return job_grad_norm_.series(); }
  int32_t job_world_size() const { return job_grad_norm_.world_size(); }
  // The same job's per-layer metrics (JobLayerValues, combined as combine_job_layers says):
  // each metric at each step at which every rank's current run holds it per layer (not a step
  // sent as module rollups), its ranks having as many layers, under the same names. Empty
  // (layer_count() 0) until such a step; from recordings as job_grad_norm().
  const JobLayerValues& job_layer_values() const { return job_layer_values_; }

  // Failures inside the probe (StepRecord::probe_errors) summed over the current runs with
  // this run_id (its ranks, and its models when one process runs several probes).
  uint64_t probe_errors(const std::string& run_id) const;

  // Command acknowledgements, newest first, at most ModelConfig::max_acks.
  const std::deque<wire::Ack>& acks() const { return acks_; }
  const ModelCounters& counters() const { return counters_; }
  // Increments on every ingest() that changed something: a view may cache what it built
  // from the model while the revision stays the same.
  uint64_t revision() const { return revision_; }

  const ModelConfig& config() const { return config_; }
  size_t bytes_used() const;

 private:
  // The run a description is of, found or started; it becomes its rank's current run.
  RunModel& run_described(const wire::RunDescription& description);
  // The held run (segment) a description belongs to, or nullptr.
  RunModel* lookup(const wire::RunDescription& description) const;
  // Whether the description is of this run's start (same identity and start_unix_ms).
  static bool same_start(const RunModel& run, const wire::RunDescription& description);
  // The run of a step record or event: by identity, or by rank when its run_id is "".
  RunModel& run_for(const wire::RunKey& key);
  RunModel& start_run(const wire::RunKey& key);
  void evict_if_needed();
  // Stores the job's grad norm at `step` once every rank of `run`'s sharded job has it.
  void combine_job_grad_norm(const RunModel& run, int64_t step);
  // After adopt_runs: the job's grad norm again from its ranks' current runs, over the steps
  // each holds exactly; a series held that already reaches as far back is extended instead.
  void recombine_job_grad_norm();
  // Why `message` is beyond sane limits, or "" when it is not.
  std::string insane(const wire::Message& message) const;

  ModelConfig config_;
  std::vector<std::unique_ptr<RunModel>> runs_;
  // rank -> its current run: the one its last description was of, where messages that do not
  // name their run go.
  std::map<int32_t, RunModel*> current_;
  std::map<std::string, int32_t> world_sizes_;  // run_id -> the world_size its description gave
  std::map<wire::RunKey, RunModel*> live_;      // identity -> its newest run, where its messages go
  std::deque<wire::Ack> acks_;
  JobGradNorm job_grad_norm_;
  JobLayerValues job_layer_values_;
  // Scratch of the combination, reused every step.
  std::vector<const RunModel*> job_runs_;
  JobLayerStep job_step_;
  ModelCounters counters_;
  uint64_t revision_ = 0;
};

}  // namespace keel::app
