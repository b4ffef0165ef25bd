"""Chapter 12: one decoding step with a KV cache, ``cached_attention_step``."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property

import torch

from ..attention import scaled_dot_product_attention
from ..heads import repeat_kv
from ..kv_cache import cached_attention_step
from ..masks import causal_mask
from ..positional import apply_rope
from .compare import close, position_span, shape
from .harness import Checker, Mistake, Trial, gen, randn
from .language import N_, _


class KVStepTrial(Trial):
    """One step of a decoding run; every step starts from the library's cache."""

    def __init__(self, inputs, q, k, v, ck, cv, rope: bool) -> None:
        super().__init__(inputs, (q, k, v, ck, cv), {"rope": rope})
        self.q, self.k, self.v, self.ck, self.cv, self.rope = q, k, v, ck, cv, rope
        self.T_past, self.T_new = ck.size(-2), q.size(-2)
        self.h, self.h_kv = q.size(1), k.size(1)
        if self.h != self.h_kv:
            self.raise_hint = _(
                "the cache has fewer heads, h_kv = {h_kv}, than the queries,"
                " h = {h}: repeat each K/V head for its group with tl.repeat_kv"
            ).format(h_kv=self.h_kv, h=self.h)

    @cached_property
    def want(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return cached_attention_step(
            self.q, self.k, self.v, self.ck, self.cv, rope=self.rope
        )

    @property
    def want_out(self) -> torch.Tensor:
        return self.want[0]

    @property
    def want_cache_k(self) -> torch.Tensor:
        return self.want[1]

    @property
    def want_cache_v(self) -> torch.Tensor:
        return self.want[2]

    @cached_property
    def is_triple(self) -> bool:
        return isinstance(self.got, (tuple, list)) and len(self.got) == 3

    @property
    def got_out(self):
        return self.got[0]

    @property
    def got_cache_k(self):
        return self.got[1]

    @property
    def got_cache_v(self):
        return self.got[2]

    @cached_property
    def correct(self) -> bool:
        return self.is_triple and all(
            close(self.got[i], self.want[i]) for i in range(3)
        )

    @cached_property
    def new_positions(self) -> str:
        return position_span(self.T_past, self.T_past + self.T_new - 1)

    @cached_property
    def T_total(self) -> int:
        return self.T_past + self.T_new

    def like(self, **variant) -> bool:
        """The output equals that of a known mistake, ``_step(..., **variant)``."""
        want = _step(self.q, self.k, self.v, self.ck, self.cv, self.rope, **variant)
        return close(self.got_out, want[0])

    @cached_property
    def keys_at_position_0(self) -> bool:
        """The cache's new keys are rotated as if they sat at position 0."""
        at_zero = torch.cat([self.ck, apply_rope(self.k, torch.arange(self.T_new))], -2)
        # one new token at position 0 is the un-rotated key: then the output must agree
        return close(self.got_cache_k, at_zero) and (
            self.T_new > 1 or self.like(from_zero=True)
        )

    def in_front(self, name: str) -> bool:
        """The cache holds the new entries before the old ones."""
        got, want = getattr(self, f"got_{name}"), getattr(self, f"want_{name}")
        T_past, T_new = self.T_past, self.T_new
        return T_past > 0 and (
            close(got[..., :T_past, :], want[..., T_new:, :])
            or close(got[..., T_new:, :], want[..., :T_past, :])
        )


_RUNS = [  # (description, B, h, h_kv, d_k, tokens per step, rope)
    (
        N_(
            "decoding 5 tokens one at a time from an empty cache, B = 2, h = 2,"
            " d_k = 8, rope=False"
        ),
        2,
        2,
        2,
        8,
        [1, 1, 1, 1, 1],
        False,
    ),
    (
        N_(
            "decoding 5 tokens one at a time from an empty cache, B = 1, h = 2,"
            " d_k = 8, rope=True"
        ),
        1,
        2,
        2,
        8,
        [1, 1, 1, 1, 1],
        True,
    ),
    (
        N_(
            "a prompt of 3 tokens at once, then 2 single tokens, B = 2, h = 2, d_k = 4,"
            " rope=True"
        ),
        2,
        2,
        2,
        4,
        [3, 1, 1],
        True,
    ),
    (
        N_(
            "a prompt of 4 tokens, then 2 single tokens, B = 1, h = 2, d_k = 6,"
            " rope=False"
        ),
        1,
        2,
        2,
        6,
        [4, 1, 1],
        False,
    ),
    (
        N_(
            "GQA: h = 4 query heads sharing h_kv = 2 K/V heads, 3 single tokens,"
            " rope=True"
        ),
        1,
        4,
        2,
        4,
        [1, 1, 1],
        True,
    ),
]


def _kv_cache_trials() -> list[KVStepTrial]:
    g = gen(12)
    trials = []
    for run, B, h, h_kv, d, sizes, rope in _RUNS:
        ck = cv = torch.zeros(B, h_kv, 0, d)
        for s, T_new in enumerate(sizes):
            q = randn(g, B, h, T_new, d)
            k, v = randn(g, B, h_kv, T_new, d), randn(g, B, h_kv, T_new, d)
            inputs = _("step {s} of {run} (T_past = {T_past}, T_new = {T_new})").format(
                s=s, run=_(run), T_past=ck.size(-2), T_new=T_new
            )
            trial = KVStepTrial(inputs, q, k, v, ck, cv, rope)
            trials.append(trial)
            _out, ck, cv = trial.want  # the next step starts from the library's cache
    return trials


def _cache_rows(name: str, not_appended: Callable | None = None) -> list[Mistake]:
    """The rows for the shape of one returned cache, ``cache_k`` or ``cache_v``."""
    got, want = f"got_{name}", f"want_{name}"

    def wrong(t: KVStepTrial) -> bool:
        return getattr(t, got).shape != getattr(t, want).shape

    def still_old(t: KVStepTrial) -> bool:
        c = getattr(t, got)
        return wrong(t) and c.dim() == 4 and c.size(-2) == t.T_past

    return [
        Mistake(
            not_appended,
            still_old,
            lambda t: _(
                "after {inputs}, your {name} still holds {T_past} positions; expected"
                " {T_total}: the cache was not appended. Concatenate the new entries on"
                " the time axis, torch.cat([{name}, {kv}_new], dim=-2), and return"
                " the new cache"
            ).format(
                inputs=t.inputs,
                name=name,
                T_past=t.T_past,
                T_total=t.T_total,
                kv=name[-1],
            ),
        ),
        Mistake(  # catch-all for the shape
            None,
            wrong,
            lambda t: _(
                "after {inputs}, your {name} has shape {got}; expected {want}"
                " (B, h_kv, T_past + T_new, d_k): append the new entries on the time"
                " axis, dim=-2"
            ).format(
                inputs=t.inputs,
                name=name,
                got=shape(getattr(t, got)),
                want=shape(getattr(t, want)),
            ),
        ),
    ]


_YOUR = {"cache_k": N_("your cache_k"), "cache_v": N_("your cache_v")}


def _cache_value_rows(name: str, in_front: Callable | None = None) -> list[Mistake]:
    """The rows for the values of one returned cache, ``cache_k`` or ``cache_v``."""
    got, want = f"got_{name}", f"want_{name}"

    def wrong(t: KVStepTrial) -> bool:
        return not close(getattr(t, got), getattr(t, want))

    return [
        Mistake(
            in_front,
            lambda t: wrong(t) and t.in_front(name),
            lambda t: _(
                "after {inputs}, your {name} has the new entries in front of the old"
                " ones: append them at the end"
            ).format(inputs=t.inputs, name=name),
        ),
        Mistake(
            None, wrong, Mistake.mismatch(_YOUR[name], got, want).message
        ),  # catch-all
    ]


# Known mistakes, each as a learner would write it


def _step(
    q,
    k,
    v,
    cache_k,
    cache_v,
    rope=False,
    *,
    from_zero=False,
    append=True,
    prepend=False,
    only_new=False,
    causal=True,
    top_left=False,
    rotate_q=True,
    rotate_cached_k=True,
):
    """A learner's cached attention step, with one thing changed."""
    T_past, T_new = cache_k.size(-2), q.size(-2)
    if rope:
        pos = torch.arange(T_new) if from_zero else torch.arange(T_past, T_past + T_new)
        k_rot = apply_rope(k, pos)
        q = apply_rope(q, pos) if rotate_q else q
    else:
        k_rot = k
    k_cached = k_rot if rotate_cached_k else k
    if prepend:
        keys, vals = torch.cat([k_cached, cache_k], -2), torch.cat([v, cache_v], -2)
    else:
        keys, vals = torch.cat([cache_k, k_cached], -2), torch.cat([cache_v, v], -2)
    n_rep = q.size(1) // keys.size(1)
    attend_k = k_rot if only_new else torch.cat([cache_k, k_rot], -2)
    attend_v = v if only_new else torch.cat([cache_v, v], -2)
    T_k = attend_k.size(-2)
    if not causal:
        mask = None
    elif top_left:
        mask = torch.ones(T_new, T_k, dtype=torch.bool).tril()
    else:
        mask = causal_mask(T_new, T_k)
    out, _weights = scaled_dot_product_attention(
        q, repeat_kv(attend_k, n_rep), repeat_kv(attend_v, n_rep), mask
    )
    return (out, keys, vals) if append else (out, cache_k, cache_v)


def kv_returns_a_pair(q_new, k_new, v_new, cache_k, cache_v, rope=False):
    out, cache_k, cache_v = _step(q_new, k_new, v_new, cache_k, cache_v, rope)
    return out, (cache_k, cache_v)  # the caches as one "past" pair


def _mistake(name: str, **change) -> Callable:
    """A learner's cached step with one thing changed: ``_step(..., **change)``."""

    def step(q_new, k_new, v_new, cache_k, cache_v, rope=False):
        return _step(q_new, k_new, v_new, cache_k, cache_v, rope, **change)

    step.__name__ = step.__qualname__ = name
    return step


kv_cache_not_appended = _mistake("kv_cache_not_appended", append=False)
kv_position_does_not_advance = _mistake("kv_position_does_not_advance", from_zero=True)
kv_stores_unrotated_keys = _mistake("kv_stores_unrotated_keys", rotate_cached_k=False)
kv_prepends_new_entries = _mistake("kv_prepends_new_entries", prepend=True)
kv_query_not_rotated = _mistake("kv_query_not_rotated", rotate_q=False)
kv_attends_only_new_token = _mistake("kv_attends_only_new_token", only_new=True)
kv_mask_top_left = _mistake("kv_mask_top_left", top_left=True)
kv_no_causal_mask_in_prompt = _mistake("kv_no_causal_mask_in_prompt", causal=False)


KV_CACHE_MISTAKES = [
    # what the function returns
    Mistake(
        kv_returns_a_pair,
        lambda t: not t.is_triple,
        N_(
            "your function should return three things, (out, cache_k, cache_v): the"
            " output"
            " and the two updated caches"
        ),
    ),
    Mistake.not_a_tensor(N_("your out for {inputs}"), attr="got_out"),
    Mistake.not_a_tensor(N_("your cache_k for {inputs}"), attr="got_cache_k"),
    Mistake.not_a_tensor(N_("your cache_v for {inputs}"), attr="got_cache_v"),
    *_cache_rows("cache_k", not_appended=kv_cache_not_appended),
    *_cache_rows("cache_v"),
    # the rotated keys in the cache
    Mistake(
        kv_position_does_not_advance,
        lambda t: (
            t.rope and not close(t.got_cache_k, t.want_cache_k) and t.keys_at_position_0
        ),
        N_(
            "at {inputs}, your new key was rotated as if it sat at position 0: the"
            " position"
            " does not advance. The new tokens sit at positions T_past, ...,"
            " T_past + T_new - 1 (here {new_positions}), where T_past is the cache"
            " length"
            " before the step"
        ),
    ),
    Mistake(
        kv_stores_unrotated_keys,
        lambda t: t.rope and close(t.got_cache_k, torch.cat([t.ck, t.k], -2)),
        N_(
            "at {inputs}, your cache holds the un-rotated new key: with rope=True,"
            " rotate"
            " k_new at its position before appending it (the cache stores rotated keys)"
        ),
    ),
    *_cache_value_rows("cache_k", in_front=kv_prepends_new_entries),
    *_cache_value_rows("cache_v"),
    # the output
    Mistake.wrong_shape(
        N_("your out"),
        N_("(B, h, T_new, d_k): one row per new query"),
        attr="got_out",
        want="want_out",
    ),
    Mistake(  # a learner whose keys sit at position 0 meets the cache rows first
        None,
        lambda t: t.rope and t.like(from_zero=True),
        N_(
            "at {inputs}, your output matches queries and keys rotated as if the new"
            " tokens"
            " sat at position 0: the position does not advance. The new tokens sit at"
            " {new_positions} (T_past onwards)"
        ),
    ),
    Mistake(
        kv_query_not_rotated,
        lambda t: t.rope and t.like(rotate_q=False),
        N_(
            "at {inputs}, your output matches an un-rotated query: with rope=True"
            " rotate"
            " q_new at its position too"
        ),
    ),
    Mistake(
        kv_attends_only_new_token,
        lambda t: t.T_past > 0 and t.like(only_new=True),
        N_(
            "at {inputs}, your new query attended only to the new keys: attend over the"
            " whole cache, the past keys and the new ones"
        ),
    ),
    Mistake(
        kv_mask_top_left,
        lambda t: t.like(top_left=True),
        N_(
            "at {inputs}, your causal mask is aligned top-left: the new queries are the"
            " last T_new of the T_past + T_new positions, so use the end-aligned"
            " tl.causal_mask(T_new, T_past + T_new)"
        ),
    ),
    Mistake(
        kv_no_causal_mask_in_prompt,
        lambda t: t.T_new > 1 and t.like(causal=False),
        N_(
            "at {inputs}, your new queries see the new tokens after them: when several"
            " tokens arrive at once they attend causally, with"
            " tl.causal_mask(T_new, T_past + T_new)"
        ),
    ),
    Mistake.mismatch(N_("your out"), "got_out", "want_out"),
]

check_kv_cache_step = Checker(
    "check_kv_cache_step",
    "Check ``candidate(q_new, k_new, v_new, cache_k, cache_v, rope=False) -> (out,"
    " cache_k, cache_v)`` against :func:`transformer_lib.cached_attention_step`, step"
    " by"
    " step through short decodings.",
    _kv_cache_trials,
    KV_CACHE_MISTAKES,
    N_(
        "{n} decoding steps in 4 runs agree with tl.cached_attention_step,"
        " including RoPE, a 3-token prompt and GQA."
    ),
)
