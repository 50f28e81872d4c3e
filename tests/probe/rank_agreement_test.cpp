// The ranks of a sharded job agree on each step's verdict (Probe::agree_skips, DESIGN §9).
// Under FSDP each rank measures its own shard of the gradients: a NaN in one shard is seen by
// one rank only. Here two probes train on two threads, each with its own batches, and agree
// through an all-reduce of their own (the MAX that torch.distributed.all_reduce would take
// across processes). Rank 1's gradient is poisoned after backward, as a reduce-scatter would
// leave a NaN in its shard alone: with the agreement both ranks skip that step, each exactly
// as a reference that skips it by hand, and both dump it; without it, rank 0 applies it.
// Last, a data-parallel rank's own non-finite loss does not start a re-run of its step alone.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <cstdint>
#include <limits>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "command_rig.hpp"
#include "keel/probe/probe.hpp"
#include "keel/wire/vocabulary.hpp"
#include "quiet_options.hpp"
#include "temp_dir.hpp"
#include "step/rank_verdict.hpp"
#include "two_layer_net.hpp"

namespace {

using keel::probe::RankVerdict;
using keel::test::TwoLayer;

// An all-reduce with MAX among `ranks` threads of this process: each call blocks until every
// rank has made its own, then all leave with the elementwise maximum.
class ThreadsAllReduceMax {
 public:
  explicit ThreadsAllReduceMax(int ranks) : ranks_(ranks) {}

  keel::probe::SkipAgreement agreement() {
    return [this](torch::Tensor& words) { all_reduce(words); };
  }

 private:
  void all_reduce(torch::Tensor& words) {
    int64_t* w = words.data_ptr<int64_t>();
    const auto n = static_cast<size_t>(words.numel());
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t round = round_;
    if (arrived_ == 0) {
      max_.assign(w, w + n);
    } else {
      for (size_t i = 0; i < n; ++i) max_[i] = std::max(max_[i], w[i]);
    }
    if (++arrived_ == ranks_) {
      // A rank that leaves this round cannot complete the next one before every other rank
      // has read this one's result: the next round needs them all.
      result_ = max_;
      arrived_ = 0;
      ++round_;
      done_.notify_all();
    } else {
      done_.wait(lock, [&] { return round_ != round; });
    }
    std::copy(result_.begin(), result_.end(), w);
  }

