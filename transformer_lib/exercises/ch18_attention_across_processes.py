"""Chapter 18: one step of ring attention, the first place where attention across
processes goes wrong (the second, the all-reduce of tensor parallelism, is in
``ch18_tensor_parallel``).

``check_ring_step``: one step of ring attention. The learner writes
``my_ring_step(q, k, v, q_start, k_start, out, lse)``: this rank's queries q
(..., T_q, d) start at position ``q_start`` of the whole sequence; the K/V block it
holds now, k and v (..., T_k, d), starts at ``k_start``; ``out`` (..., T_q, d) and
``lse`` (..., T_q) are the merge of the blocks seen so far (zeros and -inf before the
first). It attends to the block under the causal mask of the whole sequence and
returns the new (out, lse) by the log-sum-exp merge (eq. ring-attention, lse-merge).
The reference is the library's ``parallel.block_attention`` and
``flash.merge_attention``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property

import torch

from ..flash import merge_attention
from ..parallel.ring import block_attention
from .compare import close
from .harness import Checker, Mistake, Trial, gen
from .harness import randn as _randn
from .language import N_, _

NEG_INF = float("-inf")


# --------------------------------------------------------------------------------------
# (a) one step of ring attention
# --------------------------------------------------------------------------------------


def reference_ring_step(q, k, v, q_start, k_start, out, lse):
    """The exercise's answer: the block under the global causal mask, then the merge."""
    q_pos = q_start + torch.arange(q.shape[-2])
    k_pos = k_start + torch.arange(k.shape[-2])
    mask = (
        q_pos[:, None] >= k_pos[None, :]
    )  # (T_q, T_k), positions of the whole sequence
    o_s, lse_s = block_attention(q, k, v, mask)
    return merge_attention([out, o_s], [lse, lse_s])


def _ring_step(q, k, v, q_start, k_start, out, lse, *, local=False, merge="ok"):
    """A learner's ring step. local: the mask from positions within the shards;
    merge: "ok", "add" (outputs added), "mean" (outputs averaged), "naive" (e^L
    without subtracting the max), "max" (L = the larger L), "nan" (no guard for
    -inf)."""
    if local:
        q_pos, k_pos = torch.arange(q.shape[-2]), torch.arange(k.shape[-2])
    else:
        q_pos = q_start + torch.arange(q.shape[-2])
        k_pos = k_start + torch.arange(k.shape[-2])
    s = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    s = s.masked_fill(q_pos[:, None] < k_pos[None, :], NEG_INF)
    lse_s = torch.logsumexp(s, dim=-1)
    safe = torch.where(torch.isneginf(lse_s), torch.zeros_like(lse_s), lse_s)
    o_s = torch.exp(s - safe.unsqueeze(-1)) @ v
    if merge == "add":
        return out + o_s, torch.logaddexp(lse, lse_s)
    if merge == "mean":
        return (out + o_s) / 2, torch.logaddexp(lse, lse_s)
    if merge == "max":
        new = torch.logaddexp(lse, lse_s)
        shift = torch.where(torch.isneginf(new), torch.zeros_like(new), new)
        w1, w2 = torch.exp(lse - shift), torch.exp(lse_s - shift)
        return w1.unsqueeze(-1) * out + w2.unsqueeze(-1) * o_s, torch.maximum(
            lse, lse_s
        )
    if merge == "naive":
        e1, e2 = torch.exp(lse), torch.exp(lse_s)
        total = e1 + e2
        o = (e1.unsqueeze(-1) * out + e2.unsqueeze(-1) * o_s) / total.unsqueeze(-1)
        return o, torch.log(total)
    new = torch.logaddexp(lse, lse_s)
    if merge == "nan":
        shift = new
    else:
        shift = torch.where(torch.isneginf(new), torch.zeros_like(new), new)
    w1, w2 = torch.exp(lse - shift), torch.exp(lse_s - shift)
    return w1.unsqueeze(-1) * out + w2.unsqueeze(-1) * o_s, new


