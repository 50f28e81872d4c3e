"""python -m keel.demo: a small char-level transformer trained with keel attached.

The Python twin of keel-demo: the same model and layer names, the same fault flags, so a
Python user can watch keel find and skip a NaN in one command:

    python -m keel.demo --inject-nan 300:blocks.1.mlp.fc.weight &
    keel --connect tcp://127.0.0.1:5557        # the dashboard (build/bin/keel)

and the same model sharded by FSDP2 over two ranks, each on its own port, a NaN in rank 1's
shard alone skipped by both (they agree on each step's verdict), and the job's grad norm
beside each rank's own:

    torchrun --nproc-per-node 2 -m keel.demo --fully-shard --inject-nan 300:blocks.1.mlp.fc.weight &
    keel --connect tcp://127.0.0.1:5557 --connect tcp://127.0.0.1:5559

and a run that one step's learning rate x1000 would ruin (every value finite, nothing to skip)
rewound by keel's policy to a snapshot from before it, finishing as if it had not happened
(docs/rewind.md):

    python -m keel.demo --steps 400 --seed 6 --lr-spike 150:1000 --rewind-every 50 --rewind-on-divergence

and a learning rate that keeps rising after its warmup, a schedule gone wrong, warned long
before it diverges (docs/warnings.md), the warning halving the learning rate:

    python -m keel.demo --steps 700 --drift lr:300 --warning-lr-factor 0.5
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from typing import List, Optional, Tuple

import torch

import keel

from ._demo_model import CharTransformer
from ._local_shards import local_part
from ._probe import ProbeOptions

CAUSES = ("attention", "norm", "fp16", "batch", "lr", "input")
DEFAULT_TEXT = "/usr/share/common-licenses/GPL-3"


def say(line: str) -> None:
    """Prints ``line`` in one write: the ranks of a torchrun job share one terminal (or pipe),
    and print's text and newline, written apart when unbuffered, let another rank's line in
    between."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def step_and(text: str, what: str, convert):
    """'STEP:X' -> (STEP, convert(X)); argparse's error otherwise."""
    step, sep, rest = text.partition(":")
    try:
        if not sep or int(step) < 0:
            raise ValueError
        return int(step), convert(rest)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected STEP:{what}, got {text!r}") from None


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m keel.demo", description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=2000, help="training steps (0: until interrupted)")
    p.add_argument("--endpoint", default=None,
                   help='telemetry endpoint ("": none; default tcp://127.0.0.1:5557, under --fully-shard rank R\'s '
                        '5557 + 2R, $KEEL_PORT moving 5557)')
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--scaler", action="store_true", help="dynamic loss scaling (torch.amp.GradScaler)")
    p.add_argument("--data", default=DEFAULT_TEXT, help="training text file")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--width", type=int, default=96)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--lr", type=float, default=3e-3, help="peak learning rate")
    p.add_argument("--warmup", type=int, default=100, help="linear warmup steps")
    p.add_argument("--log-every", type=int, default=50, help="print the loss every N steps (0: never)")
    p.add_argument("--threads", type=int, default=0, help="intra-op threads (0: torch's default)")
    p.add_argument("--inject-nan", type=lambda t: step_and(t, "LAYER", str), action="append", default=[],
                   metavar="STEP:LAYER", help="a NaN in that parameter's gradient at that step")
    p.add_argument("--inject-spike", type=lambda t: step_and(t, "FACTOR", float), action="append", default=[],
                   metavar="STEP:FACTOR", help="every gradient multiplied by FACTOR at that step")
    p.add_argument("--lr-spike", type=lambda t: step_and(t, "FACTOR", float), action="append", default=[],
                   metavar="STEP:FACTOR", help="learning rate multiplied by FACTOR at that step")
    p.add_argument("--cause", type=lambda t: cause_of(t), metavar="KIND:STEP",
                   help="a blow-up made through the real math, for keel to find its cause: " + ", ".join(CAUSES))
    p.add_argument("--drift", type=drift_of, metavar="KIND:STEP",
                   help="a slow divergence from STEP on, for keel's early warning (docs/warnings.md): lr (the "
                        "learning rate growing 2%% a step, a schedule gone wrong) or batches (one sequence of "
                        "every batch weighted 5%% more each step, a data pipeline's weights gone wrong)")
    p.add_argument("--drift-rate", type=float, default=0.0,
                   help="the drift's growth a step, e.g. 1.02 (0: the drift's own)")
    p.add_argument("--plain-step", action="store_true",
                   help="probe.step(loss) rather than the closure form, which lets keel run an unsafe step again")
    p.add_argument("--no-skip-nonfinite", action="store_true", help="apply updates even when a gradient is non-finite")
    p.add_argument("--no-dump-nonfinite", action="store_true", help="no dump at the first non-finite gradient")
    p.add_argument("--dump-dir", default="keel-dumps")
    defaults = ProbeOptions()
    p.add_argument("--rewind-every", type=int, default=defaults.rewind_every, metavar="N",
                   help="keep a snapshot of the training state in memory every N steps, for a rewind (0: none)")
    p.add_argument("--rewind-keep", type=int, default=defaults.rewind_keep, metavar="K",
                   help="snapshots kept for a rewind")
    p.add_argument("--rewind-on-divergence", action="store_true",
                   help="rewind to a snapshot from before a divergence (the loss high for many steps, or unsafe "
                        "steps in a row); needs --rewind-every")
    p.add_argument("--rewind-max", type=int, default=defaults.rewind_max, metavar="N",
                   help="rewinds the policy takes before it stops and says so")
    p.add_argument("--rewind-lr-factor", type=float, default=defaults.rewind_lr_factor, metavar="F",
                   help="the policy's second and later rewinds also multiply the learning rate by this (1: no cut)")
    p.add_argument("--warning-lr-factor", type=float, default=defaults.warning_lr_factor, metavar="F",
                   help="an early warning also multiplies the learning rate by this, kept by the schedule "
                        "(1 = no cut)")
    p.add_argument("--watch-attention", action="store_true",
                   help="watch each block's attention logits too (blocks.N.attn.scores), which the early warning reads")
    p.add_argument("--record-dir", default="keel-runs", help='where the run is recorded ("": nowhere)')
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--world-size", type=int, default=1)
    p.add_argument("--fully-shard", action="store_true",
                   help="run as one rank of a torchrun job: every block and the model sharded by FSDP2's "
                        "fully_shard (gloo on the CPU, nccl on cuda), each rank its own batches; --inject-nan "
                        "writes the NaN into the last rank's shard alone")
    p.add_argument("--pace", type=float, default=0.0, help="at most this many steps per second (0: no limit)")
    p.add_argument("--allow-unauthenticated-local", action="store_true",
                   help="take clients without keys on a loopback endpoint (default: only your own key)")
    p.add_argument("--list-layers", action="store_true", help="print the parameter names and shapes, then exit")
    return p.parse_args(argv)


