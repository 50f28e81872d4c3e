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

ModelBuffers float_buffers_of(torch::nn::Module& model) {
  ModelBuffers out;
  std::unordered_set<const void*> seen;
  for (const auto& named : model.named_buffers(/*recurse=*/true)) {
    const torch::Tensor& t = named.value();
    if (!t.defined() || !t.is_floating_point()) continue;
    if (!seen.insert(t.unsafeGetTensorImpl()).second) continue;
    out.names.push_back(named.key());
    out.tensors.push_back(t);
  }
  return out;
}

void all_buffers(const torch::nn::Module& model, std::vector<torch::Tensor>& out) {
  out.clear();
  model.apply([&out](const torch::nn::Module& module) {
    for (const auto& buffer : module.named_buffers(/*recurse=*/false)) {
      if (buffer.value().defined()) out.push_back(buffer.value());
    }
  });
}

}  // namespace keel::probe
