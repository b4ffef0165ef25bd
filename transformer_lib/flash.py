"""The online softmax and FlashAttention's tiled attention (chapter 13).

Exact attention, computed block by block: a running maximum m, a running denominator
ell (the book's l) and a running, unnormalised output o are updated one block of keys
at a time, and the division by ell happens once, at the end. The whole (T_q, T_k)
matrix of scores never exists; one (block_q, block_k) tile per head does.

Shapes as in ``attention.py``: q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v);
masks are bool, True = may attend, broadcastable to (..., T_q, T_k). A query that may
attend to no key gets a zero output, as everywhere in the library.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ._validate import check_mask, check_qkv

NEG_INF = float("-inf")
_LOW_PRECISION = (torch.float16, torch.bfloat16)  # accumulated in float32


# --------------------------------------------------------------------------------------
# The online softmax
# --------------------------------------------------------------------------------------


def _grow_max(
    m: torch.Tensor, s: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The shared first half of both updates: the new running max, the factor that
    rescales the old state, and the exponentials of the new block.

    m: (...,) running max; s: (..., b) a block of scores, -inf where masked.
    Returns m_new (...,), alpha = exp(m - m_new) (...,), p = exp(s - m_new) (..., b).
    While a row has seen only -inf, m_new is -inf too; it is replaced by 0 inside the
    exponentials, so that exp(-inf - (-inf)) = NaN never happens and alpha, p are 0.
    """
    m_new = torch.maximum(m, s.amax(dim=-1))  # (...,)
    shift = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)
    alpha = torch.exp(m - shift)  # (...,), 0 while m = -inf
    p = torch.exp(s - shift.unsqueeze(-1))  # (..., b)
    return m_new, alpha, p


