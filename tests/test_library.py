"""transformer_lib against PyTorch's own built-ins, its documented properties, and its
error messages.

Comparisons run in float64 with ``torch.testing.assert_close`` over parametrized shapes
and seeds. Masks: this library uses True = may attend; torch's ``key_padding_mask`` and
the bool ``src_mask`` / ``tgt_mask`` of nn.Transformer*Layer use True = ignore, so those
tests translate with ``~``.
"""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import transformer_lib as tl

F64 = torch.float64


def rand(*shape, dtype=F64, seed=None):
    g = torch.Generator().manual_seed(
        seed if seed is not None else sum(shape) * 7919 % 10007
    )
    return torch.randn(*shape, generator=g, dtype=dtype)


# ------------------------------------------------------------------------------ softmax
@pytest.mark.parametrize(
    "shape,dim", [((5,), -1), ((3, 7), -1), ((2, 4, 6), 1), ((2, 3, 4, 5), 0)]
)
def test_softmax_matches_torch(shape, dim):
    x = rand(*shape) * 3
    torch.testing.assert_close(tl.softmax(x, dim=dim), torch.softmax(x, dim=dim))


@pytest.mark.parametrize("big", [1e4, -1e4, 3e38])
def test_softmax_finite_for_huge_logits(big):
    x = torch.tensor([[big, 0.0, -1.0], [big, big, big]], dtype=torch.float32)
    y = tl.softmax(x)
    assert torch.isfinite(y).all()
    torch.testing.assert_close(y.sum(-1), torch.ones(2))
    torch.testing.assert_close(y, torch.softmax(x.double(), -1).float())


def test_softmax_all_masked_slice_is_zero():
    x = torch.tensor([[float("-inf")] * 3, [0.0, float("-inf"), 1.0]])
    y = tl.softmax(x)
    assert torch.equal(y[0], torch.zeros(3))
    torch.testing.assert_close(y[1], torch.softmax(x[1], -1))


@pytest.mark.parametrize("dtype", [torch.float32, F64])
@pytest.mark.parametrize("upstream", [1.0, 10.0, 1e6, 1e30])
def test_softmax_backward_of_an_all_masked_slice_is_zero(dtype, upstream):
    """The additive 0/-inf mask of chapters 4 and 9: scores + mask, then the softmax.
    A row the mask fills entirely gets zero weights and a zero gradient, whatever the
    upstream gradient (it used to be NaN from about 3 on, through 1/tiny); the other
    rows' gradients are PyTorch's."""
    inf = float("-inf")
    scores = rand(4, 5, seed=11).to(dtype).requires_grad_()
    additive = torch.zeros(4, 5, dtype=dtype)
    additive[1] = inf  # nothing allowed
    additive[2, ::2] = inf  # some keys allowed
    additive[3, 1:] = inf  # one key allowed
    g = rand(4, 5, seed=12).to(dtype) * upstream
    (grad,) = torch.autograd.grad(tl.softmax(scores + additive), scores, g)
    assert torch.isfinite(grad).all()
    assert torch.equal(grad[1], torch.zeros(5, dtype=dtype))
    rows = [0, 2, 3]
    ref = scores.detach()[rows].requires_grad_()
    (expected,) = torch.autograd.grad(
        torch.softmax(ref + additive[rows], -1), ref, g[rows]
    )
    torch.testing.assert_close(grad[rows], expected)
    # the same through attention: the scores of a fully masked query row get no gradient
    q, k, v = (rand(1, 4, 3, seed=s).to(dtype).requires_grad_() for s in (1, 2, 3))
    out, _ = tl.scaled_dot_product_attention(q, k, v, additive[:, :4].isfinite())
    dq, dk, dv = torch.autograd.grad(
        out, (q, k, v), rand(1, 4, 3, seed=4).to(dtype) * upstream
    )
    assert all(torch.isfinite(t).all() for t in (dq, dk, dv))
    assert torch.equal(dq[0, 1], torch.zeros(3, dtype=dtype))


def test_softmax_has_a_second_derivative_on_masked_rows():
    x = rand(3, 4, seed=5).requires_grad_()
    additive = torch.tensor(
        [[0.0] * 4, [float("-inf")] * 4, [0.0, float("-inf")] * 2], dtype=F64
    )
    torch.autograd.gradcheck(lambda t: tl.softmax(t + additive), (x,))
    torch.autograd.gradgradcheck(lambda t: tl.softmax(t + additive), (x,))


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 6),
    cols=st.integers(1, 9),
    shift=st.floats(-1e3, 1e3, allow_nan=False),
    seed=st.integers(0, 2**16),
)
def test_softmax_rows_sum_to_one_and_ignore_shifts(rows, cols, shift, seed):
    x = rand(rows, cols, seed=seed) * 10
    y = tl.softmax(x)
    torch.testing.assert_close(y.sum(-1), torch.ones(rows, dtype=F64))
    torch.testing.assert_close(tl.softmax(x + shift), y)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_runs_and_stays_finite(dtype):
    q, k, v = (rand(2, 3, 9, 8, seed=s).to(dtype) * 4 for s in (1, 2, 3))
    x = torch.tensor([1e4, -1e4, 0.0]).to(dtype)
    assert tl.softmax(x).dtype == dtype and torch.isfinite(tl.softmax(x)).all()
    out, w = tl.scaled_dot_product_attention(q, k, v, tl.causal_mask(9))
    assert out.dtype == dtype and torch.isfinite(out).all() and torch.isfinite(w).all()
    ref, _ = tl.scaled_dot_product_attention(
        q.double(), k.double(), v.double(), tl.causal_mask(9)
    )
    torch.testing.assert_close(out.double(), ref, atol=0.05, rtol=0.05)
    x8 = rand(2, 5, 8).to(dtype) + 1e3
    ln = tl.layer_norm(x8, torch.ones(8, dtype=dtype), torch.zeros(8, dtype=dtype))
    assert torch.isfinite(ln).all()


