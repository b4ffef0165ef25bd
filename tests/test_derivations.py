"""The steps of the book's derivations that no library function computes on its own,
checked numerically in float64 (against PyTorch's built-ins or autograd where it can).
The formula index (book/formulas.md) points each such step at its test here.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import transformer_lib as tl

F64 = torch.float64


def _rand(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


def test_qk_is_a_bilinear_form():
    """q_i . k_j = x_i W_Q W_K^T x_j^T   (eq-qk-bilinear)."""
    x, W_q, W_k = _rand(5, 8, seed=1), _rand(8, 4, seed=2), _rand(8, 4, seed=3)
    torch.testing.assert_close((x @ W_q) @ (x @ W_k).T, x @ (W_q @ W_k.T) @ x.T)


def test_soft_lookup_is_unscaled_attention():
    """lookup(q) = sum_j softmax(q . k)_j v_j   (eq-soft-lookup), torch's attention with
    scale 1."""
    q, k, v = _rand(3, 4, seed=1), _rand(6, 4, seed=2), _rand(6, 5, seed=3)
    by_hand = torch.stack(
        [
            sum(
                torch.exp(qi @ kj) / torch.exp(k @ qi).sum() * vj
                for kj, vj in zip(k, v, strict=True)
            )
            for qi in q
        ]
    )
    torch.testing.assert_close(by_hand, tl.softmax(q @ k.T) @ v)
    torch.testing.assert_close(
        by_hand, F.scaled_dot_product_attention(q, k, v, scale=1.0)
    )


def test_scores_are_dot_products_of_rows():
    """S = Q K^T, S_ij = sum_c Q_ic K_jc   (eq-scores)."""
    q, k = _rand(2, 5, 8, seed=1), _rand(2, 7, 8, seed=2)
    S = tl.attention_scores(q, k, scale=False)
    torch.testing.assert_close(S, torch.einsum("bic,bjc->bij", q, k))
    torch.testing.assert_close(
        S[1, 2, 3], sum(q[1, 2, c] * k[1, 3, c] for c in range(8))
    )


def test_softmax_jacobian():
    """d a_i / d s_j = a_i (delta_ij - a_j) (eq-softmax-jacobian), against autograd."""
    s = _rand(6, seed=4) * 2
    a = tl.softmax(s)
    J = torch.autograd.functional.jacobian(lambda t: tl.softmax(t), s)
    torch.testing.assert_close(J, torch.diag(a) - torch.outer(a, a))
    torch.testing.assert_close(
        J, torch.autograd.functional.jacobian(lambda t: torch.softmax(t, -1), s)
    )


def test_softmax_ratio():
    """a_i / a_j = exp(s_i - s_j)   (eq-softmax-ratio)."""
    s = _rand(7, seed=5) * 3
    a = tl.softmax(s)
    torch.testing.assert_close(
        a[:, None] / a[None, :], torch.exp(s[:, None] - s[None, :])
    )


def test_temperature():
    """softmax(s / tau)   (eq-temperature): tau -> 0 picks the argmax, tau -> infinity
    is uniform."""
    s = _rand(2, 6, seed=6)
    for tau in (0.5, 1.0, 4.0):
        torch.testing.assert_close(tl.softmax(s / tau), torch.softmax(s / tau, -1))
    torch.testing.assert_close(tl.softmax(s / 1e-4), F.one_hot(s.argmax(-1), 6).to(F64))
    torch.testing.assert_close(
        tl.softmax(s / 1e6), torch.full_like(s, 1 / 6), atol=1e-5, rtol=0
    )


def test_lm_factorisation_sums_to_one():
    """p(x_1..x_{T-1} | x_0) = prod_t p(x_t | x_<t)   (eq-lm-factorisation): the product
    of a causal model's next-token distributions is a distribution over whole
    continuations, summing to 1 over every one of them."""
    torch.manual_seed(0)
    cfg = tl.GPTConfig(
        vocab_size=3, d_model=8, n_heads=2, n_layers=1, d_ff=16, max_len=4
    )
    model = tl.GPT(cfg).double().eval()
    seqs = torch.cartesian_prod(*[torch.arange(3)] * 3)  # (27, 3) continuations
    tokens = torch.cat([torch.zeros(27, 1, dtype=torch.long), seqs], dim=1)  # x_0 = 0
    with torch.no_grad():
        logp = torch.log_softmax(model(tokens), -1)[:, :-1]  # (27, 3, V)
    joint = logp.gather(-1, tokens[:, 1:, None]).squeeze(-1).sum(-1).exp()  # (27,)
    torch.testing.assert_close(joint.sum(), torch.tensor(1.0, dtype=F64))


def test_entropy_grows_with_temperature():
    """dH/dtau = Var_tau(z) / tau^3   (eq-entropy-temperature), against a central
    difference, and H runs from 0 to log V."""
    z = 2 * _rand(4, 9, seed=11)

    def entropy(tau: float) -> torch.Tensor:
        logp = torch.log_softmax(z / tau, -1)
        return -(logp.exp() * logp).sum(-1)

    for tau in (0.2, 0.7, 1.0, 2.5, 10.0):
        h = 1e-5
        numeric = (entropy(tau + h) - entropy(tau - h)) / (2 * h)
        p = torch.softmax(z / tau, -1)
        var = (p * z**2).sum(-1) - (p * z).sum(-1) ** 2
        torch.testing.assert_close(numeric, var / tau**3, atol=1e-7, rtol=1e-5)
    assert (entropy(1e-3) < 1e-6).all()
    torch.testing.assert_close(
        entropy(1e6), torch.full((4,), math.log(9), dtype=F64), atol=1e-6, rtol=0
    )


def test_unused_position_rows_get_no_gradient():
    """dL/dP_p = 0 for every position p that no training sequence reaches
    (eq-unused-rows): a learned table's rows past the training length stay untrained,
    and so does the last row used: position T-1 predicts nothing, and no later position
    reads it."""
    torch.manual_seed(0)
    cfg = tl.GPTConfig(
        vocab_size=7, d_model=16, n_heads=2, n_layers=2, d_ff=32, max_len=12
    )
    model = tl.GPT(cfg).double()
    tokens = torch.randint(0, 7, (4, 8))  # length 8 of 12
    tl.causal_lm_loss(model(tokens), tokens).backward()
    grad = model.pos_emb.weight.grad  # (12, d_model)
    assert (grad[7:] == 0).all()
    assert (grad[:7].abs().sum(-1) > 0).all()


def test_masked_softmax_renormalises():
    """A_ij = M_ij e^S_ij / sum_j' M_ij' e^S_ij'   (eq-masked-softmax) is what masking
    with -inf gives."""
    q, k, v = _rand(4, 8, seed=1), _rand(6, 8, seed=2), _rand(6, 3, seed=3)
    mask = tl.causal_mask(4, 6) & (torch.arange(6) != 1)
    e = torch.exp(tl.attention_scores(q, k)) * mask
    _, w = tl.scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(w, e / e.sum(-1, keepdim=True))


def test_combined_mask_matches_torch():
    """M = M_causal AND M_pad   (eq-combined-mask) equals torch's attn_mask plus
    key_padding_mask."""
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True, dtype=F64)
    ours = tl.MultiHeadAttention.from_torch(mha)
    x, lengths = _rand(2, 5, 8, seed=7), torch.tensor([5, 3])
    mask = tl.causal_mask(5) & tl.padding_mask(lengths, 5)  # (B, 1, T, T)
    out, _ = ours(x, x, x, mask)
    expected, _ = mha(
        x,
        x,
        x,
        attn_mask=~tl.causal_mask(5),
        key_padding_mask=~tl.padding_mask(lengths, 5)[:, 0, 0],
    )
    torch.testing.assert_close(out, expected)


def test_stacked_projection_splits_into_heads():
    """X W^Q = [X W^Q_0 | ... | X W^Q_{h-1}]   (eq-stacked-proj): split_heads picks the
    column blocks."""
    x, W, h = _rand(2, 5, 12, seed=1), _rand(12, 12, seed=2), 3
    heads = tl.split_heads(x @ W, h)  # (B, h, T, d_k)
    for i in range(h):
        torch.testing.assert_close(heads[:, i], x @ W[:, 4 * i : 4 * (i + 1)])


def test_concat_times_w_o_is_a_sum_over_heads():
    """Concat(head_0, ..., head_{h-1}) W^O = sum_i head_i W^O_i   (eq-concat-sum)."""
    heads, W_o = (
        _rand(2, 3, 5, 4, seed=1),
        _rand(12, 12, seed=2),
    )  # (B, h, T, d_v), (h d_v, d_model)
    torch.testing.assert_close(
        tl.merge_heads(heads) @ W_o,
        sum(heads[:, i] @ W_o[4 * i : 4 * (i + 1)] for i in range(3)),
    )


def test_gelu_and_its_tanh_approximation():
    """GELU(z) = z Phi(z)   (eq-gelu) and its tanh approximation   (eq-gelu-tanh),
    against F.gelu."""
    z = torch.linspace(-6, 6, 241, dtype=F64)
    exact = z / 2 * (1 + torch.erf(z / math.sqrt(2)))
    approx = z / 2 * (1 + torch.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z**3)))
    torch.testing.assert_close(exact, F.gelu(z))
    torch.testing.assert_close(approx, F.gelu(z, approximate="tanh"))
    assert (approx - exact).abs().max() < 1e-3


def test_parameter_counts():
    """P_attn, P_FFN (eq-ffn-params), P_enc (eq-enc-params), P_dec (eq-dec-params),
    against torch's layers."""
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    d, d_ff = 16, 48
    assert (
        count(tl.MultiHeadAttention(d, 4))
        == 4 * d * d + 4 * d
        == count(torch.nn.MultiheadAttention(d, 4))
    )
    assert count(tl.FeedForward(d, d_ff)) == 2 * d * d_ff + d_ff + d
    assert count(tl.FeedForward(d, 4 * d)) == 8 * d * d + 5 * d
    p_enc = 4 * d * d + 4 * d + 2 * d * d_ff + d_ff + d + 4 * d
    assert (
        count(tl.EncoderLayer(d, 4, d_ff))
        == p_enc
        == count(torch.nn.TransformerEncoderLayer(d, 4, d_ff))
    )
    p_dec = 8 * d * d + 2 * d * d_ff + d_ff + 15 * d
    assert (
        count(tl.DecoderLayer(d, 4, d_ff))
        == p_dec
        == count(torch.nn.TransformerDecoderLayer(d, 4, d_ff))
    )


