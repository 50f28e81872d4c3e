#include "rerun_point.hpp"

#include <mutex>

namespace keel::probe {

void RerunPoint::capture(const std::vector<torch::Tensor>& buffers, const std::vector<c10::Device>& devices) {
  generators_.clear();
  states_.clear();
  generators_.push_back(at::globalContext().defaultGenerator(c10::DeviceType::CPU));
  for (const c10::Device& device : devices) {
    if (device.is_cuda()) generators_.push_back(at::globalContext().defaultGenerator(device));
  }
  for (at::Generator& generator : generators_) {
    std::lock_guard<std::mutex> lock(generator.mutex());
    states_.push_back(generator.get_state());
  }
  torch::NoGradGuard no_grad;
  if (copies_.size() != buffers.size()) copies_.assign(buffers.size(), torch::Tensor());
  buffers_ = buffers;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const torch::Tensor& b = buffers[i];
    if (!copies_[i].defined() || copies_[i].sizes() != b.sizes() || copies_[i].options().dtype() != b.options().dtype() ||
        copies_[i].device() != b.device()) {
      copies_[i] = torch::empty_like(b, torch::MemoryFormat::Contiguous);
    }
    copies_[i].copy_(b);
  }
}

void RerunPoint::restore() const {
  for (size_t i = 0; i < generators_.size(); ++i) {
    at::Generator generator = generators_[i];
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(states_[i]);
  }
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < buffers_.size(); ++i) buffers_[i].copy_(copies_[i]);
}

}  // namespace keel::probe
