"""DTensor parameters (FSDP2's fully_shard, tensor parallelism) as keel measures them (DESIGN §9).

A DTensor holds no data of its own: this rank's part of it is a plain tensor inside it
(``_local_tensor``), and its gradient is a new DTensor every step. For each DTensor parameter
keel makes, at attach, a leaf of its own over that part's storage (no copy). The probe measures
the leaf: its identity stays put between steps, and the optimizer's in-place update of the
DTensor shows in it. Before each step the leaf is handed this step's gradient part, again
without a copy, so the probe's unscale and its verdict act on the gradient the optimizer steps
with. After the step the leaf lets go of it, so that no gradient outlives the user's
``zero_grad()``.
"""

from __future__ import annotations

import sys
from typing import Any, Dict

import torch


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


class LocalShards:
    """keel's leaves over the local parts of ``model``'s DTensor parameters, by parameter."""

    def __init__(self, model: Any) -> None:
        self.leaves: Dict[torch.Tensor, torch.Tensor] = {}
        dtensor = dtensor_type()
        if dtensor is None or not isinstance(model, torch.nn.Module):
            return
        for p in model.parameters():
            if isinstance(p, dtensor) and p not in self.leaves:
                self.leaves[p] = p._local_tensor.detach().requires_grad_(p.requires_grad)

    def lend_gradients(self) -> None:
        """Each leaf's gradient: its parameter's this step (its local part), or none."""
        for p, leaf in self.leaves.items():
            grad = p.grad
            leaf.grad = None if grad is None else local_part(grad)

    def take_gradients_back(self) -> None:
        for leaf in self.leaves.values():
            leaf.grad = None
