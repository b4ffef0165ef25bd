"""Chapter 17: ALiBi's attention bias, a position scheme built for long inputs.

The reference solution is :func:`transformer_lib.positional.alibi_bias` (no model of the
library uses ALiBi); tests/test_exercises.py checks it against ``transformers``' BLOOM
code.
"""

from __future__ import annotations

from functools import cached_property

import torch

from ..positional import alibi_bias, alibi_slopes
from .compare import close
from .harness import Checker, Mistake, Trial
from .language import N_

NEG_INF = float("-inf")


class AlibiTrial(Trial):
    def __init__(self, n_heads: int, T: int) -> None:
        super().__init__(f"n_heads = {n_heads}, T = {T}", (n_heads, T))
        self.n_heads, self.T = n_heads, T

    @cached_property
    def want(self) -> torch.Tensor:
        return alibi_bias(self.n_heads, self.T)

    @cached_property
    def lower(self) -> torch.Tensor:
        """Where the causal part lives: j <= i, (T, T) bool."""
        return torch.ones(self.T, self.T, dtype=torch.bool).tril()

    def like(self, slopes: torch.Tensor, sign: float = -1.0, masked=True) -> bool:
        i = torch.arange(self.T)[:, None]
        j = torch.arange(self.T)[None, :]
        bias = sign * slopes[:, None, None] * (i - j).double()
        if masked:
            bias = bias.masked_fill(j > i, NEG_INF)
        return close(self.got, bias)

    @cached_property
    def slopes(self) -> torch.Tensor:
        return alibi_slopes(self.n_heads)

    @cached_property
    def future_finite(self) -> bool:
        """The learner's bias is finite above the diagonal (no causal mask) and right
        below it."""
        upper = ~self.lower
        return bool(torch.isfinite(self.got[:, upper]).all()) and close(
            self.got[:, self.lower], self.want[:, self.lower]
        )


def _alibi_trials() -> list[AlibiTrial]:
    return [AlibiTrial(4, 5), AlibiTrial(8, 6), AlibiTrial(2, 3), AlibiTrial(1, 4)]


# Known mistakes, each as a learner would write it


def _learner_bias(slopes, T, sign=-1.0, mask_value=NEG_INF):
    dist = torch.arange(T)[:, None] - torch.arange(T)[None, :]  # i - j
    bias = sign * slopes[:, None, None] * dist
    return bias.masked_fill(dist < 0, mask_value)


def alibi_slopes_from_zero(n_heads, T):
    slopes = 2.0 ** (-8.0 * torch.arange(n_heads) / n_heads)  # h = 0 .. H-1
    return _learner_bias(slopes, T)


def alibi_positive(n_heads, T):
    slopes = 2.0 ** (-8.0 * torch.arange(1, n_heads + 1) / n_heads)
    return _learner_bias(slopes, T, sign=1.0)  # a reward for distance


def alibi_no_mask(n_heads, T):
    slopes = 2.0 ** (-8.0 * torch.arange(1, n_heads + 1) / n_heads)
    dist = torch.arange(T)[:, None] - torch.arange(T)[None, :]
    return -slopes[:, None, None] * dist  # the future gets a bonus, not -inf


def alibi_slopes_reversed(n_heads, T):
    slopes = 2.0 ** (-8.0 * torch.arange(n_heads, 0, -1) / n_heads)  # gentlest first
    return _learner_bias(slopes, T)


def alibi_zero_future(n_heads, T):
    slopes = 2.0 ** (-8.0 * torch.arange(1, n_heads + 1) / n_heads)
    return _learner_bias(slopes, T, mask_value=0.0)


ALIBI_MISTAKES = [
    Mistake.not_a_tensor(N_("your bias for {inputs}")),
    Mistake.wrong_shape(
        N_("your bias"), N_("one (T, T) matrix per head: (n_heads, T, T)")
    ),
    Mistake(
        alibi_slopes_from_zero,
        lambda t: (
            t.n_heads > 1
            and t.like(2.0 ** (-8.0 * torch.arange(t.n_heads).double() / t.n_heads))
        ),
        N_(
            "for {inputs}, your slopes start at 2^0 = 1: the heads are counted from 1,"
            " m_h = 2^(-8h/H) for h = 1 .. H, so the steepest slope is 2^(-8/H)"
        ),
    ),
    Mistake(
        alibi_slopes_reversed,
        lambda t: t.n_heads > 1 and t.like(t.slopes.flip(0)),
        N_(
            "for {inputs}, your slopes are in reverse order: head 1 has the steepest,"
            " m_1 = 2^(-8/H), and head H the gentlest, 2^(-8)"
        ),
    ),
    Mistake(
        alibi_positive,
        lambda t: t.like(t.slopes, sign=1.0),
        N_(
            "for {inputs}, distant keys get a bonus: ALiBi subtracts m_h (i - j), a"
            " penalty that grows with the distance"
        ),
    ),
    Mistake(
        alibi_zero_future,
        lambda t: (
            t.T > 1
            and bool((t.got[:, ~t.lower] == 0).all())
            and close(t.got[:, t.lower], t.want[:, t.lower])
        ),
        N_(
            "for {inputs}, the future keys (j > i) get 0, which the softmax still"
            " weighs;"
            " they need -inf, the causal mask"
        ),
    ),
    Mistake(
        alibi_no_mask,
        lambda t: t.T > 1 and t.future_finite,
        N_(
            "for {inputs}, the keys after the query (j > i) are not masked; fill them"
            " with -inf, as the causal mask does"
        ),
    ),
    Mistake.mismatch(N_("your bias")),
]

check_alibi_bias = Checker(
    "check_alibi_bias",
    "Check ``candidate(n_heads, T) -> (n_heads, T, T)`` against the reference"
    " :func:`alibi_bias`.",
    _alibi_trials,
    ALIBI_MISTAKES,
    N_("{n} sizes agree with the reference, from 1 head to 8."),
)
