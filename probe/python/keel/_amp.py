"""torch.amp.GradScaler, stepped by the probe.

``probe.step(loss, scaler=scaler)`` takes the place of ``scaler.step(optimizer)`` and
``scaler.update()``: the probe unscales the gradients in the pass that measures them, skips
the update on an overflow, and updates the scale and growth tracker as ``update()`` would. The
probe's own scaler keeps its state in the torch scaler's tensors (``_scale`` and
``_growth_tracker``), so ``scaler.get_scale()``, ``scaler.state_dict()`` and the next
``scaler.scale(loss)`` see what PyTorch's own step would have left, and on a CUDA device the
scale is updated there, with the skip, and never read back in the loop: the values are read
once, at the first step, and again only after something else wrote them (their version
counters say so: ``load_state_dict``, ``update(new_scale=...)``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Callable, Optional, Tuple

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
        # The tensors the probe's scaler keeps its state in, and their versions after its last
        # step: another version is a write from outside the probe.
        self._shared: Optional[Tuple[torch.Tensor, torch.Tensor, int, int]] = None

    def before_step(self, optimizer: torch.optim.Optimizer, settle: Callable[[], None]) -> None:
        """``settle`` collects the probe's deferred step, whose scale update may be on its way."""
        scaler = self.torch_scaler
        if not scaler.is_enabled():
            return
        if scaler._scale is None:
            raise RuntimeError(
                "keel.Probe.step: the scaler has not scaled a loss yet: call scaler.scale(loss).backward() "
                "before probe.step(loss, scaler=scaler)"
            )
        if not self._holds_state():
            # The first step, or a scale set from outside: read once (on a CUDA device, a wait).
            settle()
            self.keel.share_state(scaler._scale, scaler._growth_tracker, float(scaler._scale.item()),
                                  int(scaler._growth_tracker.item()))
        state = scaler._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.UNSCALED:
            # scaler.unscale_(optimizer) ran already (to clip the gradients): not twice. Reading
            # whether it found an overflow waits for the device; the probe decides on the host.
            found = any(bool(v.item()) for v in state["found_inf_per_device"].values())
            self.keel.mark_unscaled(found)
        elif state["stage"] is OptState.STEPPED:
            raise RuntimeError("keel.Probe.step: scaler.step(optimizer) already ran this step; "
                               "probe.step(loss, scaler=scaler) takes its place")

    def after_step(self) -> None:
        scaler = self.torch_scaler
        if not scaler.is_enabled():
            return
        # The probe's scaler wrote this step's scale into the shared tensors (on the device,
        # for a deferred step): nothing to copy back.
        scale, tracker = scaler._scale, scaler._growth_tracker
        self._shared = (scale, tracker, scale._version, tracker._version)
        # As update() leaves them: ready for the next step's unscale_() or step().
        scaler._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)

    def _holds_state(self) -> bool:
        if self._shared is None:
            return False
        scale, tracker, scale_version, tracker_version = self._shared
        current = self.torch_scaler
        return (current._scale is scale and current._growth_tracker is tracker and scale._version == scale_version
                and tracker._version == tracker_version)
