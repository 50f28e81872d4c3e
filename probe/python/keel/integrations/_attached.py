"""The probe an integration attaches to a framework's model and optimizer, or none, with a
warning, when keel cannot attach.

keel never makes training worse: a framework's run that keel cannot watch (an endpoint already
in use, an option misspelt, an optimizer keel cannot read, such as DeepSpeed's) trains on
without keel, and says so, rather than ending at its first step."""

from __future__ import annotations

import gc
import warnings
from typing import Any, Dict, Optional

from ..probe import Probe


def not_attached(why: str) -> None:
    warnings.warn(f"keel: not attached, training goes on without keel: {why}", RuntimeWarning, stacklevel=3)


class AttachedProbe:
    """An integration's probe, kept across the framework's train() calls: the same while the
    model and optimizer are the same, else closed and made anew."""

    def __init__(self, options: Dict[str, Any]) -> None:
        self.probe: Optional[Probe] = None
        self._options = options
        self._of: tuple = ()

    def attach(self, model: Any, optimizer: Any, scaler: Any) -> Optional[Probe]:
        """The probe of ``model`` and ``optimizer``, stepping the optimizer (and ``scaler``'s
        step), or None when keel cannot attach (warned)."""
        if self._of != (model, optimizer):
            if self.probe is not None:
                # Closed before the new one binds the same endpoint.
                self.probe.release_step()
                self.probe = None
                gc.collect()
            self._of = (model, optimizer)
            try:
                self.probe = Probe(model, optimizer, **self._options)
            except Exception as e:   # noqa: BLE001: whatever it is, the run goes on
                not_attached(f"{type(e).__name__}: {e}")
        if self.probe is not None:
            self.probe.intercept_step(scaler)
        return self.probe
