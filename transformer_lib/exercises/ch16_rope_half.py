"""Chapter 16: RoPE in the half layout, pair i being (x_i, x_{i+d/2})."""

from __future__ import annotations

from functools import cached_property

import torch

from ..positional import apply_rope
from .compare import close
from .harness import Checker, Mistake, Trial, gen, randn
from .language import N_, _

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
