#include "demo_options.hpp"

#include <stdexcept>
#include <type_traits>
#include <utility>

namespace keel::demo {
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

// The model, its data and the training loop's pace and output.
void add_training_options(CLI::App& app, DemoOptions& o) {
  app.add_option("--steps", o.steps, "training steps (0 = run until interrupted)")->capture_default_str();
  app.add_option("--endpoint", o.endpoint, "telemetry endpoint the probe binds (\"\" = none)")->capture_default_str();
  app.add_option("--seed", o.config.seed, "random seed")->capture_default_str();
  app.add_option("--precision", o.precision, "fp32 or bf16 (autocast on the device)")->check(CLI::IsMember({"fp32", "bf16"}))->capture_default_str();
  app.add_option("--device", o.device, "cpu or cuda (the current CUDA device)")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  app.add_option("--model", o.model,
                 "char (the small model below) or gpt2-small (GPT-2-small's shape, 163M parameters, context 1024; "
                 "overrides --width/--layers/--heads/--context)")
      ->check(CLI::IsMember({"char", "gpt2-small"}))->capture_default_str();
  app.add_flag("--scaler", o.use_scaler, "use keel's GradScaler (dynamic loss scaling)");
  app.add_flag("--watch-attention", o.watch_attention,
               "watch each block's attention logits too (blocks.N.attn.scores), whose growth the early warning reads");
  app.add_option("--data", o.config.data_path, "training text file")->capture_default_str();
  app.add_option("--batch", o.config.batch, "sequences per batch")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--context", o.config.model.context, "characters per sequence")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--width", o.config.model.width, "model width")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--layers", o.config.model.layers, "transformer blocks")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--heads", o.config.model.heads, "attention heads (dividing the width)")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--lr", o.config.lr, "peak learning rate")->capture_default_str();
  app.add_option("--warmup", o.config.warmup_steps, "linear warmup steps")->capture_default_str();
  app.add_option("--log-every", o.log_every, "print the loss every N steps (0 = never)")->capture_default_str();
  app.add_option("--threads", o.threads, "intra-op threads (0 = libtorch default)");
}

// Instabilities made on demand: written into a gradient or the learning rate, or (--cause)
// through the real math.
void add_fault_options(CLI::App& app, DemoOptions& o) {
  app.add_option("--inject-nan", o.inject_nan, "STEP:LAYER: a NaN in that parameter's gradient at that step");
  app.add_option("--inject-spike", o.inject_spike, "STEP:FACTOR: every gradient multiplied by FACTOR at that step");
  app.add_option("--lr-spike", o.lr_spike, "STEP:FACTOR: learning rate multiplied by FACTOR at that step");
  app.add_option("--cause", o.cause,
                 "KIND:STEP: a blow-up made through the real math, for keel to find its cause: attention (query/key "
                 "weights blown up), norm (QK-norm with eps 0 over a zero query), fp16 (the loss scaled in float16), "
                 "batch (a sequence weighted 1e25), lr (learning rate 1000x from STEP on), input (a NaN in the batch)");
  app.add_option("--drift", o.drift,
                 "KIND:STEP: a slow divergence from STEP on, for keel's early warning (docs/warnings.md): lr (the "
                 "learning rate growing 2% a step, a schedule gone wrong) or batches (one sequence of every batch "
                 "weighted 5% more each step, a data pipeline's weights gone wrong)");
  app.add_option("--drift-rate", o.drift_rate, "the drift's growth a step, e.g. 1.02 (0: the drift's own)");
  app.add_flag("--plain-step", o.plain_step,
               "step with probe.step(loss) rather than the closure form probe.step(closure), which lets keel run an "
               "unsafe step again to find the op where its NaN was born");
}

// What the probe does about an unsafe step (skip, dump) and what it keeps of the run.
void add_policy_options(CLI::App& app, DemoOptions& o) {
  keel::probe::ProbeOptions& p = o.probe;
  app.add_flag("--no-skip-nonfinite", o.no_skip, "apply updates even when a gradient is non-finite");
  app.add_flag("--skip-spikes", p.skip_on_spike, "skip updates whose grad norm is a spike (z-score of log grad norm)");
  app.add_option("--spike-z", p.spike_z, "z-score above which a grad norm is a spike")->capture_default_str();
  app.add_option("--spike-window", p.spike_window, "steps the spike z-score is computed over")->capture_default_str();
  app.add_option("--spike-warmup", p.spike_warmup, "steps before the spike policy decides anything")->capture_default_str();
  app.add_flag("--no-dump-nonfinite", o.no_dump_nonfinite, "do not dump a checkpoint at the first non-finite gradient");
  app.add_option("--dump-every", p.dump_nonfinite_every, "at most one automatic dump per N steps")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--rewind-every", p.rewind_every,
                 "keep a snapshot of the training state in memory every N steps, for a rewind (0 = none)")
      ->capture_default_str();
  app.add_option("--rewind-keep", p.rewind_keep, "snapshots kept for a rewind")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--rewind-on-divergence", p.rewind_on_divergence,
               "rewind to a snapshot from before a divergence (the loss high for many steps, or unsafe steps in a "
               "row); needs --rewind-every");
  app.add_option("--rewind-max", p.rewind_max, "rewinds the policy takes before it stops and says so")
      ->capture_default_str();
  app.add_option("--rewind-lr-factor", p.rewind_lr_factor,
                 "the policy's second and later rewinds also multiply the learning rate by this (1 = no cut)")
      ->check(CLI::Range(1e-9, 1.0))
      ->capture_default_str();
  app.add_option("--warning-lr-factor", p.warning_lr_factor,
                 "an early warning (docs/warnings.md) also multiplies the learning rate by this, kept by the "
                 "schedule (1 = no cut)")
      ->check(CLI::Range(1e-9, 1.0))
      ->capture_default_str();
  app.add_option("--dump-dir", p.dump_dir, "directory the probe writes dumps into")->capture_default_str();
  app.add_option("--record-dir", p.record_dir,
                 "directory the probe records the run into (keel --open, keel-cli summary FILE); \"\" records nothing")
      ->capture_default_str();
  app.add_option("--record-mantissa-bits", p.record_mantissa_bits,
                 "float32 mantissa bits the recording keeps of each layer value (23: exact; 8: 0.2% precision, "
                 "about half the bytes)")
      ->check(CLI::Range(1, 23))->capture_default_str();
  app.add_option("--dump-interval", p.dump_min_interval_secs, "at most one commanded dump per SECS seconds")
      ->capture_default_str();
  app.add_option("--dump-max", p.dump_max_count, "dumps this run writes, at most")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--dump-min-free", p.dump_min_free_bytes,
                 "bytes a dump must leave free on the dump directory's filesystem")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--history", p.history_steps, "recent steps the probe keeps for late-attaching clients")
      ->capture_default_str();
}

