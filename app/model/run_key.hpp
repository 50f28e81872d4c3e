// RunKey: which run a message belongs to, (run_id, model, rank) (PROTOCOL §5).
//
// What it is for: telling runs apart when rank alone cannot. One process may run a probe per
// model (a GAN's generator and discriminator), each rank 0 of world 1; their messages differ
// only in run_id and model. A run_id of "" stands for a run known only by its rank: records of
// a probe older than the `run` key, or records that came before any description.
// Threads: a plain value.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>

namespace keel::app {

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

}  // namespace keel::app
