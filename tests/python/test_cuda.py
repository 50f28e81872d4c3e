"""keel.Probe on a CUDA device (issue 31): torch.optim's fused steps skip a poisoned update on
the device with no host sync, a fused Adam's update ratio is rebuilt from step counts kept on
the host, the other optimizers are decided on the host, and a torch.amp.GradScaler steps as
PyTorch's own. Every test is skipped where there is no CUDA
device (scripts/gpu-check.sh runs them on one)."""

from __future__ import annotations

import warnings

import pytest
import torch

import keel
from conftest import batch, small_model

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

POISONED = 3


def cuda_model(seed: int = 0) -> torch.nn.Module:
    return small_model(seed).cuda()


def cuda_batches(count: int):
    """On the device before any step is counted: a copy from pageable memory waits for it."""
    return [tuple(t.cuda() for t in batch(seed)) for seed in range(count)]


def backward(model, optimizer, data, poison=False, scaler=None):
    optimizer.zero_grad()
    x, y = data
    loss = torch.nn.functional.mse_loss(model(x), y)
    (scaler.scale(loss) if scaler is not None else loss).backward()
    if poison:
        model[2].weight.grad[1, 3] = float("nan")   # one layer's gradient; the loss is finite
    return loss


def host_syncs_in(call):
    """call()'s result and how many times it made the host wait for the device (torch's sync
    debug mode, which warns at each synchronising CUDA call)."""
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            result = call()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return result, sum(1 for w in caught if "synchroniz" in str(w.message))


def snapshot(model, optimizer):
    """The weights and every tensor of the optimizer's state, copied to the host."""
    tensors = [p.detach().cpu() for p in model.parameters()]
    for p in model.parameters():
        for value in optimizer.state.get(p, {}).values():
            if torch.is_tensor(value):
                tensors.append(value.detach().cpu())
    return tensors


def all_equal(a, b) -> bool:
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("make_optimizer", [
    lambda params: torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1, fused=True),
    lambda params: torch.optim.Adam(params, lr=1e-2, fused=True),
    lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9, fused=True),
], ids=["AdamW", "Adam", "SGD"])
def test_a_fused_step_is_decided_on_the_device_with_no_host_sync(quiet, make_optimizer):
    """With the defaults (every metric, the update ratio rebuilt from the optimizer's state),
    the probe's verdict reaches the fused step on the device with no host sync and the host
    learns the outcome a step later. The poisoned step leaves weights and state as they were;
    every other step is the optimizer's own fused step, as a plain loop takes it."""
    model, reference = cuda_model(), cuda_model()
    optimizer, reference_optimizer = make_optimizer(model.parameters()), make_optimizer(reference.parameters())
    probe = keel.Probe(model, optimizer, **quiet)
    data = cuda_batches(7)
    for step, d in enumerate(data):
        loss = backward(model, optimizer, d, poison=step == POISONED)
        before = snapshot(model, optimizer)
        outcome, syncs = host_syncs_in(lambda: probe.step(loss))
        assert not outcome.settled, f"step {step} was decided on the host"
        if step > 0:   # the first step plans the layout and reads the step counts once
            assert syncs == 0, f"step {step}: the probe waited for the device {syncs} time(s)"
        if step == POISONED:
            assert all_equal(before, snapshot(model, optimizer)), "the skipped step left weights and state as they were"
        else:
            backward(reference, reference_optimizer, d)
            reference_optimizer.step()
        if step == 0:
            continue
        settled = probe.last_settled
        assert settled.step == step - 1
        assert settled.applied == (step - 1 != POISONED), f"step {step - 1}"
        if step - 1 == POISONED:
            assert settled.skip_reason == "nonfinite"
            assert settled.nonfinite_layers == 1
    probe.settle()
    assert probe.last_settled.step == len(data) - 1 and probe.last_settled.applied
    assert all_equal(snapshot(model, optimizer), snapshot(reference, reference_optimizer)), \
        "keel's steps are the optimizer's own fused steps, the poisoned one left out"


@pytest.mark.parametrize("make_optimizer", [
    lambda params: torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1, fused=True),
    lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9, fused=True),
], ids=["AdamW", "SGD"])
def test_snapshots_of_a_fused_step_wait_for_nothing(quiet, make_optimizer):
    """Snapshots at every other step (rewind_every 2): the optimizer hands its state tensors
    out as they live (no state_dict, no torch.save), and they are copied with the weights on
    the side stream, so a step that takes one still makes the host wait for nothing."""
    model = cuda_model()
    optimizer = make_optimizer(model.parameters())
    optimizer.state_dict = lambda: pytest.fail("a snapshot called state_dict")
    probe = keel.Probe(model, optimizer, **quiet, rewind_every=2, rewind_dump=False)
    for step, d in enumerate(cuda_batches(8)):
        loss = backward(model, optimizer, d)
        outcome, syncs = host_syncs_in(lambda: probe.step(loss))
        assert not outcome.settled, f"step {step} was decided on the host"
        if step > 0:
            assert syncs == 0, f"step {step}: the probe waited for the device {syncs} time(s)"
    probe.settle()
    assert probe.last_record["snapshot_bytes"] > 0
    assert probe.last_record["probe_errors"] == 0


