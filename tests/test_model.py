"""The encoder-decoder Transformer, greedy decoding with and without the KV cache,
end of sequence, and the reversal task (chapters 11 and 12)."""

from __future__ import annotations

import inspect

import pytest
import torch
import torch.nn as nn
from torch.testing import assert_close

import transformer_lib as tl
from transformer_lib.demos import kv_cache_bench, reversal


def small_config(**kw) -> tl.TransformerConfig:
    base = dict(vocab_size=23, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=40)
    base.update(kw)
    return tl.TransformerConfig(**base)


def random_model(**kw) -> tl.Transformer:
    return tl.Transformer(small_config(**kw)).eval()


# -- configuration and shapes ----------------------------------------------------------


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        (dict(d_model=30), "not divisible by n_heads"),
        (dict(n_kv_heads=3), "n_kv_heads=3"),
        (dict(bos_id=23), "bos_id=23"),
        (dict(bos_id=0, pad_id=0), "must differ"),
        (dict(activation="tanh"), "activation"),
        (dict(dropout=1.0), "dropout"),
        (dict(max_len=0), "max_len"),
    ],
)
def test_config_rejects_bad_values(kw, words):
    with pytest.raises(ValueError, match=words):
        small_config(**kw)


def test_config_derived_sizes():
    cfg = small_config(n_kv_heads=2)
    assert (cfg.d_k, cfg.n_kv_heads) == (8, 2)
    assert small_config().n_kv_heads == 4  # None means n_heads, written in
    # no old names beside the book's
    assert not hasattr(cfg, "d_head") and not hasattr(cfg, "kv_heads")


def test_embedding_is_scaled_and_positioned():
    """X_0 = sqrt(d_model) E[x] + PE   (eq. embedding-scale)."""
    model = random_model()
    tokens = torch.tensor([[3, 5, 7]])
    want = model.embed.weight[tokens] * 32**0.5 + tl.sinusoidal_positional_encoding(
        3, 32
    )
    assert_close(model.embed_tokens(tokens), want)
    assert_close(model.embed_tokens(tokens[:, 1:], start=1), want[:, 1:])


@pytest.mark.parametrize("norm_first", [False, True])
def test_forward_shapes_and_attention_maps(norm_first):
    model = random_model(norm_first=norm_first)
    src, tgt = torch.randint(2, 23, (3, 7)), torch.randint(2, 23, (3, 5))
    logits, attn = model(src, tgt, need_weights=True)
    assert logits.shape == (3, 5, 23)
    assert_close(model(src, tgt), logits)
    assert set(attn) == {"encoder", "decoder_self", "cross"}
    shapes = {
        "encoder": (3, 4, 7, 7),
        "decoder_self": (3, 4, 5, 5),
        "cross": (3, 4, 5, 7),
    }
    for stack, maps in attn.items():
        assert len(maps) == 2
        for w in maps:
            assert w.shape == shapes[stack]
            assert_close(w.sum(-1), torch.ones(shapes[stack][:-1]))
    upper = ~tl.causal_mask(5)
    assert all(
        (w[..., upper] == 0).all() for w in attn["decoder_self"]
    )  # no peeking at the future


@pytest.mark.filterwarnings(
    "ignore:enable_nested_tensor is True"
)  # nn.Transformer's own note on Pre-LN
@pytest.mark.parametrize("norm_first", [False, True])
def test_matches_torch_nn_transformer(norm_first):
    """Our stacks equal nn.Transformer's with the same weights (embedding and W_out are
    ours on both sides)."""
    tt = nn.Transformer(
        d_model=32,
        nhead=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dim_feedforward=64,
        dropout=0.0,
        batch_first=True,
        norm_first=norm_first,
    ).eval()
    if norm_first:  # give the final LayerNorms non-trivial parameters
        for norm in (tt.encoder.norm, tt.decoder.norm):
            nn.init.normal_(norm.weight)
            nn.init.normal_(norm.bias)
    else:
        tt.encoder.norm = tt.decoder.norm = (
            None  # nn.Transformer adds them even to Post-LN stacks
        )
    model = random_model(norm_first=norm_first).load_torch_layers(tt)
    src, tgt = torch.randint(2, 23, (2, 9)), torch.randint(2, 23, (2, 6))
    src_mask = tl.padding_mask([9, 6], 9)  # the second source is padded
    theirs = model.out_proj(
        tt(
            model.embed_tokens(src),
            model.embed_tokens(tgt),
            tgt_mask=nn.Transformer.generate_square_subsequent_mask(6),
            src_key_padding_mask=~src_mask[:, 0, 0],
            memory_key_padding_mask=~src_mask[:, 0, 0],
        )
    )
    assert_close(model(src, tgt, src_mask=src_mask), theirs, atol=1e-5, rtol=1e-4)


