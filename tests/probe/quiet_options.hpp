// ProbeOptions for probe tests that need no socket: nothing published, no command socket, and
// no automatic dump (dumps have their own tests, dump_test.cpp; none lands in the cwd).
#pragma once

#include "keel/probe/probe.hpp"

namespace keel::test {

inline keel::probe::ProbeOptions quiet() {
  keel::probe::ProbeOptions o;
  o.endpoint = "";
  o.dump_on_nonfinite = false;
  return o;
}

}  // namespace keel::test
