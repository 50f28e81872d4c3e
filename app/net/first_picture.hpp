// first_picture: which parts of a large recording to read first, so that `keel --open` shows
// the whole run within a second or two and fills it in afterwards.
//
// What it is for: reading a recording whole goes through every step record (a 1,000,000-step
// run of 150 layers is about 900 million samples, a minute or more of decoding and storing).
// The first picture instead reads a sample of the file's chunks, spread evenly over its steps,
// and of their step records keeps about `samples` across the run (one per `stride` steps),
// found by the frames' own step without decoding the others. It always reads the first and the
// last chunk, so the picture spans the whole run, and every chunk that holds a description or
// an event (recording::kChunkHasDescriptionOrEvent), keeping all their events and
// descriptions and the step records of the steps those events name, so a first non-finite is
// in the first picture exactly as in the whole one. The loader then reads the file whole and
// replaces the first picture with it (core/recording_loader.hpp).
// Threads: pure functions and a plain value. Never: allocates beyond the chunk count, throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "keel/wire/recording_reader.hpp"

namespace keel::app {

struct FirstPictureBudget {
  // A recording whose chunks decode to at most this many bytes is read whole at once.
  uint64_t whole_raw_bytes = uint64_t{32} << 20;
  // Chunks read at most (the loader sets it from the time the first chunk took to read).
  size_t max_chunks = 512;
  // Step records kept across the run: about two per pixel column of a wide chart.
  int64_t samples = 4096;
};

struct FirstPicturePlan {
  // The plan is the whole file: every chunk and every record, no second reading.
  bool whole = false;
  std::vector<size_t> chunks;   // ascending indices into RecordingReader::chunks()
  // Of the sampled chunks' step records, the first at or after each first_step + k * stride.
  int64_t first_step = 0;
  int64_t stride = 1;
};

FirstPicturePlan plan_first_picture(const std::vector<wire::RecordingChunk>& chunks,
                                    const FirstPictureBudget& budget);

// Keeps the first step record at or after each sample point of a plan, in file order.
class StepSampler {
 public:
  explicit StepSampler(const FirstPicturePlan& plan) : first_(plan.first_step), stride_(plan.stride) {}
  // Whether to keep the record of `step`; a kept step moves the next sample point past it.
  bool take(int64_t step);

 private:
  int64_t first_;
  int64_t stride_;
  int64_t next_ = std::numeric_limits<int64_t>::min();
};

}  // namespace keel::app