def test_ffn_is_position_wise():
    """FFN(X)_t = FFN(x_t)   (eq-position-wise): every position alone gives the same
    rows."""
    torch.manual_seed(0)
    ffn = tl.FeedForward(8, 32).double()
    x = _rand(2, 5, 8, seed=1)
    torch.testing.assert_close(
        ffn(x), torch.stack([ffn(x[:, t]) for t in range(5)], dim=1)
    )


def test_residual_jacobian():
    """d x_L / d x_l = prod_j (I + J_j)   (eq-residual-jacobian), against autograd."""
    torch.manual_seed(0)
    blocks = [
        torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.Tanh()).double()
        for _ in range(3)
    ]
    x0 = _rand(6, seed=2)
    xs = [x0]
    for f in blocks:
        xs.append(xs[-1] + f(xs[-1]))  # x_{l+1} = x_l + F_l(x_l)   (eq-residual)
    product = torch.eye(6, dtype=F64)
    for f, x in zip(blocks, xs[:-1], strict=True):
        product = (
            torch.eye(6, dtype=F64) + torch.autograd.functional.jacobian(f, x)
        ) @ product

    def whole(x):
        for f in blocks:
            x = x + f(x)
        return x

    torch.testing.assert_close(torch.autograd.functional.jacobian(whole, x0), product)


