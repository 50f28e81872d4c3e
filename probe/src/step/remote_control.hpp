// RemoteControl: the commands the dashboard and keel-cli send (PROTOCOL §6) as the step takes
// them: applied and answered at a step's boundary (a dump's answer comes from the writer once
// it is written), and the skips and the dump they ask for held until the step they are for.
// Owns: the CommandServer (and with it the command thread, which owns the socket and answers
// "history" itself), the commands taken and the acks owed at this boundary (reused), the
// updates still to skip (the next K, and the steps an at_step skip named), the dump and the
// rewind asked for, when the last dump was asked, and the clients the sockets refused (reused).
// Thread: the training thread; the command thread hands commands over and sends the acks.
// Never: waits for a client (commands and acks cross bounded queues), or allocates while no
// command comes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint_dumps.hpp"
#include "keel/probe/probe_options.hpp"
#include "keel/wire/messages.hpp"
#include "probe_clock.hpp"
#include "snapshot/state_snapshots.hpp"
#include "step_events.hpp"
#include "transport/command_server.hpp"
#include "transport/publisher.hpp"

namespace keel::probe {

class RemoteControl {
 public:
  // Opens the command socket (a thread of its own). Throws what CommandServer throws.
  void listen(const CommandServerOptions& options) { commands_ = std::make_unique<CommandServer>(options); }
  // Null when the probe takes no commands.
  CommandServer* commands() const { return commands_.get(); }

  // What the commands of a step's boundary read and change.
  struct Run {
    int64_t step;                        // the step about to be decided
    ProbeOptions& options;               // its policies, which a "policy" command turns on or off
    wire::RunDescription& description;   // says which policies are on; sent again when it changes
    const CheckpointDumps& dumps;        // whether a "dump" can be taken now
    const StateSnapshots& snapshots;     // where a "rewind" can go
    StepEvents& events;
    Publisher* publisher;                // null without one
  };
  // At a step's boundary, before anything reads the policies: the commands that arrived,
  // applied, and the acks owed answered. A failure to take them is the probe's (a
  // probe_error): the commands taken and not answered time out on the client.
  void take_commands(const Run& run);
  // Whether a command skips the update of `step` (the next K updates, or an at_step skip that
  // names it): taken off the updates still to skip.
  bool skips(int64_t step);
  // The dump a command asked for, until the step that takes it (dump_taken()).
  const std::optional<DumpRequest>& dump_requested() const { return dump_requested_; }
  void dump_taken() { dump_requested_.reset(); }
  // The rewind a command asked for, until the step that takes it (rewind_taken()).
  struct RewindRequest {
    int64_t to_step;       // a snapshot's step
    int64_t at_step;       // the step it is taken at (every rank the same); -1: the next
    std::string why;       // "command 7", or the rewind policy's divergence
    int64_t policy_rewind = 0;   // the rewind policy's how-manieth rewind this is; 0: a command's
  };
  // A rewind the rewind policy asks for, taken at the next boundary as a command's would be;
  // false (nothing asked) while another is pending.
  bool schedule_rewind(RewindRequest request) {
    if (rewind_requested_) return false;
    rewind_requested_ = std::move(request);
    return true;
  }
  const std::optional<RewindRequest>& rewind_requested() const { return rewind_requested_; }
  // The rewind the ranks of a job agreed on (probe_agreement.cpp), taken in place of this
  // rank's own, if it had one.
  void join_rewind(RewindRequest request) { rewind_requested_ = std::move(request); }
  // Whether the rewind asked for is taken at `step`.
  bool rewinds(int64_t step) const {
    return rewind_requested_ && (rewind_requested_->at_step < 0 || rewind_requested_->at_step == step);
  }
  void rewind_taken() { rewind_requested_.reset(); }
  // auth_refused events, of `step`, for the clients the command and telemetry sockets refused.
  void report_refusals(Publisher* publisher, StepEvents& events, int64_t step);
  // The probe's end: the acks still queued go out until `deadline`.
  void finish(Clock::time_point deadline) {
    if (commands_) commands_->finish(deadline);
  }

 private:
  // The command thread already checked kind, rank and argument ranges (check_command); this
  // applies what depends on the run's state. No ack (nullopt) for a dump: the writer thread
  // answers once the files are on disk.
  std::optional<wire::Ack> apply(const PendingCommand& pending, const Run& run);
  bool set_policy(const std::string& name, bool enable, const Run& run);
  // A "rewind" command: the rewind asked for (ack.step the snapshot's step), or false with
  // ack.error saying why not.
  bool ask_rewind(const wire::Command& command, const Run& run, wire::Ack& ack);

  std::unique_ptr<CommandServer> commands_;
  std::vector<PendingCommand> taken_;                   // reused: no allocation while idle
  std::vector<std::pair<uint64_t, wire::Ack>> acks_;    // answered at this step's boundary
  // A command (describe, policy) asked for the run's description to go out: sent once per
  // step boundary however many asked, so a burst of them cannot crowd the records out of
  // the publisher's queue.
  bool describe_due_ = false;
  int64_t skips_left_ = 0;                              // "skip" updates still to skip
  std::set<int64_t> scheduled_skips_;                   // steps an at_step "skip" named (bounded)
  std::optional<DumpRequest> dump_requested_;           // by command, taken at this step
  std::optional<RewindRequest> rewind_requested_;       // by command or the rewind policy
  std::optional<Clock::time_point> last_command_dump_;
  std::vector<AuthRefusal> refusals_;                   // reused
};

}  // namespace keel::probe
