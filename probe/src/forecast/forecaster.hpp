// Forecaster: the early warning (docs/warnings.md). Once a step it reads the step's record as
// published (the global grad norm, each layer's update ratio and weight norm, each watched
// tensor's largest magnitude and log-sum-exp, the loss scale) and says when one of them is on
// a trend that usually ends in a divergence, before the loss shows it:
//   grad_norm     the global grad norm at `growth` (2) times its baseline for `persist` (8)
//                 steps in a row (OLMo 2 and OPT's logbook: grad-norm growth came first);
//   update_ratio  the run's update-to-weight ratio over the learning rate, the same (Marin's
//                 32B run: the Adam update norm doubled before its loss spikes); over the
//                 learning rate, so that a warmup or a decay is not a trend; the layer named is
//                 the one furthest above its own baseline. And the ratio itself at
//                 `update_growth` (4) times its baseline: a learning rate that keeps rising
//                 past its warmup (a linear warmup's ratio grows less than 4x its trailing
//                 baseline once past its first 150 steps; a warm restart's jump is warned);
//                 And a learning rate risen to `lr_growth` (3) times its baseline while the
//                 updates per unit of it fell to half: the steps overshoot and cancel out, as
//                 they do at a learning rate too high, before the loss shows it;
//   loss          the loss at `loss_growth` (1.25) times its baseline for `persist` steps: a
//                 run that climbs out of its valley rather than down it (positive losses only);
//                 at `joint_loss_growth` (1.12) while the grad norm stands at `joint_grad_growth`
//                 (1.4) times its own and rises: the two together are rarely noise (a run of
//                 harmful batches lifts both);
//   logit_max     a watched tensor's largest magnitude, the same (attention or output logits
//                 growing, Wortsman et al. 2023), once beyond `logit_floor` (30): logits are
//                 in nats, and a softmax over logits that span less is not yet near one-hot (a
//                 model's attention logits grow from ~0.1 to ~10 as it learns, a healthy
//                 doubling); and from its `runaway_from` (16th) step on, warm-up or not, a
//                 largest magnitude beyond the floor growing `runaway_growth` (10) times in
//                 `runaway_steps` (50) or faster, for `persist` steps: a learning rate too high
//                 from the start runs its attention logits away within the warm-up;
//   log_z         a watched tensor's mean log-sum-exp `log_z_drift` (3) nats from its baseline
//                 for `persist` steps (output logit divergence, what z-loss prevents);
//   loss_scale    the loss scaler's scale `scale_halvings` (6) halvings below its peak since the
//                 warm-up and still falling (fp16 gradients overflowing more and more).
// No level warns against its baseline (grad_norm, loss, update_ratio's growth, logit_max's
// growth, log_z) in the `aftermath_steps` (30) after a grad norm `spike` (10) times its level:
// what one bad batch did to the next steps is the spike's (the skip's and the spike rule's
// business), not a trend; a trend that outlasts it is warned after it.
// A signal warns only after `min_steps` (200) observations of its own, its baseline taken
// from the second half of them (a model's first steps move every signal: its logits grow as it
// starts to predict, its grad norm falls), and then at most once in `quiet_steps` (500) for
// the same layer. Baselines and levels are exponential averages
// (trend.hpp): the state is a few numbers per signal, per layer and per watched tensor, fixed
// once the run's shape is known. The lead a warning states is the trend's extrapolation to
// `trouble` (10) times the baseline; keel-bench-warning measures the lead that came true.
// Threads: the training thread. Never: throws; allocates only when the run's shape changes
// and when it warns.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "forecast/trend.hpp"
#include "keel/wire/messages.hpp"

