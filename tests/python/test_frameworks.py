"""keel inside the frameworks that step the optimizer themselves: the Hugging Face Trainer,
Lightning (automatic and manual optimization) and Accelerate, each against the same fault in a
hand-written loop: a tiny GPT-2 (from a config) with one poisoned sample among 32, batches of 2,
gradient accumulation over 2, gradient clipping at 1.0. The poisoned sample is the 14th, so the
4th optimizer step (index 3) is unsafe and skipped; every other one is applied."""

from __future__ import annotations

import csv
import math

import pytest
import torch

import keel
from test_demo import free_port_pair
from tiny_gpt2 import InOrder, collate, samples, tiny_gpt2

STEPS = 8
BATCH = 2
ACCUMULATE = 2
POISONED_SAMPLE = 13
UNSAFE_STEP = POISONED_SAMPLE // (BATCH * ACCUMULATE)
EXPECTED_APPLIED = [step != UNSAFE_STEP for step in range(STEPS)]


def micro_batches():
    data = samples(STEPS * BATCH * ACCUMULATE, POISONED_SAMPLE)
    return [collate(data[i:i + BATCH]) for i in range(0, len(data), BATCH)]


def cpu_scaler():
    """A GradScaler on the CPU, where the frameworks make none: their fp16 path, run here."""
    return torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)


def hand_written_loop(quiet, precision: str) -> list:
    """The README's loop, with the same accumulation and clipping: keel's verdict per step, and
    with "fp16" the scale after the last step."""
    model = tiny_gpt2()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    probe = keel.Probe(model, optimizer, **quiet)
    scaler = cpu_scaler() if precision == "fp16" else None
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    batches = micro_batches()
    applied = []
    for step in range(STEPS):
        optimizer.zero_grad()
        total = 0.0
        for micro in range(ACCUMULATE):
            with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
                loss = model(**batches[step * ACCUMULATE + micro]).loss / ACCUMULATE
            (scaler.scale(loss) if scaler else loss).backward()
            total = total + loss.detach()
        if scaler:
            scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        applied.append(probe.step(total, scaler=scaler).applied)
    if scaler:
        return applied, scaler.get_scale()
    return applied


def assert_same_tensors(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


# The Hugging Face Trainer.
@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16 scaler"])
def test_trainer_gives_the_hand_written_loops_verdicts(quiet, tmp_path, precision):
    from safetensors.torch import load_file
    from transformers import Trainer, TrainerCallback, TrainingArguments

    from keel.integrations.transformers import attach

    model = tiny_gpt2()
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=BATCH,
        gradient_accumulation_steps=ACCUMULATE, max_grad_norm=1.0, max_steps=STEPS, learning_rate=1e-3,
        optim="adamw_torch", lr_scheduler_type="constant", logging_steps=1, save_strategy="steps", save_steps=1,
        report_to=[], use_cpu=True, bf16=precision == "bf16", disable_tqdm=True, seed=0)
    data = samples(STEPS * BATCH * ACCUMULATE, POISONED_SAMPLE)
    trainer = Trainer(model=model, args=args, train_dataset=InOrder(data), data_collator=collate)
    if precision == "fp16 scaler":
        # The Trainer's fp16 path (Accelerate's scaler, its patched step, optimizer_step_was_skipped)
        # with a CPU scaler, in fp32 math: the poisoned step overflows.
        trainer.accelerator.scaler = cpu_scaler()
    keel_callback = attach(trainer, **quiet)

    published = []

    class Published(TrainerCallback):   # after keel's: what keel published for each step
        def on_step_end(self, args, state, control, **kwargs):
            published.append(keel_callback.probe.last_record)

    trainer.add_callback(Published())
    trainer.train()

    logs = [entry for entry in trainer.state.log_history if "loss" in entry and "keel/skipped" in entry]
    assert [entry["step"] for entry in logs] == list(range(1, STEPS + 1))
    trainer_applied = [entry["keel/skipped"] == 0 for entry in logs]
    assert trainer_applied == EXPECTED_APPLIED
    if precision == "fp16 scaler":
        assert published[UNSAFE_STEP]["scaler"]["found_inf"]
        assert trainer.accelerator.scaler.get_scale() == 2.0 ** 15   # backed off once, not twice
        assert trainer.lr_scheduler.last_epoch == STEPS - 1         # not stepped on the skip
    else:
        assert trainer_applied == hand_written_loop(quiet, precision)
    assert all(math.isfinite(entry["keel/grad_norm"]) == (i != UNSAFE_STEP) for i, entry in enumerate(logs))
    # The loss keel publishes is the Trainer's (the NaN step's the Trainer logs as a mean of the
    # others: its nan filter).
    assert [r["step"] for r in published] == list(range(STEPS))
    for i, (record, entry) in enumerate(zip(published, logs)):
        if i == UNSAFE_STEP:
            assert math.isnan(record["loss"])
        else:
            assert record["loss"] == pytest.approx(entry["loss"], rel=1e-4)
    # A checkpoint taken after the skip holds the weights the skip kept; later ones moved on.
    def weights(step):
        return load_file(str(tmp_path / "out" / f"checkpoint-{step}" / "model.safetensors"))
    assert_same_tensors(weights(UNSAFE_STEP), weights(UNSAFE_STEP + 1))
    assert all(torch.isfinite(t).all() for t in weights(STEPS).values())
    assert not torch.equal(weights(UNSAFE_STEP + 1)["transformer.h.1.mlp.c_fc.weight"],
                             weights(STEPS)["transformer.h.1.mlp.c_fc.weight"])
    # keel let the Trainer's optimizer go when training ended.
    assert "StepIntercept" not in getattr(trainer.optimizer.optimizer.step, "__qualname__", "")
    stepped = keel_callback.probe.last_settled.step
    trainer.optimizer.optimizer.step()   # torch's own again: keel counts no step
    assert keel_callback.probe.last_settled.step == stepped


