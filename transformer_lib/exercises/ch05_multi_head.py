"""Chapter 5: grouped-query attention's ``repeat_kv``, and multi-head attention.

Every checker's reference is a library function (``tl.repeat_kv``,
``tl.multi_head_attention``).
"""

from __future__ import annotations

import math
from functools import cached_property

import torch

from ..attention import softmax
from ..heads import multi_head_attention, repeat_kv
from ..masks import causal_mask, padding_mask
from .compare import close, shape
from .harness import Checker, Mistake, Trial, gen, randn
from .language import N_, _

NEG_INF = float("-inf")

# --------------------------------------------------------------------------------------
# repeat_kv(k, n_rep): (B, h_kv, T, d) -> (B, h_kv * n_rep, T, d)
# --------------------------------------------------------------------------------------


class RepeatKVTrial(Trial):
    def __init__(self, k: torch.Tensor, n_rep: int) -> None:
        inputs = _("k of shape {shape} (B, h_kv, T, d) and n_rep = {n_rep}").format(
            shape=shape(k), n_rep=n_rep
        )
        super().__init__(inputs, (k, n_rep))
        self.k, self.n_rep = k, n_rep

    @cached_property
    def want(self) -> torch.Tensor:
        return repeat_kv(self.k, self.n_rep)


def _repeat_kv_trials() -> list[RepeatKVTrial]:
    g = gen(5)
    sizes = [((2, 2, 3, 4), 3), ((1, 4, 5, 2), 2), ((1, 1, 4, 3), 4), ((2, 3, 2, 5), 1)]
    return [RepeatKVTrial(randn(g, *size), n_rep) for size, n_rep in sizes]


_REPEAT_KV_SHAPE = N_(
    "your output has shape {got_shape} for {inputs}; expected (B, h_kv * n_rep, T, d):"
    " repeat along the head axis, dim 1"
)


# Known mistakes, each as a learner would write it


def repeat_kv_time_axis(k, n_rep):
    return k.repeat_interleave(n_rep, dim=2)


def repeat_kv_tiled(k, n_rep):
    return k.repeat(1, n_rep, 1, 1)  # k0, k1, k0, k1, ...


def _time_axis_shape(t: RepeatKVTrial) -> tuple[int, ...]:
    B, h_kv, T, d = t.k.shape
    return (B, h_kv, T * t.n_rep, d)


REPEAT_KV_MISTAKES = [
    Mistake.not_a_tensor(N_("your output for {inputs}")),
    Mistake(
        repeat_kv_time_axis,
        lambda t: t.got.shape != t.want.shape and t.got.shape == _time_axis_shape(t),
        (_REPEAT_KV_SHAPE, N_("; you repeated along the time axis, dim 2")),
    ),
    Mistake(  # catch-all for the shape
        None, lambda t: t.got.shape != t.want.shape, _REPEAT_KV_SHAPE
    ),
    Mistake(
        repeat_kv_tiled,
        lambda t: close(t.got, t.k.repeat(1, t.n_rep, 1, 1)),
        N_(
            "for {inputs}, you tiled the heads as k0, k1, k0, k1, ... (repeat or tile);"
            " query head j reads K/V head j // n_rep, so the copies of a head must sit"
            " next"
            " to each other, k0, k0, k1, k1, ...: use repeat_interleave(n_rep, dim=1)"
        ),
    ),
    Mistake.mismatch(N_("your output")),
]

check_repeat_kv = Checker(
    "check_repeat_kv",
    "Check ``candidate(k, n_rep)`` against :func:`transformer_lib.repeat_kv`.",
    _repeat_kv_trials,
    REPEAT_KV_MISTAKES,
    N_("{n} inputs agree with tl.repeat_kv, including MQA (h_kv = 1) and n_rep = 1."),
)


# --------------------------------------------------------------------------------------
# multi_head_attention(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None); the reference
# is the library's tl.multi_head_attention
# --------------------------------------------------------------------------------------


