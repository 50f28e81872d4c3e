"""The Python front names what keel published as the wire does: Probe.last_record and
Probe.last_events have PROTOCOL.md's keys (§3.1's header, §3.3's step, §3.4's event), which the
codec's own tables are checked against, so the Python names cannot drift from the JSON's or the
wire's."""

from __future__ import annotations

import pathlib
import re

import torch

import keel
from conftest import loss_of, small_model

PROTOCOL = pathlib.Path(__file__).resolve().parents[2] / "shared" / "PROTOCOL.md"


def documented_keys(section: str) -> set:
    """The keys of the first table under PROTOCOL.md's heading `### <section>`."""
    text = PROTOCOL.read_text()
    body = text[text.index("### " + section):]
    keys = []
    for line in body.splitlines()[1:]:
        if line.startswith("### ") or line.startswith("## "):
            break
        match = re.match(r"^\| `(\w+)` \|", line)
        if match:
            keys.append(match.group(1))
        elif keys and not line.startswith("|"):
            break   # the first table ended
    return set(keys)


HEADER = documented_keys("3.1") - {"v", "type"}


def one_step(quiet, nan_gradient: bool) -> keel.Probe:
    """A probe after one step of a small model, with a NaN in one gradient or none."""
    model = small_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    probe = keel.Probe(model, optimizer, **quiet)
    optimizer.zero_grad()
    loss = loss_of(model, 0)
    loss.backward()
    if nan_gradient:
        model[2].weight.grad[1, 3] = float("nan")
    probe.step(loss)
    return probe


def test_a_step_dict_has_the_wire_names_and_the_two_old_aliases(quiet):
    probe = one_step(quiet, nan_gradient=False)
    record = probe.last_record
    assert set(record) == HEADER | documented_keys("3.3") | {"frozen_layers", "unused_layers"}
    assert record["frozen"] == record["frozen_layers"] == []
    assert record["scaler"] is None and record["cause"] == ""
    assert record["layer_count"] == len(probe.layer_names)


def test_an_event_dict_has_the_wire_names(quiet):
    probe = one_step(quiet, nan_gradient=True)
    events = probe.last_events
    assert events, "a NaN gradient raises first_nonfinite and skip"
    for event in events:
        assert set(event) == HEADER | documented_keys("3.4"), event["kind"]
    first = next(e for e in events if e["kind"] == "first_nonfinite")
    assert first["cause"]["kind"] in ("backward", "batch", "forward")
    assert next(e for e in events if e["kind"] == "skip")["cause"] is None
