// keel: the live training-stability dashboard (one window; see DESIGN §4), and the viewer of
// runs kept on disk (--open: a recording or a dump's telemetry, read into the same views).
//
// The main loop, once per frame: wait as FramePacer says (input, new data, or the idle
// interval), let AppCore do the frame's work (telemetry into the model, the dashboard drawn,
// the commands its controls posted sent), render, and (headless use) write a screenshot and
// exit when asked.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "alert/alert_options.hpp"
#include "core/app_core.hpp"
#include "keel/wire/codec.hpp"
#include "net/client_auth.hpp"
#include "ui/dashboard.hpp"
#include "ui/frame_pacer.hpp"
#include "ui/screenshot.hpp"
#include "ui/verbose_log.hpp"
#include "ui/window.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// A screenshot is taken after this many frames with data (the first frame lays panes out).
constexpr int kFramesBeforeScreenshot = 3;
// With --screenshot, give up waiting for telemetry after this long (a test must not hang).
constexpr double kScreenshotGiveUpSecs = 120.0;

struct Options {
  std::vector<std::string> endpoints;
  std::vector<std::string> recordings;
  std::string screenshot_path;
  double screenshot_after_secs = 0;
  std::string select_layer;
  int rank = -1;
  std::string heat_metric;
  int width = 1600, height = 1000;
  size_t memory_budget_mib = keel::app::ModelConfig{}.memory_budget >> 20;
  bool verbose = false;
  keel::app::ClientAuthOptions auth;
  keel::app::AlertOptions alerts;
};

void add_options(CLI::App& cli, Options& options) {
  cli.add_option("--connect", options.endpoints,
                 "probe endpoint to subscribe to (repeat for several ranks; default " +
                     std::string(keel::wire::kDefaultPubEndpoint) + ")");
  cli.add_option("--open", options.recordings,
                 "show a run kept on disk: a recording (keel-runs/*.keelrec) or a dump's telemetry.msgpack; "
                 "repeat for several: runs on one rank are overlaid in the loss and grad norm charts "
                 "(with no --connect, nothing live is shown)")
      ->check(CLI::ExistingFile);
  cli.add_option("--screenshot", options.screenshot_path,
                 "write the window as PNG once data is shown, then exit");
  cli.add_option("--screenshot-after", options.screenshot_after_secs,
                 "with --screenshot: wait at least this many seconds after start")->check(CLI::NonNegativeNumber);
  cli.add_option("--select", options.select_layer, "select this layer once the run names it");
  cli.add_flag("--verbose", options.verbose,
               "log to stdout what the dashboard draws and does (control and heatmap geometry, selections, events, commands)");
  cli.add_option("--rank", options.rank, "show this rank's run (with one --connect per rank; default: the lowest)")
      ->check(CLI::NonNegativeNumber);
  std::vector<std::string> heat_metric_names;
  for (const keel::wire::LayerMetric metric : keel::wire::kHeatmapMetrics) {
    heat_metric_names.push_back(keel::wire::info_of(metric).name);
  }
  cli.add_option("--heat-metric", options.heat_metric,
                 "start the heatmap and the ranks strip on this per-layer metric (default grad_norm)")
      ->check(CLI::IsMember(heat_metric_names));
  keel::app::add_client_auth_options(cli, options.auth);
  keel::app::add_alert_options(cli, options.alerts);
  cli.add_option("--memory-budget", options.memory_budget_mib,
                 "MiB the dashboard may hold: its runs' history (a wide model keeps fewer recent steps at "
                 "full resolution), events and what waits to be drawn")
      ->check(CLI::Range(size_t{64}, size_t{1} << 20))->capture_default_str();
  cli.add_option("--width", options.width, "window width")->check(CLI::Range(320, 16384));
  cli.add_option("--height", options.height, "window height")->check(CLI::Range(240, 16384));
}

keel::app::AppCoreOptions core_options_for(const Options& options, keel::app::ui::FramePacer& pacer) {
  const keel::app::ClientAuth auth = keel::app::ClientAuth::from_options(options.auth);
  keel::app::AppCoreOptions core_options;
  core_options.model.memory_budget = options.memory_budget_mib << 20;
  // An eighth of the budget for what waits to be drawn, and for live messages kept while a
  // file is read.
  core_options.receiver.queue_bytes = core_options.model.memory_budget / 8;
  core_options.replay_bytes = core_options.model.memory_budget / 16;
  core_options.receiver.auth = auth;
  core_options.receiver.on_data = [&pacer] { pacer.notify_data(); };
  core_options.commands.auth = auth;
  core_options.recordings = options.recordings;
  core_options.alerts = options.alerts;
  // From the Alerter's thread, a whole line per call: stdio keeps lines whole between threads.
  core_options.alert_sinks.alert = [](const std::string& line) {
    std::printf("keel: %s\n", line.c_str());
    std::fflush(stdout);
  };
  core_options.alert_sinks.problem = [](const std::string& line) { std::fprintf(stderr, "keel: %s\n", line.c_str()); };
  core_options.alert_sinks.note = [](const std::string& line) { keel::app::ui::verbose_log("keel: %s", line.c_str()); };
  return core_options;
}

