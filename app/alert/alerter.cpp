#include "alert/alerter.hpp"

#include <variant>

#include "alert/alert_json.hpp"
#include "alert/alert_line.hpp"

namespace keel::app {
namespace {

// How often the thread looks at the clock with nothing received: silences and command timeouts
// are seen within this.
constexpr auto kTick = std::chrono::milliseconds(200);

int64_t unix_ns_now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string rank_text(const SilenceWatch::Heard& heard) {
  std::string text = "rank " + std::to_string(heard.rank);
  if (!heard.run.empty()) text += " of run " + heard.run;
  if (!heard.model.empty()) text += " (model " + heard.model + ")";
  return text;
}

}  // namespace

Alerter::Alerter(AlertOptions options, AlertSinks sinks)
    : options_(std::move(options)),
      sinks_(std::move(sinks)),
      policy_(options_),
      commands_(options_.timeout_secs, [this](const std::string& line) { say(sinks_.problem, line); }) {
  if (options_.notify) {
    std::string why_not;
    notifier_ = DesktopNotifier::find(why_not);
    if (!notifier_) say(sinks_.problem, "--notify: no desktop notifier: " + why_not + "; alerts are not shown on the desktop");
  }
  thread_ = std::thread([this] { run(); });
}

Alerter::~Alerter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void Alerter::say(const std::function<void(const std::string&)>& sink, const std::string& line) const {
  if (sink) sink(line);
}

void Alerter::observe(const std::vector<wire::Message>& messages) {
  if (messages.empty()) return;
  const Clock::time_point now = Clock::now();
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const wire::Message& message : messages) {
      if (const auto* step = std::get_if<wire::StepRecord>(&message)) {
        received_.heard[step->rank] = {SilenceWatch::Heard{step->rank, step->run, step->model, step->step}, now};
      } else if (const auto* event = std::get_if<wire::Event>(&message)) {
        received_.heard[event->rank] = {SilenceWatch::Heard{event->rank, event->run, event->model, event->step}, now};
        if (!policy_.alerts_on(event->kind)) continue;
        if (received_.events.size() >= kMaxQueuedEvents) {
          dropped_.fetch_add(1);
          continue;
        }
        received_.events.push_back(*event);
        wake = true;
      }
    }
  }
  // Silences need no hurry: the thread's tick sees the ranks heard.
  if (wake) wake_.notify_one();
}

void Alerter::run() {
  bool stopping = false;
  while (!stopping) {
    Received received;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait_for(lock, kTick, [this] { return stop_ || !received_.events.empty(); });
      stopping = stop_;
      std::swap(received, received_);
    }
    take(received);
  }
  commands_.finish(std::chrono::milliseconds(kExitGraceMs));
}

void Alerter::take(const Received& received) {
  const Clock::time_point now = Clock::now();
  const int64_t unix_ns = unix_ns_now();
  for (const auto& [rank, heard] : received.heard) {
    switch (policy_.heard(heard.first, heard.second)) {
      case SilenceWatch::Change::kFirstHeard:
        say(sinks_.note, "hearing " + rank_text(heard.first) + ", step " + std::to_string(heard.first.step));
        break;
      case SilenceWatch::Change::kHeardAgain:
        say(sinks_.note, rank_text(heard.first) + " sends again, step " + std::to_string(heard.first.step));
        break;
      case SilenceWatch::Change::kNone: break;
    }
  }
  for (const wire::Event& event : received.events) {
    if (const std::optional<Alert> alert = policy_.on_event(event, now, unix_ns)) raise(*alert, now);
  }
  for (const Alert& alert : policy_.silences(now, unix_ns)) raise(alert, now);
  commands_.poll(now);
}

void Alerter::raise(const Alert& alert, Clock::time_point now) {
  say(sinks_.alert, alert_line(alert));
  const std::string what = alert.kind + " at step " + std::to_string(alert.step) + " of rank " + std::to_string(alert.rank);
  if (!options_.command.empty()) {
    commands_.start("alert command for " + what, {"/bin/sh", "-c", options_.command}, alert_json_line(alert) + "\n", now);
  }
  if (notifier_) commands_.start("notify-send for " + what, notifier_->command_for(alert), "", now);
}

}  // namespace keel::app
