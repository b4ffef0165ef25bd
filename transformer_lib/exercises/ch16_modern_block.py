"""Chapter 16: RMSNorm (RoPE in the half layout: ``ch16_rope_half``)."""

from __future__ import annotations

from functools import cached_property

import torch

from ..norm import rms_norm
from .compare import close, finite
from .harness import Checker, Mistake, Trial, gen, randn
from .language import N_, _

# --------------------------------------------------------------------------------------
# rms_norm(x, weight, eps=1e-6): gamma * x / sqrt(mean(x^2) + eps)
# --------------------------------------------------------------------------------------


def _rms_variant(
    x,
    weight,
    eps,
    *,
    centre=False,
    eps_outside=False,
    no_eps=False,
    total=False,
    dims=(-1,),
    no_weight=False,
    no_sqrt=False,
    std=None,
) -> torch.Tensor:
    """RMSNorm with one of the common mistakes, each named by its keyword (float64)."""
    x, weight = x.double(), weight.double()
    if centre:
        x = x - x.mean(dim=-1, keepdim=True)
    ms = (x * x).sum(dim=dims, keepdim=True) if total else (x * x).mean(dims, True)
    if std is not None:  # the spread about the mean instead of the root mean square
        ms = x.var(dim=-1, keepdim=True, correction=int(std == "unbiased"))
    if no_eps:
        denom = ms.sqrt()
    elif eps_outside:
        denom = ms.sqrt() + eps
    elif no_sqrt:
        denom = ms + eps
    else:
        denom = (ms + eps).sqrt()
    y = x / denom
    return y if no_weight else weight * y


class RMSNormTrial(Trial):
    def __init__(self, inputs: str, x: torch.Tensor, weight: torch.Tensor, eps: float):
        super().__init__(inputs, (x, weight), {"eps": eps})
        self.x, self.weight, self.eps = x, weight, eps

    @cached_property
    def want(self) -> torch.Tensor:
        return rms_norm(self.x, self.weight, self.eps)

    def like(self, **variant) -> bool:
        return close(self.got, _rms_variant(self.x, self.weight, self.eps, **variant))


def _rms_trials() -> list[RMSNormTrial]:
    g = gen(16)
    x_tiny = randn(g, 3, 8, scale=1e-3)  # eps matters: mean(x^2) ~ 1e-6
    return [
        RMSNormTrial(
            _("x (4, 8), random weight, eps = 1e-6"),
            randn(g, 4, 8) + 2.0,
            1 + randn(g, 8, scale=0.3),
            1e-6,
        ),
        RMSNormTrial(
            _("x (2, 3, 16) (batch and time axes), eps = 1e-5"),
            randn(g, 2, 3, 16),
            1 + randn(g, 16, scale=0.3),
            1e-5,
        ),
        RMSNormTrial(
            _("x (3, 8) with entries about 1e-3, eps = 1e-6 (where eps matters)"),
            x_tiny,
            torch.ones(8),
            1e-6,
        ),
        RMSNormTrial(
            _("x (2, 4) whose first row is all zeros, eps = 1e-6"),
            torch.cat([torch.zeros(1, 4), randn(g, 1, 4)]),
            torch.ones(4),
            1e-6,
        ),
    ]


# Known mistakes, each as a learner would write it


def rms_subtracts_mean(x, weight, eps=1e-6):
    z = x - x.mean(-1, keepdim=True)  # that is LayerNorm's centring
    return weight * z / torch.sqrt(z.pow(2).mean(-1, keepdim=True) + eps)


def rms_eps_outside(x, weight, eps=1e-6):
    return weight * x / (torch.sqrt(x.pow(2).mean(-1, keepdim=True)) + eps)


def rms_no_eps(x, weight, eps=1e-6):
    return weight * x / x.pow(2).mean(-1, keepdim=True).sqrt()


def rms_sum_not_mean(x, weight, eps=1e-6):
    return weight * x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + eps)


def rms_all_axes(x, weight, eps=1e-6):
    return weight * x / torch.sqrt(x.pow(2).mean() + eps)  # one RMS for the tensor


def rms_no_weight(x, weight, eps=1e-6):
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def rms_divides_by_std(x, weight, eps=1e-6):
    return weight * x / torch.sqrt(x.var(-1, keepdim=True) + eps)  # not centred


def _divides_by_std(t) -> bool:
    return any(
        t.like(std=kind, **how)
        for kind in ("biased", "unbiased")
        for how in ({}, {"eps_outside": True}, {"no_eps": True})
    )


def rms_no_sqrt(x, weight, eps=1e-6):
    return weight * x / (x.pow(2).mean(-1, keepdim=True) + eps)


_EPS_NOTE = N_(
    "RMSNorm divides by sqrt(mean(x^2) + eps), eps inside the square root, as"
    " torch.nn.RMSNorm and Llama do"
)

RMS_MISTAKES = [
    # what the function returns
    Mistake.not_a_tensor(N_("your output for {inputs}")),
    Mistake.wrong_shape(N_("your output"), N_("RMSNorm keeps the shape of x")),
    # the formula
    Mistake(
        rms_subtracts_mean,
        lambda t: t.like(centre=True),
        N_(
            "for {inputs}, you subtracted the mean of each row first: that is"
            " LayerNorm;"
            " RMSNorm drops the centring and divides x itself by its root mean square"
        ),
    ),
    Mistake(
        rms_divides_by_std,
        _divides_by_std,
        N_(
            "for {inputs}, you divided by the standard deviation of each row, its"
            " spread about the mean; RMSNorm divides by the root mean square,"
            " sqrt(mean(x^2) + eps), which does not subtract the mean"
        ),
    ),
    Mistake(
        rms_no_weight,
        lambda t: t.like(no_weight=True),
        N_(
            "for {inputs}, the gain is missing: multiply the normalised x by weight"
            " (gamma), feature by feature"
        ),
    ),
    Mistake(
        rms_sum_not_mean,
        lambda t: t.like(total=True),
        N_(
            "for {inputs}, you summed the squares instead of averaging them: the root"
            " mean"
            " square is sqrt(mean(x^2)), over the d features"
        ),
    ),
    Mistake(
        rms_all_axes,
        lambda t: t.like(dims=tuple(range(t.x.dim()))),
        N_(
            "for {inputs}, you averaged the squares over the whole tensor; each token"
            " (each"
            " row along the last axis) gets its own root mean square: mean(dim=-1,"
            " keepdim=True)"
        ),
    ),
    Mistake(
        rms_no_sqrt,
        lambda t: t.like(no_sqrt=True),
        N_("for {inputs}, you divided by mean(x^2) + eps without the square root"),
    ),
    Mistake(
        rms_no_eps,
        lambda t: not finite(t.got) or t.like(no_eps=True),
        (
            N_(
                "for {inputs}, eps is missing: a row of zeros gives 0/0 and tiny rows"
                " are blown up; "
            ),
            _EPS_NOTE,
        ),
    ),
    Mistake(
        rms_eps_outside,
        lambda t: t.like(eps_outside=True),
        (N_("for {inputs}, eps is added after the square root; "), _EPS_NOTE),
    ),
    Mistake.mismatch(N_("your output")),
]

check_rms_norm = Checker(
    "check_rms_norm",
    "Check ``candidate(x, weight, eps)`` against :func:`transformer_lib.rms_norm`.",
    _rms_trials,
    RMS_MISTAKES,
    N_(
        "{n} inputs agree with tl.rms_norm, including tiny values where eps matters"
        " and a"
        " row of zeros."
    ),
)
