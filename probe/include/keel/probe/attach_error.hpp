// AttachError: what a Probe's constructor throws on a set-up error (an address in use, a bad
// endpoint, no parameters, keys that cannot be used), with a sentence that names the fix.
//
// A header of its own so the probe's transport (publisher, command server) can throw it without
// including torch.
#pragma once

#include <stdexcept>

namespace keel::probe {

class AttachError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace keel::probe