// Who may read and steer the run, and where it stands in a data-parallel job.
void add_access_options(CLI::App& app, DemoOptions& o) {
  app.add_option("--command-key", o.command_key,
                 "the probe's secret key file (keel-cli keygen): only clients with an allowed key may read and steer the run");
  app.add_flag("--allow-unauthenticated-local", o.probe.allow_unauthenticated_local,
               "take clients without keys on a loopback endpoint: anyone on this machine may read and steer the run "
               "(default: only your own key, ~/.keel/user.key)");
  app.add_option("--allow-key", o.allowed_keys, "a client's public key (Z85 text or .pub file) allowed to read and steer the run")
      ->type_name("KEY|FILE");
  app.add_option("--rank", o.probe.rank, "this process's rank in a data-parallel job (one probe and endpoint per rank)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--world-size", o.probe.world_size, "ranks in the job")->check(CLI::PositiveNumber)->capture_default_str();
}

// The run's pace, the parameters left out of training, and --list-layers.
void add_run_options(CLI::App& app, DemoOptions& o) {
  app.add_option("--pace", o.pace, "at most this many steps per second (0 = as fast as possible)")->capture_default_str();
  app.add_option("--freeze", o.freeze,
                 "parameters whose name starts with PREFIX get no gradient (requires_grad off), as when fine-tuning "
                 "part of a model; repeatable")
      ->type_name("PREFIX");
  app.add_flag("--list-layers", o.list_layers, "print the parameter names and shapes, then exit");
}

}  // namespace

void add_demo_options(CLI::App& app, DemoOptions& options) {
  // In the order --help lists them.
  add_training_options(app, options);
  add_fault_options(app, options);
  add_policy_options(app, options);
  add_access_options(app, options);
  add_run_options(app, options);
}

Faults parse_faults(const DemoOptions& options) {
  Faults faults;
  if (!options.inject_nan.empty()) {
    auto [step, layer] = parse_at_step<std::string>("--inject-nan", "STEP:LAYER", options.inject_nan);
    faults.nan_step = step;
    faults.nan_layer = layer;
  }
  if (!options.inject_spike.empty()) {
    auto [step, factor] = parse_at_step<double>("--inject-spike", "STEP:FACTOR", options.inject_spike);
    faults.spike_step = step;
    faults.spike_factor = factor;
  }
  if (!options.lr_spike.empty()) {
    auto [step, factor] = parse_at_step<double>("--lr-spike", "STEP:FACTOR", options.lr_spike);
    faults.lr_spike_step = step;
    faults.lr_spike_factor = factor;
  }
  if (!options.drift.empty()) parse_drift(options.drift, options.drift_rate, faults);
  return faults;
}

void parse_drift(const std::string& text, double rate, Faults& faults) {
  const auto colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  int64_t step = -1;
  try {
    size_t used = 0;
    if (colon != std::string::npos) step = std::stoll(text.substr(colon + 1), &used);
    if (colon == std::string::npos || used != text.size() - colon - 1) step = -1;
  } catch (const std::logic_error&) {
    step = -1;
  }
  if (step < 0 || (kind != "lr" && kind != "batches")) {
    throw CLI::ValidationError("--drift", "expected lr:STEP or batches:STEP, got '" + text + "'");
  }
  if (rate != 0 && !(rate > 1.0 && rate < 2.0)) {
    throw CLI::ValidationError("--drift-rate", "expected a growth a step in (1, 2), e.g. 1.02");
  }
  if (kind == "lr") {
    faults.lr_drift_step = step;
    if (rate != 0) faults.lr_drift_rate = rate;
  } else {
    faults.batch_drift_step = step;
    if (rate != 0) faults.batch_drift_rate = rate;
  }
}

}  // namespace keel::demo
