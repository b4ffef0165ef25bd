"""The chapters' demo code (``transformer_lib.demos``): hand-set weights, toy tasks and
small training loops, checked against PyTorch's own functions and modules."""

import math

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.testing import assert_close

import transformer_lib as tl
from transformer_lib.demos import (
    encoder_example,
    ffn_curve_fit,
    handbuilt_head,
    handbuilt_mha,
    masking,
    sublayer_stack,
    translation,
)


# -- chapter 1: one hand-built head
def test_sentence_embeddings_are_kind_and_position_one_hots():
    X = handbuilt_head.sentence_embeddings()
    T, n_kinds = len(handbuilt_head.WORDS), len(handbuilt_head.KINDS)
    assert X.shape == (T, len(handbuilt_head.FEATURES)) == (6, 10)
    assert torch.equal(X[:, :n_kinds].argmax(1), torch.tensor(handbuilt_head.KIND_OF))
    assert torch.equal(X[:, n_kinds:], torch.eye(T))
    assert torch.equal(X.sum(1), torch.full((T,), 2.0))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("rule", handbuilt_head.RULES)
def test_lookup_is_attention_without_the_scale(rule, causal):
    weights, Z = handbuilt_head.lookup(rule, beta=4, causal=causal)
    X = handbuilt_head.sentence_embeddings()
    Q = X @ handbuilt_head.query_weights(rule, 4)
    K, V = X @ handbuilt_head.key_weights(), X @ handbuilt_head.value_weights()
    expected = F.scaled_dot_product_attention(Q, K, V, is_causal=causal, scale=1.0)
    assert_close(Z, expected)
    assert_close(weights.sum(-1), torch.ones(6))
    if causal:
        assert torch.all(weights.triu(1) == 0)


def test_the_previous_word_head_finds_the_previous_word():
    weights, _ = handbuilt_head.lookup("the previous word", beta=4)
    assert weights.argmax(-1).tolist() == [0, 0, 1, 2, 3, 4]
    # one score of beta among five zeros
    assert_close(weights.max(-1).values, torch.full((6,), math.e**4 / (math.e**4 + 5)))
    # a noun: cat (1) and mat (5) share every row's weight equally
    nouns, _ = handbuilt_head.lookup("a noun", beta=8)
    assert_close(nouns[:, 1], nouns[:, 5])
    assert torch.all(nouns[:, 1] > 0.49)


def test_query_weights_scale_with_beta_and_refuse_unknown_rules():
    assert_close(
        handbuilt_head.query_weights("the first word", 3.0),
        3 * handbuilt_head.query_weights("the first word", 1.0),
    )
    with pytest.raises(ValueError, match="unknown rule 'nothing'"):
        handbuilt_head.query_weights("nothing")


# -- chapter 4: masks
@pytest.mark.parametrize("length", [1, 3, 6])
@pytest.mark.parametrize("padding", ["right", "left"])
@pytest.mark.parametrize("causal", [False, True])
def test_build_mask_is_causal_and_key_padding(causal, padding, length):
    T = 6
    real = torch.arange(T) < length  # right padding: the first `length` are real
    if padding == "left":
        real = torch.arange(T) >= T - length
    expected = real.expand(T, T)
    if causal:
        expected = expected & torch.ones(T, T, dtype=torch.bool).tril()
    assert torch.equal(masking.build_mask(T, causal, padding, length), expected)
    tokens = masking.padded_tokens(length, padding)
    assert [t != masking.PAD for t in tokens] == real.tolist()


def test_masked_weights_before_and_after_the_softmax():
    scores = masking.example_scores()
    allowed = masking.build_mask(6, True, "left", 3)
    before = masking.masked_weights(scores, allowed, "before softmax")
    after = masking.masked_weights(scores, allowed, "after softmax")
    rows = allowed.any(-1)  # left padding: the first three rows allow nothing
    assert rows.tolist() == [False, False, False, True, True, True]
    reference = torch.softmax(scores.masked_fill(~allowed, -math.inf), -1)
    assert_close(before[rows], reference[rows])
    assert torch.all(before[~rows] == 0)  # the library's convention: no key, no weight
    assert_close(before[rows].sum(-1), torch.ones(3))
    assert torch.all(after[rows].sum(-1) < 1 - 1e-3)  # the wrong order loses weight
    assert torch.all(after[~allowed] == 0) and torch.all(before[~allowed] == 0)
    with pytest.raises(ValueError, match="order must be one of"):
        masking.masked_weights(scores, allowed, "never")


