"""Chapter 15 figures: what temperature, top-k and top-p do to the next-token choice.

``sampling_explorer(logits, labels)`` draws the model's distribution softmax(z) and the
distribution the next token is actually drawn from, ``tl.next_token_probs`` with the
chosen temperature, k and p, token by token, with the dropped tokens marked and the
entropy of both. Called with no arguments it uses an illustrative set of logits for the
word after "The cat sat on the" (made up for the picture, not from a trained model).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

import transformer_lib as tl

from .figures import LiveFigure
from .interactive import Explorer

# illustrative logits for the word after "The cat sat on the" (not a trained model)
EXAMPLE = {
    "mat": 3.2,
    "floor": 2.5,
    "sofa": 2.3,
    "bed": 2.0,
    "chair": 1.8,
    "windowsill": 1.4,
    "roof": 1.1,
    "table": 1.0,
    "keyboard": 0.6,
    "grass": 0.4,
    "fence": 0.1,
    "dog": -0.4,
    "moon": -1.2,
    "piano": -1.3,
    "idea": -2.5,
    "the": -3.0,
}
TEMPERATURES = [0.25, 0.5, 0.75, 1.0, 1.5, 2.0]
TOP_KS = ["all", 1, 3, 5, 10]
TOP_PS = [1.0, 0.95, 0.9, 0.75, 0.5]


def entropy(p: np.ndarray) -> float:
    """H(p) = -sum p log p in nats (0 log 0 = 0)."""
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


class DistributionFigure(LiveFigure):
    """Bars over the vocabulary: softmax(z), the model's distribution (outline, fixed),
    and ``tl.next_token_probs`` for the chosen temperature, top-k and top-p (filled;
    grey and marked x where a token is dropped), with the entropies in the title."""

    def __init__(self, fig, logits: torch.Tensor, labels: list[str]) -> None:
        super().__init__(fig)
        self.logits = logits.double()
        self.model = torch.softmax(self.logits, -1).numpy()
        V = len(labels)
        ax = fig.add_axes((0.09, 0.3, 0.88, 0.56))
        x = np.arange(V)
        self.bars = ax.bar(x, self.model, width=0.75, color="#1f77b4")
        outline = ax.bar(x, self.model, width=0.75, fill=False, edgecolor="#444444")
        for bar in outline:
            bar.set_linewidth(0.9)
        (self.dropped,) = ax.plot([], [], "x", color="#d62728", ms=6)
        ax.set_xticks(x, labels, rotation=50, ha="right", fontsize=8)
        ax.set_xlim(-0.6, V - 0.4)
        ax.set_ylim(0, 1.0)
        ax.set_ylabel("probability")
        self.title = ax.set_title(" ", fontsize=9)
        fig.text(
            0.55,
            0.8,
            "outline: softmax(z), the model\nfilled: the distribution sampled from\n"
            "x: dropped by top-k / top-p",
            fontsize=8,
            va="top",
        )
        # the model's outline lies over the changing bars, the x marks over both
        self.live(*self.bars, *outline, self.dropped, self.title)

    def update(
        self, temperature: float = 1.0, top_k: int | str = "all", top_p: float = 1.0
    ) -> None:
        k = None if top_k == "all" else int(top_k)
        p = None if top_p >= 1.0 else float(top_p)
        q = tl.next_token_probs(
            self.logits, temperature=temperature, top_k=k, top_p=p
        ).numpy()
        kept = q > 0
        for bar, height, keep in zip(self.bars, q, kept, strict=True):
            bar.set_height(height)
            bar.set_color("#1f77b4" if keep else "#dddddd")
        x = np.arange(len(q))
        self.dropped.set_data(x[~kept], np.full((~kept).sum(), 0.01))
        self.title.set_text(
            f"kept {int(kept.sum())} of {len(q)} tokens; entropy {entropy(q):.2f} nats "
            f"(the model's: {entropy(self.model):.2f}; uniform: {math.log(len(q)):.2f})"
        )


def sampling_explorer(
    logits: torch.Tensor | None = None, labels: list[str] | None = None
) -> Explorer:
    """Controls: temperature tau, top_k and top_p (see ``tl.next_token_probs``)."""
    if logits is None:
        labels = list(EXAMPLE)
        logits = torch.tensor(list(EXAMPLE.values()), dtype=torch.float64)
    return Explorer(
        functools.partial(DistributionFigure, logits=logits, labels=labels),
        {"temperature": TEMPERATURES, "top_k": TOP_KS, "top_p": TOP_PS},
        defaults={"temperature": 1.0},
        labels={
            "temperature": "temperature $\\tau$",
            "top_k": "top-$k$",
            "top_p": "top-$p$",
        },
        figsize=(7.2, 3.8),
        dpi=80,
        title="The next-token distribution under temperature, top-k and top-p",
    )


EXPLORERS = {"sampling": sampling_explorer}