def test_load_torch_layers_refuses_post_ln_with_final_norms():
    tt = nn.Transformer(
        d_model=32,
        nhead=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dim_feedforward=64,
        batch_first=True,
    )
    with pytest.raises(ValueError, match="final LayerNorms"):
        random_model().load_torch_layers(tt)


# -- greedy decoding: cached == uncached -----------------------------------------------


@pytest.mark.parametrize("n_kv_heads", [None, 2, 1], ids=["mha", "gqa", "mqa"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-ln", "pre-ln"])
def test_cached_and_uncached_decoding_agree(n_kv_heads, norm_first):
    model = random_model(n_kv_heads=n_kv_heads, norm_first=norm_first)
    src = torch.randint(2, 23, (3, 11))
    src_mask = tl.padding_mask([11, 8, 5], 11)
    for mask in (None, src_mask):
        tok_c, log_c = model.generate(
            src, 30, use_cache=True, src_mask=mask, return_logits=True
        )
        tok_u, log_u = model.generate(
            src, 30, use_cache=False, src_mask=mask, return_logits=True
        )
        assert tok_c.shape == (3, 30)
        assert torch.equal(tok_c, tok_u)
        assert_close(log_c, log_u, atol=1e-5, rtol=0)


def test_greedy_logits_are_teacher_forced_logits():
    """Feeding BOS + the generated tokens back in one forward pass reproduces every
    step's logits."""
    model = random_model()
    src = torch.randint(2, 23, (2, 6))
    tokens, logits = model.generate(src, 8, return_logits=True)
    bos = torch.full((2, 1), model.cfg.bos_id)
    assert_close(
        model(src, torch.cat([bos, tokens[:, :-1]], 1)), logits, atol=1e-5, rtol=0
    )
    assert torch.equal(logits.argmax(-1), tokens)  # greedy (eq. greedy)


def test_generate_steps_yields_what_generate_returns():
    model = random_model()
    src = torch.randint(2, 23, (2, 6))
    steps = list(model.generate_steps(src, 5))
    assert torch.equal(torch.stack([t for t, _ in steps], 1), model.generate(src, 5))


def test_time_decoding_times_every_step():
    model = random_model()
    times = tl.time_decoding(model, torch.randint(2, 23, (2, 6)), 5, use_cache=True)
    assert set(times) == {"wall", "cpu"}
    assert len(times["wall"]) == len(times["cpu"]) == 5
    assert all(t >= 0 for ts in times.values() for t in ts)


def test_prefill_several_tokens_at_once():
    """decode_step with T_new > 1 (a causal triangle over the new tokens) equals the
    full decoder."""
    model = random_model(n_kv_heads=2)
    src, tgt = torch.randint(2, 23, (2, 7)), torch.randint(2, 23, (2, 9))
    memory = model.encode(src)
    full = model(src, tgt)
    for capacity in (None, 9):
        cache = model.init_cache(memory, capacity=capacity)
        parts = [
            model.decode_step(tgt[:, :4], cache),
            model.decode_step(tgt[:, 4:5], cache),
            model.decode_step(tgt[:, 5:], cache),
        ]
        assert cache.length == 9
        assert_close(torch.cat(parts, 1), full, atol=1e-5, rtol=0)


def test_preallocated_and_concatenated_caches_agree():
    model = random_model()
    memory = model.encode(torch.randint(2, 23, (2, 5)))
    caches = [
        model.init_cache(memory, capacity=None),
        model.init_cache(memory, capacity=6),
    ]
    tok = torch.full((2, 1), model.cfg.bos_id)
    for _ in range(6):
        out = [model.decode_step(tok, c) for c in caches]
        assert_close(out[0], out[1])
        tok = out[0][:, -1:].argmax(-1)
    for layer in range(2):
        for a, b in zip(*(c.self_kv(layer) for c in caches), strict=True):
            assert_close(a, b)


def test_kv_cache_matches_cached_attention_step():
    """KVCache.append followed by attention over the cache is tl.cached_attention_step
    (eq. kv-append, kv-step)."""
    B, h, h_kv, d = 2, 4, 2, 8
    cache = tl.KVCache(1, B, h_kv, d, capacity=5)
    ck = cv = torch.zeros(B, h_kv, 0, d)
    for _ in range(5):
        q, k, v = (
            torch.randn(B, h, 1, d),
            torch.randn(B, h_kv, 1, d),
            torch.randn(B, h_kv, 1, d),
        )
        want, ck, cv = tl.cached_attention_step(q, k, v, ck, cv)
        K, V = cache.append(0, k, v)
        got, _ = tl.scaled_dot_product_attention(
            q, tl.repeat_kv(K, h // h_kv), tl.repeat_kv(V, h // h_kv)
        )
        assert_close(K, ck)
        assert_close(V, cv)
        assert_close(got, want)


def test_past_hidden_states_do_not_change_when_a_token_is_appended():
    """Why caching is exact: with the causal mask, position i never sees j > i, so its
    K/V stay put."""
    model = random_model()
    src, tgt = torch.randint(2, 23, (2, 6)), torch.randint(2, 23, (2, 7))
    memory = model.encode(src)
    assert_close(
        model.decode(tgt, memory)[:, :6],
        model.decode(tgt[:, :6], memory),
        atol=1e-6,
        rtol=0,
    )


# -- memory ----------------------------------------------------------------------------


@pytest.mark.parametrize("n_kv_heads", [None, 2, 1], ids=["mha", "gqa", "mqa"])
@pytest.mark.parametrize("capacity", [None, 12], ids=["cat", "prealloc"])
def test_cache_nbytes_match_the_formula(n_kv_heads, capacity):
    """Each cache tensor's nbytes = B h_kv T d_k s; all of them 2 L B h_kv (T + T_src)
    d_k s   (eq. kv-memory-total)."""
    model = random_model(n_kv_heads=n_kv_heads)
    cfg, B, T_src, T = model.cfg, 3, 9, 12
    cache = model.init_cache(
        model.encode(torch.randint(2, 23, (B, T_src))), capacity=capacity
    )
    tok = torch.full((B, 1), cfg.bos_id)
    with torch.no_grad():
        for _ in range(T):
            tok = model.decode_step(tok, cache)[:, -1:].argmax(-1)
    h_kv = cfg.n_kv_heads
    for layer in range(cfg.n_layers):
        for t in cache.self_kv(layer):
            assert t.shape == (B, h_kv, T, cfg.d_k)
            assert t.nbytes == B * h_kv * T * cfg.d_k * 4
        for t in (cache.cross_k[layer], cache.cross_v[layer]):
            assert t.shape == (B, h_kv, T_src, cfg.d_k)
            assert t.nbytes == B * h_kv * T_src * cfg.d_k * 4
    assert cache.nbytes() == tl.kv_cache_nbytes(
        cfg.n_layers, B, h_kv, T + T_src, cfg.d_k
    )
    assert cache.nbytes() == sum(t.nbytes for t in cache.tensors())
    assert (
        cache.allocated_nbytes() == cache.nbytes()
    )  # a full preallocated buffer holds nothing more
    per_layer_mha = model.decoder_layers[0].self_attn.kv_cache_nbytes(B, T)
    assert tl.kv_cache_nbytes(1, B, h_kv, T, cfg.d_k) == per_layer_mha


def test_gqa_cache_is_smaller_by_the_group_size():
    sizes = {
        kv: tl.kv_cache_nbytes(6, 4, kv, 100, 64, torch.float16) for kv in (8, 2, 1)
    }
    assert sizes[8] == 2 * 6 * 4 * 8 * 100 * 64 * 2
    assert sizes[8] // sizes[2] == 4 and sizes[8] // sizes[1] == 8


def test_unfilled_preallocation_is_counted_apart():
    cache = tl.KVCache(2, 1, 2, 4, capacity=10)
    cache.append(0, torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4))
    cache.append(1, torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4))
    assert cache.length == 3
    assert cache.nbytes() == tl.kv_cache_nbytes(2, 1, 2, 3, 4)
    assert cache.allocated_nbytes() == tl.kv_cache_nbytes(2, 1, 2, 10, 4)


# -- errors ----------------------------------------------------------------------------


def test_max_len_errors_name_the_numbers():
    model = random_model()  # max_len = 40
    src = torch.randint(2, 23, (1, 5))
    with pytest.raises(
        ValueError, match=r"41 new tokens \(BOS.*needs 41 positions.*max_len=40"
    ):
        model.generate(src, 41)
    with pytest.raises(ValueError, match=r"41 positions.*max_len=40"):
        model.generate(torch.randint(2, 23, (1, 41)), 3)
    with pytest.raises(ValueError, match=r"needs 41 positions, more than max_len=40"):
        model(torch.randint(2, 23, (1, 41)), torch.randint(2, 23, (1, 3)))
    with pytest.raises(ValueError, match=r"capacity=2"):
        cache = model.init_cache(model.encode(src), capacity=2)
        for _ in range(3):
            model.decode_step(torch.ones(1, 1, dtype=torch.long), cache)
    assert model.generate(src, 40).shape == (1, 40)  # exactly max_len is fine


def test_generate_zero_tokens():
    tokens, logits = random_model().generate(
        torch.randint(2, 23, (2, 4)), 0, return_logits=True
    )
    assert tokens.shape == (2, 0) and logits.shape == (2, 0, 23)


# -- end of sequence -------------------------------------------------------------------


def eos_case():
    """A random model, a batch, its greedy output without eos, and a token that ends
    two rows at different steps and never appears in another row."""
    torch.manual_seed(0)
    model = random_model()
    src = torch.randint(2, 23, (4, 6), generator=torch.Generator().manual_seed(5))
    free = model.generate(src, 12)  # (4, 12)
    for eos in range(23):
        hit = free[:, :-1] == eos  # an eos with something after it
        first = {int(r.nonzero()[0]) for r in hit if r.any()}
        if len(first) >= 2 and not (free == eos).any(dim=1).all():
            return model, src, free, eos
    raise AssertionError(f"no token ends rows at different steps in\n{free}")


def after_first(tokens: torch.Tensor, eos: int) -> torch.Tensor:
    """(B, T) bool: True at the positions after each row's first eos."""
    seen = (tokens == eos).long().cumsum(1)  # eos tokens so far, inclusive
    return (seen - (tokens == eos).long()) > 0


@pytest.mark.parametrize("use_cache", [True, False], ids=["cached", "uncached"])
def test_each_row_stops_at_its_own_eos(use_cache):
    model, src, free, eos = eos_case()
    _, free_logits = model.generate(src, 12, use_cache=use_cache, return_logits=True)
    tokens, logits = model.generate(
        src, 12, use_cache=use_cache, return_logits=True, eos_id=eos
    )
    after = after_first(free, eos)  # (4, 12)
    assert after.any(dim=1).sum() >= 2  # rows end at different steps ...
    assert not (free == eos).any(dim=1).all()  # ... and one row never ends
    # the eos token is kept, everything after it is padding, other rows are unchanged
    assert torch.equal(tokens, free.masked_fill(after, model.cfg.pad_id))
    assert torch.equal(logits[~after], free_logits[~after])
    assert (logits[after] == 0).all()


def test_decoding_stops_once_every_row_has_ended():
    """All rows ended: the steps stop, and the result is the same as decoding on."""
    model, src, free, _ = eos_case()
    eos = int(free[0, 3])  # row 0 ends at step 4 at the latest
    one = src[:1]
    steps = list(model.generate_steps(one, 12, eos_id=eos))
    first = int((free[0] == eos).nonzero()[0])
    assert len(steps) == first + 1 < 12
    for use_cache in (True, False):
        tokens, logits = model.generate(
            one, 12, use_cache=use_cache, return_logits=True, eos_id=eos
        )
        assert tokens.shape == (1, 12) and logits.shape == (1, 12, 23)
        assert tokens[0, first] == eos
        assert (tokens[0, first + 1 :] == model.cfg.pad_id).all()
        assert torch.equal(tokens[0, : first + 1], free[0, : first + 1])
        assert (logits[0, first + 1 :] == 0).all()


@pytest.mark.parametrize(
    "options",
    [dict(), dict(temperature=0.7, top_k=5), dict(top_p=0.9), dict(temperature=1.5)],
    ids=["plain", "top-k", "top-p", "hot"],
)
def test_encoder_decoder_sampling_equals_torch_multinomial(options):
    """Sampled decoding: cached and uncached draw the same tokens from one seed, and
    both equal torch.multinomial on next_token_probs of the teacher-forced logits
    (eq. sampling-probs)."""
    torch.manual_seed(1)
    model = random_model(n_kv_heads=2)
    src = torch.randint(2, 23, (3, 6), generator=torch.Generator().manual_seed(2))
    src_mask = tl.padding_mask([6, 4, 5], 6)

    def draw(use_cache: bool):
        g = torch.Generator().manual_seed(7)
        return model.generate(
            src,
            10,
            use_cache=use_cache,
            src_mask=src_mask,
            do_sample=True,
            generator=g,
            return_logits=True,
            **options,
        )

    (cached, logits_c), (uncached, logits_u) = draw(True), draw(False)
    assert torch.equal(cached, uncached)
    assert_close(logits_c, logits_u, atol=1e-5, rtol=0)
    # the reference: the whole prefix through the model, PyTorch's sampler
    g = torch.Generator().manual_seed(7)
    tokens = torch.full((3, 1), model.cfg.bos_id)
    with torch.no_grad():
        for _ in range(10):
            logits = model(src, tokens, src_mask)[:, -1]  # (B, V)
            probs = tl.next_token_probs(logits, **options)
            nxt = torch.multinomial(probs, 1, generator=g)  # (B, 1)
            tokens = torch.cat([tokens, nxt], dim=1)
    assert torch.equal(cached, tokens[:, 1:])
    greedy = model.generate(src, 10, src_mask=src_mask)
    assert not torch.equal(cached, greedy)  # it did sample


def test_top_k_1_sampling_is_greedy_and_bad_options_name_the_value():
    model = random_model()
    src = torch.randint(2, 23, (2, 5))
    g = torch.Generator().manual_seed(0)
    sampled = model.generate(src, 8, do_sample=True, top_k=1, generator=g)
    assert torch.equal(sampled, model.generate(src, 8))
    with pytest.raises(ValueError, match="top_p must lie in"):
        model.generate(src, 3, do_sample=True, top_p=1.5)


def test_both_model_families_generate_with_the_same_keywords():
    keywords = {
        "max_new_tokens",
        "eos_id",
        "pad_id",
        "use_cache",
        "do_sample",
        "temperature",
        "top_k",
        "top_p",
        "generator",
        "return_logits",
    }
    for cls in (tl.Transformer, tl.GPT):
        params = inspect.signature(cls.generate).parameters
        assert keywords <= set(params), cls
    assert tl.Transformer.generate is tl.GPT.generate  # one implementation


def test_eos_id_must_be_a_token():
    with pytest.raises(ValueError, match=r"eos_id=23 .*vocab_size=23"):
        random_model().generate(torch.randint(2, 23, (1, 4)), 3, eos_id=23)


# -- multiply-add counts --------------------------------------------------------------


def test_decode_step_macs_by_hand():
    """d = 4, d_ff = 8, h = h_kv = 2, 1 layer, vocab 5, T_src = 3 (eq. decode-macs)."""
    cfg = tl.TransformerConfig(
        vocab_size=5, d_model=4, n_heads=2, n_layers=1, d_ff=8, max_len=8
    )
    # cached, t = 2: projections 4*16 + attention 2*2*4 + cross 2*16 + 2*3*4 + FFN 2*4*8
    # + W_out 4*5
    assert tl.decode_step_macs(cfg, 2, 3, use_cache=True) == 64 + 16 + 32 + 24 + 64 + 20
    # uncached, t = 2: two rows everywhere, 2 x 2 scores, and the memory's K, V again
    # (2*3*4*4)
    assert (
        tl.decode_step_macs(cfg, 2, 3, use_cache=False)
        == 2 * 64 + 2 * 16 + 2 * 32 + 2 * 24 + 96 + 2 * 64 + 20
    )
    assert tl.decode_step_macs(cfg, 1, 3, True) + 96 == tl.decode_step_macs(
        cfg, 1, 3, False
    )  # one row: only the memory's K/V differ
    # the totals add the encoder on both paths, and the memory's K/V once with the cache
    enc = 3 * 64 + 2 * 9 * 4 + 3 * 64
    assert tl.generate_macs(cfg, 3, 2, True) == enc + 96 + sum(
        tl.decode_step_macs(cfg, t, 3, True) for t in (1, 2)
    )


def test_uncached_cost_grows_faster():
    cfg = small_config()
    c = [tl.decode_step_macs(cfg, t, 8, True) for t in (10, 20, 40)]
    u = [tl.decode_step_macs(cfg, t, 8, False) for t in (10, 20, 40)]
    assert c[2] - c[1] == 2 * (c[1] - c[0])  # cached: linear in t
    assert u[2] - u[1] > 2 * (u[1] - u[0])  # uncached: a t^2 term


# -- the reversal task -----------------------------------------------------------------


def test_reversal_batch():
    g = torch.Generator().manual_seed(1)
    src, tgt_in, tgt_out = reversal.reversal_batch(50, 9, g)
    assert src.shape == tgt_in.shape == tgt_out.shape == (50, 9)
    assert torch.equal(tgt_out, src.flip(1))
    assert (tgt_in[:, 0] == reversal.BOS_ID).all() and torch.equal(
        tgt_in[:, 1:], tgt_out[:, :-1]
    )
    assert src.min() >= reversal.FIRST_SYMBOL and src.max() < 12  # never pad or BOS
    assert torch.equal(
        reversal.reversal_batch(50, 9, torch.Generator().manual_seed(1))[0], src
    )  # seeded


def test_train_and_test_splits_are_disjoint():
    g = torch.Generator().manual_seed(2)
    train = reversal.reversal_batch(500, 4, g, vocab_size=5, split="train")[0]
    test = reversal.reversal_batch(500, 4, g, vocab_size=5, split="test")[0]
    assert (
        not reversal.is_test_sequence(train).any()
        and reversal.is_test_sequence(test).all()
    )
    assert not {tuple(r) for r in train.tolist()} & {tuple(r) for r in test.tolist()}
    share = (
        reversal.is_test_sequence(reversal.reversal_batch(4000, 8, g)[0])
        .float()
        .mean()
        .item()
    )
    assert 0.10 < share < 0.16  # about one sequence in eight is held out


def test_token_labels():
    assert reversal.token_labels(torch.tensor([0, 1, 2, 3, 11])) == [
        "<pad>",
        "<bos>",
        "a",
        "b",
        "j",
    ]


@pytest.fixture(scope="module")
def trained():
    """One run of train_reversal with the default seed, shared by the tests below."""
    rng_before, threads_before = torch.get_rng_state(), torch.get_num_threads()
    model, history = reversal.train_reversal()
    assert torch.equal(torch.get_rng_state(), rng_before), (
        "train_reversal changed the global RNG state"
    )
    assert torch.get_num_threads() == threads_before
    return model, history


@pytest.mark.slow  # a training run (about 15 s): not in make test-fast
def test_train_reversal_reverses_unseen_sequences(trained):
    model, history = trained
    assert len(history["loss"]) == len(history["accuracy"]) == len(history["lr"]) == 300
    assert history["loss"][-1] < 0.1 * history["loss"][0]
    assert (
        history["cpu_seconds"] < 60
    )  # CPU time: other jobs on a shared machine do not inflate it
    assert history["test_accuracy"] >= 0.99
    src = reversal.reversal_batch(
        500, 8, torch.Generator().manual_seed(123), split="test"
    )[0]  # never trained on
    pred = model.generate(src, src.size(1))
    assert (pred == src.flip(1)).float().mean().item() >= 0.99


@pytest.mark.slow  # a training run (about 15 s): not in make test-fast
def test_a_cross_attention_head_reads_the_mirrored_position(trained):
    """In at least one cross-attention head, >= 90% of output positions attend most to
    input T - 1 - i."""
    model, _ = trained
    src, tgt_in, _ = reversal.reversal_batch(
        200, 8, torch.Generator().manual_seed(7), split="test"
    )
    _, attn = model(src, tgt_in, need_weights=True)
    fractions = torch.stack(
        [reversal.antidiagonal_fraction(w) for w in attn["cross"]]
    )  # (layers, heads)
    assert fractions.shape == (2, 4)
    assert fractions.max().item() >= 0.9, fractions


def test_antidiagonal_fraction_of_a_perfect_mirror():
    T = 5
    mirror = torch.eye(T).flip(1).expand(2, 3, T, T)
    assert torch.equal(reversal.antidiagonal_fraction(mirror), torch.ones(3))
    assert torch.equal(
        reversal.antidiagonal_fraction(torch.eye(T).expand(1, 1, T, T)),
        torch.tensor([1 / T]),
    )  # centre only


def test_the_root_namespace_is_the_core_only():
    """Demo code, checkers and figures are imported explicitly, never through tl."""
    for name in ("demos", "tasks", "viz", "exercises"):
        assert name not in tl.__all__
    assert set(tl.__all__) <= set(dir(tl))


def test_random_reversal_model_is_seeded_and_leaves_the_rng_alone():
    before = torch.get_rng_state()
    a, b = reversal.random_model(seed=0), reversal.random_model(seed=0)
    assert torch.equal(torch.get_rng_state(), before)
    assert not a.training and a.cfg == reversal.reversal_config()
    torch.manual_seed(0)  # what chapters 11 and 12 wrote out
    want = tl.Transformer(reversal.reversal_config()).state_dict()
    for sd in (a.state_dict(), b.state_dict()):
        assert all(torch.equal(sd[k], want[k]) for k in want)
    c = reversal.random_model(seed=1)
    assert not torch.equal(c.out_proj.weight, a.out_proj.weight)


def test_benchmark_model_is_the_one_config_of_chapter_12():
    """benchmarks/kv_cache.py and chapter 12 time this model."""
    before = torch.get_rng_state()
    model = kv_cache_bench.bench_model(n_kv_heads=2)
    assert torch.equal(torch.get_rng_state(), before)
    cfg = model.cfg
    assert (cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.n_layers) == (128, 4, 2, 2)
    assert (cfg.d_ff, cfg.vocab_size, cfg.max_len) == (512, 1000, 512)
    assert kv_cache_bench.bench_config() == tl.TransformerConfig(
        **kv_cache_bench.BENCH_CONFIG
    )
    torch.manual_seed(0)
    want = tl.Transformer(kv_cache_bench.bench_config(n_kv_heads=2)).state_dict()
    got = model.state_dict()
    assert all(torch.equal(got[k], want[k]) for k in want)
