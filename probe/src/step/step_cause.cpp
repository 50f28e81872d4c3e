#include "step_cause.hpp"

#include <cmath>
#include <cstdio>

namespace keel::probe {
namespace {

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", v);
  return text;
}

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

std::optional<StepCause> from_gradients(const StepEvidence& e) {
  const StepHealth& h = *e.health;
  const std::string step = std::to_string(e.step);
  const bool loss_nan = e.has_loss && std::isnan(e.loss);
  const std::string largest = h.layer != StepHealth::kNoLayer ? (*e.names)[h.layer] : "";
  // Finite values whose norm is out of all proportion: the batch's doing, not an op's.
  if (h.nonfinite_layers == 0 && !loss_nan && !e.scaler_overflow && (h.norm_overflow || e.spike)) {
    const std::string norm = "grad norm " + number(h.grad_norm);
    const std::string how = h.norm_overflow ? norm + " overflows float32"
                                            : norm + " is " + number(e.spike_z) + " sigma above the last " +
                                                  std::to_string(e.spike_window) + " steps";
    const std::string module = largest.empty() ? "" : OriginTracer::module_of(largest);
    return make("batch", "", module, how + ", loss " + number(e.loss),
                "Batch at step " + step + ": the forward pass and every gradient value were finite, but the " + how +
                    " (loss " + number(e.loss) + (largest.empty() ? "" : ", largest in " + largest) + ")",
                largest);
  }
  if (e.scaler_overflow && e.has_loss && std::isfinite(e.loss)) {
    const std::string first = h.nonfinite_layers > 0 ? largest : "";
    const std::string module = first.empty() ? "" : OriginTracer::module_of(first);
    return make("loss_scale", "", module, "scale " + number(e.scale) + ", loss " + number(e.loss),
                "Loss scale at step " + step + ": the forward pass and the loss (" + number(e.loss) +
                    ") were finite, and the gradients scaled by " + number(e.scale) + " overflowed" +
                    (first.empty() ? "" : " (first in " + first + ")") +
                    "; the scaler skips the update and backs off, a problem only if the scale keeps falling",
                first);
  }
  return std::nullopt;
}

}  // namespace

std::optional<StepCause> classify_cause(const StepEvidence& e) {
  const StepHealth& h = *e.health;
  if (!h.blown_up() && !e.spike && !e.scaler_overflow) return std::nullopt;
  const std::string step = std::to_string(e.step);
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
    if (!o.backward) {
      return make("forward", o.op, o.module, o.evidence,
                  std::string(value) + " born in the forward pass: " + o.op + module + at_step(e.step) + evidence,
                  layer_of(o.module, *e.names));
    }
    const std::string op = o.node.empty() ? o.op : o.node + " (" + o.op + ")";
    return make("backward", o.node.empty() ? o.op : o.node, o.module, o.evidence,
                std::string(value) + " born in the backward pass: " + op + module + at_step(e.step) + evidence +
                    "; the forward pass and the loss were finite",
                layer_of(o.module, *e.names));
  }
  const std::string untraced = e.not_traced.empty() ? "" : "; " + e.not_traced;
  if (e.has_loss && !std::isfinite(e.loss)) {
    return make("forward", "", "", "loss " + number(e.loss),
                "NaN born in the forward pass" + at_step(e.step) + ": the loss is already " + number(e.loss) +
                    ", so every gradient follows it (" + std::to_string(h.nonfinite_layers) + " of " +
                    std::to_string(e.grads->size()) +
                    " layers non-finite) and the layer nearest the loss is not the origin" + untraced);
  }
  const std::string first = h.layer != StepHealth::kNoLayer ? (*e.names)[h.layer] : "";
  return make("backward", "", first.empty() ? "" : OriginTracer::module_of(first), "loss " + number(e.loss),
              "Non-finite gradient born in the backward pass" + at_step(e.step) + ": the loss (" + number(e.loss) +
                  ") was finite" + (first.empty() ? "" : ", and " + first + " was the first non-finite gradient in backward order") +
                  untraced,
              first);
}

}  // namespace keel::probe
