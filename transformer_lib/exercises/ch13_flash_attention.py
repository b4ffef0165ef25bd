"""Chapter 13: the online softmax update of tiled attention (eq. flash-update).

The learner writes ``my_online_attention(score_blocks, value_blocks)``: the scaled,
masked scores of a few queries cut into blocks of keys, (..., T_q, b_j) each, -inf where
masked, and the matching values (..., b_j, d_v). It reads each block once, keeping only
the running max m, denominator l and unnormalised output o, and returns the attention
output (..., T_q, d_v), zeros for a query that may attend to no key. The reference is
the library's update, ``flash.online_attention_step``, in a loop.

A mistake here often shows only on some inputs: starting m at 0 is exact for ordinary
scores and fails only when every score is far below 0. So a row of the table explains a
wrong result only if the same mistake also reproduces the right results the learner got
on every earlier input (``OnlineTrial.like``).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

import torch

from ..flash import online_attention_step
from .compare import close, first_mismatch, num, shape, where
from .harness import Checker, Mistake, Trial, call, gen, randn
from .language import N_, _

NEG_INF = float("-inf")


def reference_online_attention(
    score_blocks: Sequence[torch.Tensor], value_blocks: Sequence[torch.Tensor]
) -> torch.Tensor:
    """The exercise's answer: eq. flash-update over the blocks, then flash-output."""
    s0, v0 = score_blocks[0], value_blocks[0]
    m = torch.full(s0.shape[:-1], NEG_INF, dtype=s0.dtype)  # (..., T_q)
    ell = torch.zeros_like(m)
    o = torch.zeros(s0.shape[:-1] + v0.shape[-1:], dtype=s0.dtype)  # (..., T_q, d_v)
    for s, v in zip(score_blocks, value_blocks, strict=True):
        m, ell, o = online_attention_step(m, ell, o, s, v)
    return o / ell.clamp_min(torch.finfo(ell.dtype).tiny).unsqueeze(-1)


# Known mistakes, each as a learner would write it: one loop, with one thing changed.


def _online(
    score_blocks,
    value_blocks,
    *,
    rescale_o=True,
    ell_rule="ok",
    m0=NEG_INF,
    use_max=True,
    divide="end",
    guard=True,
    final_guard=True,
) -> torch.Tensor:
    """A learner's online attention. ell_rule: "ok", "none" (l never rescaled),
    "inverted" (l times e^{m_new - m_old}), "old max" (the block's terms taken with
    m_old); divide: "end" (once), "each" (o / l at every block, never again), "each and
    end" (both)."""
    s0, v0 = score_blocks[0], value_blocks[0]
    m = torch.full(s0.shape[:-1], m0, dtype=s0.dtype)
    ell = torch.zeros_like(m)
    o = torch.zeros(s0.shape[:-1] + v0.shape[-1:], dtype=s0.dtype)

    def safe(x):  # -inf -> 0, so that -inf - (-inf) never happens
        return torch.where(torch.isneginf(x), torch.zeros_like(x), x) if guard else x

    for s, v in zip(score_blocks, value_blocks, strict=True):
        if not use_max:
            p = torch.exp(s)
            ell, o = ell + p.sum(-1), o + p @ v
            continue
        m_new = torch.maximum(m, s.amax(-1))
        alpha = torch.exp(m - safe(m_new))
        p = torch.exp(s - safe(m_new).unsqueeze(-1))
        if ell_rule == "ok":
            ell = alpha * ell + p.sum(-1)
        elif ell_rule == "none":
            ell = ell + p.sum(-1)
        elif ell_rule == "inverted":
            ell = ell * torch.exp(m_new - m) + p.sum(-1)
        elif ell_rule == "old max":
            ell = alpha * ell + torch.exp(s - m.unsqueeze(-1)).sum(-1)
        o = (alpha.unsqueeze(-1) * o if rescale_o else o) + p @ v
        if divide in ("each", "each and end"):
            o = o / ell.unsqueeze(-1)
        m = m_new
    if divide == "each":
        return o
    den = ell.clamp_min(torch.finfo(ell.dtype).tiny) if final_guard else ell
    return o / den.unsqueeze(-1)


