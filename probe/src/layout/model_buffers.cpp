#include "model_buffers.hpp"

#include <unordered_set>

namespace keel::probe {

bool ModelBuffers::same_as(const ModelBuffers& other) const {
  if (names != other.names || tensors.size() != other.tensors.size()) return false;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].is_same(other.tensors[i])) return false;
  }
  return true;
}

ModelBuffers float_buffers_of(TrainedModel& model) {
  ModelBuffers out;
  std::unordered_set<const void*> seen;
  NamedTensors named_buffers;
  model.named_buffers(named_buffers);
  for (const auto& [name, t] : named_buffers) {
    if (!t.defined() || !t.is_floating_point()) continue;
    if (!seen.insert(t.unsafeGetTensorImpl()).second) continue;
    out.names.push_back(name);
    out.tensors.push_back(t);
  }
  return out;
}

}  // namespace keel::probe