# -- chapter 5: hand-built multi-head attention
def test_each_hand_built_head_does_its_job():
    w = handbuilt_mha.head_weights(4, causal=True)  # (h, T, T)
    T = len(handbuilt_mha.SENTENCE)
    assert w.shape == (4, T, T)
    assert w[0].argmax(-1).tolist() == [0, 0, 1, 2, 3, 4]  # previous token
    assert w[1].argmax(-1).tolist() == list(range(T))  # current token
    assert w[3].argmax(-1).tolist() == [0] * T  # first token
    # same word: the second "the" (position 4) splits between itself and position 0
    assert_close(w[2, 4, 0], w[2, 4, 4])
    assert w[2, 4, [0, 4]].sum() > 0.9
    assert torch.all(w.triu(1) == 0)


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_hand_built_attention_against_torch_sdpa(n_kv_heads):
    m = handbuilt_mha.handbuilt_attention(n_kv_heads)
    full = handbuilt_mha.handbuilt_attention(4)
    d_k, n_rep = handbuilt_mha.D_K, 4 // n_kv_heads
    # GQA conversion: each K/V head is the mean of its group's heads
    Wk = full.k_proj.weight.view(n_kv_heads, n_rep, d_k, -1).mean(1)
    assert_close(m.k_proj.weight, Wk.reshape(n_kv_heads * d_k, -1))
    x = handbuilt_mha.embed(handbuilt_mha.SENTENCE)  # (1, T, d_model)
    q = m.q_proj(x).view(1, -1, 4, d_k).transpose(1, 2)  # (1, h, T, d_k)
    k = m.k_proj(x).view(1, -1, n_kv_heads, d_k).transpose(1, 2)
    v = m.v_proj(x).view(1, -1, n_kv_heads, d_k).transpose(1, 2)
    z = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    expected = m.o_proj(z.transpose(1, 2).reshape(1, -1, 4 * d_k))
    mask = tl.causal_mask(x.size(1))
    with torch.no_grad():
        assert_close(m(x, x, x, mask=mask)[0], expected)
    with pytest.raises(ValueError, match="must divide"):
        handbuilt_mha.handbuilt_attention(3)


# -- chapter 6: a fitted one-number FFN
def test_fitted_ffn_is_a_ridge_fit_of_its_second_layer():
    d_ff, ridge = 8, 1e-2
    ffn, x = ffn_curve_fit.fitted_ffn(d_ff, "relu", "sin(2x)", ridge=ridge)
    knots = -ffn.linear1.bias.detach()
    assert torch.all(ffn.linear1.weight == 1)
    assert_close(knots[1:] - knots[:-1], torch.full((d_ff - 1,), 6.0 / d_ff))
    # the same fit written as one least-squares problem: [H; sqrt(ridge) I] c = [y; 0]
    xs = torch.as_tensor(x, dtype=torch.float32).view(-1, 1)
    H = torch.cat([F.relu(xs - knots), torch.ones(len(x), 1)], 1).double()
    penalty = math.sqrt(ridge) * torch.eye(d_ff + 1, dtype=torch.float64)[:-1]
    y = torch.as_tensor(np.sin(2 * x))
    A = torch.cat([H, penalty])
    c = torch.linalg.lstsq(A, torch.cat([y, torch.zeros(d_ff)])[:, None]).solution
    got = torch.cat([ffn.linear2.weight.view(-1), ffn.linear2.bias]).double()
    assert_close(got, c.view(-1).float().double(), atol=1e-4, rtol=1e-4)


def test_more_units_fit_better_and_bad_targets_are_refused():
    errors = []
    for d_ff in (2, 8, 32):
        ffn, x = ffn_curve_fit.fitted_ffn(d_ff, "gelu", "sin(2x)")
        with torch.no_grad():
            y = ffn(torch.as_tensor(x, dtype=torch.float32).view(-1, 1)).view(-1)
        errors.append(np.abs(y.numpy() - np.sin(2 * x)).max())
    assert errors[0] > errors[1] > errors[2] and errors[2] < 0.15
    with pytest.raises(ValueError, match="target must be one of"):
        ffn_curve_fit.fitted_ffn(4, "relu", "cos")


# -- chapter 7: the depth experiment
def _layer_norm(x):
    return F.layer_norm(x, x.shape[-1:], eps=1e-5)


