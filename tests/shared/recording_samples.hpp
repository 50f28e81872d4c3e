// A recording written from real wire messages, and what was written, for the recording tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "keel/wire/codec.hpp"
#include "keel/wire/recording_writer.hpp"
#include "wire_samples.hpp"

namespace keel::wire::testing {

struct WrittenFrame {
  recording::FrameKind kind;
  int64_t step;
  std::vector<char> payload;
};

// A run like a probe's: its description, then step records (layer values that drift as a
// training run's do), an event every 17 steps and a second description halfway.
inline std::vector<WrittenFrame> sample_run_frames(int steps) {
  std::vector<WrittenFrame> frames;
  RunDescription run = sample_run();
  frames.push_back({recording::FrameKind::run, -1, encode(run)});
  StepRecord record = sample_step();
  for (int s = 0; s < steps; ++s) {
    record.step = s;
    record.seq = static_cast<uint64_t>(s);
    record.loss = 3.0 / (1.0 + s);
    for (size_t i = 0; i < record.layer_values.size(); ++i) {
      record.layer_values[i] = static_cast<float>(1.0 + 0.01 * s + 0.37 * static_cast<double>(i));
    }
    frames.push_back({recording::FrameKind::step, s, encode(record)});
    if (s % 17 == 5) {
      Event event = sample_event();
      event.step = s;
      frames.push_back({recording::FrameKind::event, s, encode(event)});
    }
    if (s == steps / 2) {
      run.watches.push_back("late.watch");
      frames.push_back({recording::FrameKind::run, s, encode(run)});
    }
  }
  return frames;
}

}  // namespace keel::wire::testing
