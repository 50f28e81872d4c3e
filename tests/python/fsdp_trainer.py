"""One rank of test_distributed.py's FSDP job (run by torchrun), over gloo on the CPU, with keel,
beside a reference trained the same way without it. WRAP picks the sharding:
- "flat" (the default): FullyShardedDataParallel (FSDP1), one flat parameter per unit, whose
  data FSDP swaps between a shard (between steps) and the whole parameter (forward and
  backward): keel must hold no gradient accumulator of it, or autograd refuses the whole
  gradient, and measures each original parameter's part of the shard;
- "orig": FSDP1 with use_orig_params=True, each original parameter a view of this rank's part
  of the shard;
- "fully_shard": FSDP2, each Linear and the root; every parameter a DTensor, whose local part
  keel measures.

At SHARD_POISON_STEP a NaN lands in rank 1's shard alone (written into it after backward,
where a reduce-scatter would have put it): rank 1 sees it, and rank 0 skips that step too only
because the ranks agree on each step's verdict; both dump it, since FSDP1's state_dict() is a
collective that one rank alone would wait in forever. Rank 1's batch at POISON_STEP holds a
NaN, which reaches every element of both shards, so both probes skip and dump that step. The
reference skips both steps by hand. Each rank writes its outcomes, its skip events and both
models' shards (their local parts) and its layers' grad and weight norms at step 0 to OUT/rank<R>.pt (under fully_shard also the whole model and
first moments at POISON_STEP, as its dumps hold them), and its dumps to OUT/dumps; and, from a
third model trained with a GradScaler, its scale after each step. With AGREE=0 the probes
decide alone and take no automatic dump (the test's control).
"""
from __future__ import annotations

import math
import os
import sys
from typing import List, Tuple

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

import keel

SHARD_POISON_STEP = 2
POISON_STEP = 4
STEPS = 6


def small_model() -> torch.nn.Module:
    torch.manual_seed(0)   # the same initial weights on both ranks and for both models
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))


def sharded_model(wrap: str) -> torch.nn.Module:
    model = small_model()
    if wrap != "fully_shard":
        return FSDP(model, device_id=torch.device("cpu"), use_orig_params=wrap == "orig")
    from torch.distributed.fsdp import fully_shard

    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    return model


def local(tensor: torch.Tensor) -> torch.Tensor:
    """This rank's part of a parameter or gradient: a DTensor's local tensor, else the tensor."""
    return tensor._local_tensor if hasattr(tensor, "_local_tensor") else tensor


def poison_shard(model: torch.nn.Module, value: float) -> None:
    """Writes `value` into the last element of this rank's part of the last parameter's
    gradient: on rank 1, its shard's. In a flat parameter's, the last element of the last
    original parameter the shard holds (the shard's own last may be FSDP's padding, part of
    no parameter)."""
    with torch.no_grad():
        last = [p for p in model.parameters() if p.grad is not None and local(p.grad).numel() > 0][-1]
        flat = local(last.grad).view(-1)
        held = [i for i in getattr(last, "_shard_param_infos", ()) if i.in_shard]
        flat[held[-1].offset_in_shard + held[-1].numel_in_shard - 1 if held else -1] = value


def scaled_run(rank: int, wrap: str, agree: bool) -> List[Tuple[float, bool]]:
    """With a torch.amp.GradScaler: an Inf in rank 1's shard at SHARD_POISON_STEP is an
    overflow every rank's scale backs off from. Each step's scale after it, and whether it
    was applied."""
    model = sharded_model(wrap)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    probe = keel.Probe(model, optimizer, endpoint="", record_dir="", dump_on_nonfinite=False,
                       agree_skips=None if agree else False)
    data = torch.Generator().manual_seed(200 + rank)
    scales = []
    for step in range(STEPS):
        x, y = torch.randn(16, 8, generator=data), torch.randn(16, 4, generator=data)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        if rank == 1 and step == SHARD_POISON_STEP:
            poison_shard(model, math.inf)
        outcome = probe.step(loss, scaler=scaler)
        scales.append((scaler.get_scale(), outcome.applied))
    return scales


def main(out: str) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    wrap = os.environ.get("WRAP", "flat")
    model = sharded_model(wrap)
    reference = sharded_model(wrap)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    reference_optimizer = torch.optim.AdamW(reference.parameters(), lr=1e-2)
    agree = os.environ.get("AGREE", "1") == "1"
    probe = keel.Probe(model, optimizer, endpoint="", record_dir="", dump_dir=f"{out}/dumps", dump_nonfinite_every=1,
                       dump_on_nonfinite=agree, agree_skips=None if agree else False)
    outcomes, skip_events, whole_at_poison, first_norms = [], [], {}, {}
    data = torch.Generator().manual_seed(100 + rank)   # each rank its own batches
    for step in range(STEPS):
        x, y = torch.randn(16, 8, generator=data), torch.randn(16, 4, generator=data)
        if rank == 1 and step == POISON_STEP:
            x[0, 0] = float("nan")
        for m, opt in ((model, optimizer), (reference, reference_optimizer)):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(m(x), y)
            loss.backward()
            if m is model:
                if rank == 1 and step == SHARD_POISON_STEP:
                    poison_shard(m, math.nan)
                outcome = probe.step(loss)
                outcomes.append((outcome.step, outcome.applied, outcome.skip_reason))
                if step == 0:
                    first_norms = {k: probe.last_record["layers"][k] for k in ("grad_norm", "param_norm")}
                skip_events += [e["detail"] for e in probe.last_events if e["kind"] == "skip"]
                if wrap == "fully_shard" and step == POISON_STEP:
                    # What the step's dump holds (the step was skipped), whole: full_tensor() is
                    # a collective, which both ranks reach here.
                    whole_at_poison = {
                        "model": {k: v.full_tensor() for k, v in model.state_dict().items()},
                        "exp_avg": [optimizer.state[p]["exp_avg"].full_tensor() for p in model.parameters()]}
            elif step not in (POISON_STEP, SHARD_POISON_STEP):
                opt.step()
    torch.save({"rank": rank, "outcomes": outcomes, "skip_events": skip_events, "agrees": probe.agrees_skips,
                "sharded": probe.sharded,
                "layers": probe.layer_names, "first_norms": first_norms,
                "shards": [local(p).detach().clone() for p in model.parameters()],
                "reference_shards": [local(p).detach().clone() for p in reference.parameters()],
                "whole_at_poison": whole_at_poison,
                "scaled": scaled_run(rank, wrap, agree)}, f"{out}/rank{rank}.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])   # its probes are gone when it returns: keel's own teardown has run
    # Then leave without the interpreter's: under load, rank 0 aborted in it now and then
    # ("terminate called without an active exception", faulthandler: no Python frame, two in
    # about sixty runs of these tests three at a time on two cores), after its results and
    # process group were done.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
