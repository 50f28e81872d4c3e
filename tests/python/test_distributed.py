"""torchrun --nproc-per-node 2 with gloo on the CPU: each rank's probe on its own port, and a
NaN in one rank's batch skipped by both, so the replicas stay equal."""

from __future__ import annotations

import os
import subprocess
import sys

import torch

from test_demo import free_port_pair, free_ports

HERE = os.path.dirname(os.path.abspath(__file__))


def test_two_ranks_skip_the_same_step_and_stay_equal(tmp_path):
    base = free_ports(4)   # two ranks: telemetry and commands each
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore", KEEL_PORT=str(base))
    run = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
         "--master-port", str(free_port_pair()), os.path.join(HERE, "two_ranks_trainer.py"), str(tmp_path)],
        capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1)]
    for r, result in enumerate(ranks):
        skipped = [(step, reason) for step, applied, reason in result["outcomes"] if not applied]
        assert skipped == [(3, "nonfinite")], f"rank {r}: {result['outcomes']}"
        assert result["endpoint"] == f"tcp://127.0.0.1:{base + 2 * r}", "the port derived from the rank"
    for name, weight in ranks[0]["weights"].items():
        assert torch.isfinite(weight).all(), name
        assert torch.equal(weight, ranks[1]["weights"][name]), f"the replicas drifted apart at {name}"
