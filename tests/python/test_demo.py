"""python -m keel.demo: the Python demo's NaN found, skipped and seen by keel's own client."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest


def free_ports(count: int) -> int:
    """The first of `count` free ports in a row (a probe takes two: telemetry, then commands)."""
    for _ in range(50):
        with socket.socket() as first:
            first.bind(("127.0.0.1", 0))
            port = first.getsockname()[1]
            others = [socket.socket() for _ in range(count - 1)]
            try:
                for k, s in enumerate(others, start=1):
                    s.bind(("127.0.0.1", port + k))
            except OSError:
                continue
            finally:
                for s in others:
                    s.close()
            return port
    raise RuntimeError(f"no {count} free ports in a row")


def free_port_pair() -> int:
    return free_ports(2)


def demo(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-W", "ignore", "-m", "keel.demo", "--threads", "1", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs)


def test_a_forward_blow_up_is_skipped_and_its_cause_found(tmp_path):
    run = demo("--steps", "25", "--log-every", "0", "--endpoint", "", "--record-dir", "",
               "--dump-dir", str(tmp_path / "dumps"), "--cause", "attention:20")
    out, _ = run.communicate(timeout=300)
    assert run.returncode == 0, out
    assert "step     20" in out and "skipped (nonfinite)" in out, out
    assert out.count("skipped") == 1, "only the poisoned step is skipped"
    assert any(d.name.startswith("step-20-nonfinite") for d in (tmp_path / "dumps").iterdir())


def test_the_skip_reaches_keels_client(tmp_path):
    cli = os.path.join(os.environ.get("KEEL_BIN_DIR", ""), "keel-cli")
    if not os.access(cli, os.X_OK):
        pytest.skip("KEEL_BIN_DIR has no keel-cli (ctest sets it)")
    endpoint = f"tcp://127.0.0.1:{free_port_pair()}"
    run = demo("--steps", "0", "--pace", "20", "--log-every", "0", "--endpoint", endpoint, "--record-dir", "",
               "--dump-dir", str(tmp_path / "dumps"), "--inject-nan", "40:blocks.1.mlp.fc.weight")
    try:
        tail = subprocess.run([cli, "tail", "--endpoint", endpoint, "--events-only", "--json", "--timeout", "60",
                               "--count", "3"], capture_output=True, text=True, timeout=120)
    finally:
        run.kill()
        run.communicate()
    assert tail.returncode == 0, tail.stdout + tail.stderr
    events = [json.loads(line) for line in tail.stdout.splitlines() if line.startswith("{")]
    first = [e for e in events if e.get("kind") == "first_nonfinite"]
    assert first and first[0]["layer"] == "blocks.1.mlp.fc.weight" and first[0]["step"] == 40, tail.stdout
    assert any(e.get("kind") == "skip" and e["step"] == 40 for e in events), tail.stdout
