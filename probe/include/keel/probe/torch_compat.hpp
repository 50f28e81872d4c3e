// torch_compat: the libtorch APIs that differ between Debian's libtorch 1.13 and the official
// libtorch 2.x, in one place, so the rest of keel (the probe, keel-demo, the tests) is written
// once for both.
// Threads: plain functions; they do what the libtorch call they wrap does.
// Never: hides a behaviour difference, only a spelling one.
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <string>

// ATen's fused optimizer kernels (at::_fused_adamw_, _fused_adam_, _fused_sgd_ with found_inf):
// all three from libtorch 2.3 on.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define KEEL_TORCH_HAS_FUSED_OPTIMIZERS 1
#else
#define KEEL_TORCH_HAS_FUSED_OPTIMIZERS 0
#endif
// The same three kernels for CPU tensors: from libtorch 2.4 on. keel steps CPU layers with
// libtorch's own step (a CPU step needs no device-side skip); its tests check
// FusedOptimizerStep on them where a machine has no GPU.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define KEEL_TORCH_HAS_CPU_FUSED_OPTIMIZERS 1
#else
#define KEEL_TORCH_HAS_CPU_FUSED_OPTIMIZERS 0
#endif

namespace keel::probe::compat {

// The key of a parameter's entry in torch::optim::Optimizer::state(): the address of its
// TensorImpl, as a string in 1.x and as the pointer itself in 2.x.
#if TORCH_VERSION_MAJOR >= 2
inline void* optimizer_state_key(const torch::Tensor& param) { return param.unsafeGetTensorImpl(); }
#else
inline std::string optimizer_state_key(const torch::Tensor& param) {
  return c10::guts::to_string(param.unsafeGetTensorImpl());
}
#endif

// Autocast on (to `dtype`) or off for one device type (CPU or CUDA). 2.x deprecates the
// device-specific switches for the device-generic ones, which 1.13 does not have.
inline void set_autocast(c10::DeviceType device_type, bool enabled, at::ScalarType dtype = at::kBFloat16) {
#if TORCH_VERSION_MAJOR >= 2
  at::autocast::set_autocast_enabled(device_type, enabled);
  if (enabled) at::autocast::set_autocast_dtype(device_type, dtype);
#else
  if (device_type == c10::DeviceType::CUDA) {
    at::autocast::set_enabled(enabled);
    if (enabled) at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_cpu_enabled(enabled);
    if (enabled) at::autocast::set_autocast_cpu_dtype(dtype);
  }
#endif
}

}  // namespace keel::probe::compat
