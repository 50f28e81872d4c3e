// keel-demo: a real char-level transformer trained on real text, instrumented with the keel
// probe, with fault injection to make instabilities on demand.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "keel/probe/probe.hpp"
#include "demo_causes.hpp"
#include "keel/wire/curve_keys.hpp"
#include "trainer.hpp"

namespace {

// "STEP:VALUE" -> (step, value); throws CLI::ValidationError with the flag name and the form
// it takes, as its help spells it ("STEP:LAYER").
template <class T>
std::pair<int64_t, T> parse_at_step(const std::string& flag, const std::string& form, const std::string& text) {
  const auto colon = text.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    throw CLI::ValidationError(flag, "expected " + form + ", got '" + text + "'");
  }
  try {
    size_t used = 0;
    const int64_t step = std::stoll(text.substr(0, colon), &used);
    if (used != colon || step < 0) throw std::invalid_argument("step");
    if constexpr (std::is_same_v<T, std::string>) {
      return {step, text.substr(colon + 1)};
    } else {
      const std::string value_text = text.substr(colon + 1);
      const double value = std::stod(value_text, &used);
      if (used != value_text.size()) throw std::invalid_argument("value");
      return {step, value};
    }
  } catch (const std::logic_error&) {
    throw CLI::ValidationError(flag, "expected " + form + ", got '" + text + "'");
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"keel-demo: a small char-level transformer trained with the keel probe attached"};
  keel::demo::TrainerConfig config;
  int64_t steps = 2000;
  int64_t log_every = 50;
  std::string endpoint = keel::wire::kDefaultPubEndpoint;
  std::string precision = "fp32";
  std::string device = "cpu";
  std::string model = "char";
  bool use_scaler = false, list_layers = false, no_skip = false;
  std::string inject_nan, inject_spike, lr_spike, cause_text;
  bool plain_step = false;
  int threads = 0;
  keel::probe::ProbeOptions options;
  bool no_dump_nonfinite = false;
  double pace = 0;
  app.add_option("--steps", steps, "training steps (0 = run until interrupted)")->capture_default_str();
  app.add_option("--endpoint", endpoint, "telemetry endpoint the probe binds (\"\" = none)")->capture_default_str();
  app.add_option("--seed", config.seed, "random seed")->capture_default_str();
  app.add_option("--precision", precision, "fp32 or bf16 (autocast on the device)")->check(CLI::IsMember({"fp32", "bf16"}))->capture_default_str();
  app.add_option("--device", device, "cpu or cuda (the current CUDA device)")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  app.add_option("--model", model,
                 "char (the small model below) or gpt2-small (GPT-2-small's shape, 163M parameters, context 1024; "
                 "overrides --width/--layers/--heads/--context)")
      ->check(CLI::IsMember({"char", "gpt2-small"}))->capture_default_str();
  app.add_flag("--scaler", use_scaler, "use keel's GradScaler (dynamic loss scaling)");
  app.add_option("--data", config.data_path, "training text file")->capture_default_str();
  app.add_option("--batch", config.batch, "sequences per batch")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--context", config.model.context, "characters per sequence")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--width", config.model.width, "model width")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--layers", config.model.layers, "transformer blocks")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--heads", config.model.heads, "attention heads (dividing the width)")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--lr", config.lr, "peak learning rate")->capture_default_str();
  app.add_option("--warmup", config.warmup_steps, "linear warmup steps")->capture_default_str();
  app.add_option("--log-every", log_every, "print the loss every N steps (0 = never)")->capture_default_str();
  app.add_option("--threads", threads, "intra-op threads (0 = libtorch default)");
  app.add_option("--inject-nan", inject_nan, "STEP:LAYER: a NaN in that parameter's gradient at that step");
  app.add_option("--inject-spike", inject_spike, "STEP:FACTOR: every gradient multiplied by FACTOR at that step");
  app.add_option("--lr-spike", lr_spike, "STEP:FACTOR: learning rate multiplied by FACTOR at that step");
  app.add_option("--cause", cause_text,
                 "KIND:STEP: a blow-up made through the real math, for keel to find its cause: attention (query/key "
                 "weights blown up), norm (QK-norm with eps 0 over a zero query), fp16 (the loss scaled in float16), "
                 "batch (a sequence weighted 1e25), lr (learning rate 1000x from STEP on), input (a NaN in the batch)");
  app.add_flag("--plain-step", plain_step,
               "step with probe.step(loss) rather than the closure form probe.step(closure), which lets keel run an "
               "unsafe step again to find the op where its NaN was born");
  app.add_flag("--no-skip-nonfinite", no_skip, "apply updates even when a gradient is non-finite");
  app.add_flag("--skip-spikes", options.skip_on_spike, "skip updates whose grad norm is a spike (z-score of log grad norm)");
  app.add_option("--spike-z", options.spike_z, "z-score above which a grad norm is a spike")->capture_default_str();
  app.add_option("--spike-window", options.spike_window, "steps the spike z-score is computed over")->capture_default_str();
  app.add_option("--spike-warmup", options.spike_warmup, "steps before the spike policy decides anything")->capture_default_str();
  app.add_flag("--no-dump-nonfinite", no_dump_nonfinite, "do not dump a checkpoint at the first non-finite gradient");
  app.add_option("--dump-every", options.dump_nonfinite_every, "at most one automatic dump per N steps")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--dump-dir", options.dump_dir, "directory the probe writes dumps into")->capture_default_str();
  app.add_option("--record-dir", options.record_dir,
                 "directory the probe records the run into (keel --open, keel-cli summary FILE); \"\" records nothing")
      ->capture_default_str();
  app.add_option("--record-mantissa-bits", options.record_mantissa_bits,
                 "float32 mantissa bits the recording keeps of each layer value (23: exact; 8: 0.2% precision, "
                 "about half the bytes)")
      ->check(CLI::Range(1, 23))->capture_default_str();
  app.add_option("--dump-interval", options.dump_min_interval_secs, "at most one commanded dump per SECS seconds")
      ->capture_default_str();
  app.add_option("--dump-max", options.dump_max_count, "dumps this run writes, at most")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--dump-min-free", options.dump_min_free_bytes,
                 "bytes a dump must leave free on the dump directory's filesystem")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--history", options.history_steps, "recent steps the probe keeps for late-attaching clients")
      ->capture_default_str();
  std::string command_key;
  std::vector<std::string> allowed_keys;
  app.add_option("--command-key", command_key,
                 "the probe's secret key file (keel-cli keygen): only clients with an allowed key may read and steer the run");
  app.add_flag("--allow-unauthenticated-local", options.allow_unauthenticated_local,
               "take clients without keys on a loopback endpoint: anyone on this machine may read and steer the run "
               "(default: only your own key, ~/.keel/user.key)");
  app.add_option("--allow-key", allowed_keys, "a client's public key (Z85 text or .pub file) allowed to read and steer the run")
      ->type_name("KEY|FILE");
  app.add_option("--rank", options.rank, "this process's rank in a data-parallel job (one probe and endpoint per rank)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--world-size", options.world_size, "ranks in the job")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--pace", pace, "at most this many steps per second (0 = as fast as possible)")->capture_default_str();
  std::vector<std::string> freeze;
  app.add_option("--freeze", freeze,
                 "parameters whose name starts with PREFIX get no gradient (requires_grad off), as when fine-tuning "
                 "part of a model; repeatable")
      ->type_name("PREFIX");
  app.add_flag("--list-layers", list_layers, "print the parameter names and shapes, then exit");
  CLI11_PARSE(app, argc, argv);

  keel::demo::Faults faults;
  try {
    if (!inject_nan.empty()) {
      auto [step, layer] = parse_at_step<std::string>("--inject-nan", "STEP:LAYER", inject_nan);
      faults.nan_step = step;
      faults.nan_layer = layer;
    }
    if (!inject_spike.empty()) {
      auto [step, factor] = parse_at_step<double>("--inject-spike", "STEP:FACTOR", inject_spike);
      faults.spike_step = step;
      faults.spike_factor = factor;
    }
    if (!lr_spike.empty()) {
      auto [step, factor] = parse_at_step<double>("--lr-spike", "STEP:FACTOR", lr_spike);
      faults.lr_spike_step = step;
      faults.lr_spike_factor = factor;
    }
  } catch (const CLI::Error& e) {
    return app.exit(e);
  }
  std::optional<keel::demo::DemoCause> cause;
  if (!cause_text.empty()) {
    try {
      cause = keel::demo::parse_cause(cause_text);
    } catch (const std::invalid_argument& e) {
      return app.exit(CLI::ValidationError("--cause", e.what()));
    }
    keel::demo::prepare_cause(*cause, config, faults, use_scaler);
  }
  if (threads > 0) torch::set_num_threads(threads);
  config.bf16 = precision == "bf16";
  if (model == "gpt2-small") {
    config.model = keel::demo::gpt2_small_shape();
    config.vocab = keel::demo::kGpt2Vocab;
  }
  if (config.model.width % config.model.heads != 0) {
    std::cerr << "keel-demo: --heads " << config.model.heads << " does not divide --width " << config.model.width << "\n";
    return 2;
  }
  if (device == "cuda") {
    if (!torch::cuda::is_available()) {
      std::cerr << "keel-demo: --device cuda: no CUDA device is available to this libtorch\n";
      return 2;
    }
    config.device = torch::Device(torch::kCUDA);
  }

  try {
    keel::demo::Trainer trainer(config);
    if (list_layers) {
      for (const auto& p : trainer.model()->named_parameters()) {
        std::cout << p.key() << " " << p.value().sizes() << "\n";
      }
      return 0;
    }
    if (faults.nan_step) {
      bool known = false;
      for (const auto& p : trainer.model()->named_parameters()) known = known || p.key() == faults.nan_layer;
      if (!known) {
        std::cerr << "keel-demo: --inject-nan: no parameter named '" << faults.nan_layer
                  << "' (see --list-layers)\n";
        return 2;
      }
    }

    for (const std::string& prefix : freeze) {
      size_t frozen = 0;
      for (auto& p : trainer.model()->named_parameters()) {
        if (p.key().rfind(prefix, 0) != 0) continue;
        p.value().set_requires_grad(false);
        ++frozen;
      }
      if (frozen == 0) {
        std::cerr << "keel-demo: --freeze: no parameter name starts with '" << prefix << "' (see --list-layers)\n";
        return 2;
      }
    }

    options.endpoint = endpoint;
    options.skip_on_nonfinite = !no_skip;
    options.dump_on_nonfinite = !no_dump_nonfinite;
    if (!command_key.empty()) options.command_secret_key = keel::wire::read_curve_key(command_key);
    for (const std::string& key : allowed_keys) options.allowed_client_keys.push_back(keel::wire::read_curve_key(key));
    keel::probe::Probe probe(*trainer.model(), trainer.optimizer(), options);
    keel::probe::GradScaler scaler;
    if (use_scaler) probe.use_scaler(&scaler);

    int64_t params = 0;
    for (const auto& p : trainer.model()->parameters()) params += p.numel();
    std::printf("keel-demo: %lld parameters, %lld layers, text %zu bytes (vocab %lld), telemetry on %s\n",
                static_cast<long long>(params), static_cast<long long>(trainer.model()->parameters().size()),
                trainer.corpus().size_bytes(), static_cast<long long>(trainer.corpus().vocab_size()),
                endpoint.empty() ? "(none)" : probe.bound_endpoint().c_str());
    std::fflush(stdout);

    keel::demo::CauseInjector injector(cause);
    const auto start = std::chrono::steady_clock::now();
    for (int64_t step = 0; steps == 0 || step < steps; ++step) {
      if (pace > 0) std::this_thread::sleep_until(start + std::chrono::duration<double>(step / pace));
      trainer.schedule(step, faults);
      injector.before_step(step, trainer.model());
      keel::demo::Batch batch = trainer.next_batch();
      injector.poison(step, batch);
      // libtorch's closure idiom, as optimizer.step(closure) takes it: the same batch each call.
      torch::Tensor loss;
      const auto closure = [&] {
        loss = trainer.forward_backward(
            batch, [&](const torch::Tensor& logits) { probe.watch("logits", logits); },
            [&](const torch::Tensor& l) { return injector.scaled(step, l, use_scaler ? &scaler : nullptr); });
        trainer.inject(step, faults);
        return loss;
      };
      const auto outcome = plain_step ? probe.step(closure()) : probe.step(closure);
      injector.after_step();
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
      if (log_every > 0 && (step % log_every == 0 || step + 1 == steps)) {
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        // On a GPU the device decides a step's update and the host hears of it a step later:
        // the last settled step's verdict is printed, and which step that was.
        const auto& settled = outcome.settled ? outcome : probe.last_settled();
        std::printf("step %6lld  loss %.4f  grad_norm %.3g  %s%s  %.1f steps/s\n", static_cast<long long>(step),
                    loss.item<double>(), settled.grad_norm, settled.applied ? "applied" : "SKIPPED",
                    outcome.settled ? ""
                    : settled.step < 0 ? " (no step settled yet)"
                                       : (" (step " + std::to_string(settled.step) + ")").c_str(),
                    static_cast<double>(step + 1) / secs);
        std::fflush(stdout);
      }
    }
  } catch (const keel::probe::AttachError& e) {
    std::cerr << "keel-demo: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "keel-demo: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
