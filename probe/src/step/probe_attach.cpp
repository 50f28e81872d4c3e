// Attaching a probe: the checks of its options (rank, model name, keys), the Impl's
// construction (plan, publisher, command socket), its end, and the public Probe's forwarding.
#include <algorithm>
#include <cmath>

#include "keel/wire/curve_keys.hpp"
#include "keel/wire/user_keys.hpp"
#include "layout/run_description.hpp"
#include "layout/parameter_sequence.hpp"
#include "probe_impl.hpp"
#include "transport/exit_flush.hpp"

namespace keel::probe {
namespace {
ModelParameters named_params(TrainedModel* model, OptimizerAdapter* optimizer) {
  if (model == nullptr || optimizer == nullptr) throw AttachError("keel probe: no model or no optimizer to watch");
  optimizer->begin_step();
  ModelParameters out = parameters_of(*model, optimizer);
  if (out.params.empty()) throw AttachError("keel probe: the model has no parameters to watch");
  return out;
}

bool is_loopback_endpoint(const std::string& endpoint) {
  if (endpoint.rfind("ipc://", 0) == 0 || endpoint.rfind("inproc://", 0) == 0) return true;
  for (const char* host : {"tcp://127.", "tcp://localhost:", "tcp://[::1]:", "tcp://lo:"}) {
    if (endpoint.rfind(host, 0) == 0) return true;
  }
  return false;
}

// Throws AttachError for a rank that cannot be in the job: the dashboard lays ranks out and
// names the first to fail by it, so a typo must not pass for another rank.
void check_rank(const ProbeOptions& options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    throw AttachError("keel probe: rank " + std::to_string(options.rank) + " is not in a world of " +
                      std::to_string(options.world_size) + " (ranks are 0 .. world_size - 1)");
  }
}

void check_layer_detail(const ProbeOptions& options) {
  if (options.layer_detail_above < 0 || options.layer_detail_every < 1) {
    throw AttachError("keel probe: layer_detail_above must be 0 or more and layer_detail_every 1 or more (they are " +
                      std::to_string(options.layer_detail_above) + " and " + std::to_string(options.layer_detail_every) + ")");
  }
}

// The rewind's settings: a policy that could never rewind is refused rather than left silent.
void check_rewind(const ProbeOptions& options) {
  if (options.rewind_every < 0 || options.rewind_keep < 1 || options.rewind_max < 0) {
    throw AttachError("keel probe: rewind_every must be 0 or more, rewind_keep 1 or more and rewind_max 0 or more");
  }
  if (options.rewind_on_divergence && options.rewind_every == 0) {
    throw AttachError("keel probe: rewind_on_divergence rewinds to snapshots, and rewind_every is 0 (none are kept): "
                      "set rewind_every, e.g. 100");
  }
  if (options.rewind_on_divergence && !(options.rewind_loss_factor > 1.0 && options.rewind_loss_steps >= 1)) {
    throw AttachError("keel probe: rewind_loss_factor must be above 1 and rewind_loss_steps 1 or more");
  }
  if (!(options.rewind_lr_factor > 0.0 && options.rewind_lr_factor <= 1.0)) {
    throw AttachError("keel probe: rewind_lr_factor must be above 0 and at most 1 (1 cuts nothing), e.g. 0.5");
  }
  if (!(options.warning_lr_factor > 0.0 && options.warning_lr_factor <= 1.0)) {
    throw AttachError("keel probe: warning_lr_factor must be above 0 and at most 1 (1 cuts nothing), e.g. 0.5");
  }
}

// The model name goes into dump directory names and every message of the run: refused at
// attach, with what is allowed, rather than altered behind the user's back.
void check_model_name(const ProbeOptions& options) {
  // sanitize_label keeps at most 64 of [A-Za-z0-9._-] and drops a leading '.': a name it
  // leaves as it is is one a file name can carry.
  if (sanitize_label(options.model) != options.model) {
    throw AttachError("keel probe: model name \"" + options.model.substr(0, 80) +
                      "\" is not allowed: use at most 64 letters, digits, '.', '_' or '-' (not starting with '.')");
  }
}

// Whether a socket of this probe will ask clients for keys.
bool authenticates(const ProbeOptions& options) {
  return !options.endpoint.empty() && (options.accept_commands || options.authenticate_telemetry);
}

// Commands and telemetry are authenticated by default: with no keys given, the sockets take
// only the key of the user running the trainer (user_keys.hpp). Throws AttachError when that
// key cannot be had, naming the fix.
void use_user_keys_by_default(ProbeOptions& options) {
  if (!authenticates(options) || !options.command_secret_key.empty()) return;
  if (is_loopback_endpoint(options.endpoint) ? options.allow_unauthenticated_local : options.allow_unauthenticated_remote) {
    return;
  }
  try {
    const wire::CurveKeyPair pair = wire::user_key_pair();
    options.command_secret_key = pair.secret_key;
    options.allowed_client_keys = {pair.public_key};
  } catch (const std::exception& e) {
    throw AttachError(std::string("keel probe: commands and telemetry are authenticated with your own key, which is "
                                  "not usable: ") +
                      e.what() +
                      "; or set ProbeOptions::allow_unauthenticated_local (anyone on this machine may then read and "
                      "steer the run)");
  }
}

// Throws AttachError for keys that ZeroMQ would reject later with a less clear message.
void check_command_security(const ProbeOptions& options) {
  if (!authenticates(options)) return;
  // No keys only where it was asked for in so many words (use_user_keys_by_default).
  if (options.command_secret_key.empty()) return;
  if (!wire::curve_available()) {
    throw AttachError("keel probe: authentication needs ZeroMQ with CURVE (libsodium), which this libzmq lacks");
  }
  if (!wire::is_curve_key(options.command_secret_key)) {
    throw AttachError("keel probe: the command secret key is not a 40-character Z85 key");
  }
  if (options.allowed_client_keys.empty()) {
    throw AttachError("keel probe: authentication is on but no client key is allowed");
  }
  for (const std::string& key : options.allowed_client_keys) {
    if (!wire::is_curve_key(key)) {
      throw AttachError("keel probe: allowed client key \"" + key.substr(0, 48) + "\" is not a 40-character Z85 key");
    }
  }
}

}  // namespace

