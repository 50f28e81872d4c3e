#include "forecast/forecaster.hpp"

#include <cmath>
#include <limits>

#include "origin/short_number.hpp"

namespace keel::probe {

namespace {

constexpr size_t kMaxForecastWatches = 64;   // watched tensors followed; the rest are not

bool positive(double v) { return std::isfinite(v) && v > 0; }

std::string percent(double fraction) { return short_number(100.0 * fraction) + "%"; }

}  // namespace

double run_update_ratio(const wire::StepRecord& record) {
  using wire::LayerMetric;
  if (record.metric_block(LayerMetric::kUpdateRatio) < 0 || record.metric_block(LayerMetric::kParamNorm) < 0) return 0;
  double update_sq = 0, weight_sq = 0;
  for (uint32_t i = 0; i < record.layer_count; ++i) {
    const double ratio = record.layer_value(LayerMetric::kUpdateRatio, i);
    const double weights = record.layer_value(LayerMetric::kParamNorm, i);
    if (!positive(ratio) || !positive(weights)) continue;
    update_sq += ratio * weights * ratio * weights;
    weight_sq += weights * weights;
  }
  return positive(update_sq) && positive(weight_sq) ? std::sqrt(update_sq / weight_sq) : 0;
}

Forecaster::Forecaster(ForecastRule rule)
    : rule_(rule),
      grad_norm_(rule_),
      loss_(rule_),
      update_ratio_(rule_),
      update_size_(rule_),
      learning_rate_(rule_),
      overshoot_(rule_),
      loss_scale_(rule_) {}

void Forecaster::observe_into(Trend& trend, double y) const {
  trend.observe(y);
  if (trend.count() == rule_.min_steps / 2) trend = Trend::rebased(trend);
}

bool Forecaster::crosses(Signal& signal, double y, double bound, bool either_way, int64_t step, double floor) const {
  observe_into(signal.trend, y);
  const double excess = signal.trend.excess();
  const bool past = signal.trend.count() >= rule_.min_steps && signal.trend.level() >= floor &&
                    (either_way ? std::abs(excess) >= bound : excess >= bound);
  signal.above = past && step >= aftermath_until_ ? signal.above + 1 : 0;
  // Still heading away from the baseline as it warns: a level that settled is a new normal.
  const bool heading_on = excess >= 0 ? signal.trend.slope() > 0 : signal.trend.slope() < 0;
  if (signal.above < rule_.persist || !heading_on || step < signal.quiet_until) return false;
  signal.quiet_until = step + rule_.quiet_steps;
  return true;
}

bool Forecaster::runs_away(Signal& signal, int64_t step) const {
  const Trend& t = signal.trend;
  const bool steep = t.count() >= rule_.runaway_from && t.level() >= std::log(rule_.logit_floor) &&
                     t.slope() >= std::log(rule_.runaway_growth) / static_cast<double>(rule_.runaway_steps);
  signal.running = steep ? signal.running + 1 : 0;
  if (signal.running < rule_.persist || step < signal.quiet_until) return false;
  signal.quiet_until = step + rule_.quiet_steps;
  return true;
}

void Forecaster::observe(const wire::StepRecord& record, const wire::RunDescription& run,
                         std::vector<Forecast>& out) {
  out.clear();
  note_spike(record);
  observe_grad_norm(record, out);
  observe_loss(record, out);
  observe_update_ratio(record, run, out);
  observe_watches(record, out);
  observe_loss_scale(record, out);
}

Forecast Forecaster::growth_warning(const char* signal_name, const Signal& signal, std::string layer,
                                    const std::string& what, const char* advice) const {
  const Trend& t = signal.trend;
  Forecast f;
  f.layer = std::move(layer);
  f.warning.signal = signal_name;
  f.warning.value = std::exp(t.level());
  f.warning.baseline = std::exp(t.baseline());
  f.warning.per_step = t.slope();
  const double to_trouble = std::log(rule_.trouble) - t.excess();
  f.warning.lead_steps = t.slope() > 0 ? std::max<int64_t>(1, static_cast<int64_t>(std::ceil(to_trouble / t.slope()))) : -1;
  f.warning.advice = advice;
  const std::string trouble = short_number(rule_.trouble) + "x";
  std::string outlook;
  if (to_trouble <= 0) {
    outlook = ": past " + trouble + " already, which runs rarely survive";
  } else if (f.warning.lead_steps > 0) {
    outlook = ": at this rate it is " + trouble + " in about " + std::to_string(f.warning.lead_steps) +
              " steps, which runs rarely survive";
  }
  f.sentence = what + " is " + short_number(std::exp(t.excess())) + "x its baseline " +
               short_number(f.warning.baseline) + " (now " + short_number(f.warning.value) + ") and rising " +
               percent(std::expm1(t.slope())) + " a step" + outlook + "; " + advice;
  return f;
}

void Forecaster::note_spike(const wire::StepRecord& record) {
  const Trend& t = grad_norm_.trend;
  if (record.skipped || !positive(record.grad_norm) || t.count() < rule_.runaway_from) return;
  // The step it jumps, not each step after: a grad norm that keeps growing that fast stays 10x
  // above its lagging level, and is a trend once the aftermath is over.
  const bool spiking = std::log(record.grad_norm) - t.level() >= std::log(rule_.spike);
  if (spiking && !spiking_) aftermath_until_ = record.step + rule_.aftermath_steps;
  spiking_ = spiking;
}

void Forecaster::observe_grad_norm(const wire::StepRecord& record, std::vector<Forecast>& out) {
  if (record.skipped || !positive(record.grad_norm)) return;
  if (crosses(grad_norm_, std::log(record.grad_norm), std::log(rule_.growth), false, record.step)) {
    out.push_back(growth_warning("grad_norm", grad_norm_, "", "the grad norm",
                                 "lower the learning rate or clip the gradients, and look for a run of bad batches"));
  }
}

void Forecaster::observe_loss(const wire::StepRecord& record, std::vector<Forecast>& out) {
  if (record.skipped || !positive(record.loss)) return;
  const Trend& gn = grad_norm_.trend;
  const bool with_grads =
      gn.count() >= rule_.min_steps && gn.excess() >= std::log(rule_.joint_grad_growth) && gn.slope() > 0;
  const double bound = std::log(with_grads ? rule_.joint_loss_growth : rule_.loss_growth);
  if (crosses(loss_, std::log(record.loss), bound, false, record.step)) {
    out.push_back(growth_warning(
        "loss", loss_, "",
        with_grads ? "the loss (its grad norm " + short_number(std::exp(gn.excess())) + "x its baseline and rising)"
                   : std::string("the loss"),
        "lower the learning rate; if it keeps climbing, rewind to before it began"));
  }
}

void Forecaster::observe_overshoot(const wire::StepRecord& record, std::vector<Forecast>& out) {
  const Trend& lr = learning_rate_.trend;
  const Trend& per_lr = update_ratio_.trend;
  const bool past = lr.count() >= rule_.min_steps && per_lr.count() >= rule_.min_steps &&
                    lr.excess() >= std::log(rule_.lr_growth) && per_lr.excess() <= -std::log(2.0);
  overshoot_.above = past ? overshoot_.above + 1 : 0;
  if (overshoot_.above < rule_.persist || record.step < overshoot_.quiet_until) return;
  overshoot_.quiet_until = record.step + rule_.quiet_steps;
  Forecast f;
  f.warning.signal = "update_ratio";
  f.warning.value = std::exp(per_lr.level());
  f.warning.baseline = std::exp(per_lr.baseline());
  f.warning.per_step = per_lr.slope();
  f.warning.advice = "lower the learning rate: it is past what this model takes";
  f.sentence = "the learning rate rose to " + short_number(std::exp(lr.excess())) + "x its baseline " +
               short_number(std::exp(lr.baseline())) + " while the updates per unit of it fell to " +
               short_number(std::exp(per_lr.excess())) + "x theirs: the steps overshoot and cancel out, as they do " +
               "before a run diverges at too high a learning rate; " + f.warning.advice;
  out.push_back(std::move(f));
}

void Forecaster::observe_update_ratio(const wire::StepRecord& record, const wire::RunDescription& run,
                                      std::vector<Forecast>& out) {
  using wire::LayerMetric;
  if (record.skipped || !positive(record.lr) || record.metric_block(LayerMetric::kUpdateRatio) < 0 ||
      record.metric_block(LayerMetric::kParamNorm) < 0) {
    return;
  }
  if (layer_ratios_.size() != record.layer_count) {
    layer_ratios_.assign(record.layer_count, Trend(rule_.fast_half_life, rule_.slow_half_life));
  }
  for (uint32_t i = 0; i < record.layer_count; ++i) {
    const double ratio = record.layer_value(LayerMetric::kUpdateRatio, i);
    if (positive(ratio) && positive(record.layer_value(LayerMetric::kParamNorm, i))) {
      observe_into(layer_ratios_[i], std::log(ratio / record.lr));
    }
  }
  const double run_ratio = run_update_ratio(record);
  if (!positive(run_ratio)) return;
  observe_into(learning_rate_.trend, std::log(record.lr));
  if (crosses(update_size_, std::log(run_ratio), std::log(rule_.update_growth), false, record.step)) {
    out.push_back(growth_warning("update_ratio", update_size_, "", "the update-to-weight ratio",
                                 "the learning rate keeps rising: check its schedule, or lower its peak"));
  }
  if (crosses(update_ratio_, std::log(run_ratio / record.lr), std::log(rule_.growth), false, record.step)) {
    const std::string layer = steepest_layer(run);
    out.push_back(growth_warning("update_ratio", update_ratio_, layer,
                                 "the update-to-weight ratio over the learning rate" +
                                     (layer.empty() ? std::string() : " (steepest in " + layer + ")"),
                                 "lower the learning rate or lengthen its warmup: the updates grow faster than the "
                                 "learning rate explains"));
  }
  observe_overshoot(record, out);
}

std::string Forecaster::steepest_layer(const wire::RunDescription& run) const {
  double steepest = -std::numeric_limits<double>::infinity();
  size_t at = layer_ratios_.size();
  for (size_t i = 0; i < layer_ratios_.size() && i < run.layers.size(); ++i) {
    if (layer_ratios_[i].count() < rule_.min_steps || layer_ratios_[i].excess() <= steepest) continue;
    steepest = layer_ratios_[i].excess();
    at = i;
  }
  return at < layer_ratios_.size() ? run.layers[at].name : std::string();
}

void Forecaster::observe_watches(const wire::StepRecord& record, std::vector<Forecast>& out) {
  for (const wire::WatchStats& w : record.watches) {
    Watched* watched = nullptr;
    for (Watched& known : watches_) {
      if (known.name == w.name) watched = &known;
    }
    if (watched == nullptr) {
      if (watches_.size() >= kMaxForecastWatches) continue;
      watched = &watches_.emplace_back(w.name, rule_);
    }
    if (w.nonfinite != 0) continue;
    if (positive(w.absmax)) observe_logit_max(*watched, w.absmax, record.step, out);
    if (std::isfinite(w.z) && crosses(watched->log_z, w.z, rule_.log_z_drift, true, record.step)) {
      const Trend& t = watched->log_z.trend;
      Forecast f;
      f.layer = w.name;
      f.warning.signal = "log_z";
      f.warning.value = t.level();
      f.warning.baseline = t.baseline();
      f.warning.per_step = t.slope();
      f.warning.advice = "add z-loss (1e-4 times log Z squared, as PaLM did), or lower the learning rate";
      f.sentence = "the log-sum-exp (log Z) of " + w.name + " drifted from " + short_number(t.baseline()) + " to " +
                   short_number(t.level()) + " nats, " + short_number(t.slope()) + " a step; " + f.warning.advice;
      out.push_back(std::move(f));
    }
  }
}

void Forecaster::observe_logit_max(Watched& watched, double absmax, int64_t step, std::vector<Forecast>& out) {
  static constexpr const char* kAdvice =
      "add QK-norm (attention logits) or z-loss (output logits), or lower the learning rate";
  Signal& s = watched.absmax;
  const std::string what = "the largest |value| of " + watched.name;
  if (crosses(s, std::log(absmax), std::log(rule_.growth), false, step, std::log(rule_.logit_floor))) {
    out.push_back(growth_warning("logit_max", s, watched.name, what, kAdvice));
    return;
  }
  if (!runs_away(s, step)) return;
  const Trend& t = s.trend;
  Forecast f;
  f.layer = watched.name;
  f.warning.signal = "logit_max";
  f.warning.value = std::exp(t.level());
  // Where the level stood `runaway_steps` ago at today's rate: the run has no baseline yet.
  f.warning.baseline = std::exp(t.level() - t.slope() * static_cast<double>(rule_.runaway_steps));
  f.warning.per_step = t.slope();
  f.warning.lead_steps = -1;
  f.warning.advice = kAdvice;
  f.sentence = what + " is " + short_number(f.warning.value) + " and rising " + percent(std::expm1(t.slope())) +
               " a step (" + short_number(std::exp(t.slope() * static_cast<double>(rule_.runaway_steps))) + "x in " +
               std::to_string(rule_.runaway_steps) + " steps at this rate): logits this large, growing this fast, "
               "make a softmax one-hot and its gradients vanish or overflow; " + f.warning.advice;
  out.push_back(std::move(f));
}

void Forecaster::observe_loss_scale(const wire::StepRecord& record, std::vector<Forecast>& out) {
  if (!record.scaler || !positive(record.scaler->scale)) return;
  const double halvings = std::log2(record.scaler->scale);
  // The peak is taken from the end of the warm-up: a new scaler's first backoffs find its level.
  Signal& s = loss_scale_;
  observe_into(s.trend, halvings);
  if (s.trend.count() < rule_.min_steps) {
    scale_peak_ = halvings;
    return;
  }
  scale_peak_ = std::max(scale_peak_, halvings);
  const bool fallen = scale_peak_ - halvings >= rule_.scale_halvings;
  s.above = fallen ? s.above + 1 : 0;
  if (!fallen || s.trend.slope() >= 0 || record.step < s.quiet_until) return;
  s.quiet_until = record.step + rule_.quiet_steps;
  Forecast f;
  f.warning.signal = "loss_scale";
  f.warning.value = record.scaler->scale;
  f.warning.baseline = std::exp2(scale_peak_);
  f.warning.per_step = -s.trend.slope() * std::log(2.0);
  // Steps until the scale is 1, where fp16 gradients start to underflow, at this rate.
  f.warning.lead_steps = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(std::max(0.0, halvings) / -s.trend.slope())));
  f.warning.advice = "find the layer whose fp16 values overflow (the heatmap's non-finite counts) and keep it in "
                     "fp32, or train in bf16";
  f.sentence = "the loss scale fell from " + short_number(f.warning.baseline) + " to " + short_number(record.scaler->scale) +
               " and keeps falling: fp16 gradients overflow more and more, and at this rate the scale reaches 1 in about " +
               std::to_string(f.warning.lead_steps) + " steps; " + f.warning.advice;
  out.push_back(std::move(f));
}

}  // namespace keel::probe
