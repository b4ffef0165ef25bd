"""The exercise checkers: each accepts the library (and other correct answers) and rejects a catalogue
of real mistakes with a message that names the cause.

CATALOGUE lists (checker, wrong implementation, words the message must contain). Every wrong
implementation is written the way a learner would write it, not through the checkers' own helpers.
"""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import transformer_lib as tl
from transformer_lib import exercises as ex

NEG_INF = float("-inf")


# ------------------------------------------------------------------------------------------------
# Wrong implementations, one per real mistake
# ------------------------------------------------------------------------------------------------

# softmax ----------------------------------------------------------------------------------------


def softmax_wrong_axis(x, dim=-1):
    e = torch.exp(x - x.amax(dim=0, keepdim=True))
    return e / e.sum(dim=0, keepdim=True)  # normalises the columns


def softmax_no_max_subtraction(x, dim=-1):
    e = torch.exp(x)  # exp(1e4) = inf
    return e / e.sum(dim=dim, keepdim=True)


def softmax_not_normalised(x, dim=-1):
    return torch.exp(x - x.amax(dim=dim, keepdim=True))


def softmax_exp_only(x, dim=-1):
    return torch.exp(x)


def softmax_nan_on_masked_row(x, dim=-1):
    return torch.softmax(x, dim=dim)  # a row of -inf gives 0/0


def softmax_ignores_dim(x, dim=-1):
    return tl.softmax(x, dim=-1)


# scaled dot-product attention --------------------------------------------------------------------


def _attention(
    q,
    k,
    v,
    mask=None,
    *,
    scale=None,
    fill=NEG_INF,
    invert=False,
    after=False,
    dim=-1,
    soft=tl.softmax,
):
    scale = math.sqrt(q.size(-1)) if scale is None else scale
    scores = q @ k.transpose(-2, -1) / scale
    if mask is not None and not after:
        scores = scores.masked_fill(mask if invert else ~mask, fill)
    w = soft(scores, dim=dim)
    if mask is not None and after:
        w = w.masked_fill(~mask, 0.0)
    return w @ v, w


def sdpa_scaled_by_sqrt_T(q, k, v, mask=None):
    return _attention(q, k, v, mask, scale=math.sqrt(k.size(-2)))


def sdpa_not_scaled(q, k, v, mask=None):
    return _attention(q, k, v, mask, scale=1.0)


def sdpa_scaled_by_d_k(q, k, v, mask=None):
    return _attention(q, k, v, mask, scale=q.size(-1))


def sdpa_mask_inverted(q, k, v, mask=None):
    return _attention(q, k, v, mask, invert=True, soft=torch.softmax)


def sdpa_mask_after_softmax(q, k, v, mask=None):
    return _attention(q, k, v, mask, after=True)


def sdpa_softmax_over_queries(q, k, v, mask=None):
    return _attention(q, k, v, mask, dim=-2)


def sdpa_nan_on_fully_masked_rows(q, k, v, mask=None):
    return _attention(q, k, v, mask, soft=torch.softmax)


def sdpa_fill_minus_1e9(q, k, v, mask=None):
    return _attention(q, k, v, mask, fill=-1e9)


def sdpa_fill_zero(q, k, v, mask=None):
    return _attention(q, k, v, mask, fill=0.0)


def sdpa_ignores_mask(q, k, v, mask=None):
    return _attention(q, k, v, None)


def sdpa_returns_output_only(q, k, v, mask=None):
    return tl.scaled_dot_product_attention(q, k, v, mask)[0]


def sdpa_own_softmax_overflows(q, k, v, mask=None):
    def soft(s, dim):
        e = s.exp()
        return e / e.sum(dim, keepdim=True)

    return _attention(
        q,
        k,
        v,
        mask,
        soft=lambda s, dim: (
            soft(s, dim).nan_to_num(0.0)
            if torch.isinf(s).all(dim).any()
            else soft(s, dim)
        ),
    )


def sdpa_weights_times_k(q, k, v, mask=None):
    out, w = tl.scaled_dot_product_attention(q, k, v, mask)
    return w @ k, w


