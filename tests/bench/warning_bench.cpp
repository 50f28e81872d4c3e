// keel-bench-warning: the early warning scored on a corpus of divergences and healthy runs
// (docs/warnings.md): for each kind of divergence and overall, the share warned at least 20
// steps before it diverged (recall), the median and lowest lead, the false alarms per 10,000
// healthy steps, and the forecaster's cost on the training thread as a share of the step.
#include <CLI/CLI.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "forecast/forecaster.hpp"
#include "median.hpp"
#include "warning_corpus.hpp"

namespace {

using keel::bench::RunOutcome;

constexpr int64_t kLeadNeeded = 20;

struct KindScore {
  int runs = 0, diverged = 0, warned_in_time = 0;
  std::vector<double> leads;   // of every diverged run warned before its onset
};

struct Score {
  std::map<std::string, KindScore> kinds;
  int64_t healthy_steps = 0;
  int false_alarms = 0;
  std::vector<std::string> alarms;   // what each false alarm said
};

// The first warning at or after the fault began: its lead on the onset (negative: late), or
// nothing when none came before the run ended.
std::optional<int64_t> lead_of(const RunOutcome& o) {
  for (const auto& w : o.warnings) {
    if (w.step >= o.run.fault_from) return o.onset - w.step;
  }
  return std::nullopt;
}

void score_run(const RunOutcome& o, Score& score) {
  // Before its fault a run is healthy: a warning there is a false alarm.
  const int64_t healthy_until = o.run.kind == "healthy" ? o.steps_taken : std::min(o.run.fault_from, o.steps_taken);
  score.healthy_steps += healthy_until;
  for (const auto& w : o.warnings) {
    if (w.step < healthy_until) {
      ++score.false_alarms;
      score.alarms.push_back(o.run.kind + " seed " + std::to_string(o.run.seed) + " step " + std::to_string(w.step) +
                             ": " + w.detail);
    }
  }
  if (o.run.kind == "healthy") return;
  KindScore& k = score.kinds[o.run.kind];
  ++k.runs;
  if (o.onset < 0) return;
  ++k.diverged;
  const std::optional<int64_t> lead = lead_of(o);
  if (lead && *lead > 0) k.leads.push_back(static_cast<double>(*lead));
  if (lead && *lead >= kLeadNeeded) ++k.warned_in_time;
}

void print_kind(const std::string& name, const KindScore& k) {
  const double recall = k.diverged ? 100.0 * k.warned_in_time / k.diverged : 0;
  const double lowest = k.leads.empty() ? 0 : *std::min_element(k.leads.begin(), k.leads.end());
  std::printf("%-14s %5d %9d %12d %8.0f%% %12.0f %12.0f\n", name.c_str(), k.runs, k.diverged, k.warned_in_time, recall,
              keel::bench::median(k.leads), lowest);
}

void print_run(const RunOutcome& o) {
  const std::optional<int64_t> lead = lead_of(o);
  std::printf("  %-12s seed %llu: %lld steps, fault from %lld, diverged %s", o.run.kind.c_str(),
              static_cast<unsigned long long>(o.run.seed), static_cast<long long>(o.steps_taken),
              static_cast<long long>(o.run.fault_from),
              o.onset < 0 ? "never" : ("at " + std::to_string(o.onset)).c_str());
  if (o.warnings.empty()) {
    std::printf(", no warning\n");
    return;
  }
  const auto& w = o.warnings.front();
  std::printf(", first warning at %lld (%s%s%s)%s\n", static_cast<long long>(w.step), w.signal.c_str(),
              w.layer.empty() ? "" : " ", w.layer.c_str(),
              lead && o.onset >= 0 ? (", lead " + std::to_string(*lead)).c_str() : "");
}

// Every `every` steps of the run: the loss, the learning rate, the grad norm and each watched
// tensor's largest magnitude and log Z, the signals' own numbers beside what was warned.
void print_trace(const RunOutcome& o, int64_t every) {
  for (const keel::wire::StepRecord& r : o.records) {
    if (r.step % every != 0) continue;
    std::printf("    step %5lld  loss %7.3f  lr %.2e  grad_norm %9.3g  update_ratio %.2e", static_cast<long long>(r.step),
                r.loss, r.lr, r.grad_norm, keel::probe::run_update_ratio(r));
    for (const keel::wire::WatchStats& w : r.watches) std::printf("  %s %.3g/%.2f", w.name.c_str(), w.absmax, w.z);
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"keel-bench-warning: the early warning's recall, lead, false alarms and cost on a corpus"};
  bool quick = false;
  int threads = 1;
  app.add_flag("--quick", quick, "one run of each kind and 1,000 healthy steps (a look, not a score)");
  std::vector<std::string> kinds;
  int64_t trace = 0;
  app.add_option("--kind", kinds, "only the runs of these kinds (healthy, lr_drift, ...): a look, not a score");
  app.add_option("--trace", trace, "print each run's signals every N steps (absmax/log Z of each watched tensor)");
  app.add_option("--threads", threads, "intra-op threads (1: the figures do not depend on the machine's load)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  torch::set_num_threads(threads);

  const auto start = std::chrono::steady_clock::now();
  Score score;
  std::vector<double> cost_pct, cost_us;
  std::printf("keel-bench-warning: keel-demo's model (width 48, 2 blocks), forecaster defaults\n");
  for (const keel::bench::CorpusRun& run : keel::bench::warning_corpus(quick)) {
    if (!kinds.empty() && std::find(kinds.begin(), kinds.end(), run.kind) == kinds.end()) continue;
    const RunOutcome o = keel::bench::run_corpus_entry(run);
    print_run(o);
    if (trace > 0) print_trace(o, trace);
    std::fflush(stdout);
    score_run(o, score);
    cost_us.push_back(o.forecast_us);
    cost_pct.push_back(100.0 * o.forecast_us / (1000.0 * o.step_ms));
  }
  std::printf("\n%-14s %5s %9s %12s %9s %12s %12s\n", "kind", "runs", "diverged", "warned>=20", "recall",
              "median lead", "lowest lead");
  KindScore all;
  for (const auto& [name, k] : score.kinds) {
    print_kind(name, k);
    all.runs += k.runs;
    all.diverged += k.diverged;
    all.warned_in_time += k.warned_in_time;
    all.leads.insert(all.leads.end(), k.leads.begin(), k.leads.end());
  }
  print_kind("all", all);
  std::printf("\nfalse alarms: %d in %lld healthy steps = %.2f per 10,000 steps\n", score.false_alarms,
              static_cast<long long>(score.healthy_steps),
              score.healthy_steps ? 1e4 * score.false_alarms / static_cast<double>(score.healthy_steps) : 0.0);
  for (const std::string& alarm : score.alarms) std::printf("  %s\n", alarm.c_str());
  std::printf("forecaster cost on the training thread: %.2f us a step, %.3f%% of keel-demo's step (median of runs)\n",
              keel::bench::median(cost_us), keel::bench::median(cost_pct));
  std::printf("wall time: %.0f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return 0;
}
