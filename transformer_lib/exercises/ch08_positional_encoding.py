"""Chapter 8: the sinusoidal positional encoding (RoPE's checker: ``ch08_rope``)."""

from __future__ import annotations

from functools import cached_property

import torch

from ..positional import sinusoidal_positional_encoding
from .compare import close, first_mismatch
from .harness import Checker, Mistake, Trial
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
