#include "model/job_grad_norm.hpp"

#include <cmath>

namespace keel::app {

void JobGradNorm::store(int32_t world_size, int64_t step, double sumsq) {
  if (world_size != world_size_ || (series_ && step <= series_->last_step())) series_.reset();
  world_size_ = world_size;
  if (!series_) series_.emplace(step, config_);
  series_->append(step, static_cast<float>(std::sqrt(sumsq)));   // NaN and Inf carry through
}

}  // namespace keel::app
