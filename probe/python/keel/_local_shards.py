"""Sharded parameters as keel measures them (DESIGN §9): DTensors (FSDP2's fully_shard, tensor
parallelism) and FSDP1's flat parameters.

A DTensor holds no data of its own: this rank's part of it is a plain tensor inside it
(``_local_tensor``), and its gradient is a new DTensor every step. For each DTensor parameter
keel makes, at attach, a leaf of its own over that part's storage (no copy). The probe measures
the leaf: its identity stays put between steps, and the optimizer's in-place update of the
DTensor shows in it. Before each step the leaf is handed this step's gradient part, again
without a copy, so the probe's unscale and its verdict act on the gradient the optimizer steps
with. After the step the leaf lets go of it, so that no gradient outlives the user's
``zero_grad()``.

An FSDP1 flat parameter (``use_orig_params=False``) concatenates a wrapped unit's original
parameters, and this rank holds a slice of that: measured as one tensor, the dashboard would
show one layer per unit, under FSDP's internal name. keel makes a leaf per original parameter
instead, over that parameter's part of the rank's shard (``_shard_param_infos``; an empty leaf
where the rank holds none of it), named as the parameter is named in the unit. Between steps the
flat parameter's data is the shard those leaves view, and before each step each leaf is lent
its slice of the flat gradient, as a DTensor's leaf is lent its part.
"""

from __future__ import annotations

import sys
from typing import Any, Dict, List, Tuple, Union

import torch

from . import _probe


def dtensor_type() -> Any:
    """torch.distributed.tensor.DTensor, or None while nothing has imported it (then no model
    holds one)."""
    return getattr(sys.modules.get("torch.distributed.tensor"), "DTensor", None)


def local_part(tensor: torch.Tensor) -> torch.Tensor:
    """This rank's part of a DTensor (its ``_local_tensor``), else the tensor itself."""
    return tensor._local_tensor if hasattr(tensor, "_local_tensor") else tensor


def has_dtensors(model: Any) -> bool:
    dtensor = dtensor_type()
    return (dtensor is not None and isinstance(model, torch.nn.Module)
            and any(isinstance(p, dtensor) for p in model.parameters()))


# One original parameter's part of a flat parameter's shard: its name, keel's leaf over the
# part, and where the part starts in the shard.
FlatPart = Tuple[str, torch.Tensor, int]


def flat_parts(name: str, flat: torch.Tensor) -> List[FlatPart]:
    """The leaves over each original parameter's part of this rank's shard of ``flat``, an FSDP1
    FlatParameter named ``name`` (its data is the shard until the first forward, and between
    steps)."""
    prefix = name[: -len("_flat_param")] if name.endswith("_flat_param") else ""
    shard = flat.detach()
    parts: List[FlatPart] = []
    for fqn, info in zip(flat._fqns, flat._shard_param_infos):
        offset, numel = (info.offset_in_shard, info.numel_in_shard) if info.in_shard else (0, 0)
        leaf = shard.narrow(0, offset, numel).requires_grad_(flat.requires_grad)
        parts.append((prefix + fqn, leaf, offset))
    return parts


def is_flat_param(tensor: torch.Tensor) -> bool:
    """An FSDP1 FlatParameter (FSDP marks them ``_is_flat_param``)."""
    return bool(getattr(tensor, "_is_flat_param", False))


class LocalShards:
    """keel's leaves over ``model``'s sharded parameters, by parameter: a DTensor's leaf over its
    local part, or a flat parameter's parts (``FlatPart``), one per original parameter. The
    extension's ``LocalShards`` (``native``) holds them too, for the probe's core, and lends
    each step's gradients to them: a loop over every part at every step, in C++."""

    def __init__(self, model: Any) -> None:
        self.leaves: Dict[torch.Tensor, Union[torch.Tensor, List[FlatPart]]] = {}
        if isinstance(model, torch.nn.Module):
            dtensor = dtensor_type()
            for name, p in model.named_parameters(remove_duplicate=False):
                if p in self.leaves:
                    continue
                if dtensor is not None and isinstance(p, dtensor):
                    self.leaves[p] = p._local_tensor.detach().requires_grad_(p.requires_grad)
                elif is_flat_param(p) and hasattr(p, "_shard_param_infos"):
                    self.leaves[p] = flat_parts(name, p)
        self.native = _probe.LocalShards(self.leaves)

    def lend_gradients(self) -> None:
        """Each leaf's gradient: its parameter's this step (its local part, or its slice of the
        flat gradient), or none. A flat gradient of another size than the shard (FSDP1 keeps
        it whole under no_sync) is no gradient of the parts: they read as not updated."""
        self.native.lend_gradients()

    def take_gradients_back(self) -> None:
        self.native.take_gradients_back()
