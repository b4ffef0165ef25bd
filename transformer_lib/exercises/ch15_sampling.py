"""Chapter 15: the top-k and top-p (nucleus) filters of sampling."""

from __future__ import annotations

from functools import cached_property

import torch

from ..sampling import top_k_filter, top_p_filter
from .compare import close
from .harness import Checker, Mistake, Trial, gen, randn
from .language import N_, _

NEG_INF = float("-inf")


class FilterTrial(Trial):
    """One row or batch of logits and the filter's parameter (k or p)."""

    def __init__(self, inputs: str, logits: torch.Tensor, param, reference) -> None:
        super().__init__(inputs, (logits, param))
        self.logits, self.param, self.reference = logits, param, reference

    @cached_property
    def want(self) -> torch.Tensor:
        return self.reference(self.logits, self.param)

    @cached_property
    def kept(self) -> torch.Tensor:
        """Which tokens the learner kept (finite), bool."""
        return torch.isfinite(self.got)

    @cached_property
    def want_kept(self) -> torch.Tensor:
        return torch.isfinite(self.want)

    @cached_property
    def zeros_for_inf(self) -> bool:
        """The dropped tokens are 0 instead of -inf, the kept ones right."""
        g = self.got
        return (
            bool((g[~self.want_kept] == 0).all())
            and bool(self.kept.all())
            and close(g[self.want_kept], self.want[self.want_kept])
        )

    @cached_property
    def probabilities(self) -> bool:
        """The learner returned the renormalised probabilities instead of logits."""
        return close(self.got, torch.softmax(self.want, dim=-1))

    @cached_property
    def same_set_changed_values(self) -> bool:
        """The right tokens are kept, but their logits were changed."""
        return bool((self.kept == self.want_kept).all()) and not close(
            self.got[self.kept], self.want[self.want_kept]
        )

    @cached_property
    def n_kept(self) -> str:
        got, want = self.kept.sum(-1).flatten(), self.want_kept.sum(-1).flatten()
        bad = int((got != want).nonzero()[0])
        return _("row {row} keeps {got} tokens; expected {want}").format(
            row=bad, got=int(got[bad]), want=int(want[bad])
        )


# --------------------------------------------------------------------------------------
# top_k_filter(logits, k): -inf below the k-th largest logit
# --------------------------------------------------------------------------------------


def _top_k_trials() -> list[FilterTrial]:
    g = gen(15)
    tied = torch.tensor([[2.0, 1.0, 1.0, 0.5, -1.0]])  # the 2nd and 3rd are tied
    return [
        FilterTrial(_("logits (5,), k = 2"), randn(g, 5), 2, top_k_filter),
        FilterTrial(_("logits (3, 10), k = 3"), randn(g, 3, 10), 3, top_k_filter),
        FilterTrial(
            _("logits (2, 6), k = 1 (greedy)"), randn(g, 2, 6), 1, top_k_filter
        ),
        FilterTrial(
            _("logits [[2, 1, 1, 0.5, -1]], k = 2 (a tie at the 2nd place)"),
            tied,
            2,
            top_k_filter,
        ),
        FilterTrial(
            _("logits (2, 4), k = 6 (k larger than the vocabulary: keep every token)"),
            randn(g, 2, 4),
            6,
            top_k_filter,
        ),
    ]


def _keep(logits: torch.Tensor, mask_from: torch.Tensor) -> torch.Tensor:
    """``logits`` where ``mask_from`` is finite, -inf elsewhere."""
    return logits.masked_fill(~torch.isfinite(mask_from), NEG_INF)


# Known mistakes, each as a learner would write it


def top_k_smallest(logits, k):
    kth = torch.topk(logits, min(k, logits.size(-1)), largest=False).values[..., -1:]
    return logits.masked_fill(logits > kth, NEG_INF)


def top_k_zero_fill(logits, k):
    kth = torch.topk(logits, min(k, logits.size(-1))).values[..., -1:]
    return logits.masked_fill(logits < kth, 0.0)


def top_k_probabilities(logits, k):
    kth = torch.topk(logits, min(k, logits.size(-1))).values[..., -1:]
    return torch.softmax(logits.masked_fill(logits < kth, NEG_INF), dim=-1)


def top_k_one_too_many(logits, k):
    values = torch.sort(logits, dim=-1, descending=True).values
    kth = values[..., min(k, logits.size(-1) - 1), None]  # index k: the (k+1)-th
    return logits.masked_fill(logits < kth, NEG_INF)


