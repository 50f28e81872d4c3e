// Model: the dashboard's data, keyed by (run_id, rank), fed one decoded message at a time.
//
// What it is for: the single owner of all runs the app has seen. ingest() routes each message
// to the run its rank is streaming now:
//   - a RunDescription with a run_id new to that rank starts a new run (the old run keeps its
//     history and stays listed); the same run_id again just refreshes names and watches,
//     unless its start_unix_ms differs: the job was started again under the same run_id
//     (resumed from a checkpoint, counting from its step there), and that start is a new
//     segment of the run, a RunModel of its own (RunModel::segment()), rather than records
//     that all read as duplicates of the earlier start's steps;
//   - step records and events go to the rank's current run; if none exists yet (the app
//     attached mid-run and the periodic description has not come), a run with an empty run_id
//     is started and adopts the run_id of the first description that arrives;
//   - acks go to a bounded list (newest first) for the controls pane; commands are counted
//     and ignored (they are what a client sends, not telemetry).
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
#include "model/model_config.hpp"
#include "model/run_model.hpp"

namespace keel::app {

struct ModelCounters {
  uint64_t messages = 0;       // every message given to ingest()
  uint64_t decode_errors = 0;  // note_decode_error() calls: bytes the net layer could not decode
  uint64_t runs_evicted = 0;   // runs dropped to stay within max_runs
};

class Model {
 public:
  explicit Model(const ModelConfig& config = ModelConfig{});

  // Stores one decoded message. Returns whether anything a view shows changed.
  bool ingest(const wire::Message& message);
  // The net layer received bytes it could not decode; counted for the status bar.
  void note_decode_error() { ++counters_.decode_errors; }

  // Runs in the order they started, oldest first.
  size_t run_count() const { return runs_.size(); }
  const RunModel& run(size_t index) const { return *runs_[index]; }
  // The run with this identity (its newest segment), or nullptr.
  const RunModel* find_run(const std::string& run_id, int32_t rank) const;
  // The run a rank is streaming now (its newest), or nullptr if that rank never sent anything.
  const RunModel* current_run(int32_t rank) const;
  // Ranks that have sent telemetry, ascending.
  std::vector<int32_t> ranks() const;
  // Failures inside the probe (StepRecord::probe_errors) summed over the ranks streaming a run.
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
  // The held run (segment) a description belongs to, or nullptr.
  RunModel* lookup(const wire::RunDescription& description) const;
  // Whether the description is of this run's start (same run_id, rank and start_unix_ms).
  static bool same_start(const RunModel& run, const wire::RunDescription& description);
  RunModel& run_for(int32_t rank);
  RunModel& start_run(const std::string& run_id, int32_t rank);
  void evict_if_needed();

  ModelConfig config_;
  std::vector<std::unique_ptr<RunModel>> runs_;
  std::map<int32_t, RunModel*> current_;  // rank -> run its messages go to
  std::deque<wire::Ack> acks_;
  ModelCounters counters_;
  uint64_t revision_ = 0;
};

}  // namespace keel::app