def online_softmax_step(
    m: torch.Tensor, ell: torch.Tensor, x: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """m_j = max(m_{j-1}, max_i x_i),
    ell_j = ell_{j-1} e^{m_{j-1} - m_j} + sum_i e^{x_i - m_j}   (eq. online-softmax).

    One block x (..., b) of a stream; m, ell (...,) are the running max and the running
    denominator, starting at -inf and 0. After the last block, ell = sum_i e^{x_i - m}
    over every element seen, with m their maximum.
    """
    m_new, alpha, p = _grow_max(m, x)
    return m_new, alpha * ell + p.sum(dim=-1)


def online_softmax(
    x: torch.Tensor,
    dim: int = -1,
    block_size: int = 64,
    *,
    return_stats: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """softmax(x) with its normaliser found in one pass over blocks of ``block_size``
    (eq. online-softmax), then y_i = e^{x_i - m} / ell   (eq. stable-softmax).

    Two passes over x instead of the three of max, sum, divide. The same results as
    :func:`transformer_lib.softmax`: -inf entries get weight 0, a slice that is entirely
    -inf gives zeros, float16/bfloat16 are computed in float32 and cast back. With
    ``return_stats`` also returns m and ell, shaped like x without ``dim``.
    """
    _check_block(block_size, "block_size")
    out_dtype = x.dtype
    xs = x.movedim(dim, -1)  # (..., n)
    if out_dtype in _LOW_PRECISION:
        xs = xs.float()
    m = torch.full(xs.shape[:-1], NEG_INF, dtype=xs.dtype, device=xs.device)
    ell = torch.zeros_like(m)
    for j0 in range(0, xs.size(-1), block_size):  # pass 1: the normaliser
        m, ell = online_softmax_step(m, ell, xs[..., j0 : j0 + block_size])
    shift = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    # ell >= 1 unless the slice is entirely -inf: 1 there keeps the weights 0 and their
    # gradient finite (no 1/0 or 1/tiny in the backward pass)
    ell_safe = torch.where(ell > 0, ell, torch.ones_like(ell))
    # pass 2: the weights, with the division fused in; (..., n)
    y = torch.exp(xs - shift.unsqueeze(-1)) / ell_safe.unsqueeze(-1)
    y = y.to(out_dtype).movedim(-1, dim)
    return (y, m, ell) if return_stats else y


# --------------------------------------------------------------------------------------
# Tiled attention
# --------------------------------------------------------------------------------------


def online_attention_step(
    m: torch.Tensor,
    ell: torch.Tensor,
    o: torch.Tensor,
    s: torch.Tensor,
    v: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """m_j = max(m_{j-1}, rowmax S_j),
    ell_j = e^{m_{j-1} - m_j} ell_{j-1} + rowsum e^{S_j - m_j},
    o_j = e^{m_{j-1} - m_j} o_{j-1} + e^{S_j - m_j} V_j   (eq. flash-update).

    One tile: s (..., T_q, b) scaled scores, -inf where masked; v (..., b, d_v) the
    tile's values. m, ell (..., T_q) and o (..., T_q, d_v) are the running max,
    denominator and unnormalised output, starting at -inf, 0 and 0. After the last tile,
    o / ell is softmax(S) V over every key seen (eq. flash-output).
    """
    m_new, alpha, p = _grow_max(m, s)  # p: (..., T_q, b)
    ell_new = alpha * ell + p.sum(dim=-1)  # (..., T_q)
    # (..., T_q, b) @ (..., b, d_v) -> (..., T_q, d_v)
    o_new = alpha.unsqueeze(-1) * o + p @ v
    return m_new, ell_new, o_new


def _check_block(size: object, name: str) -> None:
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"{name} must be a positive int, got {size!r}")


def _check_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Size:
    """check_qkv, one floating dtype for all three, and broadcastable batch dims;
    returns the batch shape (...)."""
    check_qkv(q, k, v)
    dtypes = {q.dtype, k.dtype, v.dtype}
    if len(dtypes) > 1 or not q.dtype.is_floating_point:
        raise TypeError(
            "q, k and v must share one floating-point dtype, got "
            f"q {q.dtype}, k {k.dtype}, v {v.dtype}"
        )
    try:
        return torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except RuntimeError:
        raise ValueError(
            "the batch dims (...) of q, k and v must broadcast: q has shape "
            f"{tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        ) from None


def _check_tiled(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    block_q: int,
    block_k: int,
) -> tuple[torch.Size, torch.Tensor | None]:
    """The checks of the tiled passes: returns the batch shape (...) and the mask
    expanded to (..., T_q, T_k) (a view: no (T_q, T_k) copy is made)."""
    batch = _check_inputs(q, k, v)
    _check_block(block_q, "block_q")
    _check_block(block_k, "block_k")
    if mask is not None:
        shape = batch + (q.size(-2), k.size(-2))
        check_mask(mask, shape)
        mask = mask.expand(shape)
    return batch, mask


def causal_kv_end(i1: int, T_q: int, T_k: int) -> int:
    """How many keys the causal mask of eq. causal-mask lets queries 0 .. i1-1 see:
    query i sees keys j <= i + (T_k - T_q), so the last of them sees
    min(T_k, i1 + T_k - T_q) keys (none, if that is negative)."""
    return max(0, min(T_k, i1 + T_k - T_q))


def attention_tiles(
    T_q: int, T_k: int, block_q: int = 64, block_k: int = 64, *, causal: bool = False
) -> list[tuple[int, int, int, int]]:
    """The tiles (i0, i1, j0, j1) that :func:`tiled_attention` computes, in its order:
    query rows i0:i1, key columns j0:j1. With ``causal``, the tiles that the causal mask
    fills entirely are left out."""
    _check_block(block_q, "block_q")
    _check_block(block_k, "block_k")
    tiles = []
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        n_keys = causal_kv_end(i1, T_q, T_k) if causal else T_k
        for j0 in range(0, n_keys, block_k):
            tiles.append((i0, i1, j0, min(j0 + block_k, T_k)))
    return tiles


def _tile_mask(
    mask: torch.Tensor | None,
    causal: bool,
    offset: int,
    i0: int,
    i1: int,
    j0: int,
    j1: int,
    device: torch.device,
) -> tuple[bool, torch.Tensor | None]:
    """(skip, allowed) for the tile of query rows i0:i1 and key columns j0:j1: skip if
    ``mask`` (expanded to (..., T_q, T_k)) allows nothing in it; allowed is None when
    everything is allowed, else a bool (..., b_q, b_k) or (b_q, b_k). With ``causal``,
    query i sees keys j <= i + offset, offset = T_k - T_q (eq. causal-mask)."""
    allowed = None
    if mask is not None:
        allowed = mask[..., i0:i1, j0:j1]  # a view of the expanded mask
        if not allowed.any():
            return True, None
    if causal and j1 - 1 > i0 + offset:  # the tile crosses the diagonal
        rows = torch.arange(i0, i1, device=device).unsqueeze(1)  # (b_q, 1)
        cols = torch.arange(j0, j1, device=device).unsqueeze(0)  # (1, b_k)
        below = cols <= rows + offset  # (b_q, b_k)
        allowed = below if allowed is None else allowed & below
    return False, allowed


def tiled_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    block_q: int = 64,
    block_k: int = 64,
    *,
    causal: bool = False,
    return_lse: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q K^T / sqrt(d_k)) V computed tile by tile (eq. flash-update,
    flash-output): the FlashAttention forward pass, in PyTorch.

    Returns the output (..., T_q, d_v), of q's dtype: the same as
    :func:`transformer_lib.scaled_dot_product_attention` (fully masked rows give zeros),
    but only one (block_q, block_k) tile of scores per head exists at any time.
    ``causal=True`` applies :func:`transformer_lib.causal_mask` (aligned to the end when
    T_q != T_k, unlike ``F.scaled_dot_product_attention(is_causal=True)``) without
    building it, and skips the tiles it masks entirely; ``mask`` (bool, True = may
    attend) is combined with it, and its all-False tiles are skipped too. float16 and
    bfloat16 inputs are accumulated in float32. With ``return_lse`` also returns
    L = m + log ell (..., T_q) (eq. lse), the log-sum-exp of each row of masked, scaled
    scores (-inf for a fully masked row): all a backward pass needs to rebuild any tile
    of softmax weights, P = exp(S - L), without storing them.
    """
    batch, mask = _check_tiled(q, k, v, mask, block_q, block_k)
    T_q, T_k, d_k, d_v = q.size(-2), k.size(-2), q.size(-1), v.size(-1)
    acc = torch.float32 if q.dtype in _LOW_PRECISION else q.dtype
    scale = 1.0 / math.sqrt(d_k)
    out = torch.empty(batch + (T_q, d_v), dtype=acc, device=q.device)
    lse = torch.empty(batch + (T_q,), dtype=acc, device=q.device)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_blk = q[..., i0:i1, :].to(acc)  # (..., b_q, d_k)
        m = torch.full(batch + (i1 - i0,), NEG_INF, dtype=acc, device=q.device)
        ell = torch.zeros_like(m)  # (..., b_q)
        o = torch.zeros(batch + (i1 - i0, d_v), dtype=acc, device=q.device)
        n_keys = causal_kv_end(i1, T_q, T_k) if causal else T_k
        for j0 in range(0, n_keys, block_k):
            j1 = min(j0 + block_k, T_k)
            skip, allowed = _tile_mask(
                mask, causal, T_k - T_q, i0, i1, j0, j1, q.device
            )
            if skip:
                continue  # a tile the mask fills entirely: nothing to add
            k_blk = k[..., j0:j1, :].to(acc)  # (..., b_k, d_k)
            v_blk = v[..., j0:j1, :].to(acc)  # (..., b_k, d_v)
            # (..., b_q, d_k) @ (..., d_k, b_k) -> (..., b_q, b_k): the only scores held
            s = (q_blk @ k_blk.transpose(-2, -1)) * scale
            if allowed is not None:
                s = s.masked_fill(~allowed, NEG_INF)
            m, ell, o = online_attention_step(m, ell, o, s, v_blk)
        # eq. flash-output: one division per row, at the end; ell = 0 (nothing allowed)
        # leaves o = 0, divided by 1 so that autograd's 1/ell stays finite too
        ell_safe = torch.where(ell > 0, ell, torch.ones_like(ell))
        out[..., i0:i1, :] = o / ell_safe.unsqueeze(-1)
        lse[..., i0:i1] = m + torch.log(ell)  # eq. lse; -inf + -inf = -inf if ell = 0
    out = out.to(q.dtype)
    return (out, lse) if return_lse else out


def tiled_attention_backward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    grad_out: torch.Tensor,
    mask: torch.Tensor | None = None,
    block_q: int = 64,
    block_k: int = 64,
    *,
    causal: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dV = P^T dO,  dS = P * (dO V^T - D),  D = rowsum(dO * O),
    dQ = dS K / sqrt(d_k),  dK = dS^T Q / sqrt(d_k)   (eq. flash-backward).

    The gradients of :func:`tiled_attention` from what its forward pass kept: q, k, v,
    the output O and the log-sum-exp L (``return_lse=True``). Every tile of weights is
    rebuilt as P = exp(S - L) and dropped again, so the backward pass, like the
    forward one, never holds more than one (block_q, block_k) tile per head. Returns
    (dq, dk, dv) shaped and typed like q, k, v.
    """
    batch, mask = _check_tiled(q, k, v, mask, block_q, block_k)
    T_q, T_k, d_k, d_v = q.size(-2), k.size(-2), q.size(-1), v.size(-1)
    want = batch + (T_q, d_v)
    if out.shape != want or grad_out.shape != want or lse.shape != want[:-1]:
        raise ValueError(
            f"out and grad_out must have the output's shape {tuple(want)} and lse "
            f"{tuple(want[:-1])}; got out {tuple(out.shape)}, grad_out "
            f"{tuple(grad_out.shape)}, lse {tuple(lse.shape)}"
        )
    acc = torch.float32 if q.dtype in _LOW_PRECISION else q.dtype
    scale = 1.0 / math.sqrt(d_k)
    dq = torch.zeros(batch + (T_q, d_k), dtype=acc, device=q.device)
    dk = torch.zeros(batch + (T_k, d_k), dtype=acc, device=q.device)
    dv = torch.zeros(batch + (T_k, d_v), dtype=acc, device=q.device)
    L = lse.to(acc)
    L = torch.where(torch.isneginf(L), torch.zeros_like(L), L)  # fully masked: P = 0
    dO = grad_out.to(acc)
    D = (dO * out.to(acc)).sum(dim=-1)  # (..., T_q)
    for i0, i1, j0, j1 in attention_tiles(T_q, T_k, block_q, block_k, causal=causal):
        skip, allowed = _tile_mask(mask, causal, T_k - T_q, i0, i1, j0, j1, q.device)
        if skip:
            continue
        q_blk = q[..., i0:i1, :].to(acc)  # (..., b_q, d_k)
        k_blk = k[..., j0:j1, :].to(acc)  # (..., b_k, d_k)
        v_blk = v[..., j0:j1, :].to(acc)  # (..., b_k, d_v)
        s = (q_blk @ k_blk.transpose(-2, -1)) * scale  # (..., b_q, b_k)
        if allowed is not None:
            s = s.masked_fill(~allowed, NEG_INF)
        p = torch.exp(s - L[..., i0:i1].unsqueeze(-1))  # (..., b_q, b_k), rebuilt
        dO_blk = dO[..., i0:i1, :]  # (..., b_q, d_v)
        # (..., b_k, b_q) @ (..., b_q, d_v) -> (..., b_k, d_v)
        dv[..., j0:j1, :] += p.transpose(-2, -1) @ dO_blk
        dp = dO_blk @ v_blk.transpose(-2, -1)  # (..., b_q, d_v) @ (..., d_v, b_k)
        ds = p * (dp - D[..., i0:i1].unsqueeze(-1))  # (..., b_q, b_k)
        dq[..., i0:i1, :] += (ds @ k_blk) * scale  # (..., b_q, d_k)
        dk[..., j0:j1, :] += (ds.transpose(-2, -1) @ q_blk) * scale  # (..., b_k, d_k)
    # a k or v broadcast over batch dims gets the sum of its gradients over them
    return (
        dq.sum_to_size(q.shape).to(q.dtype),
        dk.sum_to_size(k.shape).to(k.dtype),
        dv.sum_to_size(v.shape).to(v.dtype),
    )


# --------------------------------------------------------------------------------------
# Splitting the keys: flash decoding
# --------------------------------------------------------------------------------------


def merge_attention(
    outs: Sequence[torch.Tensor], lses: Sequence[torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor]:
    """L = log sum_s e^{L_s},  O = sum_s e^{L_s - L} O_s   (eq. lse-merge).

    Attention over keys split into disjoint parts s, each computed on its own as
    (O_s (..., T_q, d_v), L_s (..., T_q)) by ``tiled_attention(..., return_lse=True)``,
    merged into attention over all the keys; returns (O, L). Parts a row may not
    attend to (L_s = -inf) weigh 0; a row with no key in any part stays zero.
    """
    if len(outs) != len(lses) or not outs:
        raise ValueError(
            "merge_attention needs one log-sum-exp per partial output, and at least "
            f"one of each: got {len(outs)} outputs and {len(lses)} log-sum-exps"
        )
    for o, s in zip(outs, lses, strict=True):
        if o.shape[:-1] != outs[0].shape[:-1] or s.shape != o.shape[:-1]:
            raise ValueError(
                "each partial output (..., T_q, d_v) needs a log-sum-exp (..., T_q) "
                f"of the same rows: got outputs {[tuple(x.shape) for x in outs]} and "
                f"log-sum-exps {[tuple(x.shape) for x in lses]}"
            )
    L_s = torch.stack(list(lses))  # (n_splits, ..., T_q)
    L = torch.logsumexp(L_s, dim=0)  # (..., T_q)
    shift = torch.where(torch.isneginf(L), torch.zeros_like(L), L)
    w = torch.exp(L_s - shift)  # (n_splits, ..., T_q), sums to 1 over the splits
    O_s = torch.stack([o.to(w.dtype) for o in outs])  # (n_splits, ..., T_q, d_v)
    out = (w.unsqueeze(-1) * O_s).sum(dim=0)  # (..., T_q, d_v)
    return out.to(outs[0].dtype), L


def split_kv_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    n_splits: int,
    mask: torch.Tensor | None = None,
    block_k: int = 64,
) -> torch.Tensor:
    """Flash decoding: attention over keys cut into ``n_splits`` contiguous parts, each
    part computed on its own by :func:`tiled_attention` (in a real kernel, in
    parallel), then merged by :func:`merge_attention` (eq. lse-merge).

    The case it is made for is one new query over a long KV cache, q (..., 1, d_k):
    one row of tiles, too few to keep a GPU busy unless the keys are split too.
    """
    _check_block(n_splits, "n_splits")
    batch = _check_inputs(q, k, v)
    T_q, T_k = q.size(-2), k.size(-2)
    if mask is not None:
        check_mask(mask, batch + (T_q, T_k))
        mask = mask.expand(batch + (T_q, T_k))
    bounds = [T_k * s // n_splits for s in range(n_splits + 1)]
    outs, lses = [], []
    for j0, j1 in zip(bounds[:-1], bounds[1:], strict=True):
        part = None if mask is None else mask[..., j0:j1]
        o, L = tiled_attention(
            q,
            k[..., j0:j1, :],
            v[..., j0:j1, :],
            part,
            block_q=max(T_q, 1),
            block_k=block_k,
            return_lse=True,
        )
        outs.append(o)
        lses.append(L)
    return merge_attention(outs, lses)[0]
