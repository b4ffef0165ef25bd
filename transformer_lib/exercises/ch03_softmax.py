"""Chapter 3: softmax, and scaled dot-product attention (with chapter 4's masks)."""

from __future__ import annotations

import math
from functools import cached_property

import torch

from ..attention import attention_scores, scaled_dot_product_attention, softmax
from ..masks import causal_mask, padding_mask
from .harness import (
    Checker,
    Mistake,
    Trial,
    close,
    finite,
    first_index,
    first_mismatch,
    gen,
    mismatch,
    not_a_tensor,
    randn,
    row,
    where,
    wrong_shape,
)

NEG_INF = float("-inf")

# --------------------------------------------------------------------------------------
# softmax(x, dim=-1)
# --------------------------------------------------------------------------------------


class SoftmaxTrial(Trial):
    def __init__(self, inputs: str, x: torch.Tensor, kwargs: dict) -> None:
        super().__init__(inputs, (x,), kwargs)
        self.x = x

    @cached_property
    def want(self) -> torch.Tensor:
        return softmax(self.x, **self.kwargs)

    @cached_property
    def dim(self) -> int:
        return self.kwargs.get("dim", -1) % self.x.dim()

    @cached_property
    def dead(self) -> torch.Tensor:
        """True along slices with nothing allowed (all -inf)."""
        return torch.isneginf(self.x).all(dim=self.dim, keepdim=True).expand_as(self.x)

    @cached_property
    def nan_on_dead_only(self) -> bool:
        return bool(self.dead.any()) and finite(self.got[~self.dead])

    @cached_property
    def largest_logit(self) -> float:
        return float(self.x[torch.isfinite(self.x)].abs().max())

    @cached_property
    def not_finite_at(self) -> tuple[int, ...]:
        return first_index(~torch.isfinite(self.got))

    @cached_property
    def ignores_dim(self) -> bool:
        last = softmax(self.x, dim=-1)
        return (
            bool(self.kwargs) and close(self.got, last) and not close(self.want, last)
        )

    @cached_property
    def sums_off(self) -> bool:
        """A slice along dim does not sum like the library's (to 1, or 0 if masked)."""
        return not close(self.got.sum(dim=self.dim), self.want.sum(dim=self.dim), 1e-4)

    @cached_property
    def bad_slice(self) -> str:
        idx, _, _ = first_mismatch(
            self.got.sum(dim=self.dim), self.want.sum(dim=self.dim), atol=1e-4
        )
        if self.dim == self.x.dim() - 1:
            return row(idx)
        return f"the slice along dim {self.dim} at {where(idx)}"

    @cached_property
    def bad_sum(self) -> float:
        sums, target = self.got.sum(dim=self.dim), self.want.sum(dim=self.dim)
        return float(first_mismatch(sums, target, atol=1e-4)[1])

    @cached_property
    def other_axis(self) -> int | None:
        """Another axis along which the output's slices sum to 1."""
        for other in range(self.x.dim()):
            sums = self.got.sum(dim=other)
            if other != self.dim and close(sums, torch.ones_like(sums), atol=1e-4):
                return other
        return None


def _softmax_trials() -> list[SoftmaxTrial]:
    g = gen(3)
    partly = randn(g, 3, 5)
    partly[0, 1] = partly[1, 3] = partly[1, 4] = NEG_INF
    fully = randn(g, 3, 4)
    fully[1] = NEG_INF
    large = torch.tensor(
        [[1e4, 9999.0, 9997.0, 0.0, -1e4], [-1e4, -9998.0, 0.0, 5.0, 2.0]]
    )
    return [
        SoftmaxTrial(
            "x of shape (4, 6) (random logits)", randn(g, 4, 6, scale=2.0), {}
        ),
        SoftmaxTrial(
            "x of shape (2, 3, 7) (a batch)", randn(g, 2, 3, 7, scale=2.0), {}
        ),
        SoftmaxTrial("x of shape (5,) (a single row)", randn(g, 5), {}),
        SoftmaxTrial(
            "logits of ±1e4, x = [[1e4, 9999, 9997, 0, -1e4], [-1e4, -9998, 0, 5, 2]]",
            large,
            {},
        ),
        SoftmaxTrial("a (3, 5) x where some entries are -inf (masked)", partly, {}),
        SoftmaxTrial(
            "a (3, 4) x whose row 1 is entirely -inf (a fully masked row)", fully, {}
        ),
        SoftmaxTrial("x of shape (5, 3) with dim=0", randn(g, 5, 3), {"dim": 0}),
        SoftmaxTrial("x of shape (2, 4, 3) with dim=1", randn(g, 2, 4, 3), {"dim": 1}),
    ]


