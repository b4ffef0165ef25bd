"""tl.GPT: its config and parameter counts, causality and attention maps, cached against
uncached decoding, end of sequence, the RoPE layouts through the permutation, the causal
LM loss, and GPT.from_hf against transformers' GPT-2 and Llama over several configs
(logits in float64 and greedy tokens with the cache).

Every transformers model is built from a config with random weights; nothing is
downloaded.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import types

import pytest
import torch
import torch.nn.functional as F
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

import transformer_lib as tl

F64 = torch.float64


# tiny models: one torch thread (the fixture is in tests/conftest.py)
pytestmark = pytest.mark.usefixtures("one_thread")


def exact(a, b):
    torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def tokens(B, T, V, seed=0):
    return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))


def small(**kw) -> tl.GPTConfig:
    base = dict(vocab_size=23, d_model=32, n_heads=4, n_layers=2, d_ff=48, max_len=40)
    return tl.GPTConfig(**{**base, **kw})


def build(cfg: tl.GPTConfig, seed: int = 0) -> tl.GPT:
    torch.manual_seed(seed)
    model = tl.GPT(cfg).double().eval()
    with torch.no_grad():  # norms and biases away from 1 and 0, so that they matter
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    return model


CONFIGS = {
    "gpt2": {},
    "llama_gqa": dict(
        positions="rope",
        rope_layout="half",
        norm="rmsnorm",
        activation="silu",
        gated=True,
        bias=False,
        tie_embeddings=False,
        n_kv_heads=2,
    ),
    "mqa_interleaved_theta": dict(positions="rope", n_kv_heads=1, rope_base=5e5),
    "sinusoidal_relu": dict(positions="sinusoidal", activation="relu"),
    "nope_gelu_gated": dict(positions="none", activation="gelu", gated=True),
}


# ------------------------------------------------------------------------------- config
def test_config_resolves_kv_heads_and_validates():
    assert small().n_kv_heads == 4 and small(n_kv_heads=1).n_kv_heads == 1
    assert small().d_k == 8
    for kw, match in [
        (dict(positions="alibi"), "positions.*'alibi'"),
        (dict(norm="batchnorm"), "norm.*'batchnorm'"),
        (dict(activation="tanh"), "activation.*'tanh'"),
        (dict(rope_layout="neox"), "rope_layout.*'neox'"),
        (dict(n_kv_heads=3), "n_heads=4 is not divisible by n_kv_heads=3"),
        (dict(d_model=20, n_heads=4, positions="rope"), "d_k=5"),
        (dict(max_len=0), "max_len"),
        (dict(dropout=1.0), "dropout"),
        (dict(init_std=0.0), "init_std must be > 0, got 0.0"),
    ]:
        with pytest.raises(ValueError, match=match):
            small(**kw)


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("tie", [True, False])
def test_param_count_formula_matches_the_model(name, tie):
    cfg = small(**{**CONFIGS[name], "tie_embeddings": tie})
    counts = cfg.param_count()
    assert counts["total"] == tl.GPT(cfg).num_params()
    assert counts["total"] == sum(v for k, v in counts.items() if k != "total")


def test_gpt2_small_parameter_counts_match_transformers():
    cfg = tl.GPTConfig.gpt2_small()
    assert cfg.param_count()["total"] == 124_439_808
    untied = tl.GPTConfig.gpt2_small(tie_embeddings=False)
    assert untied.param_count()["total"] == 163_037_184
    with torch.device("meta"):  # shapes only, no memory
        assert tl.GPT(cfg).num_params() == 124_439_808
        ref = GPT2LMHeadModel(GPT2Config())
        assert sum(p.numel() for p in ref.parameters()) == 124_439_808


# ------------------------------------------------------------------------------ forward
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_forward_is_causal_and_returns_attention_maps(name):
    model = build(small(**CONFIGS[name]))
    idx = tokens(3, 11, 23)
    logits, weights = model(idx, need_weights=True)
    assert logits.shape == (3, 11, 23)
    exact(model(idx), logits)  # the explicit path (weights) equals the fused one
    assert len(weights) == 2 and weights[0].shape == (3, 4, 11, 11)
    for w in weights:
        exact(w.sum(-1), torch.ones(3, 4, 11, dtype=F64))
        assert (w.triu(1) == 0).all()  # no query looks ahead
    # changing the future leaves every earlier position's logits alone
    changed = idx.clone()
    changed[:, 7:] = (changed[:, 7:] + 1) % 23
    exact(model(changed)[:, :7], logits[:, :7])
    assert not torch.allclose(model(changed)[:, 7:], logits[:, 7:])


def test_initialisation_follows_init_std_and_depth():
    torch.manual_seed(0)
    cfg = small(d_model=64, d_ff=256, n_layers=8, init_std=0.1)
    model = tl.GPT(cfg)
    blk = model.blocks[0]
    assert abs(blk.self_attn.q_proj.weight.std().item() - 0.1) < 0.01
    assert abs(blk.ffn.linear2.weight.std().item() - 0.1 / 4) < 0.003  # / sqrt(2 N)
    assert (blk.self_attn.q_proj.bias == 0).all() and (
        blk.self_attn_block.norm.weight == 1
    ).all()


def test_tied_embeddings_share_one_matrix():
    tied, untied = tl.GPT(small()), tl.GPT(small(tie_embeddings=False))
    assert tied.lm_head.weight is tied.tok_emb.weight
    assert untied.lm_head.weight is not untied.tok_emb.weight
    assert untied.num_params() - tied.num_params() == 23 * 32


def test_logits_are_the_formula():
    # eq. gpt-embed, eq. pre-ln, eq. lm-logits written out, for a 1-block GPT-2
    model = build(small(n_layers=1))
    idx = tokens(2, 6, 23)
    blk = model.blocks[0]
    x = model.tok_emb.weight[idx] + model.pos_emb.weight[:6]
    z = blk.self_attn_block.norm(x)
    q = blk.self_attn.q_proj(z).view(2, 6, 4, 8).transpose(1, 2)
    k = blk.self_attn.k_proj(z).view(2, 6, 4, 8).transpose(1, 2)
    v = blk.self_attn.v_proj(z).view(2, 6, 4, 8).transpose(1, 2)
    a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    x = x + blk.self_attn.o_proj(a.transpose(1, 2).reshape(2, 6, 32))
    h = blk.ffn.linear1(blk.ffn_block.norm(x))
    x = x + blk.ffn.linear2(F.gelu(h, approximate="tanh"))
    exact(model(idx), model.norm_f(x) @ model.tok_emb.weight.T)


def test_errors_name_the_numbers():
    model = build(small(max_len=10))
    with pytest.raises(ValueError, match="12 positions, more than max_len=10"):
        model(tokens(1, 12, 23))
    with pytest.raises(
        ValueError, match=r"6 tokens and 6 new tokens .*needs 11 .*max_len=10"
    ):
        model.generate(tokens(1, 6, 23), 6)
    model.generate(tokens(1, 6, 23), 5)  # 10 positions: fits
    with pytest.raises(ValueError, match=r"\[0, vocab_size=23\).*to 30"):
        model(torch.tensor([[1, 30]]))
    with pytest.raises(ValueError, match=r"\(B, T\).*\(5,\)"):
        model(torch.arange(5))
    with pytest.raises(ValueError, match="top_p.*1.5"):
        model.generate(tokens(1, 3, 23), 2, do_sample=True, top_p=1.5)


# ------------------------------------------------------------------------------- caches
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_cached_forward_equals_full_forward(name):
    model = build(small(**CONFIGS[name]))
    idx = tokens(2, 13, 23, seed=3)
    full = model(idx)
    cache = model.init_cache(2, 13)
    parts = [model(idx[:, :5], cache=cache)]  # prefill 5, then chunks of 1 and 3
    for a, b in [(5, 6), (6, 9), (9, 10), (10, 13)]:
        parts.append(model(idx[:, a:b], cache=cache))
    exact(torch.cat(parts, dim=1), full)
    assert cache.length == 13


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_cached_generation_equals_uncached(name):
    model = build(small(**CONFIGS[name]), seed=1)
    idx = tokens(3, 4, 23, seed=4)
    a, la = model.generate(idx, 12, return_logits=True)
    b, lb = model.generate(idx, 12, use_cache=False, return_logits=True)
    assert torch.equal(a, b)
    exact(la, lb)
    # greedy is the argmax of the logits, which continue the prompt
    assert torch.equal(a, la.argmax(-1))
    seq = torch.cat([idx, a], dim=1)
    exact(model(seq)[:, 3:-1], la)
    g = torch.Generator
    s1 = model.generate(idx, 12, do_sample=True, top_k=5, generator=g().manual_seed(0))
    s2 = model.generate(
        idx, 12, do_sample=True, top_k=5, use_cache=False, generator=g().manual_seed(0)
    )
    assert torch.equal(s1, s2)


def test_generation_stops_each_row_at_eos_and_pads_after():
    model = build(small(), seed=2)
    idx = tokens(4, 3, 23, seed=5)
    free = model.generate(idx, 12)
    eos = int(free[0, 4])  # row 0 produces it at step 4; other rows maybe elsewhere
    out = model.generate(idx, 12, eos_id=eos, pad_id=-1)
    for row_free, row in zip(free, out, strict=True):
        hits = (row_free == eos).nonzero()
        if len(hits):
            end = int(hits[0]) + 1
            assert torch.equal(row[:end], row_free[:end])  # eos kept
            assert (row[end:] == -1).all()  # pad after it
        else:
            assert torch.equal(row, row_free)  # a row that never ends is unchanged
    assert (out == -1).any()
    # as in the encoder-decoder: a padded position has zero logits
    _, logits = model.generate(idx, 12, eos_id=eos, pad_id=-1, return_logits=True)
    assert (logits[out == -1] == 0).all() and (logits[out != -1] != 0).any(-1).all()
    # the default pad is eos itself; uncached agrees
    dflt = model.generate(idx, 12, eos_id=eos)
    assert torch.equal(dflt, torch.where(out == -1, eos, out))
    assert torch.equal(model.generate(idx, 12, eos_id=eos, use_cache=False), dflt)
    with pytest.raises(ValueError, match="eos_id=23"):
        model.generate(idx, 2, eos_id=23)
    # every row ends at once: early stop, the shape is kept
    first = int(free[0, 0])
    ends = model.generate(idx[:1], 12, eos_id=first, pad_id=0)
    assert ends.shape == (1, 12) and ends[0, 0] == first and (ends[0, 1:] == 0).all()


def test_sampling_in_generate_is_reproducible():
    model = build(small(), seed=3)
    idx = tokens(2, 3, 23)

    def draw(seed, **kw):
        g = torch.Generator().manual_seed(seed)
        return model.generate(idx, 15, do_sample=True, generator=g, **kw)

    assert torch.equal(draw(1), draw(1)) and not torch.equal(draw(1), draw(2))
    assert torch.equal(draw(1, top_k=1), model.generate(idx, 15))  # top_k=1 is greedy


# ------------------------------------------------------------------------ RoPE layouts
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_rope_layouts_give_the_same_model_through_the_permutation(bias, n_kv_heads):
    cfg = small(positions="rope", n_kv_heads=n_kv_heads, bias=bias, rope_base=5e5)
    inter = build(cfg)
    half = inter.with_rope_layout("half")
    assert half.cfg.rope_layout == "half" and half.blocks[0].rope_layout == "half"
    idx = tokens(2, 15, 23, seed=6)
    exact(half(idx), inter(idx))
    exact(half.with_rope_layout("interleaved").state_dict()["blocks.0.self_attn.q_proj.weight"],
          inter.state_dict()["blocks.0.self_attn.q_proj.weight"])  # fmt: skip
    # the layout matters without the permutation
    plain_half = build(small(**{**cfg.__dict__, "rope_layout": "half"}))
    assert not torch.allclose(plain_half(idx), inter(idx))


# --------------------------------------------------------------------------------- loss
def test_causal_lm_loss_is_shifted_masked_cross_entropy():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 6, 11, generator=g, dtype=F64)
    toks = tokens(3, 6, 11)
    mask = torch.zeros(3, 6, dtype=torch.bool)
    mask[:, 3:] = True
    mask[1, 4] = False
    logp = logits.log_softmax(-1)
    terms = [
        -logp[b, t, toks[b, t + 1]]
        for b in range(3)
        for t in range(5)
        if mask[b, t + 1]
    ]
    exact(tl.causal_lm_loss(logits, toks, mask), torch.stack(terms).mean())
    every = [-logp[b, t, toks[b, t + 1]] for b in range(3) for t in range(5)]
    exact(tl.causal_lm_loss(logits, toks), torch.stack(every).mean())
    with pytest.raises(ValueError, match=r"\(3, 6, 11\).*\(3, 5\)"):
        tl.causal_lm_loss(logits, toks[:, :5])
    with pytest.raises(ValueError, match="no target"):
        tl.causal_lm_loss(logits, toks, torch.zeros(3, 6, dtype=torch.bool))


# ------------------------------------------------------------------------- from_hf
def llama_in_float64(model: LlamaForCausalLM) -> LlamaForCausalLM:
    """transformers computes RMSNorm and the RoPE angles in float32 whatever the
    model's dtype. Rerun these two functions as transformers writes them, in the
    model's own dtype, so a float64 comparison can hold to 1e-12."""

    def rms_norm(self, h):
        variance = h.pow(2).mean(-1, keepdim=True)
        return self.weight * (h * torch.rsqrt(variance + self.variance_epsilon))

    def rotary(self, x, position_ids):
        dim = model.config.head_dim
        base = model.config.rope_parameters["rope_theta"]
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=F64) / dim))
        freqs = position_ids[..., None].to(F64) * inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    for m in model.modules():
        if type(m).__name__ == "LlamaRMSNorm":
            m.forward = types.MethodType(rms_norm, m)
        elif type(m).__name__ == "LlamaRotaryEmbedding":
            m.forward = types.MethodType(rotary, m)
    return model