# Lightning.
def lightning_module(manual: bool):
    import lightning.pytorch as pl

    class Tiny(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.model = tiny_gpt2()
            self.automatic_optimization = not manual

        def training_step(self, batch, batch_idx):
            loss = self.model(**batch).loss
            if not manual:
                return loss
            optimizer = self.optimizers()
            self.manual_backward(loss / ACCUMULATE)
            if (batch_idx + 1) % ACCUMULATE == 0:
                self.clip_gradients(optimizer, gradient_clip_val=1.0, gradient_clip_algorithm="norm")
                optimizer.step()
                optimizer.zero_grad()
            return None

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-3, weight_decay=0.0)

    return Tiny()


@pytest.mark.parametrize("manual,precision", [(False, "fp32"), (True, "fp32"), (False, "fp16")],
                         ids=["automatic", "manual", "automatic-16-mixed"])
def test_lightning_gives_the_hand_written_loops_verdicts(quiet, tmp_path, manual, precision):
    import lightning.pytorch as pl
    from lightning.pytorch.loggers import CSVLogger
    from lightning.pytorch.plugins.precision import MixedPrecision

    from keel.integrations.lightning import KeelCallback

    module = lightning_module(manual)
    keel_callback = KeelCallback(**quiet)
    logger = CSVLogger(str(tmp_path), name="run")
    extra = {} if manual else dict(accumulate_grad_batches=ACCUMULATE, gradient_clip_val=1.0)
    if precision == "fp16":   # 16-mixed with its GradScaler, which Lightning makes on a GPU only
        extra["plugins"] = [MixedPrecision("16-mixed", "cpu", scaler=cpu_scaler())]
    trainer = pl.Trainer(accelerator="cpu", devices=1, max_steps=STEPS, logger=logger, log_every_n_steps=1,
                         callbacks=[keel_callback], enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, **extra)
    data = samples(STEPS * BATCH * ACCUMULATE, POISONED_SAMPLE)
    loader = torch.utils.data.DataLoader(data, batch_size=BATCH, shuffle=False, collate_fn=collate)
    trainer.fit(module, loader)

    with open(logger.experiment.metrics_file_path) as f:
        rows = {int(float(row["keel/step"])): row for row in csv.DictReader(f) if row.get("keel/step")}
    assert sorted(rows) == list(range(STEPS))
    applied = [float(rows[step]["keel/skipped"]) == 0.0 for step in range(STEPS)]
    assert applied == EXPECTED_APPLIED
    if precision == "fp16":
        expected_applied, expected_scale = hand_written_loop(quiet, "fp16")
        assert applied == expected_applied
        assert trainer.precision_plugin.scaler.get_scale() == expected_scale
    else:
        assert applied == hand_written_loop(quiet, "fp32")
    assert keel_callback.probe.layer_names == ["model." + n for n, _ in tiny_gpt2().named_parameters()]
    assert all(torch.isfinite(p).all() for p in module.parameters())


