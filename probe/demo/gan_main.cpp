// keel-demo-gan: a small GAN (a generator and a discriminator, each with BatchNorm) trained on
// a synthetic 8-dimensional Gaussian mixture, with one keel probe per model, on two
// endpoints. The example of docs/cpp.md's "Several models in one process": the two runs carry
// their own model names, and the generator's backward writes into the discriminator's
// gradients without confusing either probe. --poison-batch feeds the discriminator one batch
// of 1e30 values, which makes its BatchNorm running_var Inf while every gradient stays finite.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

#include <torch/torch.h>

#include "keel/probe/probe.hpp"

namespace {

constexpr int64_t kNoise = 16;
constexpr int64_t kData = 8;
constexpr int64_t kHidden = 32;

struct GeneratorImpl : torch::nn::Module {
  GeneratorImpl() {
    project = register_module("project", torch::nn::Linear(kNoise, kHidden));
    norm = register_module("norm", torch::nn::BatchNorm1d(kHidden));
    out = register_module("out", torch::nn::Linear(kHidden, kData));
  }
  torch::Tensor forward(const torch::Tensor& z) { return out(torch::relu(norm(project(z)))); }
  torch::nn::Linear project{nullptr}, out{nullptr};
  torch::nn::BatchNorm1d norm{nullptr};
};
TORCH_MODULE(Generator);

struct DiscriminatorImpl : torch::nn::Module {
  DiscriminatorImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(kData, kHidden));
    bn1 = register_module("bn1", torch::nn::BatchNorm1d(kHidden));
    fc2 = register_module("fc2", torch::nn::Linear(kHidden, kHidden));
    score = register_module("score", torch::nn::Linear(kHidden, 1));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    const auto h = torch::leaky_relu(bn1(fc1(x)), 0.2);
    return score(torch::leaky_relu(fc2(h), 0.2));
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, score{nullptr};
  torch::nn::BatchNorm1d bn1{nullptr};
};
TORCH_MODULE(Discriminator);

// A batch of the real distribution: four Gaussian clusters.
torch::Tensor real_batch(int64_t batch) {
  const auto centre = torch::randint(0, 4, {batch, 1}).to(torch::kFloat);
  return torch::randn({batch, kData}) * 0.3 + centre - 1.5;
}

torch::Tensor bce(const torch::Tensor& logits, float target) {
  return torch::binary_cross_entropy_with_logits(logits, torch::full_like(logits, target));
}

void print_events(const keel::probe::Probe& probe, const char* model) {
  for (const auto& e : probe.last_events()) {
    std::printf("keel-demo-gan: step %lld %s event %s %s: %s\n", static_cast<long long>(e.step), model, e.kind.c_str(),
                e.layer.c_str(), e.detail.c_str());
  }
  // Events are rare and are what a watching person (or test) waits for: never buffered.
  if (!probe.last_events().empty()) std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"keel-demo-gan: a small GAN with one keel probe per model"};
  int64_t steps = 2000, log_every = 50, batch = 64, poison_step = -1, seed = 0;
  double pace = 0;
  keel::probe::ProbeOptions d_options, g_options;
  d_options.endpoint = "tcp://127.0.0.1:6411";
  g_options.endpoint = "tcp://127.0.0.1:6413";
  std::string dump_dir = "keel-dumps";
  std::string record_dir = "keel-runs";
  app.add_option("--steps", steps, "training steps (0 = run until interrupted)")->capture_default_str();
  app.add_option("--discriminator-endpoint", d_options.endpoint, "the discriminator probe's telemetry endpoint")
      ->capture_default_str();
  app.add_option("--generator-endpoint", g_options.endpoint, "the generator probe's telemetry endpoint")
      ->capture_default_str();
  app.add_option("--batch", batch, "samples per batch")->check(CLI::Range(int64_t{2}, int64_t{1} << 16))->capture_default_str();
  app.add_option("--seed", seed, "random seed")->capture_default_str();
  app.add_option("--pace", pace, "at most this many steps per second (0 = as fast as possible)")->capture_default_str();
  app.add_option("--log-every", log_every, "print both losses every N steps (0 = never)")->capture_default_str();
  app.add_option("--poison-batch", poison_step, "STEP: the discriminator's real batch is 1e30 at that step");
  app.add_option("--dump-dir", dump_dir, "directory both probes write dumps into")->capture_default_str();
  app.add_option("--record-dir", record_dir, "directory both probes record their runs into; \"\" records nothing")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    torch::manual_seed(static_cast<uint64_t>(seed));
    Generator generator;
    Discriminator discriminator;
    torch::optim::Adam g_opt(generator->parameters(), torch::optim::AdamOptions(2e-4).betas({0.5, 0.999}));
    torch::optim::Adam d_opt(discriminator->parameters(), torch::optim::AdamOptions(2e-4).betas({0.5, 0.999}));
    // Two probes, two endpoints, one dump directory: the model names tell runs and dumps apart.
    d_options.model = "discriminator";
    g_options.model = "generator";
    d_options.dump_dir = g_options.dump_dir = dump_dir;
    d_options.record_dir = g_options.record_dir = record_dir;
    keel::probe::Probe d_probe(*discriminator, d_opt, d_options);
    keel::probe::Probe g_probe(*generator, g_opt, g_options);
    std::printf("keel-demo-gan: discriminator on %s (run %s), generator on %s (run %s)\n",
                d_probe.bound_endpoint().c_str(), d_probe.description().run_id.c_str(),
                g_probe.bound_endpoint().c_str(), g_probe.description().run_id.c_str());
    std::fflush(stdout);

    const auto start = std::chrono::steady_clock::now();
    for (int64_t step = 0; steps == 0 || step < steps; ++step) {
      if (pace > 0) std::this_thread::sleep_until(start + std::chrono::duration<double>(step / pace));
      // The discriminator's step: real against generated, the generator held still (detach).
      d_opt.zero_grad();
      const torch::Tensor real = real_batch(batch) * (step == poison_step ? 1e30 : 1.0);
      const torch::Tensor fake = generator->forward(torch::randn({batch, kNoise}));
      const torch::Tensor d_loss = bce(discriminator->forward(real), 1.0f) + bce(discriminator->forward(fake.detach()), 0.0f);
      d_loss.backward();
      d_probe.step(d_loss);
      print_events(d_probe, "discriminator");
      // The generator's step: its backward passes through the discriminator and writes into
      // that model's gradients too, which the discriminator's next zero_grad() clears.
      g_opt.zero_grad();
      const torch::Tensor g_loss = bce(discriminator->forward(fake), 1.0f);
      g_loss.backward();
      g_probe.step(g_loss);
      print_events(g_probe, "generator");
      if (log_every > 0 && (step % log_every == 0 || step + 1 == steps)) {
        std::printf("step %lld discriminator loss %.9g generator loss %.9g\n", static_cast<long long>(step),
                    d_loss.item<double>(), g_loss.item<double>());
        std::fflush(stdout);
      }
    }
  } catch (const keel::probe::AttachError& e) {
    std::cerr << "keel-demo-gan: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "keel-demo-gan: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
