// Model: routing decoded messages to runs by (run_id, model, rank), and keeping the run count
// bounded.
#include "model/model.hpp"

#include <algorithm>
#include <limits>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "model/job_layer_combine.hpp"

namespace keel::app {

Model::Model(const ModelConfig& config) : config_(config), job_grad_norm_(config), job_layer_values_(config) {
  config_.max_runs = std::max<size_t>(config_.max_runs, 1);
}

std::string Model::insane(const wire::Message& message) const {
  return std::visit(
      [this](const auto& m) -> std::string {
        using T = std::decay_t<decltype(m)>;
        constexpr bool described = std::is_same_v<T, wire::RunDescription>;
        constexpr bool recorded = std::is_same_v<T, wire::StepRecord>;
        if constexpr (described || recorded || std::is_same_v<T, wire::Event>) {
          const std::string& run_id = [&]() -> const std::string& {
            if constexpr (described) {
              return m.run_id;
            } else {
              return m.run;
            }
          }();
          // Built only for a refusal: every message passes here.
          const auto of = [&] {
            return std::string(described ? "description" : recorded ? "step record" : "event") + " of run " +
                   (run_id.empty() ? std::string("(unnamed)") : run_id);
          };
          if (m.rank < 0 || m.rank >= config_.max_ranks) {
            return of() + ": rank " + std::to_string(m.rank) + " is outside 0 to " + std::to_string(config_.max_ranks - 1);
          }
          size_t layers = 0;
          if constexpr (described) layers = m.layers.size();
          if constexpr (recorded) layers = m.layer_count;
          if (layers > config_.max_layers) {
            return of() + ": " + std::to_string(layers) + " layers, more than the " + std::to_string(config_.max_layers) +
                   " the dashboard takes";
          }
          int32_t world_size = 0;
          if constexpr (described) {
            world_size = m.world_size;
          } else {
            const auto world = world_sizes_.find(run_id);
            if (run_id.empty() || world == world_sizes_.end()) return "";
            world_size = world->second;
          }
          if (m.rank >= world_size) {
            return of() + ": rank " + std::to_string(m.rank) + " of a world of " + std::to_string(world_size);
          }
        }
        return "";
      },
      message);
}

bool Model::ingest(const wire::Message& message) {
  ++counters_.messages;
  if (std::string why = insane(message); !why.empty()) {
    ++counters_.refused_insane;
    counters_.last_refusal = std::move(why);
    ++revision_;
    return true;
  }
  if (const auto* description = std::get_if<wire::RunDescription>(&message)) {
    // Bounded: a publisher inventing run_ids must not grow it without end.
    if (world_sizes_.size() >= 4096 && world_sizes_.count(description->run_id) == 0) world_sizes_.erase(world_sizes_.begin());
    world_sizes_[description->run_id] = description->world_size;
  }
  const bool changed = std::visit(
      [this](const auto& m) -> bool {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, wire::RunDescription>) {
          RunModel& run = run_described(m);
          // Of a start the run knows (the same start_unix_ms): an earlier description again, in
          // a history reply that spans a change of layers, not a restart.
          const bool known_start = run.described() && m.start_unix_ms != 0 &&
                                   run.description().start_unix_ms == m.start_unix_ms;
          run.note_seq(m.seq, /*may_restart=*/!known_start);
          return run.describe(m);
        } else if constexpr (std::is_same_v<T, wire::StepRecord>) {
          RunModel& run = run_for(wire::run_key_of(m));
          run.note_seq(m.seq, false);
          const uint64_t refused = run.counters().refused_records;
          const uint64_t refused_rollups = run.counters().refused_rollups;
          if (run.add_step(m)) combine_job_grad_norm(run, m.step);
          counters_.refused_records += run.counters().refused_records - refused;
          counters_.refused_rollups += run.counters().refused_rollups - refused_rollups;
          return true;  // stored, or counted as a duplicate or refused: the counters changed
        } else if constexpr (std::is_same_v<T, wire::Event>) {
          RunModel& run = run_for(wire::run_key_of(m));
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

size_t Model::adopt_runs(Model&& staged) {
  size_t adopted = 0;
  for (std::unique_ptr<RunModel>& incoming : staged.runs_) {
    RunModel* held = nullptr;
    for (const auto& run : runs_) {
      const bool same = incoming->described() ? same_start(*run, incoming->description())
                                              : run->key() == incoming->key();
      if (same) held = run.get();
    }
    if (held != nullptr) {
      const bool earlier = incoming->has_steps() && (!held->has_steps() || incoming->first_step() < held->first_step());
      if (!earlier && incoming->counters().steps_stored < held->counters().steps_stored) continue;
      incoming->set_segment(held->segment());
      for (auto& entry : current_) {
        if (entry.second == held) entry.second = incoming.get();
      }
      for (auto& entry : live_) {
        if (entry.second == held) entry.second = incoming.get();
      }
      for (auto& run : runs_) {
        if (run.get() == held) run = std::move(incoming);
      }
    } else {
      evict_if_needed();
      int segment = 1;
      for (const auto& run : runs_) {
        if (run->key() == incoming->key()) segment = std::max(segment, run->segment() + 1);
      }
      incoming->set_segment(segment);
      RunModel* added = incoming.get();
      runs_.push_back(std::move(incoming));
      live_.try_emplace(added->key(), added);
      current_.try_emplace(added->rank(), added);
    }
    ++adopted;
  }
  staged.runs_.clear();
  staged.current_.clear();
  staged.live_.clear();
  if (adopted > 0) {
    recombine_job_grad_norm();
    ++revision_;
  }
  return adopted;
}

RunModel& Model::run_described(const wire::RunDescription& description) {
  const wire::RunKey key = wire::run_key_of(description);
  RunModel* target = nullptr;
  const auto live = live_.find(key);
  if (live != live_.end() && same_start(*live->second, description)) target = live->second;
  const auto current = current_.find(description.rank);
  if (target == nullptr && current != current_.end()) {
    // A run started from records that did not name it waits for a description to learn it.
    RunModel* run = current->second;
    if (run->run_id().empty() && !run->described()) target = run;
  }
  if (target == nullptr) target = lookup(description);
  if (target == nullptr) target = &start_run(key);
  current_[description.rank] = target;
  live_[key] = target;
  return *target;
}

RunModel& Model::run_for(const wire::RunKey& key) {
  if (key.run_id.empty()) {
    // From a probe older than the `run` key: its rank is all that tells its run.
    const auto current = current_.find(key.rank);
    if (current != current_.end()) return *current->second;
    RunModel& run = start_run(key);
    current_[key.rank] = &run;
    return run;
  }
  const auto live = live_.find(key);
  if (live != live_.end()) return *live->second;
  RunModel& run = start_run(key);
  live_[key] = &run;
  // A rank heard from only through records still has a current run for the views.
  current_.try_emplace(key.rank, &run);
  return run;
}

RunModel& Model::start_run(const wire::RunKey& key) {
  evict_if_needed();
  // An earlier start of the same identity, still held: this is its next segment.
  int segment = 1;
  if (!key.run_id.empty()) {
    for (const auto& run : runs_) {
      if (run->key() == key) segment = std::max(segment, run->segment() + 1);
    }
  }
  runs_.push_back(std::make_unique<RunModel>(key, config_, segment));
  return *runs_.back();
}

bool Model::same_start(const RunModel& run, const wire::RunDescription& description) {
  if (!(run.key() == wire::run_key_of(description))) return false;
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
    // Its identity's next message starts a run afresh rather than reaching a dropped one.
    const auto live = live_.find((*victim)->key());
    if (live != live_.end() && live->second == victim->get()) live_.erase(live);
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

const RunModel* Model::find_run(const wire::RunKey& key) const {
  const auto live = live_.find(key);
  return live != live_.end() ? live->second : nullptr;
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

std::vector<const RunModel*> Model::current_runs() const {
  std::vector<const RunModel*> out;
  for (const auto& held : runs_) {
    const RunModel* run = held.get();
    const auto live = live_.find(run->key());
    const auto current = current_.find(run->rank());
    if ((live != live_.end() && live->second == run) ||
        (current != current_.end() && current->second == run)) {
      out.push_back(run);
    }
  }
  return out;
}

std::vector<int32_t> Model::ranks() const {
  std::vector<int32_t> out;
  out.reserve(current_.size());
  for (const auto& entry : current_) out.push_back(entry.first);
  return out;
}

uint64_t Model::probe_errors(const std::string& run_id) const {
  // The current runs: an earlier segment's count ended with its process.
  uint64_t total = 0;
  for (const RunModel* run : current_runs()) {
    if (run->run_id() == run_id) total += run->counters().probe_errors;
  }
  return total;
}

void Model::combine_job_grad_norm(const RunModel& run, int64_t step) {
  if (!run.described() || !run.description().sharded || current_run(run.rank()) != &run) return;
  const int32_t world_size = run.description().world_size;
  double sumsq = 0;
  job_runs_.clear();
  for (int32_t rank = 0; rank < world_size; ++rank) {
    const RunModel* shard = current_run(rank);
    float norm = 0;
    if (shard == nullptr || !shard->described() || !shard->description().sharded ||
        shard->description().world_size != world_size ||
        !shard->global_series(GlobalSeries::kGradNorm).value_at(step, &norm)) {
      return;   // a rank has not sent this step yet: its record, when it comes, completes it
    }
    sumsq += double(norm) * double(norm);
    job_runs_.push_back(shard);
  }
  job_grad_norm_.store(world_size, step, sumsq);
  if (combine_job_layers(job_runs_, step, job_step_)) {
    job_layer_values_.store(world_size, step, job_runs_.front()->layer_count(), job_step_);
  }
}

void Model::recombine_job_grad_norm() {
  int32_t world_size = 0;
  for (const auto& entry : current_) {
    const RunModel& run = *entry.second;
    if (run.described() && run.description().sharded) world_size = run.description().world_size;
  }
  if (world_size < 1) return;
  // Each rank's shard norms, and the steps all of them hold raw (their recent windows).
  std::vector<const SeriesHistory*> shards;
  std::vector<const RunModel*> runs;
  int64_t first = std::numeric_limits<int64_t>::min();
  int64_t last = std::numeric_limits<int64_t>::max();
  for (int32_t rank = 0; rank < world_size; ++rank) {
    const RunModel* shard = current_run(rank);
    if (shard == nullptr || !shard->described() || !shard->description().sharded ||
        shard->description().world_size != world_size) {
      return;
    }
    const SeriesHistory& norms = shard->global_series(GlobalSeries::kGradNorm);
    if (norms.empty()) return;
    shards.push_back(&norms);
    runs.push_back(shard);
    first = std::max(first, norms.recent_first_step());
    last = std::min(last, norms.last_step());
  }
  if (first > last) return;
  // A series combined live from an earlier step already (a live job given back its history by
  // its recording) is kept, as its older steps could not be combined again, and extended past
  // its last step (the recordings may hold steps the dashboard did not hear live).
  const SeriesHistory* held = job_grad_norm_.series();
  const bool extend = held != nullptr && job_grad_norm_.world_size() == world_size && held->origin_step() <= first;
  JobGradNorm combined(config_);
  JobGradNorm& into = extend ? job_grad_norm_ : combined;
  for (int64_t step = extend ? std::max(first, held->last_step() + 1) : first; step <= last; ++step) {
    double sumsq = 0;
    bool every_rank = true;
    for (const SeriesHistory* norms : shards) {
      float norm = 0;
      every_rank = every_rank && norms->value_at(step, &norm);
      sumsq += double(norm) * double(norm);
    }
    if (every_rank) into.store(world_size, step, sumsq);
  }
  if (!extend && combined.series() != nullptr) job_grad_norm_ = std::move(combined);
  // The layers likewise, over the steps their series hold raw (a wide model's layers keep
  // fewer than its global series: value_at finds the others in no window).
  const bool extend_layers = job_layer_values_.layer_count() > 0 && job_layer_values_.world_size() == world_size &&
                             job_layer_values_.origin_step() <= first;
  JobLayerValues combined_layers(config_);
  JobLayerValues& layers_into = extend_layers ? job_layer_values_ : combined_layers;
  for (int64_t step = extend_layers ? std::max(first, job_layer_values_.last_step() + 1) : first; step <= last; ++step) {
    if (combine_job_layers(runs, step, job_step_)) layers_into.store(world_size, step, runs.front()->layer_count(), job_step_);
  }
  if (!extend_layers && combined_layers.layer_count() > 0) job_layer_values_ = std::move(combined_layers);
}

size_t Model::bytes_used() const {
  size_t bytes = sizeof(Model) - sizeof(job_grad_norm_) + job_grad_norm_.bytes_used() - sizeof(job_layer_values_) +
                 job_layer_values_.bytes_used() + job_runs_.capacity() * sizeof(const RunModel*);
  for (const std::vector<float>& values : job_step_.values) bytes += values.capacity() * sizeof(float);
  for (const auto& run : runs_) bytes += run->bytes_used();
  for (const wire::Ack& ack : acks_) {
    bytes += sizeof(ack) + ack.error.capacity() + ack.path.capacity();
  }
  return bytes;
}

}  // namespace keel::app