@pytest.mark.parametrize("make_optimizer", [
    lambda params: torch.optim.Adam(params, lr=1e-2, capturable=True),
    lambda params: torch.optim.AdamW(params, lr=1e-2, foreach=True),
    lambda params: torch.optim.RMSprop(params, lr=1e-3),
], ids=["Adam-capturable", "AdamW-foreach", "RMSprop"])
def test_an_optimizer_without_a_fused_step_is_decided_on_the_host(quiet, make_optimizer):
    model, reference = cuda_model(), cuda_model()
    optimizer, reference_optimizer = make_optimizer(model.parameters()), make_optimizer(reference.parameters())
    probe = keel.Probe(model, optimizer, **quiet)
    for step, d in enumerate(cuda_batches(5)):
        loss = backward(model, optimizer, d, poison=step == POISONED)
        before = snapshot(model, optimizer)
        outcome = probe.step(loss)
        assert outcome.settled
        assert outcome.applied == (step != POISONED), f"step {step}"
        if step == POISONED:
            assert outcome.skip_reason == "nonfinite"
            assert all_equal(before, snapshot(model, optimizer)), "the skipped step left weights and state as they were"
        else:
            backward(reference, reference_optimizer, d)
            reference_optimizer.step()
    assert all_equal(snapshot(model, optimizer), snapshot(reference, reference_optimizer))


def test_a_fused_adams_update_ratio_is_the_weights_change(quiet):
    """Rebuilt on the device from the moments and the step counts the probe keeps on the host
    (read once, counted on, a skipped step's taken back): the bias corrections are right at
    every step, the ones after a skip included."""
    model = cuda_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1, fused=True)
    probe = keel.Probe(model, optimizer, **quiet)
    for step, d in enumerate(cuda_batches(7)):
        loss = backward(model, optimizer, d, poison=step == POISONED)
        before = [p.detach().clone() for p in model.parameters()]
        outcome = probe.step(loss)
        assert not outcome.settled
        probe.settle()
        assert probe.last_settled.applied == (step != POISONED)
        expected = [((p.detach() - b).norm() / b.norm()).item() for p, b in zip(model.parameters(), before)]
        assert probe.last_record["step"] == step
        assert probe.last_record["layers"]["update_ratio"] == pytest.approx(expected, rel=1e-3, abs=1e-9), \
            f"step {step}"


def test_the_metrics_on_the_device_match_torch(quiet):
    model = cuda_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=True)
    probe = keel.Probe(model, optimizer, **quiet)
    data = cuda_batches(2)
    loss = backward(model, optimizer, data[0])
    expected = [p.grad.norm().item() for p in model.parameters()]
    probe.step(loss)
    probe.settle()   # a deferred step's record is built when it settles
    assert probe.last_record["step"] == 0
    assert probe.last_record["loss"] == pytest.approx(loss.item(), rel=1e-6)
    assert probe.last_record["layers"]["grad_norm"] == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("make_optimizer,deferred", [
    (lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9), False),
    (lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9, fused=True), True),
    (lambda params: torch.optim.AdamW(params, lr=1e-2, fused=True), True),
], ids=["SGD", "SGD-fused", "AdamW-fused"])
def test_grad_scaler_on_the_device_steps_as_pytorchs_own(quiet, make_optimizer, deferred):
    """The same weights, scale and growth tracker as scaler.step(optimizer) and scaler.update(),
    an overflow skipped and backed off; with a fused step, the scale updated on the device with
    no host sync (the probe's scaler keeps its state in the torch scaler's tensors)."""
    ours, theirs = cuda_model(), cuda_model()
    ours_opt, theirs_opt = make_optimizer(ours.parameters()), make_optimizer(theirs.parameters())
    settings = dict(init_scale=2.0 ** 10, growth_interval=2)
    ours_scaler, theirs_scaler = torch.amp.GradScaler("cuda", **settings), torch.amp.GradScaler("cuda", **settings)
    probe = keel.Probe(ours, ours_opt, **quiet)
    for step, d in enumerate(cuda_batches(7)):
        overflow = step == POISONED
        loss = backward(ours, ours_opt, d, poison=overflow, scaler=ours_scaler)
        outcome, syncs = host_syncs_in(lambda: probe.step(loss, scaler=ours_scaler))
        if deferred and step > 0:   # the first step reads the scale once
            assert syncs == 0, f"step {step}: the probe waited for the device {syncs} time(s)"
        assert outcome.settled != deferred
        probe.settle()
        backward(theirs, theirs_opt, d, poison=overflow, scaler=theirs_scaler)
        theirs_scaler.step(theirs_opt)
        theirs_scaler.update()
        settled = outcome if outcome.settled else probe.last_settled
        assert settled.step == step
        assert settled.applied == (not overflow), f"step {step}"
        if overflow:
            assert settled.skip_reason == "scaler"
        assert ours_scaler.get_scale() == theirs_scaler.get_scale(), f"step {step}"
        assert ours_scaler._growth_tracker.item() == theirs_scaler._growth_tracker.item(), f"step {step}"
        for p, q in zip(ours.parameters(), theirs.parameters()):
            # keel unscales in its own pass (one multiply by 1/scale, as PyTorch's unscale_).
            assert torch.allclose(p, q, rtol=1e-6, atol=1e-7), f"step {step}"
    assert ours_scaler.get_scale() != 2.0 ** 10, "the scale moved (backed off, then grew)"
