// Soak (issue 5, part 6): keel-demo trains thousands of steps while clients attach and
// detach over and over (keel-cli tail, killed or stopped, each new one backfilling from the
// probe's ring as the dashboard does), with commands in between. Nothing may crash, the
// trainer's memory stays flat, every command is acknowledged exactly once, and every step is
// seen by some client or counted as dropped.
// About 60 s in CI; KEEL_SOAK_SECS=600 (for example) soaks longer.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <thread>

#include "command_channel.hpp"
#include "step_ledger.hpp"
#include "trainer_under_test.hpp"

namespace keel::fault {
namespace {

double soak_secs() {
  const char* env = std::getenv("KEEL_SOAK_SECS");
  return env ? std::atof(env) : 45.0;
}

// Bounded queues cost at most their fill, reached in the first seconds; a leak of one
// record or one command per step would add megabytes over thousands of steps.
constexpr long kRssGrowthLimitKib = 16 * 1024;

TEST(Soak, ClientsComeAndGoWithCommandsInBetween) {
  const Binaries binaries{KEEL_DEMO_PATH, KEEL_CLI_PATH, ""};
  ScratchDir dir("soak");
  TrainerOptions options;
  options.steps_per_sec = 60;
  TrainerUnderTest trainer(binaries, dir, options);
  ASSERT_TRUE(trainer.wait_until_training(120)) << trainer.process().output();

  CommandChannel commands(trainer.command_endpoint());
  std::mt19937 rng(5);
  std::vector<StepLedger> seen;
  const auto start = std::chrono::steady_clock::now();
  const double duration = soak_secs();
  int64_t rss_after_warmup_at = 0;
  int cycle = 0;
  for (; std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < duration; ++cycle) {
    if (cycle == 2) rss_after_warmup_at = unix_now_ns();
    const std::string tail_file = dir.file("tail-" + std::to_string(cycle) + ".jsonl");
    FaultProcess tail({binaries.cli, "tail", "--endpoint", trainer.endpoint(), "--json", "--timeout", "600"},
                      tail_file);
    ASSERT_TRUE(tail.wait_for_output("\"type\":\"step\"", 30)) << "cycle " << cycle << ": " << tail.output();
    // Attached and live: now backfill what happened while no client was attached.
    seen.push_back(trainer.history("backfill-" + std::to_string(cycle) + ".jsonl"));

    wire::Command command;
    switch (cycle % 4) {
      case 0: command.kind = "describe"; break;
      case 1: command.kind = "policy"; command.policy = "skip_spike"; command.enable = true; break;
      case 2: command.kind = "skip"; command.count = 1; break;
      default: command.kind = "policy"; command.policy = "skip_spike"; command.enable = false; break;
    }
    ASSERT_NE(commands.send(command), 0u);
    commands.collect(5000);
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(300, 1500)(rng)));

    // Half the clients crash, half leave politely.
    if (cycle % 2 == 0) {
      tail.kill_now();
    } else {
      tail.stop();
    }
    seen.emplace_back();
    seen.back().add_json_lines_file(tail_file);
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 800)(rng)));
  }
  // The last stretch: one more client attaches and backfills the final detach gap.
  FaultProcess last({binaries.cli, "tail", "--endpoint", trainer.endpoint(), "--json", "--timeout", "600"},
                    dir.file("tail-last.jsonl"));
  ASSERT_TRUE(last.wait_for_output("\"type\":\"step\"", 30));
  seen.push_back(trainer.history("backfill-last.jsonl"));
  commands.collect(5000);
  const long rss_warm = trainer.rss_at_or_after(rss_after_warmup_at);
  const long rss_end = trainer.rss_last();
  const bool trainer_alive = trainer.process().running();
  const StepLedger ring = trainer.history("final.jsonl");
  last.stop();
  seen.emplace_back();
  seen.back().add_json_lines_file(last.log_path());
  trainer.stop();

  std::vector<const StepLedger*> sources;
  for (const StepLedger& ledger : seen) sources.push_back(&ledger);
  const StepLedger all = merged(sources);
  const int64_t first = seen.front().first_step();
  const int64_t last_step = all.last_step();
  const size_t missing = all.missing(first, last_step).size();
  const AckTally& tally = commands.tally();
  std::printf("soak: %.0f s, %d attach/detach cycles, steps %lld..%lld (%lld), missing %zu, dropped %llu\n"
              "soak: commands %llu sent, %llu acks (%llu ok, %llu refused), %llu unanswered, %llu duplicate, "
              "%llu unknown\n"
              "soak: trainer RSS %ld KiB after warm-up, %ld KiB at the end; longest step gap %.3f s\n",
              duration, cycle, static_cast<long long>(first), static_cast<long long>(last_step),
              static_cast<long long>(last_step - first + 1), missing,
              static_cast<unsigned long long>(all.max_dropped()),
              static_cast<unsigned long long>(commands.sent_valid()), static_cast<unsigned long long>(tally.acks),
              static_cast<unsigned long long>(tally.ok), static_cast<unsigned long long>(tally.refused),
              static_cast<unsigned long long>(commands.unanswered()),
              static_cast<unsigned long long>(tally.duplicates), static_cast<unsigned long long>(tally.unknown),
              rss_warm, rss_end, ring.longest_gap_secs());

  EXPECT_TRUE(trainer_alive);
  EXPECT_GT(cycle, 4);
  EXPECT_GT(last_step - first, 1000) << "not thousands of steps";
  EXPECT_LE(missing, all.max_dropped()) << "steps lost without being counted";
  EXPECT_EQ(commands.unanswered(), 0u);
  EXPECT_EQ(tally.duplicates, 0u);
  EXPECT_EQ(tally.unknown, 0u);
  EXPECT_EQ(tally.ok, commands.sent_valid()) << "a valid command was refused";
  EXPECT_GT(rss_warm, 0);
  EXPECT_LT(rss_end - rss_warm, kRssGrowthLimitKib);
  EXPECT_LT(ring.longest_gap_secs(), 2.0) << "the trainer stalled";
}

}  // namespace
}  // namespace keel::fault
