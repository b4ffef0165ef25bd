"""Positional encodings: sinusoidal (absolute) and rotary (relative) (chapter 8)."""

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


def apply_rope(
    x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0
) -> torch.Tensor:
    """Rotate each pair (x_2i, x_2i+1) at position pos by theta = pos * base^(-2i/d)
    (eq. rope).

    x: (..., T, d) with d even; positions: (T,) or broadcastable to x's (..., T). Norms
    are kept, and <RoPE(q, m), RoPE(k, n)> depends on m and n only through m - n.
    """
    positions = torch.as_tensor(positions, device=x.device)
    if positions.shape[-1:] != x.shape[-2:-1]:
        raise ValueError(
            f"positions {tuple(positions.shape)} must end with T={x.size(-2)}, "
            f"the time axis of x {tuple(x.shape)}"
        )
    theta = rope_angles(positions, x.size(-1), base)  # (..., T, d/2)
    cos, sin = theta.cos().to(x.dtype), theta.sin().to(x.dtype)
    # (..., T, d/2) each: the two coordinates of every pair
    x1, x2 = x[..., 0::2], x[..., 1::2]
    # (..., T, d/2, 2)
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return out.flatten(-2)  # interleave back: (..., T, d)