def online_returns_the_state(score_blocks, value_blocks):
    out = _online(score_blocks, value_blocks)
    return out, None, None  # (o, m, l)


def online_output_not_rescaled(score_blocks, value_blocks):
    return _online(score_blocks, value_blocks, rescale_o=False)


def online_ell_not_rescaled(score_blocks, value_blocks):
    return _online(score_blocks, value_blocks, ell_rule="none")


def online_ell_rescaled_the_wrong_way(score_blocks, value_blocks):
    return _online(score_blocks, value_blocks, ell_rule="inverted")


def online_block_terms_with_the_old_max(score_blocks, value_blocks):
    return _online(score_blocks, value_blocks, ell_rule="old max")


def online_max_starts_at_zero(score_blocks, value_blocks):
    return _online(score_blocks, value_blocks, m0=0.0)


def online_divides_at_every_block(score_blocks, value_blocks):
    return _online(score_blocks, value_blocks, divide="each")


def online_without_a_max(score_blocks, value_blocks):
    return _online(score_blocks, value_blocks, use_max=False)


def online_masked_tile_gives_nan(score_blocks, value_blocks):
    return _online(score_blocks, value_blocks, guard=False)


def online_zero_over_zero(score_blocks, value_blocks):
    return _online(score_blocks, value_blocks, final_guard=False)


class OnlineTrial(Trial):
    """One input: the blocks, and the trials before it (which the learner passed)."""

    def __init__(self, inputs: str, s: torch.Tensor, v: torch.Tensor, widths) -> None:
        edges = [0]
        for w in widths:
            edges.append(edges[-1] + w)
        pairs = list(zip(edges[:-1], edges[1:], strict=False))
        self.s_blocks = [s[..., a:b] for a, b in pairs]
        self.v_blocks = [v[..., a:b, :] for a, b in pairs]
        super().__init__(inputs, (self.s_blocks, self.v_blocks))
        self.before: list[OnlineTrial] = []

    def run(self, candidate) -> None:
        """Call the learner's function on copies of the blocks (lists of tensors)."""
        self.candidate = candidate
        copies = [
            [t.clone() for t in self.s_blocks],
            [t.clone() for t in self.v_blocks],
        ]
        self.got = call(candidate, self.inputs, *copies)

    @cached_property
    def want(self) -> torch.Tensor:
        return reference_online_attention(self.s_blocks, self.v_blocks)

    @cached_property
    def correct(self) -> bool:
        return (
            isinstance(self.got, torch.Tensor)
            and self.got.shape == self.want.shape
            and bool(torch.isfinite(self.got).all())
            and close(self.got, self.want, self.atol, self.rtol)
        )

    def like(self, **mistake) -> bool:
        """The learner's output here is that mistake's, NaN where it has NaN, and the
        mistake gives the right answer on every earlier input, as the learner did."""
        here = _online(self.s_blocks, self.v_blocks, **mistake)
        if not _same(self.got, here):
            return False
        return all(
            _same(_online(t.s_blocks, t.v_blocks, **mistake), t.want)
            for t in self.before
        )

    @cached_property
    def where_it_starts(self) -> str:
        """Whether the first block alone already comes out wrong."""
        if len(self.s_blocks) == 1:
            return ""
        first = ([self.s_blocks[0].clone()], [self.v_blocks[0].clone()])
        alone = call(self.candidate, self.inputs, *first)
        right = reference_online_attention(*first)
        if isinstance(alone, torch.Tensor) and _same(alone, right):
            return _(
                " (the first block alone comes out right, so look at how a later block"
                " updates m, l and o)"
            )
        return _(" (already wrong with the first block alone: look at the start)")


