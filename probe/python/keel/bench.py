"""keel-bench-py: what the Python front costs a training loop, beside what the usual NaN
checks cost (issue 31's targets).

Four loops train keel-demo's model (keel/_demo_model.py) on the same batches, their steps
interleaved round by round so that the machine's drift touches them alike; each prints its
median step time and its cost over the plain loop, measured in this one run:
  plain    zero_grad, forward, backward, optimizer.step()
  keel     the same with keel.Probe (its defaults: publishing, recording, the skip policy)
  hooks    the same as plain, with the usual Python NaN check: a register_hook per
           parameter that tests isnan().any() (a host sync per parameter on a GPU)
  anomaly  the same as plain under torch.autograd.detect_anomaly()
On a CUDA device it also measures keel against AdamW(fused=True) and counts host syncs
(torch.cuda.set_sync_debug_mode). It ends with the lines a user adds to a loop, counted from
the plain and keel loops' own source.
"""

from __future__ import annotations

import argparse
import difflib
import inspect
import statistics
import tempfile
import time
import warnings
from typing import Callable, Dict, List, Optional

import torch

import keel

from . import _probe
from ._demo_model import CharTransformer

VOCAB = 96


def batches(count: int, batch: int, context: int, device: torch.device, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    data = []
    for _ in range(count):
        x = torch.randint(0, VOCAB, (batch, context), generator=g)
        data.append((x.to(device), torch.roll(x, -1, 1).to(device)))
    return data


def model_and_optimizer(device: torch.device, fused: bool):
    torch.manual_seed(0)
    model = CharTransformer(VOCAB).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, **({"fused": True} if fused else {}))
    return model, optimizer


def loss_fn(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))


def plain_loop_step(model, optimizer, x, y):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()


def keel_loop_step(model, optimizer, probe, x, y):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    probe.step(loss)


def nan_hooks(model: torch.nn.Module) -> List[torch.Tensor]:
    """The check the seed's guides write: one hook per parameter, isnan().any() in each."""
    found: List[torch.Tensor] = []

    def check(grad: torch.Tensor) -> None:
        if torch.isnan(grad).any():
            found.append(grad)

    for p in model.parameters():
        p.register_hook(check)
    return found


class Timing:
    """A copy of one step's ProbeTiming (the probe's own object is overwritten each step)."""

    def __init__(self, t) -> None:
        for name in ("probe_us", "reduce_us", "begin_us", "layout_us", "grads_us", "backward_us", "update_us",
                     "record_us", "end_us"):
            setattr(self, name, getattr(t, name))


class Loop:
    def __init__(self, name: str, step: Callable[[torch.Tensor, torch.Tensor], None]) -> None:
        self.name, self.step, self.ms = name, step, []


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(loops: List[Loop], data, rounds: int, warmup: int, device: torch.device) -> None:
    for r in range(warmup + rounds):
        x, y = data[r % len(data)]
        # Each round takes the loops in another order: none always runs after the same one.
        order = loops[r % len(loops):] + loops[:r % len(loops)]
        for loop in order:
            synchronize(device)
            start = time.perf_counter()
            loop.step(x, y)
            synchronize(device)
            if r >= warmup:
                loop.ms.append((time.perf_counter() - start) * 1e3)


def lines_added() -> int:
    """Lines the keel loop adds or changes against the plain one, plus its import and Probe."""
    def body(f):
        return [line.strip() for line in inspect.getsource(f).splitlines()[1:]]

    changed = sum(1 for d in difflib.ndiff(body(plain_loop_step), body(keel_loop_step)) if d.startswith("+ "))
    return changed + 2   # `import keel` and `probe = keel.Probe(model, optimizer)`


def report(loops: List[Loop], baseline: Loop) -> None:
    base = statistics.median(baseline.ms)
    print(f"  {'loop':10s} {'median ms':>10s} {'mean ms':>10s} {'vs ' + baseline.name:>12s}")
    for loop in loops:
        median = statistics.median(loop.ms)
        print(f"  {loop.name:10s} {median:10.3f} {statistics.fmean(loop.ms):10.3f} {100 * (median / base - 1):+11.2f}%")