def ring_step_local_mask(q, k, v, q_start, k_start, out, lse):
    return _ring_step(q, k, v, q_start, k_start, out, lse, local=True)


def ring_step_outputs_added(q, k, v, q_start, k_start, out, lse):
    return _ring_step(q, k, v, q_start, k_start, out, lse, merge="add")


def ring_step_outputs_averaged(q, k, v, q_start, k_start, out, lse):
    return _ring_step(q, k, v, q_start, k_start, out, lse, merge="mean")


def ring_step_without_the_max(q, k, v, q_start, k_start, out, lse):
    return _ring_step(q, k, v, q_start, k_start, out, lse, merge="naive")


def ring_step_lse_is_the_max(q, k, v, q_start, k_start, out, lse):
    return _ring_step(q, k, v, q_start, k_start, out, lse, merge="max")


def ring_step_empty_state_gives_nan(q, k, v, q_start, k_start, out, lse):
    return _ring_step(q, k, v, q_start, k_start, out, lse, merge="nan")


class RingTrial(Trial):
    def __init__(self, inputs, q, k, v, q_start, k_start, out, lse) -> None:
        super().__init__(inputs, (q, k, v, q_start, k_start, out, lse))
        self.q_start, self.k_start, self.lse_in = q_start, k_start, lse

    @cached_property
    def want(self):
        return reference_ring_step(*self.args)

    @cached_property
    def correct(self) -> bool:
        return (
            self.pair_ok
            and close(self.got[0], self.want[0])
            and close(self.got[1], self.want[1])
        )

    @cached_property
    def pair_ok(self) -> bool:
        g = self.got
        return (
            isinstance(g, tuple | list)
            and len(g) == 2
            and all(isinstance(t, torch.Tensor) for t in g)
            and g[0].shape == self.want[0].shape
            and g[1].shape == self.want[1].shape
        )

    def like(self, fn: Callable) -> bool:
        o, lse = fn(*self.args)
        return self.pair_ok and close(self.got[0], o) and close(self.got[1], lse)

    @cached_property
    def not_finite(self) -> bool:
        """The learner's output has inf or nan where the reference is finite."""
        return self.pair_ok and bool(
            (~torch.isfinite(self.got[0]) & torch.isfinite(self.want[0])).any()
        )

    @property
    def got_kind(self) -> str:
        return type(self.got).__name__

    got_out = property(lambda self: self.got[0])
    got_lse = property(lambda self: self.got[1])
    want_out = property(lambda self: self.want[0])
    want_lse = property(lambda self: self.want[1])


def _ring_trials() -> list[RingTrial]:
    g = gen(18)
    d, B, h = 8, 1, 2

    def randn(g, *size, scale=1.0):
        return _randn(g, *size, scale=scale).double()

    def state(T_q, q, k_before, v_before):
        """(out, lse) of the queries over an earlier block with no mask."""
        return block_attention(q, k_before, v_before, None)

    trials = []
    for name, T_q, T_k, q_start, k_start, scale in (
        (_("a block below the diagonal (queries 8..11, keys 4..7)"), 4, 4, 8, 4, 1.0),
        (_("the diagonal block (queries 4..8, keys 4..8)"), 5, 5, 4, 4, 1.0),
        (_("a block below the diagonal with scores near 1000"), 3, 4, 8, 4, 20.0),
    ):
        q = randn(g, B, h, T_q, d, scale=scale)
        k, v = randn(g, B, h, T_k, d, scale=scale), randn(g, B, h, T_k, d)
        k0, v0 = randn(g, B, h, 4, d, scale=scale), randn(g, B, h, 4, d)
        out, lse = state(T_q, q, k0, v0)
        trials.append(RingTrial(name, q, k, v, q_start, k_start, out, lse))
    # a first block wholly above the diagonal: nothing merged before it, nothing now
    q = randn(g, B, h, 4, d)
    k, v = randn(g, B, h, 4, d), randn(g, B, h, 4, d)
    empty_out, empty_lse = (
        torch.zeros(B, h, 4, d, dtype=q.dtype),
        torch.full((B, h, 4), NEG_INF, dtype=q.dtype),
    )
    trials.append(
        RingTrial(
            _("a first block wholly above the diagonal (queries 0..3, keys 4..7;"
            " out = 0 and lse = -inf: nothing merged yet)"),
            q, k, v, 0, 4, empty_out, empty_lse,
        )
    )  # fmt: skip
    return trials