def top_k_exactly_k(logits, k):
    k = min(k, logits.size(-1))
    idx = torch.topk(logits, k).indices  # ties at the k-th place: only one is kept
    out = torch.full_like(logits, NEG_INF)
    return out.scatter(-1, idx, logits.gather(-1, idx))


def top_k_renormalised_logits(logits, k):
    kth = torch.topk(logits, min(k, logits.size(-1))).values[..., -1:]
    kept = logits.masked_fill(logits < kth, NEG_INF)
    return kept - torch.logsumexp(kept, dim=-1, keepdim=True)  # log-probabilities


def _not_filtered_logits(zero_fill, probabilities) -> list[Mistake]:
    """The rows both filters' tables open with: the result is not logits of the
    input's shape with -inf outside the kept set (``zero_fill`` and ``probabilities``:
    that filter's learner who fills with 0, and who returns the probabilities)."""
    return [
        Mistake.not_a_tensor(N_("your output for {inputs}")),
        Mistake.wrong_shape(
            N_("your output"),
            N_(
                "a filter returns logits of the input's shape, with -inf outside the"
                " kept set"
            ),
        ),
        Mistake(
            zero_fill,
            lambda t: t.zeros_for_inf,
            N_(
                "for {inputs}, the dropped tokens hold 0: a logit of 0 still has"
                " probability e^0 / Z > 0 after the softmax; fill them with -inf"
            ),
        ),
        Mistake(
            probabilities,
            lambda t: t.probabilities,
            N_(
                "for {inputs}, you returned probabilities; the filter returns logits"
                " (-inf outside the kept set), and the softmax comes after it"
            ),
        ),
    ]


TOP_K_MISTAKES = [
    *_not_filtered_logits(top_k_zero_fill, top_k_probabilities),
    Mistake(
        top_k_renormalised_logits,
        lambda t: t.same_set_changed_values,
        N_(
            "for {inputs}, the right tokens are kept but their logits changed; keep"
            " them as"
            " they are (the softmax that follows renormalises)"
        ),
    ),
    Mistake(
        top_k_smallest,
        lambda t: close(t.got, _keep(t.logits, top_k_filter(-t.logits, t.param))),
        N_("for {inputs}, you kept the k smallest logits; top-k keeps the k largest"),
    ),
    Mistake(
        top_k_one_too_many,
        lambda t: close(t.got, top_k_filter(t.logits, t.param + 1)),
        N_(
            "for {inputs}, you kept k + 1 tokens: the threshold is the k-th largest"
            " logit,"
            " index k - 1 of the sorted values (index k is the (k+1)-th)"
        ),
    ),
    Mistake(
        top_k_exactly_k,
        lambda t: (
            bool((t.kept & ~t.want_kept).sum() == 0)
            and bool((t.want_kept & ~t.kept).any())
        ),
        N_(
            "for {inputs}, {n_kept}: tokens tied with the k-th largest logit are kept"
            " too"
            " (z_v >= z_(k), eq. top-k), as transformers does; compare with the k-th"
            " value"
            " instead of keeping k indices"
        ),
    ),
    Mistake.mismatch(N_("your output")),
]

check_top_k_filter = Checker(
    "check_top_k_filter",
    "Check ``candidate(logits, k)`` against :func:`transformer_lib.top_k_filter`.",
    _top_k_trials,
    TOP_K_MISTAKES,
    N_(
        "{n} inputs agree with tl.top_k_filter, including k = 1, a tie and k larger"
        " than"
        " the vocabulary."
    ),
)


# --------------------------------------------------------------------------------------
# top_p_filter(logits, p): the smallest set of most likely tokens holding >= p
# --------------------------------------------------------------------------------------


def _top_p_trials() -> list[FilterTrial]:
    g = gen(25)
    peaked = torch.tensor([[4.0, 1.0, 0.5, 0.0, -1.0]])  # the top token holds ~0.89
    return [
        FilterTrial(
            _("logits (6,), p = 0.5"), randn(g, 6, scale=2.0), 0.5, top_p_filter
        ),
        FilterTrial(
            _("logits (3, 8), p = 0.9"), randn(g, 3, 8, scale=2.0), 0.9, top_p_filter
        ),
        FilterTrial(
            _("logits [[4, 1, 0.5, 0, -1]], p = 0.6 (the top token alone holds more)"),
            peaked,
            0.6,
            top_p_filter,
        ),
        FilterTrial(
            _("logits (2, 5), p = 1.0 (keep every token)"),
            randn(g, 2, 5),
            1.0,
            top_p_filter,
        ),
    ]


