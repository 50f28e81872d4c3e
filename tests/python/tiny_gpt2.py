"""A tiny GPT-2 from a config (no weights downloaded), token data with one poisoned sample, and a
hook that makes the poisoned sample's forward pass non-finite: the same fault in a framework's
loop and in a hand-written one."""

from __future__ import annotations

import torch

VOCAB = 64
POISON = VOCAB - 1   # a token only the poisoned sample carries
SEQ = 16


def tiny_gpt2(seed: int = 0) -> torch.nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=32, n_layer=2, n_head=2,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(config)
    model.transformer.wte.register_forward_hook(_poison_hook)
    return model


def _poison_hook(module, inputs, output):
    # The poisoned sample's embeddings NaN: a forward-born NaN, whatever the batch's order.
    poisoned = (inputs[0] == POISON).any(dim=-1)
    if poisoned.any():
        output = output.clone()
        output[poisoned] = float("nan")
    return output


def samples(count: int, poisoned_index: int, seed: int = 1) -> list:
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(count):
        ids = torch.randint(0, POISON, (SEQ,), generator=g)
        if i == poisoned_index:
            ids[3] = POISON
        out.append({"input_ids": ids, "labels": ids.clone()})
    return out


class InOrder(torch.utils.data.IterableDataset):
    """The samples in their order: a Trainer's batches are then the hand-written loop's."""

    def __init__(self, items: list) -> None:
        self.items = items

    def __iter__(self):
        return iter(self.items)


def collate(items: list) -> dict:
    return {k: torch.stack([item[k] for item in items]) for k in items[0]}
