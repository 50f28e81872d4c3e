"""python -m keel.bench_trainer: what keel costs a Hugging Face Trainer step (issue 57's target:
at most 2% of the step on the CPU, a small GPT-2 config).

Trainers train the same GPT-2 (built from a config, no weights downloaded) on the same token
batches: ``plain``; ``keel`` with ``keel.integrations.transformers.attach(trainer)`` (keel's
defaults: publishing, recording, the skip policy); and ``keel-quiet``, the same publishing and
recording nothing (the probe's threads idle: what they cost a machine whose cores torch keeps
busy is the difference). Their runs rotate, round by round, so that the machine's drift touches
them alike. A callback times each optimizer step from the Trainer's
``on_step_begin`` to its ``on_step_end`` (forward, backward, clipping, the step, the scheduler),
leaving out each run's first steps (warm-up). It prints each's median step time, keel's cost over
plain measured in this run, and keel's own time on the training thread (the probe's probe_us).
``--device cuda --bf16`` measures the same on a GPU.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Dict, List

import torch


def gpt2(args: argparse.Namespace) -> torch.nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=args.vocab, n_positions=args.context, n_embd=args.width, n_layer=args.layers,
                        n_head=args.heads)
    return GPT2LMHeadModel(config)


def token_data(args: argparse.Namespace) -> list:
    g = torch.Generator().manual_seed(1)
    count = args.batch * (args.steps + args.warmup)
    return [{"input_ids": ids, "labels": ids.clone()}
            for ids in torch.randint(0, args.vocab, (count, args.context), generator=g)]


VARIANTS = ("plain", "keel", "keel-quiet")


def run(args: argparse.Namespace, variant: str, out_dir: str) -> Dict[str, List[float]]:
    """One Trainer run: its step times (seconds) after the warm-up, and keel's probe_us."""
    from transformers import Trainer, TrainerCallback, TrainingArguments

    times: List[float] = []
    probe_us: List[float] = []
    keel_callback = None

    class StepTimer(TrainerCallback):
        def on_step_begin(self, a, state, control, **kwargs):
            self.start = time.perf_counter()

        def on_step_end(self, a, state, control, **kwargs):
            if args.device == "cuda":
                torch.cuda.synchronize()
            if state.global_step > args.warmup:
                times.append(time.perf_counter() - self.start)
                if keel_callback is not None:
                    probe_us.append(keel_callback.probe.probe_us)

    training = TrainingArguments(
        output_dir=out_dir, per_device_train_batch_size=args.batch, max_steps=args.steps + args.warmup,
        learning_rate=1e-4, logging_steps=50, save_strategy="no", report_to=[], disable_tqdm=True,
        use_cpu=args.device == "cpu", bf16=args.bf16, seed=0, dataloader_num_workers=0)
    trainer = Trainer(model=gpt2(args), args=training, train_dataset=token_data(args))
    if variant != "plain":
        from keel.integrations.transformers import attach

        if variant == "keel":
            options = dict(record_dir=tempfile.mkdtemp(prefix="keel-bench-trainer-"))
        else:
            options = dict(endpoint="", record_dir="")
        keel_callback = attach(trainer, **options)
    trainer.add_callback(StepTimer())
    trainer.train()
    return {"times": times, "probe_us": probe_us}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=4, help="runs of each, in rotation")
    parser.add_argument("--steps", type=int, default=40, help="timed optimizer steps per run")
    parser.add_argument("--warmup", type=int, default=5, help="steps per run left out of the timing")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--bf16", action="store_true", help="the Trainer's bf16=True")
    args = parser.parse_args()

    import transformers

    print(f"keel.bench_trainer: torch {torch.__version__}, transformers {transformers.__version__}, "
          f"{args.device}{' bf16' if args.bf16 else ''}, GPT-2 {args.layers} layers x {args.width}, "
          f"vocab {args.vocab}, batch {args.batch} x {args.context} tokens, {args.rounds} rounds x "
          f"{args.steps} steps (+{args.warmup} warm-up) each")
    results: Dict[str, Dict[str, List[float]]] = {v: {"times": [], "probe_us": []} for v in VARIANTS}
    with tempfile.TemporaryDirectory() as out_dir:
        for round_index in range(args.rounds):
            shift = round_index % len(VARIANTS)
            for variant in VARIANTS[shift:] + VARIANTS[:shift]:
                got = run(args, variant, out_dir)
                for key in got:
                    results[variant][key].extend(got[key])
    plain = statistics.median(results["plain"]["times"])
    print(f"  {'plain':<10} {plain * 1e3:9.2f} ms/step (median of {len(results['plain']['times'])})")
    for variant in VARIANTS[1:]:
        step = statistics.median(results[variant]["times"])
        probe = statistics.median(results[variant]["probe_us"]) / 1e6
        print(f"  {variant:<10} {step * 1e3:9.2f} ms/step: {(step / plain - 1) * 100:+.2f}% over plain; "
              f"its own time on the training thread {probe * 1e6:.0f} us/step, {probe / plain * 100:.2f}% of the plain step")

if __name__ == "__main__":
    main()
