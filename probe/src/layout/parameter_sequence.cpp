#include "parameter_sequence.hpp"

namespace keel::probe {

void parameter_sequence(TrainedModel& model, const OptimizerAdapter* optimizer, std::vector<const void*>& out,
                        std::vector<const void*>* float_buffers) {
  model.identities(out, float_buffers);
  if (optimizer == nullptr) return;
  for (size_t g = 0; g < optimizer->group_count(); ++g) {
    out.push_back(nullptr);   // a group's start: a parameter moved between groups is a change
    for (const auto& p : optimizer->group_params(g)) out.push_back(p.unsafeGetTensorImpl());
  }
}

}  // namespace keel::probe
