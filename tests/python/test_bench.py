"""keel-bench-py runs its four loops and prints every target's figure (not timed here: a
benchmark's figures are read, not asserted, on a shared machine)."""

from __future__ import annotations

import re
import subprocess
import sys


def test_the_bench_prints_its_figures():
    run = subprocess.run([sys.executable, "-W", "ignore", "-m", "keel.bench", "--rounds", "3", "--warmup", "1"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    for loop in ("plain", "keel", "hooks", "anomaly"):
        assert f"\n  {loop} " in run.stdout, run.stdout
    assert "keel's own time on the training thread" in run.stdout
    assert "lines a user adds to an existing loop: 3 (target <= 3)" in run.stdout


def test_the_sharded_lending_bench_prints_both_shardings():
    run = subprocess.run([sys.executable, "-W", "ignore", "-m", "keel.bench_shards", "--layers", "4", "--rounds", "3"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    for sharding in ("FSDP1 flat parameter", "FSDP2 fully_shard"):
        assert re.search(sharding + r" +8 +[0-9.]+ +[0-9.]+ +[0-9.]+\n", run.stdout), run.stdout