STEP = {  # each wiring written with PyTorch's own layer_norm
    "plain": lambda x, f: f(x),
    "LN only": lambda x, f: _layer_norm(f(x)),
    "residual": lambda x, f: x + f(x),
    "Post-LN": lambda x, f: _layer_norm(x + f(x)),
    "Pre-LN": lambda x, f: x + f(_layer_norm(x)),
}


@pytest.mark.parametrize("variant", list(sublayer_stack.VARIANTS))
def test_sublayer_stack_wirings_match_their_formulas(variant):
    torch.manual_seed(0)
    model = sublayer_stack.SublayerStack(8, 5, variant).double()
    x = torch.randn(3, 8, dtype=torch.float64)
    trace, expected = [], x
    for i, f in enumerate(model.sublayers):
        expected = STEP[variant](expected, f)
        assert_close(model.step(x if i == 0 else trace[-1], i), expected)
        trace.append(expected)
    final = _layer_norm(expected) if variant == "Pre-LN" else expected
    got_trace = []
    assert_close(model(x, got_trace), model.readout(final))
    assert len(got_trace) == 5
    for got, want in zip(got_trace, trace, strict=True):
        assert_close(got, want)
    # skip: the stream passes sublayer 2 unchanged
    skipped = x
    for i, f in enumerate(model.sublayers):
        skipped = skipped if i == 2 else STEP[variant](skipped, f)
    final = _layer_norm(skipped) if variant == "Pre-LN" else skipped
    assert_close(model(x, skip=2), model.readout(final))


def test_the_transformer_wirings_are_the_library_residual_block():
    for variant in ("Post-LN", "Pre-LN", "residual"):
        block = sublayer_stack.wiring(variant, 8)
        assert isinstance(block, tl.Residual), variant
    assert sublayer_stack.wiring("Pre-LN", 8).norm_first
    with pytest.raises(ValueError, match="variant must be one of"):
        sublayer_stack.SublayerStack(8, 2, "Post-LN twice")


