"""Chapter 9's example: one sentence and one seeded, untrained encoder layer.

:func:`example` builds the sentence, its embedding table and a Post-LN
:class:`~transformer_lib.EncoderLayer`; :func:`with_placement` rewires the same weights
as Post-LN or Pre-LN. The chapter and its explorer follow the sentence through the
layer, tensor by tensor.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn as nn

from ..layers import EncoderLayer

TOKENS = ["the", "cat", "sat", "on", "the", "mat"]
D_MODEL, N_HEADS, D_FF = 16, 4, 64


class Example(NamedTuple):
    tokens: list[str]  # the sentence, one word per token
    vocab: list[str]  # distinct words in order of appearance; id = index
    ids: torch.Tensor  # (1, T) token ids
    embedding: nn.Embedding  # (len(vocab), d_model): X_emb = embedding(ids)
    layer: EncoderLayer  # Post-LN, ReLU, untrained, in eval mode


def example(seed: int = 0) -> Example:
    """The sentence, a seeded embedding table and a seeded Post-LN layer.

    The seed is applied inside ``torch.random.fork_rng``: the global RNG is left as
    it was.
    """
    vocab = list(dict.fromkeys(TOKENS))  # ['the', 'cat', 'sat', 'on', 'mat']
    ids = torch.tensor([[vocab.index(w) for w in TOKENS]])  # (1, T)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        embedding = nn.Embedding(len(vocab), D_MODEL)  # entries ~ N(0, 1)
        layer = EncoderLayer(D_MODEL, N_HEADS, D_FF)
    return Example(list(TOKENS), vocab, ids, embedding, layer.eval())


def with_placement(layer: EncoderLayer, norm_first: bool) -> EncoderLayer:
    """The same weights wired as Post-LN (False) or Pre-LN (True)."""
    mha, ffn = layer.self_attn, layer.ffn
    with torch.random.fork_rng(devices=[]):  # leave the global RNG alone
        new = EncoderLayer(
            mha.d_model,
            mha.n_heads,
            ffn.linear1.out_features,
            norm_first=norm_first,
            activation=ffn.activation,
            eps=layer.self_attn_block.norm.eps,
            n_kv_heads=mha.n_kv_heads,
        )
    new = new.to(ffn.linear1.weight.dtype)  # float64 weights stay float64
    new.load_state_dict(layer.state_dict())  # the LN placement is not a weight
    return new.train(layer.training)
