"""Chapter 16: RMSNorm, and RoPE in the half layout."""

from __future__ import annotations

from functools import cached_property

import torch

from ..norm import rms_norm
from ..positional import apply_rope
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


# --------------------------------------------------------------------------------------
# apply_rope_half(x, positions, base): pair i is (x_i, x_i+d/2)
# --------------------------------------------------------------------------------------


def _rope_half_variant(
    x,
    positions,
    base,
    *,
    interleaved=False,
    backwards=False,
    unrepeated=False,
    power="2i",
) -> torch.Tensor:
    """The half layout with one of the common mistakes (float64)."""
    x = x.double()
    d = x.size(-1)
    if unrepeated:  # one angle per feature: theta_j = base^(-j/d), j = 0 .. d-1
        inv = base ** (-torch.arange(d, dtype=torch.float64) / d)
        ang = positions.double()[:, None] * inv  # (T, d)
        rotated = torch.cat([-x[..., d // 2 :], x[..., : d // 2]], -1)
        return x * ang.cos() + rotated * ang.sin()
    i = torch.arange(d // 2, dtype=torch.float64)
    exponent = {"2i": 2 * i / d, "i": i / d}[power]
    pos = -positions if backwards else positions
    ang = pos.double()[:, None] * base**-exponent  # (T, d/2)
    cos, sin = ang.cos(), ang.sin()
    if interleaved:
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), -1).flatten(-2)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


class RopeHalfTrial(Trial):
    def __init__(self, inputs: str, x: torch.Tensor, positions: torch.Tensor, base):
        super().__init__(inputs, (x, positions), {"base": base})
        self.x, self.positions, self.base = x, positions, base

    @cached_property
    def want(self) -> torch.Tensor:
        return apply_rope(self.x, self.positions, self.base, layout="half")

    def like(self, base: float | None = None, **variant) -> bool:
        base = self.base if base is None else base
        return close(
            self.got, _rope_half_variant(self.x, self.positions, base, **variant)
        )

    @cached_property
    def ignores_positions(self) -> bool:
        from_zero = apply_rope(
            self.x, torch.arange(self.x.size(-2)), self.base, layout="half"
        )
        return bool(self.positions[0] != 0) and close(self.got, from_zero)

    @cached_property
    def lengths_kept(self) -> bool:
        """Every pair (x_i, x_i+d/2) keeps its length, as a rotation must."""
        h = self.d // 2

        def lengths(v: torch.Tensor) -> torch.Tensor:
            v = v.double()
            return torch.hypot(v[..., :h], v[..., h:])

        return close(lengths(self.got), lengths(self.x), atol=1e-4)

    @property
    def d(self) -> int:
        return self.x.size(-1)


def _rope_half_trials() -> list[RopeHalfTrial]:
    g = gen(17)
    return [
        RopeHalfTrial(
            _("x (6, 8), positions = torch.arange(6), base = 10000"),
            randn(g, 6, 8),
            torch.arange(6),
            10000.0,
        ),
        RopeHalfTrial(
            _(
                "x (2, 3, 5, 16) (batch and head axes), positions = torch.arange(5),"
                " base = 500000 (Llama 3's rope_theta)"
            ),
            randn(g, 2, 3, 5, 16),
            torch.arange(5),
            500000.0,
        ),
        RopeHalfTrial(
            _(
                "x (1, 2, 4, 8), positions = torch.arange(10, 14) (after a KV cache),"
                " base = 10000"
            ),
            randn(g, 1, 2, 4, 8),
            torch.arange(10, 14),
            10000.0,
        ),
        RopeHalfTrial(
            _("x (3, 2) (a single pair), positions = torch.arange(3), base = 10000"),
            randn(g, 3, 2),
            torch.arange(3),
            10000.0,
        ),
    ]


# Known mistakes, each as a learner would write it


def _angles(positions, d, base, power=2):
    """A learner's (T, d/2) angles pos * base^(-power*i/d)."""
    i = torch.arange(d // 2, dtype=torch.float64)
    return positions.double()[:, None] * base ** (-power * i / d)


def _half(x, angle, sign=1.0):
    """x * cos + rotate_half(x) * sin with the angles repeated over both halves."""
    d = x.size(-1)
    cos = torch.cat([angle.cos(), angle.cos()], -1).to(x.dtype)
    sin = torch.cat([angle.sin(), angle.sin()], -1).to(x.dtype)
    rotated = torch.cat([-x[..., d // 2 :], x[..., : d // 2]], -1)
    return x * cos + sign * rotated * sin


def rope_half_interleaved(x, positions, base=10000.0):
    return apply_rope(x, positions, base)  # neighbours (x_2i, x_2i+1): chapter 8's


def rope_half_swapped_signs(x, positions, base=10000.0):
    d = x.size(-1)
    angle = _angles(positions, d, base)
    cos = torch.cat([angle.cos(), angle.cos()], -1).to(x.dtype)
    sin = torch.cat([angle.sin(), angle.sin()], -1).to(x.dtype)
    rotated = torch.cat([x[..., d // 2 :], -x[..., : d // 2]], -1)  # sign on x1
    return x * cos + rotated * sin


def rope_half_not_repeated(x, positions, base=10000.0):
    d = x.size(-1)
    angle = positions.double()[:, None] * base ** (-torch.arange(d) / d)  # (T, d)
    rotated = torch.cat([-x[..., d // 2 :], x[..., : d // 2]], -1)
    return x * angle.cos().to(x.dtype) + rotated * angle.sin().to(x.dtype)


def rope_half_exponent_i(x, positions, base=10000.0):
    return _half(x, _angles(positions, x.size(-1), base, power=1))


def rope_half_ignores_base(x, positions, base=10000.0):
    return _half(x, _angles(positions, x.size(-1), 10000.0))


def rope_half_ignores_positions(x, positions, base=10000.0):
    return _half(x, _angles(torch.arange(x.size(-2)), x.size(-1), base))


ROPE_HALF_MISTAKES = [
    Mistake.not_a_tensor(N_("your output for {inputs}")),
    Mistake.wrong_shape(
        N_("your output"), N_("RoPE rotates x in place: the output has the shape of x")
    ),
    Mistake(
        rope_half_interleaved,
        lambda t: t.d > 2 and t.like(interleaved=True),
        N_(
            "for {inputs}, you paired neighbours (x_2i, x_2i+1), the interleaved"
            " layout of"
            " chapter 8; the half layout pairs feature i with feature i + d/2"
        ),
    ),
    Mistake(
        rope_half_ignores_base,
        lambda t: t.base != 10000.0 and t.like(base=10000.0),
        N_(
            "for {inputs}, your function ignores its base argument and uses 10000; the"
            " frequencies are theta_i = base^(-2i/d)"
        ),
    ),
    Mistake(
        rope_half_ignores_positions,
        lambda t: t.ignores_positions,
        N_(
            "your function ignores its positions argument: for {inputs} it rotated as"
            " if"
            " the positions were 0, 1, 2, ..."
        ),
    ),
    Mistake(
        rope_half_swapped_signs,
        lambda t: t.like(backwards=True),
        N_(
            "for {inputs}, every pair turns backwards: rotate_half(x) is (-x2, x1),"
            " with"
            " the minus sign on the second half x2 = x[..., d/2:]"
        ),
    ),
    Mistake(
        rope_half_exponent_i,
        lambda t: t.d > 2 and t.like(power="i"),
        N_(
            "for {inputs}, your frequencies are base^(-i/d); pair i turns by"
            " pos * base^(-2i/d)"
        ),
    ),
    Mistake(
        rope_half_not_repeated,
        lambda t: t.d > 2 and (t.like(unrepeated=True) or not t.lengths_kept),
        N_(
            "for {inputs}, the pairs (x_i, x_i+d/2) change length, so this is not a"
            " rotation: both halves must use the same d/2 angles, Theta = (theta_0 .."
            " theta_{{d/2-1}}, theta_0 .. theta_{{d/2-1}})"
        ),
    ),
    Mistake.mismatch(N_("your output")),
]

check_apply_rope_half = Checker(
    "check_apply_rope_half",
    "Check ``candidate(x, positions, base)`` against"
    ' :func:`transformer_lib.apply_rope` with ``layout="half"``.',
    _rope_half_trials,
    ROPE_HALF_MISTAKES,
    N_(
        "{n} inputs agree with tl.apply_rope(..., layout='half'), including base"
        " 500000,"
        " positions from 10 and d = 2."
    ),
)
