"""Reading a ``transformers`` language model: its config as :class:`GPTConfig` fields,
its weights under :class:`GPT`'s parameter names. Used by ``GPT.from_hf``.

Nothing here imports ``transformers``: a model object already carries its config and
its tensors. Supported: ``GPT2LMHeadModel`` and ``LlamaForCausalLM``, whatever their
sizes, with GQA/MQA, tied or untied embeddings, any ``rope_theta``, biases on or off.
"""

from __future__ import annotations

import torch
import torch.nn as nn

# transformers' activation names -> FeedForward's
HF_ACTIVATIONS = {
    "gelu_new": "gelu_tanh",  # GPT-2's tanh approximation
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu": "gelu",
    "relu": "relu",
    "silu": "silu",
    "swish": "silu",
}


def hf_to_tl(model: nn.Module) -> tuple[dict, dict[str, torch.Tensor]]:
    """(GPTConfig keyword arguments, state_dict for GPT) of a ``GPT2LMHeadModel`` or a
    ``LlamaForCausalLM``; raises a ValueError naming anything this library does not
    model."""
    names = [c.__name__ for c in type(model).__mro__]
    if "GPT2LMHeadModel" in names:
        return _gpt2(model)
    if "LlamaForCausalLM" in names:
        return _llama(model)
    raise ValueError(
        "from_hf reads a transformers GPT2LMHeadModel or LlamaForCausalLM, "
        f"got {type(model).__name__}"
    )


def _activation(name: str) -> str:
    if name not in HF_ACTIVATIONS:
        raise ValueError(
            f"activation {name!r} has no counterpart here; "
            f"supported: {sorted(HF_ACTIVATIONS)}"
        )
    return HF_ACTIVATIONS[name]


def _tied(model: nn.Module) -> bool:
    """Whether the output matrix *is* the token embedding (what the model computes,
    whatever its config says)."""
    out, emb = model.get_output_embeddings(), model.get_input_embeddings()
    return out.weight is emb.weight


def _gpt2(model: nn.Module) -> tuple[dict, dict[str, torch.Tensor]]:
    c, t = model.config, model.transformer
    if not getattr(c, "scale_attn_weights", True):
        raise ValueError("scale_attn_weights=False (no 1/sqrt(d_k)) is not supported")
    if getattr(c, "scale_attn_by_inverse_layer_idx", False):
        raise ValueError("scale_attn_by_inverse_layer_idx=True is not supported")
    if getattr(c, "add_cross_attention", False):
        raise ValueError(
            "add_cross_attention=True (GPT-2 with cross-attention) is not supported"
        )
    d = c.n_embd
    kwargs = dict(
        vocab_size=c.vocab_size,
        d_model=d,
        n_heads=c.n_head,
        n_layers=c.n_layer,
        d_ff=c.n_inner if c.n_inner is not None else 4 * d,
        max_len=c.n_positions,
        positions="learned",
        norm="layernorm",
        norm_eps=c.layer_norm_epsilon,
        activation=_activation(c.activation_function),
        gated=False,
        bias=True,
        tie_embeddings=_tied(model),
        dropout=c.resid_pdrop,
    )
    sd = {"tok_emb.weight": t.wte.weight, "pos_emb.weight": t.wpe.weight}
    for i, blk in enumerate(t.h):
        p = f"blocks.{i}."
        # GPT-2's Conv1D computes x W + b with W (in, out): nn.Linear holds W^T
        w_q, w_k, w_v = blk.attn.c_attn.weight.split(d, dim=1)  # (d, d) each
        b_q, b_k, b_v = blk.attn.c_attn.bias.split(d)
        sd |= {
            p + "self_attn_block.norm.weight": blk.ln_1.weight,
            p + "self_attn_block.norm.bias": blk.ln_1.bias,
            p + "self_attn.q_proj.weight": w_q.T,
            p + "self_attn.q_proj.bias": b_q,
            p + "self_attn.k_proj.weight": w_k.T,
            p + "self_attn.k_proj.bias": b_k,
            p + "self_attn.v_proj.weight": w_v.T,
            p + "self_attn.v_proj.bias": b_v,
            p + "self_attn.o_proj.weight": blk.attn.c_proj.weight.T,
            p + "self_attn.o_proj.bias": blk.attn.c_proj.bias,
            p + "ffn_block.norm.weight": blk.ln_2.weight,
            p + "ffn_block.norm.bias": blk.ln_2.bias,
            p + "ffn.linear1.weight": blk.mlp.c_fc.weight.T,
            p + "ffn.linear1.bias": blk.mlp.c_fc.bias,
            p + "ffn.linear2.weight": blk.mlp.c_proj.weight.T,
            p + "ffn.linear2.bias": blk.mlp.c_proj.bias,
        }
    sd |= {"norm_f.weight": t.ln_f.weight, "norm_f.bias": t.ln_f.bias}
    sd["lm_head.weight"] = model.lm_head.weight
    return kwargs, sd


