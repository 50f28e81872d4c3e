// The dashboard's Skip button in a real X window (Xvfb), clicked for real (xdotool) while the
// real trainer (keel-demo) runs: the app logs the click and the probe's acknowledgement with
// the step, and the telemetry (`keel-cli tail --json`, started before the click) shows that
// step skipped by "command". Run under xvfb-run (see CMakeLists.txt).
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "background_tail.hpp"
#include "child_process.hpp"

namespace {

using keel::e2e::ChildProcess;
using keel::e2e::run_command;

TEST(ControlGui, ClickOnSkipIsAcknowledgedAndTheStepIsSkippedByCommand) {
  const int port = keel::e2e::free_port_pair();
  ASSERT_GT(port, 0);
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(port);
  ChildProcess demo({KEEL_DEMO_PATH, "--steps", "0", "--endpoint", endpoint, "--log-every", "10"},
                    keel::e2e::kBackgroundNiceness);
  ASSERT_FALSE(demo.wait_for("loss ", 60).empty()) << demo.output();

  ChildProcess keel({KEEL_PATH, "--verbose", "--connect", endpoint});
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  const std::string geometry = keel.wait_for("keel: control skip", 60);
  ASSERT_EQ(std::sscanf(geometry.c_str() + geometry.find("keel: control"),
                        "keel: control skip x0 %f y0 %f x1 %f y1 %f", &x0, &y0, &x1, &y1), 4)
      << keel.output();
  ASSERT_FALSE(keel.wait_for("keel: heatmap", 60).empty()) << keel.output();
  // Every record from before the click on: the acknowledged step cannot be missed.
  // Into a file: a pipe nobody reads while the clicks are tried would stall the tail, and
  // ZeroMQ would drop records for it.
  keel::e2e::BackgroundTail tail(KEEL_CLI_PATH, endpoint, ::testing::TempDir() + "/keel_control_gui_tail");
  ASSERT_TRUE(tail.started());
  ASSERT_FALSE(tail.wait_for("\"type\":\"step\"", 30).empty()) << tail.output();

  const std::string window = run_command("xdotool search --sync --limit 1 --name '^keel$'");
  ASSERT_FALSE(window.empty());
  // Focus first (ImGui 1.86's GLFW backend reads the pointer only while the window is focused
  // or has seen the pointer enter, and without a window manager nothing focuses it), move,
  // then click a moment later: the app must see the hover before the press. A click the
  // window did not see (a loaded machine) is tried again; each one that is seen is logged, so
  // at most one skip is ever sent.
  std::string clicked;
  for (int attempt = 0; attempt < 4 && clicked.empty(); ++attempt) {
    run_command("xdotool windowfocus --sync " + window + " mousemove --window " + window + " " + std::to_string(int((x0 + x1) / 2)) + " " +
                std::to_string(int((y0 + y1) / 2)) + " sleep 0.3 click 1");
    clicked = keel.wait_for("keel: clicked Skip next update", 5);
  }
  ASSERT_FALSE(clicked.empty()) << keel.output();
  const std::string ack = keel.wait_for("keel: command skip id", 30);
  long long step = -1;
  ASSERT_NE(ack.find("acknowledged at step "), std::string::npos) << keel.output();
  ASSERT_EQ(std::sscanf(ack.c_str() + ack.find("at step "), "at step %lld", &step), 1) << ack;
  ASSERT_GE(step, 0);

  const std::string record = tail.wait_for("\"step\":" + std::to_string(step) + ",\"loss\"", 30);
  ASSERT_FALSE(record.empty()) << "no record of step " << step;
  EXPECT_NE(record.find("\"skipped\":true"), std::string::npos) << record;
  EXPECT_NE(record.find("\"skip_reason\":\"command\""), std::string::npos) << record;
  // The step after it is applied again: one click, one skip.
  const std::string next = tail.wait_for("\"step\":" + std::to_string(step + 1) + ",\"loss\"", 30);
  EXPECT_NE(next.find("\"skipped\":false"), std::string::npos) << next;
}

}  // namespace
