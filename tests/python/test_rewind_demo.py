"""python -m keel.demo heals itself (docs/rewind.md): one step's learning rate x1000 (every
value finite, nothing to skip) ruins the run without the rewind policy, and with it the run is
rewound to a snapshot from before the spike, does not meet the spike again, and finishes within
5% of the undisturbed run. A learning rate that stays 1000x too high diverges after every
rewind: the policy stops at rewind_max and says why, and with rewind_lr_factor its repeated
rewinds cut the learning rate until the run heals. keel-demo's model made small (65k
parameters, 200 steps) so that each run takes seconds on a CPU; the full-size measurement is
the demo's docstring's command."""

from __future__ import annotations

import re
from typing import List

import pytest
import torch

from keel import demo

SMALL = ["--steps", "200", "--seed", "6", "--width", "48", "--layers", "2", "--context", "32", "--warmup", "20",
         "--log-every", "0", "--endpoint=", "--record-dir=", "--threads", "1", "--rewind-every", "20"]


@pytest.fixture
def run_demo(capsys, tmp_path):
    """Runs the demo in this process with SMALL and ``flags``; returns what it printed."""
    threads = torch.get_num_threads()

    def run(*flags: str) -> str:
        capsys.readouterr()
        assert demo.main([*SMALL, "--dump-dir", str(tmp_path / "dumps"), *flags]) == 0
        return capsys.readouterr().out

    yield run
    torch.set_num_threads(threads)


def final_loss(out: str) -> float:
    found: List[str] = re.findall(r"^step +199  loss (\S+)", out, re.MULTILINE)
    assert found, out
    return float(found[-1])


def test_a_learning_rate_spike_ruins_the_run_without_the_policy_and_is_rewound_with_it(run_demo):
    undisturbed = final_loss(run_demo())
    spiked_out = run_demo("--lr-spike", "80:1000")
    spiked = final_loss(spiked_out)
    assert spiked > 1.2 * undisturbed, f"without the policy the spike's damage stays:\n{spiked_out}"
    assert "event rewind" not in spiked_out

    healed_out = run_demo("--lr-spike", "80:1000", "--rewind-on-divergence")
    healed = final_loss(healed_out)
    assert abs(healed - undisturbed) < 0.05 * undisturbed, (healed, undisturbed, healed_out)
    # Once: the spike is a fault of one moment, not met again on the way back over step 80.
    assert healed_out.count("event rewind:") == 1, healed_out
    assert "to step 80 (the rewind policy, 1 of at most 3: the loss above 2x its median" in healed_out
    assert "rewind_stopped" not in healed_out


def test_a_run_that_diverges_after_every_rewind_stops_at_the_cap_and_says_why(run_demo):
    out = run_demo("--cause", "lr:80", "--rewind-on-divergence", "--rewind-max", "2", "--steps", "120")
    assert out.count("event rewind:") == 2, out
    assert "(the rewind policy, 1 of at most 2" in out and "(the rewind policy, 2 of at most 2" in out
    stopped = out.find("event rewind_stopped")
    assert stopped > out.find("2 of at most 2"), out
    assert "after 2 rewinds (rewind_max): not rewinding" in out[stopped:]
    assert "a lower learning rate" in out[stopped:]


def test_a_run_that_diverges_again_is_rewound_with_the_learning_rate_cut_and_heals(run_demo):
    # The learning rate 1000x too high from step 80 on: without a cut every rewind diverges
    # again (the test above); rewind_lr_factor 0.1 cuts it on the second and third rewinds,
    # and the schedule keeps the cut (on_rewind is told it).
    out = run_demo("--cause", "lr:80", "--rewind-on-divergence", "--rewind-lr-factor", "0.1", "--log-every", "10")
    rewinds = [m.start() for m in re.finditer(r"event rewind:", out)]
    assert len(rewinds) == 3, out
    assert "learning rate x" not in out[rewinds[0]:rewinds[1]], "the first rewind keeps the learning rate"
    assert "learning rate x0.1 (rewind_lr_factor)" in out[rewinds[1]:rewinds[2]], out
    assert re.search(r"^step +80  loss \S+  lr 3\.00e\+00", out[:rewinds[0]], re.MULTILINE), out
    assert re.search(r"^step +80  loss \S+  lr 3\.00e-02", out[rewinds[2]:], re.MULTILINE), out
    assert "rewind_stopped" not in out
    assert final_loss(out) < 3.0, out
