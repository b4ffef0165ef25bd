"""Checkers for the book's implementation exercises (chapters 3-12).

Each ``check_<name>(candidate)`` runs the learner's function on several seeded inputs, edge
cases included, and compares it with the library's own ``tl.<name>``:

    from transformer_lib.exercises import check_softmax
    check_softmax(my_softmax)

On success it prints one line and returns None. On failure it raises ``AssertionError`` with a
message in the learner's terms that names the input and, where a probe recognises it, the likely
mistake. A candidate that still raises ``NotImplementedError`` counts as "not attempted yet": the
checker prints a hint and returns, so a notebook with the exercise stubs in place still runs.

``multi_head_attention`` below is the reference solution of the multi-head attention exercise,
built from the library's pieces; the other references are the library functions themselves.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import torch

from .attention import scaled_dot_product_attention, softmax
from .heads import merge_heads, repeat_kv, split_heads
from .kv_cache import cached_attention_step
from .masks import causal_mask, padding_mask
from .norm import layer_norm, layer_norm_article
from .positional import apply_rope, rope_angles, sinusoidal_positional_encoding

__all__ = [
    "check_softmax",
    "check_scaled_dot_product_attention",
    "check_causal_mask",
    "check_padding_mask",
    "check_layer_norm",
    "check_sinusoidal_positional_encoding",
    "check_apply_rope",
    "check_repeat_kv",
    "check_multi_head_attention",
    "check_kv_cache_step",
    "multi_head_attention",
]

ATOL, RTOL = (
    1e-5,
    1e-4,
)  # float32 inputs; a correct answer computed another way lands well inside this


def multi_head_attention(
    x_q: torch.Tensor,
    x_kv: torch.Tensor,
    W_q: torch.Tensor,
    W_k: torch.Tensor,
    W_v: torch.Tensor,
    W_o: torch.Tensor,
    n_heads: int,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O   (eq. multi-head), without biases.

    x_q (B, T_q, d_model), x_kv (B, T_k, d_model); every W is (d_model, d_model), applied as x @ W;
    mask bool, True = may attend, broadcastable to (B, h, T_q, T_k). Returns (B, T_q, d_model).
    """
    q = split_heads(
        x_q @ W_q, n_heads
    )  # (B, T_q, d_model) @ (d_model, d_model) -> (B, h, T_q, d_k)
    k = split_heads(x_kv @ W_k, n_heads)  # (B, h, T_k, d_k)
    v = split_heads(x_kv @ W_v, n_heads)  # (B, h, T_k, d_k)
    out, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, T_q, d_k)
    return (
        merge_heads(out) @ W_o
    )  # (B, T_q, d_model) @ (d_model, d_model) -> (B, T_q, d_model)


# ----------------------------------------------------------------------------------------------
# Machinery shared by the checkers
# ----------------------------------------------------------------------------------------------


_NOT_ATTEMPTED_HINT = (
    "Replace the `raise NotImplementedError` line and run the cell again."
)


class _NotAttempted(Exception):
    """The candidate raised NotImplementedError: the exercise stub is still in place."""


class _Wrong(Exception):
    """A diagnosed mistake; the checker turns it into an AssertionError with its name in front."""


def _checker(fn: Callable[[Callable], str]) -> Callable[[Callable], None]:
    """Turn ``fn(candidate) -> summary`` into a checker: one printed line, or an AssertionError."""
    name = fn.__name__

    @functools.wraps(fn)
    def check(candidate: Callable) -> None:
        if not callable(candidate):
            raise AssertionError(
                f"{name}: pass your function itself (no parentheses), got {type(candidate).__name__}"
            )
        try:
            summary = fn(candidate)
        except _NotAttempted:
            print(f"{name}: not attempted yet.\n{_NOT_ATTEMPTED_HINT}")
            return None
        except _Wrong as wrong:
            raise AssertionError(
                f"{name}: {wrong}"
            ) from wrong.__cause__  # the learner's own error, if any
        print(f"{name}: correct — {summary}")
        return None

    return check


def _call(candidate: Callable, inputs: str, *args: Any, **kwargs: Any) -> Any:
    """Call the learner's function; name the input if it raises."""
    try:
        return candidate(*args, **kwargs)
    except NotImplementedError:
        raise _NotAttempted from None
    except (
        Exception
    ) as err:  # anything else the learner's code raised: say on which input
        raise _Wrong(
            f"your function raised {type(err).__name__} on {inputs}: {err}"
        ) from err


def _shape(t: torch.Tensor | torch.Size | tuple) -> str:
    dims = tuple(t.shape) if isinstance(t, torch.Tensor) else tuple(t)
    return "(" + ", ".join(str(d) for d in dims) + ")"


def _num(x: float | torch.Tensor) -> str:
    x = float(x)
    if math.isnan(x) or math.isinf(x):
        return str(x)
    return f"{x:.4g}"


def _where(index: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(int(i)) for i in index) + "]"


def _row(idx: tuple[int, ...], lead: str = "batch index") -> str:
    """'row 3', or 'row 3 (at batch index [1, 0])' when the row sits in a batch."""
    return f"row {idx[-1]}" + (
        f" (at {lead} {_where(idx[:-1])})" if len(idx) > 1 else ""
    )


def _positions(a: int, b: int) -> str:
    return f"position {a}" if a == b else f"positions {a}..{b}"


def _tensor(got: Any, what: str) -> torch.Tensor:
    if not isinstance(got, torch.Tensor):
        raise _Wrong(f"{what} should be a torch.Tensor, got {type(got).__name__}")
    return got


def _same_shape(
    got: torch.Tensor, want: torch.Tensor, what: str, inputs: str, hint: str = ""
) -> None:
    if got.shape != want.shape:
        verb = "have" if what.endswith("weights") else "has"
        raise _Wrong(
            f"{what} {verb} shape {_shape(got)} for {inputs}; expected {_shape(want)}"
            + (f": {hint}" if hint else "")
        )


def _close(
    a: torch.Tensor | None,
    b: torch.Tensor | None,
    atol: float = ATOL,
    rtol: float = RTOL,
) -> bool:
    """Same shape and allclose, NaN never equal. Compared in float64 so dtypes may differ."""
    if a is None or b is None or not isinstance(a, torch.Tensor) or a.shape != b.shape:
        return False
    return bool(
        torch.allclose(a.detach().double(), b.detach().double(), atol=atol, rtol=rtol)
    )


def _first_mismatch(
    got: torch.Tensor, want: torch.Tensor, atol: float = ATOL, rtol: float = RTOL
):
    """(index, got value, expected value) of the first element outside tolerance (NaN counts as wrong)."""
    g, w = got.detach().double(), want.detach().double()
    bad = ~torch.isclose(g, w, atol=atol, rtol=rtol)
    idx = tuple(int(i) for i in bad.nonzero()[0])
    return idx, g[idx], w[idx]


def _mismatch(
    got: torch.Tensor,
    want: torch.Tensor,
    what: str,
    inputs: str,
    atol: float = ATOL,
    rtol: float = RTOL,
) -> _Wrong:
    idx, g, w = _first_mismatch(got, want, atol, rtol)
    return _Wrong(f"for {inputs}, {what}{_where(idx)} is {_num(g)}; expected {_num(w)}")


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(g: torch.Generator, *shape: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=g) * scale


def _finite(t: torch.Tensor) -> bool:
    return bool(torch.isfinite(t).all())


# ----------------------------------------------------------------------------------------------
# Softmax (chapter 3)
# ----------------------------------------------------------------------------------------------


