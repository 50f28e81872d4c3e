"""The early warning and on_event in the Python front (docs/warnings.md): a loss whose weight
grows 5% a step from step 300 (a data pipeline's weights gone wrong) drives the grad norm up
through plain SGD, and keel warns with the trend's numbers long before the gradients overflow;
the same run without the ramp raises no warning; a callback that raises is a probe_error and
training goes on."""
import math

import torch

import keel


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