  const int ranks_;
  std::mutex mutex_;
  std::condition_variable done_;
  int arrived_ = 0;
  uint64_t round_ = 0;
  std::vector<int64_t> max_, result_;
};

constexpr int kRanks = 2;
constexpr int kSteps = 5;
constexpr int64_t kPoisonedShardStep = 2;

// How the job trains: whether its ranks agree, with a loss scaler or not, and where they dump
// ("": no automatic dump). `capped_rank` may take no dump (dump_max_count 0).
struct JobSetup {
  bool agree = true;
  bool with_scaler = false;
  std::string dump_dir;
  int capped_rank = -1;
};

// What one rank's run left.
struct RankRun {
  std::vector<keel::probe::StepOutcome> outcomes;
  std::vector<std::string> skip_events;   // the skip events' details, in step order
  std::vector<std::string> dump_failures; // the dump_failed events' details
  std::vector<torch::Tensor> weights, reference_weights;
  std::vector<float> scales;              // with a scaler: its scale after each step
  int32_t growth_tracker = -1;
};

torch::Tensor forward_backward(TwoLayer& net, torch::optim::Optimizer& opt, const torch::Tensor& x,
                               const torch::Tensor& y, keel::probe::GradScaler* scaler, bool poisoned) {
  opt.zero_grad();
  const torch::Tensor loss = torch::mse_loss(net->forward(x), y);
  (scaler ? scaler->scale(loss) : loss).backward();
  if (poisoned) {
    // As the reduce-scatter leaves it: one element of this rank's shard, no other rank's.
    torch::NoGradGuard no_grad;
    net->fc2->bias.grad()[0] = scaler ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  }
  return loss.detach();
}

// One rank: a probed model and a reference trained alike without keel, which skips the
// poisoned step by hand. `agreement` empty: the rank decides alone.
RankRun train_rank(int rank, const keel::probe::SkipAgreement& agreement, const JobSetup& setup) {
  const bool with_scaler = setup.with_scaler;
  // The reference starts from the probed model's weights (the global generator is shared by
  // the ranks' threads, so each rank's draw is its own).
  TwoLayer net, reference;
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < net->parameters().size(); ++i) reference->parameters()[i].copy_(net->parameters()[i]);
  }
  torch::optim::AdamW opt(net->parameters(), torch::optim::AdamWOptions(1e-2));
  torch::optim::AdamW reference_opt(reference->parameters(), torch::optim::AdamWOptions(1e-2));
  keel::probe::GradScalerOptions scaler_options;
  scaler_options.init_scale = 1024.0;
  keel::probe::GradScaler scaler(scaler_options);
  keel::probe::ProbeOptions options = keel::test::quiet();
  options.rank = rank;
  options.world_size = kRanks;
  if (!setup.dump_dir.empty()) {
    options.dump_on_nonfinite = true;
    options.dump_dir = setup.dump_dir;
  }
  if (rank == setup.capped_rank) options.dump_max_count = 0;
  RankRun run;
  {   // the probe's scope: at its end it finishes the dumps it took
    keel::probe::Probe probe(*net, opt, options);
    if (with_scaler) probe.use_scaler(&scaler);
    if (agreement) probe.agree_skips(agreement);

    at::Generator data = at::detail::createCPUGenerator(static_cast<uint64_t>(100 + rank));   // each rank its own batches
    for (int64_t step = 0; step < kSteps; ++step) {
      const torch::Tensor x = torch::randn({4, 5}, data), y = torch::randn({4, 3}, data);
      const bool poisoned = rank == 1 && step == kPoisonedShardStep;
      const torch::Tensor loss = forward_backward(net, opt, x, y, with_scaler ? &scaler : nullptr, poisoned);
      run.outcomes.push_back(probe.step(loss));
      for (const auto& e : probe.last_events()) {
        if (e.kind == "skip") run.skip_events.push_back(e.detail);
        if (e.kind == "dump_failed") run.dump_failures.push_back(e.detail);
      }
      if (with_scaler) run.scales.push_back(scaler.scale_value());
      forward_backward(reference, reference_opt, x, y, nullptr, false);
      if (step != kPoisonedShardStep) reference_opt.step();
    }
  }
  for (const auto& p : net->parameters()) run.weights.push_back(p.detach().clone());
  for (const auto& p : reference->parameters()) run.reference_weights.push_back(p.detach().clone());
  run.growth_tracker = scaler.growth_tracker();
  return run;
}

// kRanks threads, each running `one_rank(rank, agreement)` (the agreement empty unless `agree`);
// what each returned, by rank.
template <typename Run, typename OneRank>
std::vector<Run> on_ranks(bool agree, const OneRank& one_rank) {
  ThreadsAllReduceMax all_reduce(kRanks);
  std::vector<Run> runs(kRanks);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.emplace_back([&, r] {
      runs[static_cast<size_t>(r)] = one_rank(r, agree ? all_reduce.agreement() : keel::probe::SkipAgreement());
    });
  }
  for (auto& t : ranks) t.join();
  return runs;
}

std::vector<RankRun> train_job(const JobSetup& setup) {
  return on_ranks<RankRun>(setup.agree, [&](int rank, const keel::probe::SkipAgreement& agreement) {
    return train_rank(rank, agreement, setup);
  });
}

std::vector<int64_t> skipped_steps(const RankRun& run) {
  std::vector<int64_t> out;
  for (const auto& o : run.outcomes) {
    if (!o.applied) out.push_back(o.step);
  }
  return out;
}