def _softmax_cases() -> list[tuple[str, torch.Tensor, dict]]:
    g = _gen(3)
    inf = float("inf")
    partly = _randn(g, 3, 5)
    partly[0, 1] = partly[1, 3] = partly[1, 4] = -inf
    fully = _randn(g, 3, 4)
    fully[1] = -inf
    return [
        ("x of shape (4, 6) (random logits)", _randn(g, 4, 6, scale=2.0), {}),
        ("x of shape (2, 3, 7) (a batch)", _randn(g, 2, 3, 7, scale=2.0), {}),
        ("x of shape (5,) (a single row)", _randn(g, 5), {}),
        (
            "logits of ±1e4, x = [[1e4, 9999, 9997, 0, -1e4], [-1e4, -9998, 0, 5, 2]]",
            torch.tensor(
                [[1e4, 9999.0, 9997.0, 0.0, -1e4], [-1e4, -9998.0, 0.0, 5.0, 2.0]]
            ),
            {},
        ),
        ("a (3, 5) x where some entries are -inf (masked)", partly, {}),
        ("a (3, 4) x whose row 1 is entirely -inf (a fully masked row)", fully, {}),
        ("x of shape (5, 3) with dim=0", _randn(g, 5, 3), {"dim": 0}),
        ("x of shape (2, 4, 3) with dim=1", _randn(g, 2, 4, 3), {"dim": 1}),
    ]


def _diagnose_softmax(
    x: torch.Tensor, kw: dict, got: torch.Tensor, want: torch.Tensor, inputs: str
) -> _Wrong:
    dim = kw.get("dim", -1) % x.dim()
    dead = (
        torch.isneginf(x).all(dim=dim, keepdim=True).expand_as(x)
    )  # slices with nothing allowed
    if not _finite(got):
        if dead.any() and _finite(got[~dead]):
            return _Wrong(
                f"your output is NaN for {inputs}: exp(-inf) = 0 everywhere in that row, so you divide 0 by 0. "
                "The library returns all zeros for such a row (nothing may be attended to): when a row's "
                "maximum is -inf, subtract 0 instead of the maximum, and guard the division "
                "(what does softmax do to a row of -inf?)"
            )
        if x[torch.isfinite(x)].abs().max() >= 1e3:
            return _Wrong(
                f"your output contains inf or NaN for {inputs}: exp(10000) overflows float32 (whose largest "
                "value is about e^88.7). Subtract each row's maximum before exp(): softmax(x) = softmax(x - max x), "
                "and the largest exponent becomes exp(0) = 1"
            )
        idx = tuple(int(i) for i in (~torch.isfinite(got)).nonzero()[0])
        return _Wrong(
            f"your output{_where(idx)} is {_num(got[idx])} for {inputs}; expected {_num(want[idx])}"
        )
    if kw and _close(got, softmax(x, dim=-1)) and not _close(want, softmax(x, dim=-1)):
        return _Wrong(
            f"your function ignores its dim argument: for {inputs} it normalised along the last axis; "
            f"softmax(x, dim={kw['dim']}) must make the slices along dim {kw['dim']} sum to 1"
        )
    sums = got.sum(
        dim=dim
    )  # every slice along dim should sum to 1, except fully masked ones (0)
    target = want.sum(dim=dim)
    if not _close(sums, target, atol=1e-4):
        idx, s, _ = _first_mismatch(sums, target, atol=1e-4)
        row = (
            _row(idx)
            if dim == x.dim() - 1
            else f"the slice along dim {dim} at {_where(idx)}"
        )
        for other in range(x.dim()):
            if other != dim and _close(
                got.sum(dim=other), torch.ones_like(got.sum(dim=other)), atol=1e-4
            ):
                return _Wrong(
                    f"{row} of your output sums to {_num(s)}, not 1, for {inputs}, while the slices "
                    f"along dim {other} sum to 1: did you take the softmax over the right axis (dim={kw.get('dim', -1)})?"
                )
        if _close(got, torch.exp(x)):
            return _Wrong(
                f"{row} of your output sums to {_num(s)}, not 1, for {inputs}: you return exp(x); "
                "a softmax divides each exponential by the sum of the exponentials in its row"
            )
        return _Wrong(
            f"{row} of your output sums to {_num(s)}, not 1, for {inputs}: is it normalised? "
            "Divide each exponential by the sum of the exponentials along the softmax axis"
        )
    return _mismatch(got, want, "your output", inputs)


@_checker
def check_softmax(candidate: Callable) -> str:
    """Check ``candidate(x, dim=-1)`` against :func:`transformer_lib.softmax`."""
    cases = _softmax_cases()
    for inputs, x, kw in cases:
        want = softmax(x, **kw)
        got = _tensor(
            _call(candidate, inputs, x.clone(), **kw),
            f"your softmax's output for {inputs}",
        )
        _same_shape(
            got,
            want,
            "your output",
            inputs,
            "a softmax returns a tensor of the same shape as its input",
        )
        if not _close(got, want):
            raise _diagnose_softmax(x, kw, got, want, inputs)
    return f"{len(cases)} inputs agree with tl.softmax, including logits of ±1e4, a fully masked row and dim=0 / dim=1."


# ----------------------------------------------------------------------------------------------
# Scaled dot-product attention (chapters 2-4)
# ----------------------------------------------------------------------------------------------


def _attention_variant(
    q, k, v, mask=None, *, scale=None, invert=False, after=False, fill=None, dim=-1
):
    """The attention of common mistakes: another scale, an inverted mask, masking after the softmax,
    filling with a finite value, or the softmax over another axis. Returns the weights only."""
    scale = math.sqrt(q.size(-1)) if scale is None else scale
    s = q @ k.transpose(-2, -1) / scale  # (..., T_q, T_k)
    if mask is not None and not after:
        m = ~mask if invert else mask
        s = s.masked_fill(~m, float("-inf") if fill is None else fill)
    w = softmax(s, dim=dim)
    if mask is not None and after:
        w = w.masked_fill(~mask, 0.0)
    return w


def _attention_cases() -> list[
    tuple[str, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]
]:
    g = _gen(2)
    cases = [
        (
            "q, k of shape (5, 16) and v of shape (5, 6), no mask",
            _randn(g, 5, 16),
            _randn(g, 5, 16),
            _randn(g, 5, 6),
            None,
        ),
        (
            "q (2, 3, 8), k (2, 7, 8), v (2, 7, 5): T_q = 3 ≠ T_k = 7, no mask",
            _randn(g, 2, 3, 8),
            _randn(g, 2, 7, 8),
            _randn(g, 2, 7, 5),
            None,
        ),
        (
            "q (2, 3, 5, 4), k and v (2, 3, 6, 4): batch and head axes, no mask",
            _randn(g, 2, 3, 5, 4),
            _randn(g, 2, 3, 6, 4),
            _randn(g, 2, 3, 6, 4),
            None,
        ),
        (
            "q, k, v of shape (2, 2, 5, 8) with the causal mask tl.causal_mask(5)",
            _randn(g, 2, 2, 5, 8),
            _randn(g, 2, 2, 5, 8),
            _randn(g, 2, 2, 5, 8),
            causal_mask(5),
        ),
        (
            "q (2, 2, 4, 8), k and v (2, 2, 6, 8) with the padding mask tl.padding_mask([6, 3], 6) of shape (2, 1, 1, 6)",
            _randn(g, 2, 2, 4, 8),
            _randn(g, 2, 2, 6, 8),
            _randn(g, 2, 2, 6, 8),
            padding_mask([6, 3], 6),
        ),
    ]
    full = torch.tensor(
        [
            [True, True, False, False, True],
            [False] * 5,
            [True, False, True, True, False],
        ]
    )  # (3, 5): query 1 may attend to no key
    cases.append(
        (
            "q (1, 2, 3, 8), k and v (1, 2, 5, 8) with a (3, 5) mask whose row 1 is all False (a fully masked query)",
            _randn(g, 1, 2, 3, 8),
            _randn(g, 1, 2, 5, 8),
            _randn(g, 1, 2, 5, 8),
            full,
        )
    )
    q = torch.tensor(
        [[200.0, 0.0, 0.0, 0.0], [0.0, -200.0, 0.0, 0.0]]
    )  # scores of 1e4 after dividing by sqrt(4)
    k = torch.tensor(
        [
            [100.0, 0.0, 0.0, 0.0],
            [99.0, 0.0, 0.0, 0.0],
            [0.0, 100.0, 0.0, 0.0],
            [0.0, 0.0, 1.0, 0.0],
        ]
    )
    cases.append(
        (
            "q (2, 4) and k (4, 4) whose scaled scores reach ±1e4, v (4, 3)",
            q,
            k,
            _randn(g, 4, 3),
            None,
        )
    )
    cases.append(
        (
            "q (1, 1, 7) and k, v (1, 4, 7): one query, odd d_k = 7, with the mask tl.causal_mask(1, 4)",
            _randn(g, 1, 1, 7),
            _randn(g, 1, 4, 7),
            _randn(g, 1, 4, 7),
            causal_mask(1, 4),
        )
    )
    return cases


