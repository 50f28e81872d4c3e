"""torch.amp.GradScaler, stepped by the probe.

``probe.step(loss, scaler=scaler)`` takes the place of ``scaler.step(optimizer)`` and
``scaler.update()``: the probe unscales the gradients in the pass that measures them, skips
the update on an overflow, and updates the scale and growth tracker as ``update()`` would. The
torch scaler's state is mirrored into the probe's own scaler before the step and written back
after it, so ``scaler.get_scale()``, ``scaler.state_dict()`` and the next ``scaler.scale(loss)``
see what PyTorch's own step would have left.
"""

from __future__ import annotations

from collections import defaultdict

import torch
from torch.amp.grad_scaler import OptState, _refresh_per_optimizer_state

from . import _probe


class ScalerBridge:
    """One torch.amp.GradScaler and the probe's scaler that stands in for it."""

    def __init__(self, scaler: torch.amp.GradScaler) -> None:
        self.torch_scaler = scaler
        self.keel = _probe.GradScaler(
            init_scale=float(scaler._init_scale),
            growth_factor=float(scaler._growth_factor),
            backoff_factor=float(scaler._backoff_factor),
            growth_interval=int(scaler._growth_interval),
            enabled=scaler.is_enabled(),
        )

    def before_step(self, optimizer: torch.optim.Optimizer) -> None:
        scaler = self.torch_scaler
        if not scaler.is_enabled():
            return
        if scaler._scale is None:
            raise RuntimeError(
                "keel.Probe.step: the scaler has not scaled a loss yet: call scaler.scale(loss).backward() "
                "before probe.step(loss, scaler=scaler)"
            )
        # On a CUDA device these two reads wait for the device (not yet deferred there).
        self.keel.load_state(float(scaler._scale.item()), int(scaler._growth_tracker.item()))
        state = scaler._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.UNSCALED:
            # scaler.unscale_(optimizer) ran already (to clip the gradients): not twice.
            found = any(bool(v.item()) for v in state["found_inf_per_device"].values())
            self.keel.mark_unscaled(found)
        elif state["stage"] is OptState.STEPPED:
            raise RuntimeError("keel.Probe.step: scaler.step(optimizer) already ran this step; "
                               "probe.step(loss, scaler=scaler) takes its place")

    def after_step(self) -> None:
        scaler = self.torch_scaler
        if not scaler.is_enabled():
            return
        scaler._scale.fill_(self.keel.scale_value)
        scaler._growth_tracker.fill_(self.keel.growth_tracker)
        # As update() leaves them: ready for the next step's unscale_() or step().
        scaler._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)