namespace keel::probe {

struct ForecastRule {
  int64_t min_steps = 200;
  double fast_half_life = 8;
  double slow_half_life = 150;
  double growth = 2.0;
  double update_growth = 4.0;
  double lr_growth = 3.0;
  double loss_growth = 1.25;
  double joint_loss_growth = 1.12;
  double joint_grad_growth = 1.4;
  int64_t persist = 8;
  double trouble = 10.0;
  double log_z_drift = 3.0;
  double scale_halvings = 6.0;
  int64_t quiet_steps = 500;
  double logit_floor = 30.0;
  int64_t runaway_from = 16;
  double runaway_growth = 10.0;
  int64_t runaway_steps = 50;
  double spike = 10.0;
  int64_t aftermath_steps = 30;
};

// One warning: the event's layer, its warning map and its sentence.
struct Forecast {
  std::string layer;
  wire::Warning warning;
  std::string sentence;
};

// The run's update-to-weight ratio: every layer's update norm over every layer's weight norm
// (each layer weighed by its weights, as the update ratio's combine across shards does); 0 when
// the record has no per-layer update ratios or weight norms.
double run_update_ratio(const wire::StepRecord& record);

class Forecaster {
 public:
  explicit Forecaster(ForecastRule rule = {});

  // A step's record: the warnings it raises, in `out` (cleared first). `run` names the layers.
  void observe(const wire::StepRecord& record, const wire::RunDescription& run, std::vector<Forecast>& out);
  const ForecastRule& rule() const { return rule_; }

 private:
  // One series and its warning state.
  struct Signal {
    explicit Signal(const ForecastRule& rule) : trend(rule.fast_half_life, rule.slow_half_life) {}
    Trend trend;
    int64_t above = 0;         // steps in a row past the rule's bound
    int64_t running = 0;       // steps in a row on a runaway slope (logit_max)
    int64_t quiet_until = -1;  // no warning before this step
  };
  struct Watched {
    Watched(std::string n, const ForecastRule& rule) : name(std::move(n)), absmax(rule), log_z(rule) {}
    std::string name;
    Signal absmax, log_z;
  };

  // `y` into `trend`, its baseline begun again halfway through the warm-up.
  void observe_into(Trend& trend, double y) const;
  // Whether `signal`, given its new value `y`, warns at `step`: past `bound` (its excess, or its
  // drift either way when `either_way`), its level at `floor` or more, for `persist` steps and quiet.
  bool crosses(Signal& signal, double y, double bound, bool either_way, int64_t step,
               double floor = -std::numeric_limits<double>::infinity()) const;
  // Whether `signal` (a log series, observed already) runs away at `step`: beyond the logit
  // floor and growing at the runaway rate for `persist` steps, and quiet.
  bool runs_away(Signal& signal, int64_t step) const;
  // A grad norm `spike` times its level starts an aftermath.
  void note_spike(const wire::StepRecord& record);
  void observe_grad_norm(const wire::StepRecord& record, std::vector<Forecast>& out);
  void observe_loss(const wire::StepRecord& record, std::vector<Forecast>& out);
  // The overshoot warning: the learning rate up, the updates per unit of it down.
  void observe_overshoot(const wire::StepRecord& record, std::vector<Forecast>& out);
  void observe_update_ratio(const wire::StepRecord& record, const wire::RunDescription& run,
                            std::vector<Forecast>& out);
  void observe_watches(const wire::StepRecord& record, std::vector<Forecast>& out);
  // A watched tensor's largest magnitude: its growth past the baseline, or its runaway.
  void observe_logit_max(Watched& watched, double absmax, int64_t step, std::vector<Forecast>& out);
  void observe_loss_scale(const wire::StepRecord& record, std::vector<Forecast>& out);
  // The growth warning of `signal` (a log series) as the event tells it.
  Forecast growth_warning(const char* signal_name, const Signal& signal, std::string layer, const std::string& what,
                          const char* advice) const;
  // The layer whose own update ratio over the learning rate stands furthest above its baseline.
  std::string steepest_layer(const wire::RunDescription& run) const;

  ForecastRule rule_;
  Signal grad_norm_, loss_, update_ratio_, update_size_, learning_rate_, overshoot_, loss_scale_;
  std::vector<Trend> layer_ratios_;   // each layer's log(update ratio / lr), in model order
  std::vector<Watched> watches_;
  double scale_peak_ = 0;             // log2 of the largest loss scale since the warm-up
  int64_t aftermath_until_ = -1;      // no warning before this step: a grad norm spike's aftermath
  bool spiking_ = false;              // the last step's grad norm stood `spike` times its level
};

}  // namespace keel::probe
