// The model's floating-point buffers, as the probe watches them.
//
// What it is for: BatchNorm's running_mean and running_var (and any float buffer a module
// registers) are written by the forward pass, not by the optimizer. A poisoned batch makes
// them inf while every gradient stays finite, and the model is then broken in eval mode and
// in every checkpoint. One entry per tensor, under its first name (as parameters_of); integer
// buffers (num_batches_tracked) are left out.
// Threads: the training thread. Never: touches tensor values.
#pragma once

#include <string>
#include <vector>

#include <torch/torch.h>

#include "keel/probe/trained_model.hpp"

namespace keel::probe {

struct ModelBuffers {
  std::vector<std::string> names;       // named_buffers() order, each tensor once
  std::vector<torch::Tensor> tensors;   // the buffers themselves (not copies)

  // The same buffers under the same names: the probe follows the model without planning again.
  bool same_as(const ModelBuffers& other) const;
};

// The model's floating-point buffers now (TrainedModel::named_buffers).
ModelBuffers float_buffers_of(TrainedModel& model);

}  // namespace keel::probe
