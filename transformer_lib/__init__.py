"""transformer_lib: the Transformer of "The Transformer, Formula by Formula",
one formula per function.

Dimension legend, used everywhere in the library and the book:

    B           batch size
    T           sequence length (T_q queries, T_k keys;
                T_src / T_tgt in the encoder-decoder)
    d_model     width of the residual stream
    h           number of (query) heads; argument ``n_heads``
    h_kv        number of K/V heads (GQA; 1 is MQA); argument ``n_kv_heads``
    d_k         per-head width of queries and keys, d_model / h;
                d_v per-head width of values (= d_k here)
    d_ff        hidden width of the feed-forward network

The names and the layering of the modules are in ARCHITECTURE.md at the root of the
repository. The root namespace holds the core, in the book's order: the formulas, the
heads, the cache, the layers, the models, sampling, flash attention and the
``transformers`` bridge. Demo code, checkers and figures are imported explicitly:
``from transformer_lib.demos import reversal``, ``from transformer_lib import viz``.

Everything is batch-first, (B, T, d_model). Masks are bool with True = may attend, the
convention of ``F.scaled_dot_product_attention``. Plotting and widgets live in
``transformer_lib.viz`` so that importing this package needs neither matplotlib nor
ipywidgets.
"""

from . import parallel  # attention across processes (chapter 18), tl.parallel.*
from .attention import (
    attention_scores,
    fused_attention,
    scaled_dot_product_attention,
    softmax,
)
from .configs import GPTConfig, TransformerConfig
from .costs import decode_step_macs, generate_macs, hbm_traffic, kv_cache_nbytes
from .export import export_model, load_exported, load_tokenizer, read_metadata
from .feed_forward import FeedForward, gelu_tanh, silu
from .flash import online_softmax, tiled_attention
from .generation import decode_loop
from .gpt import GPT, causal_lm_loss
from .heads import (
    MultiHeadAttention,
    merge_heads,
    multi_head_attention,
    repeat_kv,
    split_heads,
)
from .hf import hf_to_tl
from .kv_cache import CacheSlot, KVCache, cached_attention_step
from .layers import DecoderLayer, EncoderLayer, GPTBlock, Residual
from .masks import causal_mask, key_padding_to_attend, padding_mask
from .model import Transformer, time_decoding
from .norm import LayerNorm, RMSNorm, layer_norm, layer_norm_article, rms_norm
from .positional import (
    alibi_bias,
    alibi_slopes,
    apply_rope,
    rope_angles,
    rope_permutation,
    sinusoidal_positional_encoding,
)
from .sampling import next_token_probs, sample_next, top_k_filter, top_p_filter
from .tokens import BPETokenizer, CharTokenizer, train_bpe

__all__ = [
    # the formulas (chapters 2-8)
    "softmax",
    "attention_scores",
    "scaled_dot_product_attention",
    "fused_attention",
    "causal_mask",
    "padding_mask",
    "key_padding_to_attend",
    "FeedForward",
    "gelu_tanh",
    "silu",
    "layer_norm",
    "layer_norm_article",
    "LayerNorm",
    "rms_norm",
    "RMSNorm",
    "sinusoidal_positional_encoding",
    "rope_angles",
    "apply_rope",
    "rope_permutation",
    "alibi_slopes",
    "alibi_bias",
    # the heads (chapter 5)
    "split_heads",
    "merge_heads",
    "repeat_kv",
    "multi_head_attention",
    "MultiHeadAttention",
    # the cache and its costs (chapters 5, 12)
    "kv_cache_nbytes",
    "decode_step_macs",
    "generate_macs",
    "cached_attention_step",
    "KVCache",
    "CacheSlot",
    # the layers (chapters 9, 10, 14)
    "Residual",
    "EncoderLayer",
    "DecoderLayer",
    "GPTBlock",
    # the models (chapters 11, 12, 14, 16)
    "TransformerConfig",
    "Transformer",
    "time_decoding",
    "GPTConfig",
    "GPT",
    "causal_lm_loss",
    # a trained model as one .safetensors file, for the site's live panels (ch 11, 14)
    "export_model",
    "load_exported",
    "read_metadata",
    "load_tokenizer",
    # tokens: characters and byte-level BPE (the language models)
    "CharTokenizer",
    "BPETokenizer",
    "train_bpe",
    # sampling and the decoding loop (chapters 11, 12, 15)
    "top_k_filter",
    "top_p_filter",
    "next_token_probs",
    "sample_next",
    "decode_loop",
    # flash attention (chapter 13)
    "online_softmax",
    "tiled_attention",
    "hbm_traffic",
    # the transformers bridge (chapter 16)
    "hf_to_tl",
    # attention across processes: ring attention, tensor parallelism
    "parallel",
]