def cause_of(text: str) -> Tuple[str, int]:
    kind, sep, step = text.partition(":")
    if kind not in CAUSES or not sep or not step.isdigit():
        raise argparse.ArgumentTypeError(f"expected KIND:STEP with KIND one of {', '.join(CAUSES)}, got {text!r}")
    return kind, int(step)


DRIFTS = {"lr": 1.02, "batches": 1.05}   # each drift's own growth a step


def drift_of(text: str) -> Tuple[str, int]:
    kind, sep, step = text.partition(":")
    if kind not in DRIFTS or not sep or not step.isdigit():
        raise argparse.ArgumentTypeError(f"expected lr:STEP or batches:STEP, got {text!r}")
    return kind, int(step)


def drift_growth(args: argparse.Namespace, kind: str, step: int) -> float:
    """How much --drift KIND has grown by step ``step`` (1: not begun, or another kind)."""
    if not args.drift or args.drift[0] != kind or step <= args.drift[1]:
        return 1.0
    return (args.drift_rate or DRIFTS[kind]) ** (step - args.drift[1])


def loss_weights(args: argparse.Namespace, step: int, now: bool, device: torch.device) -> torch.Tensor:
    """Each sequence's weight in step ``step``'s loss: 1, but the first sequence's under
    --drift batches, and --cause batch's and input's when met for the first time (``now``)."""
    weights = torch.ones(args.batch, device=device)
    weights[0] = drift_growth(args, "batches", step)
    cause, cause_step = args.cause if args.cause else (None, -1)
    if now and step == cause_step and cause in ("batch", "input"):
        weights[0] = 1e25 if cause == "batch" else float("nan")
    return weights