def _same(got: torch.Tensor, want: torch.Tensor) -> bool:
    """Same shape and allclose, NaN equal to NaN."""
    if not isinstance(got, torch.Tensor) or got.shape != want.shape:
        return False
    a, b = got.detach().double(), want.detach().double()
    return bool(torch.allclose(a, b, atol=1e-5, rtol=1e-4, equal_nan=True))


def _online_trials() -> list[OnlineTrial]:
    g = gen(13)
    trials = [
        OnlineTrial(
            _("one block, scores (3, 7), values (7, 2)"),
            randn(g, 3, 7, scale=1.5),
            randn(g, 7, 2),
            [7],
        )
    ]
    s = randn(g, 3, 8)
    s[:, 5:] += 3.0  # the max grows in the second block
    trials.append(
        OnlineTrial(
            _(
                "two blocks of 5 and 3 keys, scores (3, 8), the max growing in the"
                " second"
            ),
            s,
            randn(g, 8, 2),
            [5, 3],
        )
    )
    trials.append(
        OnlineTrial(
            _(
                "four blocks of 4, 1, 3 and 2 keys, scores (2, 3, 4, 10), values"
                " (2, 3, 10, 5)"
            ),
            randn(g, 2, 3, 4, 10, scale=2.0),
            randn(g, 2, 3, 10, 5),
            [4, 1, 3, 2],
        )
    )
    trials.append(
        OnlineTrial(
            _("scores near +1e4, (2, 6), blocks of 2"),
            randn(g, 2, 6) + 1e4,
            randn(g, 6, 2),
            [2, 2, 2],
        )
    )
    trials.append(
        OnlineTrial(
            _("scores near -1e4, (2, 6), blocks of 3"),
            randn(g, 2, 6) - 1e4,
            randn(g, 6, 2),
            [3, 3],
        )
    )
    s = randn(g, 3, 6)
    s[1, :3] = NEG_INF  # row 1: its whole first block is masked
    s[2, 4] = NEG_INF
    trials.append(
        OnlineTrial(
            _(
                "scores (3, 6) in blocks of 3, row 1's first block entirely masked"
                " (-inf)"
            ),
            s,
            randn(g, 6, 2),
            [3, 3],
        )
    )
    s = randn(g, 3, 6)
    s[0] = NEG_INF  # row 0 may attend to nothing
    trials.append(
        OnlineTrial(
            _(
                "scores (3, 6) in blocks of 4 and 2, row 0 fully masked (expected:"
                " zeros)"
            ),
            s,
            randn(g, 6, 2),
            [4, 2],
        )
    )
    for i, trial in enumerate(trials):
        trial.before = trials[:i]
    return trials


def _mismatch_message(t: OnlineTrial) -> str:
    idx, got, want = first_mismatch(t.got, t.want, t.atol, t.rtol)
    return (
        _("for {inputs}, your output{index} is {got}; expected {want}").format(
            inputs=t.inputs, index=where(idx), got=num(got), want=num(want)
        )
        + t.where_it_starts
    )


