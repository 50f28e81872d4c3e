"""One rank of test_distributed.py's FSDP job (run by torchrun): FullyShardedDataParallel
(FSDP1) over gloo on the CPU, with keel, beside a reference trained the same way without it.

FSDP swaps its flat parameter's data between a shard (between steps) and the whole parameter
(forward and backward); keel must hold no gradient accumulator of it, or autograd refuses the
whole gradient. Rank 1's batch at POISON_STEP holds a NaN, which reaches every element of both
shards, so both probes skip that step; the reference skips it by hand. Each rank writes its
outcomes, both models' shards, and what keel says of an FSDP2 (fully_shard) model to
OUT/rank<R>.pt.
"""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

import keel

POISON_STEP = 3
STEPS = 6


def small_model() -> torch.nn.Module:
    torch.manual_seed(0)   # the same initial weights on both ranks and for both models
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))


def fsdp2_refusal() -> str:
    from torch.distributed.fsdp import fully_shard

    model = small_model()
    fully_shard(model)
    try:
        keel.Probe(model, torch.optim.SGD(model.parameters(), lr=0.1), endpoint="", record_dir="")
    except keel.AttachError as e:
        return str(e)
    return ""


def main(out: str) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    cpu = torch.device("cpu")
    model, reference = FSDP(small_model(), device_id=cpu), FSDP(small_model(), device_id=cpu)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    reference_optimizer = torch.optim.AdamW(reference.parameters(), lr=1e-2)
    probe = keel.Probe(model, optimizer, endpoint="", record_dir="", dump_on_nonfinite=False)
    outcomes = []
    data = torch.Generator().manual_seed(100 + rank)   # each rank its own batches
    for step in range(STEPS):
        x, y = torch.randn(16, 8, generator=data), torch.randn(16, 4, generator=data)
        if rank == 1 and step == POISON_STEP:
            x[0, 0] = float("nan")
        for m, opt in ((model, optimizer), (reference, reference_optimizer)):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(m(x), y)
            loss.backward()
            if m is model:
                outcome = probe.step(loss)
                outcomes.append((outcome.step, outcome.applied, outcome.skip_reason))
            elif step != POISON_STEP:
                opt.step()
    torch.save({"rank": rank, "outcomes": outcomes, "layers": probe.layer_names,
                "shards": [p.detach().clone() for p in model.parameters()],
                "reference_shards": [p.detach().clone() for p in reference.parameters()],
                "fsdp2": fsdp2_refusal()}, f"{out}/rank{rank}.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