std::vector<std::string> dumps_in(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(RankVerdict, TheStrongestReasonAndTheLowestRankWithItWin) {
  const auto words = [](RankVerdict::Scaler scaler, RankVerdict::Skip skip, int rank) {
    RankVerdict v;
    v.scaler = scaler;
    v.skip = skip;
    v.rank = rank;
    std::vector<int64_t> w(RankVerdict::kWords);
    v.encode(w.data());
    return w;
  };
  const std::vector<std::vector<int64_t>> ranks = {
      words(RankVerdict::Scaler::kClean, RankVerdict::Skip::kApplied, 0),
      words(RankVerdict::Scaler::kProbeFailed, RankVerdict::Skip::kSpike, 1),
      words(RankVerdict::Scaler::kClean, RankVerdict::Skip::kNonfinite, 7),
      words(RankVerdict::Scaler::kClean, RankVerdict::Skip::kNonfinite, 3),
      words(RankVerdict::Scaler::kClean, RankVerdict::Skip::kSpike, 2),
  };
  std::vector<int64_t> max = ranks[0];
  for (const auto& w : ranks) {
    for (size_t i = 0; i < max.size(); ++i) max[i] = std::max(max[i], w[i]);
  }
  const RankVerdict job = RankVerdict::decode(max.data());
  EXPECT_EQ(job.scaler, RankVerdict::Scaler::kProbeFailed);
  EXPECT_EQ(job.skip, RankVerdict::Skip::kNonfinite);
  EXPECT_EQ(job.rank, 3);
  EXPECT_EQ(RankVerdict::decode(ranks[0].data()).skip, RankVerdict::Skip::kApplied);
  // An overflow outranks a probe failure; a command outranks everything.
  const std::vector<int64_t> overflow = words(RankVerdict::Scaler::kOverflow, RankVerdict::Skip::kCommand, 5);
  EXPECT_EQ(RankVerdict::decode(overflow.data()).scaler, RankVerdict::Scaler::kOverflow);
  EXPECT_GT(overflow[1], max[1]);
  // A word no probe writes is read as the strongest, never as "apply".
  const int64_t foreign[RankVerdict::kWords] = {9, int64_t{77} << 32};
  EXPECT_EQ(RankVerdict::decode(foreign).scaler, RankVerdict::Scaler::kOverflow);
  EXPECT_EQ(RankVerdict::decode(foreign).skip, RankVerdict::Skip::kCommand);
  for (const auto skip : {RankVerdict::Skip::kSpike, RankVerdict::Skip::kNonfinite, RankVerdict::Skip::kScaler,
                          RankVerdict::Skip::kCommand, RankVerdict::Skip::kRewind}) {
    EXPECT_EQ(keel::probe::skip_of(keel::probe::skip_reason_of(skip)), skip);
  }
}

TEST(RankVerdict, DumpsAreAgreedWhateverElseIsAndARefusalNamesTheLowestRank) {
  RankVerdict buffers, command;
  buffers.auto_dump = RankVerdict::AutoDump::kNonfiniteBuffer;
  command.command_dump = true;
  command.skip = RankVerdict::Skip::kCommand;
  std::vector<int64_t> a(RankVerdict::kWords), b(RankVerdict::kWords);
  buffers.encode(a.data());
  command.encode(b.data());
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::max(a[i], b[i]);
  const RankVerdict job = RankVerdict::decode(a.data());
  EXPECT_EQ(job.auto_dump, RankVerdict::AutoDump::kNonfiniteBuffer) << "a command elsewhere hides no automatic dump";
  EXPECT_TRUE(job.command_dump);
  EXPECT_STREQ(keel::probe::dump_reason_of(job.auto_dump), "nonfinite_buffer");

  std::vector<int64_t> refusals(RankVerdict::kWords, 0);
  for (const int rank : {4, 2, 6}) {
    std::vector<int64_t> w(RankVerdict::kWords);
    RankVerdict::encode_refusal(/*refused=*/true, rank, w.data());
    for (size_t i = 0; i < w.size(); ++i) refusals[i] = std::max(refusals[i], w[i]);
  }
  EXPECT_EQ(RankVerdict::refusing_rank(refusals.data()), 2);
  std::vector<int64_t> none(RankVerdict::kWords);
  RankVerdict::encode_refusal(/*refused=*/false, 3, none.data());
  EXPECT_EQ(RankVerdict::refusing_rank(none.data()), -1);
}

TEST(RankAgreement, WithoutItOnlyTheRankWhoseShardHoldsTheNaNSkips) {
  // The failure the agreement exists for: rank 0 applies the step rank 1 skipped.
  const std::vector<RankRun> runs = train_job({/*agree=*/false});
  EXPECT_EQ(skipped_steps(runs[0]), std::vector<int64_t>{});
  EXPECT_EQ(skipped_steps(runs[1]), std::vector<int64_t>{kPoisonedShardStep});
  EXPECT_FALSE(keel::test::all_identical(runs[0].weights, runs[0].reference_weights));
}

TEST(RankAgreement, EveryRankSkipsTheStepOneRankSawANaNInAndNamesIt) {
  const std::vector<RankRun> runs = train_job({});
  for (int r = 0; r < kRanks; ++r) {
    const RankRun& run = runs[static_cast<size_t>(r)];
    ASSERT_EQ(skipped_steps(run), std::vector<int64_t>{kPoisonedShardStep}) << "rank " << r;
    EXPECT_TRUE(keel::test::all_identical(run.weights, run.reference_weights))
        << "rank " << r << " did not train as its reference, which skipped the step by hand";
    ASSERT_EQ(run.skip_events.size(), 1u);
  }
  EXPECT_EQ(runs[0].outcomes[kPoisonedShardStep].skip_reason, "other_rank");
  EXPECT_EQ(runs[0].outcomes[kPoisonedShardStep].nonfinite_layers, 0) << "rank 0's own shard was finite";
  EXPECT_NE(runs[0].skip_events[0].find("rank 1 skipped it: nonfinite"), std::string::npos) << runs[0].skip_events[0];
  EXPECT_EQ(runs[1].outcomes[kPoisonedShardStep].skip_reason, "nonfinite");
}

TEST(RankAgreement, AnOverflowInOneRanksShardBacksOffEveryRanksScaleAlike) {
  const std::vector<RankRun> runs = train_job({/*agree=*/true, /*with_scaler=*/true});
  EXPECT_EQ(runs[0].scales, runs[1].scales) << "the ranks' loss scales parted";
  EXPECT_EQ(runs[0].growth_tracker, runs[1].growth_tracker);
  ASSERT_EQ(runs[0].scales.size(), static_cast<size_t>(kSteps));
  EXPECT_EQ(runs[0].scales[kPoisonedShardStep], 512.0f) << "backed off from 1024";
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(skipped_steps(runs[static_cast<size_t>(r)]), std::vector<int64_t>{kPoisonedShardStep}) << "rank " << r;
  }
  EXPECT_EQ(runs[0].outcomes[kPoisonedShardStep].skip_reason, "other_rank");
  EXPECT_NE(runs[0].skip_events[0].find("rank 1 skipped it: scaler"), std::string::npos) << runs[0].skip_events[0];
  EXPECT_EQ(runs[1].outcomes[kPoisonedShardStep].skip_reason, "scaler");
  // Without the agreement rank 0's scale would have kept growing: the control.
  const std::vector<RankRun> alone = train_job({/*agree=*/false, /*with_scaler=*/true});
  EXPECT_NE(alone[0].scales, alone[1].scales);
}