# --------------------------------------------------------- scaled dot-product attention
SDPA_SHAPES = [
    # (batch dims, T_q, T_k, d_k, d_v)
    ((), 4, 4, 8, 8),
    ((2,), 5, 7, 8, 3),
    ((2, 3), 6, 6, 16, 16),
    ((1, 4), 1, 9, 4, 5),
    ((3, 2), 7, 2, 5, 6),
]


@pytest.mark.parametrize("batch,T_q,T_k,d_k,d_v", SDPA_SHAPES)
@pytest.mark.parametrize("mask_kind", ["none", "causal", "random", "padding"])
def test_sdpa_matches_torch(batch, T_q, T_k, d_k, d_v, mask_kind):
    q, k, v = (
        rand(*batch, T_q, d_k, seed=1),
        rand(*batch, T_k, d_k, seed=2),
        rand(*batch, T_k, d_v, seed=3),
    )
    if mask_kind == "none":
        mask = None
    elif mask_kind == "causal":
        mask = tl.causal_mask(T_q, T_k)
    elif mask_kind == "random":
        mask = (
            torch.rand(*batch, T_q, T_k, generator=torch.Generator().manual_seed(4))
            > 0.4
        )
        mask[..., 0] = True  # every row keeps a key, so torch's result is defined
    else:
        mask = torch.ones(
            1, T_k, dtype=torch.bool
        )  # one key-padding row, broadcast over queries
        mask[:, T_k // 2 + 1 :] = False
    out, w = tl.scaled_dot_product_attention(q, k, v, mask)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, expected)
    allowed = (
        torch.ones(*batch, T_q, dtype=F64)
        if mask is None
        else mask.expand(*batch, T_q, T_k).any(-1).to(F64)
    )
    torch.testing.assert_close(
        w.sum(-1), allowed
    )  # 1 per row, 0 for a row with no allowed key
    torch.testing.assert_close(tl.fused_attention(q, k, v, mask), expected)


def test_attention_weights_match_explicit_formula():
    q, k, v = rand(2, 5, 8, seed=1), rand(2, 6, 8, seed=2), rand(2, 6, 4, seed=3)
    _, w = tl.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(
        w, torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(8), dim=-1)
    )


def test_sdpa_fully_masked_rows_are_zero():
    q, k, v = (
        rand(2, 3, 4, 8, seed=1),
        rand(2, 3, 6, 8, seed=2),
        rand(2, 3, 6, 5, seed=3),
    )
    mask = tl.padding_mask([6, 3], 6).expand(2, 3, 4, 6).clone()
    mask[1, :, 2] = False  # batch 1, query 2: no key allowed
    out, w = tl.scaled_dot_product_attention(q, k, v, mask)
    assert torch.isfinite(out).all() and torch.isfinite(w).all()
    assert torch.equal(w[1, :, 2], torch.zeros(3, 6, dtype=F64))
    assert torch.equal(out[1, :, 2], torch.zeros(3, 5, dtype=F64))
    fused = tl.fused_attention(q, k, v, mask)
    assert torch.isfinite(fused).all()
    torch.testing.assert_close(fused, out)
    # every other row is exactly what torch computes
    keep = mask.any(-1)
    torch.testing.assert_close(
        out[keep], F.scaled_dot_product_attention(q, k, v, attn_mask=mask)[keep]
    )


def test_scaled_scores_variance():
    """Var(q . k) = d_k for independent unit-variance components (eq-dot-variance); the
    scale restores 1."""
    g = torch.Generator().manual_seed(0)
    for d_k in (4, 64, 256):
        q = torch.randn(20000, 1, d_k, generator=g, dtype=F64)
        k = torch.randn(20000, 1, d_k, generator=g, dtype=F64)
        raw = tl.attention_scores(q, k, scale=False).flatten()
        scaled = tl.attention_scores(q, k).flatten()
        assert abs(raw.var().item() / d_k - 1) < 0.05
        assert abs(scaled.var().item() - 1) < 0.05
        torch.testing.assert_close(scaled, raw / math.sqrt(d_k))


@settings(max_examples=30, deadline=None)
@given(T=st.integers(2, 9), d=st.integers(1, 12), seed=st.integers(0, 2**16))
def test_attention_without_positions_is_permutation_equivariant(T, d, seed):
    x = rand(1, T, d, seed=seed)
    perm = torch.randperm(T, generator=torch.Generator().manual_seed(seed))
    out, w = tl.scaled_dot_product_attention(x, x, x)
    out_p, w_p = tl.scaled_dot_product_attention(x[:, perm], x[:, perm], x[:, perm])
    torch.testing.assert_close(out_p, out[:, perm])
    torch.testing.assert_close(w_p, w[:, perm][:, :, perm])


