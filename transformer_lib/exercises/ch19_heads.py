"""The language chapter's heads: the induction score of each head of a layer.

Chapter 19 (book/19_language.ipynb) calls it beside the checkers of
:mod:`.ch19_language`.
"""

from __future__ import annotations

from functools import cached_property

import torch

from .compare import close
from .harness import Checker, Mistake, Trial, gen, randn
from .language import N_

# --------------------------------------------------------------------------------------
# induction_score(weights, n) -> (h,)
# --------------------------------------------------------------------------------------


def reference_induction_score(weights, n):
    """weights (h, 2n, 2n): one layer's attention on n random tokens repeated twice.
    Per head, the mean over the second copy's positions n + i of the weight on
    position i + 1, the token that followed the first occurrence of token i."""
    i = torch.arange(n)
    return weights[:, n + i, i + 1].mean(-1)  # (h,)


class ScoreTrial(Trial):
    def __init__(self, inputs: str, weights, n) -> None:
        super().__init__(inputs, (weights, n))
        self.weights, self.n = weights, n

    @cached_property
    def want(self):
        return reference_induction_score(self.weights, self.n)

    def stripe(self, offset: int, first: int | None = None) -> torch.Tensor:
        """Per head, the mean of weights[:, q, q + offset] over queries q >= first."""
        T = self.weights.shape[-1]
        first = self.n if first is None else first
        q = torch.arange(max(first, -offset), min(T, T - offset))
        return self.weights[:, q, q + offset].mean(-1)


def _causal_weights(g, h, T):
    s = randn(g, h, T, T, scale=2.0)
    s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(s, dim=-1)


def _score_trials() -> list[ScoreTrial]:
    g = gen(1919)
    return [
        ScoreTrial("weights (4, 12, 12), n = 6", _causal_weights(g, 4, 12), 6),
        ScoreTrial("weights (2, 20, 20), n = 10", _causal_weights(g, 2, 20), 10),
    ]


def induction_on_the_token_itself(weights, n):
    i = torch.arange(n)
    return weights[:, n + i, i].mean(-1)  # the first occurrence, not the token after


def induction_previous_token(weights, n):
    t = torch.arange(1, 2 * n)
    return weights[:, t, t - 1].mean(-1)  # a previous-token score


def induction_summed(weights, n):
    i = torch.arange(n)
    return weights[:, n + i, i + 1].sum(-1)


def induction_all_heads(weights, n):
    i = torch.arange(n)
    return weights[:, n + i, i + 1].mean()  # one number for the layer


SCORE_MISTAKES = [
    Mistake.not_a_tensor(N_("your score for {inputs}")),
    Mistake.wrong_shape(
        N_("your score"),
        N_("one score per head, (h,): average over the positions only"),
        example=induction_all_heads,
    ),
    Mistake(
        induction_on_the_token_itself,
        lambda t: close(t.got, t.stripe(-t.n)),
        N_(
            "for {inputs}, you scored the weight on the first occurrence of the same"
            " token (offset -n); an induction head looks one further, at the token that"
            " came after it (offset -(n - 1))"
        ),
    ),
    Mistake(
        induction_previous_token,
        lambda t: close(t.got, t.stripe(-1, first=1)),
        N_(
            "for {inputs}, you computed the previous-token score (offset -1); the"
            " induction score reads weights[:, n + i, i + 1], from the second copy to"
            " the first"
        ),
    ),
    Mistake(
        induction_summed,
        lambda t: close(t.got, t.want * t.n),
        N_(
            "for {inputs}, you summed over the n positions; average them, so that the"
            " score is a weight between 0 and 1"
        ),
    ),
    Mistake.mismatch(N_("your score")),
]

check_induction_score = Checker(
    "check_induction_score",
    "Check ``candidate(weights, n)``, the induction score of each head.",
    _score_trials,
    SCORE_MISTAKES,
    N_("{n} layers' scores agree, head by head."),
)
