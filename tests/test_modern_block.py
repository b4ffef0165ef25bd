"""The modern block's formulas against PyTorch's built-ins and transformers' GPT-2 and
Llama modules: RMSNorm, the GELU-tanh and SiLU activations, the plain and gated
feed-forward networks, and RoPE in both layouts with any base.

float64 and 1e-12 where the reference computes in the input's dtype. transformers'
LlamaRMSNorm and rotary embedding compute in float32 whatever the model's dtype; they
are compared in float32, and in float64 through their formula's own code path.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is ever downloaded

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import GPT2Config, LlamaConfig
from transformers.activations import ACT2FN
from transformers.models.gpt2.modeling_gpt2 import GPT2MLP
from transformers.models.llama.modeling_llama import (
    LlamaMLP,
    LlamaRMSNorm,
    LlamaRotaryEmbedding,
    apply_rotary_pos_emb,
)

import transformer_lib as tl

F64 = torch.float64


# tiny models: one torch thread (the fixture is in tests/conftest.py)
pytestmark = pytest.mark.usefixtures("one_thread")


def rand(*shape, dtype=F64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype)


def exact(a, b):
    torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------------------ RMSNorm
@pytest.mark.parametrize("shape", [(5,), (3, 8), (2, 7, 16), (2, 3, 4, 33)])
@pytest.mark.parametrize("eps", [1e-6, 1e-5, 0.1])
def test_rms_norm_matches_torch(shape, eps):
    x = rand(*shape, seed=sum(shape)) * 3 + 0.5
    ref = nn.RMSNorm(shape[-1], eps=eps, dtype=F64)
    with torch.no_grad():
        ref.weight.copy_(rand(shape[-1], seed=1))
    ours = tl.RMSNorm(shape[-1], eps=eps).double()
    ours.load_state_dict(ref.state_dict())  # the state dict loads as it is
    exact(ours(x), ref(x))
    exact(tl.rms_norm(x, ref.weight, eps), F.rms_norm(x, (shape[-1],), ref.weight, eps))


def test_rms_norm_is_layer_norm_without_centring_and_shift():
    # eq. rms-norm from eq. layer-norm: on a zero-mean input with beta = 0 they agree
    x = rand(4, 6, 32, seed=3)
    x = x - x.mean(-1, keepdim=True)
    gamma = rand(32, seed=4)
    exact(tl.rms_norm(x, gamma, 1e-5), tl.layer_norm(x, gamma, torch.zeros_like(gamma)))
    # and on an input with a mean they do not: RMSNorm keeps the offset
    assert not torch.allclose(
        tl.rms_norm(x + 1, gamma), tl.layer_norm(x + 1, gamma, torch.zeros_like(gamma))
    )


def test_rms_norm_matches_llama_rmsnorm():
    # LlamaRMSNorm upcasts to float32 inside, so compare in float32
    x = rand(2, 5, 24, dtype=torch.float32, seed=5) * 4
    ref = LlamaRMSNorm(24, eps=1e-6)
    with torch.no_grad():
        ref.weight.copy_(rand(24, dtype=torch.float32, seed=6))
    ours = tl.RMSNorm(24, eps=1e-6)
    ours.load_state_dict(ref.state_dict())
    torch.testing.assert_close(ours(x), ref(x))


def test_rms_norm_names_the_shapes():
    with pytest.raises(ValueError, match=r"weight \(5,\).*\(8,\).*\(2, 8\)"):
        tl.rms_norm(rand(2, 8), torch.ones(5, dtype=F64))


# -------------------------------------------------------------------------- activations
@pytest.mark.parametrize(
    "name,ref",
    [
        ("relu", F.relu),
        ("gelu", F.gelu),
        ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh")),
        ("silu", F.silu),
    ],
)
def test_activations_match_torch(name, ref):
    x = torch.linspace(-8, 8, 2001, dtype=F64)
    exact(tl.feed_forward.ACTIVATIONS[name](x), ref(x))


def test_activation_formulas_match_torch_and_transformers():
    x = rand(3, 50, seed=7) * 4
    exact(tl.gelu_tanh(x), F.gelu(x, approximate="tanh"))
    exact(tl.gelu_tanh(x), ACT2FN["gelu_new"](x))  # GPT-2's, in transformers
    exact(tl.silu(x), F.silu(x))
    exact(tl.silu(x), ACT2FN["silu"](x))  # Llama's
    # the tanh form is an approximation of the exact GELU, within 1e-3 everywhere
    assert (tl.gelu_tanh(x) - F.gelu(x)).abs().max() < 1e-3


# ------------------------------------------------------------------------- feed-forward
def test_plain_ffn_matches_gpt2_mlp():
    hc = GPT2Config(n_embd=16, activation_function="gelu_new", resid_pdrop=0.0)
    ref = GPT2MLP(64, hc).double().eval()
    with torch.no_grad():
        for p in ref.parameters():
            p.copy_(rand(*p.shape, seed=p.numel()))
    ffn = tl.FeedForward(16, 64, "gelu_tanh").double()
    with torch.no_grad():  # Conv1D computes x W + b with W (in, out): Linear holds W^T
        ffn.linear1.weight.copy_(ref.c_fc.weight.T)
        ffn.linear1.bias.copy_(ref.c_fc.bias)
        ffn.linear2.weight.copy_(ref.c_proj.weight.T)
        ffn.linear2.bias.copy_(ref.c_proj.bias)
    x = rand(2, 5, 16, seed=8)
    exact(ffn(x), ref(x))


@pytest.mark.parametrize("bias", [False, True])
def test_gated_ffn_is_llama_swiglu(bias):
    lc = LlamaConfig(
        hidden_size=16, intermediate_size=40, num_attention_heads=2, mlp_bias=bias
    )
    ref = LlamaMLP(lc).double()
    with torch.no_grad():
        for p in ref.parameters():
            p.copy_(rand(*p.shape, seed=p.numel() + p.dim()))
    ffn = tl.FeedForward(16, 40, "silu", bias=bias, gated=True).double()
    names = {"gate_proj": "linear1", "up_proj": "linear_up", "down_proj": "linear2"}
    ffn.load_state_dict(
        {
            names[k.split(".")[0]] + "." + k.split(".")[1]: v
            for k, v in ref.state_dict().items()
        }
    )
    x = rand(3, 4, 16, seed=9)
    exact(ffn(x), ref(x))
    # the formula itself: W_down(silu(W_gate x) * W_up x)
    exact(ffn(x), ffn.linear2(F.silu(ffn.linear1(x)) * ffn.linear_up(x)))


def test_ffn_bias_option_and_equal_size_swiglu():
    no_bias = tl.FeedForward(12, 48, bias=False)
    assert no_bias.linear1.bias is None and no_bias.linear2.bias is None
    gated = tl.FeedForward(12, 48, "silu", bias=False, gated=True)
    assert all(m.bias is None for m in (gated.linear1, gated.linear2, gated.linear_up))
    # d_ff = 8/3 d_model gated has as many weights as d_ff = 4 d_model plain
    d = 96

    def n(m):
        return sum(p.numel() for p in m.parameters())

    plain = tl.FeedForward(d, 4 * d, "gelu_tanh", bias=False)
    glu = tl.FeedForward(d, 8 * d // 3, "silu", bias=False, gated=True)
    assert n(plain) == n(glu) == 8 * d * d


def test_ffn_refuses_unknown_activation():
    with pytest.raises(ValueError, match="'swishy'"):
        tl.FeedForward(4, 8, "swishy")


# --------------------------------------------------------------------------------- RoPE
def rope_cos_sin(T: int, d: int, base: float):
    """transformers' convention, computed here in float64: the d/2 angles repeated
    twice, (T, d)."""
    inv_freq = 1.0 / base ** (torch.arange(0, d, 2, dtype=F64) / d)
    freqs = torch.arange(T, dtype=F64)[:, None] * inv_freq  # (T, d/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (T, d)
    return emb.cos(), emb.sin()


@pytest.mark.parametrize("base", [10000.0, 500000.0, 1e6])
@pytest.mark.parametrize("shape", [(1, 1, 5, 8), (2, 4, 9, 16), (2, 2, 3, 64)])
def test_rope_half_matches_transformers(shape, base):
    q, k = rand(*shape, seed=1), rand(*shape, seed=2)
    cos, sin = rope_cos_sin(shape[-2], shape[-1], base)
    q_ref, k_ref = apply_rotary_pos_emb(q, k, cos[None], sin[None])
    positions = torch.arange(shape[-2])
    exact(tl.apply_rope(q, positions, base, layout="half"), q_ref)
    exact(tl.apply_rope(k, positions, base, layout="half"), k_ref)


@pytest.mark.parametrize("base", [10000.0, 500000.0])
def test_rope_base_is_rope_theta_of_llama_rotary_embedding(base):
    # transformers' own cos/sin, which it computes in float32: compare in float32
    lc = LlamaConfig(hidden_size=64, num_attention_heads=4, rope_theta=base)
    rotary = LlamaRotaryEmbedding(lc)
    T = 40
    q = rand(2, 4, T, 16, dtype=torch.float32, seed=3)
    pos = torch.arange(T)
    cos, sin = rotary(q, pos[None])
    q_ref, _ = apply_rotary_pos_emb(q, q, cos, sin)
    torch.testing.assert_close(tl.apply_rope(q, pos, base, layout="half"), q_ref)


@pytest.mark.parametrize("d", [2, 8, 64])
@pytest.mark.parametrize("base", [10000.0, 500000.0])
def test_rope_layouts_are_one_rotation_up_to_a_permutation(d, base):
    # eq. rope-half-perm: half(x[perm]) = interleaved(x)[perm]
    x = rand(3, 2, 11, d, seed=d)
    pos = torch.arange(5, 16)
    perm = tl.rope_permutation(d)
    exact(
        tl.apply_rope(x[..., perm], pos, base, layout="half"),
        tl.apply_rope(x, pos, base, layout="interleaved")[..., perm],
    )
    # so scores q . k do not depend on the layout once q and k are permuted alike
    q, k = rand(11, d, seed=1), rand(11, d, seed=2)
    s_inter = tl.apply_rope(q, pos, base) @ tl.apply_rope(k, pos, base).T
    s_half = (
        tl.apply_rope(q[:, perm], pos, base, layout="half")
        @ tl.apply_rope(k[:, perm], pos, base, layout="half").T
    )
    exact(s_half, s_inter)
    assert torch.equal(perm[torch.argsort(perm)], torch.arange(d))


def test_rope_half_is_relative_and_keeps_norms():
    x = rand(7, 32, seed=4)
    y = tl.apply_rope(x, torch.arange(7), layout="half")
    exact(y.norm(dim=-1), x.norm(dim=-1))
    q, k = rand(1, 32, seed=5), rand(1, 32, seed=6)

    def score(m, n):
        qm = tl.apply_rope(q, torch.tensor([m]), 5e5, "half")
        return qm @ tl.apply_rope(k, torch.tensor([n]), 5e5, "half").T

    for m, n, s in [(3, 1, 10), (0, 9, 1000), (50, 50, 7)]:
        exact(score(m + s, n + s), score(m, n))


def test_rope_interleaved_base_matches_complex_rotation():
    # an independent route for a non-default base: multiply pairs by e^{i m theta_i}
    x, pos, base = rand(2, 6, 16, seed=8), torch.arange(6), 500000.0
    theta = base ** (-torch.arange(0, 16, 2, dtype=F64) / 16)
    turn = torch.polar(torch.ones(6, 8, dtype=F64), pos[:, None].double() * theta)
    ref = torch.view_as_real(torch.view_as_complex(x.reshape(2, 6, 8, 2)) * turn)
    exact(tl.apply_rope(x, pos, base), ref.flatten(-2))


def test_rope_errors_name_the_values():
    with pytest.raises(ValueError, match="'neox'"):
        tl.apply_rope(rand(3, 8), torch.arange(3), layout="neox")
    with pytest.raises(ValueError, match="d=7"):
        tl.rope_permutation(7)
    with pytest.raises(ValueError, match=r"T=3"):
        tl.apply_rope(rand(3, 8), torch.arange(4), layout="half")


@pytest.mark.parametrize("base", [10000.0, 500000.0])
@pytest.mark.parametrize("n_kv_heads", [4, 2, 1], ids=["mha", "gqa", "mqa"])
def test_cached_attention_step_with_rope_base_is_llama_attention(base, n_kv_heads):
    """Token by token with a KV cache, cached_attention_step(rope_base=, rope_layout=
    "half") equals causal attention over the whole sequence with q and k rotated by
    transformers' apply_rotary_pos_emb at rope_theta = base."""
    B, h, T, d = 2, 4, 9, 16
    q = rand(B, h, T, d, seed=4)
    k, v = rand(B, n_kv_heads, T, d, seed=5), rand(B, n_kv_heads, T, d, seed=6)
    cos, sin = rope_cos_sin(T, d, base)
    q_rot, _ = apply_rotary_pos_emb(q, q, cos[None], sin[None])
    k_rot, _ = apply_rotary_pos_emb(k, k, cos[None], sin[None])
    want = torch.nn.functional.scaled_dot_product_attention(
        q_rot, k_rot, v, is_causal=True, enable_gqa=True
    )
    ck = cv = torch.zeros(B, n_kv_heads, 0, d, dtype=q.dtype)
    steps = []
    for t in range(T):
        sl = slice(t, t + 1)
        out, ck, cv = tl.cached_attention_step(
            q[:, :, sl], k[:, :, sl], v[:, :, sl], ck, cv,
            rope=True, rope_base=base, rope_layout="half",
        )  # fmt: skip
        steps.append(out)
    exact(torch.cat(steps, dim=-2), want)
    exact(ck, k_rot)  # the cache holds rotated keys
    # the default base is a different model: the steps no longer agree at base 5e5
    if base != 10000.0:
        out, _, _ = tl.cached_attention_step(
            q, k, v, ck[:, :, :0], cv[:, :, :0], rope=True, rope_layout="half"
        )
        assert (out - want).abs().max() > 1e-3