def _diagnose_attention(
    q, k, v, mask, got_out, got_w, want_out, want_w, inputs
) -> _Wrong:
    d_k, T_q, T_k = q.size(-1), q.size(-2), k.size(-2)
    allowed = (
        torch.ones_like(want_w, dtype=torch.bool)
        if mask is None
        else mask.expand_as(want_w)
    )
    dead = ~allowed.any(dim=-1)  # (..., T_q): fully masked queries
    live = ~dead
    if mask is not None:
        finite_rows = torch.isfinite(got_w).all(dim=-1)  # (..., T_q)
        mixed = (
            live & ~allowed.all(dim=-1) & finite_rows
        )  # queries with both allowed and forbidden keys
        on_allowed = (got_w.nan_to_num(0.0) * allowed).sum(dim=-1)  # (..., T_q)
        if mixed.any() and bool((on_allowed[mixed] < 1e-4).all()):
            return _Wrong(
                f"for {inputs}, your weights are zero on the keys the mask allows and positive on the keys it forbids: "
                "the mask convention is inverted. In this book a mask is bool with True = may attend, so fill the "
                "scores where the mask is False with -inf: scores.masked_fill(~mask, float('-inf'))"
            )
    if not (_finite(got_w) and _finite(got_out)):
        bad = ~torch.isfinite(got_w).all(dim=-1) | ~torch.isfinite(got_out).all(
            dim=-1
        )  # (..., T_q)
        if dead.any() and not (bad & live).any():
            row = int(dead.nonzero()[0][-1])
            return _Wrong(
                f"for {inputs}, your output is NaN where a row is fully masked (query {row} may attend to no key): "
                "what does softmax do to a row of -inf? The library gives such a row zero weights and a zero output"
            )
        if (q @ k.transpose(-2, -1)).abs().max() / math.sqrt(d_k) >= 1e3:
            return _Wrong(
                f"your weights contain inf or NaN for {inputs}: exp(1e4) overflows. Subtract each row's maximum "
                "score before exp() (tl.softmax and torch.softmax both do)"
            )
        idx = (
            tuple(int(i) for i in (~torch.isfinite(got_w)).nonzero()[0])
            if not _finite(got_w)
            else None
        )
        if idx is not None:
            return _Wrong(
                f"your weights{_where(idx)} are {_num(got_w[idx])} for {inputs}; expected {_num(want_w[idx])}"
            )
        return _mismatch(got_out, want_out, "your output", inputs)
    if dead.any():
        row_w = got_w[dead]  # (n_dead, T_k)
        if _close(row_w, torch.full_like(row_w, 1.0 / T_k), atol=1e-4):
            return _Wrong(
                f"for {inputs}, the fully masked query spreads its weight evenly (1/{T_k} on every key) instead of "
                "having all-zero weights: filling masked scores with a large finite number (like -1e9) makes a row with "
                "no allowed key average every key. Fill with -inf, and make the softmax return zeros for a row that is "
                "all -inf (tl.softmax does)"
            )
    if mask is not None:
        forbidden_w = (got_w * ~allowed).abs()  # weight on keys the mask forbids
        if forbidden_w.max() > 1e-4:
            if _close(got_w, _attention_variant(q, k, v)):
                return _Wrong(
                    f"your weights ignore the mask for {inputs}: fill the scores where the mask is False with -inf before the softmax"
                )
            idx = tuple(int(i) for i in (forbidden_w > 1e-4).nonzero()[0])
            fill0 = (
                " (filling them with 0 is not enough: exp(0) = 1)"
                if _close(got_w, _attention_variant(q, k, v, mask, fill=0.0))
                else ""
            )
            return _Wrong(
                f"for {inputs}, query {idx[-2]} puts weight {_num(got_w[idx])} on key {idx[-1]}, which the mask forbids: "
                f"a masked score must be -inf before the softmax, so that its weight is exactly 0{fill0}"
            )
    sums = got_w.sum(dim=-1)  # (..., T_q)
    if not _close(sums[live], torch.ones_like(sums[live]), atol=1e-4):
        idx = tuple(
            int(i) for i in ((sums - 1).abs() > 1e-4).logical_and(live).nonzero()[0]
        )
        where = _row(idx, "batch/head index")
        if mask is not None and _close(
            got_w, _attention_variant(q, k, v, mask, after=True)
        ):
            return _Wrong(
                f"{where} of your weights sums to {_num(sums[idx])}, not 1, for {inputs}, and your weights equal the unmasked "
                "weights with the masked keys set to 0: you masked after the softmax. Mask the scores (set them to -inf) "
                "before the softmax, so the allowed weights share the whole probability"
            )
        col = _attention_variant(q, k, v, mask, dim=-2)
        if _close(got_w, col) or _close(got_w.sum(dim=-2), col.sum(dim=-2), atol=1e-4):
            return _Wrong(
                f"{where} of your weights sums to {_num(sums[idx])}, not 1, for {inputs}, while each column sums to 1: "
                "you took the softmax over the query axis. Each query's weights over the keys, the last axis (dim=-1), must sum to 1"
            )
        return _Wrong(
            f"{where} of your weights sums to {_num(sums[idx])}, not 1, for {inputs}: did you apply the softmax over the keys (dim=-1)?"
        )
    named = [
        (
            1.0,
            "your weights match softmax(Q K^T) with no scaling at all: divide the scores by sqrt(d_k)",
        ),
        (
            float(d_k),
            f"you divided the scores by d_k = {d_k}; the formula divides by its square root, sqrt(d_k) = {_num(math.sqrt(d_k))}",
        ),
        (
            1.0 / math.sqrt(d_k),
            "you multiplied the scores by sqrt(d_k) instead of dividing by it",
        ),
        (
            math.sqrt(T_k),
            f"you divided the scores by sqrt(T) = sqrt({T_k}), the square root of the sequence length; the formula divides by sqrt(d_k) = sqrt({d_k}), the feature size of q and k",
        ),
        (
            math.sqrt(T_q),
            f"you divided the scores by sqrt(T_q) = sqrt({T_q}), the square root of the number of queries; the formula divides by sqrt(d_k) = sqrt({d_k}), the feature size of q and k",
        ),
    ]
    for scale, message in named:
        if not math.isclose(scale, math.sqrt(d_k)) and _close(
            got_w, _attention_variant(q, k, v, mask, scale=scale)
        ):
            return _Wrong(f"for {inputs}, {message}")
    if not _close(got_w, want_w):
        return _mismatch(got_w, want_w, "your weights", inputs)
    idx, g, w = _first_mismatch(got_out, want_out)
    return _Wrong(
        f"your weights are right but your output is not, for {inputs}: output{_where(idx)} is {_num(g)}, expected {_num(w)}. "
        "The output is the weighted sum of the values, weights @ v"
    )


