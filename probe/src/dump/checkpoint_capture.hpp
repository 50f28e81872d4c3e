// Capturing a dump: the training state, serialised into memory at a step boundary.
//
// What it is for: a dump must hold the state of one step exactly, so it is taken on the
// training thread between the gradient pass and the update; only the copy into memory happens
// there, the disk write goes to CheckpointWriter. The files of a dump directory:
//   model.pt           parameters and buffers (TrainedModel::serialise; the C++ front's
//                      torch::load(model, dir + "/model.pt") reads it)
//   optimizer.pt       optimizer state (OptimizerAdapter::serialise; the C++ front's
//                      torch::load(optimizer, dir + "/optimizer.pt"))
//   telemetry.msgpack  the recent step records, oldest first, as published (PROTOCOL §3.3),
//                      one msgpack map after another, with the run descriptions between
//                      them where the layers changed (Publisher::history())
//   run.msgpack        the run description (PROTOCOL §3.1)
//   manifest.json      step, reason, label, run id, rank, time, file sizes
// The state is the one step `step`'s gradients were computed on: the update of that step has
// not been applied yet (and is not, when the step is skipped).
// Threads: the training thread. Never: touches the disk.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "checkpoint_writer.hpp"
#include "keel/probe/optimizer_adapter.hpp"
#include "keel/probe/trained_model.hpp"
#include "keel/wire/messages.hpp"
#include "transport/kept_message.hpp"

namespace keel::probe {

struct DumpReason {
  int64_t step = 0;
  std::string reason;   // "command" or "nonfinite"
  std::string label;    // already sanitised; may be empty
  uint64_t command_id = 0;
  int32_t rank = -1;    // in the name when >= 0: ranks of one job share a dump directory
  // ProbeOptions::model (checked at attach); may be empty. In the name: the probes of a job's
  // models may share a dump directory, and both may dump the same step.
  std::string model;
};

// "step-<step>-<reason>[-<model>][-<label>][-rank<rank>]"
std::string checkpoint_name(const DumpReason& why);

// The files of a dump. Throws c10::Error / std::exception when serialisation fails.
std::vector<CheckpointFile> capture_checkpoint(TrainedModel& model, OptimizerAdapter& optimizer,
                                               const wire::RunDescription& description,
                                               const std::vector<KeptMessage>& telemetry,
                                               const DumpReason& why);

}  // namespace keel::probe