def hf_model(kind: str, dtype=F64, seed=0, **kw):
    torch.manual_seed(seed)
    if kind == "gpt2":
        base = dict(vocab_size=53, n_embd=32, n_head=4, n_layer=2, n_positions=48)
        base |= dict(bos_token_id=0, eos_token_id=0)
        model = GPT2LMHeadModel(GPT2Config(**{**base, **kw}))
    else:
        base = dict(
            vocab_size=53,
            hidden_size=32,
            intermediate_size=56,
            num_hidden_layers=2,
            num_attention_heads=4,
            max_position_embeddings=48,
            bos_token_id=0,
            eos_token_id=0,
        )
        model = LlamaForCausalLM(LlamaConfig(**{**base, **kw}))
    model = model.to(dtype).eval()
    with torch.no_grad():  # norms away from 1, biases from 0, so they are tested
        for name, p in model.named_parameters():
            if "norm" in name or "ln_" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    return model


def hf_greedy(model, idx, n):
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    out = model.generate(
        idx, attention_mask=torch.ones_like(idx), max_new_tokens=n, do_sample=False
    )
    return out[:, idx.size(1) :]


HF_CONFIGS = [
    ("gpt2", {}),
    ("gpt2", dict(tie_word_embeddings=False)),
    ("gpt2", dict(n_inner=40, activation_function="gelu", layer_norm_epsilon=1e-3)),
    ("gpt2", dict(activation_function="relu", n_layer=3)),
    ("llama", {}),
    ("llama", dict(num_key_value_heads=2)),  # GQA
    ("llama", dict(num_key_value_heads=1, rope_theta=5e5)),  # MQA, Llama 3's theta
    ("llama", dict(tie_word_embeddings=True, rope_theta=1e6, rms_norm_eps=1e-5)),
    ("llama", dict(attention_bias=True, num_key_value_heads=2)),
    ("llama", dict(mlp_bias=True, attention_bias=True, rope_theta=500.0)),
]


