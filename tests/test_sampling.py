"""Sampling: the top-k and top-p filters against transformers' logits warpers and a
brute-force definition, greedy limits, draw frequencies against the filtered and
renormalised distribution (chi-square, fixed seed), reproducibility, and the errors."""

from __future__ import annotations

import itertools
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch
from transformers.generation.logits_process import (
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

import transformer_lib as tl

F64 = torch.float64


# tiny models: one torch thread (the fixture is in tests/conftest.py)
pytestmark = pytest.mark.usefixtures("one_thread")


NEG_INF = float("-inf")


def logits(B=4, V=10, seed=0, scale=2.0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, V, generator=g, dtype=F64) * scale


def brute_top_p_keep(row: torch.Tensor, p: float) -> set[int]:
    """The smallest set of most likely tokens whose probabilities sum to >= p, by
    trying sizes 1, 2, ... (distinct probabilities, so the set is unique)."""
    probs = torch.softmax(row, -1)
    order = sorted(range(len(row)), key=lambda v: -probs[v].item())
    for n in range(1, len(row) + 1):
        if probs[order[:n]].sum() >= p:
            return set(order[:n])
    return set(order)


# ------------------------------------------------------------------------------ filters
@pytest.mark.parametrize("k", [1, 2, 5, 9, 10, 50])
def test_top_k_filter_matches_transformers_and_topk(k):
    z = logits(B=6, V=10, seed=k)
    out = tl.top_k_filter(z, k)
    ref = TopKLogitsWarper(top_k=k)(None, z.clone())
    assert torch.equal(out, ref)
    kept = torch.isfinite(out)
    assert (kept.sum(-1) == min(k, 10)).all()
    top = torch.topk(z, min(k, 10), dim=-1).indices
    assert kept.gather(-1, top).all()  # the kept set is exactly torch.topk's
    assert torch.equal(out[kept], z[kept])  # kept logits are untouched


def test_top_k_keeps_ties():
    z = torch.tensor([[3.0, 1.0, 3.0, 0.0, 1.0]])
    assert torch.isfinite(tl.top_k_filter(z, 1)).tolist() == [
        [True, False, True, False, False]
    ]


@pytest.mark.parametrize("p", [0.05, 0.3, 0.5, 0.9, 0.99, 1.0])
def test_top_p_filter_is_the_smallest_set_reaching_p(p):
    z = logits(B=8, V=12, seed=int(p * 100))
    out = tl.top_p_filter(z, p)
    for row, kept in zip(z, torch.isfinite(out), strict=True):
        assert set(torch.nonzero(kept).flatten().tolist()) == brute_top_p_keep(row, p)
    assert (torch.isfinite(out).sum(-1) >= 1).all()  # never empty
    if p < 1.0:  # transformers' warper keeps the same set
        ref = TopPLogitsWarper(top_p=p)(None, z.clone())
        assert torch.equal(torch.isfinite(out), torch.isfinite(ref))


def test_top_p_keeps_the_top_token_even_when_it_alone_exceeds_p():
    z = torch.tensor([[10.0, 0.0, -1.0]], dtype=F64)
    assert torch.isfinite(tl.top_p_filter(z, 0.01)).tolist() == [[True, False, False]]
    assert torch.isfinite(tl.top_p_filter(z, 1.0)).all()  # p = 1 keeps every token


def test_filters_compose_and_probs_renormalise():
    z = logits(B=5, V=16, seed=3)
    for tau, k, p in itertools.product([0.5, 1.0, 2.0], [None, 4], [None, 0.7]):
        probs = tl.next_token_probs(z, temperature=tau, top_k=k, top_p=p)
        # independent: transformers' warpers in their order, then a softmax
        ref = TemperatureLogitsWarper(tau)(None, z.clone())
        if k is not None:
            ref = TopKLogitsWarper(k)(None, ref)
        if p is not None:
            ref = TopPLogitsWarper(p)(None, ref)
        torch.testing.assert_close(probs, torch.softmax(ref, -1), rtol=0, atol=1e-14)
        torch.testing.assert_close(probs.sum(-1), torch.ones(5, dtype=F64))


# ------------------------------------------------------------------------------- greedy
def test_top_k_1_and_tiny_temperature_are_greedy():
    z = logits(B=64, V=30, seed=5)
    g = torch.Generator().manual_seed(0)
    greedy = z.argmax(-1)
    assert torch.equal(tl.sample_next(z, top_k=1, generator=g), greedy)
    assert torch.equal(tl.sample_next(z, temperature=1e-6, generator=g), greedy)
    assert torch.equal(tl.sample_next(z, temperature=0.0), greedy)
    assert torch.equal(tl.sample_next(z, top_p=1e-9, generator=g), greedy)
    one_hot = tl.next_token_probs(z, temperature=0.0)
    assert (
        torch.equal(one_hot.argmax(-1), greedy) and (one_hot.max(-1).values == 1).all()
    )


# ---------------------------------------------------------------------------- frequency
def chi_square_p_value(counts: torch.Tensor, probs: torch.Tensor) -> float:
    """Pearson's chi-square test of the counts against the probabilities of the kept
    tokens; its p-value from the regularised upper incomplete gamma function."""
    n = counts.sum()
    kept = probs > 0
    expected = n * probs[kept]
    stat = ((counts[kept] - expected) ** 2 / expected).sum()
    dof = torch.tensor(kept.sum().item() - 1, dtype=F64)
    return torch.special.gammaincc(dof / 2, stat / 2).item()


@pytest.mark.parametrize(
    "tau,k,p",
    [(1.0, None, None), (0.7, None, None), (1.5, 5, None), (1.0, None, 0.8),
     (0.8, 6, 0.9)],
)  # fmt: skip
def test_draw_frequencies_match_the_filtered_distribution(tau, k, p):
    row = logits(B=1, V=8, seed=11, scale=1.0)  # (1, V)
    N = 40_000
    g = torch.Generator().manual_seed(1234)
    draws = tl.sample_next(
        row.expand(N, -1), temperature=tau, top_k=k, top_p=p, generator=g
    )
    counts = torch.bincount(draws, minlength=8).to(F64)
    # the filtered, renormalised distribution, computed independently
    z = row[0] / tau
    keep = torch.ones(8, dtype=torch.bool)
    if k is not None:
        keep &= z >= torch.sort(z, descending=True).values[k - 1]
    if p is not None:
        zk = z.masked_fill(~keep, NEG_INF)
        keep &= torch.isin(torch.arange(8), torch.tensor(list(brute_top_p_keep(zk, p))))
    probs = torch.softmax(z.masked_fill(~keep, NEG_INF), -1)
    assert counts[~keep].sum() == 0, "a filtered-out token was drawn"
    assert chi_square_p_value(counts, probs) > 1e-3
    # the same test rejects the wrong distribution, the unfiltered one at tau = 1
    unfiltered = torch.softmax(row[0], -1)
    if tau != 1.0 or not keep.all():
        assert chi_square_p_value(counts, unfiltered) < 1e-6


def test_generator_makes_draws_reproducible_and_leaves_global_rng_alone():
    z = logits(B=200, V=20, seed=2)
    state = torch.get_rng_state()
    a = tl.sample_next(z, top_p=0.9, generator=torch.Generator().manual_seed(7))
    b = tl.sample_next(z, top_p=0.9, generator=torch.Generator().manual_seed(7))
    c = tl.sample_next(z, top_p=0.9, generator=torch.Generator().manual_seed(8))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert torch.equal(torch.get_rng_state(), state)


def test_shapes():
    assert tl.sample_next(logits(B=3)).shape == (3,)
    assert tl.sample_next(torch.randn(2, 5, 7)).shape == (2, 5)
    assert tl.sample_next(torch.randn(7), temperature=0).shape == ()


# ------------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(temperature=-0.5), "temperature.*-0.5"),
        (dict(temperature=float("nan")), "temperature.*nan"),
        (dict(top_k=0), "top_k.*0"),
        (dict(top_k=-3), "top_k.*-3"),
        (dict(top_k=2.5), "top_k.*2.5"),
        (dict(top_p=0.0), r"top_p.*\(0, 1\].*0.0"),
        (dict(top_p=1.5), "top_p.*1.5"),
        (dict(top_p=-0.1), "top_p.*-0.1"),
    ],
)
def test_bad_values_raise_naming_the_value(kwargs, match):
    z = logits()
    with pytest.raises(ValueError, match=match):
        tl.sample_next(z, **kwargs)
    with pytest.raises(ValueError, match=match):
        tl.next_token_probs(z, **kwargs)
    if "top_k" in kwargs:
        with pytest.raises(ValueError, match=match):
            tl.top_k_filter(z, kwargs["top_k"])
    if "top_p" in kwargs:
        with pytest.raises(ValueError, match=match):
            tl.top_p_filter(z, kwargs["top_p"])


def test_greedy_temperature_still_checks_the_other_values():
    with pytest.raises(ValueError, match="top_p.*2"):
        tl.sample_next(logits(), temperature=0.0, top_p=2)
