"""The language chapter: bits per character from a language model's logits."""

from __future__ import annotations

import math
from functools import cached_property

import torch

from .harness import Checker, Mistake, Trial, gen, randn
from .language import N_

# --------------------------------------------------------------------------------------
# bits_per_char(logits, targets, n_chars) -> float
# --------------------------------------------------------------------------------------


def reference_bits_per_char(logits, targets, n_chars):
    """-(1/n_chars) sum_t log2 softmax(logits_t)[targets_t]: the bits to write the
    text's tokens under the model, per character of the text."""
    logp = torch.log_softmax(logits.double(), dim=-1)  # (T, V)
    nll = -logp.gather(-1, targets[:, None]).sum()  # nats
    return float(nll / math.log(2) / n_chars)


class BitsTrial(Trial):
    atol, rtol = 1e-4, 1e-4

    def __init__(self, inputs: str, logits, targets, n_chars) -> None:
        super().__init__(inputs, (logits, targets, n_chars))
        self.logits, self.targets, self.n_chars = logits, targets, n_chars

    @cached_property
    def want(self) -> float:
        return reference_bits_per_char(self.logits, self.targets, self.n_chars)

    @cached_property
    def number(self) -> bool:
        g = self.got
        return isinstance(g, (int, float)) or (
            isinstance(g, torch.Tensor) and g.numel() == 1
        )

    @cached_property
    def value(self) -> float:
        return float(self.got)

    @cached_property
    def correct(self) -> bool:
        return self.number and math.isclose(self.value, self.want, rel_tol=1e-4)

    def near(self, x: float) -> bool:
        return math.isclose(self.value, x, rel_tol=1e-4)

    @cached_property
    def n_tokens(self) -> int:
        return len(self.targets)


def _bits_trials() -> list[BitsTrial]:
    g = gen(190)
    return [
        BitsTrial("logits (6, 5), 6 tokens of 14 characters", randn(g, 6, 5, scale=2.0),
                  torch.randint(0, 5, (6,), generator=g), 14),
        BitsTrial("logits (8, 30), 8 tokens of 8 characters (one per character)",
                  randn(g, 8, 30), torch.randint(0, 30, (8,), generator=g), 8),
        BitsTrial("logits (4, 7) shifted by +5 (softmax does not see a shift)",
                  randn(g, 4, 7) + 5.0, torch.randint(0, 7, (4,), generator=g), 11),
    ]  # fmt: skip


def bits_in_nats(logits, targets, n_chars):
    logp = torch.log_softmax(logits, dim=-1)
    return float(-logp.gather(-1, targets[:, None]).sum() / n_chars)  # nats


def bits_per_token(logits, targets, n_chars):
    logp = torch.log_softmax(logits, dim=-1)
    return float(-logp.gather(-1, targets[:, None]).mean() / math.log(2))


def bits_without_softmax(logits, targets, n_chars):
    picked = logits.gather(-1, targets[:, None])  # the raw logit, not a probability
    return float(-picked.sum() / math.log(2) / n_chars)


def bits_with_sign_flipped(logits, targets, n_chars):
    logp = torch.log_softmax(logits, dim=-1)
    return float(logp.gather(-1, targets[:, None]).sum() / math.log(2) / n_chars)


def _nats(t):
    return t.want * math.log(2)


BITS_MISTAKES = [
    Mistake(
        None,
        lambda t: not t.number,
        N_(
            "for {inputs}, return one number (a float or a 0-dim tensor), the bits per"
            " character of the whole text"
        ),
    ),
    Mistake(
        bits_in_nats,
        lambda t: t.near(_nats(t)),
        N_(
            "for {inputs}, you returned {value:.4f}, the nats per character: log is the"
            " natural logarithm; divide by ln 2 (or use log2) for bits"
        ),
    ),
    Mistake(
        bits_per_token,
        lambda t: t.near(t.want * t.n_chars / t.n_tokens),
        N_(
            "for {inputs}, you returned {value:.4f}, the bits per token: divide the"
            " total by the number of characters, n_chars, so that tokenizers can be"
            " compared"
        ),
    ),
    Mistake(
        bits_with_sign_flipped,
        lambda t: t.near(-t.want),
        N_(
            "for {inputs}, you returned {value:.4f} < 0: bits are -log2 p, and a"
            " probability below 1 has a negative log"
        ),
    ),
    Mistake(
        bits_without_softmax,
        lambda t: t.near(
            float(-t.logits.gather(-1, t.targets[:, None]).sum() / math.log(2))
            / t.n_chars
        ),
        N_(
            "for {inputs}, you used the raw logits as log-probabilities: take"
            " log_softmax over the vocabulary first"
        ),
    ),
    Mistake(
        None,
        lambda t: True,
        N_(
            "for {inputs}, you returned {value:.4f} bits per character; expected"
            " {want:.4f}"
        ),
    ),
]

check_bits_per_char = Checker(
    "check_bits_per_char",
    "Check ``candidate(logits, targets, n_chars)``, bits per character.",
    _bits_trials,
    BITS_MISTAKES,
    N_("{n} texts agree, with one token per character and shifted logits."),
)
