"""One rank of test_distributed.py's rewind job (run by torchrun): DDP over gloo on the CPU,
keel keeping snapshots with the rewind policy on.

A data-parallel rank's loss is its own (its gradients are the job's): rank 1's loss, as its
probe is handed it, climbs 100-fold from DIVERGES_AT until a rewind, while rank 0's stays
healthy. Only rank 1's policy sees the divergence; both ranks must rewind at the same step to
the same snapshot, or the replicas part. KEEL_TEST_AGREE=0 turns the agreement off (the
control). Each rank writes its outcomes, what on_rewind heard and its final weights to
OUT/rank<R>.pt.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

import keel
from ddp_replicas import join_replicas, run_and_leave

DIVERGES_AT = 24
STEPS = 40


def main(out: str) -> None:
    rank, model, ddp, optimizer = join_replicas()
    told = []
    agree = None if os.environ.get("KEEL_TEST_AGREE", "1") == "1" else False
    probe = keel.Probe(ddp, optimizer, agree_skips=agree, record_dir="", endpoint="", rewind_every=4,
                       rewind_keep=4, rewind_on_divergence=True, rewind_loss_factor=4.0, rewind_loss_steps=3,
                       rewind_dump=False,
                       on_rewind=lambda from_step, to_step, lr_factor: told.append((from_step, to_step)))
    outcomes = []
    data = torch.Generator().manual_seed(100 + rank)   # each rank its own batches
    for _ in range(STEPS):
        x, y = torch.randn(16, 8, generator=data), torch.randn(16, 4, generator=data)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        diverging = rank == 1 and not told and len(outcomes) >= DIVERGES_AT
        outcome = probe.step(loss * 100 if diverging else loss)
        outcomes.append((outcome.step, outcome.applied, outcome.skip_reason))
    torch.save({"rank": rank, "outcomes": outcomes, "told": told, "agrees": probe.agrees_skips,
                "weights": {k: v.clone() for k, v in model.state_dict().items()}}, f"{out}/rank{rank}.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    run_and_leave(main)
