#include "warning_corpus.hpp"

#include <chrono>
#include <cmath>

#include "forecast/forecaster.hpp"
#include "keel/probe/probe.hpp"
#include "keel/wire/vocabulary.hpp"
#include "snapshot/divergence_rule.hpp"

namespace keel::bench {
namespace {

using Clock = std::chrono::steady_clock;

// keel-demo's model made small (a step in milliseconds on a CPU), so that the corpus is
// tens of thousands of steps in minutes.
demo::TrainerConfig small_model(uint64_t seed, double lr, int64_t warmup) {
  demo::TrainerConfig config;
  config.seed = seed;
  config.lr = lr;
  config.warmup_steps = warmup;
  config.model.width = 48;
  config.model.layers = 2;
  config.model.context = 32;
  return config;
}

CorpusRun healthy(uint64_t seed, double lr, int64_t warmup, int64_t steps) {
  CorpusRun run{"healthy", seed, small_model(seed, lr, warmup), {}, steps, steps};
  return run;
}

CorpusRun lr_drift(uint64_t seed, int64_t from, double rate) {
  CorpusRun run{"lr_drift", seed, small_model(seed, 3e-3, 100), {}, 1200, from};
  run.faults.lr_drift_step = from;
  run.faults.lr_drift_rate = rate;
  return run;
}

CorpusRun batch_drift(uint64_t seed, int64_t from, double rate) {
  CorpusRun run{"batch_drift", seed, small_model(seed, 3e-3, 100), {}, 1000, from};
  run.faults.batch_drift_step = from;
  run.faults.batch_drift_rate = rate;
  return run;
}

CorpusRun hot_lr(uint64_t seed, double lr) {
  // A peak learning rate far too high, reached after its warmup: the fault is the run's own.
  CorpusRun run{"hot_lr", seed, small_model(seed, lr, 200), {}, 900, 0};
  return run;
}

}  // namespace

std::vector<CorpusRun> warning_corpus(bool quick) {
  std::vector<CorpusRun> corpus;
  if (quick) {
    corpus.push_back(healthy(1, 3e-3, 100, 1000));
    corpus.push_back(lr_drift(1, 300, 1.02));
    corpus.push_back(batch_drift(1, 300, 1.04));
    corpus.push_back(hot_lr(1, 0.3));
    return corpus;
  }
  corpus.push_back(healthy(1, 3e-3, 100, 2000));
  corpus.push_back(healthy(2, 1e-3, 0, 2000));
  corpus.push_back(healthy(3, 1e-2, 500, 2000));
  corpus.push_back(healthy(4, 3e-3, 300, 2000));
  CorpusRun spiked = healthy(5, 3e-3, 100, 2000);
  spiked.faults.spike_step = 1000;   // one bad batch: every gradient x100 for a step
  spiked.faults.spike_factor = 100;
  corpus.push_back(spiked);
  for (uint64_t seed = 1; seed <= 3; ++seed) corpus.push_back(lr_drift(seed, 300, 1.02));
  for (uint64_t seed = 4; seed <= 5; ++seed) corpus.push_back(lr_drift(seed, 400, 1.015));
  for (uint64_t seed = 1; seed <= 3; ++seed) corpus.push_back(batch_drift(seed, 300, 1.04));
  for (uint64_t seed = 4; seed <= 5; ++seed) corpus.push_back(batch_drift(seed, 400, 1.03));
  for (uint64_t seed = 1; seed <= 3; ++seed) corpus.push_back(hot_lr(seed, 0.3));
  for (uint64_t seed = 4; seed <= 5; ++seed) corpus.push_back(hot_lr(seed, 0.5));
  return corpus;
}

RunOutcome run_corpus_entry(const CorpusRun& run) {
  RunOutcome out;
  out.run = run;
  demo::Trainer trainer(run.config);
  probe::ProbeOptions options;
  options.endpoint = "";
  options.record_dir = "";
  options.dump_on_nonfinite = false;
  options.on_event = [&](const wire::Event& e) {
    if (e.kind == wire::event_kind::kWarning && e.warning) {
      out.warnings.push_back(WarningSeen{e.step, e.warning->signal, e.layer, e.detail});
    }
  };
  probe::Probe probe(*trainer.model(), trainer.optimizer(), options);
  trainer.model()->on_attention_scores(
      [&probe](const std::string& name, const torch::Tensor& scores) { probe.watch(name, scores); });
  probe::DivergenceDetector divergence;
  std::vector<wire::StepRecord>& records = out.records;
  const auto start = Clock::now();
  for (int64_t step = 0; step < run.steps; ++step) {
    trainer.schedule(step, run.faults);
    demo::Batch batch = trainer.next_batch();
    demo::Trainer::drift(step, run.faults, batch);
    const torch::Tensor loss = trainer.forward_backward(
        batch, [&](const torch::Tensor& logits) { probe.watch("logits", logits); }, nullptr);
    trainer.inject(step, run.faults);
    const probe::StepOutcome outcome = probe.step(loss);
    out.steps_taken = step + 1;
    records.push_back(probe.last_record());
    const std::optional<probe::Divergence> diverged = divergence.observe(step, loss.item<double>(), !outcome.applied);
    if (diverged && out.onset < 0) out.onset = diverged->onset;
    // A diverged run has told what it had to: a few more steps show what came after.
    if (out.onset >= 0 && step >= out.onset + 30) break;
  }
  out.step_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count() /
                static_cast<double>(std::max<int64_t>(1, out.steps_taken));
  // The forecaster's own time on the same records, timed apart from the step it rides on.
  probe::Forecaster forecaster;
  std::vector<probe::Forecast> forecasts;
  const auto forecast_start = Clock::now();
  for (const wire::StepRecord& r : records) forecaster.observe(r, probe.description(), forecasts);
  out.forecast_us = std::chrono::duration<double, std::micro>(Clock::now() - forecast_start).count() /
                    static_cast<double>(std::max<size_t>(1, records.size()));
  return out;
}

}  // namespace keel::bench
