"""A feed-forward network on one number, fitted to a curve (chapter 6).

With d_model = 1, FFN(x) = sum_k W2[k] act(W1[k] x + b1[k]) + b2 maps numbers to
numbers, and each hidden unit contributes one bend at x = -b1[k] / W1[k].
:func:`fitted_ffn` spreads the bends evenly over :data:`X_RANGE` and fits W2 and b2 to
one of the :data:`TARGETS` by least squares. Chapter 6's explorer draws the result.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from ..feed_forward import ACTIVATIONS, FeedForward

X_RANGE = (-3.0, 3.0)
TARGETS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "sin(2x)": lambda x: np.sin(2 * x),
    "step": lambda x: np.where(x < 0.3, -0.5, 0.5),
}


def fitted_ffn(
    d_ff: int, activation: str, target: str, n_points: int = 241, ridge: float = 1e-2
) -> tuple[FeedForward, np.ndarray]:
    """A FeedForward(1, d_ff) with evenly spaced bends and W2, b2 fitted to ``target``.

    The fit is least squares with a small ridge penalty on W2, which keeps
    neighbouring GELU units (nearly parallel curves) from getting huge weights that
    cancel. Returns the module and the grid of x values it was fitted on; the global
    random state is left as it was.
    """
    if target not in TARGETS:
        raise ValueError(f"target must be one of {list(TARGETS)}, got {target!r}")
    x = np.linspace(*X_RANGE, n_points)
    lo, hi = X_RANGE
    knots = lo + (hi - lo) * (np.arange(d_ff) + 0.5) / d_ff  # where each unit bends
    with torch.random.fork_rng(devices=[]):  # every weight is set below: no draws
        ffn = FeedForward(1, d_ff, activation).eval()
    act = ACTIVATIONS[activation]
    with torch.no_grad():
        ffn.linear1.weight.fill_(1.0)  # W1 = 1 for every unit, (d_ff, 1) as (out, in)
        ffn.linear1.bias.copy_(torch.as_tensor(-knots, dtype=torch.float32))  # -knot
        xs = torch.as_tensor(x, dtype=torch.float32).view(-1, 1)  # (N, d_model = 1)
        hidden = act(ffn.linear1(xs))  # (N, d_ff)
        ones = torch.ones(len(x), 1)
        H = torch.cat([hidden, ones], dim=1).double().numpy()  # (N, d_ff + 1)
        penalty = ridge * np.eye(d_ff + 1)
        penalty[-1, -1] = 0.0  # leave b2 free
        coef = np.linalg.solve(H.T @ H + penalty, H.T @ TARGETS[target](x))  # W2, b2
        w2 = torch.as_tensor(coef[:-1], dtype=torch.float32).view(1, d_ff)
        ffn.linear2.weight.copy_(w2)
        ffn.linear2.bias.fill_(float(coef[-1]))
    return ffn, x