TEST(RankAgreement, EveryRankDumpsTheStepOneRankSawANaNIn) {
  // A sharded model's state_dict() is a collective: a rank dumping alone would wait forever.
  keel::test::TempDir alone_dir("rank-dumps-alone"), agreed_dir("rank-dumps-agreed");
  train_job({/*agree=*/false, /*with_scaler=*/false, alone_dir.path().string()});
  EXPECT_EQ(dumps_in(alone_dir.path()), std::vector<std::string>{"step-2-nonfinite-rank1"}) << "the control";
  const std::vector<RankRun> runs = train_job({/*agree=*/true, /*with_scaler=*/false, agreed_dir.path().string()});
  EXPECT_EQ(dumps_in(agreed_dir.path()), (std::vector<std::string>{"step-2-nonfinite-rank0", "step-2-nonfinite-rank1"}));
  for (const auto& run : runs) EXPECT_TRUE(run.dump_failures.empty()) << run.dump_failures.front();
}

TEST(RankAgreement, ADumpOneRankCannotTakeIsTakenByNone) {
  keel::test::TempDir dir("rank-dumps-capped");
  const std::vector<RankRun> runs = train_job({/*agree=*/true, /*with_scaler=*/false, dir.path().string(), /*capped_rank=*/0});
  EXPECT_EQ(dumps_in(dir.path()), std::vector<std::string>{});
  ASSERT_EQ(runs[0].dump_failures.size(), 1u);
  EXPECT_NE(runs[0].dump_failures[0].find("dump_max_count"), std::string::npos) << runs[0].dump_failures[0];
  ASSERT_EQ(runs[1].dump_failures.size(), 1u);
  EXPECT_NE(runs[1].dump_failures[0].find("rank 0 could not take its part"), std::string::npos) << runs[1].dump_failures[0];
}