# Known mistakes, each as a learner would write it


def softmax_nan_on_masked_row(x, dim=-1):
    return torch.softmax(x, dim=dim)  # a row of -inf gives 0/0


def softmax_no_max_subtraction(x, dim=-1):
    e = torch.exp(x)  # exp(1e4) = inf
    return e / e.sum(dim=dim, keepdim=True)


def softmax_ignores_dim(x, dim=-1):
    return softmax(x)  # tl.softmax over the last axis, whatever dim says


def softmax_wrong_axis(x, dim=-1):
    e = torch.exp(x - x.amax(dim=0, keepdim=True))
    return e / e.sum(dim=0, keepdim=True)  # normalises the columns


def softmax_exp_only(x, dim=-1):
    return torch.exp(x)


def softmax_not_normalised(x, dim=-1):
    return torch.exp(x - x.amax(dim=dim, keepdim=True))


SOFTMAX_MISTAKES = [
    not_a_tensor("your softmax's output for {inputs}"),
    wrong_shape(
        "your output", "a softmax returns a tensor of the same shape as its input"
    ),
    Mistake(
        softmax_nan_on_masked_row,
        lambda t: not finite(t.got) and t.nan_on_dead_only,
        "your output is NaN for {inputs}: exp(-inf) = 0 everywhere in that row, so you"
        " divide 0 by 0. The library returns all zeros for such a row (nothing may be"
        " attended to): when a row's maximum is -inf, subtract 0 instead of the"
        " maximum,"
        " and guard the division (what does softmax do to a row of -inf?)",
    ),
    Mistake(
        softmax_no_max_subtraction,
        lambda t: not finite(t.got) and t.largest_logit >= 1e3,
        "your output contains inf or NaN for {inputs}: exp(10000) overflows float32"
        " (whose largest value is about e^88.7). Subtract each row's maximum before"
        " exp(): softmax(x) = softmax(x - max x), and the largest exponent becomes"
        " exp(0) = 1",
    ),
    Mistake(  # catch-all for inf or NaN
        None,
        lambda t: not finite(t.got),
        lambda t: (
            f"your output{where(t.not_finite_at)} is "
            f"{t.got[t.not_finite_at]:.4g} for {t.inputs}; "
            f"expected {t.want[t.not_finite_at]:.4g}"
        ),
    ),
    Mistake(
        softmax_ignores_dim,
        lambda t: t.ignores_dim,
        "your function ignores its dim argument: for {inputs} it normalised along the"
        " last axis; softmax(x, dim={kwargs[dim]}) must make the slices along"
        " dim {kwargs[dim]} sum to 1",
    ),
    Mistake(
        softmax_wrong_axis,
        lambda t: t.sums_off and t.other_axis is not None,
        lambda t: (
            f"{t.bad_slice} of your output sums to {t.bad_sum:.4g}, not 1, for"
            f" {t.inputs}, while the slices along dim {t.other_axis} sum to 1: did you"
            " take"
            f" the softmax over the right axis (dim={t.kwargs.get('dim', -1)})?"
        ),
    ),
    Mistake(
        softmax_exp_only,
        lambda t: t.sums_off and close(t.got, torch.exp(t.x)),
        "{bad_slice} of your output sums to {bad_sum:.4g}, not 1, for {inputs}: you"
        " return exp(x); a softmax divides each exponential by the sum of the"
        " exponentials in its row",
    ),
    Mistake(
        softmax_not_normalised,
        lambda t: t.sums_off,
        "{bad_slice} of your output sums to {bad_sum:.4g}, not 1, for {inputs}: is it"
        " normalised? Divide each exponential by the sum of the exponentials along the"
        " softmax axis",
    ),
    mismatch("your output"),
]

