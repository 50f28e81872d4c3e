"""Rewind in the Python front (docs/rewind.md): snapshots every `rewind_every` steps, and the
rewind policy going back to the newest one from before a divergence. After the rewind the
weights and every optimizer state tensor are those the snapshot's step began from, bit for bit,
and `on_rewind` is told from where to where. torch.optim's AdamW, Adam and SGD hand their state
tensors to the snapshot as they are (no state_dict, no torch.save: on a GPU those would wait for
the device); another optimizer travels through its own state_dict."""
import copy

import pytest
import torch

import keel


def test_the_policy_rewinds_a_diverged_run_to_the_snapshot_before_it(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    told = []
    # on_rewind written for the two steps alone: called without the learning-rate factor.
    probe = keel.Probe(model, optimizer, endpoint="", record_dir="", dump_dir=str(tmp_path), rewind_every=5,
                       rewind_on_divergence=True, on_rewind=lambda from_step, to_step: told.append((from_step, to_step)))
    began = {}   # the probe's step -> (weights, optimizer state) it began from
    step = 0
    for _ in range(60):
        began[step] = (copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict()))
        x = torch.randn(32, 8)
        loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        # Steps 30 to 44 report a loss 100 times too high, as a diverged run would.
        reported = loss * 100 if 30 <= step < 45 and not told else loss
        outcome = probe.step(reported)
        step = told[-1][1] if told and told[-1][0] == outcome.step else outcome.step + 1
        if told:
            break
    assert told, "the policy did not rewind"
    from_step, to_step = told[0]
    assert to_step == 25, "the newest snapshot before the divergence's first step (30)"
    assert from_step == 40, "the tenth high step (39) completes the divergence; it is rewound at the next"
    weights, state = began[to_step]
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, weights[name]), name
    for index, saved in state["state"].items():
        for key, value in saved.items():
            now = optimizer.state_dict()["state"][index][key]
            assert torch.equal(torch.as_tensor(now), torch.as_tensor(value)), (index, key)
    rewinds = [e for e in probe.last_events if e["kind"] == "rewind"]
    assert rewinds and "the rewind policy" in rewinds[0]["detail"]
    del probe   # its end finishes the dump it took
    rewound = torch.load(tmp_path / f"step-{to_step}-rewind" / "model.pt")
    for name, tensor in weights.items():
        assert torch.equal(rewound[name], tensor), f"the rewind's dump is not the state put back: {name}"


def _state_dict_refused(*_args, **_kwargs):
    raise RuntimeError("state_dict is not called for a snapshot of this optimizer")


@pytest.mark.parametrize("name, make, hands_out_tensors", [
    ("AdamW amsgrad", lambda p: torch.optim.AdamW(p, lr=1e-2, amsgrad=True), True),
    ("Adam", lambda p: torch.optim.Adam(p, lr=1e-2), True),
    ("SGD momentum", lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9), True),
    ("SGD", lambda p: torch.optim.SGD(p, lr=1e-2), True),
    ("RMSprop", lambda p: torch.optim.RMSprop(p, lr=1e-3), False),
])
def test_each_optimizers_state_is_put_back_bit_for_bit(name, make, hands_out_tensors):
    torch.manual_seed(0)
    # The second layer is frozen for the first steps: its state is made after the snapshot,
    # and the rewind takes it away again.
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    optimizer = make(model.parameters())
    if hands_out_tensors:
        optimizer.state_dict = _state_dict_refused
    told = []
    probe = keel.Probe(model, optimizer, endpoint="", record_dir="", rewind_every=5, rewind_dump=False,
                       rewind_on_divergence=True, on_rewind=lambda from_step, to_step: told.append((from_step, to_step)))
    began = {}
    step = 0
    for _ in range(60):
        began[step] = (copy.deepcopy(model.state_dict()),
                       {p: copy.deepcopy(dict(optimizer.state[p])) for p in model.parameters() if p in optimizer.state})
        x = torch.randn(32, 8)
        loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        if step < 27:
            model[2].weight.grad = None
        reported = loss * 100 if 30 <= step < 45 and not told else loss
        outcome = probe.step(reported)
        assert probe.last_record["probe_errors"] == 0, (name, [e["detail"] for e in probe.last_events])
        step = told[-1][1] if told and told[-1][0] == outcome.step else outcome.step + 1
        if told:
            break
    assert told == [(40, 25)], told
    weights, state = began[25]
    for key, tensor in model.state_dict().items():
        assert torch.equal(tensor, weights[key]), (name, key)
    assert set(p for p in model.parameters() if optimizer.state.get(p)) == set(state), name
    for p, saved in state.items():
        assert set(optimizer.state[p]) == set(saved), name
        for key, value in saved.items():
            now = optimizer.state[p][key]
            assert torch.equal(torch.as_tensor(now), torch.as_tensor(value)), (name, key)
            if torch.is_tensor(value):
                assert now.device == value.device and now.dtype == value.dtype, (name, key)
    # And it goes on training from there.
    x = torch.randn(32, 8)
    loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    assert probe.step(loss).applied
