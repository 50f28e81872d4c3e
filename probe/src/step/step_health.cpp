#include "step_health.hpp"

#include <cfloat>
#include <cmath>

#include "origin/short_number.hpp"

namespace keel::probe {
namespace {

// A sum of squares above this overflows in fp32: the norm of such a gradient reads Inf there.
constexpr double kFp32MaxSumsq = FLT_MAX;

// Sort key for "first in backward order": layers whose hook did not fire come after all that did.
int64_t backward_key(const std::function<int64_t(size_t)>& position, size_t layer) {
  const int64_t pos = position(layer);
  return pos >= 0 ? pos : std::numeric_limits<int64_t>::max() - 1;
}

// The first layer in backward order for which pick(layer) holds, or kNoLayer.
template <class Pick>
size_t first_in_backward_order(size_t count, const std::function<int64_t(size_t)>& position, Pick pick) {
  size_t first = StepHealth::kNoLayer;
  int64_t best = std::numeric_limits<int64_t>::max();
  for (size_t i = 0; i < count; ++i) {
    if (!pick(i)) continue;
    const int64_t key = backward_key(position, i);
    if (key < best) {
      best = key;
      first = i;
    }
  }
  return first;
}

}  // namespace

std::string StepHealth::cause() const {
  std::string out;
  const auto add = [&out](const char* what) { out += (out.empty() ? "" : " + ") + std::string(what); };
  if (nonfinite_layers > 0) add("non-finite gradient values");
  if (norm_overflow) add("overflowing grad norm");
  if (loss_nonfinite) add("non-finite loss");
  return out;
}

StepHealth assess_step(double loss, bool has_loss, const std::vector<GradStats>& grads,
                       const std::function<int64_t(size_t)>& position) {
  StepHealth h;
  h.loss_nonfinite = has_loss && !std::isfinite(loss);
  double total_sumsq = 0;
  size_t largest = StepHealth::kNoLayer;
  for (size_t i = 0; i < grads.size(); ++i) {
    const GradStats& g = grads[i];
    total_sumsq += g.sumsq;
    if (g.nonfinite > 0) ++h.nonfinite_layers;
    if (g.sumsq > kFp32MaxSumsq) ++h.overflow_layers;
    if (std::isfinite(g.sumsq) && (largest == StepHealth::kNoLayer || g.sumsq > grads[largest].sumsq)) largest = i;
  }
  h.grad_norm = std::sqrt(total_sumsq);
  // Non-finite values make the sum non-finite too; that is their cause, not an overflow.
  h.norm_overflow = h.nonfinite_layers == 0 && !(total_sumsq <= kFp32MaxSumsq);
  if (h.nonfinite_layers > 0) {
    h.layer = first_in_backward_order(grads.size(), position, [&](size_t i) { return grads[i].nonfinite > 0; });
  } else if (h.overflow_layers > 0) {
    h.layer = first_in_backward_order(grads.size(), position, [&](size_t i) { return grads[i].sumsq > kFp32MaxSumsq; });
  } else if (h.norm_overflow || h.loss_nonfinite) {
    h.layer = largest;
  }
  return h;
}

std::string describe_health(const StepHealth& h, double loss, const std::vector<GradStats>& grads,
                            const std::vector<std::string>& names, bool name_layer) {
  std::string text = h.cause() + ":";
  const std::string of_layers = " of " + std::to_string(grads.size()) + " layers";
  if (h.nonfinite_layers > 0 && !name_layer) {
    text += " " + std::to_string(h.nonfinite_layers) + of_layers + " non-finite;";
  } else if (h.nonfinite_layers > 0) {
    text += " " + std::to_string(grads[h.layer].nonfinite) + " non-finite gradient values in " + names[h.layer] +
            " (first in backward order), " + std::to_string(h.nonfinite_layers) + of_layers + " non-finite;";
  }
  if (h.norm_overflow) text += " grad norm " + short_number(h.grad_norm) + " overflows float32 (above 1.8e19);";
  if (h.loss_nonfinite) text += " loss " + short_number(loss) + ";";
  if (h.nonfinite_layers == 0 && h.layer != StepHealth::kNoLayer && name_layer) {
    const std::string norm = " (norm " + short_number(std::sqrt(grads[h.layer].sumsq));
    text += h.overflow_layers > 0 ? " first in backward order to overflow: " + names[h.layer] + norm + ", " +
                                        std::to_string(h.overflow_layers) + of_layers + " overflow);"
                                  : " largest grad norm: " + names[h.layer] + norm + ");";
  }
  text.pop_back();
  return text;
}

}  // namespace keel::probe
