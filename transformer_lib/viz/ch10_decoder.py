"""Chapter 10 figures: a one-layer encoder-decoder that learns two tiny translations.

``ToyTranslator`` wires embeddings + PE, one :class:`~transformer_lib.EncoderLayer`, one
:class:`~transformer_lib.DecoderLayer` and the output projection (eq. x-pos ... output-softmax).
``train_toy()`` fits it to :data:`PAIRS` with teacher forcing and keeps snapshots of the output
distributions. ``attention_explorer()`` shows the decoder's masked self-attention next to its
cross-attention, per head, before and after training; ``output_explorer()`` shows the output
distribution at every target position as training proceeds.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import transformer_lib as tl

from .explorer import Explorer, HoverGrid, heatmap

PAIRS = [("the cat sits on the mat", "die Katze sitzt auf der Matte"), ("the dog sleeps", "der Hund schläft")]
PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"
SRC_VOCAB = [PAD, "the", "cat", "sits", "on", "mat", "dog", "sleeps"]
TGT_VOCAB = [PAD, BOS, EOS, "die", "Katze", "sitzt", "auf", "der", "Matte", "Hund", "schläft"]
D_MODEL, N_HEADS, D_FF = 16, 4, 64
SNAPSHOTS = [0, 5, 10, 20, 40, 60]  # training steps at which train_toy records the output distributions


@dataclass
class Batch:
    """The padded mini-batch of :data:`PAIRS`; ids index SRC_VOCAB / TGT_VOCAB, 0 is <pad>."""

    src: torch.Tensor  # (B, T_src) source ids, right-padded
    tgt_in: torch.Tensor  # (B, T_tgt) decoder input: <bos> y_1 ... y_{n}, the target shifted right
    tgt_out: torch.Tensor  # (B, T_tgt) labels: y_1 ... y_n <eos>, what each position must predict
    src_mask: torch.Tensor  # (B, 1, 1, T_src) bool, True at real source tokens (eq. padding-mask)
    src_lengths: list[int]
    tgt_lengths: list[int]  # real decoder positions per sentence (target words + 1)

    def src_tokens(self, b: int) -> list[str]:
        return [SRC_VOCAB[i] for i in self.src[b].tolist()]

    def tgt_tokens(self, b: int) -> list[str]:
        return [TGT_VOCAB[i] for i in self.tgt_in[b].tolist()]


def make_batch(pairs: list[tuple[str, str]] = PAIRS) -> Batch:
    """Token ids for ``pairs``, padded on the right to the longest source and target."""
    srcs = [[SRC_VOCAB.index(w) for w in s.split()] for s, _ in pairs]
    tgts = [[TGT_VOCAB.index(w) for w in t.split()] for _, t in pairs]
    T_src, T_tgt = max(map(len, srcs)), max(map(len, tgts)) + 1

    def pad(ids: list[int], T: int) -> list[int]:
        return ids + [0] * (T - len(ids))

    src = torch.tensor([pad(s, T_src) for s in srcs])
    tgt_in = torch.tensor([pad([TGT_VOCAB.index(BOS)] + t, T_tgt) for t in tgts])
    tgt_out = torch.tensor([pad(t + [TGT_VOCAB.index(EOS)], T_tgt) for t in tgts])
    lengths = [len(s) for s in srcs]
    return Batch(src, tgt_in, tgt_out, tl.padding_mask(lengths, T_src), lengths, [len(t) + 1 for t in tgts])


class ToyTranslator(nn.Module):
    """Embeddings + PE, one encoder layer, one decoder layer, then logits over the target vocabulary.

    X_pos = E_src[src] + PE (eq. x-pos); memory = EncoderLayer(X_pos) (eq. enc-attn ... enc-out);
    Y_pos = E_tgt[tgt] + PE (eq. y-pos); Z_decoder_output = DecoderLayer(Y_pos, memory) (eq. dec-*);
    logits = Z_decoder_output W_vocab + b_vocab, and softmax(logits) (eq. output-softmax).
    """

    def __init__(self, n_src: int, n_tgt: int, d_model: int = D_MODEL, n_heads: int = N_HEADS,
                 d_ff: int = D_FF, max_len: int = 16) -> None:
        super().__init__()
        self.src_emb = nn.Embedding(n_src, d_model)  # entries ~ N(0, 1)
        self.tgt_emb = nn.Embedding(n_tgt, d_model)
        self.encoder = tl.EncoderLayer(d_model, n_heads, d_ff)
        self.decoder = tl.DecoderLayer(d_model, n_heads, d_ff)
        self.out = nn.Linear(d_model, n_tgt)  # W_vocab (d_model, |V|) is out.weight.T; b_vocab is out.bias
        self.register_buffer("pe", tl.sinusoidal_positional_encoding(max_len, d_model), persistent=False)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        """(B, T_src) ids -> Z_encoder_output (B, T_src, d_model)."""
        return self.encoder(self.src_emb(src) + self.pe[: src.size(1)], src_mask)

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor | None = None,
               need_weights: bool = False):
        """(B, T_tgt) ids -> Z_decoder_output (B, T_tgt, d_model); with ``need_weights`` also the
        self-attention (B, h, T_tgt, T_tgt) and cross-attention (B, h, T_tgt, T_src) weights."""
        T = tgt.size(1)
        y_pos = self.tgt_emb(tgt) + self.pe[:T]  # (B, T_tgt, d_model)
        return self.decoder(y_pos, memory, tl.causal_mask(T, device=tgt.device), src_mask, need_weights)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Teacher forcing: logits (B, T_tgt, |V|) for every target position in one pass."""
        return self.out(self.decode(tgt, self.encode(src, src_mask), src_mask))