check_softmax = Checker(
    "check_softmax",
    "Check ``candidate(x, dim=-1)`` against :func:`transformer_lib.softmax`.",
    _softmax_trials,
    SOFTMAX_MISTAKES,
    "{n} inputs agree with tl.softmax, including logits of ±1e4, a fully masked row"
    " and dim=0 / dim=1.",
)


# --------------------------------------------------------------------------------------
# scaled_dot_product_attention(q, k, v, mask=None) -> (out, weights)
# --------------------------------------------------------------------------------------


def _attention_variant(
    q, k, v, mask=None, *, scale=None, invert=False, after=False, fill=None, dim=-1
) -> torch.Tensor:
    """The weights of common mistakes, each named by its keyword.

    Another scale, an inverted mask, masking after the softmax, filling with a finite
    value, or the softmax over another axis.
    """
    scale = math.sqrt(q.size(-1)) if scale is None else scale
    s = q @ k.transpose(-2, -1) / scale  # (..., T_q, T_k)
    if mask is not None and not after:
        m = ~mask if invert else mask
        s = s.masked_fill(~m, NEG_INF if fill is None else fill)
    w = softmax(s, dim=dim)
    if mask is not None and after:
        w = w.masked_fill(~mask, 0.0)
    return w


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
            return "a single tensor"
        return type(self.got).__name__

    def like(self, **variant) -> bool:
        """The weights equal ``_attention_variant(q, k, v, mask, **variant)``."""
        mask = variant.pop("mask", self.mask)
        return close(
            self.got_w, _attention_variant(self.q, self.k, self.v, mask, **variant)
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
    def weights_not_finite_at(self) -> tuple[int, ...]:
        return first_index(~torch.isfinite(self.got_w))

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
            return " (filling them with 0 is not enough: exp(0) = 1)"
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
        return row(self.sums_off_at, "batch/head index")

    @cached_property
    def bad_sum(self) -> float:
        return float(self.sums[self.sums_off_at])

    @cached_property
    def over_queries(self) -> bool:
        col = _attention_variant(self.q, self.k, self.v, self.mask, dim=-2)
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


def _attention_trials() -> list[AttentionTrial]:
    g = gen(2)
    trials = [
        AttentionTrial(
            "q, k of shape (5, 16) and v of shape (5, 6), no mask",
            randn(g, 5, 16),
            randn(g, 5, 16),
            randn(g, 5, 6),
        ),
        AttentionTrial(
            "q (2, 3, 8), k (2, 7, 8), v (2, 7, 5): T_q = 3 ≠ T_k = 7, no mask",
            randn(g, 2, 3, 8),
            randn(g, 2, 7, 8),
            randn(g, 2, 7, 5),
        ),
        AttentionTrial(
            "q (2, 3, 5, 4), k and v (2, 3, 6, 4): batch and head axes, no mask",
            randn(g, 2, 3, 5, 4),
            randn(g, 2, 3, 6, 4),
            randn(g, 2, 3, 6, 4),
        ),
        AttentionTrial(
            "q, k, v of shape (2, 2, 5, 8) with the causal mask tl.causal_mask(5)",
            randn(g, 2, 2, 5, 8),
            randn(g, 2, 2, 5, 8),
            randn(g, 2, 2, 5, 8),
            causal_mask(5),
        ),
        AttentionTrial(
            "q (2, 2, 4, 8), k and v (2, 2, 6, 8) with the padding mask"
            " tl.padding_mask([6, 3], 6) of shape (2, 1, 1, 6)",
            randn(g, 2, 2, 4, 8),
            randn(g, 2, 2, 6, 8),
            randn(g, 2, 2, 6, 8),
            padding_mask([6, 3], 6),
        ),
    ]
    full = torch.tensor(
        [
            [True, True, False, False, True],
            [False] * 5,
            [True, False, True, True, False],
        ]
    )  # (3, 5): query 1 may attend to no key
    trials.append(
        AttentionTrial(
            "q (1, 2, 3, 8), k and v (1, 2, 5, 8) with a (3, 5) mask whose row 1 is all"
            " False (a fully masked query)",
            randn(g, 1, 2, 3, 8),
            randn(g, 1, 2, 5, 8),
            randn(g, 1, 2, 5, 8),
            full,
        )
    )
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
            "q (2, 4) and k (4, 4) whose scaled scores reach ±1e4, v (4, 3)",
            q,
            k,
            randn(g, 4, 3),
        )
    )
    trials.append(
        AttentionTrial(
            "q (1, 1, 7) and k, v (1, 4, 7): one query, odd d_k = 7, with the mask"
            " tl.causal_mask(1, 4)",
            randn(g, 1, 1, 7),
            randn(g, 1, 4, 7),
            randn(g, 1, 4, 7),
            causal_mask(1, 4),
        )
    )
    return trials


