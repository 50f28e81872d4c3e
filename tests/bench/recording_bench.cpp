#include "recording_bench.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <vector>

#include "keel/probe/probe.hpp"
#include "median.hpp"
#include "naive_checks.hpp"
#include "trainer.hpp"

namespace keel::bench {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

RecordingCost measure_recording_cost(int rounds, const std::string& scratch_dir) {
  probe::ProbeOptions off;
  off.endpoint = "tcp://127.0.0.1:*";
  off.dump_on_nonfinite = false;   // nothing here blows up; no dump directory is made
  off.record_dir = "";
  probe::ProbeOptions on = off;
  on.record_dir = scratch_dir;
  probe::ProbeOptions rounded_options = on;
  rounded_options.record_mantissa_bits = kRoundedMantissaBits;
  std::filesystem::create_directories(scratch_dir);

  demo::TrainerConfig config;
  demo::Faults no_faults;
  demo::Trainer trainer_on(config), trainer_off(config), trainer_rounded(config);
  RecordingCost cost;
  std::string path, rounded_path;
  std::vector<double> step_on, step_off, probe_on, probe_off;
  {
    probe::Probe recording(*trainer_on.model(), trainer_on.optimizer(), on);
    probe::Probe plain(*trainer_off.model(), trainer_off.optimizer(), off);
    // The same run recorded with rounded values, for its bytes only: it steps after each
    // round, untimed (the same seed, so the same values as the exact recording's).
    probe::Probe rounding(*trainer_rounded.model(), trainer_rounded.optimizer(), rounded_options);
    path = recording.recording_path();
    rounded_path = rounding.recording_path();
    cost.layers = static_cast<int64_t>(recording.description().layers.size());
    const int warmup = 5;
    for (int round = 0; round < warmup + rounds; ++round) {
      for (int k = 0; k < 2; ++k) {
        const bool recorded = (round + k) % 2 == 0;   // no configuration always first
        demo::Trainer& trainer = recorded ? trainer_on : trainer_off;
        probe::Probe& probe = recorded ? recording : plain;
        const auto start = Clock::now();
        trainer.schedule(round, no_faults);
        auto loss = trainer.forward_backward([&](const torch::Tensor& logits) { probe.watch("logits", logits); },
                                             nullptr);
        probe.step(loss);
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        if (round < warmup) continue;
        (recorded ? step_on : step_off).push_back(ms);
        (recorded ? probe_on : probe_off).push_back(probe.last_timing().probe_us);
      }
      trainer_rounded.schedule(round, no_faults);
      auto loss = trainer_rounded.forward_backward(
          [&](const torch::Tensor& logits) { rounding.watch("logits", logits); }, nullptr);
      rounding.step(loss);
    }
    cost.steps = warmup + rounds;
    cost.dropped = recording.last_record().record_dropped;
  }
  cost.step_on_ms = median(step_on);
  cost.step_off_ms = median(step_off);
  cost.step_pct = 100.0 * (cost.step_on_ms - cost.step_off_ms) / cost.step_off_ms;
  cost.probe_on_us = median(probe_on);
  cost.probe_off_us = median(probe_off);
  cost.training_thread_pct = 100.0 * (cost.probe_on_us - cost.probe_off_us) / 1000.0 / cost.step_off_ms;
  std::error_code ec;
  cost.file_bytes = path.empty() ? 0 : std::filesystem::file_size(path, ec);
  const double layer_steps = static_cast<double>(cost.steps) * static_cast<double>(cost.layers);
  cost.bytes_per_layer_step = layer_steps > 0 ? static_cast<double>(cost.file_bytes) / layer_steps : 0;
  cost.bytes_per_sample = cost.bytes_per_layer_step / 6.0;
  cost.rounded_mantissa_bits = kRoundedMantissaBits;
  cost.rounded_file_bytes = rounded_path.empty() ? 0 : std::filesystem::file_size(rounded_path, ec);
  cost.rounded_bytes_per_layer_step =
      layer_steps > 0 ? static_cast<double>(cost.rounded_file_bytes) / layer_steps : 0;
  if (!path.empty()) std::filesystem::remove(path, ec);
  if (!rounded_path.empty()) std::filesystem::remove(rounded_path, ec);
  return cost;
}

}  // namespace keel::bench
