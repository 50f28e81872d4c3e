// The C++ front: a Probe over a libtorch module and optimizer, through their adapters.
#include "front/libtorch_model.hpp"
#include "front/libtorch_optimizer.hpp"
#include "keel/probe/probe.hpp"

namespace keel::probe {

Probe::Probe(torch::nn::Module& model, torch::optim::Optimizer& optimizer, ProbeOptions options)
    : Probe(std::make_unique<LibtorchModel>(model), std::make_unique<LibtorchOptimizer>(optimizer), std::move(options)) {}

}  // namespace keel::probe
