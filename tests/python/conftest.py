"""Shared pieces of the Python front's tests: a small model and quiet probe options."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def quiet(tmp_path):
    """Probe options that publish nothing and write only under the test's own directory."""
    return dict(endpoint="", record_dir="", dump_dir=str(tmp_path / "dumps"))


def small_model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))


def batch(seed: int):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(32, 8, generator=g), torch.randn(32, 4, generator=g)


def loss_of(model, seed: int, poison: bool = False):
    """The small model's loss on batch ``seed``; ``poison``: with a NaN in its input."""
    x, y = batch(seed)
    if poison:
        x = x.clone()
        x[0, 0] = float("nan")
    return torch.nn.functional.mse_loss(model(x), y)