def read_text(path: str) -> bytes:
    if os.path.exists(path):
        with open(path, "rb") as f:
            return f.read()
    if path != DEFAULT_TEXT:
        sys.exit(f"keel.demo: cannot read {path}")
    # A machine without Debian's license files: this file's own source is text enough.
    with open(__file__, "rb") as f:
        return f.read()


class Batches:
    """Random windows of the text, as byte tokens (vocabulary: the bytes the text uses)."""

    def __init__(self, text: bytes, batch: int, context: int, device: torch.device, seed: int) -> None:
        symbols = sorted(set(text))
        self.vocab = len(symbols)
        lookup = {s: i for i, s in enumerate(symbols)}
        self.tokens = torch.tensor([lookup[b] for b in text], dtype=torch.long)
        self.batch, self.context, self.device = batch, context, device
        self.generator = torch.Generator().manual_seed(seed)

    def next(self) -> Tuple[torch.Tensor, torch.Tensor]:
        starts = torch.randint(0, len(self.tokens) - self.context - 1, (self.batch,), generator=self.generator)
        x = torch.stack([self.tokens[s:s + self.context] for s in starts.tolist()])
        y = torch.stack([self.tokens[s + 1:s + 1 + self.context] for s in starts.tolist()])
        return x.to(self.device), y.to(self.device)


