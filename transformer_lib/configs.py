"""The hyperparameters of the book's two model families, each a dataclass with a comment
per field: :class:`TransformerConfig` (the encoder-decoder, chapters 11-12) and
:class:`GPTConfig` (the decoder-only models, chapters 14-17). Bad values raise when the
config is made, with the value named."""

from __future__ import annotations

from dataclasses import dataclass

from ._validate import check_divisible
from .feed_forward import ACTIVATIONS
from .positional import ROPE_LAYOUTS


def _check_sizes(cfg: TransformerConfig | GPTConfig) -> None:
    """The sizes both configs share: at least 1, d_model divisible by the heads; writes
    n_heads into an n_kv_heads of None."""
    check_divisible(cfg.d_model, cfg.n_heads, cfg.n_kv_heads)
    if cfg.n_kv_heads is None:
        cfg.n_kv_heads = cfg.n_heads
    for name in ("vocab_size", "n_layers", "d_ff", "max_len"):
        if getattr(cfg, name) < 1:
            raise ValueError(f"{name} must be >= 1, got {getattr(cfg, name)}")


@dataclass(kw_only=True)
class TransformerConfig:
    """Hyperparameters of :class:`Transformer` (the paper's base model: d_model=512,
    n_heads=8, n_layers=6, d_ff=2048)."""

    vocab_size: int  # number of token ids, the special ids (pad, bos) included
    d_model: int  # width of the residual stream and of every embedding
    n_heads: int  # attention heads h in every attention sublayer; d_k = d_model / h
    # K/V heads h_kv for GQA (1: MQA). None means n_heads (plain multi-head) and is
    # replaced by that number when the config is made.
    n_kv_heads: int | None = None
    n_layers: int  # N: encoder layers, and as many decoder layers
    d_ff: int  # hidden width of every feed-forward network (usually 4 * d_model)
    # longest source or target sequence: rows of the positional-encoding table
    max_len: int
    # False: Post-LN, the paper's; True: Pre-LN, plus a final LayerNorm per stack
    norm_first: bool = False
    activation: str = "relu"  # FFN nonlinearity, "relu" or "gelu"
    bos_id: int = 1  # the token every decoder input starts with
    pad_id: int = 0  # the padding token
    # dropout on embeddings, attention weights and sublayer outputs (training only)
    dropout: float = 0.0

    def __post_init__(self) -> None:
        _check_sizes(self)
        for name in ("bos_id", "pad_id"):
            if not 0 <= getattr(self, name) < self.vocab_size:
                raise ValueError(
                    f"{name}={getattr(self, name)} is not a token id in "
                    f"[0, vocab_size={self.vocab_size})"
                )
        if self.bos_id == self.pad_id:
            raise ValueError(f"bos_id and pad_id must differ, both are {self.bos_id}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {sorted(ACTIVATIONS)}, "
                f"got {self.activation!r}"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {self.dropout}")

    @property
    def d_k(self) -> int:
        """d_k = d_model / h, the width of one head's queries, keys and values."""
        return self.d_model // self.n_heads


POSITIONS = ("learned", "sinusoidal", "rope", "none")
NORMS = ("layernorm", "rmsnorm")


@dataclass(kw_only=True)
class GPTConfig:
    """Hyperparameters of :class:`GPT`. The defaults are GPT-2's choices; Llama's are
    ``positions="rope", norm="rmsnorm", activation="silu", gated=True, bias=False,
    tie_embeddings=False`` (see :meth:`gpt2_small` and :meth:`llama`)."""

    vocab_size: int  # V, number of token ids
    d_model: int  # width of the residual stream and of the token embeddings
    n_heads: int  # h, query heads per attention layer; d_k = d_model / h
    n_layers: int  # N, decoder blocks
    d_ff: int  # hidden width of every feed-forward network
    max_len: int  # most positions a sequence may use (rows of a position table)
    # h_kv, K/V heads (GQA; 1 is MQA); None means n_heads, set in __post_init__
    n_kv_heads: int | None = None
    # "learned" (GPT-2), "sinusoidal" (the 2017 paper), "rope" (Llama) or "none"
    positions: str = "learned"
    norm: str = "layernorm"  # "layernorm" (GPT-2) or "rmsnorm" (Llama)
    norm_eps: float = 1e-5  # eps of every norm (GPT-2, Llama 2 and 3; LLaMA-1: 1e-6)
    # FFN nonlinearity: "gelu_tanh" (GPT-2), "silu" (Llama), "gelu" or "relu"
    activation: str = "gelu_tanh"
    gated: bool = False  # True: the gated FFN (eq. glu-ffn), SwiGLU with "silu"
    bias: bool = True  # biases of the attention and FFN linear maps
    attn_bias: bool | None = None  # overrides ``bias`` for W_Q, W_K, W_V, W_O
    ffn_bias: bool | None = None  # overrides ``bias`` for the FFN
    tie_embeddings: bool = True  # W_out = E^T (GPT-2) or its own matrix (Llama)
    # what generate writes after a row's end-of-sequence token; None: eos_id itself, as
    # transformers does for a model without a pad token (GPT-2, Llama)
    pad_id: int | None = None
    rope_base: float = 10000.0  # RoPE's base, ``rope_theta`` (Llama 3: 500000)
    rope_layout: str = "interleaved"  # RoPE pairs: "interleaved" or "half" (Llama's)
    # dropout on the embeddings, attention weights and sublayer outputs (training)
    dropout: float = 0.0
    # std of the weights at initialisation (GPT-2: 0.02, about 1/sqrt(d_model) at
    # d_model = 768; a narrow model learns faster with a larger one)
    init_std: float = 0.02

    def __post_init__(self) -> None:
        _check_sizes(self)
        choices = {
            "positions": POSITIONS,
            "norm": NORMS,
            "activation": tuple(sorted(ACTIVATIONS)),
            "rope_layout": ROPE_LAYOUTS,
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"{name} must be one of {allowed}, got {getattr(self, name)!r}"
                )
        if self.positions == "rope" and self.d_k % 2:
            raise ValueError(
                f"RoPE rotates pairs of features, so d_k = d_model / n_heads must be "
                f"even, got d_k={self.d_k} (d_model={self.d_model}, "
                f"n_heads={self.n_heads})"
            )
        if not self.rope_base > 1.0:
            raise ValueError(f"rope_base must be > 1, got {self.rope_base}")
        if not self.norm_eps >= 0.0:
            raise ValueError(f"norm_eps must be >= 0, got {self.norm_eps}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {self.dropout}")
        if not self.init_std > 0.0:
            raise ValueError(f"init_std must be > 0, got {self.init_std}")

    @property
    def d_k(self) -> int:
        """Per-head width d_k = d_model / n_heads."""
        return self.d_model // self.n_heads

    @property
    def use_attn_bias(self) -> bool:
        return self.bias if self.attn_bias is None else self.attn_bias

    @property
    def use_ffn_bias(self) -> bool:
        return self.bias if self.ffn_bias is None else self.ffn_bias

    @classmethod
    def gpt2_small(cls, **overrides) -> GPTConfig:
        """GPT-2 small ("124M"): V = 50257, d_model = 768, 12 heads, 12 layers,
        d_ff = 3072, 1024 positions, learned positions, tied embeddings."""
        kw = dict(
            vocab_size=50257,
            d_model=768,
            n_heads=12,
            n_layers=12,
            d_ff=3072,
            max_len=1024,
        )
        return cls(**{**kw, **overrides})

    @classmethod
    def llama(cls, **overrides) -> GPTConfig:
        """Llama's choices around sizes you give: RoPE in the half layout, RMSNorm
        with eps 1e-5 (Llama 2 and 3's ``rms_norm_eps``; LLaMA-1 used 1e-6), SwiGLU,
        no biases, untied embeddings. Pass vocab_size, d_model, n_heads, n_layers, d_ff
        and max_len (and n_kv_heads for GQA, rope_base=5e5 for Llama 3)."""
        kw = dict(
            positions="rope",
            rope_layout="half",
            norm="rmsnorm",
            norm_eps=1e-5,
            activation="silu",
            gated=True,
            bias=False,
            tie_embeddings=False,
        )
        return cls(**{**kw, **overrides})

    def param_count(self) -> dict[str, int]:
        """Parameters of :class:`GPT` by part, counted from the formulas
        (eq. gpt-params); "total" counts a tied matrix once.

        Per block: attention d (h + 2 h_kv) d_k + h d_k d (plus biases), FFN 2 d d_ff
        (3 d d_ff gated, plus biases), two norms of 2d (LayerNorm) or d (RMSNorm).
        """
        d, hd, kvd = self.d_model, self.n_heads * self.d_k, self.n_kv_heads * self.d_k
        norm = 2 * d if self.norm == "layernorm" else d
        attn = d * hd + 2 * d * kvd + hd * d
        if self.use_attn_bias:
            attn += hd + 2 * kvd + d
        n_mats = 3 if self.gated else 2
        ffn = n_mats * d * self.d_ff
        if self.use_ffn_bias:
            ffn += (n_mats - 1) * self.d_ff + d
        parts = {
            "token_embedding": self.vocab_size * d,
            "position_embedding": self.max_len * d
            if self.positions == "learned"
            else 0,
            "attention": self.n_layers * attn,
            "feed_forward": self.n_layers * ffn,
            "norms": (2 * self.n_layers + 1) * norm,
            "lm_head": 0 if self.tie_embeddings else self.vocab_size * d,
        }
        parts["total"] = sum(parts.values())
        return parts
