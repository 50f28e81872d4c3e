#include "training_thread_bench.hpp"

#include <algorithm>
#include <memory>

#include "keel/probe/probe.hpp"
#include "median.hpp"
#include "trainer.hpp"

namespace keel::bench {
namespace {

struct Configuration {
  std::string name;
  probe::ProbeOptions options;
  bool watch_logits = false;
};

std::vector<Configuration> configurations() {
  probe::ProbeOptions quiet;
  quiet.dump_on_nonfinite = false;   // nothing here blows up; no dump directory is made
  quiet.record_dir = "";
  std::vector<Configuration> out;
  Configuration none{"no telemetry", quiet};
  out.push_back(none);
  Configuration publishing{"+ publisher", quiet};
  publishing.options.endpoint = "tcp://127.0.0.1:*";
  publishing.options.accept_commands = false;
  publishing.options.history_steps = 0;
  out.push_back(publishing);
  Configuration defaults{"+ command socket and history ring", quiet};
  defaults.options.endpoint = "tcp://127.0.0.1:*";
  out.push_back(defaults);
  Configuration watched = defaults;
  watched.name = "+ watch(logits) (keel-demo's loop)";
  watched.watch_logits = true;
  out.push_back(watched);
  // The defaults: the flight recorder too (its writes are on its own thread).
  Configuration recorded = watched;
  recorded.name = "+ flight recorder";
  recorded.options.record_dir = "keel-bench-runs";
  out.push_back(recorded);
  return out;
}

}  // namespace

std::vector<TrainingThreadCost> measure_training_thread(int rounds) {
  const std::vector<Configuration> configs = configurations();
  demo::TrainerConfig trainer_config;
  demo::Faults no_faults;
  std::vector<std::unique_ptr<demo::Trainer>> trainers;
  std::vector<std::unique_ptr<probe::Probe>> probes;
  for (const Configuration& c : configs) {
    trainers.push_back(std::make_unique<demo::Trainer>(trainer_config));
    probes.push_back(std::make_unique<probe::Probe>(*trainers.back()->model(), trainers.back()->optimizer(), c.options));
  }
  const int warmup = 5;
  std::vector<std::vector<double>> outside(configs.size()), reduce(configs.size());
  for (int round = 0; round < warmup + rounds; ++round) {
    for (size_t k = 0; k < configs.size(); ++k) {
      const size_t i = (static_cast<size_t>(round) + k) % configs.size();   // no configuration always first
      demo::Trainer& trainer = *trainers[i];
      probe::Probe& probe = *probes[i];
      trainer.schedule(round, no_faults);
      const auto loss = trainer.forward_backward(
          [&](const torch::Tensor& logits) {
            if (configs[i].watch_logits) probe.watch("logits", logits);
          },
          nullptr);
      probe.step(loss);
      if (round < warmup) continue;
      outside[i].push_back(probe.last_timing().probe_us - probe.last_timing().reduce_us);
      reduce[i].push_back(probe.last_timing().reduce_us);
    }
  }
  std::vector<TrainingThreadCost> out;
  for (size_t i = 0; i < configs.size(); ++i) {
    out.push_back(TrainingThreadCost{configs[i].name, median(outside[i]), median(reduce[i])});
  }
  return out;
}

}  // namespace keel::bench
