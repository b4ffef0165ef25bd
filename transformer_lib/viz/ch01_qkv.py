"""Chapter 1 figures: queries, keys and values as a soft dictionary look-up.

A six-token sentence whose embeddings are hand-made features (the kind of word, one-hot, then
its position, one-hot). Keys simply announce those features (``W_K = I``); the question each
token asks lives in a hand-set ``W_Q`` (eq. q, eq. k), and ``W_V`` hands over the kind of word
(eq. v). ``lookup_explorer()`` lets the reader pick the question and its sharpness.
"""

from __future__ import annotations

import torch

import transformer_lib as tl

from .explorer import Explorer, HoverGrid, heatmap

WORDS = ["the", "cat", "sat", "on", "the", "mat"]
KINDS = ["article", "noun", "verb", "prep."]
KIND_OF = [0, 1, 2, 3, 0, 1]  # the kind of each word of WORDS
FEATURES = KINDS + [
    f"pos {i}" for i in range(len(WORDS))
]  # the d_model = 10 input features

RULES = [
    "itself",
    "the previous word",
    "the next word",
    "the first word",
    "a noun",
    "its own kind",
]
BETAS = [0, 1, 2, 4, 8]


def sentence_embeddings() -> torch.Tensor:
    """X (T, d_model): one row per word, its kind (4 one-hot features) then its position (T one-hot)."""
    T, n_kinds = len(WORDS), len(KINDS)
    X = torch.zeros(T, n_kinds + T)
    X[torch.arange(T), torch.tensor(KIND_OF)] = 1.0  # kind features
    X[torch.arange(T), n_kinds + torch.arange(T)] = 1.0  # position features
    return X


def query_weights(rule: str, beta: float = 1.0) -> torch.Tensor:
    """A hand-set W_Q (d_model, d_k = d_model): row a says which key feature input feature a asks for.

    With row vectors, q_i = x_i W_Q, so W_Q[a, b] = beta means "a token that has feature a
    looks for feature b" with sharpness beta.
    """
    T, n_kinds = len(WORDS), len(KINDS)
    d = n_kinds + T
    W = torch.zeros(d, d)
    pos = lambda i: n_kinds + i  # noqa: E731  (index of the feature "pos i")
    for i in range(T):
        if rule == "itself":
            W[pos(i), pos(i)] = 1.0
        elif rule == "the previous word":
            W[pos(i), pos(max(i - 1, 0))] = (
                1.0  # the first word has none: it looks at itself
            )
        elif rule == "the next word":
            W[pos(i), pos(min(i + 1, T - 1))] = 1.0  # the last word looks at itself
        elif rule == "the first word":
            W[pos(i), pos(0)] = 1.0
    for c in range(n_kinds):
        if rule == "a noun":
            W[c, KINDS.index("noun")] = 1.0
        elif rule == "its own kind":
            W[c, c] = 1.0
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; choose one of {RULES}")
    return beta * W


def key_weights() -> torch.Tensor:
    """W_K = I (d_model, d_k = d_model): each key announces the token's own features, unchanged."""
    return torch.eye(len(FEATURES))


def value_weights() -> torch.Tensor:
    """W_V (d_model, d_v = 4): hands over the kind of word and drops the position."""
    W = torch.zeros(len(FEATURES), len(KINDS))
    W[: len(KINDS)] = torch.eye(len(KINDS))
    return W


def lookup(
    rule: str, beta: float, causal: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """(weights (T, T), retrieved values Z (T, d_v)) for one hand-built head.

    Scores are q_i . k_j without the 1/sqrt(d_k) of chapter 2, so a perfect match scores beta.
    """
    X = sentence_embeddings()  # (T, d_model)
    Q = X @ query_weights(
        rule, beta
    )  # (T, d_model) @ (d_model, d_k) -> (T, d_k)   eq. q
    K = X @ key_weights()  # (T, d_k)   eq. k
    V = X @ value_weights()  # (T, d_v)   eq. v
    scores = tl.attention_scores(Q, K, scale=False)  # (T, T) = Q K^T
    if causal:
        scores = scores.masked_fill(~tl.causal_mask(len(WORDS)), float("-inf"))
    weights = tl.softmax(scores, dim=-1)  # (T, T), each row sums to 1
    return weights, weights @ V  # (T, T) @ (T, d_v) -> (T, d_v)


def draw_lookup(fig, rule: str = "the previous word", beta: float = 4) -> HoverGrid:
    """Who each query finds: the attention weights, with each row's largest weight printed."""
    weights, _ = lookup(rule, beta)
    ax = fig.add_subplot()
    fig.subplots_adjust(left=0.13, right=0.86, bottom=0.17, top=0.9)
    grid = heatmap(
        ax,
        weights.numpy(),
        WORDS,
        WORDS,
        colorbar="light",
        annotate="rowmax",
        title=f"each word looks for {rule} (\u03b2 = {beta:g})",
    )
    return grid


def lookup_explorer() -> Explorer:
    """Choose the question every word asks (W_Q) and how sharply it asks (beta)."""
    return Explorer(
        draw_lookup,
        {"rule": RULES, "beta": BETAS},
        defaults={"rule": "the previous word", "beta": 4},
        labels={"rule": "each word looks for", "beta": r"sharpness $\beta$"},
        figsize=(6, 4),
        title="A hand-built attention head: the query picks the key",
    )


EXPLORERS = {"lookup": lookup_explorer}
