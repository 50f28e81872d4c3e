#include "fused_step.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <utility>
#include <stdexcept>

#include "keel/probe/torch_compat.hpp"

namespace keel::probe {
namespace {

bool fused_type(torch::ScalarType t) { return t == torch::kFloat || t == torch::kDouble || t == torch::kBFloat16 || t == torch::kHalf; }

// ATen's fused kernels take a call's tensors only of one element type and device, strided,
// non-overlapping and dense, and each laid out as its parameter (sizes, and strides where a
// size is not 1: their check_fast_path_restrictions). They check after the step has been
// counted, so what they would refuse is refused here first.
bool laid_out_as(const torch::Tensor& t, const torch::Tensor& p) {
  if (!t.defined() || t.scalar_type() != p.scalar_type() || t.device() != p.device() || t.layout() != torch::kStrided ||
      !t.is_non_overlapping_and_dense() || t.sizes() != p.sizes()) {
    return false;
  }
  for (int64_t d = 0; d < p.dim(); ++d) {
    if (p.size(d) != 1 && t.stride(d) != p.stride(d)) return false;
  }
  return true;
}

bool stepped_here(const torch::Tensor& p, const torch::Device& device, std::string& why) {
  const auto& g = p.grad();
  if (!g.defined()) return true;
  if (p.device() != device || p.is_sparse() || g.is_sparse()) {
    why = "a parameter is not a dense tensor on the device of the others";
    return false;
  }
  if (!fused_type(p.scalar_type()) || g.scalar_type() != p.scalar_type()) {
    why = "a parameter is not fp32, fp64, bf16 or fp16 with a gradient of its type";
    return false;
  }
  if (!laid_out_as(p, p) || !laid_out_as(g, p)) {
    why = "a parameter is not dense (non-overlapping) or its gradient is laid out differently";
    return false;
  }
  return true;
}

// The state a parameter already has (a step creates what is missing, laid out as it), as the
// kernels need it: Adam's moments (and the max for amsgrad), SGD's momentum buffer.
bool state_laid_out_as(torch::optim::Optimizer& optimizer, const torch::optim::OptimizerParamGroup& group,
                       const torch::Tensor& p, std::string& why) {
  const auto found = optimizer.state().find(compat::optimizer_state_key(p));
  if (found == optimizer.state().end() || !p.grad().defined()) return true;
  bool ok = false;
  const auto* state = found->second.get();
  if (const auto* s = dynamic_cast<const torch::optim::AdamWParamState*>(state)) {
    const auto* o = dynamic_cast<const torch::optim::AdamWOptions*>(&group.options());
    ok = o != nullptr && laid_out_as(s->exp_avg(), p) && laid_out_as(s->exp_avg_sq(), p) &&
         (!o->amsgrad() || laid_out_as(s->max_exp_avg_sq(), p));
  } else if (const auto* s = dynamic_cast<const torch::optim::AdamParamState*>(state)) {
    const auto* o = dynamic_cast<const torch::optim::AdamOptions*>(&group.options());
    ok = o != nullptr && laid_out_as(s->exp_avg(), p) && laid_out_as(s->exp_avg_sq(), p) &&
         (!o->amsgrad() || laid_out_as(s->max_exp_avg_sq(), p));
  } else if (const auto* s = dynamic_cast<const torch::optim::SGDParamState*>(state)) {
    ok = laid_out_as(s->momentum_buffer(), p);
  }
  if (!ok) why = "a parameter's optimizer state is not laid out as the parameter (element type, device, sizes, strides)";
  return ok;
}

#if KEEL_TORCH_HAS_FUSED_OPTIMIZERS
// The tensors of one fused call: one parameter group's parameters of one element type (and,
// for SGD with momentum, whether their buffers are new: the kernel's first-step mode is per call).
struct Batch {
  std::vector<torch::Tensor> params, grads, first, second, max_second;
  std::vector<float> steps;   // each parameter's step count after this step (Adam, AdamW)
};

// One fused kernel call, its tensors gathered and its state made: enqueued only once every
// call of the step is prepared, so a failure while preparing (out of memory for new state)
// can be taken back with nothing enqueued.
using Launch = std::function<void()>;

// Adam and AdamW: the state libtorch would create, the step counted, the batch filled.
template <class ParamState>
void add_adam(torch::optim::Optimizer& optimizer, const torch::Tensor& p, bool amsgrad, Batch& batch,
              std::vector<torch::Tensor>& counted, std::vector<torch::Tensor>& created) {
  auto& state = optimizer.state();
  const auto key = compat::optimizer_state_key(p);
  auto found = state.find(key);
  if (found == state.end()) {
    auto fresh = std::make_unique<ParamState>();
    fresh->step(0);
    fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    if (amsgrad) fresh->max_exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    found = state.emplace(key, std::move(fresh)).first;
    created.push_back(p);
  } else {
    counted.push_back(p);
  }
  auto& s = static_cast<ParamState&>(*found->second);
  s.step(s.step() + 1);
  batch.params.push_back(p);
  batch.grads.push_back(p.grad());
  batch.first.push_back(s.exp_avg());
  batch.second.push_back(s.exp_avg_sq());
  if (amsgrad) batch.max_second.push_back(s.max_exp_avg_sq());
  batch.steps.push_back(static_cast<float>(s.step()));
}

// The step counts of a batch as the kernel reads them: 0-dim float32 views of one tensor on
// `device`, uploaded to a CUDA device from pinned memory (the caching host allocator keeps the
// staging buffer until the copy has run).
std::vector<torch::Tensor> device_steps(const Batch& batch, const torch::Device& device) {
  const bool cuda = device.is_cuda();
  auto staging = torch::empty({static_cast<int64_t>(batch.steps.size())},
                              torch::TensorOptions().dtype(torch::kFloat).pinned_memory(cuda));
  std::copy(batch.steps.begin(), batch.steps.end(), staging.data_ptr<float>());
  auto on_device = cuda ? staging.to(device, /*non_blocking=*/true) : staging;
  std::vector<torch::Tensor> steps;
  for (int64_t i = 0; i < on_device.numel(); ++i) steps.push_back(on_device.select(0, i));
  return steps;
}
// One parameter group of an Adam or AdamW: its state made and counted, its step counts
// uploaded, and one fused call per element type prepared. `kernel` is at::_fused_adam_ or
// at::_fused_adamw_ (the same arguments).
template <class Options, class ParamState, class Kernel>
void prepare_adam_group(torch::optim::Optimizer& optimizer, torch::optim::OptimizerParamGroup& group,
                        const torch::Tensor& found_inf, std::vector<torch::Tensor>& counted,
                        std::vector<torch::Tensor>& created, Kernel kernel, std::vector<Launch>& launches) {
  const auto o = static_cast<const Options&>(group.options());
  std::map<torch::ScalarType, Batch> batches;
  for (const auto& p : group.params()) {
    if (p.grad().defined()) add_adam<ParamState>(optimizer, p, o.amsgrad(), batches[p.scalar_type()], counted, created);
  }
  for (auto& [type, b] : batches) {
    std::vector<torch::Tensor> steps = device_steps(b, found_inf.device());
    launches.push_back([b = std::move(b), steps = std::move(steps), o, found_inf, kernel] {
      kernel(at::TensorList(b.params), at::TensorList(b.grads), at::TensorList(b.first), at::TensorList(b.second),
             at::TensorList(b.max_second), at::TensorList(steps), o.lr(), std::get<0>(o.betas()), std::get<1>(o.betas()),
             o.weight_decay(), o.eps(), o.amsgrad(), /*maximize=*/false, /*grad_scale=*/std::optional<at::Tensor>(),
             std::optional<at::Tensor>(found_inf));
    });
  }
}

// One parameter group of an SGD: momentum buffers libtorch would create made here (zeroed; the
// kernel's first-step mode makes them the gradient, as libtorch's clone does), and one fused
// call per element type and kind of buffer prepared.
void prepare_sgd_group(torch::optim::Optimizer& optimizer, torch::optim::OptimizerParamGroup& group,
                       const torch::Tensor& found_inf, std::vector<torch::Tensor>& created, std::vector<Launch>& launches) {
  const auto o = static_cast<const torch::optim::SGDOptions&>(group.options());
  std::map<std::pair<torch::ScalarType, bool>, Batch> batches;   // (type, first step) -> batch
  for (const auto& p : group.params()) {
    if (!p.grad().defined()) continue;
    bool first_step = false;
    torch::Tensor buffer;
    if (o.momentum() != 0) {
      auto& state = optimizer.state();
      const auto key = compat::optimizer_state_key(p);
      auto found = state.find(key);
      if (found == state.end()) {
        auto fresh = std::make_unique<torch::optim::SGDParamState>();
        fresh->momentum_buffer(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        found = state.emplace(key, std::move(fresh)).first;
        created.push_back(p);
        first_step = true;
      }
      buffer = static_cast<torch::optim::SGDParamState&>(*found->second).momentum_buffer();
    }
    Batch& b = batches[{p.scalar_type(), first_step}];
    b.params.push_back(p);
    b.grads.push_back(p.grad());
    if (buffer.defined()) b.first.push_back(buffer);
  }
  for (auto& [kind, b] : batches) {
    launches.push_back([b = std::move(b), first_step = kind.second, o, found_inf] {
      at::_fused_sgd_(b.params, b.grads, b.first, o.weight_decay(), o.momentum(), o.lr(), o.dampening(), o.nesterov(),
                      /*maximize=*/false, /*is_first_step=*/first_step, /*grad_scale=*/std::nullopt, found_inf);
    });
  }
}
#endif

}  // namespace

bool FusedOptimizerStep::available() { return KEEL_TORCH_HAS_FUSED_OPTIMIZERS != 0; }

bool FusedOptimizerStep::supports(torch::optim::Optimizer& optimizer, const torch::Device& device, std::string& why) {
  if (!available()) {
    why = "this libtorch has no fused optimizer kernels (2.3 and later have them)";
    return false;
  }
  if (device.is_cpu() && !KEEL_TORCH_HAS_CPU_FUSED_OPTIMIZERS) {
    why = "this libtorch has no fused optimizer kernels for the CPU (2.4 and later have them)";
    return false;
  }
  if (!device.is_cuda() && !device.is_cpu()) {
    why = "the fused optimizer kernels are for CUDA devices (and the CPU)";
    return false;
  }
  if (dynamic_cast<torch::optim::SGD*>(&optimizer) == nullptr && dynamic_cast<torch::optim::AdamW*>(&optimizer) == nullptr &&
      dynamic_cast<torch::optim::Adam*>(&optimizer) == nullptr) {
    why = "the optimizer is not AdamW, Adam or SGD";
    return false;
  }
  std::vector<const void*> tensors;
  for (auto& group : optimizer.param_groups()) {
    for (const auto& p : group.params()) {
      tensors.push_back(p.unsafeGetTensorImpl());
      if (!stepped_here(p, device, why) || !state_laid_out_as(optimizer, group, p, why)) return false;
    }
  }
  // A tensor listed twice (the optimizer built from libtorch's named_parameters() of a model
  // with a shared submodule): libtorch steps it twice, one after the other; one fused kernel
  // given it twice would race on it.
  std::sort(tensors.begin(), tensors.end());
  if (std::adjacent_find(tensors.begin(), tensors.end()) != tensors.end()) {
    why = "a parameter is in the optimizer twice";
    return false;
  }
  return true;
}

void FusedOptimizerStep::step(torch::optim::Optimizer& optimizer, const torch::Tensor& found_inf) {
#if KEEL_TORCH_HAS_FUSED_OPTIMIZERS
  std::string why;
  if (!supports(optimizer, found_inf.device(), why)) throw std::runtime_error("keel: fused step: " + why);
  torch::NoGradGuard no_grad;
  counted_.clear();
  created_.clear();
  enqueued_ = false;
  optimizer_ = &optimizer;
  const bool adamw = dynamic_cast<torch::optim::AdamW*>(&optimizer) != nullptr;
  const bool adam = dynamic_cast<torch::optim::Adam*>(&optimizer) != nullptr;
  std::vector<Launch> launches;
  try {
    for (auto& group : optimizer.param_groups()) {
      if (adamw) {
        prepare_adam_group<torch::optim::AdamWOptions, torch::optim::AdamWParamState>(
            optimizer, group, found_inf, counted_, created_, [](auto&&... args) { at::_fused_adamw_(args...); }, launches);
      } else if (adam) {
        prepare_adam_group<torch::optim::AdamOptions, torch::optim::AdamParamState>(
            optimizer, group, found_inf, counted_, created_, [](auto&&... args) { at::_fused_adam_(args...); }, launches);
      } else {
        prepare_sgd_group(optimizer, group, found_inf, created_, launches);
      }
    }
  } catch (...) {
    settle(/*applied=*/false);   // the counts and the state made so far go back: nothing was enqueued
    throw;
  }
  enqueued_ = true;
  for (const Launch& launch : launches) launch();
#else
  (void)optimizer;
  (void)found_inf;
  throw std::runtime_error("keel: fused step: this libtorch has no fused optimizer kernels");
#endif
}

void FusedOptimizerStep::settle(bool applied) {
  if (!applied && optimizer_ != nullptr) {
    auto& state = optimizer_->state();
    const bool adamw = dynamic_cast<torch::optim::AdamW*>(optimizer_) != nullptr;
    for (const auto& p : counted_) {
      auto& s = *state.at(compat::optimizer_state_key(p));
      if (adamw) {
        auto& a = static_cast<torch::optim::AdamWParamState&>(s);
        a.step(a.step() - 1);
      } else {
        auto& a = static_cast<torch::optim::AdamParamState&>(s);
        a.step(a.step() - 1);
      }
    }
    for (const auto& p : created_) state.erase(compat::optimizer_state_key(p));
  }
  counted_.clear();
  created_.clear();
}

}  // namespace keel::probe
