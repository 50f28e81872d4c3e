// keel-bench-warning's corpus (docs/warnings.md): keel-demo's model trained through the real
// math, healthy and diverging slowly, with the probe's forecaster on. Each run says where its
// fault began, where it diverged (the rewind policy's rule, snapshot/divergence_rule.hpp: the
// one definition of a divergence), and what the forecaster warned when.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "keel/wire/messages.hpp"
#include "trainer.hpp"

namespace keel::bench {

struct CorpusRun {
  std::string kind;        // "healthy", or the divergence's kind: "lr_drift", "batch_drift", "hot_lr"
  uint64_t seed = 1;
  demo::TrainerConfig config;
  demo::Faults faults;
  int64_t steps = 0;       // at most; a diverged run stops soon after its divergence
  int64_t fault_from = 0;  // the step its fault begins (healthy: steps)
};

struct WarningSeen {
  int64_t step = 0;
  std::string signal, layer, detail;
};

struct RunOutcome {
  CorpusRun run;
  int64_t steps_taken = 0;
  int64_t onset = -1;              // the divergence's first step; -1: it did not diverge
  std::vector<WarningSeen> warnings;
  double step_ms = 0;              // the mean training step, probe included
  double forecast_us = 0;          // the forecaster's mean time a step, on this run's records
  std::vector<wire::StepRecord> records;   // every step's, as published
};

// The corpus: healthy runs of 10,000 steps in all (several seeds, learning rates and warmups,
// one with a bad batch), and each slow divergence over several seeds. `quick`: one of each.
std::vector<CorpusRun> warning_corpus(bool quick);

// Trains `run` with the probe (no telemetry, no recording) and its forecaster, the output
// logits and each block's attention logits watched, and times the forecaster again on the
// run's own step records.
RunOutcome run_corpus_entry(const CorpusRun& run);

}  // namespace keel::bench