@_checker
def check_scaled_dot_product_attention(candidate: Callable) -> str:
    """Check ``candidate(q, k, v, mask=None) -> (out, weights)`` against :func:`transformer_lib.scaled_dot_product_attention`."""
    cases = _attention_cases()
    for inputs, q, k, v, mask in cases:
        want_out, want_w = scaled_dot_product_attention(q, k, v, mask)
        kwargs = {} if mask is None else {"mask": mask.clone()}
        got = _call(candidate, inputs, q.clone(), k.clone(), v.clone(), **kwargs)
        if (
            isinstance(got, torch.Tensor)
            or not isinstance(got, (tuple, list))
            or len(got) != 2
        ):
            raise _Wrong(
                f"your function returned {type(got).__name__ if not isinstance(got, torch.Tensor) else 'a single tensor'}; "
                "it should return the pair (output, weights), like tl.scaled_dot_product_attention: `return out, weights`"
            )
        got_out = _tensor(got[0], f"the output (first returned value) for {inputs}")
        got_w = _tensor(got[1], f"the weights (second returned value) for {inputs}")
        if got_w.shape != want_w.shape:
            transposed = want_w.shape[:-2] + (want_w.size(-1), want_w.size(-2))
            hint = (
                "the weights have one row per query and one column per key; are you computing K Q^T instead of Q K^T?"
                if got_w.shape == transposed
                else "weights are (..., T_q, T_k): one row per query, one column per key"
            )
            _same_shape(got_w, want_w, "your weights", inputs, hint)
        _same_shape(
            got_out,
            want_out,
            "your output",
            inputs,
            "the output is (..., T_q, d_v): one row per query, as wide as v",
        )
        if not (_close(got_w, want_w) and _close(got_out, want_out)):
            raise _diagnose_attention(
                q, k, v, mask, got_out, got_w, want_out, want_w, inputs
            )
    return (
        f"{len(cases)} inputs agree with tl.scaled_dot_product_attention, including T_q ≠ T_k, batch and head axes, "
        "causal and padding masks, a fully masked row and scores of ±1e4."
    )


# ----------------------------------------------------------------------------------------------
# Masks (chapter 4)
# ----------------------------------------------------------------------------------------------


def _check_bool_mask(got: torch.Tensor, inputs: str) -> None:
    if got.dtype == torch.bool:
        return
    additive = got.dtype.is_floating_point and bool(torch.isinf(got).any())
    kind = (
        "0 and -inf (an additive mask)" if additive else f"numbers of dtype {got.dtype}"
    )
    raise _Wrong(
        f"your mask for {inputs} holds {kind}; this book's masks are bool tensors with True = may attend "
        "(a comparison like `j <= i` already gives bool; `.bool()` converts 0/1)"
    )