def _weights_hint(t: AttentionTrial) -> str:
    w = t.want_w
    if t.got_w.shape == w.shape[:-2] + (w.size(-1), w.size(-2)):
        return (
            "the weights have one row per query and one column per key; are you"
            " computing K Q^T instead of Q K^T?"
        )
    return "weights are (..., T_q, T_k): one row per query, one column per key"


# Known mistakes, each as a learner would write it


def _attention(
    q, k, v, mask=None, *, scale=None, fill=NEG_INF, invert=False, after=False, dim=-1
):
    """A learner's attention, softmax(q k^T / scale) v, with one thing changed."""
    scale = math.sqrt(q.size(-1)) if scale is None else scale
    scores = q @ k.transpose(-2, -1) / scale
    if mask is not None and not after:
        scores = scores.masked_fill(mask if invert else ~mask, fill)
    w = softmax(scores, dim=dim)
    if mask is not None and after:
        w = w.masked_fill(~mask, 0.0)
    return w @ v, w


def sdpa_returns_output_only(q, k, v, mask=None):
    out, w = _attention(q, k, v, mask)
    return out


def sdpa_weights_times_k(q, k, v, mask=None):
    out, w = _attention(q, k, v, mask)
    return w @ k, w


def sdpa_mask_inverted(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask, NEG_INF)  # fills where attending is allowed
    w = torch.softmax(scores, dim=-1)
    return w @ v, w


def sdpa_nan_on_fully_masked_rows(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, NEG_INF)
    w = torch.softmax(scores, dim=-1)  # a row of -inf gives NaN
    return w @ v, w


def sdpa_own_softmax_overflows(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, NEG_INF)
    e = scores.exp()  # no maximum subtracted: exp(1e4) = inf
    w = e / e.sum(-1, keepdim=True)
    if mask is not None:  # rows with no allowed key: zeros instead of 0 / 0
        w = w.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return w @ v, w


def sdpa_fill_minus_1e9(q, k, v, mask=None):
    return _attention(q, k, v, mask, fill=-1e9)


def sdpa_ignores_mask(q, k, v, mask=None):
    return _attention(q, k, v, None)


def sdpa_fill_zero(q, k, v, mask=None):
    return _attention(q, k, v, mask, fill=0.0)


def sdpa_mask_after_softmax(q, k, v, mask=None):
    return _attention(q, k, v, mask, after=True)


def sdpa_softmax_over_queries(q, k, v, mask=None):
    return _attention(q, k, v, mask, dim=-2)


