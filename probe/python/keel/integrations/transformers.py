"""keel in the Hugging Face Trainer: ``keel.integrations.transformers.attach(trainer)``.

    from keel.integrations.transformers import attach
    trainer = Trainer(model=model, args=args, train_dataset=data)
    attach(trainer)            # keyword arguments: keel.Probe's options
    trainer.train()

The Trainer steps its optimizer itself (``self.optimizer.step()``, with fp16 through
Accelerate's GradScaler), so a callback alone can watch but not skip. ``attach`` adds a callback
that, as training begins, makes a keel.Probe of the Trainer's model and its torch optimizer and
hands the optimizer's step (and the fp16 scaler's) to it (``Probe.intercept_step``): each
optimizer step is keel's, after the Trainer's gradient clipping, over the whole accumulated
gradient. The loss keel publishes is the Trainer's: the sum of ``training_step``'s losses over
the step's micro-batches (what the Trainer logs as ``loss``). Each training log gets
``keel/skipped`` (updates keel skipped since the last log) and ``keel/grad_norm`` (the last
step's, as keel measured it: after the Trainer's clipping), and before a checkpoint is saved keel's last
step is settled, so that a checkpoint taken after a skip holds the weights the skip kept.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from transformers import Trainer, TrainerCallback

from ..probe import Probe
from ._attached import AttachedProbe
from .._unwrap import original_optimizer


class KeelTrainerCallback(TrainerCallback):
    """What ``attach`` adds to the Trainer; ``probe`` is the keel.Probe once training began."""

    def __init__(self, trainer: Trainer, options: Dict[str, Any]) -> None:
        self._trainer = trainer
        self._attached = AttachedProbe(options)
        self._counted_step = -1          # the newest settled step counted
        self._skipped_since_log = 0
        self._last_grad_norm: Optional[float] = None

    # The Trainer's hooks.
    @property
    def probe(self) -> Optional[Probe]:
        """The keel.Probe once training began (None before, or where keel could not attach)."""
        return self._attached.probe

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        trainer = self._trainer
        model = trainer.model_wrapped if trainer.model_wrapped is not None else trainer.model
        self._attached.attach(model, original_optimizer(trainer.optimizer), getattr(trainer.accelerator, "scaler", None))

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.probe is None:
            return
        if control.should_log or control.should_save or control.should_training_stop:
            # On a GPU a step may be deferred: its verdict is known here only once collected.
            self.probe.settle()
        self._count(self.probe.last_settled)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.probe is not None:
            self.probe.settle()
            self._count(self.probe.last_settled)
            self.probe.release_step()

    # The Trainer's methods it wraps (attach()).
    def note_loss(self, loss: Any) -> None:
        if self.probe is not None:
            self.probe.note_loss(loss)

    def add_to_log(self, logs: Dict[str, float]) -> None:
        if self.probe is None or "loss" not in logs:
            return   # not a training log (an evaluation's, the run's summary)
        logs["keel/skipped"] = self._skipped_since_log
        if self._last_grad_norm is not None:
            logs["keel/grad_norm"] = self._last_grad_norm
        self._skipped_since_log = 0

    def _count(self, outcome: Any) -> None:
        if outcome is None or not outcome.settled or outcome.step <= self._counted_step:
            return
        self._counted_step = outcome.step
        self._last_grad_norm = float(outcome.grad_norm)
        if not outcome.applied:
            self._skipped_since_log += 1


def attach(trainer: Trainer, **options: Any) -> KeelTrainerCallback:
    """Puts keel in ``trainer``: every optimizer step measured, an unsafe one skipped, the run
    published for keel's dashboard. ``options``: keel.Probe's (``endpoint=``, ``model=``, ...).
    Returns the callback it added (its ``probe``, once training began)."""
    callback = KeelTrainerCallback(trainer, options)
    trainer.add_callback(callback)
    training_step = trainer.training_step
    log = trainer.log

    def keel_training_step(*args: Any, **kwargs: Any) -> Any:
        loss = training_step(*args, **kwargs)
        callback.note_loss(loss)
        return loss

    def keel_log(logs: Dict[str, float], *args: Any, **kwargs: Any) -> Any:
        callback.add_to_log(logs)
        return log(logs, *args, **kwargs)

    trainer.training_step = keel_training_step
    trainer.log = keel_log
    return callback
