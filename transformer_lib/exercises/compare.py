"""Comparing the learner's tensors with the library's, and saying numbers, indices and
shapes in a checker's messages: what a trial's fields and a table's rows are written
with, beside :mod:`.harness` (the trials, the table and how a check runs).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .language import N_, _

# float32 inputs; a correct answer computed another way lands well inside this
ATOL, RTOL = 1e-5, 1e-4


def close(
    a: Any, b: torch.Tensor | None, atol: float = ATOL, rtol: float = RTOL
) -> bool:
    """Same shape and allclose, NaN never equal; in float64, so dtypes may differ."""
    if a is None or b is None or not isinstance(a, torch.Tensor) or a.shape != b.shape:
        return False
    return bool(
        torch.allclose(a.detach().double(), b.detach().double(), atol=atol, rtol=rtol)
    )


def first_mismatch(
    got: torch.Tensor, want: torch.Tensor, atol: float = ATOL, rtol: float = RTOL
) -> tuple[tuple[int, ...], torch.Tensor, torch.Tensor]:
    """(index, got value, expected value) of the first element outside tolerance.

    NaN counts as wrong.
    """
    g, w = got.detach().double(), want.detach().double()
    bad = ~torch.isclose(g, w, atol=atol, rtol=rtol)
    idx = tuple(int(i) for i in bad.nonzero()[0])
    return idx, g[idx], w[idx]


def finite(t: torch.Tensor) -> bool:
    return bool(torch.isfinite(t).all())


def first_index(where: torch.Tensor) -> tuple[int, ...]:
    """The index of the first True element of a bool tensor."""
    return tuple(int(i) for i in where.nonzero()[0])


def shape(t: torch.Tensor | torch.Size | tuple) -> str:
    dims = tuple(t.shape) if isinstance(t, torch.Tensor) else tuple(t)
    return "(" + ", ".join(str(d) for d in dims) + ")"


def num(x: float | torch.Tensor) -> str:
    x = float(x)
    if math.isnan(x) or math.isinf(x):
        return str(x)
    return f"{x:.4g}"


def where(index: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(int(i)) for i in index) + "]"


def row(idx: tuple[int, ...], lead: str = N_("batch index")) -> str:
    """'row 3', or 'row 3 (at batch index [1, 0])' when the row sits in a batch."""
    if len(idx) == 1:
        return _("row {i}").format(i=idx[-1])
    return _("row {i} (at {lead} {index})").format(
        i=idx[-1], lead=_(lead), index=where(idx[:-1])
    )


def position_span(a: int, b: int) -> str:
    if a == b:
        return _("position {a}").format(a=a)
    return _("positions {a}..{b}").format(a=a, b=b)