TEST(RankAgreement, AFailingAgreementIsTheProbesFailureAndTheRanksOwnVerdictStands) {
  torch::manual_seed(0);
  TwoLayer net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  keel::probe::Probe probe(*net, opt, keel::test::quiet());
  int calls = 0;
  probe.agree_skips([&](torch::Tensor&) {
    if (++calls == 2) throw std::runtime_error("gloo: connection closed by peer");
  });
  for (int step = 0; step < 4; ++step) {
    opt.zero_grad();
    const torch::Tensor loss = net->forward(torch::ones({2, 5})).sum();
    loss.backward();
    if (step == 1) keel::test::poison(net->fc1->weight);
    const keel::probe::StepOutcome outcome = probe.step(loss.detach());
    EXPECT_EQ(outcome.applied, step != 1) << "step " << step;
    bool told = false;
    for (const auto& e : probe.last_events()) {
      told |= e.kind == "probe_error" && e.detail.find("agreeing the step's verdict") != std::string::npos &&
              e.detail.find("connection closed by peer") != std::string::npos;
    }
    EXPECT_EQ(told, step == 1) << "step " << step;
  }
  EXPECT_EQ(calls, 4) << "asked again at the step after the failure";
  EXPECT_EQ(probe.last_record().probe_errors, 1u);
}

TEST(RankAgreement, AnUnsafeStepOfASharedJobIsNotRunAgain) {
  // The closure's re-run would run a sharded model's collectives on the ranks that saw the
  // NaN only: with an agreement each step runs its closure once.
  torch::manual_seed(0);
  TwoLayer net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  keel::probe::Probe probe(*net, opt, keel::test::quiet());
  // A clean step, then a NaN one (the first of its run): how often its closure ran.
  const auto closure_runs_of_an_unsafe_step = [&] {
    int runs = 0;
    float input = 1.0f;
    const keel::probe::LossClosure closure = [&] {
      ++runs;
      opt.zero_grad();
      const torch::Tensor loss = net->forward(torch::full({2, 5}, input)).sum();
      loss.backward();
      return loss.detach();
    };
    probe.step(closure);
    runs = 0;
    input = std::numeric_limits<float>::quiet_NaN();
    EXPECT_FALSE(probe.step(closure).applied);
    return runs;
  };
  EXPECT_EQ(closure_runs_of_an_unsafe_step(), 2) << "the control: alone, an unsafe step is run again";
  probe.agree_skips([](torch::Tensor&) {});   // a world of one: MAX over one rank leaves it
  EXPECT_EQ(closure_runs_of_an_unsafe_step(), 1);
}