def shard(model: CharTransformer, device: torch.device) -> Tuple[int, int]:
    """--fully-shard: joins the torchrun job and shards each block, then the model, with FSDP2.
    Returns (rank, world_size)."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    if "RANK" not in os.environ:
        sys.exit("keel.demo: --fully-shard runs under torchrun (torchrun --nproc-per-node 2 -m keel.demo ...)")
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return dist.get_rank(), dist.get_world_size()


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    if args.drift_rate and not 1.0 < args.drift_rate < 2.0:
        sys.exit("keel.demo: --drift-rate is a growth a step in (1, 2), e.g. 1.02")
    if args.fully_shard and args.cause:
        sys.exit("keel.demo: --cause writes into whole weights, which --fully-shard's ranks hold only parts of")
    torch.manual_seed(args.seed)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if args.fully_shard and device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    cause, cause_step = args.cause if args.cause else (None, -1)
    text = read_text(args.data)
    model = CharTransformer(len(set(text)), args.context, args.width, args.heads, args.layers,
                            q_norm_eps=0.0 if cause == "norm" else None).to(device)
    if args.list_layers:
        for name, p in model.named_parameters():
            print(name, list(p.shape))
        return 0
    placement = {"rank": args.rank, "world_size": args.world_size,
                 "endpoint": "tcp://127.0.0.1:5557" if args.endpoint is None else args.endpoint}
    rank, world_size = args.rank, args.world_size
    if args.fully_shard:
        # The rank, the world and each rank's port come from the job (keel.Probe's defaults).
        rank, world_size = shard(model, device)
        placement = {} if args.endpoint is None else {"endpoint": args.endpoint}
    data = Batches(text, args.batch, args.context, device, args.seed + (rank if args.fully_shard else 0))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    scaler = torch.amp.GradScaler(args.device) if args.scaler or cause == "fp16" else None
    schedule = Schedule(args)
    rewinds = Rewinds(schedule)
    probe = attach(args, model, optimizer, placement, rewinds)
    who = f"rank {rank}: " if args.fully_shard else ""
    say(f"keel.demo: {who}{sum(p.numel() for p in model.parameters()):,} parameters in "
        f"{len(probe.layer_names)} tensors; publishing on {probe.bound_endpoint or 'nothing'}")
    names = dict(model.named_parameters())
    for _, layer in args.inject_nan:
        if layer not in names:
            sys.exit(f"keel.demo: no parameter {layer} (--list-layers lists them)")

    step = 0
    furthest = -1   # the furthest step taken: a step at or before it is taken again after a rewind
    while args.steps == 0 or step < args.steps:
        started = time.monotonic()
        # A fault of one moment is not met again when a rewind takes the run back over its step;
        # --cause lr (from its step on) is a setting, and stays.
        now = step > furthest
        furthest = max(furthest, step)
        lr = schedule.at(step, now)
        for group in optimizer.param_groups:
            group["lr"] = lr
        x, y = data.next()
        weights = loss_weights(args, step, now, device)
        blown = blow_up(model, cause, now and step == cause_step)

        def closure() -> torch.Tensor:
            optimizer.zero_grad()
            logits = model(x)
            probe.watch("logits", logits)
            per_token = torch.nn.functional.cross_entropy(logits.reshape(-1, data.vocab), y.reshape(-1),
                                                          reduction="none").view(args.batch, -1)
            loss = (per_token.mean(1) * weights).mean()
            scaled = loss
            if scaler is not None:
                scaled = scaler.scale(loss.half() if cause == "fp16" and now and step == cause_step else loss)
            scaled.backward()
            for s, layer in args.inject_nan:
                if now and s == step and (not args.fully_shard or rank == world_size - 1):
                    with torch.no_grad():   # a NaN written into the gradient, as keel-demo does
                        local_part(names[layer].grad).view(-1)[:1].fill_(float("nan"))
            for s, factor in args.inject_spike:
                if now and s == step:
                    for p in model.parameters():
                        if p.grad is not None:
                            p.grad.mul_(factor)
            return loss

        if args.plain_step or scaler is not None:
            loss = closure()
            outcome = probe.step(loss, scaler=scaler)
        else:
            outcome = probe.step(closure=closure)
        restore(blown)
        schedule.keep_cut(optimizer)
        for event in probe.last_events:
            if event["kind"] in ("rewind", "rewind_stopped", "warning"):
                say(f"{who}step {event['step']:6d}  event {event['kind']}: {event['detail']}")
        last = args.steps and step + 1 == args.steps and rewinds.resume_at is None
        if not outcome.applied or last or (args.log_every and step % args.log_every == 0):
            record = probe.last_record
            what = "applied" if outcome.applied else f"skipped ({outcome.skip_reason})"
            say(f"{who}step {step:6d}  loss {record['loss']:.4f}  lr {lr:.2e}  {what}")
        step = rewinds.next_step(step)
        if args.pace > 0:
            time.sleep(max(0.0, 1.0 / args.pace - (time.monotonic() - started)))
    if args.fully_shard:
        torch.distributed.destroy_process_group()
    return 0


def attach(args: argparse.Namespace, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
           placement: dict, rewinds: "Rewinds") -> keel.Probe:
    """The demo's probe, as its flags set it (and watching the attention logits with
    --watch-attention); a setting the probe refuses ends the demo with why."""
    try:
        probe = keel.Probe(model, optimizer, **placement,
                           skip_on_nonfinite=not args.no_skip_nonfinite, dump_on_nonfinite=not args.no_dump_nonfinite,
                           dump_dir=args.dump_dir, record_dir=args.record_dir,
                           allow_unauthenticated_local=args.allow_unauthenticated_local,
                           rewind_every=args.rewind_every, rewind_keep=args.rewind_keep,
                           rewind_on_divergence=args.rewind_on_divergence, rewind_max=args.rewind_max,
                           rewind_lr_factor=args.rewind_lr_factor, on_rewind=rewinds.on_rewind,
                           warning_lr_factor=args.warning_lr_factor)
    except keel.AttachError as e:
        sys.exit(f"keel.demo: {e}")
    if args.watch_attention:
        model.on_attention_scores(probe.watch)
    return probe


class Schedule:
    """The demo's learning rate: a linear warmup to the peak, the fault flags' changes, and the
    cuts keel makes, kept in the peak so that the next steps keep them: a rewind's (told to
    on_rewind) and a warning's (warning_lr_factor), which keep_cut reads back from the
    optimizer after the step, as any schedule that sets the learning rate each step must."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.peak = args.lr
        self.set: Optional[float] = None   # the learning rate given to the optimizer this step

    def at(self, step: int, now: bool) -> float:
        """Step ``step``'s learning rate: the warmup, the --lr-spike of that step when it is met
        for the first time (``now``), --cause lr's 1000x from its step on, and --drift lr."""
        args = self.args
        lr = self.peak * min(1.0, (step + 1) / max(1, args.warmup))
        if now:
            lr *= math.prod(f for s, f in args.lr_spike if s == step)
        cause, cause_step = args.cause if args.cause else (None, -1)
        if cause == "lr" and step >= cause_step:
            lr *= 1000.0
        self.set = lr * drift_growth(args, "lr", step)
        return self.set

    def scale(self, factor: float) -> None:
        """A cut keel made and told (a rewind's): kept from the next step on."""
        self.peak *= factor
        if self.set is not None:
            self.set *= factor

    def keep_cut(self, optimizer: torch.optim.Optimizer) -> None:
        """A cut keel made in the step without telling the schedule (a warning's), read back."""
        now = optimizer.param_groups[0]["lr"]
        if self.set is not None and now != self.set:
            self.scale(float(now) / self.set)


