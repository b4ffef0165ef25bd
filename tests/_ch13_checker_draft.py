"""DRAFT, to move into transformer_lib/exercises/ch13_flash.py once the exercises
package lands: the checker of chapter 13's exercise, a learner's online-softmax update.

The learner writes ``my_online_attention(score_blocks, value_blocks)``: the scaled,
masked scores of a few query rows, cut into blocks of keys, (..., T_q, b_j) each, and
the matching value blocks (..., b_j, d_v); it returns softmax(all scores) V, the
(..., T_q, d_v) attention output, reading each block once and keeping only the running
max m, denominator l and output o. The reference is a loop over
``tl.flash.online_attention_step``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from transformer_lib.exercises import (
    _call,
    _checker,
    _first_mismatch,
    _gen,
    _num,
    _randn,
    _same_shape,
    _shape,
    _tensor,
    _where,
    _Wrong,
)
from transformer_lib.flash import online_attention_step

NEG_INF = float("-inf")
ATOL, RTOL = 1e-5, 1e-4


def reference_online_attention(
    score_blocks: Sequence[torch.Tensor], value_blocks: Sequence[torch.Tensor]
) -> torch.Tensor:
    """The answer: eq. flash-update over the blocks, then eq. flash-output."""
    s0, v0 = score_blocks[0], value_blocks[0]
    m = torch.full(s0.shape[:-1], NEG_INF, dtype=s0.dtype)
    ell = torch.zeros_like(m)
    o = torch.zeros(s0.shape[:-1] + v0.shape[-1:], dtype=s0.dtype)
    for s, v in zip(score_blocks, value_blocks, strict=True):
        m, ell, o = online_attention_step(m, ell, o, s, v)
    return o / ell.clamp_min(torch.finfo(ell.dtype).tiny).unsqueeze(-1)


def _variant(
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
    """The online attention of a known mistake (or of none, with the defaults).

    ell_rule: "ok", "none" (l never rescaled), "inverted" (l times e^{m_new - m_old}),
    "old max" (the new block's exponentials taken with m_old). divide: "end" (once),
    "each" (o divided by l at every block, never again), "each and end" (both).
    """
    s0, v0 = score_blocks[0], value_blocks[0]
    m = torch.full(s0.shape[:-1], m0, dtype=s0.dtype)
    ell = torch.zeros_like(m)
    o = torch.zeros(s0.shape[:-1] + v0.shape[-1:], dtype=s0.dtype)

    def safe(x):
        return torch.where(torch.isneginf(x), torch.zeros_like(x), x) if guard else x

    for s, v in zip(score_blocks, value_blocks, strict=True):
        if not use_max:  # no running max at all: e^{s} as it is
            p = torch.exp(s)
            ell, o = ell + p.sum(-1), o + p @ v
            continue
        m_new = torch.maximum(m, s.amax(-1))
        alpha = torch.exp(m - safe(m_new))  # 0 while m = -inf, if guarded
        p = torch.exp(s - safe(m_new).unsqueeze(-1))
        if ell_rule == "ok":
            ell = alpha * ell + p.sum(-1)
        elif ell_rule == "none":
            ell = ell + p.sum(-1)
        elif ell_rule == "inverted":
            ell = ell / alpha + p.sum(-1)
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


# The catalogue: (what the learner did, as _variant arguments) -> what to tell them.
# Checked in this order; the first variant that reproduces the learner's output wins.
MISTAKES: list[tuple[list[dict], str]] = [
    (
        [{"rescale_o": False}],
        "you rescale l but not the running output: when a block raises the max from "
        "m_old to m_new, the old sum o was built with e^{s - m_old} and must be "
        "multiplied by e^{m_old - m_new} too, exactly like l, before the block's "
        "e^{s - m_new} V is added",
    ),
    (
        [
            {"ell_rule": "none"},
            {"ell_rule": "inverted"},
            {"ell_rule": "old max"},
            {"ell_rule": "inverted", "m0": 0.0},
            {"ell_rule": "old max", "m0": 0.0},
        ],
        "l is rescaled with the wrong max: every term of l must be taken relative to "
        "the same, current max, so l_new = l * e^{m_old - m_new} + sum e^{s - m_new} "
        "(the factor is at most 1, and 0 while m_old = -inf)",
    ),
    (
        [{"divide": "each"}, {"divide": "each and end"}],
        "you divide by l before the last block: o / l is only right once every block "
        "has been added. Keep o unnormalised (the sum of e^{s - m} v) and divide once, "
        "after the loop",
    ),
    (
        [{"m0": 0.0}, {"m0": 0.0, "final_guard": False}],
        "your running max starts at 0 instead of -inf: when every score is far below "
        "0 (under about -100 in float32, -745 in float64), e^{s - 0} underflows to 0, "
        "l stays 0 and the output is 0/0 (or 0). "
        "Start with m = -inf (torch.full(..., float('-inf'))): the first block's own "
        "max then takes over",
    ),
    (
        [{"use_max": False}],
        "you take e^{s} without subtracting a running max: scores of 1e4 overflow "
        "(e^{89} is already inf in float32). Keep m, the largest score so far, and use "
        "e^{s - m}",
    ),
    (
        [{"guard": False}],
        "a block in which a row is entirely masked (all -inf) while its max is still "
        "-inf gives e^{-inf - (-inf)} = e^{nan}: NaN, which then never leaves. When "
        "the running max is -inf, subtract 0 instead",
    ),
    (
        [{"final_guard": False}],
        "a query whose every key is masked ends with l = 0 and o = 0, and 0/0 is NaN; "
        "the library's convention is a zero output for such a row: guard the final "
        "division (l.clamp_min(tiny), or torch.where(l > 0, ...))",
    ),
]


def _blocks(s: torch.Tensor, v: torch.Tensor, widths: Sequence[int]):
    edges = [0]
    for w in widths:
        edges.append(edges[-1] + w)
    pairs = zip(edges[:-1], edges[1:], strict=True)
    cuts = [(s[..., a:b].clone(), v[..., a:b, :].clone()) for a, b in pairs]
    return [c[0] for c in cuts], [c[1] for c in cuts]


def _cases() -> list[tuple[str, list[torch.Tensor], list[torch.Tensor]]]:
    g = _gen(13)
    cases = []
    s = _randn(g, 3, 7, scale=1.5)
    cases.append(("one block, scores (3, 7), values (7, 2)", s, _randn(g, 7, 2), [7]))
    s = _randn(g, 3, 8)
    s[:, 5:] += 3.0  # the max grows in the second block
    cases.append(
        (
            "two blocks of 5 and 3 keys, scores (3, 8), the max growing in the second",
            s,
            _randn(g, 8, 2),
            [5, 3],
        )
    )
    s = _randn(g, 2, 3, 4, 10, scale=2.0)  # (B, h, T_q, T_k)
    cases.append(
        (
            "four blocks of 4, 1, 3 and 2 keys, scores (2, 3, 4, 10), values "
            "(2, 3, 10, 5)",
            s,
            _randn(g, 2, 3, 10, 5),
            [4, 1, 3, 2],
        )
    )
    s = _randn(g, 2, 6) + 1e4
    cases.append(("scores near +1e4, (2, 6), blocks of 2", s, _randn(g, 6, 2), [2] * 3))
    s = _randn(g, 2, 6) - 1e4
    cases.append(("scores near -1e4, (2, 6), blocks of 3", s, _randn(g, 6, 2), [3, 3]))
    s = _randn(g, 3, 6)
    s[1, :3] = NEG_INF  # row 1: its whole first block is masked
    s[2, 4] = NEG_INF
    cases.append(
        (
            "scores (3, 6) in blocks of 3, row 1's first block entirely masked (-inf)",
            s,
            _randn(g, 6, 2),
            [3, 3],
        )
    )
    s = _randn(g, 3, 6)
    s[0] = NEG_INF  # row 0 may attend to nothing
    cases.append(
        (
            "scores (3, 6) in blocks of 4 and 2, row 0 fully masked (expected: zeros)",
            s,
            _randn(g, 6, 2),
            [4, 2],
        )
    )
    return [(text, *_blocks(s, v, w)) for text, s, v, w in cases]


def _same(got: torch.Tensor, want: torch.Tensor) -> bool:
    if got.shape != want.shape:
        return False
    a, b = got.detach().double(), want.detach().double()
    return bool(torch.allclose(a, b, atol=ATOL, rtol=RTOL, equal_nan=True))


def _diagnose(
    candidate: Callable, passed: list, s_blocks, v_blocks, got, want, inputs
) -> _Wrong:
    """Name the first catalogued mistake that reproduces the learner's output here and
    the reference on every earlier input, which the learner got right."""

    def explains(kw: dict) -> bool:
        return _same(got, _variant(s_blocks, v_blocks, **kw)) and all(
            _same(_variant(sb, vb, **kw), reference_online_attention(sb, vb))
            for sb, vb in passed
        )

    for variants, message in MISTAKES:
        if any(explains(kw) for kw in variants):
            return _Wrong(f"for {inputs}, {message}")
    if len(s_blocks) > 1:  # where does it go wrong: the first block alone?
        alone = _call(candidate, inputs, [s_blocks[0].clone()], [v_blocks[0].clone()])
        if isinstance(alone, torch.Tensor) and _same(
            alone, reference_online_attention(s_blocks[:1], v_blocks[:1])
        ):
            hint = (
                " (the first block alone comes out right, so look at how a later "
                "block updates m, l and o)"
            )
        else:
            hint = " (already wrong with the first block alone: look at the start)"
    else:
        hint = ""
    idx, g, w = _first_mismatch(got, want)
    return _Wrong(
        f"for {inputs}, your output{_where(idx)} is {_num(g)}; expected {_num(w)}"
        + hint
    )


@_checker
def check_online_attention(candidate: Callable) -> str:
    """Check ``candidate(score_blocks, value_blocks) -> output`` against the reference
    loop over :func:`transformer_lib.flash.online_attention_step`."""
    cases, passed = _cases(), []
    for inputs, s_blocks, v_blocks in cases:
        want = reference_online_attention(s_blocks, v_blocks)
        got = _call(
            candidate,
            inputs,
            [s.clone() for s in s_blocks],
            [v.clone() for v in v_blocks],
        )
        if isinstance(got, (tuple, list)):
            raise _Wrong(
                "your function returned a tuple or list; return only the output "
                f"tensor {_shape(want)}"
            )
        got = _tensor(got, f"your output for {inputs}")
        _same_shape(
            got,
            want,
            "your output",
            inputs,
            "one row per query, d_v wide (..., T_q, d_v)",
        )
        if not _same(got, want) or not bool(torch.isfinite(got).all()):
            raise _diagnose(candidate, passed, s_blocks, v_blocks, got, want, inputs)
        passed.append((s_blocks, v_blocks))
    return (
        f"{len(cases)} inputs agree with the reference update, including blocks of "
        "unequal width, scores of ±1e4, a masked block and a fully masked row."
    )
