#include "origin_bench.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <vector>

#include "keel/probe/probe.hpp"
#include "median.hpp"
#include "trainer.hpp"

namespace keel::bench {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

probe::ProbeOptions quiet() {
  probe::ProbeOptions o;
  o.endpoint = "";
  o.dump_on_nonfinite = false;
  o.record_dir = "";
  return o;
}

}  // namespace

OriginCost measure_origin_cost(int rounds) {
  constexpr int kWarmup = 5;
  demo::TrainerConfig config;
  demo::Trainer plain(config), stepped(config), closed(config);
  probe::Probe stepped_probe(*stepped.model(), stepped.optimizer(), quiet());
  probe::Probe closed_probe(*closed.model(), closed.optimizer(), quiet());
  std::vector<double> plain_ms, probe_ms, closure_ms, probe_us, closure_us, fb_ms;
  for (int round = 0; round < kWarmup + rounds; ++round) {
    const bool record = round >= kWarmup;
    for (int k = 0; k < 3; ++k) {
      const int mode = (round + k) % 3;   // rotate the order so no mode always runs first
      const auto start = Clock::now();
      if (mode == 0) {
        plain.forward_backward(nullptr, nullptr);
        if (record) fb_ms.push_back(ms_since(start));
        plain.optimizer().step();
        if (record) plain_ms.push_back(ms_since(start));
      } else if (mode == 1) {
        stepped_probe.step(stepped.forward_backward(nullptr, nullptr));
        if (record) {
          probe_ms.push_back(ms_since(start));
          probe_us.push_back(stepped_probe.last_timing().probe_us);
        }
      } else {
        const demo::Batch batch = closed.next_batch();
        closed_probe.step([&] { return closed.forward_backward(batch, nullptr, nullptr); });
        if (record) {
          closure_ms.push_back(ms_since(start));
          closure_us.push_back(closed_probe.last_timing().probe_us);
        }
      }
    }
  }

  // The re-run: every other step unsafe (a NaN loss weight), each the first of its run.
  demo::Trainer poisoned_plain(config), poisoned_closed(config);
  probe::Probe plain_probe(*poisoned_plain.model(), poisoned_plain.optimizer(), quiet());
  probe::Probe rerun_probe(*poisoned_closed.model(), poisoned_closed.optimizer(), quiet());
  std::vector<double> without_rerun, with_rerun;
  for (int round = 0; round < kWarmup + rounds; ++round) {
    const bool poisoned = round % 2 == 1, record = round >= kWarmup && poisoned;
    for (int k = 0; k < 2; ++k) {
      const bool closure = (round / 2 + k) % 2 == 1;
      demo::Trainer& trainer = closure ? poisoned_closed : poisoned_plain;
      demo::Batch batch = trainer.next_batch();
      if (poisoned) batch.weights[0] = std::numeric_limits<float>::quiet_NaN();
      const auto start = Clock::now();
      if (closure) {
        rerun_probe.step([&] { return trainer.forward_backward(batch, nullptr, nullptr); });
      } else {
        plain_probe.step(trainer.forward_backward(batch, nullptr, nullptr));
      }
      if (record) (closure ? with_rerun : without_rerun).push_back(ms_since(start));
    }
  }

  OriginCost c;
  c.plain_ms = median(plain_ms);
  c.probe_ms = median(probe_ms);
  c.closure_ms = median(closure_ms);
  c.closure_pct = 100.0 * (c.closure_ms - c.probe_ms) / c.probe_ms;
  c.closure_extra_us = median(closure_us) - median(probe_us);
  c.forward_backward_ms = median(fb_ms);
  c.rerun_ms = median(with_rerun) - median(without_rerun);
  c.rerun_per_forward_backward = c.rerun_ms / c.forward_backward_ms;
  return c;
}

}  // namespace keel::bench
