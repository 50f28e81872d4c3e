// keel-demo: a real char-level transformer trained on real text, instrumented with the keel
// probe, with fault injection to make instabilities on demand.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "keel/probe/probe.hpp"
#include "demo_causes.hpp"
#include "demo_options.hpp"
#include "keel/wire/curve_keys.hpp"
#include "trainer.hpp"

namespace {

using keel::demo::DemoOptions;
using keel::demo::Trainer;
using keel::probe::Probe;

// --threads, --precision, --model and --device applied to the trainer's configuration. False,
// having said why on stderr, when the model's shape or the device cannot be had.
bool configure_model(DemoOptions& o) {
  if (o.threads > 0) torch::set_num_threads(o.threads);
  o.config.bf16 = o.precision == "bf16";
  if (o.model == "gpt2-small") {
    o.config.model = keel::demo::gpt2_small_shape();
    o.config.vocab = keel::demo::kGpt2Vocab;
  }
  if (o.config.model.width % o.config.model.heads != 0) {
    std::cerr << "keel-demo: --heads " << o.config.model.heads << " does not divide --width "
              << o.config.model.width << "\n";
    return false;
  }
  if (o.device == "cuda") {
    if (!torch::cuda::is_available()) {
      std::cerr << "keel-demo: --device cuda: no CUDA device is available to this libtorch\n";
      return false;
    }
    o.config.device = torch::Device(torch::kCUDA);
  }
  return true;
}

void print_layers(Trainer& trainer) {
  for (const auto& p : trainer.model()->named_parameters()) {
    std::cout << p.key() << " " << p.value().sizes() << "\n";
  }
}

// Whether the parameter --inject-nan names is the model's; says on stderr when it is not.
bool injected_layer_exists(Trainer& trainer, const keel::demo::Faults& faults) {
  if (!faults.nan_step) return true;
  for (const auto& p : trainer.model()->named_parameters()) {
    if (p.key() == faults.nan_layer) return true;
  }
  std::cerr << "keel-demo: --inject-nan: no parameter named '" << faults.nan_layer << "' (see --list-layers)\n";
  return false;
}

// --freeze: requires_grad off for every parameter under each prefix. False, having said which
// on stderr, when a prefix names no parameter.
bool freeze_parameters(Trainer& trainer, const std::vector<std::string>& prefixes) {
  for (const std::string& prefix : prefixes) {
    size_t frozen = 0;
    for (auto& p : trainer.model()->named_parameters()) {
      if (p.key().rfind(prefix, 0) != 0) continue;
      p.value().set_requires_grad(false);
      ++frozen;
    }
    if (frozen == 0) {
      std::cerr << "keel-demo: --freeze: no parameter name starts with '" << prefix << "' (see --list-layers)\n";
      return false;
    }
  }
  return true;
}

// The probe's options with what the demo's own flags say; reads the key files (and throws
// when one cannot be read).
keel::probe::ProbeOptions probe_options(const DemoOptions& o) {
  keel::probe::ProbeOptions options = o.probe;
  options.endpoint = o.endpoint;
  options.skip_on_nonfinite = !o.no_skip;
  options.dump_on_nonfinite = !o.no_dump_nonfinite;
  if (!o.command_key.empty()) options.command_secret_key = keel::wire::read_curve_key(o.command_key);
  for (const std::string& key : o.allowed_keys) options.allowed_client_keys.push_back(keel::wire::read_curve_key(key));
  return options;
}

void print_banner(Trainer& trainer, const Probe& probe, const std::string& endpoint) {
  int64_t params = 0;
  for (const auto& p : trainer.model()->parameters()) params += p.numel();
  std::printf("keel-demo: %lld parameters, %lld layers, text %zu bytes (vocab %lld), telemetry on %s\n",
              static_cast<long long>(params), static_cast<long long>(trainer.model()->parameters().size()),
              trainer.corpus().size_bytes(), static_cast<long long>(trainer.corpus().vocab_size()),
              endpoint.empty() ? "(none)" : probe.bound_endpoint().c_str());
  std::fflush(stdout);
}

void print_events(const Probe& probe) {
  for (const auto& e : probe.last_events()) {
    std::printf("keel-demo: step %lld event %s %s: %s\n", static_cast<long long>(e.step), e.kind.c_str(),
                e.layer.c_str(), e.detail.c_str());
    if (e.cause) {
      std::printf("keel-demo: step %lld cause %s %s: %s\n", static_cast<long long>(e.step), e.cause->kind.c_str(),
                  e.cause->module.c_str(), e.cause->sentence.c_str());
    }
  }
  // Events are rare and are what a watching person (or test) waits for: never buffered.
  if (!probe.last_events().empty()) std::fflush(stdout);
}

void print_progress(int64_t step, const torch::Tensor& loss, double lr, const keel::probe::StepOutcome& outcome,
                    const Probe& probe, double steps_per_second) {
  // On a GPU the device decides a step's update and the host hears of it a step later:
  // the last settled step's verdict is printed, and which step that was.
  const auto& settled = outcome.settled ? outcome : probe.last_settled();
  std::printf("step %6lld  loss %.4f  lr %.2e  grad_norm %.3g  %s%s  %.1f steps/s\n", static_cast<long long>(step),
              loss.item<double>(), lr, settled.grad_norm, settled.applied ? "applied" : "SKIPPED",
              outcome.settled ? ""
              : settled.step < 0 ? " (no step settled yet)"
                                 : (" (step " + std::to_string(settled.step) + ")").c_str(),
              steps_per_second);
  std::fflush(stdout);
}

// The training loop: each step scheduled, its faults and cause injected, stepped through the
// probe, and its events and (every --log-every steps) its progress printed. After a rewind
// (`rewound_to`, set by the probe's on_rewind) the loop goes on from the snapshot's step: the
// schedule follows it, the next batches are new ones (the rewound span's are skipped), and a
// fault of one moment is not met again.
void train(Trainer& trainer, Probe& probe, const DemoOptions& o, const keel::demo::Faults& faults,
           keel::demo::CauseInjector& injector, keel::probe::GradScaler* scaler, std::optional<int64_t>& rewound_to) {
  const auto start = std::chrono::steady_clock::now();
  int64_t taken = 0;      // steps taken, rewound ones included (the pace's clock)
  int64_t furthest = -1;  // the furthest step taken
  for (int64_t step = 0; o.steps == 0 || step < o.steps; ++step, ++taken) {
    if (o.pace > 0) std::this_thread::sleep_until(start + std::chrono::duration<double>(taken / o.pace));
    const keel::demo::Faults& met = step <= furthest ? faults.replayed() : faults;
    furthest = std::max(furthest, step);
    trainer.schedule(step, met);
    injector.before_step(step, trainer.model());
    keel::demo::Batch batch = trainer.next_batch();
    injector.poison(step, batch);
    Trainer::drift(step, met, batch);
    // libtorch's closure idiom, as optimizer.step(closure) takes it: the same batch each call.
    torch::Tensor loss;
    const auto closure = [&] {
      loss = trainer.forward_backward(
          batch, [&](const torch::Tensor& logits) { probe.watch("logits", logits); },
          [&](const torch::Tensor& l) { return injector.scaled(step, l, scaler); });
      trainer.inject(step, met);
      return loss;
    };
    const double lr = trainer.optimizer().param_groups().front().options().get_lr();   // this step's
    const auto outcome = o.plain_step ? probe.step(closure()) : probe.step(closure);
    injector.after_step();
    trainer.keep_lr_cut();
    print_events(probe);
    if (o.log_every > 0 && (step % o.log_every == 0 || step + 1 == o.steps)) {
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      print_progress(step, loss, lr, outcome, probe, static_cast<double>(taken + 1) / secs);
    }
    if (rewound_to) {
      step = *rewound_to - 1;
      rewound_to.reset();
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"keel-demo: a small char-level transformer trained with the keel probe attached"};
  DemoOptions options;
  keel::demo::add_demo_options(app, options);
  CLI11_PARSE(app, argc, argv);

  keel::demo::Faults faults;
  try {
    faults = keel::demo::parse_faults(options);
  } catch (const CLI::Error& e) {
    return app.exit(e);
  }
  std::optional<keel::demo::DemoCause> cause;
  if (!options.cause.empty()) {
    try {
      cause = keel::demo::parse_cause(options.cause);
    } catch (const std::invalid_argument& e) {
      return app.exit(CLI::ValidationError("--cause", e.what()));
    }
    keel::demo::prepare_cause(*cause, options.config, faults, options.use_scaler);
  }
  if (!configure_model(options)) return 2;

  try {
    Trainer trainer(options.config);
    if (options.list_layers) {
      print_layers(trainer);
      return 0;
    }
    if (!injected_layer_exists(trainer, faults) || !freeze_parameters(trainer, options.freeze)) return 2;
    std::optional<int64_t> rewound_to;
    keel::probe::ProbeOptions probe_settings = probe_options(options);
    probe_settings.on_rewind = [&rewound_to, &trainer](int64_t /*from_step*/, int64_t to_step, double lr_factor) {
      rewound_to = to_step;
      trainer.scale_lr(lr_factor);
    };
    Probe probe(*trainer.model(), trainer.optimizer(), std::move(probe_settings));
    if (options.watch_attention) {
      trainer.model()->on_attention_scores([&probe](const std::string& name, const torch::Tensor& scores) {
        probe.watch(name, scores);
      });
    }
    keel::probe::GradScaler scaler;
    if (options.use_scaler) probe.use_scaler(&scaler);
    print_banner(trainer, probe, options.endpoint);
    keel::demo::CauseInjector injector(cause);
    train(trainer, probe, options, faults, injector, options.use_scaler ? &scaler : nullptr, rewound_to);
  } catch (const keel::probe::AttachError& e) {
    std::cerr << "keel-demo: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "keel-demo: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
