// keel wire RunKey: which run a message belongs to, (run_id, model, rank) (PROTOCOL §5).
//
// What it is for: telling runs apart when rank alone cannot. One process may run a probe per
// model (a GAN's generator and discriminator), each rank 0 of world 1; their messages differ
// only in run_id and model. Defined here, with the messages, so every client (the dashboard's
// model, keel-cli) keys runs the one way the protocol says. A run_id of "" stands for a run
// known only by its rank: messages of a probe older than the `run` key.
// Threads: a plain value.
// Never: allocates beyond its strings, or throws.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>

#include "keel/wire/messages.hpp"

namespace keel::wire {

struct RunKey {
  std::string run_id;
  std::string model;
  int32_t rank = 0;

  bool operator<(const RunKey& other) const {
    return std::tie(run_id, model, rank) < std::tie(other.run_id, other.model, other.rank);
  }
  bool operator==(const RunKey& other) const {
    return run_id == other.run_id && model == other.model && rank == other.rank;
  }
};

inline RunKey run_key_of(const RunDescription& m) { return RunKey{m.run_id, m.model, m.rank}; }
// A step record, event or ack: the run it names (run_id "" from an older probe).
template <typename Message>
RunKey run_key_of(const Message& m) {
  return RunKey{m.run, m.model, m.rank};
}

}  // namespace keel::wire
