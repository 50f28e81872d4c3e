"""keel.Probe in a plain Python loop: the same probe core as the C++ front, on the CPU."""

from __future__ import annotations

import math
import os

import pytest
import torch

import keel
from conftest import batch, loss_of, small_model


def train_step(model, optimizer, probe, seed):
    """One clean step through the probe."""
    optimizer.zero_grad()
    loss = loss_of(model, seed)
    loss.backward()
    return probe.step(loss)


def test_import_says_which_torch_it_was_built_with():
    # keel was imported above, on a machine that may have no GPU at all.
    assert keel._probe.built_with_torch.split("+")[0] == torch.__version__.split("+")[0]


def test_another_torch_is_a_clear_import_error():
    from keel._torch_check import check_torch_matches

    check_torch_matches(torch.__version__)
    with pytest.raises(ImportError, match="rebuild keel against it"):
        check_torch_matches("1.13.1+cpu")


def test_layers_are_the_parameters_by_name(quiet):
    model = small_model()
    probe = keel.Probe(model, torch.optim.SGD(model.parameters(), lr=0.1), **quiet)
    assert probe.layer_names == [name for name, _ in model.named_parameters()]


def test_grad_norms_match_torch(quiet):
    model = small_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    probe = keel.Probe(model, optimizer, **quiet)
    for step in range(3):
        optimizer.zero_grad()
        loss = loss_of(model, step)
        loss.backward()
        expected = [p.grad.norm().item() for p in model.parameters()]
        outcome = probe.step(loss)
        assert outcome.applied
        record = probe.last_record
        assert record["loss"] == pytest.approx(loss.item(), rel=1e-6)
        assert record["layers"]["grad_norm"] == pytest.approx(expected, rel=1e-5)
        total = math.sqrt(sum(n * n for n in expected))
        assert record["grad_norm"] == pytest.approx(total, rel=1e-5)


def test_update_ratio_matches_the_weights_change(quiet):
    model = small_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    probe = keel.Probe(model, optimizer, **quiet)
    for step in range(3):
        optimizer.zero_grad()
        loss = loss_of(model, step)
        loss.backward()
        before = [p.detach().clone() for p in model.parameters()]
        probe.step(loss)
        expected = [((p.detach() - b).norm() / b.norm()).item() for p, b in zip(model.parameters(), before)]
        assert probe.last_record["layers"]["update_ratio"] == pytest.approx(expected, rel=1e-3)


def test_a_nonfinite_gradient_skips_the_update_and_names_the_layer(quiet):
    model = small_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    probe = keel.Probe(model, optimizer, **quiet)
    for step in range(2):
        optimizer.zero_grad()
        loss = loss_of(model, step)
        loss.backward()
        assert probe.step(loss).applied
    optimizer.zero_grad()
    loss = loss_of(model, 2)
    loss.backward()
    model[2].weight.grad[1, 3] = float("inf")   # one layer's gradient blows up; the loss is finite
    before = [p.detach().clone() for p in model.parameters()]
    outcome = probe.step(loss)
    assert not outcome.applied
    assert outcome.skip_reason == "nonfinite"
    assert outcome.nonfinite_layers == 1
    for p, b in zip(model.parameters(), before):
        assert torch.equal(p.detach(), b), "a skipped update left the weights as they were"
    kinds = [e["kind"] for e in probe.last_events]
    assert "first_nonfinite" in kinds and "skip" in kinds
    first = next(e for e in probe.last_events if e["kind"] == "first_nonfinite")
    assert first["layer"] == "2.weight"
    assert probe.last_record["layers"]["grad_nonfinite"] == [0, 0, 1, 0]
    # The run goes on: the next clean step is applied.
    optimizer.zero_grad()
    loss = loss_of(model, 3)
    loss.backward()
    assert probe.step(loss).applied


def test_any_torch_optimizer_is_stepped(quiet):
    model = small_model()
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    probe = keel.Probe(model, optimizer, **quiet)
    reference = small_model()
    reference_optimizer = torch.optim.RMSprop(reference.parameters(), lr=1e-3)
    for step in range(3):
        for m, opt in ((model, None), (reference, reference_optimizer)):
            m.zero_grad()
            loss = loss_of(m, step)
            loss.backward()
            if opt is None:
                assert probe.step(loss).applied
            else:
                opt.step()
    for p, q in zip(model.parameters(), reference.parameters()):
        assert torch.equal(p, q), "keel's step is the optimizer's own step"


def test_the_closure_form_steps_as_optimizer_step_closure(quiet):
    model = small_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    probe = keel.Probe(model, optimizer, **quiet)

    losses = []

    def closure():
        optimizer.zero_grad()
        loss = loss_of(model, 0)
        loss.backward()
        losses.append(loss.item())
        return loss

    before = [p.detach().clone() for p in model.parameters()]
    outcome = probe.step(closure=closure)
    assert outcome.applied
    assert losses and probe.last_record["loss"] == pytest.approx(losses[0], rel=1e-6)
    assert any(not torch.equal(p.detach(), b) for p, b in zip(model.parameters(), before))
    with pytest.raises(TypeError):
        probe.step(torch.tensor(1.0), closure=closure)