Probe::Impl::Impl(std::unique_ptr<TrainedModel> model, std::unique_ptr<OptimizerAdapter> optimizer,
                  const ModelParameters& parameters, ProbeOptions options)
    : options_(std::move(options)),
      model_(std::move(model)),
      optimizer_(std::move(optimizer)),
      layers_(parameters, *model_, optimizer_.get(), options_),
      description_(describe_run(parameters, options_)),
      events_(options_.rank, description_.run_id, description_.model),
      decision_(SpikeRule{options_.spike_window, options_.spike_warmup, options_.spike_z}),
      record_(options_.rank, description_.run_id, description_.model) {
  try {
    buffers_.plan(float_buffers_of(*model_), *model_, description_);
  } catch (const std::exception&) {
    // Attaching must not fail for a check of buffers: none are watched, and the next step
    // tries again (WatchedBuffers::follow), counted if it fails there.
  }
  check_rank(options_);
  check_model_name(options_);
  check_layer_detail(options_);
  check_rewind(options_);
  use_user_keys_by_default(options_);
  check_command_security(options_);
  recording_.start(options_, description_);
  dumps_.remove_stale();
  if (!options_.endpoint.empty() || recording_.recorder()) {
    PublisherOptions po;
    po.endpoint = options_.endpoint;
    po.queue_capacity = options_.queue_capacity;
    po.send_high_water_mark = options_.send_high_water_mark;
    po.describe_interval = std::chrono::milliseconds(static_cast<int64_t>(options_.describe_interval_secs * 1000));
    // Without a socket nobody asks for the history: only the recorder reads the messages.
    po.history_steps = options_.endpoint.empty() ? 0 : options_.history_steps;
    if (options_.authenticate_telemetry) {
      po.secret_key = options_.command_secret_key;
      po.allowed_client_keys = options_.allowed_client_keys;
    }
    po.history_intents = history_intents_;
    if (FlightRecorder* recorder = recording_.recorder()) {
      po.tap = [recorder](const wire::Message& message, const FlightRecorder::Payload& payload) {
        recorder->record(message, payload);
      };
    }
    publisher_ = std::make_unique<Publisher>(po, description_);
  }
  const std::string command_at =
      options_.accept_commands && !options_.endpoint.empty() ? command_endpoint_of(options_.endpoint) : std::string();
  if (!command_at.empty()) {
    CommandServerOptions co;
    co.endpoint = command_at;
    co.rank = options_.rank;
    co.run = description_.run_id;
    co.model = description_.model;
    co.secret_key = options_.command_secret_key;
    co.allowed_client_keys = options_.allowed_client_keys;
    co.history_intents = history_intents_;
    if (options_.history_steps > 0) {
      Publisher* publisher = publisher_.get();
      co.history = [publisher] { return publisher->history(); };
      co.event_history = [publisher] { return publisher->event_history(); };
    }
    control_.listen(co);
  }
  step_ = options_.first_step;
  record_.message().layer_count = static_cast<uint32_t>(layers_.params().size());
}

