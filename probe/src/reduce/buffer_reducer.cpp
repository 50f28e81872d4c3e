#include "buffer_reducer.hpp"

#include <limits>
#include <stdexcept>
#include <utility>

namespace keel::probe {
namespace {

// max |b| as the fused passes report it: NaN when any value is NaN, else +Inf when any is
// infinite (torch's max propagates NaN; |x| makes -Inf +Inf).
torch::Tensor absmax_on_device(const torch::Tensor& t) {
  if (t.numel() == 0) return torch::zeros({}, t.options().dtype(torch::kFloat));
  return t.detach().abs().max().to(torch::kFloat);
}

}  // namespace

BufferReducer::BufferReducer(std::vector<torch::Tensor> buffers) : buffers_(std::move(buffers)) {}

void BufferReducer::enqueue() {
  torch::NoGradGuard no_grad;
  pending_ = false;
  host_.assign(buffers_.size(), 0.0f);
  for (auto& [index, part] : devices_) {
    part.buffers.clear();
    part.tensors.clear();
  }
  spans_.clear();
  span_of_.clear();
  generic_.clear();
  generic_rows_.clear();
  for (size_t i = 0; i < buffers_.size(); ++i) {
    const torch::Tensor& b = buffers_[i];
    if (b.is_cpu() && b.scalar_type() == torch::kFloat && b.is_contiguous() && !b.is_sparse()) {
      spans_.push_back(ConstSpan{b.data_ptr<float>(), b.numel()});
      span_of_.push_back(i);
    } else if (device_pass_accepts(b)) {
      DevicePart& part = devices_[b.device().index()];
      part.buffers.push_back(i);
      part.tensors.push_back(b);
    } else if (b.is_cpu()) {
      host_[i] = absmax_on_device(b).item<float>();
    } else {
      generic_.push_back(i);
      generic_rows_.push_back(absmax_on_device(b));
    }
  }
  // The device passes first, so the GPU works while the host measures its own buffers.
  for (auto& [index, part] : devices_) {
    if (part.buffers.empty()) continue;
    if (!part.pass) part.pass = make_device_grad_pass(index);
    part.pass->enqueue(part.tensors, 1.0f);
    part.pass->finish(nullptr);
  }
  if (!spans_.empty()) {
    fused_.grad_stats(spans_, stats_);
    for (size_t k = 0; k < spans_.size(); ++k) host_[span_of_[k]] = stats_[k].absmax;
  }
  pending_ = true;
}

void BufferReducer::collect(std::vector<float>& absmax) {
  if (!pending_) throw std::logic_error("keel: no buffer pass to collect");
  pending_ = false;
  absmax = host_;
  for (auto& [index, part] : devices_) {
    if (part.buffers.empty()) continue;
    part.pass->collect(stats_);
    for (size_t k = 0; k < part.buffers.size(); ++k) absmax[part.buffers[k]] = stats_[k].absmax;
    part.tensors.clear();   // the pass is read: the buffers need not be held for it
  }
  // Rare (a strided or unusual device buffer): a wait each, as GenericReductions.
  for (size_t k = 0; k < generic_.size(); ++k) absmax[generic_[k]] = generic_rows_[k].item<float>();
  generic_rows_.clear();
}

}  // namespace keel::probe
