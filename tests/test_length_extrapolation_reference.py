"""Chapter 17's ALiBi against a reference implementation: BLOOM's in `transformers`.

The chapter's ALiBi attention adds ``alibi_bias(H, T)``, -m_h (i - j) for key j <= query
i and -inf above the diagonal, to the scaled scores and takes the softmax
(``tl.softmax``). BLOOM's ``build_alibi_tensor`` writes the penalty as m_h * j, one row
for every query: the two differ by m_h * i, a constant per row, which the softmax
ignores. The reference adds BLOOM's bias and the causal mask to the scores through
``F.scaled_dot_product_attention(..., attn_mask=bias)``; the outputs must agree in
float64, to the rounding of the slopes: both libraries hold them in float32 (the
chapter's bias is float32; BLOOM computes m_h as a float32 power), so the outputs agree
to about 1e-7, where a wrong slope, sign or mask moves them by 1e-2 or more (the last
test). Power-of-two head counts only: for other counts BLOOM interleaves a second series
of slopes, which the chapter's exercise does not define.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is ever downloaded

import pytest
import torch
import torch.nn.functional as F
from transformers.models.bloom.modeling_bloom import build_alibi_tensor

import transformer_lib as tl
from transformer_lib.exercises import ch17_length_extrapolation as ch17
from transformer_lib.positional import alibi_bias

CASES = [(1, 5), (2, 7), (4, 16), (8, 33), (16, 12)]
SLOPE_ROUNDING = 1e-6  # float32 slopes in both; everything else is float64


def chapter_alibi_attention(q, k, v, bias_fn=alibi_bias):
    """softmax(Q K^T / sqrt(d_k) + ALiBi bias) V, as chapter 17 defines it.

    q, k, v: (B, H, T, d) -> (B, H, T, d)
    """
    H, T = q.size(1), q.size(2)
    scores = tl.attention_scores(q, k)  # (B, H, T, T), scaled by 1/sqrt(d_k)
    weights = tl.softmax(scores + bias_fn(H, T).to(q.dtype), dim=-1)
    return weights @ v


def bloom_bias(padding_mask: torch.Tensor, n_heads: int) -> torch.Tensor:
    """BLOOM's ALiBi plus the causal and padding masks, as an additive float mask.

    padding_mask: (B, T), 1 for a real token -> (B, H, T, T)
    """
    B, T = padding_mask.shape
    alibi = build_alibi_tensor(padding_mask, n_heads, torch.float64)  # (B*H, 1, T)
    alibi = alibi.view(B, n_heads, 1, T).expand(B, n_heads, T, T)  # m_h * j, every row
    allowed = tl.causal_mask(T) & padding_mask.bool()[:, None, None, :]  # (B, 1, T, T)
    return alibi.masked_fill(~allowed, float("-inf"))


def qkv(B, H, T, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, H, T, d, generator=g, dtype=torch.float64) for _ in range(3)]


@pytest.mark.parametrize(("n_heads", "T"), CASES)
def test_alibi_attention_matches_bloom_through_sdpa(n_heads, T):
    q, k, v = qkv(2, n_heads, T)
    bias = bloom_bias(torch.ones(2, T, dtype=torch.long), n_heads)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    got = chapter_alibi_attention(q, k, v)
    torch.testing.assert_close(got, want, rtol=0, atol=SLOPE_ROUNDING)
    # the bias matters: without it the output is a different one
    plain = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert (got - plain).abs().max() > 1e-3  # H = 1: one gentle slope, 2^-8


@pytest.mark.parametrize(("n_heads", "T"), [(4, 9), (8, 6)])
def test_alibi_attention_matches_bloom_with_left_padding(n_heads, T):
    """BLOOM counts positions from the first real token; distances between real tokens,
    and so the attention of every real query, are the same as without padding."""
    pad = 3
    q, k, v = qkv(1, n_heads, T - pad, seed=1)
    mask = torch.ones(1, T, dtype=torch.long)
    mask[:, :pad] = 0  # three padding tokens on the left
    junk = [torch.randn(1, n_heads, pad, 8, dtype=torch.float64) for _ in range(3)]
    qp, kp, vp = (
        torch.cat([j, x], dim=2) for j, x in zip(junk, (q, k, v), strict=True)
    )
    want = F.scaled_dot_product_attention(
        qp, kp, vp, attn_mask=bloom_bias(mask, n_heads)
    )
    torch.testing.assert_close(
        chapter_alibi_attention(q, k, v), want[:, :, pad:], rtol=0, atol=SLOPE_ROUNDING
    )


@pytest.mark.parametrize(
    "mistake",
    [
        ch17.alibi_slopes_from_zero,
        ch17.alibi_positive,
        ch17.alibi_no_mask,
        ch17.alibi_slopes_reversed,
    ],
)
def test_the_reference_catches_the_exercise_mistakes(mistake):
    q, k, v = qkv(1, 8, 12, seed=2)
    want = F.scaled_dot_product_attention(
        q, k, v, attn_mask=bloom_bias(torch.ones(1, 12, dtype=torch.long), 8)
    )
    wrong = chapter_alibi_attention(q, k, v, bias_fn=mistake)
    assert (wrong - want).abs().max() > 1e-2
