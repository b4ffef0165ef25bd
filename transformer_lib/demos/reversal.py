"""A toy task for the whole model: reverse a sequence of symbols (chapter 11).

Token ids: 0 = pad, 1 = BOS, 2 ... vocab_size - 1 = the symbols,
shown as the letters a, b, c, ...
A fixed hash sends about one sequence in eight to a held-out "test" split, so a model
trained on ``split="train"`` is evaluated on sequences it has never seen.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..configs import TransformerConfig
from ..model import Transformer
from .training import train, warmup_cosine

PAD_ID, BOS_ID, FIRST_SYMBOL = 0, 1, 2
# a sequence is held out when its hash mod 101 is below 13 (~12.9 %)
_HASH_MOD, _TEST_BELOW = 101, 13


def token_labels(ids) -> list[str]:
    """Readable names of token ids: '<pad>', '<bos>', and 'a', 'b', ...
    for the symbols."""
    names = {PAD_ID: "<pad>", BOS_ID: "<bos>"}
    return [
        names.get(int(i), chr(ord("a") + int(i) - FIRST_SYMBOL))
        for i in torch.as_tensor(ids).flatten()
    ]


def is_test_sequence(src: torch.Tensor) -> torch.Tensor:
    """(B, T) symbols -> (B,) bool: True for the sequences held out of training
    (a fixed polynomial hash)."""
    powers = torch.tensor(
        [pow(3, i, _HASH_MOD) for i in range(src.size(1))],
        dtype=torch.long,
        device=src.device,
    )
    return (src.long() * powers).sum(dim=1) % _HASH_MOD < _TEST_BELOW


def reversal_batch(
    batch_size: int,
    length: int = 8,
    generator: torch.Generator | None = None,
    *,
    vocab_size: int = 12,
    split: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random symbol sequences and their reversals: (src, tgt_in, tgt_out), each
    (batch_size, length).

    tgt_out = src.flip(1); tgt_in = BOS followed by tgt_out[:, :-1] (teacher forcing).
    Symbols are ids FIRST_SYMBOL ... vocab_size - 1, never pad or BOS. ``split`` "train"
    or "test" keeps only the sequences of that split (rejection sampling); None takes
    any sequence.
    """
    if vocab_size <= FIRST_SYMBOL:
        raise ValueError(
            f"vocab_size={vocab_size} leaves no symbols: ids 0 and 1 are pad and BOS"
        )
    if length < 1 or batch_size < 0:
        raise ValueError(
            "need length >= 1 and batch_size >= 0, "
            f"got length={length}, batch_size={batch_size}"
        )
    if split not in (None, "train", "test"):
        raise ValueError(f"split must be None, 'train' or 'test', got {split!r}")
    rows, have = [], 0
    while have < batch_size or not rows:
        src = torch.randint(
            FIRST_SYMBOL,
            vocab_size,
            (max(batch_size, 1) * (1 if split is None else 2), length),
            generator=generator,
        )
        if split is not None:
            src = src[is_test_sequence(src) == (split == "test")]
        rows.append(src)
        have += src.size(0)
    src = torch.cat(rows)[:batch_size]  # (B, T)
    tgt_out = src.flip(1)  # (B, T): the reversed sequence
    bos = torch.full((batch_size, 1), BOS_ID, dtype=src.dtype)
    # (B, T): shifted right by one, BOS first
    tgt_in = torch.cat([bos, tgt_out[:, :-1]], dim=1)
    return src, tgt_in, tgt_out


def reversal_config(
    length: int = 8, vocab_size: int = 12, **overrides
) -> TransformerConfig:
    """The small model chapter 11 trains: 2 + 2 layers, d_model = 64, 4 heads."""
    kw = dict(
        vocab_size=vocab_size,
        d_model=64,
        n_heads=4,
        n_layers=2,
        d_ff=128,
        max_len=max(length, 16),
        bos_id=BOS_ID,
        pad_id=PAD_ID,
    )
    kw.update(overrides)
    return TransformerConfig(**kw)


def random_model(seed: int = 0, **overrides) -> Transformer:
    """The untrained model of :func:`reversal_config`, in eval mode: random weights
    drawn from ``seed`` (the global random state is left as it was)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return Transformer(reversal_config(**overrides)).eval()


@torch.no_grad()
def reversal_accuracy(model: Transformer, src: torch.Tensor) -> float:
    """Token accuracy of greedy decoding, ``model.generate(src, src.size(1))`` against
    ``src.flip(1)``."""
    was_training = model.training
    model.eval()
    pred = model.generate(src, src.size(1))
    model.train(was_training)
    return (pred == src.flip(1)).float().mean().item()


def antidiagonal_fraction(cross: torch.Tensor) -> torch.Tensor:
    """cross-attention weights (B, h, T, T) of a reversal model -> (h,): for each head,
    the fraction of output positions i whose most attended input position is the
    mirrored one, T - 1 - i."""
    B, h, T_q, T_k = cross.shape
    mirrored = torch.arange(T_q - 1, -1, -1, device=cross.device)  # (T,): T - 1 - i
    # (B, h, T) -> (h,)
    return (cross.argmax(dim=-1) == mirrored).float().mean(dim=(0, 2))


def train_reversal(
    seed: int = 0,
    *,
    steps: int = 300,
    batch_size: int = 64,
    length: int = 8,
    vocab_size: int = 12,
    lr: float = 3e-3,
    warmup: int = 60,
    cfg: TransformerConfig | None = None,
    n_eval: int = 1000,
    num_threads: int | None = 1,
) -> tuple[Transformer, dict]:
    """Train a :class:`Transformer` to reverse sequences, on the CPU, with Adam and
    teacher forcing.

    Loss: the cross-entropy of the next symbol at every target position
    (eq. toy-loss), in the demos' one loop,
    :func:`~transformer_lib.demos.training.train`. The learning rate rises linearly
    for ``warmup`` steps, then decays to zero along a cosine
    (:func:`~transformer_lib.demos.training.warmup_cosine` with ``floor=0``).
    Returns the model (in eval mode) and a history with, per step, "loss", "accuracy"
    (teacher-forced token accuracy of the batch) and "lr"; "seconds" and
    "cpu_seconds" (wall-clock and CPU time of the training loop), and "test_accuracy"
    (greedy decoding of ``n_eval`` held-out sequences). Seeded; the global random
    state is left untouched. ``num_threads``: torch threads while training, as in
    ``train``.
    """
    cfg = cfg or reversal_config(length, vocab_size)
    gen = torch.Generator().manual_seed(seed)
    # the initial weights come from `seed`, the caller's RNG state is restored
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Transformer(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)

    def loss_fn(step: int) -> tuple[torch.Tensor, dict[str, float]]:
        src, tgt_in, tgt_out = reversal_batch(
            batch_size, length, gen, vocab_size=cfg.vocab_size, split="train"
        )
        logits = model(src, tgt_in)  # (B, T, vocab)
        # mean over B * T targets
        loss = F.cross_entropy(logits.reshape(-1, cfg.vocab_size), tgt_out.reshape(-1))
        accuracy = (logits.argmax(-1) == tgt_out).float().mean().item()
        return loss, {"accuracy": accuracy}

    history = train(
        model,
        loss_fn,
        opt,
        steps=steps,
        lr_at=lambda step: warmup_cosine(step, steps, lr, warmup, floor=0.0),
        num_threads=num_threads,
    )
    test_src, _, _ = reversal_batch(
        n_eval, length, gen, vocab_size=cfg.vocab_size, split="test"
    )
    history["test_accuracy"] = reversal_accuracy(model, test_src)
    return model, history