def test_layer_norm_output_std():
    """std(z_hat) = sigma / sqrt(sigma^2 + eps) (PyTorch) and sigma / (sigma + eps)
    (article)   (eq-ln-output-std)."""
    one, zero = torch.ones(8, dtype=F64), torch.zeros(8, dtype=F64)
    for scale in (1e-3, 1e-2, 1.0):
        z = _rand(4, 8, seed=3) * scale
        sigma = z.std(-1, unbiased=False)
        std = lambda y: y.std(-1, unbiased=False)  # noqa: E731
        torch.testing.assert_close(
            std(tl.layer_norm(z, one, zero)), sigma / torch.sqrt(sigma**2 + 1e-5)
        )
        torch.testing.assert_close(
            std(tl.layer_norm_article(z, one, zero)), sigma / (sigma + 1e-5)
        )


def test_batch_norm_formula_matches_torch():
    """BN normalises each feature over (B, T)   (eq-batch-norm), as nn.BatchNorm1d does
    in training."""
    z, gamma, beta = _rand(3, 5, 4, seed=1) * 2 + 1, _rand(4, seed=2), _rand(4, seed=3)
    mu = z.mean(dim=(0, 1))
    var = ((z - mu) ** 2).mean(dim=(0, 1))
    by_formula = gamma * (z - mu) / torch.sqrt(var + 1e-5) + beta
    bn = torch.nn.BatchNorm1d(4, dtype=F64).train()
    with torch.no_grad():
        bn.weight.copy_(gamma)
        bn.bias.copy_(beta)
    torch.testing.assert_close(
        by_formula, bn(z.transpose(1, 2)).transpose(1, 2)
    )  # BatchNorm1d wants (B, C, T)