def test_a_layer_added_to_the_optimizer_is_followed(quiet):
    model = small_model()
    temperature = torch.nn.Parameter(torch.tensor(1.0))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    probe = keel.Probe(model, optimizer, **quiet)
    train_step(model, optimizer, probe, 0)
    optimizer.add_param_group({"params": [temperature], "lr": 0.01})
    optimizer.zero_grad()
    loss = loss_of(model, 1) * temperature
    loss.backward()
    probe.step(loss)
    assert probe.layer_names[-1] == "optimizer.param_groups.1.params.0"
    assert probe.last_record["group_lrs"] == [0.1, 0.01]
    assert probe.last_record["layers"]["grad_norm"][-1] == pytest.approx(abs(temperature.grad.item()), rel=1e-6)


def test_dumps_are_torch_save_files_of_the_state_dicts(quiet, tmp_path):
    model = small_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    probe = keel.Probe(model, optimizer, dump_on_nonfinite=True, **quiet)
    train_step(model, optimizer, probe, 0)
    optimizer.zero_grad()
    loss = loss_of(model, 1, poison=True)
    loss.backward()
    probe.step(loss)
    del probe   # the dump's writer finishes before the probe is gone
    dumps = sorted((tmp_path / "dumps").iterdir())
    assert len(dumps) == 1 and "nonfinite" in dumps[0].name
    state = torch.load(dumps[0] / "model.pt")
    assert set(state) == set(model.state_dict())
    for name, value in model.state_dict().items():
        assert torch.equal(state[name], value), name
    restored = torch.optim.AdamW(small_model().parameters(), lr=1e-2)
    restored.load_state_dict(torch.load(dumps[0] / "optimizer.pt"))
    assert restored.state_dict()["state"][0]["step"] == optimizer.state_dict()["state"][0]["step"]


def test_options_are_keyword_arguments(quiet):
    model = small_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(TypeError, match="unknown option 'skip_on_nan'"):
        keel.Probe(model, optimizer, skip_on_nan=True, **quiet)
    with pytest.raises(keel.AttachError, match="rank 3 is not in a world of 2"):
        keel.Probe(model, optimizer, rank=3, world_size=2, **quiet)
    probe = keel.Probe(model, optimizer, skip_on_nonfinite=False, **quiet)
    optimizer.zero_grad()
    loss = loss_of(model, 0, poison=True)
    loss.backward()
    assert probe.step(loss).applied, "skip_on_nonfinite=False applies even a NaN update"


def test_not_a_module_or_not_an_optimizer_is_a_clear_error(quiet):
    model = small_model()
    with pytest.raises(ValueError, match="not a torch.nn.Module"):
        keel.Probe(object(), torch.optim.SGD(model.parameters(), lr=0.1), **quiet)
    with pytest.raises(ValueError, match="not a torch.optim.Optimizer"):
        keel.Probe(model, object(), **quiet)


def scaled_step(model, optimizer, scaler, seed, overflow, probe=None):
    optimizer.zero_grad()
    loss = loss_of(model, seed)
    scaler.scale(loss).backward()
    if overflow:
        model[0].weight.grad[0, 0] = float("inf")   # as an fp16 overflow would
    if probe is not None:
        return probe.step(loss, scaler=scaler)
    scaler.step(optimizer)
    scaler.update()
    return None


def test_grad_scaler_steps_as_pytorchs_own(quiet):
    """torch.amp.GradScaler through the probe: the same weights, scale and growth tracker as
    scaler.step(optimizer) and scaler.update(), an overflow skipped and backed off."""
    ours, theirs = small_model(), small_model()
    ours_opt = torch.optim.SGD(ours.parameters(), lr=0.05, momentum=0.9)
    theirs_opt = torch.optim.SGD(theirs.parameters(), lr=0.05, momentum=0.9)
    settings = dict(init_scale=2.0 ** 10, growth_interval=2)
    ours_scaler = torch.amp.GradScaler("cpu", **settings)
    theirs_scaler = torch.amp.GradScaler("cpu", **settings)
    probe = keel.Probe(ours, ours_opt, **quiet)
    for step, overflow in enumerate([False, False, False, True, False, False, False]):
        outcome = scaled_step(ours, ours_opt, ours_scaler, step, overflow, probe)
        scaled_step(theirs, theirs_opt, theirs_scaler, step, overflow)
        assert outcome.applied == (not overflow)
        if overflow:
            assert outcome.skip_reason == "scaler"
            assert probe.last_record["scaler"]["found_inf"]
        assert ours_scaler.get_scale() == theirs_scaler.get_scale(), f"step {step}"
        assert ours_scaler._growth_tracker.item() == theirs_scaler._growth_tracker.item(), f"step {step}"
        for p, q in zip(ours.parameters(), theirs.parameters()):
            assert torch.equal(p, q), f"step {step}"
    assert ours_scaler.get_scale() != 2.0 ** 10, "the scale moved (backed off, then grew)"


