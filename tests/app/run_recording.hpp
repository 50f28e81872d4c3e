// A run written as a recording, and the same run's messages as a probe publishes them, for the
// tests of reading recordings back (app/net/first_picture, app/core's loader and AppCore).
// The run is test_support::sample_run()'s "demo-run"; every message names its run, and its
// sequence numbers are one publisher's: step s is seq 2s + 2, its event (if any) 2s + 3.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "keel/wire/codec.hpp"
#include "keel/wire/recording_writer.hpp"
#include "test_publisher.hpp"

namespace keel::app::test_support {

struct RunSpec {
  std::vector<int64_t> event_steps;   // an event after the record of each of these steps
  int64_t nan_step = -1;              // this step's fc1.weight grad norm is NaN
};

inline wire::StepRecord run_step(int64_t step, const RunSpec& spec = {}) {
  wire::StepRecord record = sample_step(step);
  record.run = "demo-run";
  record.seq = static_cast<uint64_t>(2 * step + 2);
  record.loss = 3.0 / (1.0 + static_cast<double>(step));
  record.layer_values[0] = step == spec.nan_step ? std::numeric_limits<float>::quiet_NaN()
                                                  : 1.0f + 0.001f * static_cast<float>(step % 1000);
  return record;
}

inline wire::Event run_event(int64_t step) {
  wire::Event event;
  event.run = "demo-run";
  event.seq = static_cast<uint64_t>(2 * step + 3);
  event.step = step;
  event.kind = "first_nonfinite";
  event.layer = "fc1.weight";
  event.detail = "non-finite gradient values";
  return event;
}

// The run's messages for steps [first, last], in publishing order.
inline std::vector<wire::Message> run_messages(int64_t first, int64_t last, const RunSpec& spec = {}) {
  std::vector<wire::Message> messages;
  if (first == 0) messages.emplace_back(sample_run());
  for (int64_t s = first; s <= last; ++s) {
    messages.emplace_back(run_step(s, spec));
    for (int64_t e : spec.event_steps) {
      if (e == s) messages.emplace_back(run_event(s));
    }
  }
  return messages;
}

// Writes steps [0, last] of the run into a new recording at `path`, in chunks of about
// `chunk_bytes` raw bytes (small, so a short run has many chunks).
inline void write_run_recording(const std::string& path, int64_t last, const RunSpec& spec = {},
                                size_t chunk_bytes = 4096) {
  wire::RecordingWriterOptions options;
  options.chunk_target_bytes = chunk_bytes;
  if (!wire::recording_codec_available(options.codec)) options.codec = wire::recording::Codec::none;
  std::string error;
  std::unique_ptr<wire::RecordingWriter> writer = wire::RecordingWriter::create(path, options, error);
  ASSERT_TRUE(writer) << error;
  for (const wire::Message& message : run_messages(0, last, spec)) {
    const std::vector<char> payload = wire::encode(message);
    wire::recording::FrameKind kind = wire::recording::FrameKind::step;
    int64_t step = -1;
    if (const auto* record = std::get_if<wire::StepRecord>(&message)) {
      step = record->step;
    } else if (const auto* event = std::get_if<wire::Event>(&message)) {
      kind = wire::recording::FrameKind::event;
      step = event->step;
    } else {
      kind = wire::recording::FrameKind::run;
    }
    ASSERT_TRUE(writer->append(kind, step, payload.data(), payload.size())) << writer->error();
  }
  ASSERT_TRUE(writer->close()) << writer->error();
}

}  // namespace keel::app::test_support
