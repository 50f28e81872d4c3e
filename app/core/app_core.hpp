// keel app AppCore: the dashboard's main part, the one owner of its sockets and its model.
//
// What it is for: views draw and post intents; they own no socket (docs/DESIGN.md §1, checked by
// tests/app/layering_test.cmake). AppCore
// owns the Receiver (telemetry in), the RecordingLoader (runs kept on disk), the CommandClient (commands out, started at the first
// command) and the Model, and does each frame's work between NewFrame and Render:
//   1. ingest(): drain what the Receiver decoded into the Model (and hand it to the Alerter, with
//      --alert-command), and gather the FrameInput: the links, the commands sent last frame with
//      their ids, and the command statuses that changed;
//   2. the Dashboard draws the Model with that input, and its controls post CommandIntents;
//   3. carry_out(): submit the posted intents to the CommandClient, and open the files the
//      views asked for (File > Open, a dropped file, a live run's recording).
// The command path reads one way: view -> intent -> AppCore -> net; what became of a command
// comes back the other way, in the next frame's FrameInput. keel's main loop and keel-bench-app's
// step-to-pixel loop both call frame(), so the benchmark times the app's own frame.
// Threads: the UI thread only (construct, frame, ingest, carry_out, destroy). The Receiver, the
// CommandClient and the Alerter run threads of their own: an alert command that hangs or fails
// costs a frame nothing (the Alerter's observe() copies the few events that alert, under a short
// lock).
// Never: waits on the network (draining and reading statuses take a short lock each), throws
// after construction, or grows without bound (it follows at most CommandClient::kMaxKept
// commands, the ones whose outcome may still change).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "alert/alerter.hpp"
#include "keel/wire/messages.hpp"
#include "model/model.hpp"
#include "net/command_client.hpp"
#include "net/receiver.hpp"
#include "core/recording_loader.hpp"
#include "ui/dashboard.hpp"
#include "values/command_intent.hpp"
#include "values/frame_input.hpp"

namespace keel::app {

struct AppCoreOptions {
  // The model's bounds, its memory budget among them (`keel --memory-budget`).
  ModelConfig model;
  ReceiverOptions receiver;
  // Used when the first intent starts the CommandClient (so a dashboard nobody clicks in runs no
  // command thread).
  CommandClientOptions commands;
  // Runs kept on disk to show (`keel --open`): recordings or dumps' telemetry.msgpack, read on
  // a thread of their own into models the AppCore adopts (core/recording_loader.hpp).
  std::vector<std::string> recordings;
  // Live messages kept while a file is read, to be given again to the runs it brings
  // (open_recordings()), at most this many bytes (net/message_bytes.hpp).
  size_t replay_bytes = size_t{64} << 20;
  // `keel --alert-command` and its options (alert/alert_options.hpp): when they ask for a
  // command or a notification, the live messages are also handed to an Alerter, whose own
  // thread raises the alerts and runs the commands, and says so through `alert_sinks`. Runs
  // read from files raise none: they are history.
  AlertOptions alerts;
  AlertSinks alert_sinks;
};

class AppCore {
 public:
  // Connects to every endpoint (none: no network thread at all) and starts reading the
  // recordings. Throws std::invalid_argument for an endpoint ZeroMQ rejects.
  AppCore(const std::vector<std::string>& endpoints, AppCoreOptions options = {});
  AppCore(const AppCore&) = delete;
  AppCore& operator=(const AppCore&) = delete;

  // One frame's work, inside an ImGui frame: ingest(), draw, carry_out() of what the views posted.
  void frame(ui::Dashboard& dashboard);

  // Drains every message the Receiver decoded into the model (ingested() then holds exactly
  // those) and returns this frame's input for the views.
  const FrameInput& ingest();
  // Submits each intent; the next ingest() reports the id each one went out with (in order),
  // then whatever becomes of it.
  void carry_out(std::vector<CommandIntent> intents);
  // Reads more files into the model (File > Open, a dropped file, a live run's own
  // recording). A run the model already holds (the same identity and start) is replaced by
  // the file's when that starts earlier or holds as many steps (Model::adopt_runs()), and the
  // live messages that arrived while the file was read are given to it again, so a live run
  // read back from its recording goes on live with its whole history.
  void open_recordings(const std::vector<std::string>& paths);

  const Model& model() const { return model_; }
  // What the last ingest() took and gathered.
  const std::vector<keel::wire::Message>& ingested() const { return inbox_; }
  const FrameInput& input() const { return input_; }

 private:
  // What the views were last told of a command whose outcome may still change.
  struct Reported {
    CommandState state = CommandState::kPending;
    bool answered_late = false;
  };
  void gather_command_updates();
  // Adopts the models the loader built, then replays the kept live messages into their runs.
  void adopt_recordings();
  void keep_for_replay(const keel::wire::Message& message);

  AppCoreOptions options_;
  std::unique_ptr<Receiver> receiver_;          // null without endpoints
  std::unique_ptr<RecordingLoader> recordings_;  // null until a file is opened
  std::vector<LoadedRecording> loaded_;
  // Live messages since the loader last had nothing to read (oldest first), and their bytes.
  std::deque<keel::wire::Message> replay_;
  size_t replay_bytes_ = 0;
  std::unique_ptr<CommandClient> commands_;
  std::unique_ptr<Alerter> alerter_;   // null unless the alert options ask for a command or a notification
  Model model_;
  std::vector<keel::wire::Message> inbox_;
  FrameInput input_;
  std::vector<SentCommand> sent_;        // carried out since the last ingest()
  std::map<uint64_t, Reported> unsettled_;
};

}  // namespace keel::app
