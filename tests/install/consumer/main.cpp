// Attaches the installed probe to a tiny model, trains a few steps and checks the records.
#include <keel/probe/probe.hpp>

#include <cstdio>

int main() {
  torch::nn::Linear model(4, 2);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  keel::probe::ProbeOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  keel::probe::Probe probe(*model, optimizer, options);
  for (int step = 0; step < 3; ++step) {
    optimizer.zero_grad();
    auto loss = model->forward(torch::ones({3, 4})).pow(2).mean();
    loss.backward();
    probe.step(loss);
  }
  const auto& record = probe.last_record();
  if (record.step != 2 || record.layer_count != 2 || !(record.grad_norm > 0)) {
    std::fprintf(stderr, "consumer: unexpected record (step %lld, %u layers)\n",
                 static_cast<long long>(record.step), record.layer_count);
    return 1;
  }
  std::printf("consumer: keel probe OK on %s, grad_norm %.4f\n", probe.bound_endpoint().c_str(), record.grad_norm);
  return 0;
}
