// SilenceWatch: which ranks sent steps and then stopped, each said once per silence.
//
// What it is for: a trainer that dies, hangs or is killed raises no event; what the watcher
// sees is that its steps stop coming. A rank is heard from its step records and events only:
// the probe's publisher thread re-sends the run description every 2 s whatever the training
// loop does, so a hung trainer would look alive if descriptions counted. A rank goes silent
// after `silent_after` without a step or event, once it has sent at least one; it is said once,
// and hearing it again re-arms it. A run that ended goes silent too: the watcher cannot tell an
// end from a death, and says how long and after which step.
// Threads: a plain value owned by one thread (the Alerter's).
// Never: keeps more than one entry per rank heard (ranks outside [0, kMaxRanks) are not kept).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace keel::app {

class SilenceWatch {
 public:
  using Clock = std::chrono::steady_clock;
  // The dashboard's own bound on ranks (ModelConfig::max_ranks).
  static constexpr int32_t kMaxRanks = 4096;

  explicit SilenceWatch(double silent_after_secs) : silent_after_(std::chrono::duration<double>(silent_after_secs)) {}

  // What the watcher last heard from a rank.
  struct Heard {
    int32_t rank = 0;
    std::string run, model;
    int64_t step = 0;
  };
  // How `heard` changed what is known of its rank.
  enum class Change { kNone, kFirstHeard, kHeardAgain };
  // A step record or event from `heard.rank` at `now`. kHeardAgain: the rank had been said to
  // be silent (its silence is over, and it may go silent again).
  Change heard(const Heard& heard, Clock::time_point now);

  struct Silence {
    Heard last;           // the last step or event heard from the rank
    double silent_secs = 0;
  };
  // The ranks silent at `now` that were not said to be yet; each is said once.
  std::vector<Silence> due(Clock::time_point now);

 private:
  struct Rank {
    Heard last;
    Clock::time_point at;
    bool said = false;   // its silence has been said
  };
  std::chrono::duration<double> silent_after_;
  std::map<int32_t, Rank> ranks_;
};

}  // namespace keel::app
