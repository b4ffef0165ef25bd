"""The book's two language models on real text: a Chinese character model and an
English byte-level BPE model, both :class:`~transformer_lib.GPT` with the modern block
of chapter 16 (RMSNorm, SwiGLU, RoPE).

Why the modern block: RoPE has no position table, so the same file can be asked to read
past its trained context (chapter 17's measurement), and the page's engine already runs
it; RMSNorm and the gated FFN train at least as well as GPT-2's block at this size.

Everything here is seeded: :func:`train_language_model` gives the same weights and the
same losses from the same seed and corpus (``scripts/train_language_models.py`` runs it
and writes the weights and the log to ``book/_static/live/``).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import torch

from ..configs import GPTConfig
from ..gpt import GPT
from ..tokens import BPETokenizer, CharTokenizer, train_bpe
from . import corpora
from .lm import train_lm

SEPARATOR = "\n\n"  # between two passages of the stream


@dataclass(frozen=True)
class Recipe:
    """How one model is trained: its corpus, tokenizer and sizes."""

    name: str  # the file's name in book/_static/live/
    language: str  # "zh" or "en"
    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int
    context: int  # max_len, and the length of a training window
    steps: int
    batch_size: int
    lr: float
    bpe_vocab: int = 0  # English: the BPE vocabulary; 0 for characters
    min_count: int = 2  # Chinese: a character seen fewer times is the unknown token
    seed: int = 0

    def config(self, vocab_size: int) -> GPTConfig:
        # Llama's block (chapter 16), but RoPE's interleaved pairs, tied embeddings and
        # a wider initialisation: the choices the committed models were trained with
        return GPTConfig.llama(
            vocab_size=vocab_size,
            d_model=self.d_model,
            n_heads=self.n_heads,
            n_layers=self.n_layers,
            d_ff=self.d_ff,
            max_len=self.context,
            rope_layout="interleaved",
            tie_embeddings=True,
            init_std=0.04,
        )


RECIPES = {
    "lm_zh": Recipe(
        "lm_zh", "zh", d_model=96, n_layers=3, n_heads=4, d_ff=256, context=64,
        steps=700, batch_size=16, lr=3e-3, min_count=3,
    ),
    "lm_en": Recipe(
        "lm_en", "en", d_model=96, n_layers=3, n_heads=4, d_ff=256, context=64,
        steps=4000, batch_size=16, lr=3e-3, bpe_vocab=1024,
    ),
}  # fmt: skip


def make_tokenizer(recipe: Recipe, train: list[str]) -> CharTokenizer | BPETokenizer:
    """The tokenizer learnt from the training split only."""
    if recipe.language == "zh":
        counts = Counter(SEPARATOR.join(train))
        return CharTokenizer(
            sorted(c for c, n in counts.items() if n >= recipe.min_count)
        )
    return train_bpe(train, recipe.bpe_vocab)


def stream(tokenizer, passages: list[str]) -> torch.Tensor:
    """The passages joined by a blank line, as one long tensor of ids."""
    return torch.tensor(tokenizer.encode(SEPARATOR.join(passages)), dtype=torch.long)


def window_batches(ids: torch.Tensor, context: int):
    """batch_fn for :func:`~transformer_lib.demos.lm.train_lm`: windows of
    ``context`` tokens at offsets drawn from the generator."""
    if ids.numel() <= context:
        raise ValueError(
            f"the stream has {ids.numel()} tokens, need more than {context}"
        )

    def batch_fn(batch_size: int, gen: torch.Generator):
        starts = torch.randint(0, ids.numel() - context, (batch_size,), generator=gen)
        tokens = torch.stack([ids[s : s + context] for s in starts.tolist()])
        return tokens, torch.ones_like(tokens, dtype=torch.bool)

    return batch_fn


@dataclass
class Prepared:
    recipe: Recipe
    tokenizer: CharTokenizer | BPETokenizer
    train: list[str]
    held_out: list[str]
    train_ids: torch.Tensor
    held_ids: torch.Tensor


def prepare(recipe: Recipe, root=corpora.FORTUNES) -> Prepared:
    """Corpus, split, tokenizer and the two id streams of ``recipe``."""
    train, held = corpora.corpus(recipe.language, root)
    tok = make_tokenizer(recipe, train)
    return Prepared(recipe, tok, train, held, stream(tok, train), stream(tok, held))


def train_language_model(
    prep: Prepared,
    *,
    steps: int | None = None,
    num_threads: int | None = 2,
    max_seconds: float | None = None,
) -> tuple[GPT, dict]:
    """Train the recipe's model (``steps`` overrides the recipe's; the learning-rate
    schedule is always the recipe's full one, so the first steps of a short run are
    the first steps of the full run)."""
    r = prep.recipe
    cfg = r.config(len(prep.tokenizer))
    model, history = train_lm(
        cfg,
        window_batches(prep.train_ids, r.context),
        steps=r.steps,
        batch_size=r.batch_size,
        lr=r.lr,
        warmup=100,
        seed=r.seed,
        num_threads=num_threads,
        max_seconds=max_seconds,
        stop_after=steps,
    )
    return model, history


@torch.no_grad()
def model_bits(model: GPT, ids: torch.Tensor, context: int | None = None) -> float:
    """Total bits -sum log2 p(x_t | x_<t) of ``ids`` after the first token, read in
    windows of ``context`` + 1 tokens that overlap by one (each token is predicted
    once, from at most ``context`` tokens before it in its window)."""
    context = context or model.cfg.max_len
    total, start = 0.0, 0
    model.eval()
    while start < ids.numel() - 1:
        chunk = ids[start : start + context + 1]
        logits = model(chunk[None, :-1])[0]  # (T, V)
        logp = torch.log_softmax(logits.double(), dim=-1)
        total -= logp.gather(1, chunk[1:, None]).sum().item()
        start += context
    return total / math.log(2)


def ngram_bits(
    train_ids: torch.Tensor,
    held_ids: torch.Tensor,
    vocab_size: int,
    order: int,
    alpha: float = 0.1,
) -> float:
    """Total bits of ``held_ids`` after the first token under a unigram (order 1) or
    bigram (order 2) model counted on ``train_ids``, add-``alpha`` smoothed; the
    bigram is interpolated with the unigram (weight lambda = n(prev) / (n(prev) + 10))
    so that an unseen previous token falls back to the unigram."""
    V = vocab_size
    uni = torch.bincount(train_ids, minlength=V).double()
    p_uni = (uni + alpha) / (uni.sum() + alpha * V)
    target = held_ids[1:]
    if order == 1:
        return -torch.log2(p_uni[target]).sum().item()
    if order != 2:
        raise ValueError(f"order must be 1 or 2, got {order}")
    pairs = train_ids[:-1] * V + train_ids[1:]
    big = torch.bincount(pairs, minlength=V * V).double().view(V, V)
    prev = held_ids[:-1]
    n_prev = big.sum(1)[prev]
    p_big = (big[prev, target] + alpha * p_uni[target] * V) / (n_prev + alpha * V)
    lam = n_prev / (n_prev + 10.0)
    p = lam * p_big + (1 - lam) * p_uni[target]
    return -torch.log2(p).sum().item()
