"""One rank of test_distributed.py's job (run by torchrun): DDP over gloo on the CPU, with keel.

Rank 1's batch at POISON_STEP holds a NaN. The all-reduce carries it into both ranks'
gradients, and both probes must skip that step, so the replicas stay equal. Each rank writes
its outcomes and final weights to OUT/rank<R>.pt.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

import keel
from ddp_replicas import join_replicas, run_and_leave

POISON_STEP = 3
STEPS = 6


def main(out: str) -> None:
    rank, model, ddp, optimizer = join_replicas()
    # No endpoint given: each rank publishes on its own port ($KEEL_PORT + 2 * rank).
    probe = keel.Probe(ddp, optimizer, record_dir="", dump_on_nonfinite=False, allow_unauthenticated_local=True)
    outcomes = []
    data = torch.Generator().manual_seed(100 + rank)   # each rank its own batches
    for step in range(STEPS):
        x, y = torch.randn(16, 8, generator=data), torch.randn(16, 4, generator=data)
        if rank == 1 and step == POISON_STEP:
            x[0, 0] = float("nan")
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        outcome = probe.step(loss)
        outcomes.append((outcome.step, outcome.applied, outcome.skip_reason))
    torch.save({"rank": rank, "outcomes": outcomes, "endpoint": probe.bound_endpoint,
                "sharded": probe.sharded,
                "weights": {k: v.clone() for k, v in model.state_dict().items()}}, f"{out}/rank{rank}.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    run_and_leave(main)