def sdpa_output_from_scores(q, k, v, mask=None):
    out, w = tl.scaled_dot_product_attention(q, k, v, mask)
    return tl.attention_scores(q, k) @ v, w  # the raw scores, not the weights


# causal mask ---------------------------------------------------------------------------------------


def causal_diagonal_excluded(T_q, T_k=None):
    T_k = T_q if T_k is None else T_k
    return torch.ones(T_q, T_k, dtype=torch.bool).tril(diagonal=T_k - T_q - 1)


def causal_upper_triangle(T_q, T_k=None):
    T_k = T_q if T_k is None else T_k
    return torch.ones(T_q, T_k, dtype=torch.bool).triu()


def causal_top_left(T_q, T_k=None):
    T_k = T_q if T_k is None else T_k
    return torch.ones(T_q, T_k, dtype=torch.bool).tril()


def causal_inverted(T_q, T_k=None):
    return ~tl.causal_mask(T_q, T_k)


def causal_float_additive(T_q, T_k=None):
    return torch.zeros(T_q, T_k or T_q).masked_fill(~tl.causal_mask(T_q, T_k), NEG_INF)


def causal_ignores_T_k(T_q, T_k=None):
    return torch.ones(T_q, T_q, dtype=torch.bool).tril()


# padding mask --------------------------------------------------------------------------------------


def padding_inverted(lengths, T):
    return (torch.arange(T)[None, :] >= lengths[:, None])[:, None, None, :]


def padding_off_by_one(lengths, T):
    return (torch.arange(T)[None, :] <= lengths[:, None])[:, None, None, :]


def padding_one_short(lengths, T):
    return (torch.arange(T)[None, :] < lengths[:, None] - 1)[:, None, None, :]


def padding_wrong_shape(lengths, T):
    return torch.arange(T)[None, :] < lengths[:, None]  # (B, T)


# LayerNorm -------------------------------------------------------------------------------------------


def ln_unbiased_variance(x, gamma, beta, eps=1e-5):
    return (
        gamma
        * (x - x.mean(-1, keepdim=True))
        / torch.sqrt(x.var(-1, keepdim=True) + eps)
        + beta
    )


