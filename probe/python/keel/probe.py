"""keel.Probe: the probe of one model and its optimizer in a Python training loop."""

from __future__ import annotations

import inspect
import os
from typing import Any, Callable, Dict, List, Optional

import torch

from . import _probe
from ._agreement import skip_agreement
from ._amp import ScalerBridge
from ._local_shards import LocalShards
from ._partition import parameters_partitioned
from ._step_intercept import StepIntercept
from ._unwrap import accelerated, original_module, original_optimizer


def distributed_defaults(options: Dict[str, Any]) -> Dict[str, Any]:
    """``options`` with the rank, the world size and the endpoint of this process's place in a
    job, where they are not given: from torch.distributed when it is initialised, else from the
    RANK and WORLD_SIZE that torchrun sets. Rank R publishes on tcp://127.0.0.1:(P + 2R), its
    commands on the next port, with P = $KEEL_PORT or 5557, so one dashboard watches every rank
    of a machine (keel --connect for each)."""
    rank = world_size = None
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        rank, world_size = torch.distributed.get_rank(), torch.distributed.get_world_size()
    elif "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if rank is None or world_size is None or world_size <= 1:
        return options
    filled = dict(options)
    filled.setdefault("rank", rank)
    filled.setdefault("world_size", world_size)
    base = int(os.environ.get("KEEL_PORT", "5557"))
    filled.setdefault("endpoint", f"tcp://127.0.0.1:{base + 2 * filled['rank']}")
    return filled


def _lending_after(closure: Callable[[], torch.Tensor], shards: LocalShards) -> Callable[[], torch.Tensor]:
    """``closure`` that hands its backward's gradients to keel's leaves (LocalShards) before
    the probe reads them."""
    def run() -> torch.Tensor:
        loss = closure()
        shards.lend_gradients()
        return loss
    return run


def _eager_reruns(closure: Callable[[], torch.Tensor]) -> Callable[[], torch.Tensor]:
    """``closure``, whose second run in a step (keel's traced re-run of an unsafe step) runs
    what torch.compile compiled as plain eager ops: the origin tracer sees ATen's ops, and a
    compiled graph's fused kernels are none. The first run, the one that trains, is as compiled."""
    runs = 0
    set_stance = getattr(torch.compiler, "set_stance", None)   # torch 2.6 and newer

    def run() -> torch.Tensor:
        nonlocal runs
        runs += 1
        if runs == 1 or set_stance is None:
            return closure()
        with set_stance("force_eager"):
            return closure()
    return run


def _rewind_callback(fn: Callable[..., Any]) -> Callable[[int, int, float], Any]:
    """``on_rewind`` as the core calls it, ``(from_step, to_step, lr_factor)``; a callable written
    for the two steps alone is called with them."""
    try:
        inspect.signature(fn).bind(0, 0, 1.0)
    except TypeError:
        return lambda from_step, to_step, lr_factor: fn(from_step, to_step)
    except ValueError:   # no signature to read (a builtin): called as the core calls it
        pass
    return fn


def _options(overrides: Dict[str, Any]) -> "_probe.ProbeOptions":
    options = _probe.ProbeOptions()
    for name, value in overrides.items():
        if name.startswith("_") or not hasattr(options, name):
            known = ", ".join(sorted(n for n in dir(options) if not n.startswith("_")))
            raise TypeError(f"keel.Probe: unknown option {name!r} (the options are: {known})")
        setattr(options, name, value)
    return options


