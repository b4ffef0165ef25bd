"""Chapter 4: the causal mask and the padding mask (bool, True = may attend)."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property

import torch

from ..masks import causal_mask, padding_mask
from .compare import first_index
from .harness import Checker, Mistake, Trial
from .language import N_, _

NEG_INF = float("-inf")


class MaskTrial(Trial):
    """A mask: correct only when it is bool and equal to the library's."""

    @cached_property
    def correct(self) -> bool:
        got = self.got
        return (
            isinstance(got, torch.Tensor)
            and got.shape == self.want.shape
            and got.dtype == torch.bool
            and torch.equal(got, self.want)
        )

    @cached_property
    def inverted(self) -> bool:
        return torch.equal(self.got, ~self.want)

    def equals(self, mask: torch.Tensor) -> bool:
        return torch.equal(self.got, mask)


def _not_bool(additive: Callable, numbers: Callable) -> list[Mistake]:
    """The rows for a mask that is not bool; ``additive`` and ``numbers``: examples."""

    def is_additive(t: MaskTrial) -> bool:
        got = t.got
        return got.dtype.is_floating_point and bool(torch.isinf(got).any())

    return [
        Mistake(
            additive,
            lambda t: t.got.dtype != torch.bool and is_additive(t),
            _(
                "your mask for {inputs} holds 0 and -inf (an additive mask); this"
                " book's"
                " masks are bool tensors with True = may attend (a comparison like `j"
                " <= i`"
                " already gives bool; `.bool()` converts 0/1)"
            ),
        ),
        Mistake(
            numbers,
            lambda t: t.got.dtype != torch.bool,
            _(
                "your mask for {inputs} holds numbers of dtype {got.dtype}; this book's"
                " masks are bool tensors with True = may attend (a comparison like `j"
                " <= i`"
                " already gives bool; `.bool()` converts 0/1)"
            ),
        ),
    ]


# --------------------------------------------------------------------------------------
# causal_mask(T_q, T_k=None) -> (T_q, T_k)
# --------------------------------------------------------------------------------------


class CausalTrial(MaskTrial):
    def __init__(self, args: tuple[int, ...], desc: str) -> None:
        inputs = f"causal_mask({', '.join(map(str, args))}), {desc}"
        super().__init__(inputs, args)

    @cached_property
    def want(self) -> torch.Tensor:
        return causal_mask(*self.args)

    @cached_property
    def off(self) -> int:
        """T_k - T_q: how many earlier keys come before the first query."""
        T_q, T_k = self.want.shape
        return T_k - T_q

    @cached_property
    def i(self) -> torch.Tensor:
        return torch.arange(self.want.size(0)).unsqueeze(1)  # (T_q, 1): the queries

    @cached_property
    def j(self) -> torch.Tensor:
        return torch.arange(self.want.size(1)).unsqueeze(0)  # (1, T_k): the keys

    @cached_property
    def differs_at(self) -> tuple[int, ...]:
        return first_index(self.got != self.want)


def _causal_trials() -> list[CausalTrial]:
    return [
        CausalTrial((4,), "T_q = T_k = 4"),
        CausalTrial((5,), "T_q = T_k = 5"),
        CausalTrial((1,), "T_q = T_k = 1"),
        CausalTrial((4, 4), "T_q = 4, T_k = 4"),
        CausalTrial((3, 5), _("T_q = 3, T_k = 5 (3 new queries after 2 earlier keys)")),
        CausalTrial((1, 6), _("T_q = 1, T_k = 6 (one new query, 6 keys)")),
    ]


# Known mistakes, each as a learner would write it


def causal_ignores_T_k(T_q, T_k=None):
    return torch.ones(T_q, T_q, dtype=torch.bool).tril()


def causal_float_additive(T_q, T_k=None):
    T_k = T_q if T_k is None else T_k
    allowed = torch.ones(T_q, T_k, dtype=torch.bool).tril(diagonal=T_k - T_q)
    return torch.zeros(T_q, T_k).masked_fill(~allowed, NEG_INF)


def causal_float_ones(T_q, T_k=None):
    T_k = T_q if T_k is None else T_k
    return torch.tril(torch.ones(T_q, T_k), diagonal=T_k - T_q)  # float 0/1


def causal_inverted(T_q, T_k=None):
    T_k = T_q if T_k is None else T_k
    return torch.ones(T_q, T_k, dtype=torch.bool).triu(diagonal=T_k - T_q + 1)


def causal_diagonal_excluded(T_q, T_k=None):
    T_k = T_q if T_k is None else T_k
    return torch.ones(T_q, T_k, dtype=torch.bool).tril(diagonal=T_k - T_q - 1)


