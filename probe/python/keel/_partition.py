"""Whether a job's ranks hold disjoint parts of every parameter (the ``sharded`` option's default).

The dashboard combines a sharded job's grad norm from its ranks' own: the square root of the
sum of their squares. That is the job's norm only when every element of every parameter is held
by exactly one rank of the job. FSDP1's FULL_SHARD and SHARD_GRAD_OP over the whole world and
FSDP2's ``fully_shard`` over a one-dimensional mesh of the world do that. FSDP1's NO_SHARD and
HYBRID_SHARD, FSDP2 over a mesh with a replicated dimension (HSDP), and tensor parallelism's
replicated parameters (its norms' weights) hold some elements on several ranks, which the sum
would count once per rank: no job norm is drawn for those.
"""

from __future__ import annotations

import sys
from typing import Any

import torch

from ._local_shards import dtensor_type

# FSDP1's strategies whose units are sharded over their whole process group.
_SHARDING_STRATEGIES = ("FULL_SHARD", "SHARD_GRAD_OP")


def _fsdp1_units(model: torch.nn.Module) -> list:
    fsdp_module = sys.modules.get("torch.distributed.fsdp")   # none made before it is imported
    fsdp = getattr(fsdp_module, "FullyShardedDataParallel", None)
    return [m for m in model.modules() if fsdp is not None and isinstance(m, fsdp)]


def _world_size() -> int:
    dist = torch.distributed
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def parameters_partitioned(model: Any) -> bool:
    """Whether ``model``'s parameters are partitioned across the job's ranks, every element on
    exactly one rank: FSDP1 units all sharded (FULL_SHARD, SHARD_GRAD_OP) over the whole world,
    or every parameter a DTensor sharded (no Replicate or Partial placement) over a mesh of the
    whole world. False for an unsharded model."""
    if not isinstance(model, torch.nn.Module):
        return False
    world = _world_size()
    units = _fsdp1_units(model)
    if units:
        dist = torch.distributed
        return all(getattr(u.sharding_strategy, "name", "") in _SHARDING_STRATEGIES
                   and dist.get_world_size(u.process_group) == world for u in units)
    dtensor = dtensor_type()
    params = list(model.parameters())
    if dtensor is None or not params or not all(isinstance(p, dtensor) for p in params):
        return False
    return all(p.device_mesh.size() == world and all(placement.is_shard() for placement in p.placements)
               for p in params)
