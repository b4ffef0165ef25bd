"""The random-weight model whose decoding chapter 12 and ``benchmarks/kv_cache.py``
time, defined once: d_model 128, 4 heads, 2 + 2 layers, d_ff 512, a vocabulary of
1000 and sources of T_SRC = 32 tokens."""

from __future__ import annotations

import torch

from ..configs import TransformerConfig
from ..model import Transformer

BENCH_CONFIG = dict(
    vocab_size=1000, d_model=128, n_heads=4, n_layers=2, d_ff=512, max_len=512
)
T_SRC = 32  # source tokens of the measurements


def bench_config(**overrides) -> TransformerConfig:
    """:data:`BENCH_CONFIG` with ``overrides``, e.g. ``n_kv_heads=2``."""
    return TransformerConfig(**{**BENCH_CONFIG, **overrides})


def bench_model(n_kv_heads: int | None = None, seed: int = 0) -> Transformer:
    """The benchmark model in eval mode, its random weights drawn from ``seed`` (as
    after ``torch.manual_seed(seed)``; the global random state is left as it was)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return Transformer(bench_config(n_kv_heads=n_kv_heads)).eval()
