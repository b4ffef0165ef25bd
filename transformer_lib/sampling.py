"""Choosing the next token from a language model's logits: greedy, temperature, top-k
and top-p (nucleus) sampling.

Every function takes logits of shape (..., V), V the vocabulary size, usually (B, V):
the last position's logits of each sequence. A filter returns logits of the same shape
with -inf outside the kept set, so filters compose and the softmax of the result is the
renormalised distribution over the kept tokens.
"""

from __future__ import annotations

import torch

from .attention import softmax


def _check_logits(logits: torch.Tensor) -> None:
    if logits.dim() < 1 or logits.size(-1) < 1:
        raise ValueError(
            f"logits must have shape (..., V) with V >= 1, got {tuple(logits.shape)}"
        )
    if not logits.dtype.is_floating_point:
        raise TypeError(f"logits must be floating point, got dtype {logits.dtype}")


def _check_top_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"top_k must be an integer >= 1, got {k!r}")


def _check_top_p(p: float) -> None:
    if not 0.0 < p <= 1.0:
        raise ValueError(f"top_p must lie in (0, 1], got {p!r}")


def _check_temperature(temperature: float) -> None:
    if not temperature >= 0.0:  # also refuses nan
        raise ValueError(f"temperature must be >= 0 (0 is greedy), got {temperature!r}")


def check_sampling_args(
    temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None
) -> None:
    """Raise a ValueError naming a bad value: temperature < 0, top_k < 1, top_p outside
    (0, 1]."""
    _check_temperature(temperature)
    if top_k is not None:
        _check_top_k(top_k)
    if top_p is not None:
        _check_top_p(top_p)


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the k largest logits of each row, -inf elsewhere   (eq. top-k).

    z'_v = z_v if z_v >= z_(k), the k-th largest logit, else -inf. Tokens tied with the
    k-th largest are all kept (as ``transformers`` does), so a row can keep more than k
    tokens; k >= V keeps every token.
    """
    _check_logits(logits)
    _check_top_k(k)
    if k >= logits.size(-1):
        return logits
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]  # (..., 1): z_(k)
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Keep the smallest set of most likely tokens whose probabilities sum to at least
    p, -inf elsewhere   (eq. top-p).

    Sort the probabilities pi = softmax(z) in decreasing order, pi_(1) >= pi_(2) >= ...;
    token (j) is kept when the tokens before it hold less than p:
    pi_(1) + ... + pi_(j-1) < p. The most likely token is therefore always kept, and
    p = 1 keeps every token. Among tokens of equal probability at the edge of the set,
    the sort decides which are kept.
    """
    _check_logits(logits)
    _check_top_p(p)
    if p == 1.0:
        return logits
    # (..., V), decreasing; idx[..., j] is the token at rank j
    sorted_logits, idx = torch.sort(logits, dim=-1, descending=True)
    probs = softmax(sorted_logits, dim=-1)  # (..., V): pi_(1), pi_(2), ...
    before = probs.cumsum(dim=-1) - probs  # (..., V): mass of the tokens ranked before
    drop_sorted = before >= p  # (..., V), rank 1 is never dropped
    drop = drop_sorted.scatter(-1, idx, drop_sorted)  # back to token order
    return logits.masked_fill(drop, float("-inf"))


def next_token_probs(
    logits: torch.Tensor,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> torch.Tensor:
    """The distribution the next token is sampled from: softmax(filter(z / tau))
    (eq. sampling-probs), shape (..., V).

    Divide the logits by the temperature tau (chapter 3's tau: tau < 1 sharpens, tau > 1
    flattens), then keep the top_k, then the top_p nucleus of what is left (the order
    of ``transformers``), then renormalise with a softmax. tau = 0 is the limit
    tau -> 0: all the mass on the largest logit (split evenly among ties).
    """
    _check_logits(logits)
    check_sampling_args(temperature, top_k, top_p)
    if temperature == 0.0:
        is_max = logits == logits.max(dim=-1, keepdim=True).values
        return is_max.to(logits.dtype) / is_max.sum(dim=-1, keepdim=True)
    z = logits / temperature
    if top_k is not None:
        z = top_k_filter(z, top_k)
    if top_p is not None:
        z = top_p_filter(z, top_p)
    return softmax(z, dim=-1)


def sample_next(
    logits: torch.Tensor,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Draw one token per row from :func:`next_token_probs`: logits (B, V) -> ids (B,)
    (more generally (..., V) -> (...)).

    ``temperature=0`` is greedy decoding, argmax_v z_v (eq. greedy), and draws nothing.
    ``generator`` makes the draws reproducible without touching the global RNG.
    """
    check_sampling_args(temperature, top_k, top_p)
    if temperature == 0.0:
        _check_logits(logits)
        return logits.argmax(dim=-1)
    probs = next_token_probs(logits, temperature=temperature, top_k=top_k, top_p=top_p)
    flat = probs.reshape(-1, probs.size(-1))  # (B, V)
    ids = torch.multinomial(flat, 1, generator=generator)  # (B, 1)
    return ids.reshape(probs.shape[:-1])