def test_layer_norm_is_scale_invariant():
    """LN(a z) = LN(z) and the gradient scales by 1/a   (eq-ln-scale), exactly when eps
    = 0."""
    z, gamma, beta, a = _rand(8, seed=4), _rand(8, seed=5), _rand(8, seed=6), 7.0
    ln = lambda t: tl.layer_norm(t, gamma, beta, eps=0.0)  # noqa: E731
    torch.testing.assert_close(ln(a * z), ln(z))
    J = torch.autograd.functional.jacobian
    torch.testing.assert_close(J(ln, a * z), J(ln, z) / a)


def test_pe_dot_depends_only_on_the_offset():
    """PE(p) . PE(p + k) = sum_i cos(omega_i k)   (eq-pe-dot), whatever p."""
    d = 32
    pe = tl.sinusoidal_positional_encoding(200, d, dtype=F64)
    omega = 10000.0 ** (-torch.arange(0, d, 2, dtype=F64) / d)
    for k in (0, 1, 5, 40):
        expected = torch.cos(omega * k).sum()
        for p in (0, 3, 100):
            torch.testing.assert_close(pe[p] @ pe[p + k], expected)


def test_pe_dot_approximation():
    """PE(p) . PE(p + k) / (d/2) ~ 1 - log_10000 k for 1 << k << 10000
    (eq-pe-dot-approx), to within 0.1."""
    pe = tl.sinusoidal_positional_encoding(1001, 512, dtype=F64)
    for k in (10, 30, 100, 300, 1000):
        assert abs((pe[0] @ pe[k]).item() / 256 - (1 - math.log(k, 10000))) < 0.1


def test_pe_dot_integral():
    """sum_i cos(omega_i k) / (d/2) ~ integral_0^1 cos(k 10000^-u) du
    ~ 1 - log_10000 k - gamma / ln 10000   (eq-pe-dot-integral)."""
    d, gamma = 512, 0.5772156649015329
    pe = tl.sinusoidal_positional_encoding(1001, d, dtype=F64)
    u = torch.linspace(0, 1, 200_001, dtype=F64)
    for k in (10, 100, 1000):
        exact = (pe[0] @ pe[k]).item() / (d / 2)
        integral = torch.trapezoid(torch.cos(k * 10000.0**-u), u).item()
        closed = 1 - math.log(k, 10000) - gamma / math.log(10000)
        assert abs(exact - integral) < 0.015 and abs(integral - closed) < 0.01


def test_decoder_loss_is_cross_entropy_over_real_positions():
    """L = -1/N sum over real (b, t) of log P[b, t, y_{b,t}]   (eq-dec-loss) =
    F.cross_entropy(ignore_index=pad)."""
    logits, pad = _rand(2, 5, 7, seed=1), 0
    targets = torch.tensor([[3, 4, 2, 0, 0], [5, 6, 1, 2, 3]])
    log_p = torch.log(tl.softmax(logits))  # P = softmax(logits)   (eq-output-softmax)
    real = targets != pad
    by_formula = -log_p.gather(-1, targets[..., None])[..., 0][real].sum() / real.sum()
    torch.testing.assert_close(
        by_formula,
        F.cross_entropy(logits.reshape(-1, 7), targets.reshape(-1), ignore_index=pad),
    )
    # with no padding it is the toy model's mean over all B * T targets   (eq-toy-loss)
    full = torch.tensor([[3, 4, 2, 6, 5], [5, 6, 1, 2, 3]])
    by_formula = -log_p.gather(-1, full[..., None]).mean()
    torch.testing.assert_close(
        by_formula, F.cross_entropy(logits.reshape(-1, 7), full.reshape(-1))
    )


def _explicit_sdpa(q, k, v, attn_mask=None, enable_gqa=False, **_):
    """softmax(Q K^T / sqrt(d_k)) V with explicit matmuls, which torch's FLOP counter
    can see."""
    n_rep = q.size(-3) // k.size(-3) if enable_gqa else 1
    return tl.scaled_dot_product_attention(
        q, tl.repeat_kv(k, n_rep), tl.repeat_kv(v, n_rep), attn_mask
    )[0]


