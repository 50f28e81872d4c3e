"""The torch keel was built against, checked before the extension is loaded.

A torch extension is bound to the torch it was compiled with: loaded into another, it fails
to link at best. keel says so at import, with the command that mends it, instead.
"""

from __future__ import annotations

from ._build_info import TORCH_VERSION as BUILT_WITH


def check_torch_matches(running: str) -> None:
    """Raises ImportError when ``running`` (torch.__version__) is not the torch keel was built with."""
    base = running.split("+")[0]
    if base != BUILT_WITH:
        raise ImportError(
            f"keel was built against torch {BUILT_WITH}, but this environment has torch {base}: "
            "rebuild keel against it with `pip install --force-reinstall --no-deps ./probe/python` "
            "(from the keel repository)"
        )