RING_MISTAKES = [
    Mistake(
        None,
        lambda t: not isinstance(t.got, tuple | list) or len(t.got) != 2,
        N_(
            "for {inputs}, return a pair (out, lse): the merged output and its"
            " log-sum-exp, which the next step of the ring needs; got {got_kind}"
        ),
    ),
    Mistake(
        None,
        lambda t: not t.pair_ok,
        N_(
            "for {inputs}, out should be (..., T_q, d) and lse (..., T_q), the shapes"
            " of"
            " the running state you were given"
        ),
    ),
    Mistake(
        ring_step_local_mask,
        lambda t: t.q_start != t.k_start and t.like(ring_step_local_mask),
        N_(
            "for {inputs}, your causal mask compares positions within the shards"
            " (0, 1, ... in each): query q_start + i may see key k_start + j when"
            " k_start + j <= q_start + i, positions of the whole sequence"
        ),
    ),
    Mistake(
        ring_step_empty_state_gives_nan,
        lambda t: bool(torch.isneginf(t.lse_in).all()) and t.not_finite,
        N_(
            "for {inputs}, your output is nan: with lse = -inf the weight"
            " e^(lse - L) is e^(-inf - (-inf)); a part whose lse is -inf must weigh 0"
            " (shift by 0 where L is -inf, as merge_attention does)"
        ),
    ),
    Mistake(
        ring_step_without_the_max,
        lambda t: t.not_finite,
        N_(
            "for {inputs}, your result is inf or nan: e^L overflows once L passes ~709"
            " in float64. Never form e^L itself: rescale by the running max, the"
            " weights"
            " are e^(L_s - L) with L = logaddexp(lse, lse_s)"
        ),
    ),
    Mistake(
        ring_step_outputs_added,
        lambda t: t.like(ring_step_outputs_added),
        N_(
            "for {inputs}, you added the two outputs: each is already normalised by its"
            " own block's softmax, so they must be weighed by e^(L_s - L), the share of"
            " the softmax's denominator each block holds"
        ),
    ),
    Mistake(
        ring_step_outputs_averaged,
        lambda t: t.like(ring_step_outputs_averaged),
        N_(
            "for {inputs}, you averaged the two outputs: the blocks weigh e^(L_s - L),"
            " their shares of the denominator, not 1/2 each"
        ),
    ),
    Mistake(
        ring_step_lse_is_the_max,
        lambda t: close(t.got[0], t.want[0]) and t.like(ring_step_lse_is_the_max),
        N_(
            "for {inputs}, your output is right but your lse is the larger of the two:"
            " the merged log-sum-exp is log(e^lse + e^lse_s), torch.logaddexp"
        ),
    ),
    Mistake(
        None,
        lambda t: not close(t.got_out, t.want_out),
        Mistake.mismatch(N_("your out"), attr="got_out", want="want_out").message,
    ),
    Mistake.mismatch(N_("your lse"), attr="got_lse", want="want_lse"),
]

check_ring_step = Checker(
    "check_ring_step",
    "Check ``candidate(q, k, v, q_start, k_start, out, lse) -> (out, lse)``, one step"
    " of causal ring attention, against the library's block attention and merge.",
    _ring_trials,
    RING_MISTAKES,
    N_(
        "{n} steps agree with the reference: below the diagonal, on it, with scores"
        " near 1000, and a first block wholly above it."
    ),
)


# --------------------------------------------------------------------------------------
# (b) tensor-parallel attention: where the all-reduce goes