@pytest.mark.parametrize("n_kv_heads", [None, 2], ids=["mha", "gqa"])
def test_decode_cost_matches_torch_flop_counter(n_kv_heads):
    """C(t) of one greedy step, with and without a cache (eq-decode-macs), is what torch
    counts: 2 FLOPs per multiply-add.

    The fused CPU attention kernel has no FLOP formula in torch, so attention runs
    through the explicit path here.
    """
    import types
    from unittest import mock

    from torch.utils.flop_counter import FlopCounterMode

    import transformer_lib.attention as attention_module

    torch.manual_seed(0)
    cfg = tl.TransformerConfig(
        vocab_size=11,
        d_model=16,
        n_heads=4,
        n_kv_heads=n_kv_heads,
        n_layers=2,
        d_ff=24,
        max_len=16,
    )
    model = tl.Transformer(cfg).eval()
    src = torch.randint(2, 11, (1, 5))
    explicit = types.SimpleNamespace(scaled_dot_product_attention=_explicit_sdpa)
    with torch.no_grad(), mock.patch.object(attention_module, "F", explicit):
        memory = model.encode(src)
        cache = model.init_cache(memory)
        seq = torch.full((1, 1), cfg.bos_id)
        for t in range(1, 5):
            with FlopCounterMode(display=False) as cached:
                logits = model.decode_step(seq[:, -1:], cache)
            with FlopCounterMode(display=False) as uncached:
                model.out_proj(model.decode(seq, memory)[:, -1])
            assert cached.get_total_flops() == 2 * tl.decode_step_macs(
                cfg, t, 5, use_cache=True
            )
            assert uncached.get_total_flops() == 2 * tl.decode_step_macs(
                cfg, t, 5, use_cache=False
            )
            seq = torch.cat([seq, logits[:, -1:].argmax(-1)], dim=1)


def test_mean_of_equal_shard_means_is_the_batch_mean():
    """grad L = (1/P) sum_r grad L_r when the P shards are equal (eq-ddp-grad); with
    unequal shards the mean of the means weighs the small shard's examples more."""
    per_example = _rand(12, 5, seed=7)  # 12 examples' gradients, 5 parameters
    whole = per_example.mean(0)
    shards = per_example.tensor_split(3)  # 4 + 4 + 4
    torch.testing.assert_close(torch.stack([s.mean(0) for s in shards]).mean(0), whole)
    uneven = per_example.split([2, 10])
    assert not torch.allclose(torch.stack([s.mean(0) for s in uneven]).mean(0), whole)


def test_tensor_parallel_sublayers_are_sums_over_ranks():
    """MHA(X) = sum_r Y_r + b_O over head groups (eq-tp-attention) and
    FFN(X) = sum_r phi(X W_1^(r) + b_1^(r)) W_2^(r) + b_2 (eq-tp-ffn), one process."""
    torch.manual_seed(0)
    x = _rand(2, 6, 16, seed=8)
    mha = tl.MultiHeadAttention(16, 4).to(F64)
    P, d_k = 2, 4
    q, k, v = (lin(x).view(2, 6, 4, d_k).transpose(1, 2) for lin in
               (mha.q_proj, mha.k_proj, mha.v_proj))  # fmt: skip
    heads = F.scaled_dot_product_attention(q, k, v)  # (B, h, T, d_k)
    W_o = mha.o_proj.weight.T  # (h d_k, d_model)
    parts = [
        heads[:, r * 2 : (r + 1) * 2].transpose(1, 2).reshape(2, 6, 2 * d_k)
        @ W_o[r * 2 * d_k : (r + 1) * 2 * d_k]
        for r in range(P)
    ]
    torch.testing.assert_close(sum(parts) + mha.o_proj.bias, mha(x, x, x)[0])
    ffn = tl.FeedForward(16, 12).to(F64)
    W1, b1, W2 = ffn.linear1.weight.T, ffn.linear1.bias, ffn.linear2.weight.T
    cols = [slice(r * 6, (r + 1) * 6) for r in range(P)]
    parts = [F.relu(x @ W1[:, c] + b1[c]) @ W2[c] for c in cols]
    torch.testing.assert_close(sum(parts) + ffn.linear2.bias, ffn(x))
