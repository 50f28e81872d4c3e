#include "step_cause.hpp"

#include <cmath>

#include "origin/short_number.hpp"

namespace keel::probe {
namespace {

std::string at_step(int64_t step) { return " at step " + std::to_string(step); }

StepCause make(const char* kind, std::string op, std::string module, std::string evidence, std::string sentence,
               std::string layer = "") {
  StepCause c;
  c.cause = wire::Cause{kind, std::move(op), std::move(module), std::move(evidence), std::move(sentence)};
  c.layer = std::move(layer);
  return c;
}

// The first parameter of `module` among the names: the one the dashboard selects for it.
std::string layer_of(const std::string& module, const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    if (name.size() > module.size() && name.compare(0, module.size(), module) == 0 && name[module.size()] == '.') {
      return name;
    }
    if (name == module) return name;
  }
  return "";
}

std::optional<StepCause> from_weights(const StepEvidence& e) {
  if (e.weight_sumsq == nullptr) return std::nullopt;
  for (size_t i = 0; i < e.weight_sumsq->size(); ++i) {
    if (std::isfinite((*e.weight_sumsq)[i])) continue;
    const std::string& name = (*e.names)[i];
    return make("weights", "", name, name + " holds NaN or Inf before the update",
                "The weights were already non-finite before step " + std::to_string(e.step) + ": " + name +
                    " holds NaN or Inf (written by an earlier update or outside the optimizer), and every step "
                    "computes from it",
                name);
  }
  return std::nullopt;
}

std::optional<StepCause> from_origin(const StepEvidence& e, const Origin& o) {
  const StepHealth& h = *e.health;
  const std::string step = std::to_string(e.step);
  if (o.kind == Origin::Kind::kNone) {
    // Only values that were non-finite can fail to come back; an overflowing norm of finite
    // values is the batch's, and is judged below.
    if (h.nonfinite_layers == 0 && !h.loss_nonfinite) return std::nullopt;
    return make("transient", "", "", "the re-run's forward and backward were finite",
                "Transient: step " + step +
                    " was run again on the same batch, weights and random state, and its non-finite value did not "
                    "come back (hardware or non-determinism); the first run had " + h.cause());
  }
  if (o.kind == Origin::Kind::kRead) {
    if (!o.read_from.empty()) {
      return make("weights", o.op, o.read_from, o.evidence,
                  "The weights were already non-finite before step " + step + ": " + o.op + " read " + o.read_from +
                      " (" + o.evidence + ")",
                  o.read_from);
    }
    const std::string where = o.module.empty() ? "" : " in " + o.module;
    return make("input", o.op, o.module, o.evidence,
                "Non-finite input at step " + step + ": the batch carries NaN or Inf (" + o.evidence +
                    "), first read by " + o.op + where,
                layer_of(o.module, *e.names));
  }
  return std::nullopt;
}

// "the learning rate rose 1000x at step 70 (0.003 to 3)"
std::string lr_clause(const StepEvidence::LrJump& jump) {
  return "the learning rate rose " + short_number(jump.to / jump.from) + "x at step " + std::to_string(jump.step) + " (" +
         short_number(jump.from) + " to " + short_number(jump.to) + ")";
}

std::optional<StepCause> from_gradients(const StepEvidence& e) {
  const StepHealth& h = *e.health;
  const std::string step = std::to_string(e.step);
  const bool loss_nan = e.has_loss && std::isnan(e.loss);
  // The layer the health names, or for a spike (health names none) the one of largest norm.
  size_t named = h.layer;
  if (named == StepHealth::kNoLayer && !e.grads->empty()) {
    named = 0;
    for (size_t i = 1; i < e.grads->size(); ++i) {
      if ((*e.grads)[i].sumsq > (*e.grads)[named].sumsq) named = i;
    }
  }
  const std::string largest = named != StepHealth::kNoLayer ? (*e.names)[named] : "";
  // Finite values whose norm is out of all proportion: the batch's doing, or, right after the
  // learning rate jumped, the weights' that the jump threw off.
  if (h.nonfinite_layers == 0 && !loss_nan && !e.scaler_overflow && (h.norm_overflow || e.spike)) {
    const std::string norm = "grad norm " + short_number(h.grad_norm);
    const std::string how = h.norm_overflow ? norm + " overflows float32"
                                            : norm + " is " + short_number(e.spike_z) + " sigma above the last " +
                                                  std::to_string(e.spike_window) + " steps";
    const std::string module = largest.empty() ? "" : OriginTracer::module_of(largest);
    const std::string numbers = " (loss " + short_number(e.loss) + (largest.empty() ? "" : ", largest in " + largest) + ")";
    if (e.lr_jump) {
      return make("learning_rate", "", module, lr_clause(*e.lr_jump) + "; " + how,
                  "Learning rate at step " + step + ": " + lr_clause(*e.lr_jump) + ", and the run diverged: the " +
                      how + numbers,
                  largest);
    }
    return make("batch", "", module, how + ", loss " + short_number(e.loss),
                "Batch at step " + step + ": the forward pass and every gradient value were finite, but the " + how +
                    numbers,
                largest);
  }
  if (e.scaler_overflow && e.has_loss && std::isfinite(e.loss)) {
    const std::string first = h.nonfinite_layers > 0 ? largest : "";
    const std::string module = first.empty() ? "" : OriginTracer::module_of(first);
    return make("loss_scale", "", module, "scale " + short_number(e.scale) + ", loss " + short_number(e.loss),
                "Loss scale at step " + step + ": the forward pass and the loss (" + short_number(e.loss) +
                    ") were finite, and the gradients scaled by " + short_number(e.scale) + " overflowed" +
                    (first.empty() ? "" : " (first in " + first + ")") +
                    "; the scaler skips the update and backs off, a problem only if the scale keeps falling",
                first);
  }
  return std::nullopt;
}

std::optional<StepCause> classify(const StepEvidence& e) {
  const StepHealth& h = *e.health;
  if (!h.blown_up() && !e.spike && !e.scaler_overflow) return std::nullopt;
  if (auto weights = from_weights(e)) return weights;
  if (e.origin) {
    if (auto traced = from_origin(e, *e.origin)) return traced;
  }
  if (auto gradients = from_gradients(e)) return gradients;

  const char* value = e.origin && e.origin->kind == Origin::Kind::kProduced && !e.origin->nan ? "Inf" : "NaN";
  if (e.origin && e.origin->kind == Origin::Kind::kProduced) {
    const Origin& o = *e.origin;
    const std::string module = o.module.empty() ? "" : " in " + o.module;
    const std::string evidence = o.evidence.empty() ? "" : " (" + o.evidence + ")";
    const std::string layer = o.layer.empty() ? layer_of(o.module, *e.names) : o.layer;
    if (!o.backward) {
      return make("forward", o.op, o.module, o.evidence,
                  std::string(value) + " born in the forward pass: " + o.op + module + at_step(e.step) + evidence,
                  layer);
    }
    const std::string op = o.node.empty() ? o.op : o.node + " (" + o.op + ")";
    return make("backward", o.node.empty() ? o.op : o.node, o.module, o.evidence,
                std::string(value) + " born in the backward pass: " + op + module + at_step(e.step) + evidence +
                    "; the forward pass and the loss were finite",
                layer);
  }
  const std::string untraced = *e.not_traced == '\0' ? "" : "; " + std::string(e.not_traced);
  if (e.has_loss && !std::isfinite(e.loss)) {
    return make("forward", "", "", "loss " + short_number(e.loss),
                "NaN born in the forward pass (or carried in by the batch)" + at_step(e.step) + ": the loss is already " + short_number(e.loss) +
                    ", so every gradient follows it (" + std::to_string(h.nonfinite_layers) + " of " +
                    std::to_string(e.grads->size()) +
                    " layers non-finite) and the layer nearest the loss is not the origin" + untraced);
  }
  const std::string first = h.layer != StepHealth::kNoLayer ? (*e.names)[h.layer] : "";
  return make("backward", "", first.empty() ? "" : OriginTracer::module_of(first), "loss " + short_number(e.loss),
              "Non-finite gradient born in the backward pass" + at_step(e.step) + ": the loss (" + short_number(e.loss) +
                  ") was finite" + (first.empty() ? "" : ", and " + first + " was the first non-finite gradient in backward order") +
                  untraced,
              first);
}

}  // namespace

std::optional<StepEvidence::LrJump> latest_lr_jump(const std::vector<std::pair<int64_t, double>>& lrs, int64_t step) {
  std::optional<StepEvidence::LrJump> jump;
  for (size_t i = 1; i < lrs.size(); ++i) {
    const auto& [at, lr] = lrs[i];
    const double before = lrs[i - 1].second;
    if (step - at > kLrJumpWindow || at > step || !(before > 0) || !(lr >= kLrJumpFactor * before)) continue;
    jump = StepEvidence::LrJump{at, before, lr};
  }
  return jump;
}

std::optional<StepCause> classify_cause(const StepEvidence& e) {
  std::optional<StepCause> cause = classify(e);
  // A NaN born in an op a few steps after the learning rate jumped: where, and the likely why.
  if (cause && e.lr_jump && (cause->cause.kind == "forward" || cause->cause.kind == "backward")) {
    cause->cause.sentence += "; " + lr_clause(*e.lr_jump);
  }
  return cause;
}

}  // namespace keel::probe
