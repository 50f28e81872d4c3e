#include "ui/dashboard.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include <imgui.h>

#include "model/rank_overview.hpp"
#include "ui/dropped_paths.hpp"
#include "ui/events_view.hpp"
#include "ui/global_charts.hpp"
#include "ui/key_presses.hpp"
#include "ui/module_rows.hpp"
#include "ui/status_bar.hpp"
#include "ui/verbose_log.hpp"

namespace keel::app::ui {
namespace {

constexpr float kSplitterPx = 6.0f;

// A draggable bar between two panes, `length` pixels long; `frac` is the first pane's share
// of `total` pixels.
void splitter(const char* id, bool vertical, float length, float total, float& frac) {
  const ImVec2 size = vertical ? ImVec2(kSplitterPx, length) : ImVec2(length, kSplitterPx);
  ImGui::InvisibleButton(id, size);
  if (ImGui::IsItemActive() && total > 0) {
    const ImVec2 delta = ImGui::GetIO().MouseDelta;
    frac = std::clamp(frac + (vertical ? delta.x : delta.y) / total, 0.1f, 0.9f);
  }
  if (ImGui::IsItemHovered() || ImGui::IsItemActive()) {
    ImGui::SetMouseCursor(vertical ? ImGuiMouseCursor_ResizeEW : ImGuiMouseCursor_ResizeNS);
  }
  const ImU32 colour = ImGui::GetColorU32(ImGui::IsItemActive()    ? ImGuiCol_SeparatorActive
                                          : ImGui::IsItemHovered() ? ImGuiCol_SeparatorHovered
                                                                   : ImGuiCol_Separator);
  ImGui::GetWindowDrawList()->AddRectFilled(ImGui::GetItemRectMin(), ImGui::GetItemRectMax(), colour);
}

bool begin_pane(const char* id, ImVec2 size) {
  return ImGui::BeginChild(id, size, true, ImGuiWindowFlags_NoScrollWithMouse);
}

}  // namespace

const RunModel* Dashboard::shown_run(const Model& model, int32_t rank) {
  if (rank >= 0) {
    if (const RunModel* run = model.current_run(rank)) return run;
  }
  // No rank chosen: the rank that went non-finite first, where the strip points.
  if (const std::optional<FirstNonfiniteRank> bad = first_nonfinite_rank(model)) {
    if (const RunModel* run = model.current_run(bad->rank)) return run;
  }
  const std::vector<int32_t> ranks = model.ranks();
  return ranks.empty() ? nullptr : model.current_run(ranks.front());
}

const RunModel* Dashboard::shown_run(const Model& model, AppState& state) {
  if (const auto& key = state.shown_run_key()) {
    if (const RunModel* run = model.find_run(*key)) return run;
  }
  const RunModel* run = shown_run(model, state.shown_rank());
  if (run == nullptr) return nullptr;
  const std::vector<const RunModel*> runs = model.current_runs();
  const auto on_rank = std::count_if(runs.begin(), runs.end(),
                                     [&](const RunModel* other) { return other->rank() == run->rank(); });
  if (on_rank > 1) {
    // A run joining the rank of the one shown until now (a GAN's second model, described a
    // moment later) does not take the panes over.
    if (const auto& before = state.last_shown_run()) {
      for (const RunModel* other : runs) {
        if (other->key() == *before && other->rank() == run->rank()) run = other;
      }
    }
    state.pin_run(run->key());
  }
  state.remember_shown_run(run->key());
  return run;
}

void Dashboard::request_open(std::string path) {
  verbose_log("keel: open requested %s", path.c_str());
  open_requests_.push_back(std::move(path));
}

void Dashboard::draw(const Model& model, const FrameInput& input) {
  for (std::string& path : take_dropped_paths()) request_open(std::move(path));
  const RunModel* run = shown_run(model, state_);
  if (run) {
    // A new run (or a description naming the layers) may move layers: find the selection again.
    state_.revalidate([&](const std::string& name) { return find_layer(*run, name); });
    if (!pending_select_.empty()) {
      const int layer = find_layer(*run, pending_select_);
      if (layer >= 0) {
        state_.select(layer, pending_select_, -1);
        open_modules_of(run->modules(), size_t(layer), state_);
        pending_select_.clear();
      }
    }
    focus_.update(*run, state_);
    state_.set_warning_step(run->newest_warning() ? run->newest_warning()->step : -1);
    // The view reaches a rewind's abandoned span too, greyed beyond the continuation.
    state_.begin_frame(run->has_steps() ? run->first_step() : 0,
                       run->has_steps() ? run->last_shown_step() : 0);
    // A selection made for the user (the first non-finite, an event clicked) is shown in its own
    // row of the list and the heatmap, not inside a folded module.
    if (state_.scroll_to_selection() && state_.selected_layer() >= 0) {
      open_modules_of(run->modules(), size_t(state_.selected_layer()), state_);
    }
  }
  if (run) {
    log_shown_run(*run);
    log_new_events(*run);
  }
  log_backfills(input.links);
  log_refusals(input.links);
  log_refused_messages(model);
  log_recordings(input.recordings, run);

  const ImGuiViewport* viewport = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(viewport->WorkPos);
  ImGui::SetNextWindowSize(viewport->WorkSize);
  const ImGuiWindowFlags flags = ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove |
                                 ImGuiWindowFlags_NoSavedSettings |
                                 ImGuiWindowFlags_NoBringToFrontOnFocus;
  ImGui::Begin("keel", nullptr, flags);
  if (ctrl_letter_pressed('O')) open_dialog_.open();
  open_dialog_.draw_button();
  ImGui::SameLine();
  draw_status_bar(input, model, run, &open_requests_);
  if (const RunModel* picked = run_picker_.draw(model, run)) state_.show_run(picked->key());
  ImGui::Separator();
  controls_.draw(model, run, input);
  ImGui::Separator();
  if (run) {
    handle_keys(model, *run);
    warning_banner_.draw(model, run);
    draw_panes(model, *run);
  } else if (const auto refused = std::find_if(input.links.begin(), input.links.end(),
                                               [](const EndpointState& link) { return !link.refusal.empty(); });
             refused != input.links.end()) {
    ImGui::TextWrapped("No telemetry: %s.", refused->refusal.c_str());
  } else {
    ImGui::TextDisabled("Waiting for telemetry. Start a trainer with the keel probe, e.g. keel-demo.");
  }
  open_dialog_.draw_dialog();
  for (std::string& path : open_dialog_.take_requests()) request_open(std::move(path));
  ImGui::End();
}

void Dashboard::draw_panes(const Model& model, const RunModel& run) {
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float spacing = ImGui::GetStyle().ItemSpacing.y;
  const float left_w = std::floor((avail.x - kSplitterPx) * left_frac_);
  // Splitters and the spacing around them are not part of any pane, nor is the scrubber's line.
  const float column_h = avail.y - 2 * (kSplitterPx + 2 * spacing) - (RunScrubber::height() + spacing);

  ImGui::BeginGroup();
  if (begin_pane("charts", ImVec2(left_w, std::floor(column_h * charts_frac_)))) {
    // The other runs on this rank: the job's other models (or another job compared with it).
    std::vector<const RunModel*> others;
    for (const RunModel* other : model.current_runs()) {
      if (other != &run && other->rank() == run.rank()) others.push_back(other);
    }
    // A sharded job's grad norm, when the shown run is of it (DESIGN §9); of one rank it is
    // that rank's own.
    const wire::RunDescription& described = run.description();
    const bool of_job =
        described.sharded && described.world_size > 1 && model.job_world_size() == described.world_size;
    draw_global_charts(run, others, of_job ? model.job_grad_norm() : nullptr, model.job_world_size(), state_);
  }
  ImGui::EndChild();
  // Under the charts, as wide as the column: where their steps lie in the whole run.
  scrubber_.draw(run, state_, left_w);
  splitter("split_charts", false, left_w, column_h, charts_frac_);
  if (begin_pane("heatmap", ImVec2(left_w, std::floor(column_h * heatmap_frac_)))) {
    ranks_.draw(model, run, state_);
    heatmap_.draw(run, state_);
  }
  ImGui::EndChild();
  splitter("split_heatmap", false, left_w, column_h, heatmap_frac_);
  if (begin_pane("detail", ImVec2(left_w, 0))) layer_detail_.draw(run, state_);
  ImGui::EndChild();
  ImGui::EndGroup();

  ImGui::SameLine(0, 0);
  splitter("split_columns", true, avail.y, avail.x, left_frac_);
  ImGui::SameLine(0, 0);

  ImGui::BeginGroup();
  const float right_h = avail.y - kSplitterPx - 2 * spacing;
  if (begin_pane("layers", ImVec2(0, std::floor(right_h * list_frac_)))) layer_list_.draw(run, state_);
  ImGui::EndChild();
  splitter("split_layers", false, ImGui::GetContentRegionAvail().x, right_h, list_frac_);
  if (begin_pane("events", ImVec2(0, 0))) draw_events(run, state_, controls_.commands());
  ImGui::EndChild();
  ImGui::EndGroup();
}

void Dashboard::log_shown_run(const RunModel& run) {
  // Once the panes show another run, and once it has its first step: which run, under which
  // layer names, and the loss of the newest step, so a test can check they are that run's.
  if (!verbose_log_on()) return;   // no label built every frame for nobody
  const std::string label = run_label(run);
  const std::string identity = label + (run.has_steps() ? " stepped" : "");
  if (identity == logged_shown_) return;
  logged_shown_ = identity;
  const size_t layers = run.layer_count();
  verbose_log("keel: shown %s: layers %zu first %s last %s step %lld loss %.9g", label.c_str(), layers,
              layers ? run.layer_name(0).c_str() : "-", layers ? run.layer_name(layers - 1).c_str() : "-",
              run.has_steps() ? static_cast<long long>(run.last_step()) : -1LL,
              run.has_steps() ? run.latest_step().loss : 0.0);
}

void Dashboard::log_new_events(const RunModel& run) {
  if (&run != logged_run_) {
    logged_run_ = &run;
    logged_any_event_ = false;
  }
  const auto& events = run.events();
  // Newest first: find how many at the front are newer than the last one printed.
  size_t fresh = 0;
  while (fresh < events.size() && (!logged_any_event_ || events[fresh].seq > logged_event_seq_)) {
    ++fresh;
  }
  for (size_t i = fresh; i-- > 0;) {
    const wire::Event& event = events[i];
    verbose_log("keel: event %s step %lld layer %s run %s: %s", event.kind.c_str(),
                static_cast<long long>(event.step), event.layer.empty() ? "-" : event.layer.c_str(),
                run_label(run).c_str(), event.detail.c_str());
    if (event.cause) {
      verbose_log("keel: cause %s module %s step %lld: %s", event.cause->kind.c_str(),
                  event.cause->module.empty() ? "-" : event.cause->module.c_str(), static_cast<long long>(event.step),
                  event.cause->sentence.c_str());
    }
  }
  if (fresh > 0) {
    logged_event_seq_ = events.front().seq;
    logged_any_event_ = true;
  }
}

void Dashboard::log_backfills(const std::vector<EndpointState>& links) {
  logged_backfills_.resize(links.size(), 0);
  for (size_t i = 0; i < links.size(); ++i) {
    if (links[i].backfill_outcomes == logged_backfills_[i]) continue;
    logged_backfills_[i] = links[i].backfill_outcomes;
    verbose_log("keel: backfill %s: %s", links[i].endpoint.c_str(), links[i].backfill.c_str());
  }
}

void Dashboard::log_refusals(const std::vector<EndpointState>& links) {
  logged_refusals_.resize(links.size());
  for (size_t i = 0; i < links.size(); ++i) {
    if (links[i].refusal == logged_refusals_[i]) continue;
    logged_refusals_[i] = links[i].refusal;
    if (!links[i].refusal.empty()) std::fprintf(stderr, "keel: refused: %s\n", links[i].refusal.c_str());
  }
}

void Dashboard::log_refused_messages(const Model& model) {
  // Stderr, as a refused link is: a publisher sending what no probe would is worth knowing.
  // Once per second at most, with how many since the last line.
  const uint64_t refused = model.counters().refused_insane;
  if (refused == logged_refused_messages_) return;
  const auto now = std::chrono::steady_clock::now();
  if (logged_refused_messages_ != 0 && now - refused_logged_at_ < std::chrono::seconds(1)) return;
  std::fprintf(stderr, "keel: refused %llu message(s) beyond sane limits; the last: %s\n",
               static_cast<unsigned long long>(refused - logged_refused_messages_),
               model.counters().last_refusal.c_str());
  logged_refused_messages_ = refused;
  refused_logged_at_ = now;
}

void Dashboard::log_recordings(const std::vector<RecordingState>& recordings, const RunModel* run) {
  // Files are read one after another: the first not yet logged is the next to end.
  while (logged_recordings_ < recordings.size() && recordings[logged_recordings_].done) {
    const RecordingState& r = recordings[logged_recordings_++];
    if (!r.error.empty()) {
      std::fprintf(stderr, "keel: %s\n", r.error.c_str());
      continue;
    }
    for (const std::string& problem : r.problems) std::fprintf(stderr, "keel: %s: %s\n", r.path.c_str(), problem.c_str());
    verbose_log("keel: opened %s: %llu messages, %zu problems; shown run steps %lld to %lld", r.path.c_str(),
                static_cast<unsigned long long>(r.messages), r.problems.size(),
                run && run->has_steps() ? static_cast<long long>(run->first_step()) : -1LL,
                run && run->has_steps() ? static_cast<long long>(run->last_step()) : -1LL);
  }
}

void Dashboard::handle_keys(const Model& model, const RunModel& run) {
  const ImGuiIO& io = ImGui::GetIO();
  if (io.WantTextInput || open_dialog_.shown()) return;
  if (key_pressed(ImGuiKey_Space, false)) state_.toggle_follow_live();
  if (key_pressed(ImGuiKey_Home, false)) state_.reset_view();
  if (letter_pressed('F')) {
    // The first non-finite: of the rank that went first (shown from the next frame, where
    // InstabilityFocus takes the views to it), else of this run.
    const std::optional<FirstNonfiniteRank> bad = first_nonfinite_rank(model);
    if (bad && bad->rank != run.rank() && model.ranks().size() > 1) {
      state_.show_rank(bad->rank);
    } else if (const std::optional<wire::Event>& first = run.first_nonfinite()) {
      go_to(run, state_, first->step, first->layer);
      state_.request_scroll_to_selection();
    }
  }
  const bool up = key_pressed(ImGuiKey_UpArrow);
  const bool down = key_pressed(ImGuiKey_DownArrow);
  const std::vector<int>& order = layer_list_.display_order();
  if ((up || down) && !order.empty()) {
    const auto at = std::find(order.begin(), order.end(), state_.selected_layer());
    int index = at == order.end() ? (down ? -1 : int(order.size())) : int(at - order.begin());
    index = std::clamp(index + (down ? 1 : -1), 0, int(order.size()) - 1);
    const int layer = order[size_t(index)];
    state_.select_layer(layer, run.layer_name(size_t(layer)));
  }
}

}  // namespace keel::app::ui
