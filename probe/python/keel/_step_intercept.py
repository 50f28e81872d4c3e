"""``optimizer.step()``, and a GradScaler's ``step()``, as keel's step: for loops keel does not write.

The Hugging Face Trainer, Lightning, Accelerate's prepared optimizer and many scripts call
``optimizer.step()`` themselves (with fp16, ``scaler.step(optimizer)`` then ``scaler.update()``).
StepIntercept puts keel's step in place of that one optimizer object's ``step``: an attribute
of the instance, as torch's LR schedulers and Accelerate put theirs, so the class, every other
optimizer, ``state_dict()`` and the schedulers are untouched. Whoever calls
``optimizer.step(closure)`` then runs ``probe.step()``; when the probe applies the update it
decided on, its call of ``optimizer.step()`` goes on to the step that was there before (the
optimizer's own, or a scheduler's or Accelerate's wrapper of it, which see the step as usual),
never back into keel.

With an enabled GradScaler, ``scaler.step(optimizer)`` calls ``optimizer.step()`` only when the
gradients are finite, so keel would never see an overflow. The scaler's ``step`` for this
optimizer is taken over too, as ``probe.step(loss, scaler=scaler)`` (the hand-written loop's
form: keel unscales, or reads what ``unscale_`` found, skips an overflow and updates the scale),
and the ``update()`` that follows it is then a no-op, as the scale was updated already.

The loss: ``optimizer.step(closure)`` returns the closure's (Lightning's), or the framework notes
each micro-batch's loss (``note_loss``) and the step's is their sum, the loss the framework logs.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch


class StepIntercept:
    """keel's step in place of ``optimizer.step`` (and ``scaler.step``/``update``), until
    ``release()``. ``step(loss, scaler)``: the probe's step; ``in_step()``: whether the probe is
    inside it (and so calling the optimizer's own step)."""

    def __init__(self, optimizer: torch.optim.Optimizer, step: Callable[..., Any], in_step: Callable[[], bool],
                 scaler: Optional[torch.amp.GradScaler] = None) -> None:
        self.optimizer = optimizer
        self.scaler = scaler
        self._probe_step = step
        self._in_step = in_step
        self._loss: Optional[torch.Tensor] = None
        self._scale_updated = False
        # What was in place before: called when the probe applies an update, put back by release().
        self._previous_step = optimizer.step

        def step(closure: Optional[Callable[[], Any]] = None, *args: Any, **kwargs: Any) -> Any:
            return self._optimizer_step(closure, *args, **kwargs)

        # An LR scheduler made before warns at its first step that the optimizer's step was
        # replaced after it; this one still calls the scheduler's when the probe applies.
        if getattr(self._previous_step, "_wrapped_by_lr_sched", False):
            step._wrapped_by_lr_sched = True
        self._installed_step = step
        optimizer.step = step
        if scaler is not None:
            self._previous_scaler_step = scaler.step
            self._previous_update = scaler.update
            scaler.step = self._scaler_step
            scaler.update = self._scaler_update

    def note_loss(self, loss: torch.Tensor) -> None:
        """One micro-batch's loss (gradient accumulation: the step's is their sum), on its device:
        no wait for its value."""
        loss = loss.detach()
        self._loss = loss if self._loss is None else self._loss + loss

    def release(self) -> None:
        """Puts back what was there before, where nothing else has replaced keel's since."""
        if self.optimizer.__dict__.get("step") is self._installed_step:
            self.optimizer.step = self._previous_step
        if self.scaler is not None:
            if self.scaler.__dict__.get("step") == self._scaler_step:
                self.scaler.step = self._previous_scaler_step
            if self.scaler.__dict__.get("update") == self._scaler_update:
                self.scaler.update = self._previous_update

    def _take_loss(self, closure: Optional[Callable[[], Any]]) -> tuple:
        """Runs the closure (as torch's step does: with gradients on); the step's loss and what the
        closure returned."""
        result = None
        if closure is not None:
            with torch.enable_grad():
                result = closure()
        noted, self._loss = self._loss, None
        if noted is None and isinstance(result, torch.Tensor):
            noted = result.detach()
        return noted, result

    def _optimizer_step(self, closure: Optional[Callable[[], Any]] = None, *args: Any, **kwargs: Any) -> Any:
        if self._in_step():
            # The probe applying its update: the step that was there before.
            return self._previous_step(*(() if closure is None else (closure,)), *args, **kwargs)
        loss, result = self._take_loss(closure)
        self._probe_step(loss, None)
        return result

    def _scaler_step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        if optimizer is not self.optimizer or not self.scaler.is_enabled():
            return self._previous_scaler_step(optimizer, *args, **kwargs)
        closure = args[0] if args else kwargs.get("closure")
        loss, result = self._take_loss(closure)
        self._probe_step(loss, self.scaler)
        self._scale_updated = True
        return result

    def _scaler_update(self, new_scale: Any = None) -> None:
        if self._scale_updated:
            # The probe's step updated the scale already.
            self._scale_updated = False
            if new_scale is None:
                return None
        return self._previous_update(new_scale)
