// keel-demo's command line: every option with its default, and the faults the fault options
// ask for. Threads: main, before training starts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "keel/probe/probe_options.hpp"
#include "keel/wire/codec.hpp"
#include "trainer.hpp"

namespace keel::demo {

struct DemoOptions {
  TrainerConfig config;
  int64_t steps = 2000;   // 0 = until interrupted
  int64_t log_every = 50;
  std::string endpoint = keel::wire::kDefaultPubEndpoint;   // "" = none
  std::string precision = "fp32";
  std::string device = "cpu";
  std::string model = "char";
  int threads = 0;
  bool use_scaler = false;
  bool watch_attention = false;   // each block's attention logits watched, beside the output logits
  // Fault injection: "STEP:LAYER", "STEP:FACTOR", "STEP:FACTOR", "KIND:STEP".
  std::string inject_nan, inject_spike, lr_spike, cause, drift;
  double drift_rate = 0;   // --drift-rate: 0 = the drift's own
  bool plain_step = false;
  // The probe's options; endpoint, skip_on_nonfinite, dump_on_nonfinite and the keys are set
  // from the fields below by the program.
  keel::probe::ProbeOptions probe;
  bool no_skip = false;
  bool no_dump_nonfinite = false;
  std::string command_key;
  std::vector<std::string> allowed_keys;
  double pace = 0;   // steps per second at most; 0 = as fast as possible
  std::vector<std::string> freeze;
  bool list_layers = false;
};

// Registers every keel-demo option on `app`, writing into `options`.
void add_demo_options(CLI::App& app, DemoOptions& options);

// The faults --inject-nan, --inject-spike and --lr-spike ask for. Throws CLI::ValidationError
// naming the flag and the form it takes when one cannot be read.
Faults parse_faults(const DemoOptions& options);
// --drift KIND:STEP with --drift-rate (0: the drift's own) into `faults`; throws
// CLI::ValidationError saying what is expected.
void parse_drift(const std::string& text, double rate, Faults& faults);

}  // namespace keel::demo