@pytest.mark.parametrize("kind,kw", HF_CONFIGS, ids=lambda v: str(v) or "default")
def test_from_hf_logits_and_greedy_tokens_match_transformers(kind, kw):
    ref = hf_model(kind, **kw)
    if kind == "llama":
        ref = llama_in_float64(ref)
    model = tl.GPT.from_hf(ref)
    assert model.tok_emb.weight.dtype == F64 and not model.training
    idx = tokens(3, 10, 53, seed=7)
    with torch.no_grad():
        exact(model(idx), ref(idx).logits)
    assert torch.equal(model.generate(idx, 25), hf_greedy(ref, idx, 25))
    tied = ref.lm_head.weight is ref.get_input_embeddings().weight
    assert (model.lm_head.weight is model.tok_emb.weight) == tied
    assert model.num_params() == sum(p.numel() for p in ref.parameters())


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_from_hf_keeps_float32_and_matches_unpatched_transformers(kind):
    ref = hf_model(kind, dtype=torch.float32, num_key_value_heads=2)
    model = tl.GPT.from_hf(ref)
    assert model.tok_emb.weight.dtype == torch.float32
    idx = tokens(2, 12, 53, seed=8)
    with torch.no_grad():
        torch.testing.assert_close(model(idx), ref(idx).logits, rtol=1e-5, atol=1e-5)
    assert torch.equal(model.generate(idx, 10), hf_greedy(ref, idx, 10))


