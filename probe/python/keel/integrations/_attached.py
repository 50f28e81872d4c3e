"""The probe an integration attaches, or none, with a warning, when keel cannot attach.

keel never makes training worse: a framework's run that keel cannot watch (an endpoint already
in use, an option misspelt, an optimizer keel cannot read, such as DeepSpeed's) trains on
without keel, and says so, rather than ending at its first step."""

from __future__ import annotations

import warnings
from typing import Any, Dict, Optional

from ..probe import Probe


def attached_probe(model: Any, optimizer: Any, options: Dict[str, Any]) -> Optional[Probe]:
    try:
        return Probe(model, optimizer, **options)
    except Exception as e:   # noqa: BLE001: whatever it is, the run goes on
        warnings.warn(f"keel: not attached, training goes on without keel: {type(e).__name__}: {e}",
                      RuntimeWarning, stacklevel=3)
        return None
