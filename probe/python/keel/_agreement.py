"""The agreement of a sharded job's ranks on each step's verdict (DESIGN §9).

Under FullyShardedDataParallel each rank's probe measures only its own shard of the gradients:
a NaN the reduce-scatter puts in one shard is seen by one rank, which would skip while the
others applied, leaving the model part updated. With the agreement, every rank's probe hands
its verdict to the others once per step (an all-reduce with MAX of eight int64 words, as
PyTorch's ShardedGradScaler all-reduces found_inf): a step any rank skips is skipped by all,
an overflow any rank's scaler finds backs off every rank's scale, and a dump any rank takes is
taken by all (FSDP's state_dict() is a collective).
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional

import torch

from ._local_shards import has_dtensors


def is_sharded(model: Any) -> bool:
    """Whether ``model`` is, or holds, a FullyShardedDataParallel (FSDP1) unit, or has DTensor
    parameters (FSDP2's fully_shard, tensor parallelism): its parameters are this rank's
    shards."""
    fsdp_module = sys.modules.get("torch.distributed.fsdp")   # none made before it is imported
    fsdp = getattr(fsdp_module, "FullyShardedDataParallel", None)
    if not isinstance(model, torch.nn.Module):
        return False
    if fsdp is not None and any(isinstance(m, fsdp) for m in model.modules()):
        return True
    return has_dtensors(model) or any(getattr(p, "_is_flat_param", False) for p in model.parameters())


def skip_agreement(model: Any, agree: Optional[bool], group: Any,
                   rewinds: bool = False) -> Optional[Callable[[torch.Tensor], None]]:
    """The all-reduce the probe agrees through, or None where the rank decides alone.

    ``agree``: None agrees when torch.distributed is initialised with more than one rank in
    ``group`` (None: the default group) and ``model`` is sharded (is_sharded) or the probe
    keeps snapshots to rewind to (``rewinds``: every rank must rewind at the same step, to
    the same snapshot, and a data-parallel rank's loss, which the rewind policy reads, is its
    own); True agrees whenever there is more than one rank; False never. With the NCCL backend the words travel
    through a copy on this rank's current CUDA device.
    """
    if agree is False:
        return None
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size(group) <= 1:
        return None
    if agree is None and not (rewinds or is_sharded(model)):
        return None
    device = None
    if dist.get_backend(group) == "nccl":
        device = torch.device("cuda", torch.cuda.current_device())

    def agreement(verdict: torch.Tensor) -> None:
        if device is None:
            dist.all_reduce(verdict, op=dist.ReduceOp.MAX, group=group)
            return
        on_device = verdict.to(device)
        dist.all_reduce(on_device, op=dist.ReduceOp.MAX, group=group)
        verdict.copy_(on_device)

    return agreement
