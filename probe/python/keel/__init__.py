"""keel: a live training-stability probe for PyTorch.

Three lines in an existing loop::

    import keel
    probe = keel.Probe(model, optimizer)   # keyword arguments: every ProbeOptions field
    ...
    loss.backward()
    probe.step(loss)                       # instead of optimizer.step()

Each step measures every parameter's gradient (norm, absmax, non-finite count, zeros), its
weights and its update, skips an update whose gradients or loss are NaN/Inf, and publishes
the step to keel's dashboard (``keel``, the native app). See the repository's README.
"""

from __future__ import annotations

import torch  # the extension links libtorch: torch's own libraries are loaded first

from ._torch_check import check_torch_matches

check_torch_matches(torch.__version__)

from ._probe import AttachError, StepOutcome  # noqa: E402
from .probe import Probe  # noqa: E402

__all__ = ["AttachError", "Probe", "StepOutcome"]