Probe::Probe(std::unique_ptr<TrainedModel> model, std::unique_ptr<OptimizerAdapter> optimizer, ProbeOptions options) {
  const ModelParameters parameters = named_params(model.get(), optimizer.get());
  impl_ = std::make_unique<Impl>(std::move(model), std::move(optimizer), parameters, std::move(options));
}

Probe::Impl::~Impl() {
  // A dump still being written when the job ends is finished, and its outcome (a failure
  // above all) goes out as an event before the publisher's last drain: a step would have
  // reported it, and there is no next step.
  try {
    settle_pending();
    dumps_.finish();
    events_.clear();
    dumps_.report_finished(events_, record_step_);
    if (publisher_) events_.publish_unpublished(*publisher_);
  } catch (const std::exception&) {
    // Ending the job must not throw; the dump itself is on disk (or its failure is lost).
  }
  if (!publisher_) return;
  // Training is over: the clients are served a last time (exit_flush.hpp), and both sockets
  // deliver what they queued, all within exit_flush_secs.
  // A value that is not a number of seconds (NaN, negative) waits for nothing; an hour bounds
  // the conversion to milliseconds.
  const double limit_secs =
      std::isfinite(options_.exit_flush_secs) ? std::clamp(options_.exit_flush_secs, 0.0, 3600.0) : 0.0;
  const auto deadline = wait_for_clients(options_.endpoint, *publisher_, control_.commands(), *history_intents_,
                                         std::chrono::milliseconds(static_cast<int64_t>(limit_secs * 1000)));
  control_.finish(deadline);
  publisher_->finish(deadline);
}

Probe::~Probe() = default;

uint64_t Probe::Impl::dropped() const { return publisher_ ? publisher_->dropped() : 0; }
std::string Probe::Impl::bound_endpoint() const { return publisher_ ? publisher_->bound_endpoint() : std::string(); }
std::string Probe::Impl::bound_command_endpoint() const {
  return control_.commands() ? control_.commands()->bound_endpoint() : std::string();
}

void Probe::use_scaler(GradScaler* scaler) { impl_->use_scaler(scaler); }
void Probe::agree_skips(SkipAgreement agreement) { impl_->agree_skips(std::move(agreement)); }
void Probe::watch(const std::string& name, const torch::Tensor& tensor) { impl_->watch(name, tensor); }
StepOutcome Probe::step(const torch::Tensor& loss) { return impl_->step(loss); }
StepOutcome Probe::step(const LossClosure& closure) { return impl_->step(closure); }
void Probe::settle() { impl_->settle_pending(); }
const StepOutcome& Probe::last_settled() const { return impl_->last_settled(); }
const wire::StepRecord& Probe::last_record() const { return impl_->last_record(); }
const wire::RunDescription& Probe::description() const { return impl_->description(); }
const std::vector<wire::Event>& Probe::last_events() const { return impl_->last_events(); }
const ProbeTiming& Probe::last_timing() const { return impl_->last_timing(); }
uint64_t Probe::dropped() const { return impl_->dropped(); }
std::string Probe::recording_path() const { return impl_->recording_path(); }
std::string Probe::bound_endpoint() const { return impl_->bound_endpoint(); }
std::string Probe::bound_command_endpoint() const { return impl_->bound_command_endpoint(); }

}  // namespace keel::probe
