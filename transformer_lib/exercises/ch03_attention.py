"""Chapter 3's exercise checker for scaled dot-product attention (with chapter 4's
masks): its trials, and the checker over the catalogue of known mistakes in
:mod:`.ch03_attention_mistakes`."""

from __future__ import annotations

import math
from functools import cached_property

import torch

from ..attention import scaled_dot_product_attention
from ..masks import causal_mask, padding_mask
from .ch03_attention_mistakes import ATTENTION_MISTAKES, learner_attention
from .compare import close, finite, first_index, first_mismatch, row, shape
from .harness import Checker, Trial, gen, randn
from .language import N_, _

NEG_INF = float("-inf")


class AttentionTrial(Trial):
    def __init__(self, inputs, q, k, v, mask=None) -> None:
        kwargs = {} if mask is None else {"mask": mask}
        super().__init__(inputs, (q, k, v), kwargs)
        self.q, self.k, self.v, self.mask = q, k, v, mask
        self.d_k, self.T_q, self.T_k = q.size(-1), q.size(-2), k.size(-2)

    @cached_property
    def want(self) -> tuple[torch.Tensor, torch.Tensor]:
        return scaled_dot_product_attention(self.q, self.k, self.v, self.mask)

    @property
    def want_out(self) -> torch.Tensor:
        return self.want[0]

    @property
    def want_w(self) -> torch.Tensor:
        return self.want[1]

    @cached_property
    def is_pair(self) -> bool:
        got = self.got
        return (
            not isinstance(got, torch.Tensor)
            and isinstance(got, (tuple, list))
            and len(got) == 2
        )

    @property
    def got_out(self):
        return self.got[0]

    @property
    def got_w(self):
        return self.got[1]

    @cached_property
    def correct(self) -> bool:
        return (
            self.is_pair
            and close(self.got_w, self.want_w)
            and close(self.got_out, self.want_out)
        )

    @cached_property
    def returned(self) -> str:
        if isinstance(self.got, torch.Tensor):
            return _("a single tensor")
        return type(self.got).__name__

    def like(self, **variant) -> bool:
        """The weights equal those of ``learner_attention(q, k, v, mask, **kw)``."""
        mask = variant.pop("mask", self.mask)
        return close(
            self.got_w, learner_attention(self.q, self.k, self.v, mask, **variant)[1]
        )

    @cached_property
    def allowed(self) -> torch.Tensor:
        if self.mask is None:
            return torch.ones_like(self.want_w, dtype=torch.bool)
        return self.mask.expand_as(self.want_w)

    @cached_property
    def dead(self) -> torch.Tensor:
        """(..., T_q): the fully masked queries."""
        return ~self.allowed.any(dim=-1)

    @cached_property
    def inverted(self) -> bool:
        """No weight on any allowed key of the queries that have both kinds of key."""
        if self.mask is None:
            return False
        finite_rows = torch.isfinite(self.got_w).all(dim=-1)  # (..., T_q)
        mixed = ~self.dead & ~self.allowed.all(dim=-1) & finite_rows
        on_allowed = (self.got_w.nan_to_num(0.0) * self.allowed).sum(dim=-1)
        return bool(mixed.any()) and bool((on_allowed[mixed] < 1e-4).all())

    @cached_property
    def not_finite(self) -> bool:
        return not (finite(self.got_w) and finite(self.got_out))

    @cached_property
    def nan_on_dead_only(self) -> bool:
        got_w, got_out = self.got_w, self.got_out
        bad = ~torch.isfinite(got_w).all(dim=-1) | ~torch.isfinite(got_out).all(dim=-1)
        return bool(self.dead.any()) and not bool((bad & ~self.dead).any())

    @cached_property
    def dead_row(self) -> int:
        return int(self.dead.nonzero()[0][-1])

    @cached_property
    def largest_score(self) -> float:
        scores = self.q @ self.k.transpose(-2, -1)
        return float(scores.abs().max() / math.sqrt(self.d_k))

    @cached_property
    def dead_rows_uniform(self) -> bool:
        row_w = self.got_w[self.dead]  # (n_dead, T_k)
        return close(row_w, torch.full_like(row_w, 1.0 / self.T_k), atol=1e-4)

    @cached_property
    def forbidden_w(self) -> torch.Tensor:
        """The weight on keys that the mask forbids."""
        return (self.got_w * ~self.allowed).abs()

    @cached_property
    def attends_forbidden(self) -> bool:
        return self.mask is not None and float(self.forbidden_w.max()) > 1e-4

    @cached_property
    def forbidden_at(self) -> tuple[int, ...]:
        return first_index(self.forbidden_w > 1e-4)

    @cached_property
    def fill0(self) -> str:
        if self.like(fill=0.0):
            return _(" (filling them with 0 is not enough: exp(0) = 1)")
        return ""

    @cached_property
    def sums(self) -> torch.Tensor:
        return self.got_w.sum(dim=-1)  # (..., T_q)

    @cached_property
    def sums_off(self) -> bool:
        live = self.sums[~self.dead]
        return not close(live, torch.ones_like(live), atol=1e-4)

    @cached_property
    def sums_off_at(self) -> tuple[int, ...]:
        return first_index(((self.sums - 1).abs() > 1e-4).logical_and(~self.dead))

    @cached_property
    def bad_row(self) -> str:
        return row(self.sums_off_at, _("batch/head index"))

    @cached_property
    def bad_sum(self) -> float:
        return float(self.sums[self.sums_off_at])

    @cached_property
    def over_queries(self) -> bool:
        col = learner_attention(self.q, self.k, self.v, self.mask, dim=-2)[1]
        return close(self.got_w, col) or close(
            self.got_w.sum(dim=-2), col.sum(dim=-2), atol=1e-4
        )

    @cached_property
    def sqrt_d_k(self) -> float:
        return math.sqrt(self.d_k)

    def scaled_by(self, scale: float) -> bool:
        """The weights are the attention's with the scores divided by ``scale``."""
        return not math.isclose(scale, self.sqrt_d_k) and self.like(scale=scale)

    @cached_property
    def out_mismatch(self):
        return first_mismatch(self.got_out, self.want_out)


