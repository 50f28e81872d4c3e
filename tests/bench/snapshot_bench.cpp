#include "snapshot_bench.hpp"

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "keel/probe/probe.hpp"
#include "keel/wire/codec.hpp"
#include "keel/wire/vocabulary.hpp"
#include "median.hpp"
#include "trainer.hpp"
#include "users_key_client.hpp"

namespace keel::bench {
namespace {

using Clock = std::chrono::steady_clock;

double step_ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

SnapshotCost measure_snapshot_cost(int64_t every, int64_t steps) {
  SnapshotCost cost;
  cost.every = every;
  cost.steps = steps;
  demo::TrainerConfig config;
  demo::Trainer trainer(config);
  demo::Faults no_faults;
  probe::ProbeOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  options.record_dir = "";
  options.dump_on_nonfinite = false;
  options.rewind_every = every;
  options.rewind_keep = 2;
  probe::Probe probe(*trainer.model(), trainer.optimizer(), options);

  std::vector<double> step_ms, end_us_plain, end_us_snapshot;
  const int64_t warmup = 5;
  for (int64_t step = 0; step < warmup + steps; ++step) {
    const auto start = Clock::now();
    trainer.schedule(step, no_faults);
    probe.step(trainer.forward_backward(nullptr, nullptr));
    const double ms = step_ms_since(start);
    if (step < warmup) continue;
    // The end of step S - 1 takes the snapshot step S begins from.
    if ((step + 1) % every == 0) {
      end_us_snapshot.push_back(probe.last_timing().end_us);
    } else {
      end_us_plain.push_back(probe.last_timing().end_us);
      step_ms.push_back(ms);
    }
  }
  cost.step_ms = median(step_ms);
  cost.snapshot_ms = (median(end_us_snapshot) - median(end_us_plain)) / 1000.0;
  cost.share_pct = 100.0 * cost.snapshot_ms / (static_cast<double>(every) * cost.step_ms);

  // One rewind by command, taken at a step boundary while training goes on.
  zmq::context_t context{1};
  zmq::socket_t socket{context, zmq::socket_type::dealer};
  socket.set(zmq::sockopt::linger, 0);
  keel::test::present_users_key(socket);
  socket.connect(probe.bound_command_endpoint());
  wire::Command command;
  command.rank = -1;
  command.id = 1;
  command.kind = wire::command_kind::kRewind;
  const std::vector<char> payload = wire::encode(command);
  socket.send(zmq::buffer(std::string_view(wire::kTopicCommand)), zmq::send_flags::sndmore);
  socket.send(zmq::buffer(payload), zmq::send_flags::none);
  cost.error = "no rewind within 500 steps";
  for (int64_t step = warmup + steps, tries = 0; tries < 500; ++step, ++tries) {
    const auto start = Clock::now();
    trainer.schedule(step, no_faults);
    const probe::StepOutcome outcome = probe.step(trainer.forward_backward(nullptr, nullptr));
    const double ms = step_ms_since(start);
    if (outcome.skip_reason != "rewind") continue;
    cost.rewind_step_ms = ms;
    // The pause as the probe timed it and its event says it ("... put back in 1.2 ms; ...").
    cost.error = "no rewind event with its pause";
    for (const wire::Event& e : probe.last_events()) {
      const size_t at = e.detail.find(" put back in ");
      if (e.kind == wire::event_kind::kRewind && at != std::string::npos &&
          std::sscanf(e.detail.c_str() + at, " put back in %lf ms", &cost.rewind_pause_ms) == 1) {
        cost.error.clear();
      }
    }
    break;
  }
  return cost;
}

}  // namespace keel::bench
