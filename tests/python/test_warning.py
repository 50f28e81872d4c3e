"""The early warning and on_event in the Python front (docs/warnings.md): a loss whose weight
grows 5% a step from step 300 (a data pipeline's weights gone wrong) drives the grad norm up
through plain SGD, and keel warns with the trend's numbers long before the gradients overflow;
the same run without the ramp raises no warning; a callback that raises is a probe_error and
training goes on. And python -m keel.demo: a learning rate that keeps rising after its warmup
(--drift lr) is warned at least 20 steps before the run diverges, and --warning-lr-factor halves
the learning rate at the warning, which the demo's schedule keeps; with --watch-attention, a
learning rate too high from the start is warned through the attention logits within 80 steps."""
import math
import re

import torch

import keel
from keel import demo


def _train(ramp_from, steps, **options):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    events = []
    probe = keel.Probe(model, optimizer, endpoint="", record_dir="", dump_on_nonfinite=False,
                       on_event=events.append, **options)
    target = torch.nn.Linear(16, 1)
    for step in range(steps):
        x = torch.randn(64, 16)
        with torch.no_grad():
            y = target(x)
        weight = 1.05 ** (step - ramp_from) if ramp_from is not None and step > ramp_from else 1.0
        loss = weight * (model(x) - y).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        probe.step(loss)
    return events


def test_a_growing_loss_weight_is_warned_with_its_numbers_and_a_lead_and_a_healthy_run_is_not():
    healthy = _train(None, 500)
    assert [e for e in healthy if e["kind"] == "warning"] == []

    events = _train(300, 400)
    warnings = [e for e in events if e["kind"] == "warning"]
    assert warnings, "no warning"
    first = warnings[0]
    assert 300 < first["step"] < 340, first
    w = first["warning"]
    assert w["signal"] in ("grad_norm", "loss"), w
    assert w["value"] > 1.5 * w["baseline"], w
    assert w["per_step"] > 0.02, w
    assert w["lead_steps"] > 0, w
    assert w["advice"], w
    assert "baseline" in first["detail"], first["detail"]


def test_an_on_event_that_raises_is_a_probe_error_and_training_goes_on():
    seen = []

    def fails(event):
        seen.append(event["kind"])
        raise RuntimeError("the pager is down")

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    probe = keel.Probe(model, optimizer, endpoint="", record_dir="", dump_on_nonfinite=False, on_event=fails)
    for step in range(6):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        if step == 2:
            loss = loss * math.nan   # a non-finite loss: skipped, and an event
        optimizer.zero_grad()
        loss.backward()
        outcome = probe.step(loss)
        if step == 2:
            assert not outcome.applied
    assert "first_nonfinite" in seen
    assert "probe_error" in seen, "the callback's failure is told as an event (and told to it)"
    assert probe.last_record["probe_errors"] >= 1


SMALL = ["--seed", "6", "--width", "48", "--layers", "2", "--context", "32", "--log-every", "1", "--endpoint=",
         "--record-dir=", "--threads", "1", "--no-dump-nonfinite"]


def _demo(capsys, *flags):
    threads = torch.get_num_threads()
    capsys.readouterr()
    try:
        assert demo.main([*SMALL, *flags]) == 0
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    logged = {int(m[0]): (float(m[1]), float(m[2]))
              for m in re.findall(r"^step +(\d+)  loss (\S+)  lr (\S+)", out, re.MULTILINE)}
    warned = [int(m) for m in re.findall(r"^step +(\d+)  event warning: ", out, re.MULTILINE)]
    return out, logged, warned


def _diverged_at(logged):
    """The divergence's first step, by the rewind policy's rule (docs/rewind.md): the loss above
    2x the median of the 64 steps before it, for 10 steps in a row."""
    steps = sorted(logged)
    for i, step in enumerate(steps[64:], 64):
        window = sorted(logged[s][0] for s in steps[i - 64:i])
        median = window[len(window) // 2]
        if all(logged[s][0] > 2 * median for s in steps[i:i + 10]) and i + 10 <= len(steps):
            return step
    return None


def test_the_demos_rising_learning_rate_is_warned_ahead_and_the_warning_can_halve_it(capsys):
    out, logged, warned = _demo(capsys, "--steps", "700", "--drift", "lr:300")
    diverged = _diverged_at(logged)
    assert diverged is not None, out
    assert warned and 300 < warned[0] <= diverged - 20, (warned, diverged)
    assert "warning_lr_factor" not in out

    cut_out, cut_logged, cut_warned = _demo(capsys, "--steps", "700", "--drift", "lr:300", "--warning-lr-factor", "0.5")
    first = cut_warned[0]
    assert first == warned[0], "the same run up to its first warning"
    assert "learning rate x0.5 (warning_lr_factor)" in cut_out
    for step in (first + 1, first + 50):
        assert math.isclose(cut_logged[step][1], 0.5 * logged[step][1], rel_tol=1e-2), (step, cut_logged[step])


def test_the_demos_growing_batch_weight_is_warned(capsys):
    out, _, warned = _demo(capsys, "--steps", "380", "--drift", "batches:300")
    assert warned and warned[0] > 300, out


def test_the_demos_attention_logits_running_away_are_warned_within_the_warmup(capsys):
    # A peak learning rate of 0.5 after 200 steps of warmup: the attention logits run away long
    # before the loss shows anything, and before the forecaster's 200-step warm-up ends.
    out, _, warned = _demo(capsys, "--steps", "80", "--lr", "0.5", "--warmup", "200", "--watch-attention")
    assert warned and warned[0] < 80, out
    assert "of blocks.0.attn.scores" in out or "of blocks.1.attn.scores" in out, out
