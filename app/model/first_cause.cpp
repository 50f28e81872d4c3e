#include "model/first_cause.hpp"

namespace keel::app {

std::string cause_sentence(const wire::Event& first_nonfinite) {
  return first_nonfinite.cause ? first_nonfinite.cause->sentence : std::string();
}

bool cause_is_about(const wire::Event& first_nonfinite, const std::string& layer) {
  if (!first_nonfinite.cause || layer.empty()) return false;
  if (first_nonfinite.layer == layer) return true;
  const std::string& module = first_nonfinite.cause->module;
  if (module.empty()) return false;
  return layer == module || (layer.size() > module.size() && layer.compare(0, module.size(), module) == 0 &&
                             layer[module.size()] == '.');
}

}  // namespace keel::app