@settings(max_examples=30, deadline=None)
@given(T=st.integers(2, 10), t=st.integers(0, 9), seed=st.integers(0, 2**16))
def test_causal_outputs_ignore_the_future(T, t, seed):
    t = t % T
    torch.manual_seed(seed)
    layer = tl.EncoderLayer(16, 4, 32).double().eval()
    x = rand(2, T, 16, seed=seed)
    x2 = x.clone()
    x2[:, t + 1 :] = rand(2, T - t - 1, 16, seed=seed + 1)
    y, y2 = layer(x, tl.causal_mask(T)), layer(x2, tl.causal_mask(T))
    torch.testing.assert_close(y[:, : t + 1], y2[:, : t + 1])


# -------------------------------------------------------------------------------- masks
@pytest.mark.parametrize("T_q,T_k", [(1, 1), (4, 4), (3, 7), (1, 6), (5, 5)])
def test_causal_mask_end_aligned(T_q, T_k):
    m = tl.causal_mask(T_q, T_k)
    assert m.dtype == torch.bool and m.shape == (T_q, T_k)
    expected = torch.tensor(
        [[j <= i + (T_k - T_q) for j in range(T_k)] for i in range(T_q)]
    )
    assert torch.equal(m, expected)
    assert m[-1].all()  # the newest query sees every key
    if T_q == T_k:
        assert torch.equal(m, torch.ones(T_q, T_q, dtype=torch.bool).tril())
        # torch's own causal attention agrees
        q, k, v = rand(T_q, 4, seed=1), rand(T_k, 4, seed=2), rand(T_k, 3, seed=3)
        out, _ = tl.scaled_dot_product_attention(q, k, v, m)
        torch.testing.assert_close(
            out, F.scaled_dot_product_attention(q, k, v, is_causal=True)
        )


def test_causal_mask_matches_torch_square_subsequent_mask():
    T = 6
    torch_float = nn.Transformer.generate_square_subsequent_mask(
        T
    )  # 0 = attend, -inf = blocked
    assert torch.equal(tl.causal_mask(T), torch_float == 0)


def test_padding_mask_matches_key_padding():
    lengths = torch.tensor([5, 2, 0, 3])
    m = tl.padding_mask(lengths, 5)
    assert m.shape == (4, 1, 1, 5) and m.dtype == torch.bool
    assert m[:, 0, 0].sum(-1).tolist() == lengths.tolist()
    key_padding = (
        torch.arange(5)[None, :] >= lengths[:, None]
    )  # torch convention: True = ignore
    assert torch.equal(tl.key_padding_to_attend(key_padding), m)
    # and it gives nn.MultiheadAttention's result
    mha = nn.MultiheadAttention(8, 2, batch_first=True, dtype=F64)
    ours = tl.MultiHeadAttention.from_torch(mha)
    x = rand(4, 5, 8)
    keep = lengths > 0  # torch returns NaN for rows with no key; compare the rest
    out, _ = ours(x, x, x, m)
    expected, _ = mha(x, x, x, key_padding_mask=key_padding)
    torch.testing.assert_close(out[keep], expected[keep])
    assert torch.isfinite(out).all()


# ----------------------------------------------------------------- multi-head attention
MHA_CASES = [(16, 4, 2, 5, 5), (24, 3, 3, 4, 7), (8, 1, 1, 6, 2), (32, 8, 2, 1, 9)]


@pytest.mark.parametrize("d_model,h,B,T_q,T_k", MHA_CASES)
@pytest.mark.parametrize("bias", [True, False])
def test_mha_matches_torch(d_model, h, B, T_q, T_k, bias):
    mha = nn.MultiheadAttention(d_model, h, bias=bias, batch_first=True, dtype=F64)
    ours = tl.MultiHeadAttention.from_torch(mha)
    x, mem = rand(B, T_q, d_model, seed=1), rand(B, T_k, d_model, seed=2)
    # self-attention (T_q keys), with a causal mask
    out, w = ours(x, x, x, tl.causal_mask(T_q), need_weights=True)
    exp_out, exp_w = mha(
        x, x, x, attn_mask=~tl.causal_mask(T_q), average_attn_weights=False
    )
    torch.testing.assert_close(out, exp_out)
    torch.testing.assert_close(w, exp_w)
    # cross-attention, with a key padding mask
    lengths = torch.tensor([T_k - i % T_k for i in range(B)])
    key_padding = torch.arange(T_k)[None, :] >= lengths[:, None]
    out, w = ours(x, mem, mem, tl.key_padding_to_attend(key_padding), need_weights=True)
    exp_out, exp_w = mha(
        x, mem, mem, key_padding_mask=key_padding, average_attn_weights=False
    )
    torch.testing.assert_close(out, exp_out)
    torch.testing.assert_close(w, exp_w)
    # the fused path gives the same output and no weights
    fused, none = ours(
        x, mem, mem, tl.key_padding_to_attend(key_padding), need_weights=False
    )
    assert none is None
    torch.testing.assert_close(fused, exp_out)


