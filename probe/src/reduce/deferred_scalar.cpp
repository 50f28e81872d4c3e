#include "deferred_scalar.hpp"

namespace keel::probe {

void DeferredScalar::start(const torch::Tensor& t, bool piggyback) {
  deferred_ = piggyback;
  if (!piggyback) {
    value_ = t.item<double>();
    return;
  }
  if (!pinned_.defined() || pinned_.scalar_type() != t.scalar_type()) {
    pinned_ = torch::empty({1}, torch::TensorOptions().dtype(t.scalar_type()).pinned_memory(true));
  }
  pinned_.copy_(t.detach().reshape({1}), /*non_blocking=*/true);
}

double DeferredScalar::value() const { return deferred_ ? pinned_.item<double>() : value_; }

}  // namespace keel::probe
