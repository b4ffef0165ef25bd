"""Causal and padding masks on one attention map (chapter 4).

A six-word sentence with fixed scores; :func:`build_mask` combines the causal mask and
a key-padding mask with ``&`` (eq. combined-mask), for right or left padding, and
:func:`masked_weights` applies a mask before the softmax (right) or after it (wrong).
Chapter 4's explorer draws them.
"""

from __future__ import annotations

import torch

from ..attention import attention_scores, softmax
from ..masks import causal_mask, padding_mask

WORDS = ["the", "cat", "sat", "on", "the", "mat"]
PAD = "<pad>"
ORDERS = ["before softmax", "after softmax"]


def example_scores(T: int = len(WORDS), seed: int = 4) -> torch.Tensor:
    """A fixed (T, T) matrix of scaled scores, a stand-in for Q K^T / sqrt(d_k)."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(T, 8, generator=g)
    k = torch.randn(T, 8, generator=g)
    return attention_scores(q, k) * 1.5  # (T, T), spread enough to give uneven rows


def padded_tokens(length: int, padding: str, words: list[str] = WORDS) -> list[str]:
    """The first ``length`` words, padded to len(words) with <pad> on the right or
    left."""
    real, pads = words[:length], [PAD] * (len(words) - length)
    return real + pads if padding == "right" else pads + real


def build_mask(T: int, causal: bool, padding: str, length: int) -> torch.Tensor:
    """(T, T) bool, True = may attend: causal AND key padding   (eq. combined-mask)."""
    allowed = torch.ones(T, T, dtype=torch.bool)
    if causal:
        allowed &= causal_mask(T)  # (T, T)
    real = padding_mask([length], T)[0, 0, 0]  # (T,), True at the first `length`
    if padding == "left":
        real = real.flip(0)  # left padding: the real tokens are the last ones
    allowed &= real  # (T, T) & (T,): the same key columns go in every row
    return allowed


def masked_weights(
    scores: torch.Tensor, allowed: torch.Tensor, order: str
) -> torch.Tensor:
    """Attention weights, the mask applied before the softmax (right) or after it
    (wrong)."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    if order == "before softmax":  # eq. masked-scores
        return softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return (
        softmax(scores, dim=-1) * allowed
    )  # zeroed afterwards: rows stop summing to 1
