// How the ranks of a sharded job agree on each step's verdict before any of them updates.
//
// Under sharding (FSDP) each rank measures only its own shard of the gradients: a NaN that the
// reduce-scatter puts in one shard is seen by one rank, which would skip while the others
// applied, leaving the model part updated. With an agreement (Probe::agree_skips) every
// rank's probe hands the others its verdict once per step, on the host, before the update:
// a step any rank skips is skipped by all (skip_reason "other_rank" on those that would have
// applied it), an overflow any rank's loss scaler finds backs off every rank's scale alike, as
// PyTorch's ShardedGradScaler all-reduces found_inf, and a dump any rank takes (automatic or
// by command) is taken by all: a sharded model's state_dict() is itself a collective.
#pragma once

#include <functional>

#include <torch/torch.h>

namespace keel::probe {

// All-reduces `verdict` with MAX across the job's ranks, in place: a CPU tensor of seven int64
// words (rank_verdict.hpp) (torch.distributed.all_reduce(verdict, op=ReduceOp.MAX), or c10d's allreduce; with
// NCCL, through a copy on the rank's device). Every rank's probe calls it once per step(), at
// the same point, and once more in a step whose dump every rank takes (whether any rank
// cannot), so the ranks must call step() alike. An exception it throws is the probe's failure:
// counted and shown, this rank's own verdict stands, and it takes no dump that step.
using SkipAgreement = std::function<void(torch::Tensor& verdict)>;

}  // namespace keel::probe
