"""python -m keel.bench_shards: what keel's lending of sharded gradients costs a step.

Under FSDP keel measures leaves of its own over each rank's parts of the parameters
(keel/_local_shards.py): before each step it lends them this step's gradient parts, after it
takes them back, a loop over every part. This builds a deep narrow model of N ``Linear(16, 16)``
(2N parameters) sharded as FSDP1 (one flat parameter, ``use_orig_params=False``: 2N parts) and
as FSDP2 (``fully_shard`` per layer: 2N DTensors), on the CPU in a process group of one rank
(gloo), runs one backward, and prints the median time of the lending and of the giving back
over the rounds, per step and per part. The probe's own time at 2,000 tensors is about 1.1 ms
on the 2-core machine (BENCHMARKS.md): the figure to hold these against.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import time
from typing import Callable, List, Optional, Tuple

import torch
import torch.distributed as dist

from ._local_shards import LocalShards


def deep_narrow(layers: int) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(layers)])


def sharded(kind: str, layers: int) -> torch.nn.Module:
    model = deep_narrow(layers)
    if kind == "flat":
        from torch.distributed.fsdp import FullyShardedDataParallel

        return FullyShardedDataParallel(model, device_id=torch.device("cpu"))
    from torch.distributed.fsdp import fully_shard

    for layer in model:
        fully_shard(layer)
    return fully_shard(model)


def median_ms(action: Callable[[], None], after: Callable[[], None], rounds: int) -> Tuple[float, float]:
    """Median times of ``action`` and of ``after`` (run right after it), in ms."""
    first: List[float] = []
    second: List[float] = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        action()
        t1 = time.perf_counter()
        after()
        t2 = time.perf_counter()
        first.append(t1 - t0)
        second.append(t2 - t1)
    return statistics.median(first) * 1e3, statistics.median(second) * 1e3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=1000, help="Linear(16, 16) layers: twice as many parameters")
    p.add_argument("--rounds", type=int, default=60)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        print(f"keel.bench_shards: {args.layers} Linear(16, 16), {2 * args.layers} parameters, "
              f"one rank (gloo, CPU), medians of {args.rounds} rounds")
        print(f"{'sharding':<24} {'leaves':>7} {'lend ms':>9} {'give back ms':>13} {'per leaf us':>12}")
        for kind, label in (("flat", "FSDP1 flat parameter"), ("fully_shard", "FSDP2 fully_shard")):
            model = sharded(kind, args.layers)
            model(torch.randn(8, 16)).sum().backward()
            shards = LocalShards(model)
            leaves = sum(len(v) if isinstance(v, list) else 1 for v in shards.leaves.values())
            median_ms(shards.lend_gradients, shards.take_gradients_back, 5)   # warm-up
            lend, back = median_ms(shards.lend_gradients, shards.take_gradients_back, args.rounds)
            print(f"{label:<24} {leaves:>7} {lend:>9.2f} {back:>13.2f} {(lend + back) * 1e3 / leaves:>12.2f}")
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