# Accelerate.
@pytest.mark.parametrize("intercept", [False, True], ids=["probe.step", "intercept_step"])
def test_accelerate_gives_the_hand_written_loops_verdicts(quiet, intercept):
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=ACCUMULATE)
    model = tiny_gpt2()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    loader = torch.utils.data.DataLoader(samples(STEPS * BATCH * ACCUMULATE, POISONED_SAMPLE), batch_size=BATCH,
                                         shuffle=False, collate_fn=collate)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    probe = keel.Probe(model, optimizer, **quiet)
    if intercept:
        probe.intercept_step(accelerator.scaler)
    applied = []
    for batch in loader:
        with accelerator.accumulate(model):
            loss = model(**batch).loss
            accelerator.backward(loss)
            if accelerator.sync_gradients:
                accelerator.clip_grad_norm_(model.parameters(), 1.0)
            if intercept:
                probe.note_loss(loss / ACCUMULATE)
                optimizer.step()
                outcome = probe.last_settled if accelerator.sync_gradients else None
            else:
                outcome = probe.step(loss)   # None on accumulation's micro-steps, as Accelerate's step
            optimizer.zero_grad()
            if outcome is not None:
                applied.append(outcome.applied)
    assert applied == EXPECTED_APPLIED
    assert applied == hand_written_loop(quiet, "fp32")
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_trainer_trained_again_with_a_new_optimizer_gets_a_new_probe_on_the_same_endpoint(tmp_path):
    from transformers import Trainer, TrainingArguments

    from keel.integrations.transformers import attach

    # Both of the probe's ports free (telemetry, and commands on the next): a port taken by
    # another test's connection would leave both train() calls without keel.
    port = free_port_pair()
    args = TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=BATCH, max_steps=2,
                             save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True)
    trainer = Trainer(model=tiny_gpt2(), args=args, train_dataset=InOrder(samples(8, 99)), data_collator=collate)
    callback = attach(trainer, record_dir="", dump_dir=str(tmp_path / "dumps"), endpoint=f"tcp://127.0.0.1:{port}")
    trainer.train()
    assert callback.probe is not None
    first = id(callback.probe)
    trainer.optimizer = trainer.lr_scheduler = None   # the next train() makes new ones
    trainer.train()
    assert id(callback.probe) != first
    assert callback.probe.bound_endpoint == f"tcp://127.0.0.1:{port}"
    assert callback.probe.last_settled.step == 1


def test_a_trainer_keel_cannot_attach_to_trains_on_without_keel(tmp_path):
    from transformers import Trainer, TrainingArguments

    from keel.integrations.transformers import attach

    args = TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=BATCH, max_steps=3,
                             logging_steps=1, save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True)
    model = tiny_gpt2()
    before = model.transformer.h[0].mlp.c_fc.weight.detach().clone()
    trainer = Trainer(model=model, args=args, train_dataset=InOrder(samples(8, 99)), data_collator=collate)
    callback = attach(trainer, endpoint="", record_dir="", no_such_option=1)
    with pytest.warns(RuntimeWarning, match="not attached, training goes on without keel.*no_such_option"):
        trainer.train()
    assert callback.probe is None
    assert trainer.state.global_step == 3
    assert not torch.equal(before, model.transformer.h[0].mlp.c_fc.weight)
    assert not any("keel/skipped" in entry for entry in trainer.state.log_history)


def test_a_lightning_run_keel_cannot_attach_to_trains_on_without_keel(tmp_path):
    import lightning.pytorch as pl

    from keel.integrations.lightning import KeelCallback

    module = lightning_module(manual=False)
    before = module.model.transformer.h[0].mlp.c_fc.weight.detach().clone()
    callback = KeelCallback(endpoint="", record_dir="", no_such_option=1)
    trainer = pl.Trainer(accelerator="cpu", devices=1, max_steps=3, logger=False, callbacks=[callback],
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    loader = torch.utils.data.DataLoader(samples(8, 99), batch_size=BATCH, collate_fn=collate)
    with pytest.warns(RuntimeWarning, match="not attached"):
        trainer.fit(module, loader)
    assert callback.probe is None
    assert trainer.global_step == 3
    assert not torch.equal(before, module.model.transformer.h[0].mlp.c_fc.weight)
