// CheckpointWriter: writes a dump (checkpoint directory) to disk on a thread of its own.
//
// What it is for: the training thread captures the state to dump into memory at a step
// boundary (checkpoint_capture.hpp) and hands the bytes here, so the disk never sets the pace
// of training. A dump is a directory `<dump dir>/<name>/` holding the files of the job. It is
// written as `<dump dir>/.<name>.partial-<pid>-<n>/` (n counts this process's writes), every
// file fsync'ed, then renamed to its final name (and the dump dir fsync'ed): a directory under
// a final name is always complete; a crash or a full disk leaves at most a hidden `.partial`
// directory (removed on a write error). A dump that would leave less than the job's
// min_free_bytes free is not started.
// A name already taken gets `-2`, `-3`, ...; the rename takes it only where it is free
// (RENAME_NOREPLACE), so processes sharing the dump directory never collide.
// Threads: submit() and poll() from the training thread; `on_written` runs on the writer
// thread. Never: throws from submit() or poll(); takes a path from a client (the directory
// is the probe's configured one, the name is built by the probe from sanitised parts).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace keel::probe {

struct CheckpointFile {
  std::string name;     // file name inside the dump directory, no slashes
  std::string bytes;
};

struct CheckpointResult {
  uint64_t token = 0;
  int64_t step = 0;
  bool ok = false;
  // The final directory (ok) or the one it would have had, always absolute (absolute_dir):
  // the ack and the dump event are read by a client in another directory or on another host.
  std::string path;
  int64_t bytes = 0;    // sum of the files' sizes
  std::string error;    // why it failed, a sentence
  double write_secs = 0;
};

struct CheckpointJob {
  uint64_t token = 0;   // the caller's handle, echoed in the result
  int64_t step = 0;
  std::string dir;      // the configured dump directory (created if missing)
  std::string name;     // directory name: [A-Za-z0-9._-] only, see sanitize_label
  std::vector<CheckpointFile> files;
  // Not written (an error instead) when it would leave less than this many bytes free on the
  // dump directory's filesystem: a dump must not take the disk the job itself writes to.
  int64_t min_free_bytes = 0;
  // Called on the writer thread once the job is done (or failed), before poll() sees it.
  std::function<void(const CheckpointResult&)> on_written;
};

// Writes `job` now, on the calling thread. Used by the writer thread and by the benchmark.
CheckpointResult write_checkpoint(const CheckpointJob& job);

// `dir` as an absolute path without "." or ".." parts, against the working directory at the
// time of the call; `dir` unchanged when that cannot be read (it was deleted). write_checkpoint
// writes into absolute_dir(job.dir), so a trainer that changes directory later still dumps
// where it reports.
std::string absolute_dir(const std::string& dir);

// A label usable inside a file name: letters, digits, '.', '_' and '-' kept, anything else
// becomes '_', leading dots dropped (no hidden or "..") and at most 64 characters.
std::string sanitize_label(const std::string& label);

class CheckpointWriter {
 public:
  CheckpointWriter();
  // Finishes the dumps in flight: the user asked for them and the bytes are already in memory.
  ~CheckpointWriter();
  // The same, without destroying: the queued and running jobs are written and the thread
  // ends; their results are still there for poll(). submit() refuses after it.
  void finish();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // How many jobs a submission may find ahead of it. The writer never holds more than two,
  // which bounds the memory a burst of dump requests can take: a dump asked for by a command
  // waits for none, and the automatic dump at a blow-up's first step may wait behind one (the
  // state before the blow-up is what keel exists to keep; a command dump still being written
  // must not cost it).
  enum class Admission { kWhenIdle, kBehindOne };

  // Whether submit(job, admission) would queue a job now (the caller skips capturing one
  // that would be refused).
  bool accepts(Admission admission) const;
  // Queues the job; false (and nothing queued) when more jobs are ahead than `admission`
  // allows, or after finish().
  bool submit(CheckpointJob job, Admission admission = Admission::kWhenIdle);
  // Moves finished results into `out` (cleared first); false when none.
  bool poll(std::vector<CheckpointResult>& out);

 private:
  void run();
  bool accepts_locked(Admission admission) const;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<CheckpointJob> queue_;   // waiting, oldest first; not the one being written
  bool writing_ = false;
  bool stop_ = false;
  std::deque<CheckpointResult> done_;
  std::thread thread_;
};

}  // namespace keel::probe
