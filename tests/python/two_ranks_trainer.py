"""One rank of test_distributed.py's job (run by torchrun): DDP over gloo on the CPU, with keel.

Rank 1's batch at POISON_STEP holds a NaN. The all-reduce carries it into both ranks'
gradients, and both probes must skip that step, so the replicas stay equal. Each rank writes
its outcomes and final weights to OUT/rank<R>.pt.
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist

import keel

POISON_STEP = 3
STEPS = 6


def main(out: str) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)   # the same initial weights on both ranks
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(ddp.parameters(), lr=1e-2)
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
    main(sys.argv[1])   # its probe is gone when it returns: keel's own teardown has run
    # Then leave without the interpreter's teardown, as fsdp_trainer.py does (why: there).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
