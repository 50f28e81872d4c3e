"""Rewind in the Python front (docs/rewind.md): snapshots every `rewind_every` steps, and the
rewind policy going back to the newest one from before a divergence. The optimizer's state
travels through its own state_dict (torch.save / load_state_dict): after the rewind the weights
and every state tensor are those the snapshot's step began from, bit for bit, and `on_rewind`
is told from where to where."""
import copy

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