def build_toy(seed: int = 0) -> ToyTranslator:
    """An untrained ToyTranslator for the chapter's vocabularies (seeded without touching the global RNG)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return ToyTranslator(len(SRC_VOCAB), len(TGT_VOCAB))


def train_toy(toy: ToyTranslator, batch: Batch, steps: int = 60, lr: float = 1e-2,
              snapshots: list[int] = SNAPSHOTS) -> tuple[list[float], dict[int, torch.Tensor]]:
    """Adam on the cross-entropy of every real target position, all positions in one pass per step.

    Returns the loss before each step and ``{step: P}``, the output distributions P (B, T_tgt, |V|)
    after ``step`` updates, for every step in ``snapshots``. Leaves the model in eval mode.
    """
    opt = torch.optim.Adam(toy.parameters(), lr=lr)
    losses, probs = [], {}
    for step in range(steps + 1):
        logits = toy(batch.src, batch.tgt_in, batch.src_mask)  # (B, T_tgt, |V|): teacher forcing
        if step in snapshots:
            probs[step] = logits.detach().softmax(dim=-1)
        if step == steps:
            break
        loss = F.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=0)  # pads ignored
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    toy.eval()
    return losses, probs


def _trained_pair() -> tuple[ToyTranslator, ToyTranslator, Batch, dict[int, torch.Tensor]]:
    batch = make_batch()
    before = build_toy().eval()
    after = copy.deepcopy(before).train()
    _, probs = train_toy(after, batch)
    return before, after.eval(), batch, probs


def attention_weights(toy: ToyTranslator, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """The decoder's self-attention (B, h, T_tgt, T_tgt) and cross-attention (B, h, T_tgt, T_src) weights."""
    with torch.no_grad():
        memory = toy.encode(batch.src, batch.src_mask)
        _, w_self, w_cross = toy.decode(batch.tgt_in, memory, batch.src_mask, need_weights=True)
    return w_self, w_cross


def draw_attention(fig, head: int, sentence: int, trained: bool, weights: dict, batch: Batch) -> list[HoverGrid]:
    """Masked self-attention (lower triangle) beside cross-attention (T_tgt x T_src) for one head."""
    b, i = sentence - 1, head - 1
    w_self, w_cross = weights[trained]
    n_t = batch.tgt_lengths[b]  # real decoder positions; padded query rows are left out
    tgt, src = batch.tgt_tokens(b)[:n_t], batch.src_tokens(b)
    self_w = w_self[b, i, :n_t, :n_t].numpy()
    cross_w = w_cross[b, i, :n_t].numpy()
    causal_off = ~tl.causal_mask(n_t).numpy()
    pad_cols = np.broadcast_to(~batch.src_mask[b, 0, 0].numpy(), cross_w.shape)
    ax1, ax2 = fig.subplots(1, 2, gridspec_kw={"width_ratios": [len(tgt), len(src)], "wspace": 0.35})
    fig.subplots_adjust(left=0.1, right=0.85, bottom=0.22, top=0.86)
    state = "trained" if trained else "untrained"
    g1 = heatmap(ax1, self_w, tgt, tgt, title=f"masked self-attention, head {head}", row_name="decoder query",
                 col_name="decoder key", masked=causal_off, colorbar=False)
    g2 = heatmap(ax2, cross_w, tgt, src, title=f"cross-attention, head {head}", row_name="",
                 col_name="encoder key (memory)", masked=pad_cols, colorbar=False)
    ax1.title.set_fontsize(10)
    ax2.title.set_fontsize(10)
    fig.colorbar(ax2.images[0], cax=fig.add_axes((0.875, 0.22, 0.015, 0.64)), label="attention weight")  # one scale, 0..1
    fig.suptitle(f"{state} decoder layer, sentence {sentence}", fontsize=10)
    return [g1, g2]


