// keel app OpenDialog: the "Open..." button and its dialog, choosing runs kept on disk.
//
// What it is for: opening a recording without restarting keel with --open. The button (and
// Ctrl+O) opens a dialog with a path field (Enter opens what is typed) and the recordings and
// dumps of the working directory (recording_files.hpp), newest first; a click opens one.
// What the user chose becomes a request the dashboard hands to the main part
// (Dashboard::take_open_requests); the dialog never opens a file itself. The list is read
// when the dialog opens, not every frame. With --verbose it logs the button's geometry
// ("keel: control open x0 .."), and each listed file's while the dialog is open ("keel: open
// dialog entry N PATH x0 .. y0 .. x1 .. y1 .."), so a test can click them.
// Threads: the UI thread, inside an ImGui window.
// Never: reads a file's contents, or lists files while closed.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "ui/recording_files.hpp"

namespace keel::app::ui {

class OpenDialog {
 public:
  // The button, at the cursor.
  void draw_button();
  // Opens the dialog in this frame's draw_dialog() (Ctrl+O; the button calls it too).
  void open();
  // The dialog, when open. Call once per frame, in the window that drew the button.
  void draw_dialog();
  // Whether the last draw_dialog() showed the dialog (the dashboard's own keys wait meanwhile).
  bool shown() const { return shown_; }
  // The paths chosen since the last call, oldest first.
  std::vector<std::string> take_requests();

 private:
  void choose(const std::string& path);
  void draw_files();

  bool open_requested_ = false;
  bool shown_ = false;
  bool focus_path_ = false;
  std::array<char, 4096> path_{};   // the path field
  std::string folder_;              // where the files listed were looked for (absolute)
  std::vector<ListedFile> files_;
  std::vector<std::string> requests_;
  std::string logged_button_;
  std::vector<std::string> logged_entries_;   // each listed file's geometry line as printed
};

}  // namespace keel::app::ui
