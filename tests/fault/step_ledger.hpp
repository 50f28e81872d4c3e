// StepLedger: what the fault harness knows about one trainer's steps, gathered from the
// JSON lines that keel-cli tail and keel-cli history print.
//
// What it is for: a fault test reads every client's output after the run and asks three
// questions of it: did any step go missing without being counted (coverage), how long did
// steps take inside a time window (A/B step time), and did the trainer ever stall. One
// ledger per question's source: a ledger of what the clients received answers the first, a
// ledger of the probe's history ring answers the other two.
// Threads: one owner thread. Never: throws on a malformed or truncated line (a client killed
// with SIGKILL leaves half a line behind); such lines are skipped and counted.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace keel::fault {

struct StepSeen {
  int64_t step = 0;
  uint64_t seq = 0;
  double step_time_us = 0;
  double probe_us = 0;
  uint64_t dropped = 0;   // the probe's cumulative count of records it could not publish
  int64_t stamp_unix_ns = 0;
};

// Median and 99th percentile (nearest rank) of a sample; zeros when it is empty.
struct Percentiles {
  size_t count = 0;
  double median = 0;
  double p99 = 0;
};
Percentiles percentiles(std::vector<double> values);

class StepLedger {
 public:
  // Adds every `step` line of a file of JSON lines; returns how many it added.
  size_t add_json_lines_file(const std::string& path);
  size_t add_json_lines(const std::string& text);
  void add(const StepSeen& step);

  bool empty() const { return steps_.empty(); }
  size_t size() const { return steps_.size(); }
  int64_t first_step() const;
  int64_t last_step() const;
  size_t skipped_lines() const { return skipped_lines_; }
  bool has(int64_t step) const { return steps_.count(step) > 0; }
  // The largest cumulative `dropped` any record carried.
  uint64_t max_dropped() const;

  // Steps in [first, last] that this ledger lacks.
  std::vector<int64_t> missing(int64_t first, int64_t last) const;

  // step_time_us and probe_us of the steps stamped within [begin_ns, end_ns).
  Percentiles step_time_us(int64_t begin_ns, int64_t end_ns) const;
  Percentiles probe_us(int64_t begin_ns, int64_t end_ns) const;
  // The longest time between two consecutive steps stamped at or after `begin_ns`, in
  // seconds (a stalled trainer; the first steps, which warm libtorch up, can be left out).
  double longest_gap_secs(int64_t begin_ns = 0) const;
  // The newest step stamped before `unix_ns`, or -1.
  int64_t step_before(int64_t unix_ns) const;

  const std::map<int64_t, StepSeen>& steps() const { return steps_; }

 private:
  std::map<int64_t, StepSeen> steps_;
  size_t skipped_lines_ = 0;
};

// The union of several ledgers (e.g. each client's live stream plus a backfill).
StepLedger merged(const std::vector<const StepLedger*>& ledgers);

}  // namespace keel::fault
