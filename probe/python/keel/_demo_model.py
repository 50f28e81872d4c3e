"""The Python demo's model: keel-demo's char-level transformer, with the same layer names."""

from __future__ import annotations

from functools import partial
from typing import Callable, Optional

import torch
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, width: int, heads: int, context: int, q_norm_eps: Optional[float]) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        # With an eps: queries normalised per head (QK-norm); --cause norm builds it with eps 0.
        self.q_norm = nn.LayerNorm(width // heads, eps=q_norm_eps) if q_norm_eps is not None else None
        self.register_buffer("mask", torch.full((context, context), float("-inf")).triu(1))
        self.on_scores: Optional[Callable[[torch.Tensor], None]] = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, time, width = x.shape
        q, k, v = self.qkv(x).view(batch, time, 3, self.heads, width // self.heads).permute(2, 0, 3, 1, 4)
        if self.q_norm is not None:
            q = self.q_norm(q)
        scores = q @ k.transpose(-2, -1) / (width // self.heads) ** 0.5
        if self.on_scores is not None:
            self.on_scores(scores)   # the attention logits, before the mask's -inf hides their size
        scores = scores + self.mask[:time, :time]
        attended = torch.softmax(scores, -1) @ v
        return self.proj(attended.transpose(1, 2).reshape(batch, time, width))


class Mlp(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc = nn.Linear(width, 4 * width)
        self.proj = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(torch.nn.functional.gelu(self.fc(x)))


class Block(nn.Module):
    def __init__(self, width: int, heads: int, context: int, q_norm_eps: Optional[float]) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads, context, q_norm_eps)
        self.ln2 = nn.LayerNorm(width)
        self.mlp = Mlp(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class CharTransformer(nn.Module):
    """tokens [batch, time] (int64) -> logits [batch, time, vocab]."""

    def __init__(self, vocab: int, context: int = 64, width: int = 96, heads: int = 4, layers: int = 3,
                 q_norm_eps: Optional[float] = None) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads, context, q_norm_eps) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)

    def on_attention_scores(self, on_scores: Optional[Callable[[str, torch.Tensor], None]]) -> None:
        """Hands each block's attention logits to ``on_scores`` with a name
        ("blocks.0.attn.scores"), for ``probe.watch``; None: to nothing."""
        for i, block in enumerate(self.blocks):
            block.attn.on_scores = None if on_scores is None else partial(on_scores, f"blocks.{i}.attn.scores")

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.tok(tokens) + self.pos(positions).unsqueeze(0)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))
