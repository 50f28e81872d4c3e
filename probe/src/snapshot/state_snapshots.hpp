// StateSnapshots: the training state kept in memory every ProbeOptions::rewind_every steps,
// the newest rewind_keep of them, and a rewind's restore (PROTOCOL §6 "rewind", DESIGN §2.4).
//
// A snapshot of step S holds the state step S begins from: the weights (the planned layers'
// tensors), the model's buffers, the optimizer's state (each parameter's step count and
// tensors, or its serialised archive where its front hands no tensors out) and the loss
// scaler's scale and growth tracker. It is taken as step S-1 ends, after its update.
// Where the copies go: on the CPU, host copies on the training thread. On a CUDA device, into
// pinned host memory: the weights and the optimizer state on a side stream (SideCopy) that
// waits for the step's update on the device, the buffers (which the next forward writes) on
// the training stream; the next update waits on the device for the side stream, not the host.
// Memory: each slot's host tensors are made for the first snapshot it holds and reused while
// the shapes stay; bytes() is what all slots hold, counted as a snapshot is taken (every
// step's record reads it: a 50,000-tensor model's slots are not walked per step).
// Threads: the training thread. Never: waits on the host while taking a snapshot (but where
// keel is built without the CUDA probe), or allocates once every slot is made and the shapes
// stay. A restore waits for the copies: it is the rewind's pause.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "keel/probe/grad_scaler.hpp"
#include "keel/probe/optimizer_adapter.hpp"
#include "side_copy.hpp"

namespace keel::probe {

// The live state a snapshot copies and a restore writes back.
struct TrainingState {
  const std::vector<torch::Tensor>& weights;
  const std::vector<torch::Tensor>& buffers;
  OptimizerAdapter& optimizer;
  GradScaler* scaler;   // null or disabled: none
};

class StateSnapshots {
 public:
  // `every` 0: no snapshots. `keep` at least 1.
  StateSnapshots(int64_t every, int64_t keep);

  bool enabled() const { return every_ > 0; }
  // Whether the state step `step` begins from is snapshotted.
  bool due(int64_t step) const { return every_ > 0 && step % every_ == 0; }
  // Copies `state` as the state step `step` begins from, into the oldest slot. Throws what a
  // copy throws; that slot is then empty.
  void take(int64_t step, const TrainingState& state);
  // The current stream of each device waits for the snapshot's side copies: before anything
  // writes the weights or the optimizer state (the next update).
  void order_before_update();

  // The newest snapshot of a step at or before `step`.
  std::optional<int64_t> newest_at_or_before(int64_t step) const;
  // Writes snapshot `step` (one newest_at_or_before named) back into `state`, and forgets the
  // snapshots of later steps (the abandoned span's). Throws, having written nothing, where the
  // model's tensors changed since (naming what does not match) or the optimizer's front
  // cannot put its state back; a device failing midway leaves what was written, which the
  // caller reports.
  void restore(int64_t step, const TrainingState& state);

  // Keeps the newest snapshot of a step at or before `step` from being taken over by later
  // ones (an early warning's: the state from before the trend it saw), in place of the one held
  // before; the other slots take the snapshots in turn. With one slot nothing is held. A rewind
  // that abandons the held snapshot's step releases it. Returns the step held.
  std::optional<int64_t> hold(int64_t step);
  std::optional<int64_t> held() const;

  uint64_t bytes() const { return bytes_; }
  std::vector<int64_t> steps() const;   // oldest first

 private:
  struct Slot {
    int64_t step = -1;   // -1: empty
    bool held = false;   // hold(): not taken over by a later snapshot
    std::vector<torch::Tensor> weights, buffers;
    std::vector<OptimizerStateTensors> optimizer;   // host copies, or
    std::string optimizer_archive;                  // its serialise() where it hands no tensors out
    bool has_scaler = false;
    float scale = 0;
    int32_t growth_tracker = 0;
  };
  // Copies `source` into `host`, made again where its shape or type changed. Copies from a
  // CUDA device are enqueued (into pinned memory) on the current stream.
  static void copy_to_host(torch::Tensor& host, const torch::Tensor& source);
  SideCopy* side_copy(int device_index);
  uint64_t count_bytes() const;

  int64_t every_;
  std::vector<Slot> slots_;
  size_t next_ = 0;   // the slot the next snapshot takes
  uint64_t bytes_ = 0;  // count_bytes() after the last take()
  std::map<int, std::unique_ptr<SideCopy>> side_copies_;   // per CUDA device; null without the CUDA probe
  std::vector<OptimizerStateTensors> live_state_;          // reused
};

}  // namespace keel::probe
