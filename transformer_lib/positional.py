"""Positional encodings: sinusoidal (absolute) and rotary (relative) (chapter 8), and
ALiBi's attention bias (chapter 17)."""

from __future__ import annotations

import torch


def sinusoidal_positional_encoding(
    T: int, d_model: int, base: float = 10000.0, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """PE[pos, 2i] = sin(pos / base^(2i/d_model)),
    PE[pos, 2i+1] = cos(pos / base^(2i/d_model))   (eq. pe-sin, pe-cos).

    Shape (T, d_model); positions start at 0; sin and cos are interleaved, not
    concatenated.
    """
    if T < 0 or d_model < 1:
        raise ValueError(f"need T >= 0 and d_model >= 1, got T={T}, d_model={d_model}")
    pos = torch.arange(T, dtype=torch.float64).unsqueeze(1)  # (T, 1)
    # (ceil(d/2),): the even indices 2i
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angle = pos / base ** (two_i / d_model)  # (T, ceil(d/2))
    pe = torch.zeros(T, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    # odd d_model has one sin column more
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return pe.to(dtype)


def rope_angles(positions: torch.Tensor, d: int, base: float = 10000.0) -> torch.Tensor:
    """theta[..., pos, i] = pos * base^(-2i/d) for i < d/2   (eq. rope-angle);
    shape (*positions.shape, d/2)."""
    if d % 2:
        raise ValueError(
            f"RoPE rotates pairs of features, so d must be even, got d={d}"
        )
    inv_freq = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
    return positions.to(torch.float64).unsqueeze(-1) * inv_freq  # (..., T, d/2)


ROPE_LAYOUTS = ("interleaved", "half")


def apply_rope(
    x: torch.Tensor,
    positions: torch.Tensor,
    base: float = 10000.0,
    layout: str = "interleaved",
) -> torch.Tensor:
    """Rotate each pair of features at position pos by theta = pos * base^(-2i/d)
    (eq. rope).

    x: (..., T, d) with d even; positions: (T,) or broadcastable to x's (..., T). Norms
    are kept, and <RoPE(q, m), RoPE(k, n)> depends on m and n only through m - n.

    ``layout`` says which features form pair i:

    - "interleaved": (x_2i, x_2i+1), neighbours, as in the RoPE paper and chapter 8;
    - "half": (x_i, x_i+d/2), the first half against the second, as GPT-NeoX and Llama
      do in ``transformers`` ("rotate half").

    The two are the same rotation up to a fixed reordering of the features,
    :func:`rope_permutation` (eq. rope-half-perm). ``base`` is Llama's ``rope_theta``
    (10 000 in the paper and Llama 2, 500 000 in Llama 3).
    """
    if layout not in ROPE_LAYOUTS:
        raise ValueError(f"layout must be one of {ROPE_LAYOUTS}, got {layout!r}")
    positions = torch.as_tensor(positions, device=x.device)
    if positions.shape[-1:] != x.shape[-2:-1]:
        raise ValueError(
            f"positions {tuple(positions.shape)} must end with T={x.size(-2)}, "
            f"the time axis of x {tuple(x.shape)}"
        )
    theta = rope_angles(positions, x.size(-1), base)  # (..., T, d/2)
    cos, sin = theta.cos().to(x.dtype), theta.sin().to(x.dtype)
    if layout == "half":
        # (..., T, d/2) each: pair i is (x_i, x_i+d/2)
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    # (..., T, d/2) each: the two coordinates of every pair
    x1, x2 = x[..., 0::2], x[..., 1::2]
    # (..., T, d/2, 2)
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return out.flatten(-2)  # interleave back: (..., T, d)


def rope_permutation(d: int) -> torch.Tensor:
    """perm = (0, 2, 4, ..., d-2, 1, 3, ..., d-1): the even features, then the odd ones
    (eq. rope-half-perm).

    For every x, ``apply_rope(x[..., perm], layout="half")`` equals
    ``apply_rope(x, layout="interleaved")[..., perm]``: pair (x_2i, x_2i+1) lands on
    (x_i, x_i+d/2). Reorder each head's rows of W_Q and W_K (and their biases) by
    ``perm`` and an interleaved model computes the same scores in the half layout,
    because q . k is unchanged when both vectors are permuted alike. ``argsort(perm)``
    goes back.
    """
    if d % 2 or d < 2:
        raise ValueError(
            f"RoPE rotates pairs of features, so d must be even, got d={d}"
        )
    return torch.cat((torch.arange(0, d, 2), torch.arange(1, d, 2)))


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """ALiBi's head slopes m_h = 2^(-8h/H) for h = 1 .. H (H a power of two, as in the
    ALiBi paper), float64 (H,)."""
    h = torch.arange(1, n_heads + 1, dtype=torch.float64)
    return 2.0 ** (-8.0 * h / n_heads)


def alibi_bias(n_heads: int, T: int) -> torch.Tensor:
    """ALiBi (chapter 17): b_h(i, j) = -m_h (i - j) for key j <= query i, -inf for
    j > i (causal); (H, T, T), float32.

    Added to the scores before the softmax, in place of any position vector.
    """
    i = torch.arange(T)[:, None]  # (T, 1) query positions
    j = torch.arange(T)[None, :]  # (1, T) key positions
    dist = (i - j).to(torch.float64)  # (T, T)
    bias = -alibi_slopes(n_heads)[:, None, None] * dist  # (H, T, T)
    return bias.masked_fill(j > i, float("-inf")).float()
