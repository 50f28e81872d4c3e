"""keel in loops as scripts write them: a disabled GradScaler, a compiled model, a wrapped one,
and a loop that calls optimizer.step() itself (Probe.intercept_step)."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

import keel
from conftest import batch, loss_of, small_model


@pytest.mark.parametrize("use_scaler", [False, True])
def test_a_disabled_grad_scaler_steps_as_no_scaler(quiet, use_scaler):
    # nanoGPT's form: GradScaler(enabled=(dtype == "float16")), off in an fp32 or bf16 run.
    model = small_model()
    reference = small_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    reference_optimizer = torch.optim.AdamW(reference.parameters(), lr=1e-2)
    probe = keel.Probe(model, optimizer, **quiet)
    reference_probe = keel.Probe(reference, reference_optimizer, **quiet)
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    for step in range(6):
        poison = step == 2
        for m, opt in ((model, optimizer), (reference, reference_optimizer)):
            opt.zero_grad()
        loss = loss_of(model, step, poison)
        scaler.scale(loss).backward()
        if use_scaler:
            scaler.unscale_(optimizer)   # a no-op when disabled, as scripts call it to clip
        outcome = probe.step(loss, scaler=scaler if use_scaler else None)
        reference_loss = loss_of(reference, step, poison)
        reference_loss.backward()
        expected = reference_probe.step(reference_loss)
        assert (outcome.applied, outcome.skip_reason) == (expected.applied, expected.skip_reason)
        assert outcome.applied == (not poison)
    for a, b in zip(model.parameters(), reference.parameters()):
        assert torch.equal(a, b)
    assert probe.last_record["scaler"] is None


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = torch.nn.Linear(8, 8)
        self.mlp = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.mlp(torch.tanh(self.attn(x)))


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.blocks = torch.nn.ModuleList([Block(), Block()])
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def own_names():
    return [name for name, _ in Net().named_parameters()]


def test_a_compiled_model_keeps_its_own_names(quiet):
    net = Net()
    compiled = torch.compile(net, backend="eager")
    assert next(iter(dict(compiled.named_parameters()))).startswith("_orig_mod.")
    probe = keel.Probe(compiled, torch.optim.SGD(compiled.parameters(), lr=0.1), **quiet)
    x, y = batch(0)
    loss = torch.nn.functional.mse_loss(compiled(x), y)
    loss.backward()
    assert probe.step(loss).applied
    assert probe.layer_names == own_names()


def test_a_submodule_compiled_on_its_own_keeps_its_names(quiet):
    net = Net()
    net.blocks[1] = torch.compile(net.blocks[1], backend="eager")
    assert "blocks.1._orig_mod.attn.weight" in dict(net.named_parameters())
    probe = keel.Probe(net, torch.optim.SGD(net.parameters(), lr=0.1), **quiet)
    assert probe.layer_names == own_names()


def test_wrappers_in_any_order_keep_the_names(quiet):
    net = Net()
    wrapped = torch.nn.DataParallel(torch.compile(torch.nn.DataParallel(net), backend="eager"))
    probe = keel.Probe(wrapped, torch.optim.SGD(net.parameters(), lr=0.1), **quiet)
    assert probe.layer_names == own_names()


def test_a_compiled_models_forward_born_nan_is_traced_in_the_closure_form(quiet):
    # The traced re-run of an unsafe step runs eagerly (force_eager), so the tracer sees the op
    # that the compiled graph fused: the same origin as the model run eagerly.
    class LogNet(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.fc = torch.nn.Linear(8, 8)
            self.head = torch.nn.Linear(8, 4)

        def forward(self, x):
            return self.head(torch.log(self.fc(x).abs() * 0.0 + x.abs() - x.abs()))

    causes = {}
    for mode in ("eager", "compiled"):
        net = LogNet()
        model = torch.compile(net) if mode == "compiled" else net
        optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
        probe = keel.Probe(model, optimizer, **quiet)
        x, y = batch(0)

        def closure():
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            return loss

        outcome = probe.step(closure=closure)
        assert not outcome.applied
        first = next(e for e in probe.last_events if e["kind"] == "first_nonfinite")
        causes[mode] = first["cause"]
    assert (causes["eager"]["kind"], causes["eager"]["op"], causes["eager"]["module"]) == ("forward", "aten::log", "fc")
    # Traced as compiled, the NaN would read as the batch's: the fused log is no ATen op.
    assert causes["compiled"] == causes["eager"]


def test_intercept_step_makes_optimizer_step_keels(quiet):
    model = small_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    schedulers_step = optimizer.__dict__["step"]   # the scheduler's wrapper of torch's step
    probe = keel.Probe(model, optimizer, **quiet)
    probe.intercept_step()
    scheduler_step = scheduler.step

    def step_scheduler_unwarned():
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message=".*overridden after learning rate scheduler")
            scheduler_step()
    scheduler.step = step_scheduler_unwarned
    verdicts = []
    for step in range(5):
        optimizer.zero_grad()
        for micro in range(2):   # gradient accumulation: the step's loss is the sum
            loss = loss_of(model, 10 * step + micro, poison=step == 2 and micro == 1) / 2
            loss.backward()
            probe.note_loss(loss)
        before = [p.detach().clone() for p in model.parameters()]
        optimizer.step()   # the loop's own call: keel's step, not a recursion
        scheduler.step()
        verdicts.append(probe.last_settled.applied)
        changed = any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
        assert changed == verdicts[-1]
        if step == 0:
            assert math.isclose(probe.last_record["loss"], expected_loss(model, step, before), rel_tol=1e-5)
    assert verdicts == [True, True, False, True, True]
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert optimizer.param_groups[0]["lr"] == pytest.approx(1e-2 * 0.5 ** 5)
    probe.release_step()
    assert optimizer.__dict__["step"] is schedulers_step   # as the scheduler left it
    optimizer.zero_grad()
    loss_of(model, 99).backward()
    optimizer.step()   # torch's own again
    assert probe.last_settled.step == 4


def expected_loss(model, step, weights):
    """The summed micro-batch losses of step ``step`` under ``weights`` (the weights before it)."""
    with torch.no_grad():
        saved = [p.detach().clone() for p in model.parameters()]
        for p, w in zip(model.parameters(), weights):
            p.copy_(w)
        total = sum(loss_of(model, 10 * step + micro).item() / 2 for micro in range(2))
        for p, s in zip(model.parameters(), saved):
            p.copy_(s)
    return total


def test_intercepted_closure_step_returns_the_closures_loss(quiet):
    model = small_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    probe = keel.Probe(model, optimizer, **quiet)
    probe.intercept_step()

    def closure():
        optimizer.zero_grad()
        loss = loss_of(model, 0)
        loss.backward()
        return loss

    returned = optimizer.step(closure)
    assert probe.last_settled.applied
    assert probe.last_record["loss"] == pytest.approx(returned.item())


def test_intercepted_grad_scaler_step_is_the_probes(quiet):
    # A loop that calls scaler.step(optimizer); scaler.update(): an overflow is keel's verdict
    # too (torch's own step would never call optimizer.step() then), and the scale is updated once.
    model = small_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=2)
    probe = keel.Probe(model, optimizer, **quiet)
    probe.intercept_step(scaler)
    reference = small_model()
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    reference_scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=2)
    for step in range(5):
        poison = step == 2
        for m, opt, s in ((model, optimizer, scaler), (reference, reference_optimizer, reference_scaler)):
            opt.zero_grad()
            loss = loss_of(m, step, poison)
            s.scale(loss).backward()
            if m is model:
                probe.note_loss(loss)
            s.step(opt)
            s.update()
        assert probe.last_settled.applied == (not poison)
        assert scaler.get_scale() == reference_scaler.get_scale()
    for a, b in zip(model.parameters(), reference.parameters()):
        assert torch.allclose(a, b)


def test_ddp_and_compile_in_either_order_keep_the_names(quiet, tmp_path):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        for wrap in (lambda m: torch.nn.parallel.DistributedDataParallel(torch.compile(m, backend="eager")),
                     lambda m: torch.compile(torch.nn.parallel.DistributedDataParallel(m), backend="eager")):
            net = Net()
            model = wrap(net)
            probe = keel.Probe(model, torch.optim.SGD(model.parameters(), lr=0.1), **quiet)
            x, y = batch(0)
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            assert probe.step(loss).applied
            assert probe.layer_names == own_names()
    finally:
        dist.destroy_process_group()


def test_a_step_replaced_by_hand_with_probe_step_does_not_recurse(quiet):
    # What a Trainer user tried first: optimizer.step = a function that calls probe.step().
    model = small_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    probe = keel.Probe(model, optimizer, **quiet)
    losses = {}
    optimizer.step = lambda closure=None: probe.step(losses["loss"])
    for step in range(3):
        optimizer.zero_grad()
        losses["loss"] = loss_of(model, step, poison=step == 1)
        losses["loss"].backward()
        before = [p.detach().clone() for p in model.parameters()]
        outcome = optimizer.step()
        assert outcome.applied == (step != 1)
        assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters())) == outcome.applied
