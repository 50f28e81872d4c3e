// OptimizerAdapter: what the probe reads of, and asks of, the optimizer it steps.
//
// What it is for: the probe's core steps and measures any optimizer through it. The C++ front
// (front/libtorch_optimizer.hpp) adapts a torch::optim::Optimizer; the Python front a
// torch.optim one. The core reads the groups' tensors and hyperparameters (the layers the
// optimizer steps that the model lacks, the lr of the record, the update rules that rebuild an
// update without a copy of W: reduce/update_rules.hpp), each tensor's state after a step, and
// asks for the step itself: the optimizer's own, or the deferred one that reads the probe's
// verdict on the device (DESIGN §8).
// Threads: the training thread only.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace keel::probe {

// The optimizers whose updates the probe can rebuild (and step deferred); kOther: any other.
enum class OptimizerKind { kSgd, kAdam, kAdamW, kOther };

// A parameter group's hyperparameters as its next step reads them (read again at every step:
// a schedule changes them). The fields of other kinds keep their defaults.
struct GroupHyperparameters {
  double lr = 0;
  double weight_decay = 0;
  bool maximize = false;
  // SGD
  double momentum = 0;
  double dampening = 0;
  bool nesterov = false;
  // Adam, AdamW
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  bool amsgrad = false;
};

// A parameter's state after its optimizer's last step; `present` false: it has none yet.
struct ParamStateView {
  bool present = false;
  int64_t step = 0;                    // Adam, AdamW: steps taken
  torch::Tensor exp_avg, exp_avg_sq;   // Adam, AdamW
  torch::Tensor max_exp_avg_sq;        // amsgrad
  torch::Tensor momentum_buffer;       // SGD with momentum
};

// A parameter's optimizer state as tensors (OptimizerAdapter::state_tensors): `count` its step
// count (Adam's steps; 0 for a state without one, or one its front does not keep on the host),
// -1 when it has no state yet; `tensors` in the order its front gives for its kind (libtorch's
// Adam: exp_avg, exp_avg_sq, max_exp_avg_sq; the Python front's adds the step tensor; SGD:
// momentum_buffer), undefined where the state holds none. Only the front that handed them out
// reads them back.
struct OptimizerStateTensors {
  int64_t count = -1;
  std::vector<torch::Tensor> tensors;
};

class OptimizerAdapter {
 public:
  virtual ~OptimizerAdapter() = default;
  // Called as each step() begins (and once at attach), before anything below is read: a front
  // that mirrors its optimizer's groups (the Python one) reads them again here, so that the
  // references group_params() hands out stay valid until the next call. A schedule or the
  // user may have changed them since the last step.
  virtual void begin_step() {}
  virtual OptimizerKind kind() const = 0;
  virtual size_t group_count() const = 0;
  // The tensors group `group` steps, in its order.
  virtual const std::vector<torch::Tensor>& group_params(size_t group) const = 0;
  virtual GroupHyperparameters hyperparameters(size_t group) const = 0;
  // Read for every tensor after each step (the update rules): with no wait on a device (the
  // Python front keeps on the host the step counts a fused Adam keeps on the device).
  virtual ParamStateView state_of(const torch::Tensor& param) const = 0;
  // The optimizer's own step. Its exceptions propagate to the user.
  virtual void step() = 0;

  // The deferred step (DESIGN §8), skipped on the device when found_inf (float32, one element,
  // on `device`) is 1. supports_deferred_step says whether the next step can be taken so on
  // `device`, and when not, `why`. deferred_step throws before anything is counted, created
  // or enqueued where it cannot (the caller then takes step() instead); after it,
  // deferred_step_enqueued() says whether kernels were enqueued (a step() must not follow),
  // and settle_deferred_step(applied) is called once the verdict is known on the host.
  virtual bool supports_deferred_step(const torch::Device& device, std::string& why) = 0;
  virtual void deferred_step(const torch::Tensor& found_inf) = 0;
  virtual bool deferred_step_enqueued() const = 0;
  virtual void settle_deferred_step(bool applied) = 0;

  // The bytes of a dump's optimizer.pt, which the front's own loader reads back.
  virtual std::string serialise() = 0;

  // Rewind (snapshot/state_snapshots.hpp). state_tensors: every parameter of the groups, in
  // group order, with its state as the live tensors it keeps, which a snapshot copies; false
  // (and `why`) where the adapter cannot hand its state out so, and the snapshot keeps
  // serialise()'s bytes instead. restore_state_tensors puts back what state_tensors handed out
  // (copied, on the host): each parameter's state is set to it, or removed where it had none,
  // so the next step() goes on as it would have from there. restore_serialised puts back
  // serialise()'s bytes. Both throw what they cannot do, having changed nothing or all.
  virtual bool state_tensors(std::vector<OptimizerStateTensors>& out, std::string& why) {
    out.clear();
    why = "this optimizer's front does not hand its state out as tensors";
    return false;
  }
  virtual void restore_state_tensors(const std::vector<OptimizerStateTensors>& /*from*/) {
    throw std::runtime_error("this optimizer's front cannot put a state back from tensors");
  }
  virtual void restore_serialised(const std::string& /*bytes*/) {
    throw std::runtime_error("this optimizer's front cannot put a serialised state back");
  }
  // A rewind's learning-rate cut (ProbeOptions::rewind_lr_factor): every group's learning rate
  // multiplied by `factor`, read back by the next hyperparameters(). Throws what it cannot do.
  virtual void scale_learning_rates(double /*factor*/) {
    throw std::runtime_error("this optimizer's front cannot change its learning rate");
  }
};

}  // namespace keel::probe
