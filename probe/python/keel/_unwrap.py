"""The module a user wrote, under the wrappers that only rename its parameters.

``torch.compile(model)`` returns an OptimizedModule that holds the model as ``_orig_mod``;
DistributedDataParallel and DataParallel hold it as ``module``. Their parameters are the
model's own tensors, but ``named_parameters()`` of the wrapper prefixes every name
(``_orig_mod.transformer.h.0.attn.c_attn.weight``), so keel measures the model inside: its
layers carry the names the user knows, in any order of wrapping. FSDP is not unwrapped: its
units are what keel measures a rank's shards through (the names leave out its wrappers, as
FSDP's own state_dict() does). A submodule compiled on its own (``block = torch.compile(block)``)
keeps its place in the tree; the probe's names leave out its ``_orig_mod`` (python_model.cpp).
"""

from __future__ import annotations

import sys
from typing import Any

import torch


def original_module(model: Any) -> Any:
    """``model`` without the torch.compile, DistributedDataParallel and DataParallel wrappers
    around it (any number, any order); ``model`` itself when it has none."""
    parallel = (torch.nn.DataParallel, torch.nn.parallel.DistributedDataParallel)
    # torch._dynamo is imported by torch.compile: a model that was never compiled has none.
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    compiled = getattr(eval_frame, "OptimizedModule", None)
    while True:
        if compiled is not None and isinstance(model, compiled):
            model = model._orig_mod
        elif isinstance(model, parallel):
            model = model.module
        else:
            return model


def accelerated(optimizer: Any) -> Any:
    """Accelerate's AcceleratedOptimizer, when ``optimizer`` is one; else None."""
    accelerate = sys.modules.get("accelerate.optimizer")
    return optimizer if accelerate is not None and isinstance(optimizer, accelerate.AcceleratedOptimizer) else None


def original_optimizer(optimizer: Any) -> Any:
    """The torch optimizer under a framework's wrapper of it: Accelerate's AcceleratedOptimizer
    (``optimizer``), Lightning's LightningOptimizer (``_optimizer``). Their steps only add the
    framework's bookkeeping (gradient accumulation's skipped micro-steps, a GradScaler), which
    keel's own step sees through ``Probe.intercept_step``; what keel reads (the groups, the
    state) and the fused step it may defer are the torch optimizer's."""
    while True:
        accelerate = sys.modules.get("accelerate.optimizer")
        lightning = sys.modules.get("lightning.pytorch.core.optimizer")
        if accelerate is not None and isinstance(optimizer, accelerate.AcceleratedOptimizer):
            optimizer = optimizer.optimizer
        elif lightning is not None and isinstance(optimizer, lightning.LightningOptimizer):
            optimizer = optimizer._optimizer
        else:
            return optimizer
