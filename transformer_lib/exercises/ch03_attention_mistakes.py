"""Chapter 3's catalogue of known mistakes in scaled dot-product attention, each written
as a learner would write it, with the message the checker gives for it."""

from __future__ import annotations

import math

import torch

from ..attention import attention_scores, softmax
from .compare import close, where
from .harness import Mistake
from .language import N_, _

NEG_INF = float("-inf")


def _weights_hint(t) -> str:  # t: an AttentionTrial
    w = t.want_w
    if t.got_w.shape == w.shape[:-2] + (w.size(-1), w.size(-2)):
        return _(
            "the weights have one row per query and one column per key; are you"
            " computing K Q^T instead of Q K^T?"
        )
    return _("weights are (..., T_q, T_k): one row per query, one column per key")


# Known mistakes, each as a learner would write it


def learner_attention(
    q, k, v, mask=None, *, scale=None, fill=NEG_INF, invert=False, after=False, dim=-1
):
    """A learner's attention, softmax(q k^T / scale) v, with one thing changed."""
    scale = math.sqrt(q.size(-1)) if scale is None else scale
    scores = q @ k.transpose(-2, -1) / scale
    if mask is not None and not after:
        scores = scores.masked_fill(mask if invert else ~mask, fill)
    w = softmax(scores, dim=dim)
    if mask is not None and after:
        w = w.masked_fill(~mask, 0.0)
    return w @ v, w


def sdpa_returns_output_only(q, k, v, mask=None):
    out, w = learner_attention(q, k, v, mask)
    return out


def sdpa_weights_times_k(q, k, v, mask=None):
    out, w = learner_attention(q, k, v, mask)
    return w @ k, w


def sdpa_mask_inverted(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask, NEG_INF)  # fills where attending is allowed
    w = torch.softmax(scores, dim=-1)
    return w @ v, w


def sdpa_nan_on_fully_masked_rows(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, NEG_INF)
    w = torch.softmax(scores, dim=-1)  # a row of -inf gives NaN
    return w @ v, w


def sdpa_own_softmax_overflows(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, NEG_INF)
    e = scores.exp()  # no maximum subtracted: exp(1e4) = inf
    w = e / e.sum(-1, keepdim=True)
    if mask is not None:  # rows with no allowed key: zeros instead of 0 / 0
        w = w.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return w @ v, w


def sdpa_fill_minus_1e9(q, k, v, mask=None):
    return learner_attention(q, k, v, mask, fill=-1e9)


def sdpa_ignores_mask(q, k, v, mask=None):
    return learner_attention(q, k, v, None)


def sdpa_fill_zero(q, k, v, mask=None):
    return learner_attention(q, k, v, mask, fill=0.0)


def sdpa_mask_after_softmax(q, k, v, mask=None):
    return learner_attention(q, k, v, mask, after=True)


def sdpa_softmax_over_queries(q, k, v, mask=None):
    return learner_attention(q, k, v, mask, dim=-2)