def _drawn(g, q: tuple, kv: tuple, mask=None, note: str = "", v=None) -> AttentionTrial:
    """q of shape ``q``, k of shape ``kv`` and v of shape ``v`` (``kv`` if None), drawn
    from ``g``; the trial says their shapes, then ``note``."""
    if v is None:
        v, kv_said = kv, _("k and v {shape}").format(shape=shape(kv))
    else:
        kv_said = _("k {k}, v {v}").format(k=shape(kv), v=shape(v))
    inputs = _("q {q}, {kv}").format(q=shape(q), kv=kv_said) + note
    return AttentionTrial(inputs, randn(g, *q), randn(g, *kv), randn(g, *v), mask)


def _attention_trials() -> list[AttentionTrial]:
    g = gen(2)
    full = torch.tensor(
        [
            [True, True, False, False, True],
            [False] * 5,
            [True, False, True, True, False],
        ]
    )  # (3, 5): query 1 may attend to no key
    trials = [
        _drawn(g, (5, 16), (5, 16), v=(5, 6), note=_(", no mask")),
        _drawn(
            g, (2, 3, 8), (2, 7, 8), v=(2, 7, 5), note=_(": T_q = 3 ≠ T_k = 7, no mask")
        ),
        _drawn(g, (2, 3, 5, 4), (2, 3, 6, 4), note=_(": batch and head axes, no mask")),
        _drawn(
            g, (2, 2, 5, 8), (2, 2, 5, 8), causal_mask(5), _(" with tl.causal_mask(5)")
        ),
        _drawn(
            g,
            (2, 2, 4, 8),
            (2, 2, 6, 8),
            padding_mask([6, 3], 6),
            _(
                " with the padding mask tl.padding_mask([6, 3], 6) of shape (2, 1, 1,"
                " 6)"
            ),
        ),
        _drawn(
            g,
            (1, 2, 3, 8),
            (1, 2, 5, 8),
            full,
            _(" with a (3, 5) mask whose row 1 is all False (a fully masked query)"),
        ),
    ]
    # scores of 1e4 after dividing by sqrt(4)
    q = torch.tensor([[200.0, 0.0, 0.0, 0.0], [0.0, -200.0, 0.0, 0.0]])
    k = torch.tensor(
        [
            [100.0, 0.0, 0.0, 0.0],
            [99.0, 0.0, 0.0, 0.0],
            [0.0, 100.0, 0.0, 0.0],
            [0.0, 0.0, 1.0, 0.0],
        ]
    )
    trials.append(
        AttentionTrial(
            _("q (2, 4) and k (4, 4) whose scaled scores reach ±1e4, v (4, 3)"),
            q,
            k,
            randn(g, 4, 3),
        )
    )
    note = _(": one query, odd d_k = 7, with tl.causal_mask(1, 4)")
    trials.append(_drawn(g, (1, 1, 7), (1, 4, 7), causal_mask(1, 4), note))
    return trials


check_scaled_dot_product_attention = Checker(
    "check_scaled_dot_product_attention",
    "Check ``candidate(q, k, v, mask=None) -> (out, weights)`` against"
    " :func:`transformer_lib.scaled_dot_product_attention`.",
    _attention_trials,
    ATTENTION_MISTAKES,
    N_(
        "{n} inputs agree with tl.scaled_dot_product_attention, including T_q ≠ T_k,"
        " batch"
        " and head axes, causal and padding masks, a fully masked row and scores of"
        " ±1e4."
    ),
)