class Probe:
    """Measures a model's training, step by step, and guards its updates.

    ``keel.Probe(model, optimizer, **options)`` attaches to ``model`` (a ``torch.nn.Module``)
    and ``optimizer`` (any ``torch.optim.Optimizer``); ``probe.step(loss)`` then takes the place
    of ``optimizer.step()``. Each step measures every parameter's gradient, weights and update,
    skips an update whose gradients or loss are NaN or Inf (``skip_on_nonfinite``), and
    publishes the step on ``endpoint`` for keel's dashboard.

    The options are ``keel::probe::ProbeOptions``'s fields, as keyword arguments, for example
    ``endpoint="tcp://127.0.0.1:5555"`` (``""``: publish nothing), ``model="generator"``,
    ``rank=`` and ``world_size=``, ``skip_on_nonfinite=``, ``dump_dir=``, ``record_dir=``
    (``""``: record nothing). An unknown name raises TypeError; a setting the probe cannot
    work with (an endpoint in use, a rank outside the world) raises keel.AttachError.

    ``on_event=`` is given each event keel raises (a ``"warning"`` from the early warning, a
    ``"first_nonfinite"``, a ``"rewind"``, ...) once, on the training thread, as the dict
    ``last_events()`` holds: an alert, a log line or an action of the trainer's. What it raises
    is counted and told as a ``"probe_error"`` event; training goes on. ``forecast=False`` turns
    the early warning off (docs/warnings.md).

    In a job of several processes (torchrun, torch.distributed), ``rank``, ``world_size`` and
    ``endpoint`` default to this process's place in it: rank R publishes on
    ``tcp://127.0.0.1:(5557 + 2R)`` ($KEEL_PORT moves 5557). Under DistributedDataParallel the gradients the probe
    measures are the all-reduced ones, so every rank sees a NaN from any rank's batch and they
    all skip the same step. Under FullyShardedDataParallel (and FSDP2's ``fully_shard``, or
    any model with DTensor parameters: keel measures each one's local part) each rank
    measures its own shard, and the ranks agree on every step's verdict before the update (an all-reduce of eight
    int64 words on ``process_group``, the default group when None): a step any rank skips is
    skipped by all (``skip_reason`` "other_rank" on the others), and an overflow any rank's
    scaler finds backs off every rank's scale. ``agree_skips=True`` asks for that agreement in
    any job of several ranks, ``False`` turns it off; the default (None) agrees when the model
    is sharded or snapshots are kept (``rewind_every``: the ranks rewind together, to the same
    snapshot). With the agreement the step is decided on the host, and an unsafe step is not
    run again in the closure form. A model whose parameters are partitioned across the ranks
    (every element on one rank: FSDP's FULL_SHARD or SHARD_GRAD_OP, ``fully_shard`` over the
    whole world) says so to the dashboard (``sharded``), which then plots the job's grad norm,
    the ranks' combined, beside this rank's.

    Call it from the training thread only: the probe calls the model and the optimizer from
    inside ``step()``, never from autograd's threads or its own.
    """

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, *,
                 agree_skips: Optional[bool] = None, process_group: Any = None, **options: Any) -> None:
        model = original_module(model)
        # Accelerate's wrapper: its step skips accumulation's micro-steps and runs its GradScaler;
        # a direct probe.step() does the same (step()).
        self._accelerated = accelerated(optimizer)
        optimizer = original_optimizer(optimizer)
        self._shards = LocalShards(model)
        options = distributed_defaults(options)
        options.setdefault("sharded", parameters_partitioned(model))
        if options.get("on_rewind") is not None:
            options["on_rewind"] = _rewind_callback(options["on_rewind"])
        self._core = _probe.Probe(model, optimizer, _options(options), self._shards.native)
        agreement = skip_agreement(model, agree_skips, process_group, rewinds=bool(options.get("rewind_every")))
        if agreement is not None:
            self._core.agree_skips(agreement)
        self._agrees_skips = agreement is not None
        self._optimizer = optimizer
        self._scalers: Dict[int, ScalerBridge] = {}
        self._in_step = False
        self._intercepting = False   # inside a step intercept_step() took
        self._intercept: Optional[StepIntercept] = None

    def step(self, loss: Optional[torch.Tensor] = None, *,
             closure: Optional[Callable[[], torch.Tensor]] = None,
             scaler: Optional[torch.amp.GradScaler] = None) -> Optional["_probe.StepOutcome"]:
        """Measures the step, decides whether its update is safe, and applies it or skips it.

        Pass the step's ``loss`` after ``loss.backward()``; or, instead, ``closure=``: a
        function that zeroes the gradients, runs the forward and backward passes and returns
        the loss (as ``optimizer.step(closure)`` takes it). With a closure, the first of a run of
        unsafe steps is run again with keel's origin tracer armed, which names the op and module
        where the NaN was born.

        With loss scaling, ``scaler.scale(loss).backward()`` then ``probe.step(loss,
        scaler=scaler)`` (the unscaled loss) in place of ``scaler.step(optimizer)`` and
        ``scaler.update()``: the probe unscales in its own pass, skips the update on an
        overflow and updates the scale as PyTorch would. ``scaler.unscale_(optimizer)`` before
        it (to clip the gradients) is allowed, as with ``scaler.step``. A disabled scaler
        (``enabled=False``) is no scaler: the step is ``probe.step(loss)``.

        Under torch.compile, the closure's re-run runs eagerly (``force_eager``), so that the
        tracer sees the ops a compiled graph fuses.

        With an optimizer Accelerate prepared, the step is Accelerate's: none on a micro-step of
        ``accelerator.accumulate()`` (returns None), and with fp16 its ``accelerator.scaler``.

        Returns what the step did (``applied``, ``skip_reason``, ``nonfinite_layers``, ...).
        """
        if closure is not None and loss is not None:
            raise TypeError("keel.Probe.step: pass the loss or a closure, not both")
        if self._in_step:
            # The probe applying its update called optimizer.step(), and that leads back here: a
            # step() replaced by one that calls probe.step() (intercept_step does it without
            # this). The update is the optimizer's class's own step.
            type(self._optimizer).step(self._optimizer)
            return None
        if self._accelerated is not None and not self._intercepting:
            if not self._accelerated.gradient_state.sync_gradients:
                return None   # an accumulation micro-step (accelerator.accumulate): no step, as Accelerate's
            if scaler is None:
                scaler = self._accelerated.scaler
        bridge = self._bridge(scaler)
        if bridge is not None:
            bridge.before_step(self._optimizer, self._core.settle)
        shards = self._shards if self._shards.leaves else None
        if shards is not None:
            shards.lend_gradients()
            if closure is not None:
                closure = _lending_after(closure, shards)
        self._in_step = True
        try:
            if closure is not None:
                return self._core.step_closure(_eager_reruns(closure))
            return self._core.step(loss if loss is not None else torch.Tensor())
        finally:
            self._in_step = False
            if shards is not None:
                shards.take_gradients_back()
            if bridge is not None:
                bridge.after_step()

    def intercept_step(self, scaler: Optional[torch.amp.GradScaler] = None) -> None:
        """Makes the optimizer's own ``optimizer.step()`` run keel's step, for a loop that calls it
        itself (a framework's, a script's): ``optimizer.step(closure)`` becomes
        ``probe.step(closure's loss)``, and with ``scaler`` (a GradScaler the loop calls
        ``scaler.step(optimizer)`` and ``scaler.update()`` on), that pair becomes
        ``probe.step(loss, scaler=scaler)``. The step's loss is the closure's, or the sum of the
        losses given to ``note_loss()`` since the last step. Only this optimizer object changes
        (an attribute of the instance, as LR schedulers set theirs); ``release_step()`` undoes it.
        keel.integrations uses it for the Hugging Face Trainer and Lightning."""
        self.release_step()
        self._intercept = StepIntercept(self._optimizer, self._intercepted_step, lambda: self._in_step, scaler)

    def release_step(self) -> None:
        """Gives ``optimizer.step()`` (and the scaler's) back, as they were before intercept_step()."""
        if self._intercept is not None:
            self._intercept.release()
            self._intercept = None

    def note_loss(self, loss: torch.Tensor) -> None:
        """A micro-batch's loss, for a step that ``optimizer.step()`` takes without one
        (intercept_step): the step publishes the sum of those noted since the last step."""
        if self._intercept is not None:
            self._intercept.note_loss(loss)

    def _intercepted_step(self, loss: Optional[torch.Tensor], scaler: Optional[torch.amp.GradScaler]) -> None:
        # The framework's own step already stands for its accumulation and scaler.
        self._intercepting = True
        try:
            self.step(loss, scaler=scaler)
        finally:
            self._intercepting = False

    def _bridge(self, scaler: Optional[torch.amp.GradScaler]) -> Optional[ScalerBridge]:
        # A disabled scaler (GradScaler(enabled=False): an fp32 or bf16 run of an fp16 script)
        # scales nothing and keeps no state: the step is the plain one.
        if scaler is None or not scaler.is_enabled():
            self._core.use_scaler(None)
            return None
        bridge = self._scalers.get(id(scaler))
        if bridge is None or bridge.torch_scaler is not scaler:
            bridge = ScalerBridge(scaler)
            self._scalers[id(scaler)] = bridge
        self._core.use_scaler(bridge.keel)
        return bridge

    def watch(self, name: str, tensor: torch.Tensor) -> None:
        """Measures an activation this step (absmax, rms, mean logsumexp, non-finite count)."""
        self._core.watch(name, tensor)

    def settle(self) -> None:
        """Collects a deferred step's verdict now (call it before saving the optimizer)."""
        self._core.settle()

    @property
    def last_settled(self) -> "_probe.StepOutcome":
        """What the last settled step did."""
        return self._core.last_settled

    @property
    def last_record(self) -> Dict[str, Any]:
        """The last step's record, as published, under the names of PROTOCOL.md §3.3 (keel-cli's
        JSON uses the same): step, loss, lr, grad_norm, skipped, skip_reason, cause, scaler (or
        None), ``layers`` (each measured metric's per-layer values, in ``layer_names`` order),
        ``watches`` (each watched tensor's absmax, rms, z and nonfinite count, by name), frozen
        and unused (layer indices; also as ``frozen_layers`` and ``unused_layers``), and the
        rest of the record's fields."""
        return self._core.last_record

    @property
    def last_events(self) -> List[Dict[str, Any]]:
        """The events the last step raised (first non-finite layer, skip, dump, ...), under the
        names of PROTOCOL.md §3.4: step, kind, layer, detail, stamp_unix_ns, and ``cause`` (kind,
        op, module, evidence, sentence: where an unsafe step's NaN was born) or None."""
        return self._core.last_events

    @property
    def layer_names(self) -> List[str]:
        """The layers as the probe measures them: one per parameter tensor, by its first name."""
        return self._core.layer_names

    @property
    def agrees_skips(self) -> bool:
        """Whether this rank agrees on each step's verdict with the other ranks (``agree_skips``)."""
        return self._agrees_skips

    @property
    def run_id(self) -> str:
        return self._core.run_id

    @property
    def sharded(self) -> bool:
        """Whether this rank's run says it measures only its shards of the parameters (the
        ``sharded`` option; by default whether the parameters are partitioned across the ranks,
        every element on one: not under FSDP's NO_SHARD or HYBRID_SHARD), so that the dashboard
        combines the ranks' grad norms into the job's."""
        return self._core.sharded

    @property
    def bound_endpoint(self) -> str:
        """Where the telemetry is published ("" when nowhere)."""
        return self._core.bound_endpoint

    @property
    def recording_path(self) -> str:
        """The run's recording ("" when none)."""
        return self._core.recording_path

    @property
    def probe_us(self) -> float:
        """The probe's own time on the training thread in the last step, in microseconds."""
        return self._core.last_timing.probe_us

    @property
    def last_timing(self) -> "_probe.ProbeTiming":
        """Where the probe's time went in the last step, in microseconds: probe_us in all,
        reduce_us of it in reductions, and by stage begin_us, layout_us, grads_us (backward_us of
        it inside backward, measuring small gradients as autograd accumulates them), update_us,
        record_us, end_us (keel-bench-py prints them)."""
        return self._core.last_timing
