"""torchrun --nproc-per-node 2 with gloo on the CPU: each rank's probe on its own port, and a
NaN in one rank's batch skipped by both, so the replicas stay equal; under FSDP1 (flat and
original parameters) and FSDP2 (fully_shard, DTensor parameters) too; and a rewind one rank's
policy asks for taken by both."""

from __future__ import annotations

import importlib
import json
import math
import os
import shutil
import subprocess
import sys

import pytest
import torch

import keel
from conftest import batch, small_model
from test_demo import free_port_pair, free_ports

HERE = os.path.dirname(os.path.abspath(__file__))


def run_two_ranks(trainer: str, out, env_extra=None) -> None:
    # A rank that aborts prints where each of its Python threads was (faulthandler).
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore", PYTHONFAULTHANDLER="1", **(env_extra or {}))
    run = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
         "--master-port", str(free_port_pair()), os.path.join(HERE, trainer), str(out)],
        capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stdout + run.stderr


def test_two_ranks_skip_the_same_step_and_stay_equal(tmp_path):
    base = free_ports(4)   # two ranks: telemetry and commands each
    run_two_ranks("two_ranks_trainer.py", tmp_path, {"KEEL_PORT": str(base)})
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1)]
    for r, result in enumerate(ranks):
        skipped = [(step, reason) for step, applied, reason in result["outcomes"] if not applied]
        assert skipped == [(3, "nonfinite")], f"rank {r}: {result['outcomes']}"
        assert result["endpoint"] == f"tcp://127.0.0.1:{base + 2 * r}", "the port derived from the rank"
        assert not result["sharded"], "DDP's ranks measure the same whole gradients: not sharded"
    for name, weight in ranks[0]["weights"].items():
        assert torch.isfinite(weight).all(), name
        assert torch.equal(weight, ranks[1]["weights"][name]), f"the replicas drifted apart at {name}"


def test_two_ranks_rewind_together_when_one_ranks_loss_diverges_and_stay_equal(tmp_path):
    run_two_ranks("rewind_ranks_trainer.py", tmp_path)
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1)]
    assert ranks[1]["told"], f"rank 1's policy did not rewind: {ranks[1]['outcomes']}"
    (from_step, to_step), = ranks[1]["told"]
    assert to_step == 20, "the newest snapshot before the divergence's onset (step 24)"
    for r, result in enumerate(ranks):
        assert result["agrees"], "snapshots kept with several ranks: the agreement is on by default"
        assert result["told"] == [(from_step, to_step)], f"rank {r}: {result['told']}"
        assert result["outcomes"][from_step] == (from_step, False, "rewind"), f"rank {r}: {result['outcomes']}"
    assert ranks[0]["outcomes"] == ranks[1]["outcomes"]
    for name, weight in ranks[0]["weights"].items():
        assert torch.equal(weight, ranks[1]["weights"][name]), f"the replicas drifted apart at {name}"

    # The control: without the agreement rank 0 never hears of rank 1's rewind, and they part.
    alone = tmp_path / "alone"
    alone.mkdir()
    run_two_ranks("rewind_ranks_trainer.py", alone, {"KEEL_TEST_AGREE": "0"})
    apart = [torch.load(alone / f"rank{r}.pt") for r in (0, 1)]
    assert apart[0]["told"] == [] and apart[1]["told"], [a["told"] for a in apart]
    assert any(not torch.equal(w, apart[1]["weights"][n]) for n, w in apart[0]["weights"].items())