ONLINE_MISTAKES = [
    # what the function returns
    Mistake.returns_a_tuple(
        online_returns_the_state,
        N_("the output (..., T_q, d_v), o / l after the last block"),
    ),
    Mistake.not_a_tensor(N_("your output for {inputs}")),
    Mistake.wrong_shape(
        N_("your output"),
        lambda t: _(
            "one row per query, d_v wide, {shape}: keep the batch dims, and take max"
            " and sum over the keys with dim=-1 (keepdim where you broadcast)"
        ).format(shape=shape(t.want)),
    ),
    # the update
    Mistake(
        online_output_not_rescaled,
        lambda t: t.like(rescale_o=False),
        N_(
            "for {inputs}, you rescale l but not the running output: when a block"
            " raises"
            " the max from m_old to m_new, the old sum o was built with e^(s - m_old)"
            " and"
            " must be multiplied by e^(m_old - m_new) too, exactly like l, before the"
            " block's e^(s - m_new) V is added"
        ),
    ),
    Mistake(
        online_ell_not_rescaled,
        lambda t: t.like(ell_rule="none"),
        N_(
            "for {inputs}, l is never rescaled: its old terms stay relative to the old"
            " max"
            " while the new ones are relative to the new max. Rescale with the right"
            " max:"
            " l_new = l * e^(m_old - m_new) + sum e^(s - m_new)"
        ),
    ),
    Mistake(
        online_ell_rescaled_the_wrong_way,
        lambda t: t.like(ell_rule="inverted") or t.like(ell_rule="inverted", m0=0.0),
        N_(
            "for {inputs}, l is rescaled with the max the wrong way round, by"
            " e^(m_new - m_old): the factor must be e^(m_old - m_new), at most 1, and 0"
            " while m_old = -inf (before the first block, where e^(m_new - m_old) is"
            " infinite)"
        ),
    ),
    Mistake(
        online_block_terms_with_the_old_max,
        lambda t: t.like(ell_rule="old max") or t.like(ell_rule="old max", m0=0.0),
        N_(
            "for {inputs}, the new block's terms in l are taken relative to the old"
            " max,"
            " e^(s - m_old): every term of l must be relative to the same, current max,"
            " l_new = l * e^(m_old - m_new) + sum e^(s - m_new)"
        ),
    ),
    Mistake(
        online_divides_at_every_block,
        lambda t: t.like(divide="each") or t.like(divide="each and end"),
        N_(
            "for {inputs}, you divide by l before the last block: o / l is only right"
            " once"
            " every block has been added. Keep o unnormalised (the sum of e^(s - m) v)"
            " and"
            " divide once, after the loop"
        ),
    ),
    Mistake(
        online_max_starts_at_zero,
        lambda t: t.like(m0=0.0) or t.like(m0=0.0, final_guard=False),
        N_(
            "for {inputs}, your running max starts at 0 instead of -inf: when every"
            " score"
            " is far below 0 (under about -100 in float32), e^(s - 0) underflows to 0,"
            " l"
            " stays 0 and the output is 0/0 (or 0). Start with m = -inf"
            " (torch.full(..., float('-inf'))): the first block's own max then takes"
            " over"
        ),
    ),
    Mistake(
        online_without_a_max,
        lambda t: t.like(use_max=False),
        N_(
            "for {inputs}, you take e^s without subtracting a running max: scores of"
            " 1e4"
            " overflow (e^89 is already inf in float32). Keep m, the largest score so"
            " far,"
            " and use e^(s - m)"
        ),
    ),
    # masked rows
    Mistake(
        online_masked_tile_gives_nan,
        lambda t: t.like(guard=False),
        N_(
            "for {inputs}: a block in which a row is entirely masked (all -inf) while"
            " its"
            " running max is still -inf gives e^(-inf - (-inf)) = e^nan, NaN, which"
            " never"
            " leaves. When the new max is -inf, subtract 0 instead of it"
        ),
    ),
    Mistake(
        online_zero_over_zero,
        lambda t: t.like(final_guard=False),
        N_(
            "for {inputs}: a query whose every key is masked ends with l = 0 and o = 0,"
            " and 0/0 is NaN; the library's convention is a zero output for such a row."
            " Guard the final division (l.clamp_min(tiny), or torch.where(l > 0, ...))"
        ),
    ),
    Mistake(None, lambda t: True, _mismatch_message),
]

check_online_attention = Checker(
    "check_online_attention",
    "Check ``candidate(score_blocks, value_blocks) -> out`` against the library's"
    " update, ``flash.online_attention_step``, in a loop (eq. flash-update, "
    "flash-output).",
    _online_trials,
    ONLINE_MISTAKES,
    N_(
        "{n} inputs agree with the reference update, including blocks of unequal width,"
        " scores of ±1e4, a masked block and a fully masked row."
    ),
)