class MHATrial(Trial):
    def __init__(self, inputs, x_q, x_kv, W, h, mask=None) -> None:
        kwargs = {} if mask is None else {"mask": mask}
        super().__init__(inputs, (x_q, x_kv, *W, h), kwargs)
        self.x_q, self.x_kv, self.W, self.h, self.mask = x_q, x_kv, W, h, mask

    @cached_property
    def want(self) -> torch.Tensor:
        return multi_head_attention(self.x_q, self.x_kv, *self.W, self.h, self.mask)

    def like(self, **variant) -> bool:
        """The output equals ``_mha(..., **variant)``, a known mistake's.

        A NaN row (a fully masked query) compares as the zero row it should be.
        """
        if "invert" in variant and self.mask is None:
            return False
        want = _mha(self.x_q, self.x_kv, *self.W, self.h, self.mask, **variant)
        return close(self.got.nan_to_num(0.0), want)

    @cached_property
    def ignores_mask(self) -> bool:
        unmasked = multi_head_attention(self.x_q, self.x_kv, *self.W, self.h)
        return self.mask is not None and close(self.got, unmasked)


def _mha_trials() -> list[MHATrial]:
    g = gen(11)

    def weights(D: int) -> list[torch.Tensor]:
        return [randn(g, D, D, scale=D**-0.5) for _i in range(4)]

    x6 = randn(g, 1, 6, 12)
    x5 = randn(g, 2, 5, 8)
    trials = [
        MHATrial(
            _("self-attention, x_q = x_kv of shape (2, 5, 8), n_heads = 2, no mask"),
            x5,
            x5,
            weights(8),
            2,
        )
    ]
    trials.append(
        MHATrial(
            _("cross-attention, x_q (2, 3, 12), x_kv (2, 6, 12), n_heads = 3, no mask"),
            randn(g, 2, 3, 12),
            randn(g, 2, 6, 12),
            weights(12),
            3,
        )
    )
    trials.append(
        MHATrial(
            _("x (1, 6, 12), n_heads = 4 (odd d_k = 3), causal mask tl.causal_mask(6)"),
            x6,
            x6,
            weights(12),
            4,
            causal_mask(6),
        )
    )
    trials.append(
        MHATrial(
            _(
                "x_q (2, 4, 8), x_kv (2, 5, 8), n_heads = 2, padding mask"
                " tl.padding_mask([5, 2], 5)"
            ),
            randn(g, 2, 4, 8),
            randn(g, 2, 5, 8),
            weights(8),
            2,
            padding_mask([5, 2], 5),
        )
    )
    x4 = randn(g, 1, 4, 6)
    trials.append(MHATrial(_("x (1, 4, 6), n_heads = 1"), x4, x4, weights(6), 1))
    return trials


# Known mistakes, each as a learner would write it


def _mha(
    x_q,
    x_kv,
    W_q,
    W_k,
    W_v,
    W_o,
    n_heads,
    mask=None,
    *,
    split_view=False,
    merge_view=False,
    use_W_o=True,
    d_scale=None,
    invert=False,
    one_head=False,
    transpose_w=False,
):
    """A learner's multi-head attention, with one thing changed (each keyword names
    one known mistake)."""
    if transpose_w:  # the nn.Linear habit: x @ W^T
        W_q, W_k, W_v, W_o = W_q.T, W_k.T, W_v.T, W_o.T
    B, T_q, D = x_q.shape
    h = 1 if one_head else n_heads
    d_k = D // h

    def split(t):
        if split_view:
            return t.view(B, h, t.size(1), d_k)  # no transpose
        return t.view(B, t.size(1), h, d_k).transpose(1, 2)

    q, k, v = split(x_q @ W_q), split(x_kv @ W_k), split(x_kv @ W_v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_scale or d_k)
    if mask is not None:
        scores = scores.masked_fill(mask if invert else ~mask, NEG_INF)
    out = softmax(scores, dim=-1) @ v  # (B, h, T_q, d_k)
    if merge_view:
        out = out.reshape(B, T_q, D)
    else:
        out = out.transpose(1, 2).reshape(B, T_q, D)
    return out @ W_o if use_W_o else out