class Rewinds:
    """The demo's side of a rewind (docs/rewind.md, "The data is yours"): the probe's
    ``on_rewind`` tells it where the run goes on from, and the loop takes its next step from
    there, so the learning-rate schedule follows the step. The batches are new draws: the
    rewound span's are not replayed."""

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule
        self.resume_at: Optional[int] = None

    def on_rewind(self, from_step: int, to_step: int, lr_factor: float) -> None:
        """``lr_factor``: the cut the rewind policy applied to the learning rate on a repeated
        divergence (1.0: none). The schedule sets the learning rate every step, so the cut is
        kept in its peak, or the next step would undo it."""
        self.resume_at = to_step
        self.schedule.scale(lr_factor)

    def next_step(self, step: int) -> int:
        """The step after ``step``: the rewound-to one when ``step`` was rewound."""
        resume_at, self.resume_at = self.resume_at, None
        return step + 1 if resume_at is None else resume_at


def blow_up(model: CharTransformer, cause: Optional[str], now: bool):
    """--cause attention or norm: the second block's (or only) attention made to overflow for
    one step, put back after it. Returns what restore() needs."""
    if not now or cause not in ("attention", "norm"):
        return None
    block = model.blocks[0 if cause == "norm" or len(model.blocks) == 1 else 1]
    weight, bias = block.attn.qkv.weight, block.attn.qkv.bias
    saved = (weight, bias, weight.detach().clone(), bias.detach().clone())
    width = weight.shape[1]
    with torch.no_grad():
        if cause == "attention":
            weight[: 2 * width].mul_(1e21)   # queries and keys 1e21x: their products overflow
        else:
            rows = width // block.attn.heads   # head 0's queries all zero, under a QK-norm of eps 0
            weight[:rows].zero_()
            bias[:rows].zero_()
    return saved


def restore(saved) -> None:
    if saved is None:
        return
    weight, bias, weight_was, bias_was = saved
    with torch.no_grad():
        weight.copy_(weight_was)
        bias.copy_(bias_was)


if __name__ == "__main__":
    sys.exit(main())