TEST(DataParallelRerun, ARanksOwnNonfiniteLossDoesNotRunItsStepAgainAlone) {
  // A re-run runs the model's collectives (DDP's all-reduce in backward): a rank whose loss
  // alone overflowed, its gradients finite, would wait in it for ranks that do not re-run.
  const auto closure_runs = [](int world_size) {
    torch::manual_seed(0);
    TwoLayer net;
    torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
    keel::probe::ProbeOptions options = keel::test::quiet();
    options.world_size = world_size;
    keel::probe::Probe probe(*net, opt, options);
    int runs = 0;
    probe.step([&] {
      ++runs;
      opt.zero_grad();
      // (1e29)^2 overflows float32: the loss is Inf, its gradients (about 1e29) are finite.
      const torch::Tensor loss = torch::mse_loss(net->forward(torch::ones({2, 5})), torch::full({2, 3}, 1e29f));
      loss.backward();
      return loss.detach();
    });
    EXPECT_TRUE(std::isinf(probe.last_record().loss));
    return runs;
  };
  EXPECT_EQ(closure_runs(1), 2) << "the control: one process's own loss is the job's, and its step is run again";
  EXPECT_EQ(closure_runs(2), 1);
}

// What one rank's run with the rewind policy left (rewind_run).
struct RewindingRank {
  std::vector<keel::probe::StepOutcome> outcomes;
  int64_t told_from = -1, told_to = -1;
  double told_lr_factor = 0;
  std::string rewind_detail;
};

// One rank with the rewind policy on: its own batches, and (rank `diverging_rank`) a loss of
// its own that climbs 100-fold from step kDivergesAt until the rewind, as a data-parallel
// rank's loss is its own while its gradients are the job's.
constexpr int64_t kDivergesAt = 24;
RewindingRank rewind_run(int rank, int diverging_rank, const keel::probe::SkipAgreement& agreement) {
  TwoLayer net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(1e-2));
  keel::probe::ProbeOptions options = keel::test::quiet();
  options.rank = rank;
  options.world_size = kRanks;
  options.rewind_every = 4;
  options.rewind_keep = 4;
  options.rewind_on_divergence = true;
  options.rewind_loss_factor = 4.0;
  options.rewind_loss_steps = 3;
  options.rewind_dump = false;
  RewindingRank run;
  options.on_rewind = [&run](int64_t from, int64_t to, double lr_factor) {
    run.told_from = from;
    run.told_to = to;
    run.told_lr_factor = lr_factor;
  };
  keel::probe::Probe probe(*net, opt, options);
  if (agreement) probe.agree_skips(agreement);
  at::Generator data = at::detail::createCPUGenerator(static_cast<uint64_t>(200 + rank));
  for (int i = 0; i < 40; ++i) {
    const torch::Tensor x = torch::randn({4, 5}, data), y = torch::randn({4, 3}, data);
    torch::Tensor loss = forward_backward(net, opt, x, y, nullptr, false);
    const bool diverging = rank == diverging_rank && run.told_to < 0 && i >= kDivergesAt;
    run.outcomes.push_back(probe.step(diverging ? loss * 100 : loss));
    for (const auto& e : probe.last_events()) {
      if (e.kind == "rewind") run.rewind_detail = e.detail;
    }
  }
  return run;
}