def test_teacher_task_and_mean_similarity():
    x, y = sublayer_stack.teacher_task(16, seed=3)
    x2, y2 = sublayer_stack.teacher_task(32, seed=3)
    assert x.shape == y.shape == (16, sublayer_stack.D_MODEL)
    assert torch.equal(x, x2[:16]) and torch.equal(y, y2[:16])  # one fixed teacher
    assert torch.all(y.abs() < 2 * 2 * math.sqrt(2 * sublayer_stack.D_MODEL))
    h = torch.randn(7, 5, generator=torch.Generator().manual_seed(0))
    pairs = [F.cosine_similarity(h[i], h[j], dim=0) for i in range(7) for j in range(7)]
    off_diagonal = [p for k, p in enumerate(pairs) if k // 7 != k % 7]
    assert sublayer_stack.mean_similarity(h) == pytest.approx(
        torch.stack(off_diagonal).mean().item(), abs=1e-6
    )
    assert sublayer_stack.mean_similarity(torch.ones(4, 3)) == pytest.approx(1.0)
    assert sublayer_stack.mean_similarity(torch.eye(4)) == pytest.approx(0.0)


def test_depth_profiles_show_what_chapter_7_says():
    profiles = sublayer_stack.depth_profiles()
    assert set(profiles) == {
        (L, v) for L in sublayer_stack.DEPTHS for v in sublayer_stack.VARIANTS
    }
    plain, pre = profiles[(16, "plain")], profiles[(16, "Pre-LN")]
    assert len(plain["grad"]) == 16 and len(plain["act"]) == len(plain["sim"]) == 17
    assert plain["grad"][0] < 1e-6 * plain["grad"][-1]  # vanishing without a residual
    assert pre["grad"].max() / pre["grad"].min() < 2
    assert plain["sim"][-1] > 0.99 and abs(plain["sim"][0]) < 0.2


# -- chapter 9: the encoder example
def test_example_is_seeded_and_leaves_the_global_rng_alone():
    state = torch.get_rng_state()
    a, b = encoder_example.example(), encoder_example.example()
    assert torch.equal(torch.get_rng_state(), state)
    assert a.tokens == encoder_example.TOKENS and a.ids.shape == (1, 6)
    assert a.vocab == ["the", "cat", "sat", "on", "mat"]
    assert a.ids[0, 0] == a.ids[0, 4]  # "the" twice, one id
    assert torch.equal(a.embedding.weight, b.embedding.weight)
    assert not a.layer.training and not a.layer.norm_first


@pytest.mark.parametrize("norm_first", [False, True])
def test_with_placement_matches_torch_encoder_layer(norm_first):
    torch.manual_seed(0)
    ref = nn.TransformerEncoderLayer(
        16, 4, 64, dropout=0.0, batch_first=True, norm_first=False
    ).double()
    ref.eval()
    ours = tl.EncoderLayer.from_torch(ref)
    moved = encoder_example.with_placement(ours, norm_first)
    ref.norm_first = norm_first  # the same weights, the other placement
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    assert_close(moved(x), ref(x))
    assert moved.norm_first is norm_first and not moved.training


# -- chapter 10: the toy translator
def test_make_batch_shifts_the_target_and_masks_the_padding():
    batch = translation.make_batch()
    bos = translation.TGT_VOCAB.index(translation.BOS)
    eos = translation.TGT_VOCAB.index(translation.EOS)
    assert batch.src.shape == (2, 6) and batch.tgt_in.shape == (2, 7)
    assert batch.src_lengths == [6, 3] and batch.tgt_lengths == [7, 4]
    for b, n in enumerate(batch.tgt_lengths):
        assert batch.tgt_in[b, 0] == bos and batch.tgt_out[b, n - 1] == eos
        assert torch.equal(batch.tgt_in[b, 1:n], batch.tgt_out[b, : n - 1])
        assert torch.all(batch.tgt_out[b, n:] == 0) and torch.all(
            batch.tgt_in[b, n:] == 0
        )
    assert batch.src_mask[:, 0, 0].sum(-1).tolist() == batch.src_lengths
    assert " ".join(batch.src_tokens(1)[:3]) == translation.SENTENCES[1]


def test_toy_translator_is_torch_encoder_and_decoder_layers():
    torch.manual_seed(0)
    toy = translation.build_toy().double().eval()
    enc = nn.TransformerEncoderLayer(16, 4, 64, 0.0, batch_first=True).double().eval()
    dec = nn.TransformerDecoderLayer(16, 4, 64, 0.0, batch_first=True).double().eval()
    toy.encoder = tl.EncoderLayer.from_torch(enc)
    toy.decoder = tl.DecoderLayer.from_torch(dec)
    batch = translation.make_batch()
    T_src, T_tgt = batch.src.size(1), batch.tgt_in.size(1)
    pe = tl.sinusoidal_positional_encoding(16, 16, dtype=torch.float64)
    pad = ~batch.src_mask[:, 0, 0]  # PyTorch: True = ignore
    memory = enc(toy.src_emb(batch.src) + pe[:T_src], src_key_padding_mask=pad)
    z = dec(
        toy.tgt_emb(batch.tgt_in) + pe[:T_tgt],
        memory,
        tgt_mask=nn.Transformer.generate_square_subsequent_mask(T_tgt).double(),
        memory_key_padding_mask=pad,
    )
    real = ~pad
    got = toy(batch.src, batch.tgt_in, batch.src_mask)
    assert_close(toy.encode(batch.src, batch.src_mask)[real], memory[real])
    assert_close(got, toy.out(z))


def test_train_toy_learns_both_translations():
    state = torch.get_rng_state()
    toy, batch, probs = translation.trained_toy()
    untrained = translation.build_toy()
    assert torch.equal(torch.get_rng_state(), state)
    assert sorted(probs) == translation.SNAPSHOTS
    with torch.no_grad():
        logits = untrained(batch.src, batch.tgt_in, batch.src_mask)
    assert_close(probs[0], logits.softmax(-1))  # snapshot 0: before any update
    real = batch.tgt_out != 0
    p_correct = probs[60].gather(-1, batch.tgt_out[..., None])[..., 0][real]
    assert p_correct.min() > 0.9 and not toy.training
    losses, _ = translation.train_toy(untrained.train(), batch, steps=3)
    first = F.cross_entropy(
        logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=0
    )
    assert losses[0] == pytest.approx(first.item(), rel=1e-6)
    w_self, w_cross = translation.attention_weights(toy, batch)
    assert w_self.shape == (2, 4, 7, 7) and w_cross.shape == (2, 4, 7, 6)
    assert torch.all(w_self.triu(1) == 0) and torch.all(w_cross[1, ..., 3:] == 0)
