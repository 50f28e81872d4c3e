// keel app RecordingState: how far the dashboard has read one file it was asked to open
// (`keel --open`), as the status bar shows it.
// Threads: a plain value; the loader's thread fills it, the UI thread reads a copy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace keel::app {

struct RecordingState {
  std::string path;
  bool done = false;
  std::string error;                    // could not be read at all
  std::vector<std::string> problems;    // read past (damage, a cut-off end), in words
  uint64_t messages = 0;                // handed over so far
  uint64_t file_bytes = 0;
};

}  // namespace keel::app