def mha_returns_a_tuple(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    out = _mha(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask)
    return out, None  # (output, weights), like tl.MultiHeadAttention


def mha_split_without_transpose(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    return _mha(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask, split_view=True)


def mha_heads_split_without_transpose(
    x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None
):
    return _mha(
        x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask, split_view=True, merge_view=True
    )


def mha_merge_without_transpose(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    return _mha(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask, merge_view=True)


def mha_forgot_W_o(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    return _mha(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask, use_W_o=False)


def mha_scaled_by_sqrt_d_model(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    return _mha(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask, d_scale=x_q.size(-1))


def mha_one_head(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    return _mha(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask, one_head=True)


def mha_mask_inverted(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    return _mha(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask, invert=True)


def mha_weights_transposed(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    return _mha(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask, transpose_w=True)


def mha_ignores_mask(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    return _mha(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, None)


MHA_MISTAKES = [
    # what the function returns
    Mistake.returns_a_tuple(
        mha_returns_a_tuple, N_("the output tensor (B, T_q, d_model)")
    ),
    Mistake.not_a_tensor(N_("your output for {inputs}")),
    Mistake.wrong_shape(
        N_("your output"), N_("one row per query, d_model wide: (B, T_q, d_model)")
    ),
    # the heads
    Mistake(
        mha_split_without_transpose,
        lambda t: t.like(split_view=True),
        N_(
            "for {inputs}, your heads look split with .view(B, h, T, d_k) (or reshape)"
            " straight from (B, T, d_model): that cuts the matrix across token rows,"
            " so a"
            " 'head' mixes features of different tokens. Reshape to (B, T, h, d_k)"
            " first,"
            " then transpose(1, 2) to (B, h, T, d_k), as tl.split_heads does"
        ),
    ),
    Mistake(
        mha_heads_split_without_transpose,
        lambda t: t.like(split_view=True, merge_view=True),
        N_(
            "for {inputs}, your heads look split with .view(B, h, T, d_k) straight from"
            " (B, T, d_model) (and merged back the same way): that cuts the matrix"
            " across"
            " token rows, so a 'head' mixes features of different tokens. Reshape to"
            " (B, T, h, d_k) first, then transpose(1, 2), as tl.split_heads does"
        ),
    ),
    Mistake(
        mha_merge_without_transpose,
        lambda t: t.like(merge_view=True),
        N_(
            "for {inputs}, your heads are concatenated with a reshape of (B, h, T, d_k)"
            " straight to (B, T, d_model), which mixes tokens: transpose back to"
            " (B, T, h, d_k) first, then reshape, as tl.merge_heads does"
        ),
    ),
    Mistake(
        mha_forgot_W_o,
        lambda t: t.like(use_W_o=False),
        N_(
            "for {inputs}, your output matches Concat(head_1, ..., head_h) before the"
            " output projection: multiply the concatenated heads by W_o at the end"
        ),
    ),
    Mistake(
        mha_scaled_by_sqrt_d_model,
        lambda t: t.like(d_scale=t.x_q.size(-1)),
        N_(
            "for {inputs}, you scaled the scores by sqrt(d_model); each head's scores"
            " are"
            " divided by sqrt(d_k), with d_k = d_model / n_heads, the width of one head"
        ),
    ),
    Mistake(
        mha_one_head,
        lambda t: t.like(one_head=True),
        N_(
            "for {inputs}, your output matches a single attention head over all d_model"
            " features: split Q, K and V into n_heads heads of d_k = d_model / n_heads"
            " features each"
        ),
    ),
    # the mask and the weights
    Mistake(
        mha_mask_inverted,
        lambda t: t.like(invert=True),
        N_(
            "for {inputs}, your mask convention is inverted: True = may attend, so"
            " fill the"
            " scores with -inf where the mask is False"
        ),
    ),
    Mistake(
        mha_weights_transposed,
        lambda t: t.like(transpose_w=True),
        N_(
            "for {inputs}, your output matches x @ W.T: in this exercise the weights"
            " are"
            " (d_model, d_model) matrices applied as x @ W (already transposed, unlike"
            " nn.Linear's weight)"
        ),
    ),
    Mistake(
        mha_ignores_mask,
        lambda t: t.ignores_mask,
        N_(
            "your output ignores the mask for {inputs}: pass it to the attention of"
            " every"
            " head"
        ),
    ),
    Mistake.mismatch(N_("your output")),
]

check_multi_head_attention = Checker(
    "check_multi_head_attention",
    "Check ``candidate(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None) -> out``"
    " against :func:`multi_head_attention` (equal to ``tl.MultiHeadAttention`` without"
    " biases).",
    _mha_trials,
    MHA_MISTAKES,
    N_(
        "{n} inputs agree with the reference (= tl.MultiHeadAttention without biases),"
        " including cross-attention, causal and padding masks, an odd d_k and one head."
    ),
)
