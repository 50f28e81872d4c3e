// keel app RecordingState: how far the dashboard has read one file it was asked to open
// (`keel --open`, File > Open, a dropped file), as the status bar shows it.
// Threads: a plain value; the loader's thread fills it, the UI thread reads a copy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace keel::app {

struct RecordingState {
  std::string path;
  // Read whole and shown: the model holds every message of the file.
  bool done = false;
  // A sample of a large recording is shown (first_picture.hpp) while the rest is read: one
  // step record in `sample_stride` steps, and every event.
  bool first_picture = false;
  int64_t sample_stride = 1;
  double first_picture_secs = 0;        // from the request to the first picture handed over
  double whole_secs = 0;                // from the request to the whole file handed over
  double progress = 0;                  // of the whole reading, 0 to 1
  std::string error;                    // could not be read at all
  std::vector<std::string> problems;    // read past (damage, a cut-off end), in words
  uint64_t messages = 0;                // in the whole file, once read
  uint64_t file_bytes = 0;
};

}  // namespace keel::app
