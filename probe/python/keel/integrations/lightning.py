"""keel in Lightning: ``keel.integrations.lightning.KeelCallback``.

    from keel.integrations.lightning import KeelCallback
    trainer = L.Trainer(callbacks=[KeelCallback()])   # keyword arguments: keel.Probe's options

Lightning steps the optimizer itself, in automatic optimization (``optimizer.step(closure)``
from its precision plugin) and in manual optimization (``self.optimizers().step()``), with
16-mixed through its GradScaler. As training starts, the callback makes a keel.Probe of the
trained model and its torch optimizer and hands that optimizer's step (and the scaler's) to it
(``Probe.intercept_step``): every step is keel's, after Lightning's gradient clipping, over the
whole accumulated gradient. The loss keel publishes is the sum of the step's micro-batch losses
as Lightning backpropagates them (divided by ``accumulate_grad_batches``, unscaled). Each
optimizer step logs ``keel/skipped`` (1 when keel skipped the update), ``keel/grad_norm`` and ``keel/step``
through the LightningModule's ``log``, so they reach the Trainer's loggers.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

try:
    import lightning.pytorch as pl
except ImportError:   # the standalone package's name
    import pytorch_lightning as pl

from ..probe import Probe
from ._attached import AttachedProbe, not_attached
from .._unwrap import original_optimizer


class KeelCallback(pl.Callback):
    """keel's probe over a Lightning run: ``KeelCallback(**options)``, options as keel.Probe's.
    ``probe`` is the keel.Probe once training started. One optimizer (the model's first, or
    ``optimizer_index``): keel measures a model against the optimizer that updates it."""

    def __init__(self, optimizer_index: int = 0, **options: Any) -> None:
        super().__init__()
        self._optimizer_index = optimizer_index
        self._attached = AttachedProbe(options)
        self._scaler: Any = None
        self._logged_step = -1

    @property
    def probe(self) -> Optional[Probe]:
        """The keel.Probe once training began (None before, or where keel could not attach)."""
        return self._attached.probe

    def on_train_start(self, trainer: "pl.Trainer", pl_module: "pl.LightningModule") -> None:
        optimizers = trainer.optimizers
        if self._optimizer_index >= len(optimizers):
            not_attached(f"KeelCallback(optimizer_index={self._optimizer_index}), but the model has "
                         f"{len(optimizers)} optimizer(s)")
            return
        scaler = getattr(trainer.precision_plugin, "scaler", None)
        self._scaler = scaler if scaler is not None and scaler.is_enabled() else None
        model = trainer.model if trainer.model is not None else pl_module
        self._attached.attach(model, original_optimizer(optimizers[self._optimizer_index]), self._scaler)

    def on_before_backward(self, trainer: "pl.Trainer", pl_module: "pl.LightningModule",
                           loss: torch.Tensor) -> None:
        if self.probe is None:
            return
        if self._scaler is not None:
            # 16-mixed hands the hook the scaled loss; divided on the device, with no wait.
            loss = loss.detach() / self._scaler._scale
        self.probe.note_loss(loss)

    def on_train_batch_end(self, trainer: "pl.Trainer", pl_module: "pl.LightningModule", outputs: Any,
                           batch: Any, batch_idx: int) -> None:
        if self.probe is None:
            return
        outcome = self.probe.last_settled
        if outcome is None or outcome.step <= self._logged_step:
            return   # no new step (an accumulation micro-batch), or its verdict is not in yet
        self._logged_step = outcome.step
        # keel's step number with them: a logger may repeat a step's values on later batches
        # (manual optimization logs at every batch), and the dashboard numbers its steps so.
        pl_module.log("keel/step", float(outcome.step), on_step=True, on_epoch=False)
        pl_module.log("keel/skipped", 0.0 if outcome.applied else 1.0, on_step=True, on_epoch=False)
        pl_module.log("keel/grad_norm", float(outcome.grad_norm), on_step=True, on_epoch=False)

    def on_train_end(self, trainer: "pl.Trainer", pl_module: "pl.LightningModule") -> None:
        if self.probe is not None:
            self.probe.settle()
            self.probe.release_step()
