"""Chapter 10 figures: a one-layer encoder-decoder that learns two translations.

``ToyTranslator`` wires embeddings + PE, one :class:`~transformer_lib.EncoderLayer`,
one :class:`~transformer_lib.DecoderLayer` and the output projection
(eq. x-pos ... output-softmax). ``train_toy()`` fits it to :data:`PAIRS` with
teacher forcing and keeps snapshots of the output distributions.
``attention_explorer()`` shows the decoder's masked self-attention next to its
cross-attention, per head, before and after training; ``output_explorer()``
shows the output distribution at every target position as training proceeds.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import matplotlib
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from matplotlib.patches import Rectangle

import transformer_lib as tl

from .explorer import Explorer, HoverGrid, heatmap

PAIRS = [
    ("the cat sits on the mat", "die Katze sitzt auf der Matte"),
    ("the dog sleeps", "der Hund schläft"),
]
SENTENCES = [src for src, _ in PAIRS]  # the explorers' "sentence" options
PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"
SRC_VOCAB = [PAD, "the", "cat", "sits", "on", "mat", "dog", "sleeps"]
TGT_VOCAB = [
    PAD,
    BOS,
    EOS,
    "die",
    "Katze",
    "sitzt",
    "auf",
    "der",
    "Matte",
    "Hund",
    "schläft",
]
D_MODEL, N_HEADS, D_FF = 16, 4, 64
SNAPSHOTS = [0, 5, 10, 20, 40, 60]  # steps at which train_toy records P


@dataclass
class Batch:
    """The padded mini-batch of :data:`PAIRS`; id 0 is <pad>."""

    src: torch.Tensor  # (B, T_src) source ids, right-padded
    tgt_in: torch.Tensor  # (B, T_tgt) decoder input: <bos> y_1 ... y_n
    tgt_out: torch.Tensor  # (B, T_tgt) labels: y_1 ... y_n <eos>
    src_mask: torch.Tensor  # (B, 1, 1, T_src) bool, True at real tokens
    src_lengths: list[int]
    tgt_lengths: list[int]  # real decoder positions: target words + 1

    def src_tokens(self, b: int) -> list[str]:
        return [SRC_VOCAB[i] for i in self.src[b].tolist()]

    def tgt_tokens(self, b: int) -> list[str]:
        return [TGT_VOCAB[i] for i in self.tgt_in[b].tolist()]


def make_batch(pairs: list[tuple[str, str]] = PAIRS) -> Batch:
    """Token ids for ``pairs``, right-padded to the longest sentences."""
    srcs = [[SRC_VOCAB.index(w) for w in s.split()] for s, _ in pairs]
    tgts = [[TGT_VOCAB.index(w) for w in t.split()] for _, t in pairs]
    T_src, T_tgt = max(map(len, srcs)), max(map(len, tgts)) + 1
    bos, eos = TGT_VOCAB.index(BOS), TGT_VOCAB.index(EOS)

    def pad(ids: list[int], T: int) -> list[int]:
        return ids + [0] * (T - len(ids))

    src = torch.tensor([pad(s, T_src) for s in srcs])
    tgt_in = torch.tensor([pad([bos] + t, T_tgt) for t in tgts])
    tgt_out = torch.tensor([pad(t + [eos], T_tgt) for t in tgts])
    lengths = [len(s) for s in srcs]
    return Batch(
        src,
        tgt_in,
        tgt_out,
        tl.padding_mask(lengths, T_src),
        lengths,
        [len(t) + 1 for t in tgts],
    )


class ToyTranslator(nn.Module):
    """Embeddings + PE, one encoder layer, one decoder layer, W_vocab.

    X_pos = E_src[src] + PE (eq. x-pos); memory = EncoderLayer(X_pos);
    Y_pos = E_tgt[tgt] + PE (eq. y-pos); Z = DecoderLayer(Y_pos, memory);
    logits = Z W_vocab + b_vocab; P = softmax(logits) (eq. output-softmax).
    """

    def __init__(
        self,
        n_src: int,
        n_tgt: int,
        d_model: int = D_MODEL,
        n_heads: int = N_HEADS,
        d_ff: int = D_FF,
        max_len: int = 16,
    ) -> None:
        super().__init__()
        self.src_emb = nn.Embedding(n_src, d_model)  # entries ~ N(0, 1)
        self.tgt_emb = nn.Embedding(n_tgt, d_model)
        self.encoder = tl.EncoderLayer(d_model, n_heads, d_ff)
        self.decoder = tl.DecoderLayer(d_model, n_heads, d_ff)
        self.out = nn.Linear(d_model, n_tgt)  # W_vocab = out.weight.T
        pe = tl.sinusoidal_positional_encoding(max_len, d_model)
        self.register_buffer("pe", pe, persistent=False)  # (max_len, d)

    def encode(
        self, src: torch.Tensor, src_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """(B, T_src) ids -> Z_encoder_output (B, T_src, d_model)."""
        x_pos = self.src_emb(src) + self.pe[: src.size(1)]
        return self.encoder(x_pos, src_mask)

    def decode(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ):
        """(B, T_tgt) ids -> Z_decoder_output (B, T_tgt, d_model).

        With ``need_weights`` also the self-attention (B, h, T_tgt, T_tgt)
        and cross-attention (B, h, T_tgt, T_src) weights.
        """
        T = tgt.size(1)
        y_pos = self.tgt_emb(tgt) + self.pe[:T]  # (B, T_tgt, d_model)
        causal = tl.causal_mask(T, device=tgt.device)  # (T_tgt, T_tgt)
        return self.decoder(y_pos, memory, causal, src_mask, need_weights)

    def forward(
        self, src: torch.Tensor, tgt: torch.Tensor, src_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Teacher forcing: logits (B, T_tgt, |V|), all positions at once."""
        memory = self.encode(src, src_mask)
        return self.out(self.decode(tgt, memory, src_mask))