@pytest.mark.parametrize("h,h_kv", [(4, 4), (4, 2), (4, 1), (6, 3)])
def test_gqa_fused_equals_explicit(h, h_kv):
    m = tl.MultiHeadAttention(24, h, h_kv).double()
    x = rand(2, 7, 24)
    mask = tl.padding_mask([7, 4], 7) & tl.causal_mask(7)
    a, w = m(x, x, x, mask, need_weights=True)
    b, _ = m(x, x, x, mask, need_weights=False)
    torch.testing.assert_close(a, b)
    assert w.shape == (2, h, 7, 7)
    assert m.k_proj.weight.shape == (h_kv * 24 // h, 24)


def test_gqa_equals_mha_when_groups_are_full():
    mha = nn.MultiheadAttention(16, 4, batch_first=True, dtype=F64)
    plain = tl.MultiHeadAttention.from_torch(mha)
    gqa = tl.MultiHeadAttention(16, 4, n_kv_heads=4).double()
    gqa.load_state_dict(plain.state_dict())
    x = rand(3, 6, 16)
    torch.testing.assert_close(gqa(x, x, x)[0], mha(x, x, x)[0])


def test_gqa_matches_torch_enable_gqa():
    """Each query head j reads K/V head j // (h / h_kv): the same grouping as torch's
    enable_gqa."""
    q, k, v = (
        rand(2, 6, 5, 4, seed=1),
        rand(2, 2, 5, 4, seed=2),
        rand(2, 2, 5, 4, seed=3),
    )
    out, _ = tl.scaled_dot_product_attention(q, tl.repeat_kv(k, 3), tl.repeat_kv(v, 3))
    torch.testing.assert_close(
        out, F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    )


@pytest.mark.parametrize("n_rep", [1, 2, 3])
def test_repeat_kv_is_repeat_interleave(n_rep):
    k = rand(2, 3, 4, 5)
    r = tl.repeat_kv(k, n_rep)
    assert torch.equal(r, k.repeat_interleave(n_rep, dim=1))
    if n_rep > 1:
        assert not torch.equal(r, k.repeat(1, n_rep, 1, 1))
        for j in range(3 * n_rep):
            assert torch.equal(r[:, j], k[:, j // n_rep])


def test_kv_cache_nbytes_formula():
    for h, h_kv, dtype in [
        (8, 8, torch.float32),
        (8, 2, torch.float16),
        (8, 1, torch.bfloat16),
    ]:
        m = tl.MultiHeadAttention(64, h, h_kv)
        B, T = 3, 11
        k, v = m.project_kv(torch.randn(B, T, 64), torch.randn(B, T, 64))
        k, v = k.to(dtype), v.to(dtype)
        assert (
            m.kv_cache_nbytes(B, T, dtype)
            == k.nbytes + v.nbytes
            == 2 * B * h_kv * T * (64 // h) * k.element_size()
            == tl.kv_cache_nbytes(1, B, h_kv, T, 64 // h, dtype)
        )


def test_cached_attention_step_equals_full_causal_attention():
    B, h, h_kv, T, d = 2, 4, 2, 7, 8
    q, k, v = (
        rand(B, h, T, d, seed=1),
        rand(B, h_kv, T, d, seed=2),
        rand(B, h_kv, T, d, seed=3),
    )
    pos = torch.arange(T)
    for rope in (False, True):
        qq, kk = (tl.apply_rope(q, pos), tl.apply_rope(k, pos)) if rope else (q, k)
        full, _ = tl.scaled_dot_product_attention(
            qq, tl.repeat_kv(kk, 2), tl.repeat_kv(v, 2), tl.causal_mask(T)
        )
        ck, cv, outs = k[:, :, :0], v[:, :, :0], []
        for t in range(T):
            o, ck, cv = tl.cached_attention_step(
                q[:, :, t : t + 1],
                k[:, :, t : t + 1],
                v[:, :, t : t + 1],
                ck,
                cv,
                rope=rope,
            )
            outs.append(o)
        assert ck.shape == (B, h_kv, T, d)
        torch.testing.assert_close(torch.cat(outs, dim=2), full)


# ---------------------------------------------------------------------------- LayerNorm
@pytest.mark.parametrize("shape", [(7,), (2, 5, 16), (3, 4, 6, 9)])
@pytest.mark.parametrize("eps", [1e-5, 1e-2])
def test_layer_norm_matches_torch(shape, eps):
    ref = nn.LayerNorm(shape[-1], eps=eps, dtype=F64)
    with torch.no_grad():
        ref.weight.copy_(rand(shape[-1], seed=5))
        ref.bias.copy_(rand(shape[-1], seed=6))
    ours = tl.LayerNorm(shape[-1], eps=eps).double()
    ours.load_state_dict(ref.state_dict())
    x = rand(*shape) * 3 + 2
    torch.testing.assert_close(ours(x), ref(x))
    torch.testing.assert_close(
        tl.layer_norm(x, ref.weight, ref.bias, eps),
        F.layer_norm(x, shape[-1:], ref.weight, ref.bias, eps),
    )
    # gradients agree too
    x1 = x.clone().requires_grad_()
    x2 = x.clone().requires_grad_()
    ours(x1).pow(2).sum().backward()
    ref(x2).pow(2).sum().backward()
    torch.testing.assert_close(x1.grad, x2.grad)


@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_layer_norm_stable_for_large_offset(dtype):
    x = rand(4, 32).to(dtype) + 1e4
    g, b = torch.ones(32, dtype=dtype), torch.zeros(32, dtype=dtype)
    torch.testing.assert_close(
        tl.layer_norm(x, g, b), F.layer_norm(x, (32,), g, b), atol=2e-3, rtol=1e-3
    )
    exact = F.layer_norm(x.double(), (32,), g.double(), b.double())
    assert (tl.layer_norm(x, g, b).double() - exact).abs().max() < 1e-2


def test_layer_norm_article_form():
    """(z - mu) / (sigma + eps) differs from nn.LayerNorm's
    (z - mu) / sqrt(sigma^2 + eps) only when sigma is small."""
    g, b = torch.ones(8, dtype=F64), torch.zeros(8, dtype=F64)
    x = rand(3, 8) * 5
    torch.testing.assert_close(
        tl.layer_norm_article(x, g, b), tl.layer_norm(x, g, b), atol=1e-4, rtol=1e-4
    )
    mu = x.mean(-1, keepdim=True)
    sigma = x.var(-1, unbiased=False, keepdim=True).sqrt()
    torch.testing.assert_close(
        tl.layer_norm_article(x, g, b, eps=1e-5), (x - mu) / (sigma + 1e-5)
    )
    tiny = rand(3, 8) * 1e-3  # sigma ~ 1e-3 ~ sqrt(eps): the two forms disagree visibly
    diff = (tl.layer_norm_article(tiny, g, b) - tl.layer_norm(tiny, g, b)).abs().max()
    assert diff > 1e-3


# -------------------------------------------------------------------------- FFN, layers
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_feed_forward_matches_torch_layer(activation):
    layer = nn.TransformerEncoderLayer(
        16, 4, 48, dropout=0.0, activation=activation, batch_first=True, dtype=F64
    )
    ffn = tl.FeedForward(16, 48, activation).double()
    ffn.linear1.load_state_dict(layer.linear1.state_dict())
    ffn.linear2.load_state_dict(layer.linear2.state_dict())
    x = rand(2, 5, 16)
    torch.testing.assert_close(
        ffn(x), layer.linear2(layer.activation(layer.linear1(x)))
    )
    act = F.relu if activation == "relu" else F.gelu
    torch.testing.assert_close(
        ffn(x),
        act(x @ layer.linear1.weight.T + layer.linear1.bias) @ layer.linear2.weight.T
        + layer.linear2.bias,
    )


LAYER_CASES = [(nf, act) for nf in (False, True) for act in ("relu", "gelu")]


@pytest.mark.parametrize("norm_first,activation", LAYER_CASES)
@pytest.mark.parametrize("mask_kind", ["none", "causal", "padding"])
def test_encoder_layer_matches_torch(norm_first, activation, mask_kind):
    ref = nn.TransformerEncoderLayer(
        24,
        4,
        40,
        dropout=0.0,
        activation=activation,
        norm_first=norm_first,
        batch_first=True,
        dtype=F64,
    ).eval()
    ours = tl.EncoderLayer.from_torch(ref)
    assert ours.norm_first == norm_first
    x = rand(3, 6, 24)
    lengths = torch.tensor([6, 4, 1])
    if mask_kind == "none":
        got, expected = ours(x), ref(x)
    elif mask_kind == "causal":
        got, expected = ours(x, tl.causal_mask(6)), ref(x, src_mask=~tl.causal_mask(6))
    else:
        m = tl.padding_mask(lengths, 6)
        got, expected = ours(x, m), ref(x, src_key_padding_mask=~m[:, 0, 0])
    torch.testing.assert_close(
        got, expected, atol=1e-12, rtol=1e-12
    )  # float64 end to end, no float32 round trip


@pytest.mark.parametrize("norm_first,activation", LAYER_CASES)
def test_decoder_layer_matches_torch(norm_first, activation):
    ref = nn.TransformerDecoderLayer(
        24,
        4,
        40,
        dropout=0.0,
        activation=activation,
        norm_first=norm_first,
        batch_first=True,
        dtype=F64,
    ).eval()
    ours = tl.DecoderLayer.from_torch(ref)
    y, memory = rand(3, 5, 24, seed=1), rand(3, 7, 24, seed=2)
    src_pad = tl.padding_mask([7, 5, 2], 7)
    got = ours(y, memory, tl.causal_mask(5), src_pad)
    expected = ref(
        y,
        memory,
        tgt_mask=~tl.causal_mask(5),
        memory_key_padding_mask=~src_pad[:, 0, 0],
    )
    torch.testing.assert_close(got, expected, atol=1e-12, rtol=1e-12)
    # with the weights returned, the output is the same and the maps have the documented
    # shapes
    got2, w_self, w_cross = ours(
        y, memory, tl.causal_mask(5), src_pad, need_weights=True
    )
    torch.testing.assert_close(got2, got)
    assert w_self.shape == (3, 4, 5, 5) and w_cross.shape == (3, 4, 5, 7)
    assert torch.equal(
        w_self[..., ~tl.causal_mask(5)],
        torch.zeros_like(w_self[..., ~tl.causal_mask(5)]),
    )


def test_encoder_stack_matches_torch_encoder():
    ref_layer = nn.TransformerEncoderLayer(
        16, 2, 32, dropout=0.0, batch_first=True, dtype=F64
    )
    stack = nn.TransformerEncoder(
        ref_layer, num_layers=3, enable_nested_tensor=False
    ).eval()
    ours = [tl.EncoderLayer.from_torch(layer) for layer in stack.layers]
    x = rand(2, 5, 16)
    y = x
    for layer in ours:
        y = layer(y)
    torch.testing.assert_close(y, stack(x))


# ------------------------------------------- the layers' own wiring: trace, cached step
def torch_layers(norm_first: bool):
    """A float64 PyTorch encoder and decoder layer and ours with their weights."""
    kw = dict(dropout=0.0, norm_first=norm_first, batch_first=True, dtype=F64)
    torch.manual_seed(11)
    enc = nn.TransformerEncoderLayer(24, 4, 40, **kw).eval()
    dec = nn.TransformerDecoderLayer(24, 4, 40, **kw).eval()
    return enc, tl.EncoderLayer.from_torch(enc), dec, tl.DecoderLayer.from_torch(dec)


def rewired_encoder(layer: tl.EncoderLayer, x, mask) -> dict:
    """Chapter 9's tensors, wired by hand from the layer's submodules."""
    attn, ln1, ln2 = layer.self_attn, layer.self_attn_block.norm, layer.ffn_block.norm
    if layer.norm_first:  # Pre-LN: the sums are not normalised
        z_attn, w = attn(ln1(x), ln1(x), ln1(x), mask, need_weights=True)
        z1 = x + z_attn
        z_ffn = layer.ffn(ln2(z1))
        out = z1 + z_ffn
    else:
        z_attn, w = attn(x, x, x, mask, need_weights=True)
        z1 = ln1(x + z_attn)
        z_ffn = layer.ffn(z1)
        out = ln2(z1 + z_ffn)
    names = ["X_pos", "Z_attn", "Z_add_norm_1", "Z_ffn", "Z_encoder_output"]
    return dict(zip(names, [x, z_attn, z1, z_ffn, out], strict=True), weights=w)


def rewired_decoder(layer: tl.DecoderLayer, y, memory, self_mask, cross_mask) -> dict:
    """Chapter 10's tensors, wired by hand from the layer's submodules."""
    ln1, ln2 = layer.self_attn_block.norm, layer.cross_attn_block.norm
    ln3 = layer.ffn_block.norm
    if layer.norm_first:
        a = ln1(y)
        z_masked, w_self = layer.self_attn(a, a, a, self_mask, need_weights=True)
        z2 = y + z_masked
        z_cross, w_cross = layer.cross_attn(
            ln2(z2), memory, memory, cross_mask, need_weights=True
        )
        z3 = z2 + z_cross
        z_ffn = layer.ffn(ln3(z3))
        out = z3 + z_ffn
    else:
        z_masked, w_self = layer.self_attn(y, y, y, self_mask, need_weights=True)
        z2 = ln1(y + z_masked)
        z_cross, w_cross = layer.cross_attn(
            z2, memory, memory, cross_mask, need_weights=True
        )
        z3 = ln2(z2 + z_cross)
        z_ffn = layer.ffn(z3)
        out = ln3(z3 + z_ffn)
    return {
        "Y_pos": y,
        "Z_encoder_output": memory,
        "Z_masked_attn": z_masked,
        "self_weights": w_self,
        "Z_add_norm_2": z2,
        "Z_cross_attn": z_cross,
        "cross_weights": w_cross,
        "Z_add_norm_3": z3,
        "Z_ffn_decoder": z_ffn,
        "Z_decoder_output": out,
    }


def heads_of(mha, a: dict, weights: torch.Tensor, z: torch.Tensor) -> None:
    """An attention's trace (MultiHeadAttention.attend's): its q, k, v, mask give its
    weights by the formula, its heads' outputs are weights @ v, and Concat, W_O of them
    is the sublayer's output z."""
    s = a["q"] @ a["k"].transpose(-2, -1) / math.sqrt(a["q"].size(-1))
    if a["mask"] is not None:
        s = s.masked_fill(~a["mask"], float("-inf"))
    torch.testing.assert_close(a["weights"], weights, atol=1e-14, rtol=0)
    torch.testing.assert_close(torch.softmax(s, -1), weights, atol=1e-14, rtol=0)
    torch.testing.assert_close(a["heads"], weights @ a["v"], atol=1e-14, rtol=0)
    torch.testing.assert_close(mha.o_proj(tl.merge_heads(a["heads"])), z)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-ln", "pre-ln"])
def test_encoder_trace_is_the_chapter_9_chain(norm_first):
    ref, layer, _, _ = torch_layers(norm_first)
    x, mask = rand(3, 6, 24, seed=4), tl.padding_mask([6, 4, 1], 6)
    trace = {}
    out = layer(x, mask, trace=trace)
    want = rewired_encoder(layer, x, mask)
    heads_of(layer.self_attn, trace.pop("self_attn"), want["weights"], want["Z_attn"])
    assert set(trace) == set(want)
    for name, tensor in want.items():
        torch.testing.assert_close(trace[name], tensor, atol=1e-14, rtol=0)
    # the trace does not change the output: the path that returns weights, bit for bit,
    # the default (fused) path to rounding, and PyTorch's layer
    assert torch.equal(out, layer(x, mask, need_weights=True)[0])
    torch.testing.assert_close(out, layer(x, mask), atol=1e-12, rtol=0)
    expected = ref(x, src_key_padding_mask=~mask[:, 0, 0])
    torch.testing.assert_close(out, expected, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-ln", "pre-ln"])
def test_decoder_trace_is_the_chapter_10_chain(norm_first):
    _, _, ref, layer = torch_layers(norm_first)
    y, memory = rand(3, 5, 24, seed=1), rand(3, 7, 24, seed=2)
    causal, pad = tl.causal_mask(5), tl.padding_mask([7, 5, 2], 7)
    trace = {}
    out = layer(y, memory, causal, pad, trace=trace)
    want = rewired_decoder(layer, y, memory, causal, pad)
    a, c = trace.pop("self_attn"), trace.pop("cross_attn")
    heads_of(layer.self_attn, a, want["self_weights"], want["Z_masked_attn"])
    heads_of(layer.cross_attn, c, want["cross_weights"], want["Z_cross_attn"])
    assert set(trace) == set(want)
    for name, tensor in want.items():
        torch.testing.assert_close(trace[name], tensor, atol=1e-14, rtol=0)
    assert torch.equal(out, layer(y, memory, causal, pad, need_weights=True)[0])
    torch.testing.assert_close(out, layer(y, memory, causal, pad), atol=1e-12, rtol=0)
    expected = ref(y, memory, tgt_mask=~causal, memory_key_padding_mask=~pad[:, 0, 0])
    torch.testing.assert_close(out, expected, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-ln", "pre-ln"])
@pytest.mark.parametrize("n_kv_heads", [4, 2, 1], ids=["mha", "gqa", "mqa"])
def test_decoder_cached_step_is_forward_one_position_at_a_time(norm_first, n_kv_heads):
    """The layer with its cache slot, fed the positions one by one (then three at once),
    gives what forward gives for the whole causal sequence (eq. kv-append, kv-step)."""
    torch.manual_seed(3)
    layer = tl.DecoderLayer(24, 4, 40, norm_first, n_kv_heads=n_kv_heads)
    layer = layer.double().eval()
    y, memory = rand(2, 7, 24, seed=5), rand(2, 6, 24, seed=6)
    pad = tl.padding_mask([6, 3], 6)
    want = layer(y, memory, tl.causal_mask(7), pad)
    for capacity in (None, 7):
        cache = tl.KVCache(1, 2, n_kv_heads, 6, capacity, dtype=F64)
        slot = cache.slot(0)
        layer.cache_memory_kv(memory, slot)
        steps = [layer(y[:, t : t + 1], None, None, pad, cache=slot) for t in range(4)]
        # three new positions at once: the past, and their own causal triangle
        steps.append(layer(y[:, 4:], None, tl.causal_mask(3, 7), pad, cache=slot))
        assert cache.length == 7
        got = torch.cat(steps, dim=1)
        torch.testing.assert_close(got, want, atol=1e-12, rtol=0)
    # its trace holds the decoder's names for the new position
    cache = tl.KVCache(1, 2, n_kv_heads, 6, dtype=F64)
    layer.cache_memory_kv(memory, cache.slot(0))
    trace = {}
    layer(y[:, :1], None, None, pad, cache=cache.slot(0), trace=trace)
    assert set(trace) == set(rewired_decoder(layer, y, memory, None, pad)) - {
        "Z_encoder_output"
    } | {"self_attn", "cross_attn"}
    assert trace["cross_weights"].shape == (2, 4, 1, 6)
    assert trace["cross_attn"]["k"].shape == (2, 4, 6, 6)  # the cached K, h heads


def test_layers_have_no_old_sublayer_names():
    enc, dec = tl.EncoderLayer(8, 2, 16), tl.DecoderLayer(8, 2, 16)
    for layer in (enc, dec):
        assert not any(hasattr(layer, f"sub{i}") for i in (1, 2, 3))
        assert not layer._load_state_dict_pre_hooks
    assert not any(".sub" in k or k.startswith("sub") for k in dec.state_dict())


# ----------------------------------------------------------------- positional encodings
@pytest.mark.parametrize("T,d", [(1, 4), (10, 8), (50, 16), (7, 5)])
def test_sinusoidal_pe_formula(T, d):
    pe = tl.sinusoidal_positional_encoding(T, d, dtype=F64)
    assert pe.shape == (T, d)
    for pos in range(T):
        for j in range(d):
            i2 = j - j % 2  # the even index 2i of this pair
            angle = pos / 10000 ** (i2 / d)
            expected = math.sin(angle) if j % 2 == 0 else math.cos(angle)
            assert abs(pe[pos, j].item() - expected) < 1e-12


@settings(max_examples=25, deadline=None)
@given(k=st.integers(0, 40), d_half=st.integers(1, 16))
def test_pe_shift_is_rotation(k, d_half):
    """PE(pos + k) = M_k PE(pos) with M_k block-diagonal rotations that do not depend on
    pos."""
    d = 2 * d_half
    pe = tl.sinusoidal_positional_encoding(80, d, dtype=F64)
    w = 1.0 / 10000 ** (torch.arange(0, d, 2, dtype=F64) / d)
    M = torch.zeros(d, d, dtype=F64)
    for i, wi in enumerate(w):
        c, s = math.cos(k * wi), math.sin(k * wi)
        M[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor(
            [[c, s], [-s, c]], dtype=F64
        )
    torch.testing.assert_close(pe[: 80 - k] @ M.T, pe[k:])
    torch.testing.assert_close(M @ M.T, torch.eye(d, dtype=F64))


@settings(max_examples=25, deadline=None)
@given(d_half=st.integers(1, 12), seed=st.integers(0, 2**16))
def test_rope_keeps_norm(d_half, seed):
    x = rand(2, 9, 2 * d_half, seed=seed)
    y = tl.apply_rope(x, torch.arange(9))
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1))
    torch.testing.assert_close(tl.apply_rope(x, torch.zeros(9, dtype=torch.long)), x)


@settings(max_examples=25, deadline=None)
@given(
    m=st.integers(0, 200),
    n=st.integers(0, 200),
    shift=st.integers(0, 500),
    seed=st.integers(0, 2**16),
)
def test_rope_relative(m, n, shift, seed):
    q, k = rand(1, 1, 16, seed=seed), rand(1, 1, 16, seed=seed + 1)

    def score(a: int, b: int) -> torch.Tensor:
        qa, kb = (
            tl.apply_rope(q, torch.tensor([a])),
            tl.apply_rope(k, torch.tensor([b])),
        )
        return (qa * kb).sum()

    torch.testing.assert_close(score(m, n), score(m + shift, n + shift))


def test_rope_matches_complex_rotation():
    x = rand(2, 6, 8)
    pos = torch.arange(6)
    theta = pos[:, None].double() * 10000 ** (-torch.arange(0, 8, 2, dtype=F64) / 8)
    z = torch.view_as_complex(x.view(2, 6, 4, 2).contiguous()) * torch.polar(
        torch.ones_like(theta), theta
    )
    torch.testing.assert_close(tl.apply_rope(x, pos), torch.view_as_real(z).flatten(-2))


# ---------------------------------------------------------------------------- bad input
def test_d_model_not_divisible_names_both_numbers():
    with pytest.raises(ValueError, match=r"d_model=10.*n_heads=3"):
        tl.MultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match=r"n_heads=4.*n_kv_heads=3"):
        tl.MultiHeadAttention(16, 4, n_kv_heads=3)


def test_qk_feature_mismatch_names_shapes():
    with pytest.raises(ValueError, match=r"\(2, 5, 8\).*\(2, 6, 7\)"):
        tl.scaled_dot_product_attention(rand(2, 5, 8), rand(2, 6, 7), rand(2, 6, 7))
    with pytest.raises(ValueError, match=r"\(2, 6, 8\).*\(2, 5, 8\)"):
        tl.scaled_dot_product_attention(rand(2, 5, 8), rand(2, 6, 8), rand(2, 5, 8))


def test_mask_that_cannot_broadcast_names_shapes():
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(2, 5, 6\)"):
        tl.scaled_dot_product_attention(
            rand(2, 5, 8),
            rand(2, 6, 8),
            rand(2, 6, 8),
            torch.ones(3, 4, dtype=torch.bool),
        )
    # a mask that would broadcast the scores to a *bigger* shape is refused too (no
    # silent batch blow-up)
    with pytest.raises(ValueError, match=r"\(4, 5, 6\).*\(2, 5, 6\)"):
        tl.scaled_dot_product_attention(
            rand(2, 5, 8),
            rand(2, 6, 8),
            rand(2, 6, 8),
            torch.ones(4, 5, 6, dtype=torch.bool),
        )
    m = tl.MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"\(5, 5\).*\(2, 2, 4, 4\)"):
        m(
            torch.randn(2, 4, 8),
            torch.randn(2, 4, 8),
            torch.randn(2, 4, 8),
            torch.ones(5, 5, dtype=torch.bool),
            need_weights=False,
        )


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.uint8])
def test_non_bool_mask_is_refused_with_advice(dtype):
    with pytest.raises(TypeError, match=r"bool.*True = may attend"):
        tl.scaled_dot_product_attention(
            rand(5, 8), rand(5, 8), rand(5, 8), torch.ones(5, 5, dtype=dtype)
        )


def test_other_bad_inputs_are_named():
    with pytest.raises(ValueError, match=r"d_model=8.*\(2, 4, 6\)"):
        tl.MultiHeadAttention(8, 2)(
            torch.randn(2, 4, 6), torch.randn(2, 4, 6), torch.randn(2, 4, 6)
        )
    with pytest.raises(ValueError, match="d must be even"):
        tl.apply_rope(torch.randn(3, 5), torch.arange(3))
    with pytest.raises(ValueError, match=r"length.*T=5.*\[3, 9\]"):
        tl.padding_mask([3, 9], 5)
    with pytest.raises(ValueError, match=r"gamma \(5,\)"):
        tl.layer_norm(torch.randn(2, 4), torch.ones(5), torch.zeros(4))
    with pytest.raises(ValueError, match="activation"):
        tl.FeedForward(8, 16, activation="swish")


# ------------------------------------------------------------------------------ hygiene
@pytest.mark.slow  # a Python process: not in make test-fast
def test_quiet_import():
    code = (
        "import sys, torch\n"
        "def state():\n"
        "    return (torch.get_default_dtype(), torch.get_num_threads(),\n"
        "            torch.are_deterministic_algorithms_enabled(),\n"
        "            torch.is_grad_enabled(), torch.random.initial_seed())\n"
        "before = state()\n"
        "import transformer_lib\n"
        "after = state()\n"
        "assert before == after, (before, after)\n"
        "assert 'matplotlib' not in sys.modules and 'ipywidgets' not in sys.modules\n"
    )
    r = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "" and r.stderr == ""