@pytest.mark.parametrize("wrap", ["flat", "orig", "fully_shard"], ids=["flat_params", "use_orig_params", "fully_shard"])
def test_fsdp_trains_as_without_keel_and_both_ranks_skip_and_dump_the_poisoned_steps(tmp_path, wrap):
    """keel holds no gradient accumulator of FSDP's flat parameter (it crashed backward when it
    did): each rank measures its shard, a layer per original parameter, named as the model's
    state_dict() names it. Both skip the step whose NaN reached both shards, and,
    agreeing on each step's verdict, the step whose NaN only rank 1's shard held (with
    AGREE=0 rank 0 applies it, and its shard leaves the reference's). Both dump both steps:
    rank 1 dumping alone hung the job in FSDP's state_dict(). With use_orig_params=True the layers
    are the original parameters, each a view of the rank's part of the shard (empty where the
    rank holds none of it). Under fully_shard every parameter is a DTensor, and keel measures
    its local part (refused at attach before): a layer per parameter, each rank's dump its
    shards, as the model's state_dict() gives them."""
    run_two_ranks("fsdp_trainer.py", tmp_path, {"WRAP": wrap})
    names = [f"{i}.{kind}" for i in (0, 2) for kind in ("weight", "bias")]
    layers = names   # as the model's state_dict() names them, without FSDP1's wrapper module
    expected = {0: [(2, "other_rank"), (4, "nonfinite")], 1: [(2, "nonfinite"), (4, "nonfinite")]}
    for r in (0, 1):
        result = torch.load(tmp_path / f"rank{r}.pt")
        assert result["layers"] == layers
        assert result["agrees"], "a sharded model's ranks agree by default"
        assert result["sharded"], "a sharded model's run says so to the dashboard"
        skipped = [(step, reason) for step, applied, reason in result["outcomes"] if not applied]
        assert skipped == expected[r], f"rank {r}: {result['outcomes']}"
        assert len(result["skip_events"]) == 2, result["skip_events"]
        if r == 0:
            assert "rank 1 skipped it: nonfinite" in result["skip_events"][0], result["skip_events"][0]
        for shard, reference in zip(result["shards"], result["reference_shards"]):
            assert torch.isfinite(shard).all()
            assert torch.equal(shard, reference), f"rank {r}: keel's run left the reference's"
    ranks_hold_the_whole_gradient_of_each_layer(tmp_path)
    scaled = [torch.load(tmp_path / f"rank{r}.pt")["scaled"] for r in (0, 1)]
    assert scaled[0] == scaled[1], f"the ranks' loss scales or skips parted: {scaled}"
    assert scaled[0][2] == (512.0, False), f"rank 1's overflow backs off rank 0's scale too: {scaled[0]}"
    dumps = sorted(p.name for p in (tmp_path / "dumps").iterdir())
    assert dumps == [f"step-{s}-nonfinite-rank{r}" for s in (2, 4) for r in (0, 1)], dumps
    if wrap == "fully_shard":
        importlib.import_module("torch.distributed.tensor")   # torch.load reads DTensors only with it
    for name in dumps:
        weights = torch.load(tmp_path / "dumps" / name / "model.pt")
        assert any(w.shape == (16, 8) for w in weights.values()), f"{name}: not the whole model"
        if wrap == "fully_shard":
            for key, w in weights.items():
                assert w._local_tensor.shape[0] == w.shape[0] // 2, f"{name}: {key} is not the rank's half"
    if wrap == "fully_shard":
        gathered_dumps_are_the_whole_model_and_optimizer(tmp_path)
    else:
        from keel.gather_dump import GatherError, gather_dump

        # FSDP1's optimizer state is each rank's own (flat shards in plain tensors, or, with
        # original parameters, entries only for what the rank holds): refused in words.
        with pytest.raises(GatherError, match="FSDP1's"):
            gather_dump([tmp_path / "dumps" / "step-4-nonfinite-rank0"])


def ranks_hold_the_whole_gradient_of_each_layer(tmp_path) -> None:
    """Each layer's grad and weight norms at step 0, squared and added over the ranks, are the
    squared norms of that parameter's whole gradient and weights (the ranks' parts of a layer
    are disjoint and cover it): those of an unsharded copy of the model, its gradient the mean
    of the ranks' batches'."""
    import fsdp_trainer

    plain = fsdp_trainer.small_model()
    for r in (0, 1):
        data = torch.Generator().manual_seed(100 + r)   # rank r's first batch, as the trainer draws it
        x, y = torch.randn(16, 8, generator=data), torch.randn(16, 4, generator=data)
        (torch.nn.functional.mse_loss(plain(x), y) / 2).backward()
    norms = [torch.load(tmp_path / f"rank{r}.pt")["first_norms"] for r in (0, 1)]
    for layer, p in enumerate(plain.parameters()):
        for metric, whole in (("grad_norm", p.grad), ("param_norm", p.detach())):
            combined = math.sqrt(norms[0][metric][layer] ** 2 + norms[1][metric][layer] ** 2)
            assert combined == pytest.approx(whole.norm().item(), rel=1e-4), f"layer {layer} {metric}: {norms}"


def gathered_dumps_are_the_whole_model_and_optimizer(tmp_path) -> None:
    """python -m keel.gather_dump on one rank's dump of POISON_STEP: both ranks' shards put
    together are the model and first moments torch's full_tensor() gave at that step, in plain
    tensors that an unsharded copy of the model and its AdamW load. Without rank 1's dump it
    names the missing rank and writes nothing."""
    import fsdp_trainer
    from keel.gather_dump import GatherError, gather_dump, main

    whole = torch.load(tmp_path / "rank0.pt")["whole_at_poison"]
    dumps = tmp_path / "dumps"
    assert main([str(dumps / "step-4-nonfinite-rank1")]) == 0
    out = dumps / "step-4-nonfinite-gathered"
    weights = torch.load(out / "model.pt")
    assert list(weights) == list(whole["model"])
    for key, w in weights.items():
        assert type(w) is torch.Tensor and torch.equal(w, whole["model"][key]), key
    plain = fsdp_trainer.small_model()   # the model the job sharded, unsharded
    plain.load_state_dict(weights)
    optimizer = torch.optim.AdamW(plain.parameters(), lr=1e-2)
    optimizer.load_state_dict(torch.load(out / "optimizer.pt"))
    for p, exp_avg in zip(plain.parameters(), whole["exp_avg"]):
        assert torch.equal(optimizer.state[p]["exp_avg"], exp_avg)
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["step"], manifest["ranks"]) == (4, [0, 1]), manifest

    alone = tmp_path / "alone"
    shutil.copytree(dumps / "step-4-nonfinite-rank0", alone / "step-4-nonfinite-rank0")
    with pytest.raises(GatherError, match=r"ranks \[1\] missing"):
        gather_dump([alone / "step-4-nonfinite-rank0"])
    assert not (alone / "step-4-nonfinite-gathered").exists()