def test_from_hf_refuses_what_it_cannot_model():
    with pytest.raises(ValueError, match="GPT2LMHeadModel or LlamaForCausalLM.*Linear"):
        tl.GPT.from_hf(torch.nn.Linear(2, 2))
    scaled = hf_model(
        "llama",
        rope_parameters=dict(rope_type="linear", factor=2.0, rope_theta=1e4),
    )
    with pytest.raises(ValueError, match="rope_type='linear'"):
        tl.GPT.from_hf(scaled)
    with pytest.raises(ValueError, match="head_dim=16"):
        tl.GPT.from_hf(hf_model("llama", head_dim=16))
    with pytest.raises(ValueError, match="scale_attn_by_inverse_layer_idx"):
        tl.GPT.from_hf(hf_model("gpt2", scale_attn_by_inverse_layer_idx=True))


def test_block_wiring_is_residual_and_its_trace():
    """GPTBlock wires its sublayers through two Pre-LN Residuals (self_attn_block,
    ffn_block); its trace holds the formula's intermediates and what the heads computed,
    and tracing changes no number."""
    model = build(small(n_layers=1))
    blk = model.blocks[0]
    assert isinstance(blk.self_attn_block, tl.Residual) and blk.ffn_block.norm_first
    x = torch.randn(2, 6, 32)
    positions = torch.arange(6)
    trace = {}
    out, _ = blk(x, positions, trace=trace)
    z_attn = blk.self_attention(blk.self_attn_block.norm(x), positions)[0]
    x_attn = x + z_attn  # eq. pre-ln
    z_ffn = blk.ffn(blk.ffn_block.norm(x_attn))
    want = {"X": x, "Z_attn": z_attn, "X_attn": x_attn, "Z_ffn": z_ffn}
    for name, tensor in {**want, "X_out": x_attn + z_ffn}.items():
        torch.testing.assert_close(trace[name], tensor)
    torch.testing.assert_close(out, x_attn + z_ffn)
    heads = trace["self_attn"]
    assert heads["q"].shape == (2, 4, 6, 8) and torch.equal(
        heads["weights"], trace["weights"]
    )
    torch.testing.assert_close(heads["heads"], heads["weights"] @ heads["v"])
    assert torch.equal(out, blk(x, positions, need_weights=True)[0])
