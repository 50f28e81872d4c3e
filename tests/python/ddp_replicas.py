"""What test_distributed.py's DDP trainers (run by torchrun) share: the job joined over gloo,
the same small model on every rank wrapped in DistributedDataParallel with its AdamW, and the
way out of the process."""

from __future__ import annotations

import os
import sys
from typing import Callable, Tuple

import torch
import torch.distributed as dist


def join_replicas() -> Tuple[int, torch.nn.Module, torch.nn.Module, torch.optim.Optimizer]:
    """This rank, the model, its DDP wrapper and the optimizer: the same initial weights on every rank."""
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    return dist.get_rank(), model, ddp, torch.optim.AdamW(ddp.parameters(), lr=1e-2)


def run_and_leave(main: Callable[[str], None]) -> None:
    """Runs ``main(OUT)`` and leaves without the interpreter's teardown, as fsdp_trainer.py does
    (why: there). When ``main`` returns its probe is gone: keel's own teardown has run."""
    main(sys.argv[1])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
