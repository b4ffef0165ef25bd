"""Chapter 8: RoPE, each pair of features rotated by an angle that grows with the
position."""

from __future__ import annotations

import math
from functools import cached_property

import torch

from ..positional import apply_rope, rope_angles
from .compare import close, finite, first_mismatch
from .harness import Checker, Mistake, Trial, gen, randn
from .language import N_, _

# --------------------------------------------------------------------------------------
# apply_rope(x, positions): rotate each pair (x_2i, x_2i+1) by pos * theta_i
# --------------------------------------------------------------------------------------


def _rope_variant(x, positions, *, halves=False, power="2i") -> torch.Tensor:
    """RoPE with one of the common mistakes: the 'rotate half' pairing, or i/d."""
    d = x.size(-1)
    i = torch.arange(d // 2, dtype=torch.float64)
    exponent = {"2i": 2 * i / d, "i": i / d}[power]
    # (..., T, d/2)
    theta = (positions.double().unsqueeze(-1) * 10000.0**-exponent).to(x.dtype)
    cos, sin = theta.cos(), theta.sin()
    if halves:
        x1, x2 = x[..., : d // 2], x[..., d // 2 :]
        return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


def _wrap(a: torch.Tensor) -> torch.Tensor:
    """An angle in [-pi, pi)."""
    return torch.remainder(a + math.pi, 2 * math.pi) - math.pi


class RopeTrial(Trial):
    def __init__(self, inputs: str, x: torch.Tensor, positions: torch.Tensor) -> None:
        super().__init__(inputs, (x, positions))
        self.x, self.positions, self.d = x, positions, x.size(-1)

    @cached_property
    def want(self) -> torch.Tensor:
        return apply_rope(self.x, self.positions)

    def like(self, **variant) -> bool:
        return close(self.got, _rope_variant(self.x, self.positions, **variant))

    @cached_property
    def ignores_positions(self) -> bool:
        from_zero = apply_rope(self.x, torch.arange(self.x.size(-2)))
        return bool(self.positions[0] != 0) and close(self.got, from_zero)

    @cached_property
    def pairs(self) -> tuple[torch.Tensor, ...]:
        """x1, x2 (the pairs before) and y1, y2 (after), float64, each (..., T, d/2)."""
        x, got = self.x.double(), self.got.double()
        return x[..., 0::2], x[..., 1::2], got[..., 0::2], got[..., 1::2]

    @cached_property
    def lengths(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The length of every pair, before and after."""
        x1, x2, y1, y2 = self.pairs
        return torch.hypot(x1, x2), torch.hypot(y1, y2)

    @cached_property
    def lengths_kept(self) -> bool:
        before, after = self.lengths
        return close(after, before, atol=1e-4)

    @cached_property
    def length_changed(self) -> str:
        before, after = self.lengths
        idx, a, b = first_mismatch(after, before, atol=1e-4)
        i, pos = idx[-1], int(self.positions[idx[-2]])
        return _(
            "pair {i} (features {f0}, {f1}) at position {pos} has length"
            " {before:.4g} before and {after:.4g} after"
        ).format(i=i, f0=2 * i, f1=2 * i + 1, pos=pos, before=b, after=a)

    @cached_property
    def angle(self) -> torch.Tensor:
        """(..., T, d/2): how far each pair turned."""
        x1, x2, y1, y2 = self.pairs
        return torch.atan2(x1 * y2 - x2 * y1, x1 * y1 + x2 * y2)

    @cached_property
    def expected(self) -> torch.Tensor:
        return rope_angles(self.positions, self.d)  # (T, d/2)

    @cached_property
    def same_angle(self) -> bool:
        turned = self.angle
        spread = _wrap(turned - turned[..., :1]).abs()
        return self.d > 2 and bool((spread < 1e-3).all())

    @cached_property
    def opposite(self) -> bool:
        return bool((_wrap(self.angle + self.expected).abs() < 1e-3).all())

    @cached_property
    def wrong_angles(self) -> torch.Tensor:
        return _wrap(self.angle - self.expected).abs() > 1e-3

    @cached_property
    def lowest_frequency(self) -> str:
        d = self.d
        return _("from 1 for pair 0 down to {low:.4g} for pair {last}").format(
            low=10000 ** (-2 * (d // 2 - 1) / d), last=d // 2 - 1
        )

    @cached_property
    def wrong_angle(self) -> str:
        bad = self.wrong_angles.nonzero()[0]
        p, i = int(bad[-2]), int(bad[-1])
        pos = int(self.positions[p])
        return _(
            "pair {i} at position {pos} is rotated by {got:.4g} rad;"
            " expected {pos} * 10000^(-2*{i}/{d}) = {want:.4g} rad"
        ).format(
            i=i, pos=pos, got=self.angle[tuple(bad)], d=self.d, want=self.expected[p, i]
        )


def _rope_trials() -> list[RopeTrial]:
    g = gen(8)
    return [
        RopeTrial(
            _("x (6, 8), positions = torch.arange(6)"), randn(g, 6, 8), torch.arange(6)
        ),
        RopeTrial(
            _("x (2, 3, 5, 16) (batch and head axes), positions = torch.arange(5)"),
            randn(g, 2, 3, 5, 16),
            torch.arange(5),
        ),
        RopeTrial(
            _(
                "x (1, 2, 4, 8), positions = torch.arange(10, 14) (not starting at 0,"
                " as"
                " after a KV cache)"
            ),
            randn(g, 1, 2, 4, 8),
            torch.arange(10, 14),
        ),
        RopeTrial(
            _("x (3, 2) (a single pair), positions = torch.arange(3)"),
            randn(g, 3, 2),
            torch.arange(3),
        ),
    ]


# Known mistakes, each as a learner would write it


def _rope(x, theta):
    """A learner's rotation of each pair (x_2i, x_2i+1) by theta (..., T, d/2)."""
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack(
        (x1 * theta.cos() - x2 * theta.sin(), x1 * theta.sin() + x2 * theta.cos()), -1
    ).flatten(-2)


def rope_rotate_half(x, positions):
    d = x.size(-1)
    theta = positions[:, None].float() * 10000 ** (-torch.arange(0, d, 2) / d)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat(
        (x1 * theta.cos() - x2 * theta.sin(), x1 * theta.sin() + x2 * theta.cos()), -1
    )


def rope_wrong_frequencies(x, positions):
    d = x.size(-1)
    # -i/d, not -2i/d
    return _rope(x, positions[:, None].float() * 10000 ** (-torch.arange(d // 2) / d))


def rope_ignores_positions(x, positions):
    return apply_rope(x, torch.arange(x.size(-2)))


def rope_sign_slip(x, positions):
    d = x.size(-1)
    theta = positions[:, None].float() * 10000 ** (-torch.arange(0, d, 2) / d)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack(
        (x1 * theta.cos() - x2 * theta.sin(), x1 * theta.sin() - x2 * theta.cos()), -1
    ).flatten(-2)  # the second component's sign: not a rotation


def rope_same_angle_every_pair(x, positions):
    return _rope(x, positions[:, None].float().expand(-1, x.size(-1) // 2))


def rope_opposite_direction(x, positions):
    return apply_rope(x, -positions)


def rope_concatenated_halves(x, positions):
    d = x.size(-1)
    theta = positions[:, None].float() * 10000 ** (-torch.arange(0, d, 2) / d)
    x1, x2 = x[..., 0::2], x[..., 1::2]  # the right pairs ...
    return torch.cat(  # ... put back as two halves instead of interleaved
        (x1 * theta.cos() - x2 * theta.sin(), x1 * theta.sin() + x2 * theta.cos()), -1
    )


def _concatenated(t) -> bool:
    """The right rotated pairs, with all first coordinates before all second ones."""
    want = t.want
    return t.d > 2 and close(t.got, torch.cat((want[..., 0::2], want[..., 1::2]), -1))


def rope_wrong_frequencies_linear(x, positions):
    d = x.size(-1)
    return _rope(x, positions[:, None].float() * (1 + torch.arange(d // 2)) / (d // 2))


ROPE_MISTAKES = [
    # what the function returns
    Mistake.not_a_tensor(N_("your output for {inputs}")),
    Mistake.wrong_shape(
        N_("your output"),
        N_("RoPE rotates x in place of x: the output has the shape of x"),
    ),
    # the pairs, the frequencies and the positions
    Mistake(
        rope_rotate_half,
        lambda t: t.like(halves=True),
        N_(
            "for {inputs}, you paired feature i with feature i + d/2 (the 'rotate half'"
            " layout of some codebases); this book rotates neighbouring pairs"
            " (x_2i, x_2i+1), as the RoFormer paper writes it"
        ),
    ),
    Mistake(
        rope_concatenated_halves,
        _concatenated,
        N_(
            "for {inputs}, every pair is rotated right, but you concatenated the"
            " rotated halves (all first coordinates, then all second ones); put each"
            " pair back in its place, (x_2i, x_2i+1), e.g. torch.stack((y1, y2),"
            " -1).flatten(-2)"
        ),
    ),
    Mistake(
        rope_wrong_frequencies,
        lambda t: t.d > 2 and t.like(power="i"),
        N_(
            "for {inputs}, your frequencies are 10000^(-i/d); pair i turns by pos *"
            " theta_i"
            " with theta_i = 10000^(-2i/d) (the exponent counts features, and pair i"
            " starts"
            " at feature 2i): check the frequencies"
        ),
    ),
    Mistake(
        rope_ignores_positions,
        lambda t: t.ignores_positions,
        N_(
            "your function ignores its positions argument: for {inputs} it rotated as"
            " if"
            " the"
            " positions were 0, 1, 2, ..."
        ),
    ),
    Mistake(
        None, lambda t: not finite(t.got), Mistake.mismatch(N_("your output")).message
    ),
    # is it a rotation, and by which angles
    Mistake(
        rope_sign_slip,
        lambda t: not t.lengths_kept,
        N_("for {inputs}, {length_changed}: a rotation keeps the length of every pair"),
    ),
    Mistake(
        rope_same_angle_every_pair,
        lambda t: t.same_angle,
        N_(
            "for {inputs}, every pair is rotated by the same angle; pair i must turn by"
            " pos * theta_i with its own frequency theta_i = 10000^(-2i/d),"
            " {lowest_frequency}"
        ),
    ),
    Mistake(
        rope_opposite_direction,
        lambda t: t.opposite,
        N_(
            "for {inputs}, you rotate every pair the opposite way (by -pos * theta_i):"
            " the"
            " rotation is (x1 cos - x2 sin, x1 sin + x2 cos)"
        ),
    ),
    Mistake(
        rope_wrong_frequencies_linear,
        lambda t: bool(t.wrong_angles.any()),
        N_(
            "for {inputs}, {wrong_angle}: check the frequencies theta_i = 10000^(-2i/d)"
        ),
    ),
    Mistake.mismatch(
        N_("your output")
    ),  # the angles are right to 1e-3 rad, the values are not
]

check_apply_rope = Checker(
    "check_apply_rope",
    "Check ``candidate(x, positions)`` against :func:`transformer_lib.apply_rope`.",
    _rope_trials,
    ROPE_MISTAKES,
    N_(
        "{n} inputs agree with tl.apply_rope, including batch and head axes, positions"
        " from"
        " 10 and d = 2."
    ),
)
