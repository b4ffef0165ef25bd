"""The online softmax and tiled (FlashAttention) attention of chapter 13, against
PyTorch's built-ins: ``torch.softmax``, ``torch.logsumexp``,
``F.scaled_dot_product_attention`` and autograd; float64 at 1e-10, half precision
within its rounding. Also: which tiles are computed, that no tensor of the size of the
score matrix is ever allocated, the traffic count of eq. io-flash, and the errors.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import transformer_lib as tl
from transformer_lib import flash, measure

F64 = torch.float64
TIGHT = dict(atol=1e-10, rtol=1e-10)
NEG_INF = float("-inf")


def rand(*shape, dtype=F64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype)


def qkv(B, h, T_q, T_k, d_k, d_v, dtype=F64, seed=0, scale=1.0):
    return (
        rand(B, h, T_q, d_k, dtype=dtype, seed=seed) * scale,
        rand(B, h, T_k, d_k, dtype=dtype, seed=seed + 1) * scale,
        rand(B, h, T_k, d_v, dtype=dtype, seed=seed + 2),
    )


def torch_reference(q, k, v, mask=None):
    """F.scaled_dot_product_attention with the library's convention for rows that may
    attend to nothing (zeros; the math backend would give NaN)."""
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    if mask is not None:
        out = out.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return out


def masks(B, T_q, T_k, seed=0):
    """name -> bool mask (True = may attend) broadcastable to (B, h, T_q, T_k)."""
    g = torch.Generator().manual_seed(seed)
    lengths = [T_k, max(1, T_k // 2)][:B] + [T_k] * max(0, B - 2)
    pad = tl.padding_mask(lengths, T_k)  # (B, 1, 1, T_k)
    random = torch.rand(B, 1, T_q, T_k, generator=g) < 0.6
    dead_row = torch.ones(T_q, T_k, dtype=torch.bool)
    dead_row[T_q // 2] = False  # one query may attend to nothing
    return {
        "none": None,
        "causal": tl.causal_mask(T_q, T_k),
        "padding": pad,
        "causal+padding": tl.causal_mask(T_q, T_k) & pad,
        "random": random,
        "fully masked row": dead_row,
    }


# ------------------------------------------------------------------- the online softmax
@pytest.mark.parametrize("block_size", [1, 3, 8, 64, 1000])
@pytest.mark.parametrize("shape,dim", [((9,), -1), ((4, 13), -1), ((3, 10, 2), 1)])
def test_online_softmax_matches_torch(shape, dim, block_size):
    x = rand(*shape, seed=len(shape)) * 4
    y = flash.online_softmax(x, dim=dim, block_size=block_size)
    torch.testing.assert_close(y, torch.softmax(x, dim=dim), **TIGHT)


def test_online_softmax_edge_cases_match_tl_softmax():
    inf = float("inf")
    x = torch.tensor(
        [
            [1e4, 9999.0, 0.0, -1e4, 5.0],  # +-1e4: no overflow
            [-1e4, -9998.0, -1e4, -9999.5, -1e4],  # all very negative: no 0/0
            [-inf, 2.0, -inf, 1.0, -inf],  # masked entries
            [-inf, -inf, -inf, -inf, -inf],  # a fully masked row: zeros
        ]
    )
    for block_size in (1, 2, 5):
        y = flash.online_softmax(x, block_size=block_size)
        assert torch.isfinite(y).all()
        torch.testing.assert_close(y, tl.softmax(x))
        torch.testing.assert_close(y[:3], torch.softmax(x[:3], dim=-1))
        assert torch.equal(y[3], torch.zeros(5))


@pytest.mark.parametrize("upstream", [1.0, 10.0, 1e30])
def test_online_softmax_backward_of_an_all_masked_row_is_zero(upstream):
    inf = float("-inf")
    x = rand(3, 6, seed=8).float()
    x[1] = inf
    x[2, 3:] = inf
    x.requires_grad_()
    g = rand(3, 6, seed=9).float() * upstream
    for block_size in (1, 4, 6):
        (grad,) = torch.autograd.grad(
            flash.online_softmax(x, block_size=block_size), x, g
        )
        assert torch.isfinite(grad).all()
        assert torch.equal(grad[1], torch.zeros(6))
        (expected,) = torch.autograd.grad(tl.softmax(x), x, g)
        torch.testing.assert_close(grad, expected, rtol=1e-5, atol=1e-5 * upstream)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_online_softmax_low_precision(dtype):
    x = (rand(6, 40) * 5).to(dtype)
    y = flash.online_softmax(x, block_size=7)
    assert y.dtype == dtype
    torch.testing.assert_close(y, torch.softmax(x.float(), dim=-1).to(dtype))


def test_online_softmax_invariant():
    """eq. online-softmax: after block j, m_j is the max of everything seen and
    l_j = sum over everything seen of e^{x_i - m_j}, by induction on j."""
    x = rand(3, 23) * 6
    m = torch.full((3,), NEG_INF, dtype=F64)
    ell = torch.zeros(3, dtype=F64)
    for j0 in range(0, 23, 4):  # blocks of 4, the last one of 3
        j1 = min(j0 + 4, 23)
        m, ell = flash.online_softmax_step(m, ell, x[:, j0:j1])
        seen = x[:, :j1]
        assert torch.equal(m, seen.amax(dim=-1))
        torch.testing.assert_close(
            ell, torch.exp(seen - m.unsqueeze(-1)).sum(dim=-1), **TIGHT
        )
        torch.testing.assert_close(
            m + torch.log(ell), torch.logsumexp(seen, -1), **TIGHT
        )
    _, m2, l2 = flash.online_softmax(x, block_size=4, return_stats=True)
    torch.testing.assert_close((m2, l2), (m, ell), **TIGHT)


@settings(max_examples=40, deadline=None)
@given(
    cuts=st.lists(st.integers(1, 29), max_size=8, unique=True),
    seed=st.integers(0, 2**16),
)
def test_online_softmax_any_split_gives_the_softmax(cuts, seed):
    x = rand(2, 30, seed=seed) * 8
    edges = [0, *sorted(cuts), 30]
    m = torch.full((2,), NEG_INF, dtype=F64)
    ell = torch.zeros(2, dtype=F64)
    for j0, j1 in zip(edges[:-1], edges[1:], strict=True):
        m, ell = flash.online_softmax_step(m, ell, x[:, j0:j1])
    weights = torch.exp(x - m.unsqueeze(-1)) / ell.unsqueeze(-1)
    torch.testing.assert_close(weights, torch.softmax(x, dim=-1), **TIGHT)


# ------------------------------------------------------------------- tiled attention
SHAPES = [  # B, h, T_q, T_k, d_k, d_v
    (2, 3, 7, 7, 8, 8),
    (1, 2, 5, 11, 4, 6),  # T_q < T_k, d_v != d_k
    (2, 1, 12, 5, 8, 8),  # T_q > T_k: causal leaves the first queries with no key
    (1, 4, 33, 33, 16, 16),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("blocks", [(1, 1), (3, 2), (4, 5), (64, 64), (100, 7)])
def test_tiled_attention_matches_torch(shape, blocks):
    B, h, T_q, T_k, d_k, d_v = shape
    q, k, v = qkv(*shape)
    for name, mask in masks(B, T_q, T_k).items():
        out = tl.tiled_attention(q, k, v, mask, *blocks)
        ref, _ = tl.scaled_dot_product_attention(q, k, v, mask)
        torch.testing.assert_close(out, ref, **TIGHT, msg=name)
        torch.testing.assert_close(out, torch_reference(q, k, v, mask), **TIGHT)
        assert out.shape == ref.shape and out.dtype == ref.dtype


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("blocks", [(1, 1), (3, 2), (64, 64)])
def test_causal_flag_is_the_library_causal_mask(shape, blocks):
    """causal=True is tl.causal_mask (aligned to the end), not F's is_causal (aligned
    to the top-left when T_q != T_k); combined with a mask by AND."""
    B, h, T_q, T_k, d_k, d_v = shape
    q, k, v = qkv(*shape, seed=5)
    causal = tl.causal_mask(T_q, T_k)
    out = tl.tiled_attention(q, k, v, None, *blocks, causal=True)
    torch.testing.assert_close(out, torch_reference(q, k, v, causal), **TIGHT)
    pad = masks(B, T_q, T_k)["padding"]
    out = tl.tiled_attention(q, k, v, pad, *blocks, causal=True)
    torch.testing.assert_close(out, torch_reference(q, k, v, causal & pad), **TIGHT)
    if T_q == T_k:  # where the two alignments agree
        out = tl.tiled_attention(q, k, v, None, *blocks, causal=True)
        top_left = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        torch.testing.assert_close(out, top_left, **TIGHT)


def test_fully_masked_rows_give_zeros():
    q, k, v = qkv(1, 2, 6, 9, 4, 4)
    mask = torch.ones(6, 9, dtype=torch.bool)
    mask[2] = False
    for blocks in [(1, 1), (2, 4), (8, 16)]:
        out, lse = tl.tiled_attention(q, k, v, mask, *blocks, return_lse=True)
        assert torch.isfinite(out).all()
        assert torch.equal(out[..., 2, :], torch.zeros(1, 2, 4, dtype=F64))
        assert torch.isneginf(lse[..., 2]).all() and torch.isfinite(lse[..., :2]).all()
    # T_q > T_k with the causal mask: queries 0..2 of 7 see none of the 4 keys
    q, k, v = qkv(1, 1, 7, 4, 4, 4)
    out = tl.tiled_attention(q, k, v, None, 2, 2, causal=True)
    assert torch.equal(out[..., :3, :], torch.zeros(1, 1, 3, 4, dtype=F64))
    torch.testing.assert_close(
        out, torch_reference(q, k, v, tl.causal_mask(7, 4)), **TIGHT
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_half_precision_is_accumulated_in_float32(dtype, causal):
    q, k, v = (t.to(dtype) for t in qkv(2, 4, 40, 40, 16, 16, dtype=torch.float32))
    out = tl.tiled_attention(q, k, v, None, 16, 8, causal=causal)
    assert out.dtype == dtype and torch.isfinite(out).all()
    mask = tl.causal_mask(40) if causal else None
    exact = torch_reference(q.double(), k.double(), v.double(), mask)
    ours = (out.double() - exact).abs().max()
    torchs = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).double() - exact
    # no worse than PyTorch's own half-precision kernel, up to one output rounding
    ulp = 2.0 ** (-10 if dtype == torch.float16 else -7)
    assert ours <= torchs.abs().max() + ulp, (ours, torchs.abs().max())
    torch.testing.assert_close(out.double(), exact, atol=2 * ulp, rtol=2 * ulp)


@pytest.mark.parametrize("big", [1e4, -1e4])
def test_huge_scores_stay_finite(big):
    """Scores of +-1e4: e^{1e4} overflows every float type, the running max keeps every
    exponent <= 0."""
    q, k, v = qkv(1, 2, 9, 17, 4, 4)
    q = q / q.norm(dim=-1, keepdim=True)
    k = k / k.norm(dim=-1, keepdim=True) * big * 2  # scores q.k/sqrt(4) up to |1e4|
    scores = tl.attention_scores(q, k)
    assert scores.abs().max() > 0.5 * abs(big)
    for dtype in (torch.float32, F64):
        out = tl.tiled_attention(q.to(dtype), k.to(dtype), v.to(dtype), None, 4, 3)
        assert torch.isfinite(out).all()
        ref = torch_reference(q, k, v)
        torch.testing.assert_close(out.double(), ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("blocks", [(1, 1), (3, 4), (64, 64)])
def test_lse_is_logsumexp_of_masked_scaled_scores(blocks):
    """eq. lse: L = m + log ell = log sum_j exp(S_ij), S masked (-inf) and scaled."""
    q, k, v = qkv(2, 3, 10, 13, 8, 8)
    for name, mask in masks(2, 10, 13).items():
        _, lse = tl.tiled_attention(q, k, v, mask, *blocks, return_lse=True)
        s = tl.attention_scores(q, k)
        if mask is not None:
            s = s.masked_fill(~mask, NEG_INF)
        torch.testing.assert_close(lse, torch.logsumexp(s, dim=-1), **TIGHT, msg=name)
    _, lse = tl.tiled_attention(q, k, v, None, *blocks, causal=True, return_lse=True)
    s = tl.attention_scores(q, k).masked_fill(~tl.causal_mask(10, 13), NEG_INF)
    torch.testing.assert_close(lse, torch.logsumexp(s, dim=-1), **TIGHT)


@settings(max_examples=40, deadline=None)
@given(
    cuts=st.lists(st.integers(1, 23), max_size=10, unique=True),
    T_q=st.integers(1, 6),
    seed=st.integers(0, 2**16),
)
def test_any_split_of_the_keys_gives_the_same_attention(cuts, T_q, seed):
    """eq. flash-update, flash-output: for every split of the 24 keys into blocks, in
    order, the running (m, ell, o) ends at exact attention."""
    q, k, v = qkv(2, 2, T_q, 24, 4, 3, seed=seed)
    mask = (
        torch.rand(2, 1, T_q, 24, generator=torch.Generator().manual_seed(seed)) < 0.7
    )
    s = tl.attention_scores(q, k).masked_fill(~mask, NEG_INF)  # (2, 2, T_q, 24)
    edges = [0, *sorted(cuts), 24]
    m = torch.full((2, 2, T_q), NEG_INF, dtype=F64)
    ell = torch.zeros_like(m)
    o = torch.zeros(2, 2, T_q, 3, dtype=F64)
    for j0, j1 in zip(edges[:-1], edges[1:], strict=True):
        m, ell, o = flash.online_attention_step(
            m, ell, o, s[..., j0:j1], v[..., j0:j1, :]
        )
    out = o / ell.clamp_min(torch.finfo(F64).tiny).unsqueeze(-1)
    torch.testing.assert_close(out, torch_reference(q, k, v, mask), **TIGHT)


@settings(max_examples=30, deadline=None)
@given(
    block_q=st.integers(1, 20),
    block_k=st.integers(1, 20),
    T_q=st.integers(1, 17),
    T_k=st.integers(1, 17),
    causal=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_any_block_sizes_give_the_same_attention(
    block_q, block_k, T_q, T_k, causal, seed
):
    q, k, v = qkv(1, 2, T_q, T_k, 4, 5, seed=seed)
    out = tl.tiled_attention(q, k, v, None, block_q, block_k, causal=causal)
    mask = tl.causal_mask(T_q, T_k) if causal else None
    torch.testing.assert_close(out, torch_reference(q, k, v, mask), **TIGHT)


# --------------------------------------------------------- which tiles, how much memory
class _CountScoreTiles(TorchFunctionMode):
    """Records (rows, inner, cols) of every matrix product; a score tile is the one
    whose inner size is d_k."""

    def __init__(self):
        super().__init__()
        self.shapes = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in (torch.Tensor.matmul, torch.Tensor.__matmul__, torch.matmul):
            self.shapes.append((args[0].size(-2), args[0].size(-1), args[1].size(-1)))
        return func(*args, **(kwargs or {}))

    def score_tiles(self, d_k: int) -> int:
        return sum(inner == d_k for _, inner, _ in self.shapes)


@pytest.mark.parametrize("T,block", [(64, 16), (100, 16), (37, 8)])
def test_causal_tiles_that_the_mask_fills_are_skipped(T, block):
    d_k = 6  # no block (or last, partial block) is 6 keys wide: score tiles are the
    # products over d_k
    q, k, v = qkv(1, 2, T, T, d_k, 7)
    plan = flash.attention_tiles(T, T, block, block, causal=True)
    full = flash.attention_tiles(T, T, block, block)
    n = math.ceil(T / block)
    assert len(full) == n * n and len(plan) == n * (n + 1) // 2
    with _CountScoreTiles() as counter:
        tl.tiled_attention(q, k, v, None, block, block, causal=True)
    assert counter.score_tiles(d_k) == len(plan)
    with _CountScoreTiles() as counter:  # the same mask passed as a tensor
        tl.tiled_attention(q, k, v, tl.causal_mask(T), block, block)
    assert counter.score_tiles(d_k) == len(plan)
    with _CountScoreTiles() as counter:  # nothing skipped without a mask
        tl.tiled_attention(q, k, v, None, block, block)
    assert counter.score_tiles(d_k) == len(full)
    # a padding mask: key blocks that no sequence of the batch may see are skipped too
    with _CountScoreTiles() as counter:
        tl.tiled_attention(q, k, v, tl.padding_mask([block], T), block, block)
    assert counter.score_tiles(d_k) == n


class _LargestAllocation(TorchDispatchMode):
    """The bytes of the largest tensor any operation allocates (views of existing
    tensors, such as an expanded mask, allocate nothing and are not counted)."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor) and not t._is_view():
                self.largest = max(self.largest, t.untyped_storage().nbytes())
        return out