def causal_upper_triangle(T_q, T_k=None):
    T_k = T_q if T_k is None else T_k
    return torch.ones(T_q, T_k, dtype=torch.bool).triu()


def causal_top_left(T_q, T_k=None):
    T_k = T_q if T_k is None else T_k
    return torch.ones(T_q, T_k, dtype=torch.bool).tril()


CAUSAL_MISTAKES = [
    # what the function returns
    Mistake.not_a_tensor(N_("your mask for {inputs}")),
    Mistake(
        causal_ignores_T_k,
        lambda t: (
            t.got.shape != t.want.shape
            and len(t.args) == 2
            and t.got.shape == (t.args[0], t.args[0])
        ),
        N_(
            "your mask has shape {got_shape} for {inputs}; expected {want_shape}: one"
            " row"
            " per query and one column per key, (T_q, T_k); you seem to ignore T_k"
        ),
    ),
    Mistake(  # catch-all for the shape
        None,
        lambda t: t.got.shape != t.want.shape,
        N_(
            "your mask has shape {got_shape} for {inputs}; expected {want_shape}: one"
            " row"
            " per query and one column per key, (T_q, T_k)"
        ),
    ),
    *_not_bool(causal_float_additive, causal_float_ones),
    # which cells are True
    Mistake(
        causal_inverted,
        lambda t: t.inverted,
        N_(
            "your mask for {inputs} is inverted: it is True exactly where the"
            " library's is"
            " False. True means 'may attend', so query i may attend key j when j <= i"
            " (the"
            " past and itself)"
        ),
    ),
    Mistake(
        causal_diagonal_excluded,
        lambda t: t.equals(t.j < t.i + t.off),
        N_(
            "your mask for {inputs} leaves out the diagonal: query i must be allowed to"
            " attend to itself, key j = i (j <= i, not j < i); without it the first"
            " query"
            " can attend to nothing"
        ),
    ),
    Mistake(
        causal_upper_triangle,
        lambda t: t.equals(t.j >= t.i) or t.equals(t.j >= t.i + t.off),
        N_(
            "your mask for {inputs} is the upper triangle; it should be the lower one:"
            " row"
            " i is the query, column j the key, and query i may attend key j only when"
            " j <= i (torch.tril, not torch.triu)"
        ),
    ),
    Mistake(
        causal_top_left,
        lambda t: t.off != 0 and t.equals(t.j <= t.i),
        N_(
            "your mask for {inputs} is aligned top-left: with T_q < T_k the queries"
            " are the"
            " last T_q positions, so query i sits at position i + (T_k - T_q) = i +"
            " {off}"
            " and may attend keys j <= i + {off}; the last query sees every key"
            " (torch.tril(..., diagonal=T_k - T_q))"
        ),
    ),
    Mistake(  # catch-all
        None,
        lambda t: True,
        lambda t: _(
            "your mask for {inputs} says {got} at [query {i}, key {j}]; expected"
            " {want} (query i may attend key j when j <= i + T_k - T_q)"
        ).format(
            inputs=t.inputs,
            got=bool(t.got[t.differs_at]),
            i=t.differs_at[0],
            j=t.differs_at[1],
            want=bool(t.want[t.differs_at]),
        ),
    ),
]

check_causal_mask = Checker(
    "check_causal_mask",
    "Check ``candidate(T_q, T_k=None)`` against :func:`transformer_lib.causal_mask`.",
    _causal_trials,
    CAUSAL_MISTAKES,
    N_(
        "{n} sizes agree with tl.causal_mask, including T_q = 1 and T_q < T_k"
        " (end-aligned)."
    ),
)


# --------------------------------------------------------------------------------------
# padding_mask(lengths, T) -> (B, 1, 1, T)
# --------------------------------------------------------------------------------------


class PaddingTrial(MaskTrial):
    def __init__(self, lens: list[int], T: int) -> None:
        self.lens, self.T = lens, T
        self.lengths = torch.tensor(lens)
        super().__init__(f"lengths = torch.tensor({lens}), T = {T}", (self.lengths, T))

    @cached_property
    def want(self) -> torch.Tensor:
        return padding_mask(self.lengths, self.T)  # (B, 1, 1, T)

    @cached_property
    def j(self) -> torch.Tensor:
        return torch.arange(self.T)

    @cached_property
    def L(self) -> torch.Tensor:
        return self.lengths[:, None, None, None]

    @cached_property
    def b(self) -> int:
        """The first sequence whose mask is wrong."""
        return int((self.got != self.want).any(dim=-1).flatten().nonzero()[0])

    @cached_property
    def real(self) -> str:
        n = self.lens[self.b]
        return _(
            "sequence {b} has length {n}, so its real tokens are positions 0..{last}"
        ).format(b=self.b, n=n, last=n - 1)

    @cached_property
    def length(self) -> int:
        return self.lens[self.b]

    @cached_property
    def pos(self) -> int:
        """The first wrong position of sequence b."""
        return int((self.got[self.b, 0, 0] != self.want[self.b, 0, 0]).nonzero()[0])


