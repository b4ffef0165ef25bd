"""Chapter 8: the sinusoidal positional encoding, and RoPE."""

from __future__ import annotations

import math
from functools import cached_property

import torch

from ..positional import apply_rope, rope_angles, sinusoidal_positional_encoding
from .compare import close, finite, first_mismatch
from .harness import Checker, Mistake, Trial, gen, randn
from .language import N_, _

# --------------------------------------------------------------------------------------
# sinusoidal_positional_encoding(T, d_model) -> (T, d_model)
# --------------------------------------------------------------------------------------


def _pe_variant(
    T, d, *, swap=False, exponent="2i", start=0, concat=False, multiply=False
) -> torch.Tensor:
    """The encoding with one of the common mistakes, each named by its keyword."""
    pos = torch.arange(start, start + T, dtype=torch.float64).unsqueeze(1)  # (T, 1)
    cols = torch.arange(d, dtype=torch.float64)
    pair = torch.div(cols, 2, rounding_mode="floor")
    power = {"2i": 2 * pair, "i": pair, "j": cols}[exponent] / d  # (d,)
    ang = pos * 10000.0**power if multiply else pos / 10000.0**power  # (T, d)
    if concat:
        half = (d + 1) // 2
        ang = pos / 10000.0 ** (2 * torch.arange(half, dtype=torch.float64) / d)
        return torch.cat([ang.sin(), ang.cos()[:, : d - half]], dim=1)
    even = cols % 2 == 0
    first, second = (torch.cos, torch.sin) if swap else (torch.sin, torch.cos)
    return torch.where(even, first(ang), second(ang))


class PositionalTrial(Trial):
    def __init__(self, T: int, d: int) -> None:
        super().__init__(f"T = {T}, d_model = {d}", (T, d))
        self.T, self.d = T, d
        if d % 2:
            self.raise_hint = _(
                "with an odd d_model there is one more sin column than cos columns:"
                " d_model // 2 cos columns"
            )

    @cached_property
    def want(self) -> torch.Tensor:
        return sinusoidal_positional_encoding(self.T, self.d)

    def like(self, **variant) -> bool:
        return close(self.got, _pe_variant(self.T, self.d, **variant))

    @cached_property
    def differs(self) -> str:
        """The first wrong entry, and the formula that gives it."""
        (p, c), g, w = first_mismatch(self.got, self.want)
        fn = "sin" if c % 2 == 0 else "cos"
        return _(
            "PE[pos={p}, column {c}] is {got:.4g}; expected"
            " {fn}({p} / 10000^({i2}/{d})) = {want:.4g}"
        ).format(p=p, c=c, got=g, fn=fn, i2=2 * (c // 2), d=self.d, want=w)


def _positional_trials() -> list[PositionalTrial]:
    return [
        PositionalTrial(T, d) for T, d in [(6, 8), (50, 16), (5, 7), (1, 4), (3, 2)]
    ]


# Known mistakes, each as a learner would write it


def _pe(T, d, *, first=torch.sin, second=torch.cos, exponent=lambda i, d: 2 * i / d):
    """A learner's loop over positions and sin/cos pairs, with one thing changed."""
    pe = torch.zeros(T, d)
    for pos in range(T):
        for i in range((d + 1) // 2):
            angle = torch.tensor(pos / 10000 ** exponent(i, d), dtype=torch.float64)
            pe[pos, 2 * i] = first(angle)
            if 2 * i + 1 < d:
                pe[pos, 2 * i + 1] = second(angle)
    return pe


def pe_sin_cos_swapped(T, d_model):
    return _pe(T, d_model, first=torch.cos, second=torch.sin)


def pe_exponent_i_over_d(T, d_model):
    return _pe(T, d_model, exponent=lambda i, d: i / d)


def pe_exponent_column_over_d(T, d_model):
    j = torch.arange(d_model, dtype=torch.float64)  # the column index, not the pair's
    angle = torch.arange(T, dtype=torch.float64)[:, None] / 10000 ** (j / d_model)
    return torch.where(j % 2 == 0, angle.sin(), angle.cos()).float()


def pe_positions_from_1(T, d_model):
    return _pe(T + 1, d_model)[1:]


def pe_concatenated_halves(T, d_model):
    pos = torch.arange(T, dtype=torch.float32)[:, None]
    freq = 10000 ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    angle = pos * freq  # (T, ceil(d/2))
    return torch.cat([angle.sin(), angle.cos()[:, : d_model // 2]], dim=1)


def pe_multiplied_by_frequency(T, d_model):
    return _pe(T, d_model, exponent=lambda i, d: -2 * i / d)  # pos * 10000^(2i/d)


SINUSOIDAL_MISTAKES = [
    # what the function returns
    Mistake.not_a_tensor(N_("your encoding for {inputs}")),
    Mistake.wrong_shape(
        N_("your encoding"),
        N_("one row per position, one column per feature, (T, d_model)"),
    ),
    # the formula
    Mistake(
        pe_sin_cos_swapped,
        lambda t: t.like(swap=True),
        N_(
            "for {inputs}, sin and cos are swapped: the even columns 2i hold"
            " sin(pos / 10000^(2i/d_model)), the odd columns 2i+1 hold cos"
        ),
    ),
    Mistake(
        pe_exponent_i_over_d,
        lambda t: t.like(exponent="i"),
        N_(
            "for {inputs}, your frequencies use the exponent i/d_model; the formula"
            " uses"
            " 2i/d_model, where i counts the sin/cos pairs (columns 2i and 2i+1 share"
            " one"
            " frequency)"
        ),
    ),
    Mistake(
        pe_exponent_column_over_d,
        lambda t: t.like(exponent="j"),
        N_(
            "for {inputs}, your frequencies use the column index j/d_model; columns 2i"
            " and"
            " 2i+1 share the frequency 10000^(-2i/d_model), so the odd column uses the"
            " same"
            " exponent as the even one before it"
        ),
    ),
    Mistake(
        pe_positions_from_1,
        lambda t: t.like(start=1),
        N_(
            "for {inputs}, your positions start at 1; they start at 0, so row 0 is"
            " [0, 1, 0, 1, ...] (sin 0 = 0, cos 0 = 1)"
        ),
    ),
    Mistake(
        pe_concatenated_halves,
        lambda t: t.like(concat=True),
        N_(
            "for {inputs}, you concatenated all the sin columns and then all the cos"
            " columns; the formula interleaves them: column 2i is sin, column 2i+1 is"
            " cos"
            " of the same angle"
        ),
    ),
    Mistake(
        pe_multiplied_by_frequency,
        lambda t: t.like(multiply=True),
        N_(
            "for {inputs}, you multiplied the position by 10000^(2i/d_model); divide"
            " by it:"
            " the angle is pos / 10000^(2i/d_model)"
        ),
    ),
    Mistake(None, lambda t: True, N_("for {inputs}, {differs}")),  # catch-all
]

check_sinusoidal_positional_encoding = Checker(
    "check_sinusoidal_positional_encoding",
    "Check ``candidate(T, d_model) -> (T, d_model)`` against"
    " :func:`transformer_lib.sinusoidal_positional_encoding`.",
    _positional_trials,
    SINUSOIDAL_MISTAKES,
    N_(
        "{n} sizes agree with tl.sinusoidal_positional_encoding, including an odd"
        " d_model"
        " and T = 1."
    ),
)


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
