// The device passes where keel is built without the CUDA probe (libtorch without CUDA, or no
// nvcc): none, so GenericReductions measures every non-CPU tensor.
#include "device_passes.hpp"

namespace keel::probe {

std::unique_ptr<DeviceGradPass> make_device_grad_pass(int /*device_index*/) { return nullptr; }

std::unique_ptr<DeviceUpdatePass> make_device_update_pass(int /*device_index*/) { return nullptr; }

std::unique_ptr<DeviceWatch> make_device_watch(int /*device_index*/) { return nullptr; }

bool device_pass_accepts(const torch::Tensor& /*t*/) { return false; }

bool device_watch_accepts(const torch::Tensor& /*t*/) { return false; }

}  // namespace keel::probe