def sdpa_weights_not_normalised(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    w = torch.exp(
        scores - scores.amax(dim=-1, keepdim=True)
    )  # never divided by the sum
    return w @ v, w


def sdpa_not_scaled(q, k, v, mask=None):
    return learner_attention(q, k, v, mask, scale=1.0)


def sdpa_scaled_by_d_k(q, k, v, mask=None):
    return learner_attention(q, k, v, mask, scale=q.size(-1))


def sdpa_multiplied_by_sqrt_d_k(q, k, v, mask=None):
    return learner_attention(q, k, v, mask, scale=1 / math.sqrt(q.size(-1)))


def sdpa_scaled_by_sqrt_T(q, k, v, mask=None):
    return learner_attention(q, k, v, mask, scale=math.sqrt(k.size(-2)))


def sdpa_output_from_scores(q, k, v, mask=None):
    out, w = learner_attention(q, k, v, mask)
    return attention_scores(q, k) @ v, w  # the raw scores, not the weights


ATTENTION_MISTAKES = [
    # what the function returns
    Mistake(
        sdpa_returns_output_only,
        lambda t: not t.is_pair,
        N_(
            "your function returned {returned}; it should return the pair (output,"
            " weights), like tl.scaled_dot_product_attention: `return out, weights`"
        ),
    ),
    Mistake.not_a_tensor(
        N_("the output (first returned value) for {inputs}"), attr="got_out"
    ),
    Mistake.not_a_tensor(
        N_("the weights (second returned value) for {inputs}"), attr="got_w"
    ),
    Mistake.wrong_shape(N_("your weights"), _weights_hint, attr="got_w", want="want_w"),
    Mistake.wrong_shape(
        N_("your output"),
        N_("the output is (..., T_q, d_v): one row per query, as wide as v"),
        attr="got_out",
        want="want_out",
        example=sdpa_weights_times_k,
    ),
    # the mask
    Mistake(
        sdpa_mask_inverted,
        lambda t: t.inverted,
        N_(
            "for {inputs}, your weights are zero on the keys the mask allows and"
            " positive"
            " on the keys it forbids: the mask convention is inverted. In this book a"
            " mask"
            " is bool with True = may attend, so fill the scores where the mask is"
            " False"
            " with -inf: scores.masked_fill(~mask, float('-inf'))"
        ),
    ),
    # inf or NaN
    Mistake(
        sdpa_nan_on_fully_masked_rows,
        lambda t: t.not_finite and t.nan_on_dead_only,
        N_(
            "for {inputs}, your output is NaN where a row is fully masked (query"
            " {dead_row} may attend to no key): what does softmax do to a row of -inf?"
            " The"
            " library gives such a row zero weights and a zero output"
        ),
    ),
    Mistake(
        sdpa_own_softmax_overflows,
        lambda t: t.not_finite and t.largest_score >= 1e3,
        N_(
            "your weights contain inf or NaN for {inputs}: exp(1e4) overflows. Subtract"
            " each row's maximum score before exp() (tl.softmax and torch.softmax both"
            " do)"
        ),
    ),
    Mistake.not_finite(  # inf or NaN in the weights
        N_("your weights{index} are {got:.4g} for {inputs}; expected {want:.4g}"),
        attr="got_w",
        want="want_w",
    ),
    Mistake(  # catch-all for inf or NaN in the output
        None,
        lambda t: t.not_finite,
        Mistake.mismatch(N_("your output"), "got_out", "want_out").message,
    ),
    # weight where there should be none
    Mistake(
        sdpa_fill_minus_1e9,
        lambda t: bool(t.dead.any()) and t.dead_rows_uniform,
        N_(
            "for {inputs}, the fully masked query spreads its weight evenly (1/{T_k} on"
            " every key) instead of having all-zero weights: filling masked scores"
            " with a"
            " large finite number (like -1e9) makes a row with no allowed key average"
            " every"
            " key. Fill with -inf, and make the softmax return zeros for a row that is"
            " all"
            " -inf (tl.softmax does)"
        ),
    ),
    Mistake(
        sdpa_ignores_mask,
        lambda t: t.attends_forbidden and t.like(mask=None),
        N_(
            "your weights ignore the mask for {inputs}: fill the scores where the mask"
            " is"
            " False with -inf before the softmax"
        ),
    ),
    Mistake(
        sdpa_fill_zero,
        lambda t: t.attends_forbidden,
        lambda t: _(
            "for {inputs}, query {i} puts weight {w:.4g} on key {j}, which the mask"
            " forbids: a masked score must be -inf before the softmax, so that its"
            " weight is exactly 0{fill0}"
        ).format(
            inputs=t.inputs,
            i=t.forbidden_at[-2],
            w=t.got_w[t.forbidden_at],
            j=t.forbidden_at[-1],
            fill0=t.fill0,
        ),
    ),
    # rows that do not sum to 1
    Mistake(
        sdpa_mask_after_softmax,
        lambda t: t.sums_off and t.mask is not None and t.like(after=True),
        N_(
            "{bad_row} of your weights sums to {bad_sum:.4g}, not 1, for {inputs}, and"
            " your"
            " weights equal the unmasked weights with the masked keys set to 0: you"
            " masked"
            " after the softmax. Mask the scores (set them to -inf) before the"
            " softmax, so"
            " the allowed weights share the whole probability"
        ),
    ),
    Mistake(
        sdpa_softmax_over_queries,
        lambda t: t.sums_off and t.over_queries,
        N_(
            "{bad_row} of your weights sums to {bad_sum:.4g}, not 1, for {inputs},"
            " while"
            " each column sums to 1: you took the softmax over the query axis. Each"
            " query's"
            " weights over the keys, the last axis (dim=-1), must sum to 1"
        ),
    ),
    Mistake(
        sdpa_weights_not_normalised,
        lambda t: t.sums_off,
        N_(
            "{bad_row} of your weights sums to {bad_sum:.4g}, not 1, for {inputs}: did"
            " you"
            " apply the softmax over the keys (dim=-1)?"
        ),
    ),
    # the scale
    Mistake(
        sdpa_not_scaled,
        lambda t: t.scaled_by(1.0),
        N_(
            "for {inputs}, your weights match softmax(Q K^T) with no scaling at all:"
            " divide"
            " the scores by sqrt(d_k)"
        ),
    ),
    Mistake(
        sdpa_scaled_by_d_k,
        lambda t: t.scaled_by(float(t.d_k)),
        N_(
            "for {inputs}, you divided the scores by d_k = {d_k}; the formula divides"
            " by"
            " its"
            " square root, sqrt(d_k) = {sqrt_d_k:.4g}"
        ),
    ),
    Mistake(
        sdpa_multiplied_by_sqrt_d_k,
        lambda t: t.scaled_by(1.0 / t.sqrt_d_k),
        N_(
            "for {inputs}, you multiplied the scores by sqrt(d_k) instead of dividing"
            " by"
            " it"
        ),
    ),
    Mistake(
        sdpa_scaled_by_sqrt_T,
        lambda t: t.scaled_by(math.sqrt(t.T_k)),
        N_(
            "for {inputs}, you divided the scores by sqrt(T) = sqrt({T_k}), the square"
            " root"
            " of the sequence length; the formula divides by sqrt(d_k) = sqrt({d_k}),"
            " the"
            " feature size of q and k"
        ),
    ),
    # a learner who divides by sqrt(T_q) meets the sqrt(T_k) row first (T_q = T_k there)
    Mistake(
        None,
        lambda t: t.scaled_by(math.sqrt(t.T_q)),
        N_(
            "for {inputs}, you divided the scores by sqrt(T_q) = sqrt({T_q}), the"
            " square"
            " root of the number of queries; the formula divides by sqrt(d_k) ="
            " sqrt({d_k}), the feature size of q and k"
        ),
    ),
    # the output
    Mistake(  # catch-all for wrong weights
        None,
        lambda t: not close(t.got_w, t.want_w),
        Mistake.mismatch(N_("your weights"), "got_w", "want_w").message,
    ),
    Mistake(
        sdpa_output_from_scores,
        lambda t: True,
        lambda t: _(
            "your weights are right but your output is not, for {inputs}:"
            " output{index} is {got:.4g}, expected {want:.4g}. The output is the"
            " weighted sum of the values, weights @ v"
        ).format(
            inputs=t.inputs,
            index=where(t.out_mismatch[0]),
            got=t.out_mismatch[1],
            want=t.out_mismatch[2],
        ),
    ),
]
