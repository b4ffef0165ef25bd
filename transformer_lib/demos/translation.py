"""A one-layer encoder-decoder that learns two translations (chapter 10).

:class:`ToyTranslator` wires embeddings + PE, one
:class:`~transformer_lib.EncoderLayer`, one :class:`~transformer_lib.DecoderLayer` and
the output projection (eq. x-pos ... output-softmax). :func:`make_batch` pads
:data:`PAIRS` into one mini-batch, and :func:`train_toy` fits the model to it with
teacher forcing, keeping snapshots of the output distributions for the chapter's
explorer.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..layers import DecoderLayer, EncoderLayer
from ..masks import causal_mask, padding_mask
from ..positional import sinusoidal_positional_encoding
from .training import train

PAIRS = [
    ("the cat sits on the mat", "die Katze sitzt auf der Matte"),
    ("the dog sleeps", "der Hund schläft"),
]
SENTENCES = [src for src, _ in PAIRS]  # the source sentences
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
    src_mask = padding_mask(lengths, T_src)
    return Batch(src, tgt_in, tgt_out, src_mask, lengths, [len(t) + 1 for t in tgts])


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
        self.encoder = EncoderLayer(d_model, n_heads, d_ff)
        self.decoder = DecoderLayer(d_model, n_heads, d_ff)
        self.out = nn.Linear(d_model, n_tgt)  # W_vocab = out.weight.T
        pe = sinusoidal_positional_encoding(max_len, d_model)
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
        causal = causal_mask(T, device=tgt.device)  # (T_tgt, T_tgt)
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
) -> tuple[list[float], dict[int, torch.Tensor]]:
    """Adam on the loss of eq. dec-loss, every position in one pass a step, in the
    demos' one loop, :func:`~transformer_lib.demos.training.train`.

    Returns the loss before each step and ``{step: P}``: the output
    distributions P (B, T_tgt, |V|) after ``step`` updates, for the steps
    in ``snapshots``. Leaves the model in eval mode.
    """
    probs = {}

    def loss_fn(step: int) -> tuple[torch.Tensor, dict[str, float]]:
        logits = toy(batch.src, batch.tgt_in, batch.src_mask)  # (B, T, |V|)
        if step in snapshots:
            probs[step] = logits.detach().softmax(dim=-1)
        loss = F.cross_entropy(
            logits.flatten(0, 1),  # (B * T, |V|)
            batch.tgt_out.flatten(),  # (B * T,)
            ignore_index=0,  # padded positions
        )
        return loss, {}

    opt = torch.optim.Adam(toy.parameters(), lr=lr)
    history = train(toy, loss_fn, opt, steps=steps, num_threads=None)
    if steps in snapshots:  # after the last update
        with torch.no_grad():
            probs[steps] = toy(batch.src, batch.tgt_in, batch.src_mask).softmax(-1)
    return history["loss"], probs


def trained_toy() -> tuple[ToyTranslator, Batch, dict[int, torch.Tensor]]:
    """(the model trained by :func:`train_toy` from :func:`build_toy`, the batch, the
    snapshots of P): what the chapter computes, for the explorers' defaults."""
    batch = make_batch()
    toy = build_toy().train()
    with torch.enable_grad():
        _, probs = train_toy(toy, batch)
    return toy, batch, probs


def attention_weights(
    toy: ToyTranslator, batch: Batch
) -> tuple[torch.Tensor, torch.Tensor]:
    """Decoder self- (B, h, T_tgt, T_tgt) and cross- (B, h, T_tgt, T_src) attention
    weights of the whole batch."""
    with torch.no_grad():
        memory = toy.encode(batch.src, batch.src_mask)
        _, w_self, w_cross = toy.decode(
            batch.tgt_in, memory, batch.src_mask, need_weights=True
        )
    return w_self, w_cross