def _rope_theta(c) -> float:
    """rope_theta of a Llama config; refuses the scaled RoPE variants."""
    params = dict(getattr(c, "rope_parameters", None) or {})
    # transformers 4.x spelled these as config attributes
    params.update({k: v for k, v in (getattr(c, "rope_scaling", None) or {}).items()})
    kind = params.get("rope_type", params.get("type", "default"))
    if kind != "default":
        raise ValueError(
            f"RoPE scaling rope_type={kind!r} is not supported, only plain RoPE "
            "('default')"
        )
    if params.get("partial_rotary_factor", 1.0) != 1.0:
        raise ValueError("partial_rotary_factor != 1 is not supported")
    return float(params.get("rope_theta", getattr(c, "rope_theta", 10000.0)))


def _llama(model: nn.Module) -> tuple[dict, dict[str, torch.Tensor]]:
    c, m = model.config, model.model
    d, h = c.hidden_size, c.num_attention_heads
    head_dim = getattr(c, "head_dim", None) or d // h
    if head_dim * h != d:
        raise ValueError(
            f"head_dim={head_dim} with {h} heads is not hidden_size={d}: "
            "this library uses d_k = d_model / n_heads"
        )
    kwargs = dict(
        vocab_size=c.vocab_size,
        d_model=d,
        n_heads=h,
        n_kv_heads=getattr(c, "num_key_value_heads", None) or h,
        n_layers=c.num_hidden_layers,
        d_ff=c.intermediate_size,
        max_len=c.max_position_embeddings,
        positions="rope",
        rope_base=_rope_theta(c),
        rope_layout="half",  # transformers' rotate_half
        norm="rmsnorm",
        norm_eps=c.rms_norm_eps,
        activation=_activation(c.hidden_act),
        gated=True,
        attn_bias=bool(getattr(c, "attention_bias", False)),
        ffn_bias=bool(getattr(c, "mlp_bias", False)),
        tie_embeddings=_tied(model),
        dropout=float(getattr(c, "attention_dropout", 0.0)),
    )
    sd = {"tok_emb.weight": m.embed_tokens.weight}
    for i, layer in enumerate(m.layers):
        p = f"blocks.{i}."
        sd[p + "self_attn_block.norm.weight"] = layer.input_layernorm.weight
        sd[p + "ffn_block.norm.weight"] = layer.post_attention_layernorm.weight
        for name, t in layer.self_attn.named_parameters():  # q/k/v/o_proj: same names
            sd[p + "self_attn." + name] = t
        mlp = {"gate_proj": "linear1", "up_proj": "linear_up", "down_proj": "linear2"}
        for name, t in layer.mlp.named_parameters():  # e.g. gate_proj.weight
            proj, kind = name.split(".")
            sd[p + f"ffn.{mlp[proj]}.{kind}"] = t
    sd["norm_f.weight"] = m.norm.weight
    sd["lm_head.weight"] = model.lm_head.weight
    return kwargs, sd
