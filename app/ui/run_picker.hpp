// keel app run picker: which of several current runs the panes show.
//
// What it is for: one job may run a probe per model (a GAN's generator and discriminator), each
// rank 0, and one dashboard may watch several jobs. Each is a run of its own (PROTOCOL §5); the
// picker names them by model, run id and rank and lets the user choose the one the panes show.
// It is drawn only when a rank has several runs (the ranks view chooses between ranks).
// Threads: the UI thread, inside an ImGui window.
// A few runs are radio buttons side by side (each in sight, one click away); more are a combo.
// With --verbose it prints where each run's button is ("keel: control run LABEL x0 .. y1 .."),
// so a test (or a user scripting xdotool) can click them.
// Never: changes what is shown itself; the dashboard does, with the run it returns.
#pragma once

#include <map>
#include <string>

#include "model/model.hpp"

namespace keel::app::ui {

// "generator (run id) rank 0", or "run id rank 0" for a run that names no model.
std::string run_label(const RunModel& run);

class RunPicker {
 public:
  // Runs shown as radio buttons; beyond this many, a combo.
  static constexpr size_t kRunsAsButtons = 4;
  // Draws the picker on its own line when a rank of `model` has several current runs. Returns
  // the run the user picked this frame, else nullptr. `shown` is the run the panes show now.
  const RunModel* draw(const Model& model, const RunModel* shown);

 private:
  void log_geometry(const std::string& name);
  std::map<std::string, std::string> logged_;   // per control: the geometry last printed
};

}  // namespace keel::app::ui
