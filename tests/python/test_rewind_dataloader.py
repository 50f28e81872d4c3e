"""docs/rewind.md, "The data is yours": the two DataLoader loops it shows, read from the page
and run as written, with a tiny model whose data holds a bad span (batches 100..109, targets
100x off) that makes the rewind policy rewind. After the rewind the loop's step is the
snapshot's, and the loader goes on past the rewound span: no batch is seen twice and none is
left out. Replaying the span would meet the bad batches again and rewind again."""

from __future__ import annotations

import pathlib
import re
from typing import Dict, List

import pytest
import torch

import keel

PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "rewind.md"
BATCH_SIZE = 4
BATCHES = 200
BAD = range(100, 110)   # ten high losses in a row: the policy's divergence


def examples() -> List[str]:
    section = PAGE.read_text().split("## The data is yours", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


class Data(torch.utils.data.Dataset):
    """y = sum(x), 100x off in the bad batches; notes which items were loaded, in order."""

    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(BATCHES * BATCH_SIZE, 8, generator=g)
        self.y = self.x.sum(1, keepdim=True)
        for b in BAD:
            self.y[b * BATCH_SIZE:(b + 1) * BATCH_SIZE] *= 100
        self.loaded: List[int] = []

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        self.loaded.append(i)
        return self.x[i], self.y[i]

    def batches_loaded(self) -> List[int]:
        items = self.loaded
        assert len(items) % BATCH_SIZE == 0
        return [items[k] // BATCH_SIZE for k in range(0, len(items), BATCH_SIZE)]


@pytest.fixture
def run_example(monkeypatch, tmp_path):
    """Runs one of the page's examples with the names it expects from the trainer's own code;
    returns (the batches loaded, the step each was used at, the probe's rewind events)."""

    def run(code: str):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
        dataset = Data()
        steps_used: List[int] = []
        events: List[Dict] = []
        attach = keel.Probe

        def quiet_probe(*args, **options):   # no port, no recording; its events kept
            probe = attach(*args, endpoint="", record_dir="", dump_dir=str(tmp_path / "dumps"), **options)
            step = probe.step

            def step_and_note(*a, **k):
                outcome = step(*a, **k)
                events.extend(e for e in probe.last_events if e["kind"].startswith("rewind"))
                return outcome

            probe.step = step_and_note
            return probe

        def lr_at(step: int) -> float:
            steps_used.append(step)
            return 1e-2

        monkeypatch.setattr(keel, "Probe", quiet_probe)
        names = dict(model=model, optimizer=torch.optim.AdamW(model.parameters(), lr=1e-2),
                     loss_fn=torch.nn.functional.mse_loss, lr_at=lr_at, dataset=dataset, batch_size=BATCH_SIZE,
                     loader=torch.utils.data.DataLoader(dataset, batch_size=BATCH_SIZE), steps=BATCHES)
        exec(compile(code, str(PAGE), "exec"), names)
        return dataset.batches_loaded(), steps_used, events

    return run


def test_the_page_shows_both_loops():
    assert len(examples()) == 2


@pytest.mark.parametrize("which", [0, 1], ids=["loader_goes_on", "loader_positioned_by_step"])
def test_after_a_rewind_the_step_goes_back_and_the_rewound_span_is_not_replayed(run_example, which):
    loaded, steps_used, events = run_example(examples()[which])
    rewinds = [e for e in events if e["kind"] == "rewind"]
    assert [e["kind"] for e in events] == ["rewind"], events
    # The tenth high loss (step 109) completes the divergence; it is rewound at step 110 to the
    # newest snapshot before its first step (100): step 50's.
    assert "rewound from step 110 to step 50" in rewinds[0]["detail"], rewinds[0]["detail"]
    assert loaded == list(range(BATCHES)), "every batch once, in order: the span 50..110 not replayed"
    assert steps_used == list(range(111)) + list(range(50, 50 + BATCHES - 111)), \
        "the step (and the schedule) goes on from the snapshot's"