def test_a_dtensor_made_after_attach_is_named_in_each_steps_probe_error(quiet):
    """fully_shard called after keel.Probe: keel made no leaf over the DTensors' local parts at
    attach, and a DTensor has no data of its own. Each step's probe_error says so and how to
    attach instead (the reductions had said "data is not allocated yet"), and the step is
    left to the optimizer, as without keel. One rank, in this process: fully_shard needs a process group,
    not a second rank."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        model = small_model()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        probe = keel.Probe(model, optimizer, **quiet)
        fully_shard(model, mesh=init_device_mesh("cpu", (1,)))
        x, y = batch(1)
        for _ in range(2):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            outcome = probe.step(loss)
            errors = [e["detail"] for e in probe.last_events if e["kind"] == "probe_error"]
            assert len(errors) == 1, probe.last_events
            assert "a parameter is a DTensor, whose data keel cannot read" in errors[0], errors[0]
            assert "attach keel after fully_shard or parallelize_module" in errors[0], errors[0]
            assert outcome.applied, "a failure inside the probe leaves the step to the optimizer"
    finally:
        dist.destroy_process_group()


def test_a_run_says_sharded_only_where_every_element_is_on_one_rank(quiet):
    """The `sharded` default, which makes the dashboard combine the ranks' grad norms into the
    job's: FSDP1's NO_SHARD holds every element on every rank (two replicas combined read
    sqrt(2) times the norm), and so does a DTensor replicated over its mesh; fully_shard's
    Shard(0) does not. One rank, in this process, as above."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import ShardingStrategy, fully_shard
    from torch.distributed.tensor import Replicate, distribute_module, distribute_tensor

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        mesh = init_device_mesh("cpu", (1,))
        replicas = FSDP(small_model(), device_id=torch.device("cpu"), sharding_strategy=ShardingStrategy.NO_SHARD)
        sharded = small_model()
        fully_shard(sharded, mesh=mesh)
        replicated = distribute_module(small_model(), mesh, lambda name, module, mesh: [
            module.register_parameter(n, torch.nn.Parameter(distribute_tensor(p.detach(), mesh, [Replicate()])))
            for n, p in list(module.named_parameters(recurse=False))])
        for model, expected in ((replicas, False), (sharded, True), (replicated, False)):
            probe = keel.Probe(model, torch.optim.SGD(model.parameters(), lr=0.1), **quiet)
            assert probe.sharded is expected, model
    finally:
        dist.destroy_process_group()


def test_the_demo_under_fully_shard_skips_one_ranks_nan_on_both_and_publishes_on_each_ranks_port(tmp_path):
    """torchrun -m keel.demo --fully-shard, as docs/python.md shows it: the NaN written into rank 1's
    shard alone is skipped by both ranks (rank 0 for the other rank), each rank on its own port,
    each dumping its shards."""
    base = free_ports(4)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore", KEEL_PORT=str(base))
    run = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
         "--master-port", str(free_port_pair()), "-m", "keel.demo", "--fully-shard", "--steps", "8", "--threads", "1",
         "--log-every", "0", "--record-dir", "", "--dump-dir", str(tmp_path / "dumps"),
         "--inject-nan", "5:blocks.1.mlp.fc.weight"],
        capture_output=True, text=True, timeout=300, env=env)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    for rank in (0, 1):
        said = [line for line in out.splitlines() if line.startswith(f"keel.demo: rank {rank}: ")]
        assert said and said[0].endswith(f"in 42 tensors; publishing on tcp://127.0.0.1:{base + 2 * rank}"), out
    skipped = sorted(line.split(": ", 1)[0] + ": " + line.rsplit("  ", 1)[-1]
                     for line in out.splitlines() if "skipped" in line)
    assert skipped == ["rank 0: skipped (other_rank)", "rank 1: skipped (nonfinite)"], out
    assert "rank 0: step      5" in out and "rank 1: step      5" in out, out
    dumps = sorted(p.name for p in (tmp_path / "dumps").iterdir())
    assert dumps == ["step-5-nonfinite-rank0", "step-5-nonfinite-rank1"], dumps