def build_toy(seed: int = 0) -> ToyTranslator:
    """An untrained ToyTranslator (seeded; the global RNG is left alone)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return ToyTranslator(len(SRC_VOCAB), len(TGT_VOCAB))


def train_toy(
    toy: ToyTranslator,
    batch: Batch,
    steps: int = 60,
    lr: float = 1e-2,
    snapshots: list[int] = SNAPSHOTS,
):
    """Adam on the loss of eq. dec-loss; every position in one pass a step.

    Returns the loss before each step and ``{step: P}``: the output
    distributions P (B, T_tgt, |V|) after ``step`` updates, for the steps
    in ``snapshots``. Leaves the model in eval mode.
    """
    opt = torch.optim.Adam(toy.parameters(), lr=lr)
    losses, probs = [], {}
    for step in range(steps + 1):
        logits = toy(batch.src, batch.tgt_in, batch.src_mask)  # (B, T, |V|)
        if step in snapshots:
            probs[step] = logits.detach().softmax(dim=-1)
        if step == steps:
            break
        loss = F.cross_entropy(
            logits.flatten(0, 1),  # (B * T, |V|)
            batch.tgt_out.flatten(),  # (B * T,)
            ignore_index=0,
        )  # padded positions
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    toy.eval()
    return losses, probs


def _trained_pair():
    batch = make_batch()
    before = build_toy().eval()
    after = copy.deepcopy(before).train()
    _, probs = train_toy(after, batch)
    return before, after.eval(), batch, probs


def attention_weights(toy: ToyTranslator, batch: Batch):
    """Decoder self- (B, h, T_tgt, T_tgt) and cross- (B, h, T_tgt, T_src)
    attention weights."""
    with torch.no_grad():
        memory = toy.encode(batch.src, batch.src_mask)
        _, w_self, w_cross = toy.decode(
            batch.tgt_in, memory, batch.src_mask, need_weights=True
        )
    return w_self, w_cross


_GREY_BAD = matplotlib.colormaps["viridis"].with_extremes(bad="0.72")


def draw_attention(
    fig, head: int, sentence: str, trained: bool, weights: dict, batch: Batch
) -> HoverGrid:
    """Masked self-attention (a triangle) beside cross-attention (a
    T_tgt x T_src rectangle): one head, one heatmap, masked cells grey."""
    b, i = SENTENCES.index(sentence), head - 1
    w_self, w_cross = weights[trained]
    n = batch.tgt_lengths[b]  # real decoder positions (no padded rows)
    tgt, src = batch.tgt_tokens(b)[:n], batch.src_tokens(b)
    self_w = w_self[b, i, :n, :n].numpy().copy()  # (n, n)
    self_w[~tl.causal_mask(n).numpy()] = np.nan  # the future: masked
    cross_w = w_cross[b, i, :n].numpy().copy()  # (n, T_src)
    cross_w[:, ~batch.src_mask[b, 0, 0].numpy()] = np.nan  # <pad> keys
    gap = np.full((n, 1), np.nan)  # a blank column between the two maps
    ax = fig.add_subplot()
    fig.subplots_adjust(left=0.11, right=0.94, bottom=0.25, top=0.8)
    grid = heatmap(
        ax,
        np.hstack([self_w, gap, cross_w]),
        tgt,
        tgt + [""] + src,
        cmap=_GREY_BAD,
        row_name="query",
        col_name="key: decoder (left), encoder (right)",
    )
    ax.add_patch(Rectangle((n - 0.5, -0.5), 1, n, color="white"))
    for x, text in [
        ((n - 1) / 2, "masked self-attention"),
        (n + 1 + (len(src) - 1) / 2, "cross-attention"),
    ]:
        ax.text(x, -0.6, text, ha="center", va="bottom", fontsize=10)
    state = "trained" if trained else "untrained"
    fig.suptitle(
        f"head {head} of the {state} decoder layer, \u201c{sentence}\u201d",
        fontsize=10.5,
    )
    return grid


def attention_explorer(
    trained: ToyTranslator | None = None, batch: Batch | None = None
) -> Explorer:
    """Head x sentence: both attention maps of a trained toy (8 frames)."""
    if trained is None or batch is None:
        _, trained, batch, _ = _trained_pair()
    weights = {True: attention_weights(trained, batch)}

    def draw(fig, head, sentence):
        return draw_attention(fig, head, sentence, True, weights, batch)

    return Explorer(
        draw,
        {"head": [1, 2, 3, 4], "sentence": SENTENCES},
        labels={"head": "head", "sentence": "source"},
        figsize=(7.6, 3.7),
        dpi=80,
        title="The decoder's two attentions: causal self-attention (left), "
        "cross-attention to the source (right)",
    )


def draw_outputs(fig, step: int, sentence: str, probs: dict, batch: Batch) -> HoverGrid:
    """P (eq. output-softmax) at every real target position; a red box
    marks the correct next token, its probability is written at the right."""
    b = SENTENCES.index(sentence)
    n = batch.tgt_lengths[b]
    p = probs[step][b, :n].numpy()  # (n, |V|)
    correct = batch.tgt_out[b, :n].numpy()  # (n,) label ids
    p_correct = p[np.arange(n), correct]
    ax = fig.add_subplot()
    fig.subplots_adjust(left=0.14, right=0.8, bottom=0.27, top=0.89)
    grid = heatmap(
        ax,
        p,
        batch.tgt_tokens(b)[:n],
        TGT_VOCAB,
        row_name="input at position t",
        col_name="next token",
        colorbar=False,
        title=f"P after {step} training steps, \u201c{sentence}\u201d",
    )
    ax.text(1.02, 1.01, "P(correct)", transform=ax.transAxes, fontsize=9, va="bottom")
    for t, (col, pc) in enumerate(zip(correct, p_correct)):
        ax.add_patch(
            Rectangle(
                (col - 0.5, t - 0.5), 1, 1, fill=False, edgecolor="crimson", lw=1.8
            )
        )
        ax.text(
            1.05,
            (n - 0.5 - t) / n,
            f"{pc:.2f}",
            transform=ax.transAxes,
            fontsize=9.5,
            va="center",
        )
    nll = -np.log(p_correct).mean()  # this sentence's share of eq. dec-loss
    ax.text(
        1.0,
        -0.37,
        f"mean -log P(correct) = {nll:.3f}",
        transform=ax.transAxes,
        ha="right",
        fontsize=9,
    )
    cax = fig.add_axes((0.915, 0.27, 0.015, 0.62))
    fig.colorbar(ax.images[0], cax=cax)
    return grid


def output_explorer(probs: dict | None = None, batch: Batch | None = None) -> Explorer:
    """Training step x sentence: the output distributions (12 frames)."""
    if probs is None or batch is None:
        _, _, batch, probs = _trained_pair()
    steps = sorted(probs)

    def draw(fig, step, sentence):
        return draw_outputs(fig, step, sentence, probs, batch)

    return Explorer(
        draw,
        {"step": steps, "sentence": SENTENCES},
        labels={"step": "training steps", "sentence": "source"},
        figsize=(7.6, 3.9),
        dpi=80,
        title="Teacher forcing: the distribution over the next token at "
        "every position (red box: the correct one)",
    )


EXPLORERS = {"attention": attention_explorer, "outputs": output_explorer}
