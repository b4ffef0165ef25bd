"""Chapter 3's exercise checker for softmax; the one for scaled dot-product attention
is in :mod:`.ch03_attention`."""

from __future__ import annotations

from functools import cached_property

import torch

from ..attention import softmax
from .compare import close, finite, first_mismatch, row, where
from .harness import Checker, Mistake, Trial, gen, randn
from .language import N_, _

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
        idx, _got, _want = first_mismatch(
            self.got.sum(dim=self.dim), self.want.sum(dim=self.dim), atol=1e-4
        )
        if self.dim == self.x.dim() - 1:
            return row(idx)
        return _("the slice along dim {dim} at {index}").format(
            dim=self.dim, index=where(idx)
        )

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
            _("x of shape (4, 6) (random logits)"), randn(g, 4, 6, scale=2.0), {}
        ),
        SoftmaxTrial(
            _("x of shape (2, 3, 7) (a batch)"), randn(g, 2, 3, 7, scale=2.0), {}
        ),
        SoftmaxTrial(_("x of shape (5,) (a single row)"), randn(g, 5), {}),
        SoftmaxTrial(
            _(
                "logits of ±1e4, x = [[1e4, 9999, 9997, 0, -1e4], [-1e4, -9998, 0, 5,"
                " 2]]"
            ),
            large,
            {},
        ),
        SoftmaxTrial(_("a (3, 5) x where some entries are -inf (masked)"), partly, {}),
        SoftmaxTrial(
            _("a (3, 4) x whose row 1 is entirely -inf (a fully masked row)"), fully, {}
        ),
        SoftmaxTrial(_("x of shape (5, 3) with dim=0"), randn(g, 5, 3), {"dim": 0}),
        SoftmaxTrial(
            _("x of shape (2, 4, 3) with dim=1"), randn(g, 2, 4, 3), {"dim": 1}
        ),
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
    Mistake.not_a_tensor(N_("your softmax's output for {inputs}")),
    Mistake.wrong_shape(
        N_("your output"),
        N_("a softmax returns a tensor of the same shape as its input"),
    ),
    Mistake(
        softmax_nan_on_masked_row,
        lambda t: not finite(t.got) and t.nan_on_dead_only,
        N_(
            "your output is NaN for {inputs}: exp(-inf) = 0 everywhere in that row, so"
            " you"
            " divide 0 by 0. The library returns all zeros for such a row (nothing may"
            " be"
            " attended to): when a row's maximum is -inf, subtract 0 instead of the"
            " maximum,"
            " and guard the division (what does softmax do to a row of -inf?)"
        ),
    ),
    Mistake(
        softmax_no_max_subtraction,
        lambda t: not finite(t.got) and t.largest_logit >= 1e3,
        N_(
            "your output contains inf or NaN for {inputs}: exp(10000) overflows float32"
            " (whose largest value is about e^88.7). Subtract each row's maximum before"
            " exp(): softmax(x) = softmax(x - max x), and the largest exponent becomes"
            " exp(0) = 1"
        ),
    ),
    Mistake.not_finite(
        N_("your output{index} is {got:.4g} for {inputs}; expected {want:.4g}")
    ),
    Mistake(
        softmax_ignores_dim,
        lambda t: t.ignores_dim,
        N_(
            "your function ignores its dim argument: for {inputs} it normalised along"
            " the"
            " last axis; softmax(x, dim={kwargs[dim]}) must make the slices along"
            " dim {kwargs[dim]} sum to 1"
        ),
    ),
    Mistake(
        softmax_wrong_axis,
        lambda t: t.sums_off and t.other_axis is not None,
        lambda t: _(
            "{bad_slice} of your output sums to {bad_sum:.4g}, not 1, for {inputs},"
            " while the slices along dim {other} sum to 1: did you take the softmax"
            " over the right axis (dim={dim})?"
        ).format(
            bad_slice=t.bad_slice,
            bad_sum=t.bad_sum,
            inputs=t.inputs,
            other=t.other_axis,
            dim=t.kwargs.get("dim", -1),
        ),
    ),
    Mistake(
        softmax_exp_only,
        lambda t: t.sums_off and close(t.got, torch.exp(t.x)),
        N_(
            "{bad_slice} of your output sums to {bad_sum:.4g}, not 1, for {inputs}: you"
            " return exp(x); a softmax divides each exponential by the sum of the"
            " exponentials in its row"
        ),
    ),
    Mistake(
        softmax_not_normalised,
        lambda t: t.sums_off,
        N_(
            "{bad_slice} of your output sums to {bad_sum:.4g}, not 1, for {inputs}: is"
            " it"
            " normalised? Divide each exponential by the sum of the exponentials along"
            " the"
            " softmax axis"
        ),
    ),
    Mistake.mismatch(N_("your output")),
]

check_softmax = Checker(
    "check_softmax",
    "Check ``candidate(x, dim=-1)`` against :func:`transformer_lib.softmax`.",
    _softmax_trials,
    SOFTMAX_MISTAKES,
    N_(
        "{n} inputs agree with tl.softmax, including logits of ±1e4, a fully masked row"
        " and dim=0 / dim=1."
    ),
)