TEST(RankAgreement, ARewindOneRanksPolicyAsksForIsTakenByEveryRankAtTheSameStepToTheSameSnapshot) {
  const auto job = [](bool agree) {
    return on_ranks<RewindingRank>(agree, [](int rank, const keel::probe::SkipAgreement& agreement) {
      return rewind_run(rank, /*diverging_rank=*/1, agreement);
    });
  };
  const std::vector<RewindingRank> alone = job(/*agree=*/false);
  EXPECT_EQ(alone[0].told_to, -1) << "the control: without the agreement rank 0 never rewinds";
  ASSERT_GE(alone[1].told_to, 0);

  const std::vector<RewindingRank> runs = job(/*agree=*/true);
  ASSERT_GE(runs[1].told_to, 0) << "rank 1's policy did not rewind";
  EXPECT_EQ(runs[1].told_to, 20) << "the newest snapshot before the divergence's onset (step 24)";
  for (int r = 0; r < kRanks; ++r) {
    const RewindingRank& run = runs[static_cast<size_t>(r)];
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(run.told_from, runs[1].told_from);
    EXPECT_EQ(run.told_to, runs[1].told_to);
    EXPECT_EQ(run.told_lr_factor, 1.0);
    const keel::probe::StepOutcome& rewound = run.outcomes[static_cast<size_t>(run.told_from)];
    EXPECT_EQ(rewound.step, run.told_from);
    EXPECT_FALSE(rewound.applied);
    EXPECT_EQ(rewound.skip_reason, "rewind");
    EXPECT_EQ(run.outcomes.back().step, runs[1].outcomes.back().step) << "the ranks number their steps apart";
  }
  EXPECT_NE(runs[0].rewind_detail.find("another rank's rewind policy, 1 of at most 3; the ranks rewind together"),
            std::string::npos)
      << runs[0].rewind_detail;
  EXPECT_NE(runs[1].rewind_detail.find("(the rewind policy, 1 of at most 3: the loss above 4x"), std::string::npos)
      << runs[1].rewind_detail;
}

// What one rank of the warning job left (warned_run).
struct WarnedRank {
  std::string warning;             // its first warning's detail ("": none)
  int64_t told_to = -1;            // where on_rewind said it went
  std::optional<keel::wire::Ack> ack;   // rank 0: the rewind command's answer
};

// One rank with snapshots every 50 steps, two kept, and the forecaster: rank 1's loss (and
// gradients) grow 5% a step from step 300 (capped from 420), rank 0's stay flat. At step 421
// rank 0 is asked (by command) to rewind to step 320, before which only the warning's hold keeps
// a snapshot (300): the others are 350 and 400.
WarnedRank warned_run(int rank, const keel::probe::SkipAgreement& agreement) {
  torch::nn::Linear net(8, 1);
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(1e-3));
  keel::probe::ProbeOptions options = rank == 0 ? keel::test::listening() : keel::test::quiet();
  options.rank = rank;
  options.world_size = kRanks;
  options.rewind_every = 50;
  options.rewind_keep = 2;
  options.rewind_dump = false;
  WarnedRank run;
  options.on_rewind = [&run](int64_t, int64_t to, double) { run.told_to = to; };
  options.on_event = [&run](const keel::wire::Event& e) {
    if (e.kind == keel::wire::event_kind::kWarning && run.warning.empty()) run.warning = e.detail;
  };
  keel::probe::Probe probe(*net, opt, options);
  if (agreement) probe.agree_skips(agreement);
  std::optional<keel::test::Client> client;
  if (rank == 0) client.emplace(probe.bound_command_endpoint());
  at::Generator data = at::detail::createCPUGenerator(static_cast<uint64_t>(300 + rank));
  const torch::Tensor truth = torch::randn({8, 1}, data);
  // A fixed count of steps on every rank (they all-reduce at each); the step numbers go back at
  // the rewind.
  for (int i = 0; i < 521; ++i) {
    const int s = std::min(i, 420);
    const double weight = rank == 1 && s > 300 ? std::pow(1.05, s - 300) : 1.0;
    const torch::Tensor x = torch::randn({64, 8}, data);
    const torch::Tensor loss = weight * (net->forward(x) - x.matmul(truth)).pow(2).mean();
    opt.zero_grad();
    loss.backward();
    probe.step(loss);
    if (client && i == 420) {
      keel::wire::Command rewind = keel::test::command(1, keel::wire::command_kind::kRewind);
      rewind.to_step = 320;
      client->send(rewind);
    }
    if (client && i > 420 && !run.ack) run.ack = client->receive(20);
  }
  return run;
}

