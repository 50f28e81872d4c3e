#include "ui/status_bar.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include <imgui.h>

#include "ui/verbose_log.hpp"

namespace keel::app::ui {
namespace {

ImVec4 state_colour(LinkState state) {
  switch (state) {
    case LinkState::kLive: return ImVec4(0.35f, 0.85f, 0.4f, 1.0f);
    case LinkState::kStale: return ImVec4(0.95f, 0.7f, 0.2f, 1.0f);
    case LinkState::kProtocolMismatch:
    case LinkState::kRefused: return ImVec4(1.0f, 0.3f, 0.3f, 1.0f);
    case LinkState::kConnecting: break;
  }
  return ImVec4(0.6f, 0.6f, 0.65f, 1.0f);
}

void separator() {
  ImGui::SameLine();
  ImGui::TextDisabled("|");
  ImGui::SameLine();
}

// Each opened file: its state in colour, its name, and on hover how it was read and what had
// to be skipped. A large recording shows its first picture (a sample) while the rest is read.
void draw_recordings(const std::vector<RecordingState>& recordings, bool after_links) {
  for (size_t i = 0; i < recordings.size(); ++i) {
    const RecordingState& r = recordings[i];
    if (i > 0 || after_links) ImGui::SameLine();
    char reading[64];
    std::snprintf(reading, sizeof reading, "%s %.0f%%", r.first_picture ? "first picture, reading" : "loading",
                  100.0 * r.progress);
    const char* state = !r.error.empty() ? "unreadable" : !r.done ? reading : r.problems.empty() ? "read" : "damaged";
    const LinkState colour = !r.error.empty() ? LinkState::kRefused
                             : !r.done        ? LinkState::kConnecting
                             : r.problems.empty() ? LinkState::kLive
                                                  : LinkState::kStale;
    ImGui::TextColored(state_colour(colour), "%s", state);
    if (ImGui::IsItemHovered()) {
      ImGui::BeginTooltip();
      ImGui::Text("%s: %llu bytes", r.path.c_str(), static_cast<unsigned long long>(r.file_bytes));
      if (r.first_picture) {
        ImGui::Text("first picture in %.2f s: one step record in %lld, every event and the steps events name",
                    r.first_picture_secs, static_cast<long long>(r.sample_stride));
      }
      if (r.done && r.error.empty()) {
        ImGui::Text("read whole in %.2f s: %llu messages", r.whole_secs, static_cast<unsigned long long>(r.messages));
      }
      if (!r.error.empty()) ImGui::Text("%s", r.error.c_str());
      for (const std::string& problem : r.problems) ImGui::Text("skipped: %s", problem.c_str());
      ImGui::EndTooltip();
    }
    ImGui::SameLine();
    ImGui::TextUnformatted(r.path.c_str());
  }
}

// A live run whose probe records on this machine, with history older than the ring gave: a
// button that reads the rest from its recording (AppCore gives the run the file's steps and
// keeps it live). Whether the file is here is asked once per path.
void offer_recording(const RunModel& run, const std::vector<RecordingState>& recordings,
                     std::vector<std::string>* open_requests) {
  const std::string& path = run.description().recording;
  if (open_requests == nullptr || path.empty() || !run.has_steps() || run.first_step() <= 0) return;
  if (std::any_of(recordings.begin(), recordings.end(), [&](const RecordingState& r) { return r.path == path; })) {
    return;
  }
  static std::map<std::string, bool> here;
  const auto known = here.find(path);
  const bool exists = known != here.end() ? known->second : (here[path] = std::filesystem::exists(path));
  if (!exists) return;
  separator();
  const std::string label = "load steps before " + std::to_string(run.first_step()) + " from the recording";
  if (ImGui::SmallButton(label.c_str())) {
    open_requests->push_back(path);
    verbose_log("keel: open requested %s", path.c_str());
  }
  // Where the button is, when it first shows or moves, for a test or a script to click.
  static ImVec4 logged;
  const ImVec2 min = ImGui::GetItemRectMin(), max = ImGui::GetItemRectMax();
  if (logged.x != min.x || logged.y != min.y || logged.z != max.x || logged.w != max.y) {
    logged = ImVec4(min.x, min.y, max.x, max.y);
    verbose_log("keel: offer recording x0 %.0f y0 %.0f x1 %.0f y1 %.0f", min.x, min.y, max.x, max.y);
  }
  if (ImGui::IsItemHovered()) {
    ImGui::SetTooltip("The probe keeps its last steps for a dashboard that attaches late; the run's recording\n"
                      "holds all of them: %s",
                      path.c_str());
  }
}

// What the model holds against its budget, measured at most once a second (it walks every
// series), and on hover what the budget made the shown run give up.
void draw_memory(const Model& model, const RunModel& run) {
  static std::chrono::steady_clock::time_point measured;
  static size_t bytes = 0;
  const auto now = std::chrono::steady_clock::now();
  if (now - measured > std::chrono::seconds(1)) {
    measured = now;
    bytes = model.bytes_used();
  }
  const ModelConfig& config = model.config();
  ImGui::Text("memory %zu of %zu MB", bytes >> 20, config.memory_budget >> 20);
  if (!ImGui::IsItemHovered()) return;
  ImGui::BeginTooltip();
  ImGui::Text("the history of every run held (%zu of at most %zu), within --memory-budget", model.run_count(),
              config.max_runs);
  if (run.layer_recent_steps() < config.recent_steps) {
    ImGui::Text("this run's %zu layers keep their last %lld steps at full resolution (not %lld) to fit the budget;",
                run.layer_count(), static_cast<long long>(run.layer_recent_steps()),
                static_cast<long long>(config.recent_steps));
    ImGui::TextUnformatted("older steps are kept as each pixel column's min and max, NaN and Inf never dropped");
  } else {
    ImGui::Text("this run keeps its last %lld steps at full resolution, older ones as min and max",
                static_cast<long long>(run.layer_recent_steps()));
  }
  const RunCounters& counters = run.counters();
  if (counters.events_evicted + counters.details_cut > 0) {
    ImGui::Text("events: %llu older ones dropped (more than %zu, or %zu MB), %llu details cut past %zu KB",
                static_cast<unsigned long long>(counters.events_evicted), config.max_events,
                config.max_event_bytes >> 20, static_cast<unsigned long long>(counters.details_cut),
                config.max_event_detail >> 10);
  }
  ImGui::EndTooltip();
}

// Each endpoint's link state in colour, its address, and on hover what it has received.
void draw_links(const std::vector<EndpointState>& links) {
  for (size_t i = 0; i < links.size(); ++i) {
    const EndpointState& link = links[i];
    if (i > 0) ImGui::SameLine();
    ImGui::TextColored(state_colour(link.state), "%s", link_state_name(link.state));
    if (ImGui::IsItemHovered()) {
      ImGui::BeginTooltip();
      ImGui::Text("%s: %llu messages, %llu undecodable", link.endpoint.c_str(),
                  static_cast<unsigned long long>(link.messages),
                  static_cast<unsigned long long>(link.decode_errors));
      if (link.secs_since_message >= 0) ImGui::Text("last message %.1f s ago", link.secs_since_message);
      if (!link.last_error.empty()) ImGui::Text("last error: %s", link.last_error.c_str());
      if (!link.refusal.empty()) ImGui::Text("refused: %s", link.refusal.c_str());
      if (!link.backfill.empty()) ImGui::Text("late attach: %s", link.backfill.c_str());
      ImGui::EndTooltip();
    }
    ImGui::SameLine();
    ImGui::TextUnformatted(link.endpoint.c_str());
  }
}

// No run to show yet: why, in full where the user looks first.
void draw_why_no_run(const FrameInput& input) {
  // A file that cannot be read is why nothing shows.
  const auto unreadable = std::find_if(input.recordings.begin(), input.recordings.end(),
                                       [](const RecordingState& r) { return !r.error.empty(); });
  if (unreadable != input.recordings.end()) {
    ImGui::TextColored(state_colour(LinkState::kRefused), "%s", unreadable->error.c_str());
    return;
  }
  const std::vector<EndpointState>& links = input.links;
  if (links.empty()) {
    ImGui::TextDisabled("reading the recording");
    return;
  }
  // A refused link is why nothing arrives.
  const auto refused = std::find_if(links.begin(), links.end(),
                                    [](const EndpointState& link) { return link.state == LinkState::kRefused; });
  if (refused != links.end()) {
    ImGui::TextColored(state_colour(LinkState::kRefused), "%s", refused->refusal.c_str());
  } else {
    ImGui::TextDisabled("waiting for a trainer");
  }
}

void draw_run_title(const RunModel& run) {
  std::string run_id = run.run_id().empty() ? "(attached mid-run)" : run.run_id();
  // Several probes of one job (a GAN's two models) differ by model: it names the run first.
  if (!run.model().empty()) run_id = run.model() + " (" + run_id + ")";
  if (run.segment() == 1) {
    ImGui::Text("run %s", run_id.c_str());
    return;
  }
  // Started again under the same run_id: this start's steps, not the earlier one's.
  std::string title = "run " + run_id + ", segment " + std::to_string(run.segment());
  if (run.has_steps()) title += " from step " + std::to_string(run.first_step());
  ImGui::TextUnformatted(title.c_str());
  if (ImGui::IsItemHovered()) {
    ImGui::SetTooltip("The job was started again under the same run_id (a new start time),\n"
                      "resumed from a checkpoint: its steps are shown from where it resumed.\n"
                      "The earlier start's history is kept as segment %d (within the dashboard's run limit).",
                      run.segment() - 1);
  }
}

void draw_ranks(const Model& model, const RunModel& run) {
  std::string ranks;
  for (int32_t rank : model.ranks()) ranks += (ranks.empty() ? "" : ",") + std::to_string(rank);
  ImGui::Text("ranks %s of %d", ranks.c_str(), run.description().world_size);
}

// A model too wide to send every layer every step: how often it does, with its separator.
void draw_layer_cadence(const RunModel& run) {
  const std::string cadence = layer_cadence(run);
  if (cadence.empty()) return;
  ImGui::TextDisabled("%s", cadence.c_str());
  if (ImGui::IsItemHovered()) {
    ImGui::SetTooltip("A model this wide is sent per layer only every few steps (and every unsafe step);\n"
                      "the steps between carry each of its %zu modules' worst layer. Folded module rows\n"
                      "have every step; a layer's row and plots the per-layer steps (newest: step %lld).",
                      run.description().modules.size(), static_cast<long long>(run.last_layer_values_step()));
  }
  separator();
}

// Everything lost on the way from the probe, in warning colour when anything was, and on
// hover where each was lost.
void draw_losses(const FrameInput& input, const Model& model, const RunModel& run) {
  uint64_t decode_errors = 0;
  for (const EndpointState& link : input.links) decode_errors += link.decode_errors;
  const uint64_t queue_dropped = input.queue_dropped;
  const RunCounters& counters = run.counters();
  const ModelCounters& refusals = model.counters();
  const uint64_t lost = counters.probe_dropped + counters.seq_missing + queue_dropped;
  // Bad: bytes no decoder took, records refused because their layers were not their run's
  // (module values too, for their modules),
  // and messages beyond sane limits (too many layers, a rank outside the job).
  const uint64_t refused = refusals.refused_records + refusals.refused_rollups + refusals.refused_insane;
  const ImVec4 loss_colour = lost + decode_errors + refused > 0 ? ImVec4(0.95f, 0.7f, 0.2f, 1.0f)
                                                                : ImGui::GetStyleColorVec4(ImGuiCol_Text);
  ImGui::TextColored(loss_colour, "dropped %llu  gaps %llu  bad %llu",
                     static_cast<unsigned long long>(counters.probe_dropped + queue_dropped),
                     static_cast<unsigned long long>(counters.seq_gaps),
                     static_cast<unsigned long long>(decode_errors + refused));
  if (!ImGui::IsItemHovered()) return;
  ImGui::BeginTooltip();
  ImGui::Text("dropped by the probe: %llu", static_cast<unsigned long long>(counters.probe_dropped));
  ImGui::Text("dropped by this app (UI behind): %llu", static_cast<unsigned long long>(queue_dropped));
  ImGui::Text("sequence gaps: %llu (%llu messages missing)",
              static_cast<unsigned long long>(counters.seq_gaps),
              static_cast<unsigned long long>(counters.seq_missing));
  ImGui::Text("undecodable messages: %llu", static_cast<unsigned long long>(decode_errors));
  ImGui::Text("records refused (layer count not their run's): %llu",
              static_cast<unsigned long long>(refusals.refused_records));
  ImGui::Text("module values refused (module count not their run's): %llu",
              static_cast<unsigned long long>(refusals.refused_rollups));
  ImGui::Text("messages refused (beyond sane limits): %llu",
              static_cast<unsigned long long>(refusals.refused_insane));
  if (!refusals.last_refusal.empty()) ImGui::Text("  the last: %s", refusals.last_refusal.c_str());
  ImGui::EndTooltip();
}

// The probe's time per step, over the step's wall time when the probe measured it, and
// whether the newest step was skipped.
void draw_probe_cost(const LatestStep& latest) {
  if (latest.step_time_us > 0) {
    ImGui::Text("probe %.2f%% (%.0f us of %.1f ms)", 100.0 * latest.probe_us / latest.step_time_us,
                latest.probe_us, latest.step_time_us / 1000.0);
  } else {
    ImGui::Text("probe %.0f us", latest.probe_us);
  }
  if (latest.skipped) {
    separator();
    ImGui::TextColored(ImVec4(1.0f, 0.63f, 0.13f, 1.0f), "skipped (%s)", latest.skip_reason.c_str());
  }
}

// Shown only once the probe has failed: what failed is in the events (probe_error).
void draw_probe_errors(const Model& model, const RunModel& run) {
  const uint64_t probe_errors = model.probe_errors(run.run_id());
  if (probe_errors == 0) return;
  separator();
  ImGui::TextColored(ImVec4(1.0f, 0.3f, 0.3f, 1.0f), "probe errors %llu", static_cast<unsigned long long>(probe_errors));
  if (ImGui::IsItemHovered()) {
    ImGui::SetTooltip("keel itself failed in %llu step(s) of this run, summed over its ranks.\n"
                      "Each is a probe_error event saying what failed and what the step did:\n"
                      "the update applied as libtorch would, or with a loss scaler skipped as an overflow.",
                      static_cast<unsigned long long>(probe_errors));
  }
}

// The host memory the probe's rewind snapshots hold, while it keeps any, and the rewinds seen:
// their abandoned spans are the greyed steps of the charts and the heatmap (docs/rewind.md).
void draw_rewinds(const RunModel& run) {
  const uint64_t bytes = run.latest_step().snapshot_bytes;
  const auto& spans = run.abandoned_spans();
  // Logged for tests and scripts, what the model holds after a rewind: when a span appears, and
  // at each step of the continuation until it passes the span (a bounded number of lines).
  static std::tuple<const RunModel*, uint64_t, int64_t> logged;
  const auto now = std::make_tuple(&run, run.counters().rewinds, run.last_step());
  if (!spans.empty() && logged != now && (std::get<1>(logged) != run.counters().rewinds || run.last_step() <= spans.back().last_step)) {
    logged = now;
    verbose_log("keel: run %s rank %d abandoned span %lld to %lld, continued to step %lld", run.run_id().c_str(),
                run.rank(), static_cast<long long>(spans.back().first_step),
                static_cast<long long>(spans.back().last_step), static_cast<long long>(run.last_step()));
  }
  if (bytes == 0 && spans.empty()) return;
  separator();
  if (bytes > 0) {
    ImGui::Text("snapshots %.1f MB", static_cast<double>(bytes) / 1e6);
    if (ImGui::IsItemHovered()) {
      ImGui::SetTooltip("Host memory the probe's rewind snapshots hold now (docs/rewind.md): Rewind goes back to one");
    }
  }
  if (spans.empty()) return;
  if (bytes > 0) ImGui::SameLine();
  ImGui::TextDisabled("rewound %llu x", static_cast<unsigned long long>(run.counters().rewinds));
  if (ImGui::IsItemHovered()) {
    ImGui::BeginTooltip();
    ImGui::TextUnformatted("The steps each rewind left behind, greyed on the charts and the heatmap:");
    for (const AbandonedSpan& span : spans) {
      ImGui::Text("  steps %lld to %lld", static_cast<long long>(span.first_step), static_cast<long long>(span.last_step));
    }
    if (run.counters().spans_evicted > 0) {
      ImGui::Text("(%llu older spans no longer kept)", static_cast<unsigned long long>(run.counters().spans_evicted));
    }
    ImGui::EndTooltip();
  }
}

}  // namespace

void draw_status_bar(const FrameInput& input, const Model& model, const RunModel* run,
                     std::vector<std::string>* open_requests) {
  draw_links(input.links);
  draw_recordings(input.recordings, !input.links.empty());
  separator();
  if (!run) {
    draw_why_no_run(input);
    return;
  }
  draw_run_title(*run);
  offer_recording(*run, input.recordings, open_requests);
  separator();
  draw_ranks(model, *run);
  separator();
  ImGui::Text("step %lld", static_cast<long long>(run->latest_step().step));
  separator();
  draw_layer_cadence(*run);
  ImGui::Text("%.1f steps/s", run->steps_per_second());
  separator();
  draw_losses(input, model, *run);
  separator();
  draw_memory(model, *run);
  separator();
  draw_probe_cost(run->latest_step());
  draw_probe_errors(model, *run);
  draw_rewinds(*run);
}

}  // namespace keel::app::ui
