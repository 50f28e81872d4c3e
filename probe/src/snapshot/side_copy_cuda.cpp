// SideCopy on a CUDA device (built with KEEL_PROBE_CUDA): a stream from libtorch's pool and two
// events, made once.
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "side_copy.hpp"

namespace keel::probe {
namespace {

class CudaSideCopy final : public SideCopy {
 public:
  explicit CudaSideCopy(int device_index)
      : device_(static_cast<c10::DeviceIndex>(device_index)),
        side_(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device_)) {}

  void copy(const std::function<void()>& copies) override {
    const c10::cuda::CUDAGuard guard(device_);
    ready_.record(c10::cuda::getCurrentCUDAStream(device_));
    ready_.block(side_);
    {
      const c10::cuda::CUDAStreamGuard on_side(side_);
      copies();
    }
    done_.record(side_);
    in_flight_ = true;
  }

  void order_current_after() override {
    if (!in_flight_) return;
    done_.block(c10::cuda::getCurrentCUDAStream(device_));
    in_flight_ = false;
  }

  void wait() override {
    if (done_.isCreated()) done_.synchronize();
  }

 private:
  c10::DeviceIndex device_;
  c10::cuda::CUDAStream side_;
  at::cuda::CUDAEvent ready_, done_;
  bool in_flight_ = false;
};

}  // namespace

std::unique_ptr<SideCopy> make_side_copy(int device_index) { return std::make_unique<CudaSideCopy>(device_index); }

}  // namespace keel::probe
