#include "core/app_core.hpp"

#include <iterator>
#include <optional>
#include <utility>

#include "keel/wire/codec.hpp"

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
    : options_(std::move(options)) {
  if (!endpoints.empty()) receiver_ = std::make_unique<Receiver>(endpoints, options_.receiver);
  if (!options_.recordings.empty()) recordings_ = std::make_unique<RecordingLoader>(options_.recordings);
}

void AppCore::frame(ui::Dashboard& dashboard) {
  const FrameInput& input = ingest();
  dashboard.draw(model_, input);
  carry_out(dashboard.take_intents());
}

const FrameInput& AppCore::ingest() {
  inbox_.clear();
  if (recordings_) recordings_->drain(inbox_);
  if (receiver_) receiver_->drain(inbox_);
  for (const keel::wire::Message& message : inbox_) model_.ingest(message);

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