def _padding_trials() -> list[PaddingTrial]:
    return [
        PaddingTrial([3, 5, 1], 5),
        PaddingTrial([0, 4], 4),
        PaddingTrial([2], 6),
        PaddingTrial([6, 6, 2, 5], 6),
    ]


_PADDING_SHAPE = N_(
    "your mask has shape {got_shape} for {inputs}; expected (B, 1, 1, T), so that it"
    " broadcasts over the heads (dim 1) and the queries (dim 2)"
)


# Known mistakes, each as a learner would write it


def padding_wrong_shape(lengths, T):
    return torch.arange(T)[None, :] < lengths[:, None]  # (B, T)


def padding_float_additive(lengths, T):
    pad = torch.arange(T)[None, :] >= lengths[:, None]
    return torch.zeros(len(lengths), T).masked_fill(pad, NEG_INF)[:, None, None, :]


def padding_float_ones(lengths, T):
    return (torch.arange(T)[None, :] < lengths[:, None]).float()[:, None, None, :]


def padding_inverted(lengths, T):
    return (torch.arange(T)[None, :] >= lengths[:, None])[:, None, None, :]


def padding_off_by_one(lengths, T):
    return (torch.arange(T)[None, :] <= lengths[:, None])[:, None, None, :]


def padding_one_short(lengths, T):
    return (torch.arange(T)[None, :] < lengths[:, None] - 1)[:, None, None, :]


def padding_on_the_left(lengths, T):
    return (torch.arange(T)[None, :] >= T - lengths[:, None])[:, None, None, :]


PADDING_MISTAKES = [
    # what the function returns
    Mistake.not_a_tensor(N_("your mask for {inputs}")),
    Mistake(
        padding_wrong_shape,
        lambda t: t.got.shape != t.want.shape and t.got.shape == (len(t.lens), t.T),
        (_PADDING_SHAPE, N_(": add the two middle axes with mask[:, None, None, :]")),
    ),
    Mistake(  # catch-all for the shape
        None, lambda t: t.got.shape != t.want.shape, _PADDING_SHAPE
    ),
    *_not_bool(padding_float_additive, padding_float_ones),
    # which positions are True
    Mistake(
        padding_inverted,
        lambda t: t.inverted,
        N_(
            "your mask for {inputs} is inverted: it is True at the padding. In this"
            " book"
            " True = may attend, so the real tokens j < length are True (PyTorch's"
            " key_padding_mask uses the opposite convention, True = ignore)"
        ),
    ),
    Mistake(
        padding_off_by_one,
        lambda t: t.equals(t.j <= t.L),
        N_(
            "your mask for {inputs} is off by one: {real}, but yours also allows"
            " position"
            " {length} (use j < length, not j <= length)"
        ),
    ),
    Mistake(
        padding_one_short,
        lambda t: t.equals(t.j < t.L - 1),
        lambda t: _(
            "your mask for {inputs} is off by one: {real}, but yours stops one early,"
            " at position {pos}"
        ).format(inputs=t.inputs, real=t.real, pos=t.length - 2),
    ),
    Mistake(
        padding_on_the_left,
        lambda t: t.equals(t.j >= t.T - t.L),
        N_(
            "your mask for {inputs} marks the last positions as real: {real}; the"
            " padding"
            " comes after them (right padding)"
        ),
    ),
    Mistake(  # catch-all
        None,
        lambda t: True,
        lambda t: _(
            "your mask for {inputs} says {got} at sequence {b}, position {pos};"
            " expected {want} ({real})"
        ).format(
            inputs=t.inputs,
            got=bool(t.got[t.b, 0, 0, t.pos]),
            b=t.b,
            pos=t.pos,
            want=bool(t.want[t.b, 0, 0, t.pos]),
            real=t.real,
        ),
    ),
]

check_padding_mask = Checker(
    "check_padding_mask",
    "Check ``candidate(lengths, T) -> (B, 1, 1, T)`` against"
    " :func:`transformer_lib.padding_mask`.",
    _padding_trials,
    PADDING_MISTAKES,
    N_(
        "{n} batches agree with tl.padding_mask, including a length of 0 and a"
        " full-length sequence."
    ),
)
