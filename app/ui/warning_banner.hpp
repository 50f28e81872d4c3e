// WarningBanner: the forecaster's newest warning, across the window above the charts, until the
// user dismisses it.
//
// What it is for: a warning is the one event that comes before the damage (PROTOCOL §3.4: a
// trend that usually ends in a divergence, with the steps it may take), so it is not left to a
// row of the events pane. An amber strip says what is rising and where (the signal and the
// layer, the rank and run when not the ones shown), the numbers (values/warning_numbers.hpp)
// and the lead, and the advice; Dismiss hides it until a newer warning comes. The newest
// warning of any current run is shown (model/rank_overview.hpp's newest_warning), from a live
// run or one read from a recording alike. With --verbose it logs the warning it shows ("keel:
// warning banner step N: LINE | LINE | LINE"), where it is ("keel: warning banner x0 .. y0 ..
// x1 .. y1 .."), its Dismiss button as a control and the click, so tests can read and click it.
// Threads: the UI thread, inside an ImGui frame.
// Never: changes the model.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/model.hpp"
#include "model/rank_overview.hpp"

namespace keel::app::ui {

// The banner's lines for `warning`, a warning of `of`'s run, while the panes show `shown`:
//   "Warning at step 120: update_ratio rising in blocks.0.attn.qkv.weight" (", rank 1 of run X"
//   when `of` is not `shown`);
//   the numbers and the lead, or the event's detail when it carries no warning map;
//   "Advice: ..." when it has advice.
std::vector<std::string> warning_banner_lines(const wire::Event& warning, const RunModel& of, const RunModel* shown);

class WarningBanner {
 public:
  // Draws the banner at the cursor, the window's width, for the newest warning not dismissed;
  // nothing when there is none.
  void draw(const Model& model, const RunModel* shown);

 private:
  // What tells one warning from another: its run, its sequence number and stamp.
  struct Identity {
    wire::RunKey run;
    uint64_t seq = 0;
    int64_t stamp_unix_ns = 0;
    bool operator==(const Identity& other) const {
      return run == other.run && seq == other.seq && stamp_unix_ns == other.stamp_unix_ns;
    }
  };
  void log_shown(const Identity& identity, const wire::Event& warning, const std::vector<std::string>& lines);

  std::optional<Identity> dismissed_;
  std::optional<Identity> logged_;
  std::array<float, 4> logged_rect_{};
  std::array<float, 4> logged_button_{};
};

}  // namespace keel::app::ui
