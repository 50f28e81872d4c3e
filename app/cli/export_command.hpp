// `keel-cli export FILE [--layers REGEX] [--events]`: a recorded run as CSV on stdout.
//
//   keel-cli export run.keelrec > run.csv                 # then: pandas.read_csv("run.csv")
//   keel-cli export run.keelrec --layers 'attn' > attn.csv
//   keel-cli export run.keelrec --events > events.csv
//
// What it is for: the run in the tools people already analyse runs with. Tidy (long) form,
// one value per row: `step,layer,metric,value`. The run's own series (loss, lr, grad_norm,
// probe_us, and the loss scale with a scaler) have an empty layer; each layer's metrics
// (grad_norm, grad_absmax, ...: wire::layer_metric_name) follow under its name, as measured
// (a metric not due at a step by its cadence has no row). A wide model's rollup step has no
// layer rows; its modules' values follow under each module's name as `module.<metric>` (the
// module's worst layer's value; module.grad_nonfinite their sum). NaN and infinities are written
// nan, inf, -inf, which pandas reads as floats. --layers keeps only the layers whose name
// the regular expression matches somewhere (ECMAScript syntax), and the modules alike, and no
// run series. --events
// writes the events instead: `step,rank,kind,layer,detail,cause_kind,cause_op,cause_module,cause`.
// Fields holding a comma, quote or line break are quoted (RFC 4180).
// Exit status: 0 when the file was read, 1 when it cannot be or the expression is invalid.
// Threads: main thread only.
#pragma once

#include <ostream>
#include <string>

#include "cli/command.hpp"

namespace keel::app {

struct ExportOptions {
  std::string path;
  std::string layers;   // regular expression; "" = every layer and the run series
  bool events = false;
};

int run_export(const ExportOptions& options, std::ostream& out, std::ostream& err);

CliCommand add_export_command(CLI::App& app);

}  // namespace keel::app
