// ProbeOptions for probe tests that need no socket: nothing published, no command socket, no
// automatic dump and no recording (dumps and recordings have their own tests, dump_test.cpp
// and recording_probe_test.cpp; nothing lands in the cwd).
#pragma once

#include "keel/probe/probe.hpp"

namespace keel::test {

inline keel::probe::ProbeOptions quiet() {
  keel::probe::ProbeOptions o;
  o.endpoint = "";
  o.dump_on_nonfinite = false;
  o.record_dir = "";
  return o;
}

}  // namespace keel::test
