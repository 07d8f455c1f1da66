"""A small GPT block stack in plain PyTorch, shaped like the transformer family's ``ModelSpec``.

Pre-norm decoder blocks: fused QKV and output projections, causal ``scaled_dot_product_attention``,
a GELU MLP of width 4h, no biases, layer norms without affine parameters (so the parameter count
is exactly ``ModelSpec.num_params``: blocks, a word embedding and an untied output layer; no
position embedding).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class Block(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(hidden, elementwise_affine=False)
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
        self.proj = nn.Linear(hidden, hidden, bias=False)
        self.norm2 = nn.LayerNorm(hidden, elementwise_affine=False)
        self.fc1 = nn.Linear(hidden, 4 * hidden, bias=False)
        self.fc2 = nn.Linear(4 * hidden, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.heads, h // self.heads).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, h))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class GPT(nn.Module):
    """``tie``: the output layer shares the word embedding's weight (Megatron-LM's default)."""

    def __init__(self, layers: int = 2, hidden: int = 64, heads: int = 4, vocab: int = 256,
                 tie: bool = False) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(hidden, elementwise_affine=False)
        self.head = nn.Linear(hidden, vocab, bias=False)
        if tie:
            self.head.weight = self.embed.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def gpt_small() -> GPT:
    """12 layers, h=768, 12 heads, vocabulary 50304: ~124 M parameters (GPT-2 small's shape)."""
    return GPT(layers=12, hidden=768, heads=12, vocab=50304)


def broken() -> nn.Module:
    """A model that fails on any input of width != 8."""
    return nn.Sequential(nn.Linear(8, 4), nn.ReLU())


class GPTLM(GPT):
    """:class:`GPT` returning its language-model loss: next-token cross-entropy over the logits
    in fp32 (as Megatron-LM and mixed-precision training compute it)."""

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        logits = super().forward(tokens)
        return F.cross_entropy(logits.float().flatten(0, 1), tokens.flatten())