def ln_eps_outside_sqrt(x, gamma, beta, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    sigma = ((x - mu) ** 2).mean(-1, keepdim=True).sqrt()
    return gamma * (x - mu) / (sigma + eps) + beta


def ln_over_batch_axis(x, gamma, beta, eps=1e-5):
    mu = x.mean(0, keepdim=True)
    var = ((x - mu) ** 2).mean(0, keepdim=True)
    return gamma * (x - mu) / torch.sqrt(var + eps) + beta


def ln_beta_forgotten(x, gamma, beta, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return gamma * (x - mu) / torch.sqrt(var + eps)


def ln_no_eps(x, gamma, beta, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return gamma * (x - mu) / torch.sqrt(var) + beta


def ln_naive_variance(x, gamma, beta, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    var = (x * x).mean(-1, keepdim=True) - mu * mu  # cancels when |mu| >> sigma
    return gamma * (x - mu) / torch.sqrt(var + eps) + beta


def ln_ignores_eps(x, gamma, beta, eps=1e-5):
    return tl.layer_norm(x, gamma, beta)


# sinusoidal positional encoding ---------------------------------------------------------------------


def _pe(
    T, d, *, first=torch.sin, second=torch.cos, exponent=lambda i, d: 2 * i / d, start=0
):
    pe = torch.zeros(T, d)
    for pos in range(T):
        for i in range((d + 1) // 2):
            angle = torch.tensor(
                (pos + start) / 10000 ** exponent(i, d), dtype=torch.float64
            )
            pe[pos, 2 * i] = first(angle)
            if 2 * i + 1 < d:
                pe[pos, 2 * i + 1] = second(angle)
    return pe


def pe_sin_cos_swapped(T, d_model):
    return _pe(T, d_model, first=torch.cos, second=torch.sin)


def pe_exponent_i_over_d(T, d_model):
    return _pe(T, d_model, exponent=lambda i, d: i / d)


def pe_positions_from_1(T, d_model):
    return _pe(T, d_model, start=1)


def pe_concatenated_halves(T, d_model):
    pos = torch.arange(T, dtype=torch.float32)[:, None]
    freq = 10000 ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    angle = pos * freq  # (T, ceil(d/2))
    return torch.cat([angle.sin(), angle.cos()[:, : d_model // 2]], dim=1)


# RoPE -------------------------------------------------------------------------------------------------


def _rope(x, theta):  # theta (..., T, d/2)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack(
        (x1 * theta.cos() - x2 * theta.sin(), x1 * theta.sin() + x2 * theta.cos()), -1
    ).flatten(-2)


def rope_wrong_frequencies(x, positions):
    d = x.size(-1)
    return _rope(
        x, positions[:, None].float() * 10000 ** (-torch.arange(d // 2) / d)
    )  # -i/d, not -2i/d


def rope_wrong_frequencies_linear(x, positions):
    d = x.size(-1)
    return _rope(x, positions[:, None].float() * (1 + torch.arange(d // 2)) / (d // 2))


def rope_same_angle_every_pair(x, positions):
    return _rope(x, positions[:, None].float().expand(-1, x.size(-1) // 2))


def rope_rotate_half(x, positions):
    d = x.size(-1)
    theta = positions[:, None].float() * 10000 ** (-torch.arange(0, d, 2) / d)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat(
        (x1 * theta.cos() - x2 * theta.sin(), x1 * theta.sin() + x2 * theta.cos()), -1
    )


def rope_ignores_positions(x, positions):
    return tl.apply_rope(x, torch.arange(x.size(-2)))


def rope_opposite_direction(x, positions):
    return tl.apply_rope(x, -positions)


# GQA -------------------------------------------------------------------------------------------------


def repeat_kv_tiled(k, n_rep):
    return k.repeat(1, n_rep, 1, 1)  # k0, k1, k0, k1, ...


def repeat_kv_time_axis(k, n_rep):
    return k.repeat_interleave(n_rep, dim=2)


# multi-head attention -------------------------------------------------------------------------------


def _mha(
    x_q,
    x_kv,
    W_q,
    W_k,
    W_v,
    W_o,
    n_heads,
    mask=None,
    *,
    split_view=False,
    merge_view=False,
    use_W_o=True,
    d_scale=None,
):
    B, T_q, D = x_q.shape
    d_k = D // n_heads

    def split(t):
        if split_view:
            return t.view(B, n_heads, t.size(1), d_k)  # no transpose
        return t.view(B, t.size(1), n_heads, d_k).transpose(1, 2)

    q, k, v = split(x_q @ W_q), split(x_kv @ W_k), split(x_kv @ W_v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_scale or d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, NEG_INF)
    out = tl.softmax(scores, dim=-1) @ v  # (B, h, T_q, d_k)
    out = (
        out.reshape(B, T_q, D) if merge_view else out.transpose(1, 2).reshape(B, T_q, D)
    )
    return out @ W_o if use_W_o else out


def mha_heads_split_without_transpose(
    x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None
):
    return _mha(
        x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask, split_view=True, merge_view=True
    )


def mha_forgot_W_o(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    return _mha(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask, use_W_o=False)


def mha_scaled_by_sqrt_d_model(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    return _mha(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask, d_scale=x_q.size(-1))


def mha_merge_without_transpose(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    return _mha(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask, merge_view=True)


def mha_ignores_mask(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    return _mha(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, None)


# KV cache ---------------------------------------------------------------------------------------------


def _step(
    q,
    k,
    v,
    cache_k,
    cache_v,
    rope=False,
    *,
    positions=None,
    append=True,
    only_new=False,
    causal=True,
):
    T_past, T_new = cache_k.size(-2), q.size(-2)
    if rope:
        pos = (
            torch.arange(T_past, T_past + T_new)
            if positions is None
            else positions(T_past, T_new)
        )
        q, k = tl.apply_rope(q, pos), tl.apply_rope(k, pos)
    keys, vals = torch.cat([cache_k, k], dim=-2), torch.cat([cache_v, v], dim=-2)
    n_rep = q.size(1) // keys.size(1)
    attend_k, attend_v = (k, v) if only_new else (keys, vals)
    mask = tl.causal_mask(T_new, attend_k.size(-2)) if causal else None
    out, _ = tl.scaled_dot_product_attention(
        q, tl.repeat_kv(attend_k, n_rep), tl.repeat_kv(attend_v, n_rep), mask
    )
    return (out, keys, vals) if append else (out, cache_k, cache_v)


def kv_position_does_not_advance(q_new, k_new, v_new, cache_k, cache_v, rope=False):
    return _step(
        q_new,
        k_new,
        v_new,
        cache_k,
        cache_v,
        rope,
        positions=lambda T_past, T_new: torch.arange(T_new),
    )


def kv_cache_not_appended(q_new, k_new, v_new, cache_k, cache_v, rope=False):
    return _step(q_new, k_new, v_new, cache_k, cache_v, rope, append=False)


def kv_attends_only_new_token(q_new, k_new, v_new, cache_k, cache_v, rope=False):
    return _step(q_new, k_new, v_new, cache_k, cache_v, rope, only_new=True)


def kv_no_causal_mask_in_prompt(q_new, k_new, v_new, cache_k, cache_v, rope=False):
    return _step(q_new, k_new, v_new, cache_k, cache_v, rope, causal=False)


def kv_stores_unrotated_keys(q_new, k_new, v_new, cache_k, cache_v, rope=False):
    out, _, _ = tl.cached_attention_step(q_new, k_new, v_new, cache_k, cache_v, rope)
    return out, torch.cat([cache_k, k_new], -2), torch.cat([cache_v, v_new], -2)


# ------------------------------------------------------------------------------------------------
# The catalogue: (checker, wrong implementation, words the message must contain)
# ------------------------------------------------------------------------------------------------

CATALOGUE = [
    # softmax
    (
        ex.check_softmax,
        softmax_wrong_axis,
        "did you take the softmax over the right axis",
    ),
    (ex.check_softmax, softmax_no_max_subtraction, "Subtract each row's maximum"),
    (ex.check_softmax, softmax_not_normalised, "is it normalised"),
    (ex.check_softmax, softmax_exp_only, "you return exp(x)"),
    (
        ex.check_softmax,
        softmax_nan_on_masked_row,
        "what does softmax do to a row of -inf",
    ),
    (ex.check_softmax, softmax_ignores_dim, "ignores its dim argument"),
    # scaled dot-product attention
    (
        ex.check_scaled_dot_product_attention,
        sdpa_scaled_by_sqrt_T,
        "square root of the sequence length",
    ),
    (ex.check_scaled_dot_product_attention, sdpa_not_scaled, "no scaling at all"),
    (
        ex.check_scaled_dot_product_attention,
        sdpa_scaled_by_d_k,
        "you divided the scores by d_k",
    ),
    (
        ex.check_scaled_dot_product_attention,
        sdpa_mask_inverted,
        "the mask convention is inverted",
    ),
    (
        ex.check_scaled_dot_product_attention,
        sdpa_mask_after_softmax,
        "you masked after the softmax",
    ),
    (
        ex.check_scaled_dot_product_attention,
        sdpa_softmax_over_queries,
        "softmax over the query axis",
    ),
    (
        ex.check_scaled_dot_product_attention,
        sdpa_nan_on_fully_masked_rows,
        "NaN where a row is fully masked",
    ),
    (
        ex.check_scaled_dot_product_attention,
        sdpa_fill_minus_1e9,
        "spreads its weight evenly",
    ),
    (
        ex.check_scaled_dot_product_attention,
        sdpa_fill_zero,
        "filling them with 0 is not enough",
    ),
    (ex.check_scaled_dot_product_attention, sdpa_ignores_mask, "ignore the mask"),
    (
        ex.check_scaled_dot_product_attention,
        sdpa_returns_output_only,
        "pair (output, weights)",
    ),
    (
        ex.check_scaled_dot_product_attention,
        sdpa_own_softmax_overflows,
        "exp(1e4) overflows",
    ),
    (
        ex.check_scaled_dot_product_attention,
        sdpa_weights_times_k,
        "one row per query, as wide as v",
    ),
    (ex.check_scaled_dot_product_attention, sdpa_output_from_scores, "weights @ v"),
    # causal mask
    (ex.check_causal_mask, causal_diagonal_excluded, "leaves out the diagonal"),
    (ex.check_causal_mask, causal_upper_triangle, "is the upper triangle"),
    (ex.check_causal_mask, causal_top_left, "aligned top-left"),
    (ex.check_causal_mask, causal_inverted, "is inverted"),
    (ex.check_causal_mask, causal_float_additive, "an additive mask"),
    (ex.check_causal_mask, causal_ignores_T_k, "ignore T_k"),
    # padding mask
    (ex.check_padding_mask, padding_inverted, "is inverted"),
    (ex.check_padding_mask, padding_off_by_one, "off by one"),
    (ex.check_padding_mask, padding_one_short, "stops one early"),
    (ex.check_padding_mask, padding_wrong_shape, "mask[:, None, None, :]"),
    # LayerNorm
    (ex.check_layer_norm, ln_unbiased_variance, "unbiased variance"),
    (ex.check_layer_norm, ln_eps_outside_sqrt, "eps outside the square root"),
    (ex.check_layer_norm, ln_over_batch_axis, "the batch axis"),
    (ex.check_layer_norm, ln_beta_forgotten, "without beta"),
    (ex.check_layer_norm, ln_no_eps, "without eps"),
    (ex.check_layer_norm, ln_naive_variance, "cancels catastrophically"),
    (ex.check_layer_norm, ln_ignores_eps, "ignores its eps argument"),
    # sinusoidal positional encoding
    (
        ex.check_sinusoidal_positional_encoding,
        pe_sin_cos_swapped,
        "sin and cos are swapped",
    ),
    (
        ex.check_sinusoidal_positional_encoding,
        pe_exponent_i_over_d,
        "exponent i/d_model",
    ),
    (
        ex.check_sinusoidal_positional_encoding,
        pe_positions_from_1,
        "positions start at 1",
    ),
    (
        ex.check_sinusoidal_positional_encoding,
        pe_concatenated_halves,
        "interleaves them",
    ),
    # RoPE
    (ex.check_apply_rope, rope_wrong_frequencies, "check the frequencies"),
    (ex.check_apply_rope, rope_wrong_frequencies_linear, "check the frequencies"),
    (
        ex.check_apply_rope,
        rope_same_angle_every_pair,
        "every pair is rotated by the same angle",
    ),
    (ex.check_apply_rope, rope_rotate_half, "rotate half"),
    (ex.check_apply_rope, rope_ignores_positions, "ignores its positions argument"),
    (ex.check_apply_rope, rope_opposite_direction, "opposite way"),
    # GQA
    (ex.check_repeat_kv, repeat_kv_tiled, "repeat_interleave"),
    (ex.check_repeat_kv, repeat_kv_time_axis, "time axis"),
    # multi-head attention
    (
        ex.check_multi_head_attention,
        mha_heads_split_without_transpose,
        "split with .view(B, h, T, d_k)",
    ),
    (
        ex.check_multi_head_attention,
        mha_forgot_W_o,
        "multiply the concatenated heads by W_o",
    ),
    (
        ex.check_multi_head_attention,
        mha_scaled_by_sqrt_d_model,
        "scaled the scores by sqrt(d_model)",
    ),
    (
        ex.check_multi_head_attention,
        mha_merge_without_transpose,
        "transpose back to (B, T, h, d_k)",
    ),
    (ex.check_multi_head_attention, mha_ignores_mask, "ignores the mask"),
    # KV cache
    (
        ex.check_kv_cache_step,
        kv_position_does_not_advance,
        "the position does not advance",
    ),
    (ex.check_kv_cache_step, kv_cache_not_appended, "the cache was not appended"),
    (
        ex.check_kv_cache_step,
        kv_attends_only_new_token,
        "attended only to the new keys",
    ),
    (ex.check_kv_cache_step, kv_no_causal_mask_in_prompt, "attend causally"),
    (ex.check_kv_cache_step, kv_stores_unrotated_keys, "un-rotated new key"),
]


@pytest.mark.parametrize(
    ("checker", "wrong", "cause"), CATALOGUE, ids=[w.__name__ for _, w, _ in CATALOGUE]
)
def test_checker_rejects_mistake_and_names_its_cause(checker, wrong, cause, capsys):
    with pytest.raises(AssertionError) as info:
        checker(wrong)
    message = str(info.value)
    assert message.startswith(f"{checker.__name__}: "), message
    assert cause in message, f"expected {cause!r} in the message, got: {message}"
    assert capsys.readouterr().out == "", (
        "a failing checker must not also print a success line"
    )


# ------------------------------------------------------------------------------------------------
# Correct answers are accepted: the library's own function, and other correct ways to write it
# ------------------------------------------------------------------------------------------------


def softmax_via_torch(x, dim=-1):
    return torch.softmax(x, dim=dim).nan_to_num(0.0)


def sdpa_via_torch(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, NEG_INF)
    w = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return w @ v, w


def causal_via_tril(T_q, T_k=None):
    T_k = T_q if T_k is None else T_k
    return torch.ones(T_q, T_k, dtype=torch.bool).tril(diagonal=T_k - T_q)


def padding_via_comparison(lengths, T):
    return (torch.arange(T) < lengths.unsqueeze(-1)).view(len(lengths), 1, 1, T)


def layer_norm_via_torch(x, gamma, beta, eps=1e-5):
    return F.layer_norm(x, x.shape[-1:], gamma, beta, eps)


def pe_by_loops(T, d_model):
    return _pe(T, d_model)


def rope_via_complex(x, positions):
    d = x.size(-1)
    theta = positions[:, None].double() * 10000.0 ** (
        -torch.arange(0, d, 2, dtype=torch.float64) / d
    )
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return (
        torch.view_as_real(z * torch.polar(torch.ones_like(theta), theta))
        .flatten(-2)
        .to(x.dtype)
    )


def repeat_kv_via_repeat_interleave(k, n_rep):
    return k.repeat_interleave(n_rep, dim=1)


def mha_via_library_module(x_q, x_kv, W_q, W_k, W_v, W_o, n_heads, mask=None):
    m = _module_with_weights(W_q, W_k, W_v, W_o, n_heads)
    with torch.no_grad():
        return m(x_q, x_kv, x_kv, mask, need_weights=False)[0]


def kv_step_own(q_new, k_new, v_new, cache_k, cache_v, rope=False):
    return _step(q_new, k_new, v_new, cache_k, cache_v, rope)


def _module_with_weights(W_q, W_k, W_v, W_o, n_heads):
    m = tl.MultiHeadAttention(W_q.size(0), n_heads, bias=False)
    with torch.no_grad():
        for proj, W in (
            (m.q_proj, W_q),
            (m.k_proj, W_k),
            (m.v_proj, W_v),
            (m.o_proj, W_o),
        ):
            proj.weight.copy_(W.T)  # nn.Linear computes x @ weight.T
    return m


CORRECT = [
    (ex.check_softmax, tl.softmax),
    (ex.check_softmax, softmax_via_torch),
    (ex.check_scaled_dot_product_attention, tl.scaled_dot_product_attention),
    (ex.check_scaled_dot_product_attention, sdpa_via_torch),
    (ex.check_causal_mask, tl.causal_mask),
    (ex.check_causal_mask, causal_via_tril),
    (ex.check_padding_mask, tl.padding_mask),
    (ex.check_padding_mask, padding_via_comparison),
    (ex.check_layer_norm, tl.layer_norm),
    (ex.check_layer_norm, layer_norm_via_torch),
    (ex.check_sinusoidal_positional_encoding, tl.sinusoidal_positional_encoding),
    (ex.check_sinusoidal_positional_encoding, pe_by_loops),
    (ex.check_apply_rope, tl.apply_rope),
    (ex.check_apply_rope, rope_via_complex),
    (ex.check_repeat_kv, tl.repeat_kv),
    (ex.check_repeat_kv, repeat_kv_via_repeat_interleave),
    (ex.check_multi_head_attention, ex.multi_head_attention),
    (ex.check_multi_head_attention, mha_via_library_module),
    (ex.check_kv_cache_step, tl.cached_attention_step),
    (ex.check_kv_cache_step, kv_step_own),
]


@pytest.mark.parametrize(
    ("checker", "right"),
    CORRECT,
    ids=[f"{c.__name__}-{r.__name__}" for c, r in CORRECT],
)
def test_checker_accepts_a_correct_answer_and_prints_one_line(checker, right, capsys):
    assert checker(right) is None
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{checker.__name__}: correct"), (
        lines
    )


CHECKERS = [getattr(ex, name) for name in ex.__all__ if name.startswith("check_")]


def test_every_issue_checker_exists_and_is_catalogued():
    required = {
        "check_softmax",
        "check_scaled_dot_product_attention",
        "check_causal_mask",
        "check_padding_mask",
        "check_layer_norm",
        "check_sinusoidal_positional_encoding",
        "check_apply_rope",
        "check_repeat_kv",
        "check_multi_head_attention",
        "check_kv_cache_step",
    }
    assert required <= {c.__name__ for c in CHECKERS}
    assert {c.__name__ for c in CHECKERS} == {
        c.__name__ for c, _, _ in CATALOGUE
    }  # every checker has mistakes
    assert {c.__name__ for c in CHECKERS} == {
        c.__name__ for c, _ in CORRECT
    }  # and accepts the library


@pytest.mark.parametrize("checker", CHECKERS, ids=lambda c: c.__name__)
def test_a_stub_counts_as_not_attempted(checker, capsys):
    def stub(*args, **kwargs):
        raise NotImplementedError("your code here")

    assert checker(stub) is None
    out = capsys.readouterr().out.splitlines()
    assert out == [f"{checker.__name__}: not attempted yet.", ex._NOT_ATTEMPTED_HINT]


@pytest.mark.parametrize("checker", CHECKERS, ids=lambda c: c.__name__)
def test_another_exception_names_the_input_and_the_error(checker):
    def broken(*args, **kwargs):
        raise ValueError("shapes do not line up")

    with pytest.raises(AssertionError) as info:
        checker(broken)
    message = str(info.value)
    assert message.startswith(
        f"{checker.__name__}: your function raised ValueError on "
    )
    assert "shapes do not line up" in message
    assert isinstance(
        info.value.__cause__, ValueError
    )  # the learner's own traceback stays visible


def test_an_exception_names_the_shapes_that_triggered_it():
    def breaks_on_heads(q, k, v, mask=None):
        if q.dim() > 3:
            raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")
        return tl.scaled_dot_product_attention(q, k, v, mask)

    with pytest.raises(
        AssertionError,
        match=r"raised RuntimeError on q \(2, 3, 5, 4\), k and v \(2, 3, 6, 4\)",
    ):
        ex.check_scaled_dot_product_attention(breaks_on_heads)


def test_passing_the_result_instead_of_the_function_is_explained():
    with pytest.raises(AssertionError, match="pass your function itself"):
        ex.check_softmax(tl.softmax(torch.zeros(3)))


def test_checkers_do_not_modify_the_learners_view_of_inputs():
    """A candidate that writes into its inputs in place must not corrupt the checker's reference."""

    def in_place(x, dim=-1):
        out = tl.softmax(x, dim=dim)
        x.zero_()
        return out

    ex.check_softmax(in_place)


# ------------------------------------------------------------------------------------------------
# The reference solution of the multi-head attention exercise is the library's MultiHeadAttention
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("B", "T_q", "T_k", "d_model", "h"),
    [(2, 5, 5, 8, 2), (1, 3, 7, 12, 3), (2, 4, 4, 6, 1)],
)
@pytest.mark.parametrize("masked", [False, True])
def test_reference_mha_matches_the_library_module(B, T_q, T_k, d_model, h, masked):
    g = torch.Generator().manual_seed(B * 100 + T_k)
    x_q, x_kv = (
        torch.randn(B, T_q, d_model, generator=g),
        torch.randn(B, T_k, d_model, generator=g),
    )
    W = [
        torch.randn(d_model, d_model, generator=g) / math.sqrt(d_model)
        for _ in range(4)
    ]
    mask = tl.causal_mask(T_q, T_k) if masked else None
    m = _module_with_weights(*W, h)
    with torch.no_grad():
        want, _ = m(x_q, x_kv, x_kv, mask)
    torch.testing.assert_close(ex.multi_head_attention(x_q, x_kv, *W, h, mask), want)


def test_reference_mha_matches_torch():
    torch.manual_seed(0)
    torch_mha = torch.nn.MultiheadAttention(8, 2, bias=False, batch_first=True).eval()
    W_q, W_k, W_v = (w.T for w in torch_mha.in_proj_weight.detach().chunk(3))
    W_o = torch_mha.out_proj.weight.detach().T
    x = torch.randn(2, 5, 8)
    with torch.no_grad():
        want, _ = torch_mha(
            x, x, x, attn_mask=~tl.causal_mask(5)
        )  # torch: True = may NOT attend
    torch.testing.assert_close(
        ex.multi_head_attention(x, x, W_q, W_k, W_v, W_o, 2, tl.causal_mask(5)), want
    )


def test_importing_the_checkers_is_quiet_and_needs_no_plotting():
    code = "import sys, transformer_lib.exercises; assert 'matplotlib' not in sys.modules and 'ipywidgets' not in sys.modules"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and done.stderr == ""


# ------------------------------------------------------------------------------------------------
# The book's own solutions pass the checkers their exercises call
# ------------------------------------------------------------------------------------------------

import json  # noqa: E402
import re  # noqa: E402
from pathlib import Path  # noqa: E402

BOOK = Path(__file__).resolve().parents[1] / "book"
CHECK_CALL = re.compile(r"^(check_\w+)\((\w+)\)\s*$", re.M)


def _solution_code(markdown: str) -> list[str]:
    """The code blocks of a markdown cell: fenced python blocks and indented blocks."""
    blocks = [
        m.group(1)
        for m in re.finditer(
            r"^`{3,}(?:python|py|\{code-block\} python|\{code-cell\} ipython3)?[ \t]*\n(.*?)^`{3,}[ \t]*$",
            markdown,
            re.S | re.M,
        )
    ]
    indented, current = [], []
    for line in markdown.splitlines() + [""]:
        if line.startswith("    ") or (current and not line.strip()):
            current.append(line[4:])
        else:
            if any(s.strip() for s in current):
                indented.append("\n".join(current))
            current = []
    return blocks + indented


def published_solutions() -> list[tuple[str, str, str, str]]:
    """(notebook, checker, function name, solution code) for every checker call in a chapter."""
    found = []
    for path in sorted(BOOK.glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for i, cell in enumerate(cells):
            source = "".join(cell["source"])
            if cell["cell_type"] != "code":
                continue
            for checker, fn in CHECK_CALL.findall(source):
                solution = next(
                    (
                        "".join(c["source"])
                        for c in cells[i + 1 :]
                        if c["cell_type"] == "markdown"
                        and "{solution}" in "".join(c["source"])
                    ),
                    "",
                )
                code = next(
                    (
                        b
                        for b in _solution_code(solution)
                        if re.search(rf"^def {fn}\(", b, re.M)
                    ),
                    "",
                )
                found.append((path.name, checker, fn, code))
    return found


SOLUTIONS = published_solutions()


@pytest.mark.parametrize(
    ("notebook", "checker", "fn", "code"),
    SOLUTIONS,
    ids=[f"{n}-{c}" for n, c, _, _ in SOLUTIONS],
)
def test_published_solution_passes_its_checker(notebook, checker, fn, code, capsys):
    assert code, (
        f"{notebook}: the solution after the cell calling {checker}({fn}) shows no code defining {fn}"
    )
    namespace = {"torch": torch, "nn": torch.nn, "F": F, "math": math, "tl": tl}
    namespace.update(
        {name: getattr(ex, name) for name in ex.__all__}
    )  # a solution may end with its check call
    exec(compile(code, f"<{notebook} solution of {fn}>", "exec"), namespace)  # noqa: S102
    getattr(ex, checker)(namespace[fn])
    out = capsys.readouterr().out
    assert out.startswith(f"{checker}: correct"), (
        f"{notebook}: the published solution of {fn} does not pass: {out}"
    )


def test_every_checker_is_called_by_a_chapter():
    called = {checker for _, checker, _, _ in SOLUTIONS}
    unused = sorted({c.__name__ for c in CHECKERS} - called)
    assert not unused, f"no chapter exercise calls {unused}"