TEST(RankAgreement, AWarningOnOneRankKeepsTheSameSnapshotOnEveryRankForARewind) {
  const std::vector<WarnedRank> runs =
      on_ranks<WarnedRank>(/*agree=*/true, [](int rank, const keel::probe::SkipAgreement& agreement) {
        return warned_run(rank, agreement);
      });
  EXPECT_TRUE(runs[0].warning.empty()) << "rank 0's run is flat: " << runs[0].warning;
  EXPECT_NE(runs[1].warning.find("every rank keeps the snapshot of step 300"), std::string::npos) << runs[1].warning;
  ASSERT_TRUE(runs[0].ack) << "no answer to the rewind";
  EXPECT_TRUE(runs[0].ack->ok) << runs[0].ack->error;
  EXPECT_EQ(runs[0].ack->step, 300);
  EXPECT_EQ(runs[0].told_to, 300);
  EXPECT_EQ(runs[1].told_to, 300) << "the ranks rewind together, to the snapshot both kept";

  // The control: ranks that do not agree hold nothing (they could not keep the same snapshots).
  const std::vector<WarnedRank> alone =
      on_ranks<WarnedRank>(/*agree=*/false, [](int rank, const keel::probe::SkipAgreement& agreement) {
        return warned_run(rank, agreement);
      });
  EXPECT_FALSE(alone[1].warning.empty());
  EXPECT_EQ(alone[1].warning.find("snapshot"), std::string::npos) << alone[1].warning;
  ASSERT_TRUE(alone[0].ack);
  EXPECT_FALSE(alone[0].ack->ok);
  EXPECT_NE(alone[0].ack->error.find("(kept: 350, 400)"), std::string::npos) << alone[0].ack->error;
}

TEST(RankVerdict, TheEarliestHoldAnyRankAsksForWinsAndNoneReadsAsNone) {
  const auto words = [](int64_t before) {
    RankVerdict v;
    v.hold_before = before;
    std::vector<int64_t> w(RankVerdict::kWords);
    v.encode(w.data());
    return w;
  };
  std::vector<int64_t> max = words(-1);
  EXPECT_EQ(RankVerdict::decode(max.data()).hold_before, -1);
  for (const auto& w : {words(420), words(310), words(-1)}) {
    for (size_t i = 0; i < max.size(); ++i) max[i] = std::max(max[i], w[i]);
  }
  EXPECT_EQ(RankVerdict::decode(max.data()).hold_before, 310);
  const int64_t foreign[RankVerdict::kWords] = {0, 0, 0, 0, 0, 0, 0, -7};
  EXPECT_EQ(RankVerdict::decode(foreign).hold_before, -1) << "a word no probe writes holds nothing";
}

TEST(RankVerdict, TheOldestSnapshotAnyRankRewindsToWinsAndNoRewindReadsAsNone) {
  const auto words = [](int64_t to, int64_t policy) {
    RankVerdict v;
    v.rewind_to = to;
    v.policy_rewind = policy;
    if (to >= 0) v.skip = RankVerdict::Skip::kRewind;
    std::vector<int64_t> w(RankVerdict::kWords);
    v.encode(w.data());
    return w;
  };
  std::vector<int64_t> max = words(-1, 0);
  EXPECT_EQ(RankVerdict::decode(max.data()).rewind_to, -1);
  for (const auto& w : {words(300, 1), words(200, 2), words(-1, 0), words(0, 0)}) {
    for (size_t i = 0; i < max.size(); ++i) max[i] = std::max(max[i], w[i]);
  }
  const RankVerdict job = RankVerdict::decode(max.data());
  EXPECT_EQ(job.rewind_to, 0) << "a snapshot of step 0 is one to rewind to";
  EXPECT_EQ(job.policy_rewind, 2);
  EXPECT_EQ(job.skip, RankVerdict::Skip::kRewind) << "a rewind outranks every other reason to skip";
  const int64_t foreign[RankVerdict::kWords] = {0, 0, 0, 0, -5, 3};
  EXPECT_EQ(RankVerdict::decode(foreign).rewind_to, -1) << "a word no probe writes rewinds nowhere";
}

}  // namespace