def attention_explorer(before: ToyTranslator | None = None, after: ToyTranslator | None = None,
                       batch: Batch | None = None) -> Explorer:
    """Head x sentence x trained: the two attention maps of the decoder layer (4 x 2 x 2 = 16 frames)."""
    if before is None or after is None or batch is None:
        before, after, batch, _ = _trained_pair()
    weights = {False: attention_weights(before, batch), True: attention_weights(after, batch)}

    def draw(fig, head, sentence, trained):
        return draw_attention(fig, head, sentence, trained, weights, batch)

    return Explorer(
        draw,
        {"head": [1, 2, 3, 4], "sentence": [1, 2], "trained": [True, False]},
        labels={"head": "head", "sentence": "sentence", "trained": "after training"},
        figsize=(8.4, 3.6),
        dpi=80,
        title="The decoder's two attentions: causal self-attention (left), cross-attention to the source (right)",
    )


def draw_outputs(fig, step: int, sentence: int, probs: dict, batch: Batch) -> HoverGrid:
    """P (eq. output-softmax) at every real target position; a box marks the correct next token."""
    b = sentence - 1
    n_t = batch.tgt_lengths[b]
    p = probs[step][b, :n_t].numpy()  # (n_t, |V|)
    ax = fig.add_subplot()
    fig.subplots_adjust(left=0.14, right=0.82, bottom=0.27, top=0.88)
    labels = batch.tgt_tokens(b)[:n_t]
    grid = heatmap(ax, p, labels, TGT_VOCAB, row_name="input token at position t", col_name="next token",
                   colorbar=False, title=f"output distribution P after {step} training steps, sentence {sentence}")
    ax.title.set_fontsize(10)
    correct = batch.tgt_out[b, :n_t].numpy()
    p_correct = p[np.arange(n_t), correct]
    ax.text(1.02, 1.01, "P(correct)", transform=ax.transAxes, fontsize=8, va="bottom")
    for t, (col, pc) in enumerate(zip(correct, p_correct)):
        ax.add_patch(_box(col, t))
        ax.text(1.04, (n_t - 0.5 - t) / n_t, f"{pc:.2f}", transform=ax.transAxes, fontsize=8, va="center")
    ax.text(1.0, -0.36, f"mean -log P(correct) = {-np.log(p_correct).mean():.3f}", transform=ax.transAxes,
            ha="right", fontsize=8)
    fig.colorbar(ax.images[0], cax=fig.add_axes((0.905, 0.27, 0.015, 0.61)))
    return grid


def _box(col: int, row: int):
    from matplotlib.patches import Rectangle

    return Rectangle((col - 0.5, row - 0.5), 1, 1, fill=False, edgecolor="crimson", lw=1.8)


def output_explorer(probs: dict | None = None, batch: Batch | None = None) -> Explorer:
    """Training step x sentence: how the output distributions sharpen (6 x 2 = 12 frames)."""
    if probs is None or batch is None:
        _, _, batch, probs = _trained_pair()
    steps = sorted(probs)

    def draw(fig, step, sentence):
        return draw_outputs(fig, step, sentence, probs, batch)

    return Explorer(
        draw,
        {"step": steps, "sentence": [1, 2]},
        defaults={"step": steps[0]},
        labels={"step": "training steps", "sentence": "sentence"},
        figsize=(7.6, 3.9),
        dpi=80,
        title="Teacher forcing: the distribution over the next token at every position (red box: the correct one)",
    )


EXPLORERS = {"attention": attention_explorer, "outputs": output_explorer}
