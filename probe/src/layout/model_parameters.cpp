#include "model_parameters.hpp"

#include <algorithm>
#include <utility>

namespace keel::probe {

ModelParameters parameters_of(TrainedModel& model, const OptimizerAdapter* optimizer) {
  NamedTensors named;
  model.named_parameters(named);
  const size_t n = named.size();
  // Names grouped by tensor (sorted once, no per-name lookup): each name's first name.
  std::vector<std::pair<const void*, size_t>> by_tensor(n);
  for (size_t i = 0; i < n; ++i) by_tensor[i] = {named[i].second.unsafeGetTensorImpl(), i};
  std::sort(by_tensor.begin(), by_tensor.end());
  std::vector<size_t> first_name(n);
  for (size_t k = 0; k < n; ++k) {
    const bool starts_group = k == 0 || by_tensor[k].first != by_tensor[k - 1].first;
    first_name[by_tensor[k].second] = starts_group ? by_tensor[k].second : first_name[by_tensor[k - 1].second];
  }
  ModelParameters out;
  std::vector<size_t> entry_of(n, 0);
  for (size_t i = 0; i < n; ++i) {
    if (first_name[i] == i) {
      entry_of[i] = out.params.size();
      out.params.push_back(std::move(named[i]));
      out.aliases.emplace_back();
    } else {
      out.aliases[entry_of[first_name[i]]].push_back(std::move(named[i].first));
    }
  }
  if (optimizer == nullptr) return out;
  for (size_t g = 0; g < optimizer->group_count(); ++g) {
    const auto& params = optimizer->group_params(g);
    for (size_t k = 0; k < params.size(); ++k) {
      // by_tensor grows as the optimizer's own are found: one listed twice is one layer.
      const std::pair<const void*, size_t> key{params[k].unsafeGetTensorImpl(), 0};
      const auto at = std::lower_bound(by_tensor.begin(), by_tensor.end(), key,
                                       [](const auto& a, const auto& b) { return a.first < b.first; });
      if (at != by_tensor.end() && at->first == key.first) continue;
      by_tensor.insert(at, key);
      out.params.emplace_back("optimizer.param_groups." + std::to_string(g) + ".params." + std::to_string(k), params[k]);
      out.aliases.emplace_back();
    }
  }
  return out;
}

}  // namespace keel::probe