def cpu_run(args, record_dir: str) -> None:
    device = torch.device("cpu")
    data = batches(16, args.batch, 64, device)
    plain_model, plain_opt = model_and_optimizer(device, fused=False)
    keel_model, keel_opt = model_and_optimizer(device, fused=False)
    hook_model, hook_opt = model_and_optimizer(device, fused=False)
    anomaly_model, anomaly_opt = model_and_optimizer(device, fused=False)
    probe = keel.Probe(keel_model, keel_opt, endpoint="tcp://127.0.0.1:*", record_dir=record_dir,
                       allow_unauthenticated_local=True)
    found = nan_hooks(hook_model)

    def anomaly_step(x, y):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.autograd.detect_anomaly():
                plain_loop_step(anomaly_model, anomaly_opt, x, y)

    timings = []

    def keel_step(x, y):
        keel_loop_step(keel_model, keel_opt, probe, x, y)
        timings.append(Timing(probe.last_timing))

    plain = Loop("plain", lambda x, y: plain_loop_step(plain_model, plain_opt, x, y))
    loops = [plain, Loop("keel", keel_step),
             Loop("hooks", lambda x, y: plain_loop_step(hook_model, hook_opt, x, y)),
             Loop("anomaly", anomaly_step)]
    measure(loops, data, args.rounds, args.warmup, device)
    print(f"CPU, keel-demo's model ({sum(p.numel() for p in plain_model.parameters()):,} parameters, "
          f"{len(probe.layer_names)} tensors), AdamW, batch {args.batch}, {torch.get_num_threads()} thread(s), "
          f"{args.rounds} rounds:")
    report(loops, plain)
    keel_median = statistics.median(loops[1].ms)
    own = statistics.median(t.probe_us for t in timings)
    print(f"  keel's own time on the training thread: {own:.0f} us a step, median "
          f"({100 * own / 1e3 / keel_median:.2f}% of its step); target for keel vs plain: <= 2%")
    stages = ("begin", "layout", "grads", "update", "record", "end")
    print("  of which, median us: reductions {:.0f}; by stage: {}".format(
        statistics.median(t.reduce_us for t in timings),
        ", ".join(f"{s} {statistics.median(getattr(t, s + '_us') for t in timings):.0f}" for s in stages)))
    print(f"  of the grads stage, inside backward: {statistics.median(t.backward_us for t in timings):.0f} us")
    assert not found, "the hooks found a NaN in a clean run"


def gpu_run(args, record_dir: str) -> None:
    if not torch.cuda.is_available():
        print("GPU: not measured (no CUDA device here); target: keel vs AdamW(fused=True) <= 1.5%, 0 host syncs")
        return
    device = torch.device("cuda")
    data = batches(16, args.batch, 64, device)
    plain_model, plain_opt = model_and_optimizer(device, fused=True)
    keel_model, keel_opt = model_and_optimizer(device, fused=True)
    grads_model, grads_opt = model_and_optimizer(device, fused=True)
    probe = keel.Probe(keel_model, keel_opt, endpoint="tcp://127.0.0.1:*", record_dir=record_dir,
                       allow_unauthenticated_local=True)
    # The gradient metrics only (no param_norm, no update_ratio): what the rest costs.
    grads_only = [int(name in _probe.gradient_metric_names) for name in _probe.layer_metric_names]
    grads_probe = keel.Probe(grads_model, grads_opt, endpoint="tcp://127.0.0.1:*", record_dir=record_dir,
                             allow_unauthenticated_local=True, cadence=grads_only)
    plain = Loop("fused", lambda x, y: plain_loop_step(plain_model, plain_opt, x, y))
    ours = Loop("keel", lambda x, y: keel_loop_step(keel_model, keel_opt, probe, x, y))
    grads = Loop("keel grads", lambda x, y: keel_loop_step(grads_model, grads_opt, grads_probe, x, y))
    measure([plain, ours, grads], data, args.rounds, args.warmup, device)
    print(f"GPU ({torch.cuda.get_device_name(device)}), AdamW(fused=True), {args.rounds} rounds "
          "(keel grads: gradient metrics only):")
    report([plain, ours, grads], plain)
    syncs = {name: count_syncs(step, steps=20) for name, step in (
        ("fused", lambda: plain_loop_step(plain_model, plain_opt, *data[0])),
        ("keel", lambda: keel_loop_step(keel_model, keel_opt, probe, *data[0])),
        ("keel grads", lambda: keel_loop_step(grads_model, grads_opt, grads_probe, *data[0])))}
    print("  host syncs in 20 steps: " + ", ".join(f"{name} {count}" for name, count in syncs.items()) +
          " (target for keel: 0)")


def count_syncs(step: Callable[[], None], steps: int) -> int:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for _ in range(steps):
                step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum(1 for w in caught if "synchroniz" in str(w.message))


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="keel-bench-py", description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=100, help="measured rounds (one step of each loop)")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--threads", type=int, default=1, help="intra-op threads (0: torch's default)")
    p.add_argument("--quick", action="store_true", help="20 rounds, 3 of warm-up")
    p.add_argument("--only", choices=("cpu", "gpu"), help="measure on one device only (gpu: the fused AdamW row)")
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.warmup = 20, 3
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="keel-bench-py-") as record_dir:
        if args.only != "gpu":
            cpu_run(args, record_dir)
        if args.only != "cpu":
            gpu_run(args, record_dir)
    print(f"lines a user adds to an existing loop: {lines_added()} (target <= 3)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
