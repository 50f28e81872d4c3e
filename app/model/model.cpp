// Model: routing decoded messages to runs by (run_id, rank), and keeping the run count bounded.
#include "model/model.hpp"

#include <algorithm>
#include <type_traits>
#include <variant>

namespace keel::app {

Model::Model(const ModelConfig& config) : config_(config) {
  config_.max_runs = std::max<size_t>(config_.max_runs, 1);
}

bool Model::ingest(const wire::Message& message) {
  ++counters_.messages;
  const bool changed = std::visit(
      [this](const auto& m) -> bool {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, wire::RunDescription>) {
          RunModel* target = nullptr;
          const auto current = current_.find(m.rank);
          if (current != current_.end()) {
            RunModel* run = current->second;
            // A run started from records alone waits for its description to learn its id.
            if (same_start(*run, m) || (run->run_id().empty() && !run->described())) target = run;
          }
          if (target == nullptr) target = lookup(m);
          if (target == nullptr) target = &start_run(m.run_id, m.rank);
          current_[m.rank] = target;
          // Of a start the run knows (the same start_unix_ms): an earlier description again, in
          // a history reply that spans a change of layers, not a restart.
          const bool known_start = target->described() && m.start_unix_ms != 0 &&
                                   target->description().start_unix_ms == m.start_unix_ms;
          target->note_seq(m.seq, /*may_restart=*/!known_start);
          return target->describe(m);
        } else if constexpr (std::is_same_v<T, wire::StepRecord>) {
          RunModel& run = run_for(m.rank);
          run.note_seq(m.seq, false);
          run.add_step(m);
          return true;  // stored, or counted as a duplicate: either way the counters changed
        } else if constexpr (std::is_same_v<T, wire::Event>) {
          RunModel& run = run_for(m.rank);
          run.note_seq(m.seq, false);
          return run.add_event(m);
        } else if constexpr (std::is_same_v<T, wire::Ack>) {
          acks_.push_front(m);
          while (acks_.size() > std::max<size_t>(config_.max_acks, 1)) acks_.pop_back();
          return true;
        } else {
          return false;  // a Command: what clients send, not telemetry
        }
      },
      message);
  if (changed) ++revision_;
  return changed;
}

RunModel& Model::run_for(int32_t rank) {
  const auto current = current_.find(rank);
  if (current != current_.end()) return *current->second;
  RunModel& run = start_run(std::string(), rank);
  current_[rank] = &run;
  return run;
}

RunModel& Model::start_run(const std::string& run_id, int32_t rank) {
  evict_if_needed();
  // An earlier start of the same run_id on this rank, still held: this is its next segment.
  int segment = 1;
  if (!run_id.empty()) {
    for (const auto& run : runs_) {
      if (run->rank() == rank && run->run_id() == run_id) segment = std::max(segment, run->segment() + 1);
    }
  }
  runs_.push_back(std::make_unique<RunModel>(run_id, rank, config_, segment));
  return *runs_.back();
}

bool Model::same_start(const RunModel& run, const wire::RunDescription& description) {
  if (run.rank() != description.rank || run.run_id() != description.run_id) return false;
  // A start of 0 is unknown (a hand-built description): it never starts a segment.
  const int64_t known = run.described() ? run.description().start_unix_ms : 0;
  return known == 0 || description.start_unix_ms == 0 || known == description.start_unix_ms;
}

void Model::evict_if_needed() {
  while (runs_.size() >= config_.max_runs) {
    // Oldest first; a run some rank is still streaming is never dropped.
    const auto victim = std::find_if(runs_.begin(), runs_.end(), [this](const auto& run) {
      return std::none_of(current_.begin(), current_.end(),
                          [&](const auto& entry) { return entry.second == run.get(); });
    });
    if (victim == runs_.end()) return;
    runs_.erase(victim);
    ++counters_.runs_evicted;
  }
}

RunModel* Model::lookup(const wire::RunDescription& description) const {
  for (const auto& run : runs_) {
    if (same_start(*run, description)) return run.get();
  }
  return nullptr;
}

const RunModel* Model::find_run(const std::string& run_id, int32_t rank) const {
  // Newest first: the latest segment of a run_id started again.
  for (auto run = runs_.rbegin(); run != runs_.rend(); ++run) {
    if ((*run)->rank() == rank && (*run)->run_id() == run_id) return run->get();
  }
  return nullptr;
}

const RunModel* Model::current_run(int32_t rank) const {
  const auto current = current_.find(rank);
  return current != current_.end() ? current->second : nullptr;
}

std::vector<int32_t> Model::ranks() const {
  std::vector<int32_t> out;
  out.reserve(current_.size());
  for (const auto& entry : current_) out.push_back(entry.first);
  return out;
}

uint64_t Model::probe_errors(const std::string& run_id) const {
  // The ranks' current runs: an earlier segment's count ended with its process.
  uint64_t total = 0;
  for (const auto& [rank, run] : current_) {
    if (run->run_id() == run_id) total += run->counters().probe_errors;
  }
  return total;
}

size_t Model::bytes_used() const {
  size_t bytes = sizeof(Model);
  for (const auto& run : runs_) bytes += run->bytes_used();
  for (const wire::Ack& ack : acks_) {
    bytes += sizeof(ack) + ack.error.capacity() + ack.path.capacity();
  }
  return bytes;
}

}  // namespace keel::app