// --screenshot: when to take it. Once the shown run has had data for a few frames (every
// opened file read) and --screenshot-after has passed; or without data, once nothing can come
// (refused) or after kScreenshotGiveUpSecs.
class ScreenshotTiming {
 public:
  enum class Moment { kNotYet, kReady, kRefused, kGaveUp };

  explicit ScreenshotTiming(double after_secs) : after_secs_(after_secs) {}

  Moment after_frame(const keel::app::AppCore& core, const keel::app::ui::Dashboard& dashboard) {
    const keel::app::RunModel* run =
        keel::app::ui::Dashboard::shown_run(core.model(), dashboard.state().shown_rank());
    // An opened file is shown whole: the screenshot waits until every file is read.
    const auto& files = core.input().recordings;
    const bool files_read =
        std::all_of(files.begin(), files.end(), [](const keel::app::RecordingState& r) { return r.done; });
    if (run && run->has_steps() && files_read) ++frames_with_data_;
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    if (frames_with_data_ >= kFramesBeforeScreenshot && elapsed >= after_secs_) return Moment::kReady;
    // A refused client gets nothing however long it waits: its screenshot shows why.
    const auto& links = core.input().links;
    const bool refused = !run && elapsed >= after_secs_ &&
                         (std::any_of(links.begin(), links.end(),
                                      [](const keel::app::EndpointState& link) {
                                        return link.state == keel::app::LinkState::kRefused;
                                      }) ||
                          std::any_of(files.begin(), files.end(),
                                      [](const keel::app::RecordingState& r) { return !r.error.empty(); }));
    if (refused) return Moment::kRefused;
    return elapsed > kScreenshotGiveUpSecs ? Moment::kGaveUp : Moment::kNotYet;
  }

 private:
  double after_secs_;
  Clock::time_point start_ = Clock::now();
  int frames_with_data_ = 0;
};

// Writes the window to `path` and says so; returns the program's exit status: 0 with data,
// 2 without, 1 when the file could not be written.
int write_screenshot(keel::app::ui::Window& window, const std::string& path, ScreenshotTiming::Moment moment) {
  int width = 0, height = 0;
  window.framebuffer_size(width, height);
  std::string error;
  if (!keel::app::ui::write_framebuffer_png(width, height, path, error)) {
    std::fprintf(stderr, "keel: %s\n", error.c_str());
    return 1;
  }
  const bool ready = moment == ScreenshotTiming::Moment::kReady;
  std::printf("keel: screenshot %s (%dx%d)%s\n", path.c_str(), width, height,
              ready                                          ? ""
              : moment == ScreenshotTiming::Moment::kRefused ? " without data: refused"
                                                             : " without data: nothing arrived");
  return ready ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App cli{"keel: live training-stability dashboard for libtorch jobs"};
  add_options(cli, options);
  CLI11_PARSE(cli, argc, argv);
  keel::app::ui::set_verbose_log(options.verbose);
  if (options.endpoints.empty() && options.recordings.empty()) {
    options.endpoints.push_back(keel::wire::kDefaultPubEndpoint);
  }

  try {
    keel::app::ui::Window window("keel", options.width, options.height);
    const bool headless = !options.screenshot_path.empty();
    if (headless) window.ignore_pointer();
    keel::app::ui::FramePacer pacer(window);
    // Declared after the window and the pacer: its threads are stopped before they go away.
    keel::app::AppCore core(options.endpoints, core_options_for(options, pacer));
    keel::app::ui::Dashboard dashboard;
    if (!options.select_layer.empty()) dashboard.request_select(options.select_layer);
    if (options.rank >= 0) dashboard.request_rank(options.rank);
    if (!options.heat_metric.empty()) dashboard.request_heat_metric(*keel::app::ui::heat_metric_named(options.heat_metric));

    ScreenshotTiming screenshot(options.screenshot_after_secs);
    while (!window.should_close()) {
      pacer.wait_for_next_frame();
      window.begin_frame();
      core.frame(dashboard);
      window.render();
      if (headless) {
        const ScreenshotTiming::Moment moment = screenshot.after_frame(core, dashboard);
        if (moment != ScreenshotTiming::Moment::kNotYet) return write_screenshot(window, options.screenshot_path, moment);
      }
      window.present();
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "keel: %s\n", error.what());
    return 1;
  }
  return 0;
}