def _top_p_variant(
    logits, p, *, crossing=False, unsorted=False, ascending=False, unsort=True
) -> torch.Tensor:
    """top-p with one of the common mistakes, each named by its keyword (float64)."""
    z = logits.double()
    if unsorted:
        order = torch.arange(z.size(-1)).expand_as(z)
    else:
        order = torch.argsort(z, dim=-1, descending=not ascending)
    probs = torch.softmax(z, dim=-1).gather(-1, order)  # in the chosen order
    total = probs.cumsum(-1)
    drop_sorted = total > p if crossing else total - probs >= p
    drop = drop_sorted.scatter(-1, order, drop_sorted) if unsort else drop_sorted
    return z.masked_fill(drop, NEG_INF)


# Known mistakes, each as a learner would write it


def _sorted_probs(logits):
    sorted_logits, idx = torch.sort(logits, dim=-1, descending=True)
    return torch.softmax(sorted_logits, dim=-1), idx


def top_p_drops_the_crossing_token(logits, p):
    probs, idx = _sorted_probs(logits)
    drop = probs.cumsum(-1) > p  # also drops the token that reaches p
    return logits.masked_fill(drop.scatter(-1, idx, drop), NEG_INF)


def top_p_unsorted(logits, p):
    probs = torch.softmax(logits, dim=-1)  # in vocabulary order, not sorted
    drop = probs.cumsum(-1) - probs >= p
    return logits.masked_fill(drop, NEG_INF)


def top_p_ascending(logits, p):
    sorted_logits, idx = torch.sort(logits, dim=-1)  # least likely first
    probs = torch.softmax(sorted_logits, dim=-1)
    drop = probs.cumsum(-1) - probs >= p
    return logits.masked_fill(drop.scatter(-1, idx, drop), NEG_INF)


def top_p_forgot_to_unsort(logits, p):
    probs, idx = _sorted_probs(logits)
    drop = probs.cumsum(-1) - probs >= p  # in sorted order
    return logits.masked_fill(drop, NEG_INF)  # applied to the unsorted logits


def top_p_zero_fill(logits, p):
    probs, idx = _sorted_probs(logits)
    drop = probs.cumsum(-1) - probs >= p
    return logits.masked_fill(drop.scatter(-1, idx, drop), 0.0)


def top_p_probabilities(logits, p):
    probs, idx = _sorted_probs(logits)
    drop = probs.cumsum(-1) - probs >= p
    kept = logits.masked_fill(drop.scatter(-1, idx, drop), NEG_INF)
    return torch.softmax(kept, dim=-1)


TOP_P_MISTAKES = [
    *_not_filtered_logits(top_p_zero_fill, top_p_probabilities),
    Mistake(
        top_p_drops_the_crossing_token,
        lambda t: close(t.got, _top_p_variant(t.logits, t.param, crossing=True)),
        N_(
            "for {inputs}, {n_kept}: you dropped the token whose probability carries"
            " the"
            " running sum past p, so the kept set holds less than p (or nothing at"
            " all);"
            " keep a token when the tokens ranked before it hold less than p"
        ),
    ),
    Mistake(
        top_p_unsorted,
        lambda t: close(t.got, _top_p_variant(t.logits, t.param, unsorted=True)),
        N_(
            "for {inputs}, you summed the probabilities in vocabulary order; sort them"
            " in"
            " decreasing order first, so that the nucleus is the most likely tokens"
        ),
    ),
    Mistake(
        top_p_ascending,
        lambda t: close(t.got, _top_p_variant(t.logits, t.param, ascending=True)),
        N_(
            "for {inputs}, you sorted in increasing order and kept the least likely"
            " tokens;"
            " sort with descending=True"
        ),
    ),
    Mistake(
        top_p_forgot_to_unsort,
        lambda t: close(t.got, _top_p_variant(t.logits, t.param, unsort=False)),
        N_(
            "for {inputs}, the tokens to drop were found in sorted order but removed at"
            " those positions of the unsorted logits; map them back with the sort's"
            " indices (scatter) first"
        ),
    ),
    Mistake(
        None,
        lambda t: bool((t.kept != t.want_kept).any()),
        N_(
            "for {inputs}, {n_kept}: the nucleus is the smallest set of most likely"
            " tokens"
            " whose probabilities add up to at least p"
        ),
    ),
    Mistake.mismatch(N_("your output")),
]

check_top_p_filter = Checker(
    "check_top_p_filter",
    "Check ``candidate(logits, p)`` against :func:`transformer_lib.top_p_filter`.",
    _top_p_trials,
    TOP_P_MISTAKES,
    N_(
        "{n} inputs agree with tl.top_p_filter, including a top token above p and p ="
        " 1."
    ),
)