def sdpa_weights_not_normalised(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    w = torch.exp(
        scores - scores.amax(dim=-1, keepdim=True)
    )  # never divided by the sum
    return w @ v, w


def sdpa_not_scaled(q, k, v, mask=None):
    return _attention(q, k, v, mask, scale=1.0)


def sdpa_scaled_by_d_k(q, k, v, mask=None):
    return _attention(q, k, v, mask, scale=q.size(-1))


def sdpa_multiplied_by_sqrt_d_k(q, k, v, mask=None):
    return _attention(q, k, v, mask, scale=1 / math.sqrt(q.size(-1)))


def sdpa_scaled_by_sqrt_T(q, k, v, mask=None):
    return _attention(q, k, v, mask, scale=math.sqrt(k.size(-2)))


def sdpa_output_from_scores(q, k, v, mask=None):
    out, w = _attention(q, k, v, mask)
    return attention_scores(q, k) @ v, w  # the raw scores, not the weights


ATTENTION_MISTAKES = [
    # what the function returns
    Mistake(
        sdpa_returns_output_only,
        lambda t: not t.is_pair,
        "your function returned {returned}; it should return the pair (output,"
        " weights), like tl.scaled_dot_product_attention: `return out, weights`",
    ),
    not_a_tensor("the output (first returned value) for {inputs}", attr="got_out"),
    not_a_tensor("the weights (second returned value) for {inputs}", attr="got_w"),
    wrong_shape("your weights", _weights_hint, attr="got_w", want="want_w"),
    wrong_shape(
        "your output",
        "the output is (..., T_q, d_v): one row per query, as wide as v",
        attr="got_out",
        want="want_out",
        example=sdpa_weights_times_k,
    ),
    # the mask
    Mistake(
        sdpa_mask_inverted,
        lambda t: t.inverted,
        "for {inputs}, your weights are zero on the keys the mask allows and positive"
        " on the keys it forbids: the mask convention is inverted. In this book a mask"
        " is bool with True = may attend, so fill the scores where the mask is False"
        " with -inf: scores.masked_fill(~mask, float('-inf'))",
    ),
    # inf or NaN
    Mistake(
        sdpa_nan_on_fully_masked_rows,
        lambda t: t.not_finite and t.nan_on_dead_only,
        "for {inputs}, your output is NaN where a row is fully masked (query"
        " {dead_row} may attend to no key): what does softmax do to a row of -inf? The"
        " library gives such a row zero weights and a zero output",
    ),
    Mistake(
        sdpa_own_softmax_overflows,
        lambda t: t.not_finite and t.largest_score >= 1e3,
        "your weights contain inf or NaN for {inputs}: exp(1e4) overflows. Subtract"
        " each row's maximum score before exp() (tl.softmax and torch.softmax both do)",
    ),
    Mistake(  # catch-all for inf or NaN in the weights
        None,
        lambda t: t.not_finite and not finite(t.got_w),
        lambda t: (
            f"your weights{where(t.weights_not_finite_at)} are "
            f"{t.got_w[t.weights_not_finite_at]:.4g} for {t.inputs}; "
            f"expected {t.want_w[t.weights_not_finite_at]:.4g}"
        ),
    ),
    Mistake(  # catch-all for inf or NaN in the output
        None,
        lambda t: t.not_finite,
        mismatch("your output", "got_out", "want_out").message,
    ),
    # weight where there should be none
    Mistake(
        sdpa_fill_minus_1e9,
        lambda t: bool(t.dead.any()) and t.dead_rows_uniform,
        "for {inputs}, the fully masked query spreads its weight evenly (1/{T_k} on"
        " every key) instead of having all-zero weights: filling masked scores with a"
        " large finite number (like -1e9) makes a row with no allowed key average every"
        " key. Fill with -inf, and make the softmax return zeros for a row that is all"
        " -inf (tl.softmax does)",
    ),
    Mistake(
        sdpa_ignores_mask,
        lambda t: t.attends_forbidden and t.like(mask=None),
        "your weights ignore the mask for {inputs}: fill the scores where the mask is"
        " False with -inf before the softmax",
    ),
    Mistake(
        sdpa_fill_zero,
        lambda t: t.attends_forbidden,
        lambda t: (
            f"for {t.inputs}, query {t.forbidden_at[-2]} puts weight"
            f" {t.got_w[t.forbidden_at]:.4g} on key {t.forbidden_at[-1]}, which the"
            " mask forbids: a masked score must be -inf before the softmax, so that its"
            " weight"
            f" is exactly 0{t.fill0}"
        ),
    ),
    # rows that do not sum to 1
    Mistake(
        sdpa_mask_after_softmax,
        lambda t: t.sums_off and t.mask is not None and t.like(after=True),
        "{bad_row} of your weights sums to {bad_sum:.4g}, not 1, for {inputs}, and your"
        " weights equal the unmasked weights with the masked keys set to 0: you masked"
        " after the softmax. Mask the scores (set them to -inf) before the softmax, so"
        " the allowed weights share the whole probability",
    ),
    Mistake(
        sdpa_softmax_over_queries,
        lambda t: t.sums_off and t.over_queries,
        "{bad_row} of your weights sums to {bad_sum:.4g}, not 1, for {inputs}, while"
        " each column sums to 1: you took the softmax over the query axis. Each query's"
        " weights over the keys, the last axis (dim=-1), must sum to 1",
    ),
    Mistake(
        sdpa_weights_not_normalised,
        lambda t: t.sums_off,
        "{bad_row} of your weights sums to {bad_sum:.4g}, not 1, for {inputs}: did you"
        " apply the softmax over the keys (dim=-1)?",
    ),
    # the scale
    Mistake(
        sdpa_not_scaled,
        lambda t: t.scaled_by(1.0),
        "for {inputs}, your weights match softmax(Q K^T) with no scaling at all: divide"
        " the scores by sqrt(d_k)",
    ),
    Mistake(
        sdpa_scaled_by_d_k,
        lambda t: t.scaled_by(float(t.d_k)),
        "for {inputs}, you divided the scores by d_k = {d_k}; the formula divides by"
        " its"
        " square root, sqrt(d_k) = {sqrt_d_k:.4g}",
    ),
    Mistake(
        sdpa_multiplied_by_sqrt_d_k,
        lambda t: t.scaled_by(1.0 / t.sqrt_d_k),
        "for {inputs}, you multiplied the scores by sqrt(d_k) instead of dividing by"
        " it",
    ),
    Mistake(
        sdpa_scaled_by_sqrt_T,
        lambda t: t.scaled_by(math.sqrt(t.T_k)),
        "for {inputs}, you divided the scores by sqrt(T) = sqrt({T_k}), the square root"
        " of the sequence length; the formula divides by sqrt(d_k) = sqrt({d_k}), the"
        " feature size of q and k",
    ),
    # a learner who divides by sqrt(T_q) meets the sqrt(T_k) row first (T_q = T_k there)
    Mistake(
        None,
        lambda t: t.scaled_by(math.sqrt(t.T_q)),
        "for {inputs}, you divided the scores by sqrt(T_q) = sqrt({T_q}), the square"
        " root of the number of queries; the formula divides by sqrt(d_k) ="
        " sqrt({d_k}), the feature size of q and k",
    ),
    # the output
    Mistake(  # catch-all for wrong weights
        None,
        lambda t: not close(t.got_w, t.want_w),
        mismatch("your weights", "got_w", "want_w").message,
    ),
    Mistake(
        sdpa_output_from_scores,
        lambda t: True,
        lambda t: (
            f"your weights are right but your output is not, for {t.inputs}:"
            f" output{where(t.out_mismatch[0])} is {t.out_mismatch[1]:.4g}, expected"
            f" {t.out_mismatch[2]:.4g}. The output is the weighted sum of the values,"
            " weights @ v"
        ),
    ),
]

check_scaled_dot_product_attention = Checker(
    "check_scaled_dot_product_attention",
    "Check ``candidate(q, k, v, mask=None) -> (out, weights)`` against"
    " :func:`transformer_lib.scaled_dot_product_attention`.",
    _attention_trials,
    ATTENTION_MISTAKES,
    "{n} inputs agree with tl.scaled_dot_product_attention, including T_q ≠ T_k, batch"
    " and head axes, causal and padding masks, a fully masked row and scores of ±1e4.",
)
