#include "core/app_core.hpp"

#include <algorithm>
#include <iterator>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>

#include "keel/wire/codec.hpp"
#include "net/message_bytes.hpp"

namespace keel::app {
namespace {

// Acknowledged and refused are final; a timed-out command may still be answered late (the probe
// did apply it), and then nothing more can change.
bool settled(const CommandStatus& status) {
  return status.state == CommandState::kAcknowledged || status.state == CommandState::kRefused ||
         status.answered_late;
}

}  // namespace

AppCore::AppCore(const std::vector<std::string>& endpoints, AppCoreOptions options)
    : options_(std::move(options)), model_(options_.model) {
  if (!endpoints.empty()) receiver_ = std::make_unique<Receiver>(endpoints, options_.receiver);
  if (receiver_ && options_.alerts.acts()) alerter_ = std::make_unique<Alerter>(options_.alerts, options_.alert_sinks);
  open_recordings(options_.recordings);
}

void AppCore::open_recordings(const std::vector<std::string>& paths) {
  if (paths.empty()) return;
  if (!recordings_) {
    RecordingLoaderOptions loader;
    loader.model = model_.config();
    recordings_ = std::make_unique<RecordingLoader>(loader);
  }
  recordings_->open(paths);
}

void AppCore::frame(ui::Dashboard& dashboard) {
  const FrameInput& input = ingest();
  dashboard.draw(model_, input);
  carry_out(dashboard.take_intents());
  open_recordings(dashboard.take_open_requests());
}

const FrameInput& AppCore::ingest() {
  inbox_.clear();
  if (receiver_) receiver_->drain(inbox_);
  for (const keel::wire::Message& message : inbox_) model_.ingest(message);
  if (alerter_) alerter_->observe(inbox_);
  if (recordings_) adopt_recordings();

  if (receiver_) {
    input_.links = receiver_->endpoint_states();
    input_.queue_dropped = receiver_->queue_dropped();
  }
  if (recordings_) input_.recordings = recordings_->states();
  input_.sent = std::move(sent_);
  sent_.clear();
  gather_command_updates();
  return input_;
}

void AppCore::adopt_recordings() {
  const bool reading = !recordings_->finished();
  if (reading) {
    for (const keel::wire::Message& message : inbox_) keep_for_replay(message);
  }
  loaded_.clear();
  recordings_->take(loaded_);
  for (LoadedRecording& loaded : loaded_) {
    // What the file holds of each run, by sequence number: a kept live message after that is
    // new to the file's run. A run's messages carry one publisher's sequence, the file's too.
    std::map<keel::wire::RunKey, uint64_t> last_seq;
    for (size_t i = 0; i < loaded.model->run_count(); ++i) {
      const RunModel& run = loaded.model->run(i);
      uint64_t& seq = last_seq[run.key()];
      seq = std::max(seq, run.last_seq());
    }
    if (model_.adopt_runs(std::move(*loaded.model)) == 0) continue;
    for (const keel::wire::Message& message : replay_) {
      const auto replayed = std::visit(
          [&](const auto& m) -> bool {
            using T = std::decay_t<decltype(m)>;
            if constexpr (std::is_same_v<T, keel::wire::StepRecord> || std::is_same_v<T, keel::wire::Event> ||
                          std::is_same_v<T, keel::wire::RunDescription>) {
              const auto seq = last_seq.find(keel::wire::run_key_of(m));
              return seq != last_seq.end() && m.seq > seq->second;
            } else {
              return false;
            }
          },
          message);
      if (replayed) model_.ingest(message);
    }
  }
  if (!reading) {
    replay_.clear();
    replay_bytes_ = 0;
  }
}

void AppCore::keep_for_replay(const keel::wire::Message& message) {
  replay_.push_back(message);
  replay_bytes_ += message_bytes(message);
  while (replay_bytes_ > options_.replay_bytes && !replay_.empty()) {
    replay_bytes_ -= std::min(replay_bytes_, message_bytes(replay_.front()));
    replay_.pop_front();
  }
}

void AppCore::gather_command_updates() {
  input_.command_updates.clear();
  for (auto it = unsettled_.begin(); it != unsettled_.end();) {
    const std::optional<CommandStatus> status = commands_->status(it->first);
    if (!status) {  // the client no longer keeps it: nothing more will be heard of it
      it = unsettled_.erase(it);
      continue;
    }
    Reported& reported = it->second;
    if (status->state != reported.state || status->answered_late != reported.answered_late) {
      reported = Reported{status->state, status->answered_late};
      input_.command_updates.push_back(*status);
    }
    it = settled(*status) ? unsettled_.erase(it) : std::next(it);
  }
}

void AppCore::carry_out(std::vector<CommandIntent> intents) {
  if (intents.empty()) return;
  if (!commands_) commands_ = std::make_unique<CommandClient>(options_.commands);
  for (CommandIntent& intent : intents) {
    const uint64_t id =
        commands_->submit(keel::wire::command_endpoint_for(intent.endpoint), intent.command);
    intent.command.id = id;
    sent_.push_back(SentCommand{std::move(intent.control), id, std::move(intent.command)});
    unsettled_.emplace(id, Reported{});
  }
  // The client keeps the newest kMaxKept statuses; an id older than that can never be read.
  while (unsettled_.size() > CommandClient::kMaxKept) unsettled_.erase(unsettled_.begin());
}

}  // namespace keel::app