def test_no_tensor_as_large_as_the_score_matrix_is_allocated():
    B, h, T, d, b = 2, 4, 96, 8, 16
    q, k, v = qkv(B, h, T, T, d, d, dtype=torch.float32)
    pad = tl.padding_mask([T, T // 2], T)
    with _LargestAllocation() as spy:
        out = tl.tiled_attention(q, k, v, pad, b, b, causal=True)
    tile = B * h * b * b * 4  # one (b_q, b_k) float32 tile per head
    assert spy.largest <= max(out.nbytes, tile), spy.largest
    assert spy.largest < B * h * T * T * 4 / 8
    with _LargestAllocation() as spy:  # the explicit path does allocate them
        tl.scaled_dot_product_attention(q, k, v, pad)
    assert spy.largest >= B * h * T * T * 4


def test_measured_peak_memory_grows_linearly_for_tiles_quadratically_for_scores():
    """peak_allocated_bytes (the profiler's allocator events): doubling T quadruples
    the explicit path's peak, while the tiled path holds its output plus a working set
    of tiles that does not grow with T."""
    explicit, working_set = {}, {}
    for T in (256, 512):
        q, k, v = qkv(1, 4, T, T, 32, 32, dtype=torch.float32)
        out_bytes = 4 * T * 32 * 4
        scores = 4 * T * T * 4
        explicit[T] = measure.peak_allocated_bytes(
            tl.scaled_dot_product_attention, q, k, v
        )
        tiled = measure.peak_allocated_bytes(tl.tiled_attention, q, k, v)
        working_set[T] = tiled - out_bytes
        assert explicit[T] >= 2 * scores  # scores and weights (and more) at once
        tile = 4 * 64 * 64 * 4  # one float32 tile per head, default blocks
        assert tile <= working_set[T] <= 8 * tile
    assert 3.5 < explicit[512] / explicit[256] < 4.5
    assert abs(working_set[512] / working_set[256] - 1) < 0.1


def test_hbm_traffic_counts():
    """eq. io-standard and io-flash: the closed forms, and the ratio 2 b_q / d."""
    N, d = 1024, 64
    assert tl.hbm_traffic(N, N, d, d) == 4 * N * N + 4 * N * d
    for b_q in (16, 64, 128):
        tiled = tl.hbm_traffic(N, N, d, d, b_q, 64)
        assert tiled == N * (2 * d + 1) + (N // b_q) * N * 2 * d
        ratio = tl.hbm_traffic(N, N, d, d) / tiled
        assert abs(ratio - 2 * b_q / d) / (2 * b_q / d) < 0.1
    # causal skipping about halves the traffic of the key/value reads
    causal = tl.hbm_traffic(N, N, d, d, 64, 64, causal=True)
    reads = tl.hbm_traffic(N, N, d, d, 64, 64) - N * (2 * d + 1)
    assert causal - N * (2 * d + 1) == reads * (N // 64 + 1) // (2 * (N // 64))


# ------------------------------------------------------------- backward, flash decoding
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("blocks", [(1, 2), (4, 3), (64, 64)])
def test_backward_from_lse_matches_autograd(shape, blocks):
    """eq. flash-backward: gradients rebuilt tile by tile from (O, L) equal autograd's
    through F.scaled_dot_product_attention."""
    B, h, T_q, T_k, d_k, d_v = shape
    q, k, v = qkv(*shape, seed=7)
    g = rand(B, h, T_q, d_v, seed=9)
    for name in ("none", "causal", "padding", "random"):
        mask = masks(B, T_q, T_k)[name]
        out, lse = tl.tiled_attention(q, k, v, mask, *blocks, return_lse=True)
        grads = flash.tiled_attention_backward(q, k, v, out, lse, g, mask, *blocks)
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        ref = torch_reference(*leaves, mask)
        want = torch.autograd.grad(ref, leaves, g)
        for got, exp, what in zip(grads, want, "qkv", strict=True):
            torch.testing.assert_close(got, exp, **TIGHT, msg=f"d{what}, {name}")
    out, lse = tl.tiled_attention(q, k, v, None, *blocks, causal=True, return_lse=True)
    grads = flash.tiled_attention_backward(
        q, k, v, out, lse, g, None, *blocks, causal=True
    )
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    ref = torch_reference(*leaves, tl.causal_mask(T_q, T_k))
    for got, exp in zip(grads, torch.autograd.grad(ref, leaves, g), strict=True):
        torch.testing.assert_close(got, exp, **TIGHT)


@pytest.mark.parametrize("upstream", [1.0, 10.0, 1e6])
def test_autograd_through_tiled_attention_with_a_fully_masked_row(upstream):
    """Autograd through the forward loop (not the hand-written backward): the empty
    row's output is divided by 1, not by the smallest float, so a large upstream
    gradient gives no inf * 0 = NaN in dV; the other rows' gradients are PyTorch's."""
    q, k, v = (t.float().requires_grad_() for t in qkv(1, 1, 4, 5, 3, 3))
    mask = torch.ones(4, 5, dtype=torch.bool)
    mask[1] = False
    g = rand(1, 1, 4, 3, seed=3).float() * upstream
    got = torch.autograd.grad(tl.tiled_attention(q, k, v, mask, 2, 2), (q, k, v), g)
    assert all(torch.isfinite(t).all() for t in got)
    assert torch.equal(got[0][..., 1, :], torch.zeros(1, 1, 3))
    keep = [0, 2, 3]  # PyTorch's own attention, without the empty row
    ref = F.scaled_dot_product_attention(q[..., keep, :], k, v, attn_mask=mask[keep])
    expected = torch.autograd.grad(ref, (q, k, v), g[..., keep, :])
    torch.testing.assert_close(got[0][..., keep, :], expected[0][..., keep, :])
    torch.testing.assert_close(got[1], expected[1], rtol=1e-4, atol=1e-5 * upstream)
    torch.testing.assert_close(got[2], expected[2], rtol=1e-4, atol=1e-5 * upstream)


def test_backward_of_a_fully_masked_row_is_zero():
    q, k, v = qkv(1, 1, 4, 5, 3, 3)
    mask = torch.ones(4, 5, dtype=torch.bool)
    mask[1] = False
    out, lse = tl.tiled_attention(q, k, v, mask, 2, 2, return_lse=True)
    g = rand(1, 1, 4, 3, seed=3)
    dq, dk, dv = flash.tiled_attention_backward(q, k, v, out, lse, g, mask, 2, 2)
    assert all(torch.isfinite(t).all() for t in (dq, dk, dv))
    assert torch.equal(dq[..., 1, :], torch.zeros(1, 1, 3, dtype=F64))


@settings(max_examples=25, deadline=None)
@given(
    cuts=st.lists(st.integers(1, 39), max_size=6, unique=True),
    seed=st.integers(0, 2**16),
)
def test_merging_key_splits_gives_full_attention(cuts, seed):
    """eq. lse-merge: attention over any split of the keys, merged by log-sum-exp."""
    q, k, v = qkv(2, 3, 3, 40, 8, 8, seed=seed)
    mask = masks(2, 3, 40)["padding"]  # the second sequence has 20 keys: later parts
    edges = [0, *sorted(cuts), 40]  # may be entirely masked for it
    outs, lses = [], []
    for j0, j1 in zip(edges[:-1], edges[1:], strict=True):
        o, L = tl.tiled_attention(
            q,
            k[..., j0:j1, :],
            v[..., j0:j1, :],
            mask[..., j0:j1],
            4,
            4,
            return_lse=True,
        )
        outs.append(o)
        lses.append(L)
    out, lse = flash.merge_attention(outs, lses)
    torch.testing.assert_close(out, torch_reference(q, k, v, mask), **TIGHT)
    s = tl.attention_scores(q, k).masked_fill(~mask, NEG_INF)
    torch.testing.assert_close(lse, torch.logsumexp(s, dim=-1), **TIGHT)


@pytest.mark.parametrize("n_splits", [1, 3, 8, 50])
def test_split_kv_decoding_step_matches_the_kv_cache_step(n_splits):
    """One new query over a cache of 37 keys (chapter 12), keys split n_splits ways."""
    q, k, v = qkv(2, 4, 1, 37, 8, 8, seed=11)
    out = flash.split_kv_attention(q, k, v, n_splits, block_k=5)
    ref, _, _ = tl.cached_attention_step(
        q, k[..., -1:, :], v[..., -1:, :], k[..., :-1, :], v[..., :-1, :]
    )
    torch.testing.assert_close(out, ref, **TIGHT)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), **TIGHT)


def test_merge_with_no_key_anywhere_stays_zero():
    o = torch.zeros(1, 2, 3, dtype=F64)
    L = torch.full((1, 2), NEG_INF, dtype=F64)
    out, lse = flash.merge_attention([o, o], [L, L])
    assert torch.equal(out, o) and torch.isneginf(lse).all()


# ------------------------------------------------------------------------------- errors
def test_bad_block_sizes_are_refused():
    q, k, v = qkv(1, 1, 4, 4, 2, 2)
    for bad in (0, -3, 2.5, True, "8", None):
        with pytest.raises(ValueError, match="block_q must be a positive int"):
            tl.tiled_attention(q, k, v, block_q=bad)
        with pytest.raises(ValueError, match="block_k must be a positive int"):
            tl.tiled_attention(q, k, v, block_k=bad)
    with pytest.raises(ValueError, match="block_size must be a positive int, got 0"):
        tl.online_softmax(torch.zeros(3), block_size=0)


def test_mismatched_inputs_are_refused_with_their_shapes():
    q, k, v = qkv(2, 2, 4, 6, 8, 8)
    with pytest.raises(ValueError, match=r"d_k.*\(2, 2, 4, 8\).*\(2, 2, 6, 4\)"):
        tl.tiled_attention(q, k[..., :4], v)
    with pytest.raises(ValueError, match=r"T_k.*\(2, 2, 6, 8\).*\(2, 2, 5, 8\)"):
        tl.tiled_attention(q, k, v[..., :5, :])
    with pytest.raises(ValueError, match=r"batch dims.*\(2, 2, 4, 8\).*\(3, 2, 6, 8\)"):
        tl.tiled_attention(q, torch.cat([k, k[:1]]), torch.cat([v, v[:1]]))
    with pytest.raises(TypeError, match="float64, k torch.float32"):
        tl.tiled_attention(q, k.float(), v)
    with pytest.raises(TypeError, match="floating-point"):
        tl.tiled_attention(*(t.long() for t in (q, k, v)))
    with pytest.raises(TypeError, match="bool"):
        tl.tiled_attention(q, k, v, torch.ones(4, 6))
    with pytest.raises(ValueError, match=r"\(5, 6\) cannot broadcast.*\(2, 2, 4, 6\)"):
        tl.tiled_attention(q, k, v, torch.ones(5, 6, dtype=torch.bool))
    out, lse = tl.tiled_attention(q, k, v, return_lse=True)
    with pytest.raises(ValueError, match=r"output's shape \(2, 2, 4, 8\)"):
        flash.tiled_attention_backward(q, k, v, out[..., :3, :], lse, out)
    with pytest.raises(ValueError, match="one log-sum-exp per partial output"):
        flash.merge_attention([out, out], [lse])
    with pytest.raises(ValueError, match="n_splits must be a positive int"):
        flash.split_kv_attention(q, k, v, 0)


# ------------------------------------------------------- the chapter's exercise checker
# tests/test_exercises.py runs every row of the table on its own example and the
# correct answers; here, what is particular to this checker.
from transformer_lib.exercises.ch13_flash_attention import (  # noqa: E402
    _online,
    check_online_attention,
)


def test_checker_names_a_mistake_only_if_it_explains_the_earlier_inputs_too():
    """Starting m at 0 and having no max at all both underflow to 0 on scores near
    -1e4; only the first also got the +1e4 input right, so each gets its own row."""
    with pytest.raises(AssertionError, match="starts at 0 instead of -inf"):
        check_online_attention(lambda s, v: _online(s, v, m0=0.0))
    with pytest.raises(AssertionError, match="without subtracting a running max"):
        check_online_attention(lambda s, v: _online(s, v, use_max=False))


def test_checker_reports_an_uncatalogued_error_with_where_it_starts():
    def off_by_a_bit(score_blocks, value_blocks):
        return _online(score_blocks, value_blocks) * 1.01

    with pytest.raises(AssertionError, match=r"one block.*your output\[0, 0\] is"):
        check_online_attention(off_by_a_bit)

    def narrow_blocks_off(score_blocks, value_blocks):  # right for one block of 7
        out = _online(score_blocks, value_blocks)
        return out * 1.01 if score_blocks[0].size(-1) < 7 else out

    with pytest.raises(AssertionError, match="already wrong with the first block"):
        check_online_attention(narrow_blocks_off)

    def last_block_twice(score_blocks, value_blocks):
        s, v = list(score_blocks), list(value_blocks)
        if len(s) > 1:
            s, v = s + s[-1:], v + v[-1:]
        return _online(s, v)

    with pytest.raises(AssertionError, match="first block alone comes out right"):
        check_online_attention(last_block_twice)


def test_checker_does_not_let_the_learner_change_the_reference(capsys):
    def writes_into_its_inputs(score_blocks, value_blocks):
        out = _online(score_blocks, value_blocks)
        for s in score_blocks:
            s.zero_()
        return out

    check_online_attention(writes_into_its_inputs)
    assert "correct" in capsys.readouterr().out