def test_grad_scaler_a_scale_set_between_steps_is_taken(quiet):
    """The probe's scaler keeps its state in the torch scaler's tensors; a write from outside
    (here update(new_scale=...)) is read before the next step, as PyTorch's own step reads it."""
    ours, theirs = small_model(), small_model()
    ours_opt = torch.optim.SGD(ours.parameters(), lr=0.05)
    theirs_opt = torch.optim.SGD(theirs.parameters(), lr=0.05)
    settings = dict(init_scale=2.0 ** 10, growth_interval=100)
    ours_scaler = torch.amp.GradScaler("cpu", **settings)
    theirs_scaler = torch.amp.GradScaler("cpu", **settings)
    probe = keel.Probe(ours, ours_opt, **quiet)
    for step in range(5):
        if step == 2:
            ours_scaler.update(new_scale=2.0 ** 5)
            theirs_scaler.update(new_scale=2.0 ** 5)
        assert scaled_step(ours, ours_opt, ours_scaler, step, False, probe).applied
        scaled_step(theirs, theirs_opt, theirs_scaler, step, False)
        assert ours_scaler.get_scale() == theirs_scaler.get_scale(), f"step {step}"
        assert ours_scaler._growth_tracker.item() == theirs_scaler._growth_tracker.item(), f"step {step}"
        assert probe.last_record["scaler"]["scale"] == ours_scaler.get_scale(), f"step {step}"
        for p, q in zip(ours.parameters(), theirs.parameters()):
            assert torch.equal(p, q), f"step {step}"
    assert ours_scaler.get_scale() == 2.0 ** 5


def test_grad_scaler_after_unscale_for_clipping(quiet):
    model = small_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 8)
    probe = keel.Probe(model, optimizer, **quiet)
    optimizer.zero_grad()
    loss = loss_of(model, 0)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    expected = [p.grad.norm().item() for p in model.parameters()]
    probe.step(loss, scaler=scaler)
    assert probe.last_record["layers"]["grad_norm"] == pytest.approx(expected, rel=1e-6), "unscaled once, not twice"
    assert scaler.get_scale() == 2.0 ** 8
    # The scaler is ready for the next step, as after its own update().
    optimizer.zero_grad()
    loss = loss_of(model, 1)
    scaler.scale(loss).backward()
    assert probe.step(loss, scaler=scaler).applied


def test_a_module_added_between_steps_is_measured_under_its_name(quiet):
    model = small_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    probe = keel.Probe(model, optimizer, **quiet)
    train_step(model, optimizer, probe, 0)
    model.add_module("head", torch.nn.Linear(4, 2))
    optimizer.add_param_group({"params": list(model.head.parameters())})
    optimizer.zero_grad()
    x, _ = batch(1)
    loss = model(x).pow(2).mean()
    loss.backward()
    probe.step(loss)
    assert probe.layer_names[-2:] == ["head.weight", "head.bias"]
    assert any(e["kind"] == "layout_changed" for e in probe.last_events)
    assert probe.last_record["layers"]["grad_norm"][-2] == pytest.approx(model.head.weight.grad.norm().item(), rel=1e-5)
    # A layer frozen between steps is told apart from one that got no gradient.
    model[0].weight.requires_grad_(False)
    optimizer.zero_grad()
    loss = model(x).pow(2).mean()
    loss.backward()
    probe.step(loss)
    assert probe.last_record["frozen_layers"] == [0]


def test_a_parameter_the_optimizer_does_not_hold_is_followed_too(quiet):
    """Only the walk of the module tree sees it: the optimizer's groups did not change."""
    model = small_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    probe = keel.Probe(model, optimizer, **quiet)
    for step in range(2):
        if step == 1:
            model.register_parameter("gain", torch.nn.Parameter(torch.tensor(2.0)))
        optimizer.zero_grad()
        loss = loss_of(model, step) * getattr(model, "gain", 1.0)
        loss.backward()
        probe.step(loss)
    assert probe.layer_names[0] == "gain"
    assert probe.last_record["layers"]["grad_norm"][0] == pytest.approx(abs(model.gain.grad.item()), rel=1e-6)


def test_a_watched_activation_is_measured_with_its_step(quiet):
    model = small_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    probe = keel.Probe(model, optimizer, **quiet)
    optimizer.zero_grad()
    x, y = batch(0)
    logits = model(x)
    probe.watch("logits", logits)
    loss = torch.nn.functional.mse_loss(logits, y)
    loss.backward()
    probe.step(loss)
    stats = probe.last_record["watches"]["logits"]
    values = logits.detach()
    assert stats["absmax"] == pytest.approx(values.abs().max().item(), rel=1e-6)
    assert stats["rms"] == pytest.approx(values.pow(2).mean().sqrt().item(), rel=1e-5)
    assert stats["z"] == pytest.approx(torch.logsumexp(values, -1).mean().item(), rel=1e-5)
    assert stats["nonfinite"] == 0