def _grid(T_q: int, T_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.arange(T_q).unsqueeze(1), torch.arange(T_k).unsqueeze(
        0
    )  # (T_q, 1), (1, T_k)


@_checker
def check_causal_mask(candidate: Callable) -> str:
    """Check ``candidate(T_q, T_k=None)`` against :func:`transformer_lib.causal_mask`."""
    cases = [
        ((4,), "T_q = T_k = 4"),
        ((5,), "T_q = T_k = 5"),
        ((1,), "T_q = T_k = 1"),
        ((4, 4), "T_q = 4, T_k = 4"),
        ((3, 5), "T_q = 3, T_k = 5 (3 new queries after 2 earlier keys)"),
        ((1, 6), "T_q = 1, T_k = 6 (one new query, 6 keys)"),
    ]
    for args, desc in cases:
        inputs = f"causal_mask({', '.join(map(str, args))}), {desc}"
        want = causal_mask(*args)
        got = _tensor(_call(candidate, inputs, *args), f"your mask for {inputs}")
        if got.shape != want.shape:
            hint = "one row per query and one column per key, (T_q, T_k)"
            if len(args) == 2 and got.shape == (args[0], args[0]):
                hint += "; you seem to ignore T_k"
            raise _Wrong(
                f"your mask has shape {_shape(got)} for {inputs}; expected {_shape(want)}: {hint}"
            )
        _check_bool_mask(got, inputs)
        if torch.equal(got, want):
            continue
        T_q, T_k = want.shape
        i, j = _grid(T_q, T_k)
        off = T_k - T_q
        if torch.equal(got, ~want):
            raise _Wrong(
                f"your mask for {inputs} is inverted: it is True exactly where the library's is False. True means "
                "'may attend', so query i may attend key j when j <= i (the past and itself)"
            )
        if torch.equal(got, j < i + off):
            raise _Wrong(
                f"your mask for {inputs} leaves out the diagonal: query i must be allowed to attend to itself, key j = i "
                "(j <= i, not j < i); without it the first query can attend to nothing"
            )
        if torch.equal(got, j >= i) or torch.equal(got, j >= i + off):
            raise _Wrong(
                f"your mask for {inputs} is the upper triangle; it should be the lower one: row i is the query, column j "
                "the key, and query i may attend key j only when j <= i (torch.tril, not torch.triu)"
            )
        if off and torch.equal(got, j <= i):
            raise _Wrong(
                f"your mask for {inputs} is aligned top-left: with T_q < T_k the queries are the last T_q positions, "
                f"so query i sits at position i + (T_k - T_q) = i + {off} and may attend keys j <= i + {off}; the last "
                "query sees every key (torch.tril(..., diagonal=T_k - T_q))"
            )
        idx = tuple(int(x) for x in (got != want).nonzero()[0])
        raise _Wrong(
            f"your mask for {inputs} says {bool(got[idx])} at [query {idx[0]}, key {idx[1]}]; expected {bool(want[idx])} "
            f"(query i may attend key j when j <= i + T_k - T_q)"
        )
    return f"{len(cases)} sizes agree with tl.causal_mask, including T_q = 1 and T_q < T_k (end-aligned)."


@_checker
def check_padding_mask(candidate: Callable) -> str:
    """Check ``candidate(lengths, T) -> (B, 1, 1, T)`` against :func:`transformer_lib.padding_mask`."""
    cases = [([3, 5, 1], 5), ([0, 4], 4), ([2], 6), ([6, 6, 2, 5], 6)]
    for lens, T in cases:
        lengths = torch.tensor(lens)
        inputs = f"lengths = torch.tensor({lens}), T = {T}"
        want = padding_mask(lengths, T)  # (B, 1, 1, T)
        got = _tensor(
            _call(candidate, inputs, lengths.clone(), T), f"your mask for {inputs}"
        )
        if got.shape != want.shape:
            hint = "(B, 1, 1, T), so that it broadcasts over the heads (dim 1) and the queries (dim 2)"
            if got.shape == (len(lens), T):
                hint += ": add the two middle axes with mask[:, None, None, :]"
            raise _Wrong(
                f"your mask has shape {_shape(got)} for {inputs}; expected {hint}"
            )
        _check_bool_mask(got, inputs)
        if torch.equal(got, want):
            continue
        j, L = torch.arange(T), lengths[:, None, None, None]
        if torch.equal(got, ~want):
            raise _Wrong(
                f"your mask for {inputs} is inverted: it is True at the padding. In this book True = may attend, so the "
                "real tokens j < length are True (PyTorch's key_padding_mask uses the opposite convention, True = ignore)"
            )
        b = int((got != want).any(dim=-1).flatten().nonzero()[0])
        real = f"sequence {b} has length {lens[b]}, so its real tokens are positions 0..{lens[b] - 1}"
        if torch.equal(got, j <= L):
            raise _Wrong(
                f"your mask for {inputs} is off by one: {real}, but yours also allows position {lens[b]} (use j < length, not j <= length)"
            )
        if torch.equal(got, j < L - 1):
            raise _Wrong(
                f"your mask for {inputs} is off by one: {real}, but yours stops one early, at position {lens[b] - 2}"
            )
        if torch.equal(got, j >= T - L):
            raise _Wrong(
                f"your mask for {inputs} marks the last positions as real: {real}; the padding comes after them (right padding)"
            )
        pos = int((got[b, 0, 0] != want[b, 0, 0]).nonzero()[0])
        raise _Wrong(
            f"your mask for {inputs} says {bool(got[b, 0, 0, pos])} at sequence {b}, position {pos}; expected {bool(want[b, 0, 0, pos])} ({real})"
        )
    return f"{len(cases)} batches agree with tl.padding_mask, including a length of 0 and a full-length sequence."


# ----------------------------------------------------------------------------------------------
# Layer normalisation (chapter 7)
# ----------------------------------------------------------------------------------------------


def _ln_variant(
    x,
    gamma,
    beta,
    eps=1e-5,
    *,
    unbiased=False,
    eps_outside=False,
    dims=(-1,),
    no_beta=False,
    no_gamma=False,
    no_sqrt=False,
):
    mu = x.mean(dim=dims, keepdim=True)
    var = x.var(dim=dims, keepdim=True, unbiased=unbiased)
    denom = (
        var + eps
        if no_sqrt
        else (var.sqrt() + eps if eps_outside else (var + eps).sqrt())
    )
    y = (x - mu) / denom
    if not no_gamma:
        y = gamma * y
    return y if no_beta else y + beta


def _layer_norm_cases() -> list[
    tuple[str, torch.Tensor, torch.Tensor, torch.Tensor, dict, float]
]:
    g = _gen(7)
    const = _randn(g, 3, 5)
    const[1] = 3.0  # a constant row: variance exactly 0
    return [
        (
            "x (2, 3, 8) with random gamma and beta (8,)",
            _randn(g, 2, 3, 8, scale=2.0) + 0.5,
            1 + 0.5 * _randn(g, 8),
            _randn(g, 8),
            {},
            ATOL,
        ),
        (
            "x (4, 7), an odd width, with random gamma and beta (7,)",
            _randn(g, 4, 7) - 1.0,
            1 + 0.5 * _randn(g, 7),
            _randn(g, 7),
            {},
            ATOL,
        ),
        (
            "x (3, 6) whose rows vary very little (standard deviation about 0.003)",
            0.003 * _randn(g, 3, 6),
            1 + 0.5 * _randn(g, 6),
            _randn(g, 6),
            {},
            ATOL,
        ),
        (
            "x (3, 5) whose row 1 is constant (variance 0)",
            const,
            1 + 0.5 * _randn(g, 5),
            _randn(g, 5),
            {},
            ATOL,
        ),
        (
            "x (2, 8) = 1e4 + noise (a large common offset)",
            1e4 + _randn(g, 2, 8),
            1 + 0.5 * _randn(g, 8),
            _randn(g, 8),
            {},
            5e-3,
        ),
        (
            "x (2, 6) with eps=0.1",
            0.3 * _randn(g, 2, 6),
            1 + 0.5 * _randn(g, 6),
            _randn(g, 6),
            {"eps": 0.1},
            ATOL,
        ),
    ]


@_checker
def check_layer_norm(candidate: Callable) -> str:
    """Check ``candidate(x, gamma, beta, eps=1e-5)`` against :func:`transformer_lib.layer_norm`."""
    cases = _layer_norm_cases()
    for inputs, x, gamma, beta, kw, atol in cases:
        want = layer_norm(x, gamma, beta, **kw)
        got = _tensor(
            _call(candidate, inputs, x.clone(), gamma.clone(), beta.clone(), **kw),
            f"your output for {inputs}",
        )
        _same_shape(
            got,
            want,
            "your output",
            inputs,
            "LayerNorm returns a tensor of the shape of its input",
        )
        if _close(got, want, atol=atol):
            continue
        eps = kw.get("eps", 1e-5)
        xd, gd, bd = x.double(), gamma.double(), beta.double()
        like = lambda **v: _close(
            got, _ln_variant(xd, gd, bd, v.pop("eps", eps), **v), atol=atol
        )  # noqa: E731
        if not _finite(got):
            constant = (x == x[..., :1]).all(dim=-1)  # rows with variance 0
            if constant.any() and _finite(got[~constant]):
                raise _Wrong(
                    f"your output has NaN or inf for {inputs}: a constant row has variance 0, and dividing by sqrt(0) fails. "
                    "That is what eps is for: divide by sqrt(variance + eps)"
                )
            raise _mismatch(got, want, "your output", inputs)
        if like(unbiased=True) or like(unbiased=True, eps_outside=True):
            raise _Wrong(
                f"for {inputs}, you used the unbiased variance (dividing by N - 1, the default of torch.var and torch.std); "
                "LayerNorm divides by N: use x.var(dim=-1, unbiased=False), or ((x - mu) ** 2).mean(dim=-1)"
            )
        if like(eps_outside=True) or _close(
            got, layer_norm_article(x, gamma, beta, eps), atol=atol
        ):
            raise _Wrong(
                f"for {inputs}, you put eps outside the square root, (z - mu) / (sigma + eps), the first article's form; "
                "nn.LayerNorm and the library use (z - mu) / sqrt(sigma^2 + eps). They differ when sigma is small"
            )
        if like(no_sqrt=True):
            raise _Wrong(
                f"for {inputs}, you divided by the variance; divide by the standard deviation, sqrt(variance + eps)"
            )
        if like(eps=0.0) and not _close(want, _ln_variant(xd, gd, bd, 0.0), atol=atol):
            raise _Wrong(
                f"for {inputs}, your output matches LayerNorm without eps: add eps inside the square root, "
                "sqrt(variance + eps); it matters when the variance is small, and keeps a constant row from dividing by 0"
            )
        if like(no_beta=True):
            raise _Wrong(
                f"for {inputs}, your output matches gamma * normalised without beta: add the shift beta at the end"
            )
        if like(no_gamma=True):
            raise _Wrong(
                f"for {inputs}, your output matches normalised + beta without gamma: multiply by the scale gamma"
            )
        for d in range(x.dim() - 1):
            if like(dims=(d,)):
                axis = (
                    "the batch axis, BatchNorm's axis" if d == 0 else "the wrong axis"
                )
                raise _Wrong(
                    f"for {inputs}, you normalised over dim {d} ({axis}); LayerNorm normalises each token's own feature "
                    "vector, the last dim (dim=-1)"
                )
        if x.dim() > 1 and like(dims=tuple(range(x.dim()))):
            raise _Wrong(
                f"for {inputs}, you normalised over the whole tensor; LayerNorm normalises each token's feature vector, the last dim (dim=-1)"
            )
        if kw and _close(got, layer_norm(x, gamma, beta), atol=atol):
            raise _Wrong(
                f"your function ignores its eps argument: for {inputs} it used eps = 1e-5"
            )
        try:  # right in float64 but not in float32: precision lost, usually var = mean(x^2) - mean(x)^2
            got64 = candidate(xd, gd, bd, **kw)
        except Exception:
            got64 = None
        if isinstance(got64, torch.Tensor) and _close(
            got64, layer_norm(xd, gd, bd, **kw)
        ):
            raise _Wrong(
                f"your output is right in float64 but not in float32 for {inputs}, whose rows have a mean large compared with "
                "their spread: the variance computed as mean(x^2) - mean(x)^2 cancels catastrophically. Centre first and "
                "average the squares, mean((x - mu)^2)"
            )
        raise _mismatch(got, want, "your output", inputs, atol=atol)
    return (
        f"{len(cases)} inputs agree with tl.layer_norm (= nn.LayerNorm), including tiny and zero variance, "
        "an offset of 1e4 and eps=0.1."
    )


# ----------------------------------------------------------------------------------------------
# Positional encodings (chapter 8)
# ----------------------------------------------------------------------------------------------


def _pe_variant(
    T, d, *, swap=False, exponent="2i", start=0, concat=False, multiply=False
):
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


@_checker
def check_sinusoidal_positional_encoding(candidate: Callable) -> str:
    """Check ``candidate(T, d_model) -> (T, d_model)`` against :func:`transformer_lib.sinusoidal_positional_encoding`."""
    cases = [(6, 8), (50, 16), (5, 7), (1, 4), (3, 2)]
    for T, d in cases:
        inputs = f"T = {T}, d_model = {d}"
        want = sinusoidal_positional_encoding(T, d)
        try:
            got = _call(candidate, inputs, T, d)
        except _Wrong as wrong:
            if d % 2:
                raise _Wrong(
                    f"{wrong} (with an odd d_model there is one more sin column than cos columns: d_model // 2 cos columns)"
                ) from None
            raise
        got = _tensor(got, f"your encoding for {inputs}")
        _same_shape(
            got,
            want,
            "your encoding",
            inputs,
            "one row per position, one column per feature, (T, d_model)",
        )
        if _close(got, want):
            continue
        like = lambda **v: _close(got, _pe_variant(T, d, **v))  # noqa: E731
        if like(swap=True):
            raise _Wrong(
                f"for {inputs}, sin and cos are swapped: the even columns 2i hold sin(pos / 10000^(2i/d_model)), the odd columns 2i+1 hold cos"
            )
        if like(exponent="i"):
            raise _Wrong(
                f"for {inputs}, your frequencies use the exponent i/d_model; the formula uses 2i/d_model, where i counts the sin/cos pairs (columns 2i and 2i+1 share one frequency)"
            )
        if like(exponent="j"):
            raise _Wrong(
                f"for {inputs}, your frequencies use the column index j/d_model; columns 2i and 2i+1 share the frequency 10000^(-2i/d_model), so the odd column uses the same exponent as the even one before it"
            )
        if like(start=1):
            raise _Wrong(
                f"for {inputs}, your positions start at 1; they start at 0, so row 0 is [0, 1, 0, 1, ...] (sin 0 = 0, cos 0 = 1)"
            )
        if like(concat=True):
            raise _Wrong(
                f"for {inputs}, you concatenated all the sin columns and then all the cos columns; the formula interleaves them: column 2i is sin, column 2i+1 is cos of the same angle"
            )
        if like(multiply=True):
            raise _Wrong(
                f"for {inputs}, you multiplied the position by 10000^(2i/d_model); divide by it: the angle is pos / 10000^(2i/d_model)"
            )
        idx, g, w = _first_mismatch(got, want)
        p, c = idx
        fn = "sin" if c % 2 == 0 else "cos"
        raise _Wrong(
            f"for {inputs}, PE[pos={p}, column {c}] is {_num(g)}; expected {fn}({p} / 10000^({2 * (c // 2)}/{d})) = {_num(w)}"
        )
    return f"{len(cases)} sizes agree with tl.sinusoidal_positional_encoding, including an odd d_model and T = 1."


def _rope_variant(x, positions, *, halves=False, sign=1.0, power="2i", base=10000.0):
    d = x.size(-1)
    i = torch.arange(d // 2, dtype=torch.float64)
    exponent = {"2i": 2 * i / d, "i": i / d}[power]
    theta = (positions.double().unsqueeze(-1) * base**-exponent).to(
        x.dtype
    ) * sign  # (..., T, d/2)
    cos, sin = theta.cos(), theta.sin()
    if halves:
        x1, x2 = x[..., : d // 2], x[..., d // 2 :]
        return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


@_checker
def check_apply_rope(candidate: Callable) -> str:
    """Check ``candidate(x, positions)`` against :func:`transformer_lib.apply_rope`."""
    g = _gen(8)
    cases = [
        ("x (6, 8), positions = torch.arange(6)", _randn(g, 6, 8), torch.arange(6)),
        (
            "x (2, 3, 5, 16) (batch and head axes), positions = torch.arange(5)",
            _randn(g, 2, 3, 5, 16),
            torch.arange(5),
        ),
        (
            "x (1, 2, 4, 8), positions = torch.arange(10, 14) (not starting at 0, as after a KV cache)",
            _randn(g, 1, 2, 4, 8),
            torch.arange(10, 14),
        ),
        (
            "x (3, 2) (a single pair), positions = torch.arange(3)",
            _randn(g, 3, 2),
            torch.arange(3),
        ),
    ]
    for inputs, x, positions in cases:
        want = apply_rope(x, positions)
        got = _tensor(
            _call(candidate, inputs, x.clone(), positions.clone()),
            f"your output for {inputs}",
        )
        _same_shape(
            got,
            want,
            "your output",
            inputs,
            "RoPE rotates x in place of x: the output has the shape of x",
        )
        if _close(got, want):
            continue
        d = x.size(-1)
        if _close(got, _rope_variant(x, positions, halves=True)):
            raise _Wrong(
                f"for {inputs}, you paired feature i with feature i + d/2 (the 'rotate half' layout of some codebases); "
                "this book rotates neighbouring pairs (x_2i, x_2i+1), as the RoFormer paper writes it"
            )
        if d > 2 and _close(got, _rope_variant(x, positions, power="i")):
            raise _Wrong(
                f"for {inputs}, your frequencies are 10000^(-i/d); pair i turns by pos * theta_i with theta_i = 10000^(-2i/d) "
                "(the exponent counts features, and pair i starts at feature 2i): check the frequencies"
            )
        if positions[0] != 0 and _close(got, apply_rope(x, torch.arange(x.size(-2)))):
            raise _Wrong(
                f"your function ignores its positions argument: for {inputs} it rotated as if the positions were 0, 1, 2, ..."
            )
        if not _finite(got):
            raise _mismatch(got, want, "your output", inputs)
        x1, x2, y1, y2 = (
            x[..., 0::2].double(),
            x[..., 1::2].double(),
            got[..., 0::2].double(),
            got[..., 1::2].double(),
        )
        n_in, n_out = (
            torch.hypot(x1, x2),
            torch.hypot(y1, y2),
        )  # (..., T, d/2): the length of every pair
        if not _close(n_out, n_in, atol=1e-4):
            idx, a, b = _first_mismatch(n_out, n_in, atol=1e-4)
            raise _Wrong(
                f"for {inputs}, pair {idx[-1]} (features {2 * idx[-1]}, {2 * idx[-1] + 1}) at position {int(positions[idx[-2]])} has "
                f"length {_num(b)} before and {_num(a)} after: a rotation keeps the length of every pair"
            )
        angle = torch.atan2(
            x1 * y2 - x2 * y1, x1 * y1 + x2 * y2
        )  # (..., T, d/2): how far each pair turned
        expected = rope_angles(positions, d)  # (T, d/2)
        wrap = lambda a: torch.remainder(a + math.pi, 2 * math.pi) - math.pi  # noqa: E731
        err = wrap(angle - expected).abs()
        if d > 2 and bool((wrap(angle - angle[..., :1]).abs() < 1e-3).all()):
            raise _Wrong(
                f"for {inputs}, every pair is rotated by the same angle; pair i must turn by pos * theta_i with its own "
                f"frequency theta_i = 10000^(-2i/d), from 1 for pair 0 down to {_num(10000 ** (-2 * (d // 2 - 1) / d))} for pair {d // 2 - 1}"
            )
        if bool((wrap(angle + expected).abs() < 1e-3).all()):
            raise _Wrong(
                f"for {inputs}, you rotate every pair the opposite way (by -pos * theta_i): the rotation is (x1 cos - x2 sin, x1 sin + x2 cos)"
            )
        bad = (err > 1e-3).nonzero()[0]
        p, i = int(bad[-2]), int(bad[-1])
        pos = int(positions[p])
        raise _Wrong(
            f"for {inputs}, pair {i} at position {pos} is rotated by {_num(angle[tuple(bad)])} rad; expected "
            f"{pos} * 10000^(-2*{i}/{d}) = {_num(expected[p, i])} rad: check the frequencies theta_i = 10000^(-2i/d)"
        )
    return f"{len(cases)} inputs agree with tl.apply_rope, including batch and head axes, positions from 10 and d = 2."


# ----------------------------------------------------------------------------------------------
# Grouped-query attention (chapter 5)
# ----------------------------------------------------------------------------------------------


@_checker
def check_repeat_kv(candidate: Callable) -> str:
    """Check ``candidate(k, n_rep)`` against :func:`transformer_lib.repeat_kv`."""
    g = _gen(5)
    cases = [((2, 2, 3, 4), 3), ((1, 4, 5, 2), 2), ((1, 1, 4, 3), 4), ((2, 3, 2, 5), 1)]
    for shape, n_rep in cases:
        k = _randn(g, *shape)
        B, h_kv, T, d = shape
        inputs = f"k of shape {_shape(shape)} (B, h_kv, T, d) and n_rep = {n_rep}"
        want = repeat_kv(k, n_rep)
        got = _tensor(
            _call(candidate, inputs, k.clone(), n_rep), f"your output for {inputs}"
        )
        if got.shape != want.shape:
            hint = "(B, h_kv * n_rep, T, d): repeat along the head axis, dim 1"
            if got.shape == (B, h_kv, T * n_rep, d):
                hint += "; you repeated along the time axis, dim 2"
            raise _Wrong(
                f"your output has shape {_shape(got)} for {inputs}; expected {hint}"
            )
        if _close(got, want):
            continue
        if _close(got, k.repeat(1, n_rep, 1, 1)):
            raise _Wrong(
                f"for {inputs}, you tiled the heads as k0, k1, k0, k1, ... (repeat or tile); query head j reads K/V head "
                "j // n_rep, so the copies of a head must sit next to each other, k0, k0, k1, k1, ...: "
                "use repeat_interleave(n_rep, dim=1)"
            )
        raise _mismatch(got, want, "your output", inputs)
    return f"{len(cases)} inputs agree with tl.repeat_kv, including MQA (h_kv = 1) and n_rep = 1."


# ----------------------------------------------------------------------------------------------
# Multi-head attention (chapter 5)
# ----------------------------------------------------------------------------------------------


def _mha_variant(
    x_q,
    x_kv,
    W_q,
    W_k,
    W_v,
    W_o,
    h,
    mask=None,
    *,
    split="ok",
    merge="ok",
    W_o_used=True,
    scale="d_k",
    invert=False,
    transpose_w=False,
):
    if transpose_w:
        W_q, W_k, W_v, W_o = W_q.T, W_k.T, W_v.T, W_o.T
    B, T_q, D = x_q.shape
    T_k = x_kv.size(1)
    heads = 1 if split == "one" else h

    def sp(t: torch.Tensor) -> torch.Tensor:
        if split == "view":
            return t.reshape(
                B, heads, t.size(1), D // heads
            )  # no transpose: rows of different tokens mixed
        return t.reshape(B, t.size(1), heads, D // heads).transpose(1, 2)

    q, k, v = sp(x_q @ W_q), sp(x_kv @ W_k), sp(x_kv @ W_v)
    s = q @ k.transpose(-2, -1) / math.sqrt(D if scale == "d_model" else D // heads)
    if mask is not None:
        s = s.masked_fill(mask if invert else ~mask, float("-inf"))
    o = softmax(s, dim=-1) @ v  # (B, heads, T_q, d_k)
    o = (
        o.reshape(B, T_q, D)
        if merge == "view"
        else o.transpose(1, 2).reshape(B, T_q, D)
    )
    return o @ W_o if W_o_used else o


_MHA_MISTAKES = [
    (
        {"split": "view"},
        "your heads look split with .view(B, h, T, d_k) (or reshape) straight from (B, T, d_model): that cuts the "
        "matrix across token rows, so a 'head' mixes features of different tokens. Reshape to (B, T, h, d_k) first, then "
        "transpose(1, 2) to (B, h, T, d_k), as tl.split_heads does",
    ),
    (
        {"split": "view", "merge": "view"},
        "your heads look split with .view(B, h, T, d_k) straight from (B, T, d_model) (and merged back "
        "the same way): that cuts the matrix across token rows, so a 'head' mixes features of different tokens. Reshape to "
        "(B, T, h, d_k) first, then transpose(1, 2), as tl.split_heads does",
    ),
    (
        {"merge": "view"},
        "your heads are concatenated with a reshape of (B, h, T, d_k) straight to (B, T, d_model), which mixes "
        "tokens: transpose back to (B, T, h, d_k) first, then reshape, as tl.merge_heads does",
    ),
    (
        {"W_o_used": False},
        "your output matches Concat(head_1, ..., head_h) before the output projection: multiply the "
        "concatenated heads by W_o at the end",
    ),
    (
        {"scale": "d_model"},
        "you scaled the scores by sqrt(d_model); each head's scores are divided by sqrt(d_k), with "
        "d_k = d_model / n_heads, the width of one head",
    ),
    (
        {"split": "one"},
        "your output matches a single attention head over all d_model features: split Q, K and V into "
        "n_heads heads of d_k = d_model / n_heads features each",
    ),
    (
        {"invert": True},
        "your mask convention is inverted: True = may attend, so fill the scores with -inf where the mask is False",
    ),
    (
        {"transpose_w": True},
        "your output matches x @ W.T: in this exercise the weights are (d_model, d_model) matrices "
        "applied as x @ W (already transposed, unlike nn.Linear's weight)",
    ),
]


@_checker
def check_multi_head_attention(candidate: Callable) -> str:
    """Check ``candidate(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None) -> out`` against
    :func:`multi_head_attention` (equal to ``tl.MultiHeadAttention`` without biases)."""
    g = _gen(11)

    def weights(D: int) -> list[torch.Tensor]:
        return [_randn(g, D, D, scale=D**-0.5) for _ in range(4)]

    x6 = _randn(g, 1, 6, 12)
    cases = [
        (
            "self-attention, x_q = x_kv of shape (2, 5, 8), n_heads = 2, no mask",
            (x5 := _randn(g, 2, 5, 8)),
            x5,
            weights(8),
            2,
            None,
        ),
        (
            "cross-attention, x_q (2, 3, 12), x_kv (2, 6, 12), n_heads = 3, no mask",
            _randn(g, 2, 3, 12),
            _randn(g, 2, 6, 12),
            weights(12),
            3,
            None,
        ),
        (
            "x (1, 6, 12), n_heads = 4 (odd d_k = 3), causal mask tl.causal_mask(6)",
            x6,
            x6,
            weights(12),
            4,
            causal_mask(6),
        ),
        (
            "x_q (2, 4, 8), x_kv (2, 5, 8), n_heads = 2, padding mask tl.padding_mask([5, 2], 5)",
            _randn(g, 2, 4, 8),
            _randn(g, 2, 5, 8),
            weights(8),
            2,
            padding_mask([5, 2], 5),
        ),
        (
            "x (1, 4, 6), n_heads = 1",
            (x4 := _randn(g, 1, 4, 6)),
            x4,
            weights(6),
            1,
            None,
        ),
    ]
    for inputs, x_q, x_kv, W, h, mask in cases:
        want = multi_head_attention(x_q, x_kv, *W, h, mask)
        kwargs = {} if mask is None else {"mask": mask.clone()}
        got = _call(
            candidate,
            inputs,
            x_q.clone(),
            x_kv.clone(),
            *[w.clone() for w in W],
            h,
            **kwargs,
        )
        if isinstance(got, (tuple, list)):
            raise _Wrong(
                "your function returned a tuple; return only the output tensor (B, T_q, d_model)"
            )
        got = _tensor(got, f"your output for {inputs}")
        _same_shape(
            got,
            want,
            "your output",
            inputs,
            "one row per query, d_model wide: (B, T_q, d_model)",
        )
        if _close(got, want):
            continue
        quiet = got.nan_to_num(
            0.0
        )  # a NaN row (a fully masked query) compares as the zero row it should be
        for variant, message in _MHA_MISTAKES:
            if (mask is not None or "invert" not in variant) and _close(
                quiet, _mha_variant(x_q, x_kv, *W, h, mask, **variant)
            ):
                raise _Wrong(f"for {inputs}, {message}")
        if mask is not None and _close(got, multi_head_attention(x_q, x_kv, *W, h)):
            raise _Wrong(
                f"your output ignores the mask for {inputs}: pass it to the attention of every head"
            )
        raise _mismatch(got, want, "your output", inputs)
    return (
        f"{len(cases)} inputs agree with the reference (= tl.MultiHeadAttention without biases), including "
        "cross-attention, causal and padding masks, an odd d_k and one head."
    )


# ----------------------------------------------------------------------------------------------
# One decoding step with a KV cache (chapter 12)
# ----------------------------------------------------------------------------------------------


def _kv_out_variant(
    q,
    k,
    v,
    ck,
    cv,
    rope,
    *,
    pos0=False,
    only_new=False,
    no_mask=False,
    top_left=False,
    q_unrotated=False,
):
    """The output of common cache mistakes, for one step."""
    T_past, T_new = ck.size(-2), q.size(-2)
    positions = torch.arange(0 if pos0 else T_past, (0 if pos0 else T_past) + T_new)
    if rope:
        q = q if q_unrotated else apply_rope(q, positions)
        k = apply_rope(k, positions)
    keys, vals = (
        (k, v) if only_new else (torch.cat([ck, k], -2), torch.cat([cv, v], -2))
    )
    n_rep = q.size(1) // keys.size(1)
    T_k = keys.size(-2)
    mask = (
        None
        if no_mask
        else (
            causal_mask(T_new, T_k)
            if not top_left
            else torch.ones(T_new, T_k, dtype=torch.bool).tril()
        )
    )
    out, _ = scaled_dot_product_attention(
        q, repeat_kv(keys, n_rep), repeat_kv(vals, n_rep), mask
    )
    return out


@_checker
def check_kv_cache_step(candidate: Callable) -> str:
    """Check ``candidate(q_new, k_new, v_new, cache_k, cache_v, rope=False) -> (out, cache_k, cache_v)``
    against :func:`transformer_lib.cached_attention_step`, step by step through short decodings."""
    g = _gen(12)
    runs = [
        (
            "decoding 5 tokens one at a time from an empty cache, B = 2, h = 2, d_k = 8, rope=False",
            2,
            2,
            2,
            8,
            [1, 1, 1, 1, 1],
            False,
        ),
        (
            "decoding 5 tokens one at a time from an empty cache, B = 1, h = 2, d_k = 8, rope=True",
            1,
            2,
            2,
            8,
            [1, 1, 1, 1, 1],
            True,
        ),
        (
            "a prompt of 3 tokens at once, then 2 single tokens, B = 2, h = 2, d_k = 4, rope=True",
            2,
            2,
            2,
            4,
            [3, 1, 1],
            True,
        ),
        (
            "a prompt of 4 tokens, then 2 single tokens, B = 1, h = 2, d_k = 6, rope=False",
            1,
            2,
            2,
            6,
            [4, 1, 1],
            False,
        ),
        (
            "GQA: h = 4 query heads sharing h_kv = 2 K/V heads, 3 single tokens, rope=True",
            1,
            4,
            2,
            4,
            [1, 1, 1],
            True,
        ),
    ]
    steps = 0
    for run, B, h, h_kv, d, sizes, rope in runs:
        ck = cv = torch.zeros(B, h_kv, 0, d)
        for s, T_new in enumerate(sizes):
            q, k, v = (
                _randn(g, B, h, T_new, d),
                _randn(g, B, h_kv, T_new, d),
                _randn(g, B, h_kv, T_new, d),
            )
            T_past = ck.size(-2)
            inputs = f"step {s} of {run} (T_past = {T_past}, T_new = {T_new})"
            want_out, want_ck, want_cv = cached_attention_step(
                q, k, v, ck, cv, rope=rope
            )
            try:
                got = _call(
                    candidate,
                    inputs,
                    q.clone(),
                    k.clone(),
                    v.clone(),
                    ck.clone(),
                    cv.clone(),
                    rope=rope,
                )
            except _Wrong as wrong:
                if h != h_kv:
                    raise _Wrong(
                        f"{wrong} (the cache has fewer heads, h_kv = {h_kv}, than the queries, h = {h}: repeat each K/V head for its group with tl.repeat_kv)"
                    ) from None
                raise
            if not isinstance(got, (tuple, list)) or len(got) != 3:
                raise _Wrong(
                    "your function should return three things, (out, cache_k, cache_v): the output and the two updated caches"
                )
            got_out, got_ck, got_cv = (
                _tensor(t, f"{name} for {inputs}")
                for t, name in zip(got, ("your out", "your cache_k", "your cache_v"))
            )
            for name, got_c, want_c in (
                ("cache_k", got_ck, want_ck),
                ("cache_v", got_cv, want_cv),
            ):
                if got_c.shape != want_c.shape:
                    if got_c.dim() == 4 and got_c.size(-2) == T_past:
                        raise _Wrong(
                            f"after {inputs}, your {name} still holds {T_past} positions; expected {T_past + T_new}: the cache was not "
                            f"appended. Concatenate the new entries on the time axis, torch.cat([{name}, {name[-1]}_new], dim=-2), and return the new cache"
                        )
                    raise _Wrong(
                        f"after {inputs}, your {name} has shape {_shape(got_c)}; expected {_shape(want_c)} (B, h_kv, T_past + T_new, d_k): "
                        "append the new entries on the time axis, dim=-2"
                    )
            if rope and not _close(got_ck, want_ck):
                at_zero = torch.cat(
                    [ck, apply_rope(k, torch.arange(T_new))], -2
                )  # = the un-rotated key when T_new = 1
                out_at_zero = _kv_out_variant(q, k, v, ck, cv, rope, pos0=True)
                if _close(got_ck, at_zero) and (
                    T_new > 1 or _close(got_out, out_at_zero)
                ):
                    raise _Wrong(
                        f"at {inputs}, your new key was rotated as if it sat at position 0: the position does not advance. The new "
                        f"tokens sit at positions T_past, ..., T_past + T_new - 1 (here {_positions(T_past, T_past + T_new - 1)}), where T_past is the cache length before the step"
                    )
                if _close(got_ck, torch.cat([ck, k], -2)):
                    raise _Wrong(
                        f"at {inputs}, your cache holds the un-rotated new key: with rope=True, rotate k_new at its position before appending it (the cache stores rotated keys)"
                    )
            for name, got_c, want_c in (
                ("cache_k", got_ck, want_ck),
                ("cache_v", got_cv, want_cv),
            ):
                if not _close(got_c, want_c):
                    if _close(got_c[..., :T_past, :], want_c[..., T_new:, :]) or _close(
                        got_c[..., T_new:, :], want_c[..., :T_past, :]
                    ):
                        raise _Wrong(
                            f"after {inputs}, your {name} has the new entries in front of the old ones: append them at the end"
                        )
                    raise _mismatch(got_c, want_c, f"your {name}", inputs)
            _same_shape(
                got_out,
                want_out,
                "your out",
                inputs,
                "(B, h, T_new, d_k): one row per new query",
            )
            if not _close(got_out, want_out):
                like = lambda **kw: _close(
                    got_out, _kv_out_variant(q, k, v, ck, cv, rope, **kw)
                )  # noqa: E731
                if rope and like(pos0=True):
                    raise _Wrong(
                        f"at {inputs}, your output matches queries and keys rotated as if the new tokens sat at position 0: the "
                        f"position does not advance. The new tokens sit at {_positions(T_past, T_past + T_new - 1)} (T_past onwards)"
                    )
                if rope and like(q_unrotated=True):
                    raise _Wrong(
                        f"at {inputs}, your output matches an un-rotated query: with rope=True rotate q_new at its position too"
                    )
                if T_past and like(only_new=True):
                    raise _Wrong(
                        f"at {inputs}, your new query attended only to the new keys: attend over the whole cache, the past keys and the new ones"
                    )
                if T_new > 1 and like(top_left=True):
                    raise _Wrong(
                        f"at {inputs}, your causal mask is aligned top-left: the new queries are the last T_new of the "
                        "T_past + T_new positions, so use the end-aligned tl.causal_mask(T_new, T_past + T_new)"
                    )
                if T_new > 1 and like(no_mask=True):
                    raise _Wrong(
                        f"at {inputs}, your new queries see the new tokens after them: when several tokens arrive at once they "
                        "attend causally, with tl.causal_mask(T_new, T_past + T_new)"
                    )
                raise _mismatch(got_out, want_out, "your out", inputs)
            ck, cv = (
                want_ck,
                want_cv,
            )  # every step starts from the library's cache, so each step is judged alone
            steps += 1
    return f"{steps} decoding steps in {len(runs)} runs agree with tl.cached_attention_step, including RoPE, a 3-token prompt and GQA."
